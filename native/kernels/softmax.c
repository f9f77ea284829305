/*
 * softmax.c - Softmax on float32: opsets 1-12 (the input coerced to 2-D at `axis`, default 1, so the
 * softmax runs over all of dims[axis:] at once) and opset 13 (one axis, default -1).
 *
 * Both become outer x len x inner: coerced is (prod dims[:axis]) x (prod dims[axis:]) x 1, single-axis is
 * (prod dims[:axis]) x dims[axis] x (prod dims[axis+1:]). Rows are shifted by their max before exp, so large
 * inputs do not overflow. With inner > 1 the reduction runs across whole inner rows at a time (contiguous,
 * vectorizable) using two scratch vectors instead of striding through memory per element.
 */
#include "math_common.h"
#include "cuda_coverage.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct softmax_state {
    bool coerce_2d;   /* opsets 1-12 */
    int64_t axis;
};


static void softmax_rows(const struct softmax_launch* L) {
    for (int64_t o = 0; o < L->outer; ++o) {
        const float* x = L->x + o * L->len;
        float* y = L->y + o * L->len;
        float m = -INFINITY;
        for (int64_t j = 0; j < L->len; ++j) m = x[j] > m ? x[j] : m;
        double s = 0.0;
        for (int64_t j = 0; j < L->len; ++j) {
            y[j] = expf(x[j] - m);
            s += y[j];
        }
        float inv = (float)(1.0 / s);
        for (int64_t j = 0; j < L->len; ++j) y[j] *= inv;
    }
}

static void softmax_strided(const struct softmax_launch* L) {
    int64_t in = L->inner;
    for (int64_t o = 0; o < L->outer; ++o) {
        const float* x = L->x + o * L->len * in;
        float* y = L->y + o * L->len * in;
        for (int64_t i = 0; i < in; ++i) {
            L->max[i] = -INFINITY;
            L->sum[i] = 0.0f;
        }
        for (int64_t j = 0; j < L->len; ++j)
            for (int64_t i = 0; i < in; ++i) L->max[i] = x[j * in + i] > L->max[i] ? x[j * in + i] : L->max[i];
        for (int64_t j = 0; j < L->len; ++j) {
            for (int64_t i = 0; i < in; ++i) {
                y[j * in + i] = expf(x[j * in + i] - L->max[i]);
                L->sum[i] += y[j * in + i];
            }
        }
        for (int64_t i = 0; i < in; ++i) L->sum[i] = 1.0f / L->sum[i];
        for (int64_t j = 0; j < L->len; ++j)
            for (int64_t i = 0; i < in; ++i) y[j * in + i] *= L->sum[i];
    }
}

static void softmax_launch_fn(const void* p) {
    const struct softmax_launch* L = p;
    if (L->inner == 1)
        softmax_rows(L);
    else
        softmax_strided(L);
}

static bool softmax_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in != 1 || node->n_out != 1) {
        snprintf(why, why_len, "Softmax: expected 1 input and 1 output, got %d and %d", node->n_in, node->n_out);
        return false;
    }
    if (node->in[0].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        snprintf(why, why_len, "Softmax: input has dtype %s; only float is implemented",
                 epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    int64_t axis = node->since_version >= 13 ? -1 : 1;
    epabi_attr_int(node, "axis", &axis);
    int a = 0;
    if (node->in[0].rank >= 0 && !epabi_norm_axis(axis, node->in[0].rank, &a)) {
        snprintf(why, why_len, "Softmax: axis=%lld is out of range for rank %d", (long long)axis, node->in[0].rank);
        return false;
    }
    return true;
}

static OrtStatus* softmax_init(const struct epabi_node* node, void** state) {
    struct softmax_state* s = calloc(1, sizeof *s);
    if (s == NULL) return epabi_error(node->api, ORT_FAIL, "Softmax: out of memory");
    s->coerce_2d = node->since_version < 13;
    s->axis = s->coerce_2d ? 1 : -1;
    epabi_attr_int(node, "axis", &s->axis);
    *state = s;
    return NULL;
}

static OrtStatus* softmax_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                              int n_in, int n_out) {
    (void)n_out;
    const struct softmax_state* s = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < 1) return epabi_error(api, ORT_INVALID_ARGUMENT, "Softmax: expected 1 input, got %d", n_in);
    const struct epabi_tensor* X = in[0];
    char sx[160];
    if (X->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Softmax: input has dtype %s; only float is implemented",
                           epabi_dtype_name(X->dtype));
    int axis = 0;
    if (!epabi_norm_axis(s->axis, X->rank, &axis))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Softmax: axis=%lld is out of range for input %s",
                           (long long)s->axis, epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    struct softmax_launch L;
    memset(&L, 0, sizeof L);
    L.outer = epabi_numel(axis, X->dims);
    if (s->coerce_2d) {
        L.len = epabi_numel(X->rank - axis, X->dims + axis);
        L.inner = 1;
    } else {
        L.len = X->dims[axis];
        L.inner = epabi_numel(X->rank - axis - 1, X->dims + axis + 1);
    }
    OrtStatus* st = NULL;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, X->rank, X->dims, &st);
    if (Y == NULL) return st;
    if (L.outer * L.len * L.inner == 0) return NULL;
    L.x = X->data;
    L.y = Y->data;
    if (L.inner > 1) {
        L.max = epabi_exec_scratch(ex, 2 * (size_t)L.inner * sizeof(float), &st);
        if (L.max == NULL) return st;
        L.sum = L.max + L.inner;
    }
    return epabi_exec_launch(ex, EPABI_LAUNCH_SOFTMAX, softmax_launch_fn, &L, sizeof L);
}

const struct epabi_kernel epabi_kernels_softmax[] = {
    {.op_type = "Softmax", .since_min = 1, .since_max = 12, .supports = softmax_supports, .init = softmax_init,
     .release = free, .run = softmax_run, .launch = EPABI_LAUNCH_SOFTMAX, .cuda = epabi_cuda_float32_math},
    {.op_type = "Softmax", .since_min = 13, .since_max = 13, .supports = softmax_supports, .init = softmax_init,
     .release = free, .run = softmax_run, .launch = EPABI_LAUNCH_SOFTMAX, .cuda = epabi_cuda_float32_math},
    {.op_type = NULL},
};
