/*
 * instancenorm.c - InstanceNormalization (opsets 6-22) on float32: X [N, C, D1, ...] (rank >= 3), scale and B
 * ([C] each), epsilon.
 *
 * Each (n, c) plane is normalized by its own mean and (biased) variance, accumulated in double with two passes
 * so that a large mean does not cancel the variance away; then in float s = scale[c] * (1 / sqrt(var + epsilon))
 * and Y = (X - mean) * s + B[c]. (ORT's CPU EP takes the statistics in float and folds the mean into the
 * shift, X * s + (B - mean * s), which cancels when |mean| * s is large: a plane of one element gives B only
 * approximately.) Planes of no elements give an empty Y.
 */
#include "math_common.h"
#include "cuda_coverage.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void instancenorm_launch_fn(const void* p) {
    const struct instancenorm_launch* L = p;
    for (int64_t i = 0; i < L->planes; ++i) {
        const float* x = L->x + i * L->size;
        float* y = L->y + i * L->size;
        double sum = 0.0;
        for (int64_t j = 0; j < L->size; ++j) sum += x[j];
        const double mean = sum / (double)L->size;
        double ss = 0.0;
        for (int64_t j = 0; j < L->size; ++j) ss += (x[j] - mean) * (x[j] - mean);
        const float inv = (float)(1.0 / sqrt(ss / (double)L->size + (double)L->epsilon));
        const float s = inv * L->scale[i % L->c];
        const float m = (float)mean, b = L->bias[i % L->c];
        for (int64_t j = 0; j < L->size; ++j) y[j] = (x[j] - m) * s + b;
    }
}

static bool instancenorm_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in != 3 || node->n_out != 1) {
        snprintf(why, why_len, "InstanceNormalization: expected 3 inputs and 1 output, got %d and %d", node->n_in,
                 node->n_out);
        return false;
    }
    const char* names[] = {"input", "scale", "B"};
    for (int i = 0; i < 3; ++i) {
        if (node->in[i].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
            snprintf(why, why_len, "InstanceNormalization: %s has dtype %s; only float is implemented", names[i],
                     epabi_dtype_name(node->in[i].dtype));
            return false;
        }
    }
    if (node->in[0].rank >= 0 && node->in[0].rank < 3) {
        snprintf(why, why_len, "InstanceNormalization: input has rank %d; it needs N, C and a spatial axis",
                 node->in[0].rank);
        return false;
    }
    return true;
}

static OrtStatus* instancenorm_init(const struct epabi_node* node, void** state) {
    float* eps = malloc(sizeof *eps);
    if (eps == NULL) return epabi_error(node->api, ORT_FAIL, "InstanceNormalization: out of memory");
    *eps = 1e-5f;
    epabi_attr_float(node, "epsilon", eps);
    *state = eps;
    return NULL;
}

static OrtStatus* instancenorm_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                                   int n_in, int n_out) {
    (void)n_out;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < 3)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "InstanceNormalization: expected 3 inputs, got %d", n_in);
    const struct epabi_tensor* X = in[0];
    char sx[160], sp[160];
    for (int i = 0; i < 3; ++i)
        if (in[i] == NULL || in[i]->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "InstanceNormalization: only float inputs are implemented");
    if (X->rank < 3)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "InstanceNormalization: input %s needs rank >= 3 (N, C, D1...)",
                           epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    const int64_t C = X->dims[1];
    for (int i = 1; i < 3; ++i)
        if (in[i]->rank != 1 || in[i]->dims[0] != C)
            return epabi_error(api, ORT_INVALID_ARGUMENT,
                               "InstanceNormalization: %s %s must be [%lld] (input %s has C=%lld)",
                               i == 1 ? "scale" : "B", epabi_shape_str(sp, sizeof sp, in[i]->rank, in[i]->dims),
                               (long long)C, epabi_shape_str(sx, sizeof sx, X->rank, X->dims), (long long)C);
    OrtStatus* st = NULL;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, X->rank, X->dims, &st);
    if (Y == NULL) return st;
    struct instancenorm_launch L;
    memset(&L, 0, sizeof L);
    L.planes = X->dims[0] * C;
    L.c = C;
    L.size = epabi_numel(X->rank - 2, X->dims + 2);
    if (L.planes == 0 || L.size == 0) return NULL;
    L.x = X->data;
    L.scale = in[1]->data;
    L.bias = in[2]->data;
    L.y = Y->data;
    L.epsilon = *(const float*)state;
    return epabi_exec_launch(ex, EPABI_LAUNCH_INSTANCENORM, instancenorm_launch_fn, &L, sizeof L);
}

/* CUDA: instancenorm_f32 (every input float; supports() checked them). Opset 1 had consumed_inputs, and ORT's
 * CPU EP starts at 6. */
const struct epabi_kernel epabi_kernels_instancenorm[] = {
    {.op_type = "InstanceNormalization", .since_min = 6, .since_max = 22, .supports = instancenorm_supports,
     .init = instancenorm_init, .release = free, .run = instancenorm_run, .launch = EPABI_LAUNCH_INSTANCENORM,
     .cuda = epabi_cuda_float32_math},
    {.op_type = NULL},
};
