/*
 * unary.c - Sqrt Reciprocal Exp Erf Tanh Relu Sigmoid Abs, elementwise on float and double (Relu and Abs also
 * on int32 and int64). The output has the input's dtype and shape. The integer Abs of the most negative value
 * wraps to itself (two's complement), as numpy and ORT's CPU EP give.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda_coverage.h"
#include "kernel.h"

static inline float sigmoid_f(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

static inline double sigmoid_d(double x) {
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

#define UN_LOOP(T, EXPR)                                       \
    do {                                                       \
        const T* X = a->in;                                    \
        T* Y = a->out;                                         \
        for (int64_t i = 0; i < a->n; ++i) {                   \
            T x = X[i];                                        \
            Y[i] = (EXPR);                                     \
        }                                                      \
    } while (0)

/* Negation through the unsigned type, so the most negative value wraps instead of overflowing. */
#define ABS_INT(T, U, x) ((x) < 0 ? (T)(0u - (U)(x)) : (x))

static void un_launch(const void* vargs) {
    const struct un_args* a = vargs;
    bool is_f = a->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    bool is_d = a->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;
    switch (a->op) {
    case UN_SQRT:
        if (is_f) UN_LOOP(float, sqrtf(x));
        else if (is_d) UN_LOOP(double, sqrt(x));
        break;
    case UN_RECIPROCAL:
        if (is_f) UN_LOOP(float, 1.0f / x);
        else if (is_d) UN_LOOP(double, 1.0 / x);
        break;
    case UN_EXP:
        if (is_f) UN_LOOP(float, expf(x));
        else if (is_d) UN_LOOP(double, exp(x));
        break;
    case UN_ERF:
        if (is_f) UN_LOOP(float, erff(x));
        else if (is_d) UN_LOOP(double, erf(x));
        break;
    case UN_TANH:
        if (is_f) UN_LOOP(float, tanhf(x));
        else if (is_d) UN_LOOP(double, tanh(x));
        break;
    case UN_SIGMOID:
        if (is_f) UN_LOOP(float, sigmoid_f(x));
        else if (is_d) UN_LOOP(double, sigmoid_d(x));
        break;
    case UN_RELU:
        /* x < 0 is false for NaN, so NaN stays NaN (as ORT's CPU EP and the ONNX reference) */
        if (is_f) UN_LOOP(float, x < 0 ? 0.0f : x);
        else if (is_d) UN_LOOP(double, x < 0 ? 0.0 : x);
        else if (a->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32) UN_LOOP(int32_t, x > 0 ? x : 0);
        else if (a->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64) UN_LOOP(int64_t, x > 0 ? x : 0);
        break;
    case UN_ABS:
        if (is_f) UN_LOOP(float, fabsf(x));
        else if (is_d) UN_LOOP(double, fabs(x));
        else if (a->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32) UN_LOOP(int32_t, ABS_INT(int32_t, uint32_t, x));
        else if (a->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64) UN_LOOP(int64_t, ABS_INT(int64_t, uint64_t, x));
        break;
    }
}

static bool type_ok(enum un_op op, ONNXTensorElementDataType t) {
    if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE) return true;
    return (op == UN_RELU || op == UN_ABS) &&
           (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64);
}

static bool supports_op(enum un_op op, const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in != 1 || node->n_out != 1) {
        snprintf(why, why_len, "%d inputs, %d outputs", node->n_in, node->n_out);
        return false;
    }
    if (!type_ok(op, node->in[0].dtype)) {
        snprintf(why, why_len, "dtype %s is not supported", epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    if (node->out[0].dtype != node->in[0].dtype) {
        snprintf(why, why_len, "output dtype %s differs from the input's", epabi_dtype_name(node->out[0].dtype));
        return false;
    }
    return true;
}

static OrtStatus* run_op(enum un_op op, struct epabi_exec* ex, const struct epabi_tensor* const* in, int n_in) {
    if (n_in != 1 || in[0] == NULL) return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "expected 1 input");
    if (!type_ok(op, in[0]->dtype))
        return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "dtype %s is not supported",
                           epabi_dtype_name(in[0]->dtype));
    OrtStatus* st = NULL;
    struct epabi_tensor* out = epabi_exec_output(ex, 0, in[0]->dtype, in[0]->rank, in[0]->dims, &st);
    if (out == NULL) return st;
    struct un_args args = {op, in[0]->dtype, in[0]->data, out->data, epabi_numel(in[0]->rank, in[0]->dims)};
    if (args.n == 0) return NULL;
    return epabi_exec_launch(ex, EPABI_LAUNCH_UNARY, un_launch, &args, sizeof args);
}

#define UNARY(NAME, OP)                                                                                      \
    static bool supports_##NAME(const struct epabi_node* node, char* why, size_t why_len) {                  \
        return supports_op(OP, node, why, why_len);                                                          \
    }                                                                                                        \
    static OrtStatus* run_##NAME(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, \
                                 int n_in, int n_out) {                                                      \
        (void)state;                                                                                         \
        (void)n_out;                                                                                         \
        return run_op(OP, ex, in, n_in);                                                                     \
    }
UNARY(sqrt, UN_SQRT)
UNARY(reciprocal, UN_RECIPROCAL)
UNARY(exp, UN_EXP)
UNARY(erf, UN_ERF)
UNARY(tanh, UN_TANH)
UNARY(relu, UN_RELU)
UNARY(sigmoid, UN_SIGMOID)
UNARY(abs, UN_ABS)
#undef UNARY

/* CUDA: Relu and Abs have int32 and int64 kernels besides float and double (un_i32, un_i64). */
static bool cuda_float_or_index(const struct epabi_node* node, char* why, size_t why_len) {
    const ONNXTensorElementDataType t = epabi_cuda_in_dtype(node, 0);
    return epabi_cuda_floating(t) || epabi_is_index_dtype(t) || epabi_cuda_refuse(node, why, why_len, "input", t);
}

/* Opset ranges: versions 6 and 13 differ only in types (13 adds bfloat16); Relu 14 adds integer types;
 * Erf starts at 9; Abs-1 had the legacy consumed_inputs attribute. */
const struct epabi_kernel epabi_kernels_unary[] = {
    {.op_type = "Sqrt", .since_min = 6, .since_max = 13, .supports = supports_sqrt, .run = run_sqrt,
     .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input},
    {.op_type = "Reciprocal", .since_min = 6, .since_max = 13, .supports = supports_reciprocal,
     .run = run_reciprocal, .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input},
    {.op_type = "Exp", .since_min = 6, .since_max = 13, .supports = supports_exp, .run = run_exp,
     .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input},
    {.op_type = "Erf", .since_min = 9, .since_max = 13, .supports = supports_erf, .run = run_erf,
     .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input},
    {.op_type = "Tanh", .since_min = 6, .since_max = 13, .supports = supports_tanh, .run = run_tanh,
     .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input},
    {.op_type = "Relu", .since_min = 6, .since_max = 14, .supports = supports_relu, .run = run_relu,
     .launch = EPABI_LAUNCH_UNARY, .as_epilogue = EPABI_EPILOGUE_RELU, .cuda = cuda_float_or_index},
    {.op_type = "Sigmoid", .since_min = 6, .since_max = 13, .supports = supports_sigmoid, .run = run_sigmoid,
     .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input},
    {.op_type = "Abs", .since_min = 6, .since_max = 13, .supports = supports_abs, .run = run_abs,
     .launch = EPABI_LAUNCH_UNARY, .cuda = cuda_float_or_index},
    {.op_type = NULL},
};
