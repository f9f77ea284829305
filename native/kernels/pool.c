/*
 * pool.c - GlobalMaxPool (opsets 1-22) on float32: the max over all spatial positions of each (N, C) plane.
 *
 * Opsets 1 and 22 differ only in the dtypes they list. A NaN in a plane makes that plane's result NaN (the
 * numpy/onnx reference behaviour), and an input with no spatial positions is a run-time error rather than
 * an invented value.
 */
#include "math_common.h"
#include "cuda_coverage.h"

#include <string.h>


static void gmaxpool_launch_fn(const void* p) {
    const struct gmaxpool_launch* L = p;
    for (int64_t i = 0; i < L->planes; ++i) {
        const float* x = L->x + i * L->size;
        float m = x[0];
        for (int64_t j = 1; j < L->size; ++j)
            if (x[j] > m || x[j] != x[j]) m = x[j];   /* the second test makes a NaN stick */
        L->y[i] = m;
    }
}

static bool gmaxpool_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in != 1 || node->n_out != 1) {
        snprintf(why, why_len, "GlobalMaxPool: expected 1 input and 1 output, got %d and %d", node->n_in, node->n_out);
        return false;
    }
    if (node->in[0].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        snprintf(why, why_len, "GlobalMaxPool: X has dtype %s; only float is implemented",
                 epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    if (node->in[0].rank >= 0 && node->in[0].rank < 3) {
        snprintf(why, why_len, "GlobalMaxPool: X has rank %d; it needs N, C and at least one spatial axis",
                 node->in[0].rank);
        return false;
    }
    return true;
}

static OrtStatus* gmaxpool_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                               int n_in, int n_out) {
    (void)state;
    (void)n_out;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < 1) return epabi_error(api, ORT_INVALID_ARGUMENT, "GlobalMaxPool: expected 1 input, got %d", n_in);
    const struct epabi_tensor* X = in[0];
    char sx[160];
    if (X->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "GlobalMaxPool: X has dtype %s; only float is implemented",
                           epabi_dtype_name(X->dtype));
    if (X->rank < 3)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "GlobalMaxPool: X %s needs rank >= 3 (N, C, spatial...)",
                           epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    struct gmaxpool_launch L;
    memset(&L, 0, sizeof L);
    L.planes = X->dims[0] * X->dims[1];
    L.size = epabi_numel(X->rank - 2, X->dims + 2);
    if (L.size == 0 && L.planes > 0)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "GlobalMaxPool: X %s has no spatial positions to take a max of",
                           epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    int64_t out_dims[EPABI_MAX_RANK];
    for (int i = 0; i < X->rank; ++i) out_dims[i] = i < 2 ? X->dims[i] : 1;
    OrtStatus* st = NULL;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, X->rank, out_dims, &st);
    if (Y == NULL) return st;
    if (L.planes == 0) return NULL;
    L.x = X->data;
    L.y = Y->data;
    return epabi_exec_launch(ex, EPABI_LAUNCH_GLOBAL_MAXPOOL, gmaxpool_launch_fn, &L, sizeof L);
}

const struct epabi_kernel epabi_kernels_pool[] = {
    {.op_type = "GlobalMaxPool", .since_min = 1, .since_max = 22, .supports = gmaxpool_supports,
     .run = gmaxpool_run, .launch = EPABI_LAUNCH_GLOBAL_MAXPOOL, .cuda = epabi_cuda_float32_math},
    {.op_type = NULL},
};
