/*
 * batchnorm.c - BatchNormalization (opsets 6-15) in inference mode on float32: X [N, C, ...] (rank >= 2) and the
 * per-channel scale, B, input_mean, input_var ([C] each); epsilon.
 *
 * Y = (X - mean) / sqrt(var + epsilon) * scale + B in float: per channel s = scale * (1 / sqrt(var + epsilon)),
 * as ORT's CPU EP, then Y = (X - mean) * s + B. (ORT folds the mean into the shift, X * s + (B - mean * s),
 * which cancels when |mean| * s is large against the result.)
 * Only inference is claimed: training_mode=1 (opsets 14-15), any of the running / saved statistics outputs
 * wired (opsets 7-13: their presence selects training), is_test other than 1 (opset 6, whose default 0 means
 * training) and spatial=0 (opsets 6-8: per-element statistics) are refused. ORT's CPU EP has no opset-6
 * kernel; we compute its is_test=1 form, which is the opset 7 one.
 */
#include "math_common.h"
#include "cuda_coverage.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void batchnorm_launch_fn(const void* p) {
    const struct batchnorm_launch* L = p;
    for (int64_t ch = 0; ch < L->c; ++ch) {
        const float s = (1.0f / sqrtf(L->var[ch] + L->epsilon)) * L->scale[ch];
        const float m = L->mean[ch], b = L->bias[ch];
        for (int64_t i = 0; i < L->n; ++i) {
            const float* x = L->x + (i * L->c + ch) * L->inner;
            float* y = L->y + (i * L->c + ch) * L->inner;
            for (int64_t j = 0; j < L->inner; ++j) y[j] = (x[j] - m) * s + b;
        }
    }
}

static bool bn_output_wired(const struct epabi_node* node, int i) {
    if (i >= node->n_out) return false;
    const struct epabi_value_desc* d = &node->out[i];
    return d->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED || (d->name != NULL && d->name[0] != '\0');
}

static bool batchnorm_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in != 5 || node->n_out < 1 || node->n_out > 5) {
        snprintf(why, why_len, "BatchNormalization: expected 5 inputs and 1-5 outputs, got %d and %d", node->n_in,
                 node->n_out);
        return false;
    }
    const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
    for (int i = 0; i < 5; ++i) {
        if (node->in[i].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
            snprintf(why, why_len, "BatchNormalization: %s has dtype %s; only float is implemented", names[i],
                     epabi_dtype_name(node->in[i].dtype));
            return false;
        }
    }
    for (int i = 1; i < node->n_out; ++i) {
        if (bn_output_wired(node, i)) {
            snprintf(why, why_len, "BatchNormalization: output %d (a training statistic) is wired; only inference "
                     "is implemented", i);
            return false;
        }
    }
    int64_t v = 0;
    if (node->since_version >= 14 && epabi_attr_int(node, "training_mode", &v) && v != 0) {
        snprintf(why, why_len, "BatchNormalization: training_mode=%lld; only inference is implemented", (long long)v);
        return false;
    }
    v = 0;
    if (node->since_version < 7 && (!epabi_attr_int(node, "is_test", &v) || v != 1)) {
        snprintf(why, why_len, "BatchNormalization: opset 6 with is_test=%lld is training; only is_test=1 "
                 "(inference) is implemented", (long long)v);
        return false;
    }
    v = 1;
    if (node->since_version < 9 && epabi_attr_int(node, "spatial", &v) && v == 0) {
        snprintf(why, why_len, "BatchNormalization: spatial=0 (per-element statistics) is not implemented");
        return false;
    }
    if (node->in[0].rank >= 0 && node->in[0].rank < 2) {
        snprintf(why, why_len, "BatchNormalization: X has rank %d; it needs N and C", node->in[0].rank);
        return false;
    }
    return true;
}

static OrtStatus* batchnorm_init(const struct epabi_node* node, void** state) {
    float* eps = malloc(sizeof *eps);
    if (eps == NULL) return epabi_error(node->api, ORT_FAIL, "BatchNormalization: out of memory");
    *eps = 1e-5f;
    epabi_attr_float(node, "epsilon", eps);
    *state = eps;
    return NULL;
}

static OrtStatus* batchnorm_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                                int n_in, int n_out) {
    (void)n_out;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < 5) return epabi_error(api, ORT_INVALID_ARGUMENT, "BatchNormalization: expected 5 inputs, got %d", n_in);
    const struct epabi_tensor* X = in[0];
    char sx[160], sp[160];
    for (int i = 0; i < 5; ++i)
        if (in[i] == NULL || in[i]->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "BatchNormalization: only float inputs are implemented");
    if (X->rank < 2)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "BatchNormalization: X %s needs rank >= 2 (N, C, ...)",
                           epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    const int64_t C = X->dims[1];
    const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
    for (int i = 1; i < 5; ++i)
        if (in[i]->rank != 1 || in[i]->dims[0] != C)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "BatchNormalization: %s %s must be [%lld] (X %s has C=%lld)",
                               names[i], epabi_shape_str(sp, sizeof sp, in[i]->rank, in[i]->dims), (long long)C,
                               epabi_shape_str(sx, sizeof sx, X->rank, X->dims), (long long)C);
    OrtStatus* st = NULL;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, X->rank, X->dims, &st);
    if (Y == NULL) return st;
    struct batchnorm_launch L;
    memset(&L, 0, sizeof L);
    L.n = X->dims[0];
    L.c = C;
    L.inner = epabi_numel(X->rank - 2, X->dims + 2);
    if (L.n * L.c * L.inner == 0) return NULL;
    L.x = X->data;
    L.scale = in[1]->data;
    L.bias = in[2]->data;
    L.mean = in[3]->data;
    L.var = in[4]->data;
    L.y = Y->data;
    L.epsilon = *(const float*)state;
    return epabi_exec_launch(ex, EPABI_LAUNCH_BATCHNORM, batchnorm_launch_fn, &L, sizeof L);
}

/* CUDA: batchnorm_f32 (every input float; supports() checked them). */
const struct epabi_kernel epabi_kernels_batchnorm[] = {
    {.op_type = "BatchNormalization", .since_min = 6, .since_max = 15, .supports = batchnorm_supports,
     .init = batchnorm_init, .release = free, .run = batchnorm_run, .launch = EPABI_LAUNCH_BATCHNORM,
     .cuda = epabi_cuda_float32_math},
    {.op_type = NULL},
};
