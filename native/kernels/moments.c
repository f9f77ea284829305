/*
 * moments.c - the moments step (moments.h): shapes and axes through reduce.c's epabi_reduce_geometry, then one walk
 * over X accumulating the sums and the sums of squares the way reduce.c's launch accumulates a ReduceSum.
 */
#include "moments.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The host launch: reduce.c's REDUCE_SUM walk with a second accumulator for (float)(x * x). */
static void moments_launch_fn(const void* args) {
    const struct moments_launch* M = args;
    const struct reduce_launch* L = &M->r;
    if (L->copy) {
        for (int64_t i = 0; i < L->in_numel; ++i) {
            const float v = L->x[i];
            L->y[i] = v;
            M->sumsq[i] = v * v;
        }
        return;
    }
    double* acc = L->acc;
    double* acc2 = L->acc + L->out_numel;
    for (int64_t i = 0; i < 2 * L->out_numel; ++i) acc[i] = 0.0;
    const int last = L->rank - 1;
    const int64_t inner = L->dims[last];
    int64_t ostride[EPABI_MAX_RANK];
    int64_t s = 1;
    for (int d = last; d >= 0; --d) {
        ostride[d] = L->reduced[d] ? 0 : s;
        if (!L->reduced[d]) s *= L->dims[d];
    }
    const int64_t outer = L->in_numel == 0 ? 0 : L->in_numel / inner;
    int64_t idx[EPABI_MAX_RANK] = {0};
    int64_t o = 0;
    const bool row = L->reduced[last];   /* the innermost run combines into one output element */
    for (int64_t t = 0; t < outer; ++t) {
        const float* x = L->x + t * inner;
        if (row) {
            double a = 0.0, b = 0.0;
            for (int64_t j = 0; j < inner; ++j) {
                const float sq = x[j] * x[j];
                a += x[j];
                b += sq;
            }
            acc[o] += a;
            acc2[o] += b;
        } else {
            for (int64_t j = 0; j < inner; ++j) {
                const float sq = x[j] * x[j];
                acc[o + j] += x[j];
                acc2[o + j] += sq;
            }
        }
        for (int d = last - 1; d >= 0; --d) {
            if (++idx[d] < L->dims[d]) {
                o += ostride[d];
                break;
            }
            o -= ostride[d] * (L->dims[d] - 1);
            idx[d] = 0;
        }
    }
    for (int64_t i = 0; i < L->out_numel; ++i) {
        L->y[i] = (float)acc[i];
        M->sumsq[i] = (float)acc2[i];
    }
}

static OrtStatus* moments_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                              int n_in, int n_out) {
    const struct epabi_reduce_spec* s = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < 1 || n_out != 2)
        return epabi_error(api, ORT_EP_FAIL, "moments: expected the data input and two outputs, got %d and %d", n_in,
                           n_out);
    const struct epabi_tensor* X = in[0];
    if (X->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "ReduceSum: data has dtype %s; only float is implemented",
                           epabi_dtype_name(X->dtype));
    struct moments_launch M;
    memset(&M, 0, sizeof M);
    int64_t out_dims[EPABI_MAX_RANK];
    int out_rank = 0;
    const struct epabi_tensor* A = s->axes_input && n_in > 1 ? in[1] : NULL;
    OrtStatus* st = epabi_reduce_geometry(ex, s, X, A, &M.r, &out_rank, out_dims);
    if (st != NULL) return st;
    struct epabi_tensor* sum = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, out_rank, out_dims, &st);
    if (sum == NULL) return st;
    struct epabi_tensor* sumsq = epabi_exec_output(ex, 1, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, out_rank, out_dims, &st);
    if (sumsq == NULL) return st;
    if (M.r.copy ? M.r.in_numel == 0 : M.r.out_numel == 0) return NULL;
    M.r.x = X->data;
    M.r.y = sum->data;
    M.sumsq = sumsq->data;
    if (!M.r.copy) {
        M.r.acc = epabi_exec_scratch(ex, 2 * sizeof(double) * (size_t)M.r.out_numel, &st);
        if (M.r.acc == NULL) return st;
    }
    return epabi_exec_launch(ex, EPABI_LAUNCH_MOMENTS, moments_launch_fn, &M, sizeof M);
}

static bool moments_supports(const struct epabi_node* node, char* why, size_t why_len) {
    (void)node;
    snprintf(why, why_len, "the moments step is built by the plan, not claimed");
    return false;
}

const struct epabi_kernel epabi_kernel_moments = {
    .op_type = "Moments", .since_min = 0, .since_max = -1, .supports = moments_supports, .run = moments_run,
    .release = free, .launch = EPABI_LAUNCH_MOMENTS, .host_inputs = 1u << 1,
};
