/*
 * unary.c - elementwise ops of one input; the output has the input's dtype and shape.
 *
 * Math on float and double: Sqrt Reciprocal Exp Erf Tanh Sigmoid Floor Ceil Round Log Sin Cos, the activations
 * HardSigmoid (alpha, beta) HardSwish LeakyRelu (alpha) Gelu (approximate "none" or "tanh"); Relu Abs Neg Sign
 * also on int32 and int64; Not on bool; Clip on float and double (opsets 6 and 11: min/max attributes, then
 * optional scalar inputs) and from opset 12 on every integer width as well.
 *
 * Integer results wrap (two's complement): Abs and Neg of the most negative value give itself, as numpy and
 * ORT's CPU EP. NaN stays NaN through every op (Sign, Round, Clip and the activations included), as ORT's CPU EP
 * and numpy give. Round is half to even (the default rounding mode, which the plugin never changes). A Clip bound
 * that is absent is the dtype's lowest/highest finite value, as in ORT's CPU EP: on floats, -inf and inf are
 * clipped to them. A min above the max gives the max everywhere (ONNX).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_coverage.h"
#include "kernel.h"
#include "linear.h"
#include "math_common.h"
#include "vmath.h"

static inline double sigmoid_d(double x) {
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

/* max(0, min(1, alpha * x + beta)), NaN passing through both comparisons (the float one is vmath.h's) */
static inline double hard_sigmoid_d(double x, double alpha, double beta) {
    double v = alpha * x + beta;
    v = v < 0.0 ? 0.0 : v;
    return v > 1.0 ? 1.0 : v;
}

/* Gelu: x Phi(x) = 0.5 x (1 + erf(x / sqrt 2));
 * approximate="tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
#define GELU_RSQRT2 0.70710678118654752440
#define GELU_SQRT_2_PI 0.79788456080286535588
static inline float gelu_f(float x) { return 0.5f * x * (1.0f + erff(x * (float)GELU_RSQRT2)); }
static inline double gelu_d(double x) { return 0.5 * x * (1.0 + erf(x * GELU_RSQRT2)); }
static inline double gelu_tanh_d(double x) {
    return 0.5 * x * (1.0 + tanh(GELU_SQRT_2_PI * (x + 0.044715 * x * x * x)));
}

/* Sign keeps NaN (x == 0 is false for it) and gives +0 for both zeros, as ORT's CPU EP. */
#define SIGN_OF(T, x) ((x) > 0 ? (T)1 : (x) < 0 ? (T)-1 : (x) == 0 ? (T)0 : (x))

/* Elements [begin, end) of the launch; plain indexed loops, which GCC vectorises wherever EXPR has no call (vmath.h's
 * functions are inlined arithmetic). No restrict: a linear step and CUDA's Conv epilogue run in place (in == out),
 * which GCC's run-time overlap check lets through to the vector loop. */
#define UN_LOOP(T, EXPR)                                       \
    do {                                                       \
        const T* X = a->in;                                    \
        T* Y = a->out;                                         \
        for (int64_t i = begin; i < end; ++i) {                \
            T x = X[i];                                        \
            Y[i] = (EXPR);                                     \
        }                                                      \
    } while (0)

/* Negation through the unsigned type, so the most negative value wraps instead of overflowing. */
#define ABS_INT(T, U, x) ((x) < 0 ? (T)(0u - (U)(x)) : (x))
#define NEG_INT(T, U, x) ((T)(0u - (U)(x)))

/* Clip: lo then hi, so a min above the max gives the max; NaN (input or bound) compares false and passes. */
#define CLIP_LOOP(T, LO, HI)                                       \
    do {                                                           \
        const T lo = a->lo != NULL ? *(const T*)a->lo : (LO);      \
        const T hi = a->hi != NULL ? *(const T*)a->hi : (HI);      \
        const T* X = a->in;                                        \
        T* Y = a->out;                                             \
        for (int64_t i = begin; i < end; ++i) {                    \
            const T v = X[i] < lo ? lo : X[i];                     \
            Y[i] = v > hi ? hi : v;                                \
        }                                                          \
    } while (0)

static void clip_span(const struct un_args* a, int64_t begin, int64_t end) {
    switch (a->dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: CLIP_LOOP(float, (float)a->alpha, (float)a->beta); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: CLIP_LOOP(double, a->alpha, a->beta); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: CLIP_LOOP(int8_t, INT8_MIN, INT8_MAX); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: CLIP_LOOP(uint8_t, 0, UINT8_MAX); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: CLIP_LOOP(int16_t, INT16_MIN, INT16_MAX); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: CLIP_LOOP(uint16_t, 0, UINT16_MAX); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: CLIP_LOOP(int32_t, INT32_MIN, INT32_MAX); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: CLIP_LOOP(uint32_t, 0, UINT32_MAX); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: CLIP_LOOP(int64_t, INT64_MIN, INT64_MAX); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: CLIP_LOOP(uint64_t, 0, UINT64_MAX); break;
    default: break;
    }
}

/* Elements [begin, end) of one launch: one chunk of epabi_pool_for_range. Compiled per x86-64 level, so that the
 * float loops run as wide as the machine's vectors. */
EPABI_SIMD_CLONES static void un_span(void* ctx, int64_t begin, int64_t end) {
    const struct un_args* a = ctx;
    bool is_f = a->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    bool is_d = a->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;
    bool is_i32 = a->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
    bool is_i64 = a->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
    const float fa = (float)a->alpha, fb = (float)a->beta;
    const double da = a->alpha, db = a->beta;
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
        if (is_f) UN_LOOP(float, epabi_vm_expf(x));
        else if (is_d) UN_LOOP(double, exp(x));
        break;
    case UN_ERF:
        if (is_f) UN_LOOP(float, erff(x));
        else if (is_d) UN_LOOP(double, erf(x));
        break;
    case UN_TANH:
        if (is_f) UN_LOOP(float, epabi_vm_tanhf(x));
        else if (is_d) UN_LOOP(double, tanh(x));
        break;
    case UN_SIGMOID:
        if (is_f) UN_LOOP(float, epabi_vm_sigmoidf(x));
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
    case UN_NEG:
        if (is_f) UN_LOOP(float, -x);
        else if (is_d) UN_LOOP(double, -x);
        else if (is_i32) UN_LOOP(int32_t, NEG_INT(int32_t, uint32_t, x));
        else if (is_i64) UN_LOOP(int64_t, NEG_INT(int64_t, uint64_t, x));
        break;
    case UN_FLOOR:
        if (is_f) UN_LOOP(float, floorf(x));
        else if (is_d) UN_LOOP(double, floor(x));
        break;
    case UN_CEIL:
        if (is_f) UN_LOOP(float, ceilf(x));
        else if (is_d) UN_LOOP(double, ceil(x));
        break;
    case UN_ROUND:
        if (is_f) UN_LOOP(float, rintf(x));
        else if (is_d) UN_LOOP(double, rint(x));
        break;
    case UN_LOG:
        if (is_f) UN_LOOP(float, logf(x));
        else if (is_d) UN_LOOP(double, log(x));
        break;
    case UN_SIN:
        if (is_f) UN_LOOP(float, sinf(x));
        else if (is_d) UN_LOOP(double, sin(x));
        break;
    case UN_COS:
        if (is_f) UN_LOOP(float, cosf(x));
        else if (is_d) UN_LOOP(double, cos(x));
        break;
    case UN_SIGN:
        if (is_f) UN_LOOP(float, SIGN_OF(float, x));
        else if (is_d) UN_LOOP(double, SIGN_OF(double, x));
        else if (is_i32) UN_LOOP(int32_t, SIGN_OF(int32_t, x));
        else if (is_i64) UN_LOOP(int64_t, SIGN_OF(int64_t, x));
        break;
    case UN_NOT:
        if (a->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL) UN_LOOP(uint8_t, (uint8_t)(x == 0));
        break;
    case UN_CLIP:
        clip_span(a, begin, end);
        break;
    case UN_HARD_SIGMOID:
        if (is_f) UN_LOOP(float, epabi_vm_hard_sigmoidf(x, fa, fb));
        else if (is_d) UN_LOOP(double, hard_sigmoid_d(x, da, db));
        break;
    case UN_HARD_SWISH:   /* x * HardSigmoid(x) with alpha 1/6, beta 0.5 */
        if (is_f) UN_LOOP(float, x * epabi_vm_hard_sigmoidf(x, 1.0f / 6.0f, 0.5f));
        else if (is_d) UN_LOOP(double, x * hard_sigmoid_d(x, 1.0 / 6.0, 0.5));
        break;
    case UN_LEAKY_RELU:
        if (is_f) UN_LOOP(float, x >= 0 ? x : fa * x);
        else if (is_d) UN_LOOP(double, x >= 0 ? x : da * x);
        break;
    case UN_GELU:
        if (is_f) UN_LOOP(float, gelu_f(x));
        else if (is_d) UN_LOOP(double, gelu_d(x));
        break;
    case UN_SILU:   /* no ONNX op: a fused Sigmoid + Mul (CUDA applies Conv's SiLU epilogue with it) */
        if (is_f) UN_LOOP(float, x * epabi_vm_sigmoidf(x));
        else if (is_d) UN_LOOP(double, x * sigmoid_d(x));
        break;
    case UN_GELU_TANH:
        if (is_f) UN_LOOP(float, epabi_vm_gelu_tanhf(x));
        else if (is_d) UN_LOOP(double, gelu_tanh_d(x));
        break;
    }
}

/* Chunks of a transcendental function are worth a thread from EPABI_PARALLEL_MIN_ELEMS elements, those of a
 * compare or a multiply-add from four times that. */
static int64_t un_grain(enum un_op op) {
    switch (op) {
    case UN_RELU: case UN_ABS: case UN_NEG: case UN_NOT: case UN_CLIP: case UN_SIGN: case UN_LEAKY_RELU:
    case UN_HARD_SIGMOID: case UN_HARD_SWISH: case UN_FLOOR: case UN_CEIL: case UN_ROUND: case UN_RECIPROCAL:
    case UN_SQRT:
        return 4 * (int64_t)EPABI_PARALLEL_MIN_ELEMS;
    default:
        return EPABI_PARALLEL_MIN_ELEMS;
    }
}

void epabi_unary_span(const struct un_args* a, int64_t begin, int64_t end) {
    un_span((void*)a, begin, end);
}

static void un_launch(const void* vargs) {
    const struct un_args* a = vargs;
    epabi_pool_for_range(a->pool, a->n, un_grain(a->op), un_span, (void*)a);
}

static bool is_floating(ONNXTensorElementDataType t) {
    return t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;
}

static bool type_ok(enum un_op op, ONNXTensorElementDataType t) {
    if (op == UN_NOT) return t == ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL;
    if (is_floating(t)) return true;
    return (op == UN_RELU || op == UN_ABS || op == UN_NEG || op == UN_SIGN) && epabi_is_index_dtype(t);
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

/* One launch over X into an output of X's dtype and shape; `proto` gives the op and its parameters. */
static OrtStatus* launch_over(struct epabi_exec* ex, const struct un_args* proto, const struct epabi_tensor* x) {
    OrtStatus* st = NULL;
    struct epabi_tensor* out = epabi_exec_output(ex, 0, x->dtype, x->rank, x->dims, &st);
    if (out == NULL) return st;
    struct un_args args = *proto;
    args.dtype = x->dtype;
    args.in = x->data;
    args.out = out->data;
    args.n = epabi_numel(x->rank, x->dims);
    args.pool = epabi_exec_pool(ex);
    if (args.n == 0) return NULL;
    return epabi_exec_launch(ex, EPABI_LAUNCH_UNARY, un_launch, &args, sizeof args);
}

/* The parameters of the ops that have some (init() reads them; run() copies them into the launch). */
struct un_params {
    enum un_op op;
    double alpha, beta;
};

static OrtStatus* run_params(struct epabi_exec* ex, const struct un_params* p, const struct epabi_tensor* const* in,
                             int n_in) {
    if (n_in != 1 || in[0] == NULL) return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "expected 1 input");
    if (!type_ok(p->op, in[0]->dtype))
        return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "dtype %s is not supported",
                           epabi_dtype_name(in[0]->dtype));
    const struct un_args proto = {.op = p->op, .alpha = p->alpha, .beta = p->beta};
    return launch_over(ex, &proto, in[0]);
}

static OrtStatus* run_op(enum un_op op, struct epabi_exec* ex, const struct epabi_tensor* const* in, int n_in) {
    const struct un_params p = {.op = op};
    return run_params(ex, &p, in, n_in);
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
UNARY(neg, UN_NEG)
UNARY(floor, UN_FLOOR)
UNARY(ceil, UN_CEIL)
UNARY(round, UN_ROUND)
UNARY(log, UN_LOG)
UNARY(sin, UN_SIN)
UNARY(cos, UN_COS)
UNARY(sign, UN_SIGN)
UNARY(not, UN_NOT)
UNARY(hard_swish, UN_HARD_SWISH)
#undef UNARY

/* Links of elementwise chains (chain.h): the ops without parameters. */
#define LINK(NAME, OP)                                                                                       \
    static bool link_##NAME(const void* state, const struct epabi_tensor* const* in, int n_in,               \
                            struct chain_op* out) {                                                          \
        (void)state;                                                                                         \
        (void)in;                                                                                            \
        *out = (struct chain_op){.kind = CHAIN_UNARY, .op = OP, .out = -1};                                  \
        return n_in == 1;                                                                                    \
    }
LINK(sqrt, UN_SQRT)
LINK(reciprocal, UN_RECIPROCAL)
LINK(exp, UN_EXP)
LINK(erf, UN_ERF)
LINK(tanh, UN_TANH)
LINK(relu, UN_RELU)
LINK(sigmoid, UN_SIGMOID)
LINK(abs, UN_ABS)
LINK(neg, UN_NEG)
LINK(floor, UN_FLOOR)
LINK(ceil, UN_CEIL)
LINK(round, UN_ROUND)
LINK(log, UN_LOG)
LINK(sin, UN_SIN)
LINK(cos, UN_COS)
LINK(sign, UN_SIGN)
LINK(hard_swish, UN_HARD_SWISH)
#undef LINK

/* ---- activations with attributes ------------------------------------------------------------------------ */

static OrtStatus* new_params(const struct epabi_node* node, enum un_op op, double alpha, double beta, void** state) {
    struct un_params* p = calloc(1, sizeof *p);
    if (p == NULL) return epabi_error(node->api, ORT_FAIL, "%s: out of memory", node->op_type);
    p->op = op;
    p->alpha = alpha;
    p->beta = beta;
    *state = p;
    return NULL;
}

/* A float attribute, or its default. */
static double attr_or(const struct epabi_node* node, const char* name, float dflt) {
    float v = dflt;
    epabi_attr_float(node, name, &v);
    return v;
}

static OrtStatus* init_leaky_relu(const struct epabi_node* node, void** state) {
    return new_params(node, UN_LEAKY_RELU, attr_or(node, "alpha", 0.01f), 0.0, state);
}

static OrtStatus* init_hard_sigmoid(const struct epabi_node* node, void** state) {
    return new_params(node, UN_HARD_SIGMOID, attr_or(node, "alpha", 0.2f), attr_or(node, "beta", 0.5f), state);
}

/* Gelu's approximate: "none" (the default) or "tanh"; false for any other value. */
static bool gelu_op(const struct epabi_node* node, enum un_op* op) {
    char mode[16] = "none";
    epabi_attr_string(node, "approximate", mode, sizeof mode);
    *op = strcmp(mode, "tanh") == 0 ? UN_GELU_TANH : UN_GELU;
    return strcmp(mode, "none") == 0 || strcmp(mode, "tanh") == 0;
}

static bool supports_gelu(const struct epabi_node* node, char* why, size_t why_len) {
    enum un_op op;
    if (!gelu_op(node, &op)) {
        char mode[16] = "";
        epabi_attr_string(node, "approximate", mode, sizeof mode);
        snprintf(why, why_len, "approximate=\"%s\" is not \"none\" or \"tanh\"", mode);
        return false;
    }
    return supports_op(op, node, why, why_len);
}

static OrtStatus* init_gelu(const struct epabi_node* node, void** state) {
    enum un_op op;
    if (!gelu_op(node, &op)) return epabi_error(node->api, ORT_INVALID_ARGUMENT, "Gelu: unknown approximate");
    return new_params(node, op, 0.0, 0.0, state);
}

/* ---- activations of linear steps (linear.h) --------------------------------------------------------------- */

void epabi_activate_f32(int32_t op, float* y, int64_t n) {
    const struct un_args a = {.op = (enum un_op)op, .dtype = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, .in = y, .out = y,
                              .n = n};
    un_launch(&a);   /* elementwise, so in place is safe */
}

static int32_t relu_activation(const void* state) {
    (void)state;
    return UN_RELU;
}

static int32_t sigmoid_activation(const void* state) {
    (void)state;
    return UN_SIGMOID;
}

static int32_t tanh_activation(const void* state) {
    (void)state;
    return UN_TANH;
}

static int32_t gelu_activation(const void* state) {
    const struct un_params* p = state;
    return p != NULL && (p->op == UN_GELU || p->op == UN_GELU_TANH) ? (int32_t)p->op : -1;
}

static bool supports_leaky_relu(const struct epabi_node* node, char* why, size_t why_len) {
    return supports_op(UN_LEAKY_RELU, node, why, why_len);
}

static bool supports_hard_sigmoid(const struct epabi_node* node, char* why, size_t why_len) {
    return supports_op(UN_HARD_SIGMOID, node, why, why_len);
}

/* The float parameters of an activation the plan fuses as an epilogue (kernel.h), as its launch converts them. */
static void params_of(const void* state, float* alpha, float* beta) {
    const struct un_params* p = state;
    *alpha = (float)p->alpha;
    *beta = (float)p->beta;
}

/* A chain link of LeakyRelu, HardSigmoid or Gelu, its parameters as its launch converts them. */
static bool link_params(const void* state, const struct epabi_tensor* const* in, int n_in, struct chain_op* out) {
    (void)in;
    const struct un_params* p = state;
    *out = (struct chain_op){.kind = CHAIN_UNARY, .op = p->op, .out = -1, .alpha = (float)p->alpha,
                             .beta = (float)p->beta};
    return n_in == 1;
}

static OrtStatus* run_with_params(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                                  int n_in, int n_out) {
    (void)n_out;
    return run_params(ex, state, in, n_in);
}

/* ---- Clip -------------------------------------------------------------------------------------------------- */

/* Clip-6's min/max attributes; from opset 11 the bounds are inputs 1 and 2 and these are unset. */
struct clip_state {
    bool has_min, has_max;
    float min, max;
};

static bool clip_type_ok(int since_version, ONNXTensorElementDataType t) {
    return since_version >= 12 ? epabi_is_numeric_dtype(t) : is_floating(t);
}

/* A bound is a scalar; shape [1] passes too, as in ORT's CPU EP. */
static bool clip_bound_shape(int rank, const int64_t* dims) { return rank == 0 || (rank == 1 && dims[0] == 1); }

static bool supports_clip(const struct epabi_node* node, char* why, size_t why_len) {
    const int max_in = node->since_version >= 11 ? 3 : 1;
    if (node->n_in < 1 || node->n_in > max_in || node->n_out != 1) {
        snprintf(why, why_len, "%d inputs, %d outputs", node->n_in, node->n_out);
        return false;
    }
    const ONNXTensorElementDataType t = node->in[0].dtype;
    if (!clip_type_ok(node->since_version, t)) {
        snprintf(why, why_len, "dtype %s is not supported at opset %d", epabi_dtype_name(t), node->since_version);
        return false;
    }
    if (node->out[0].dtype != t) {
        snprintf(why, why_len, "output dtype %s differs from the input's", epabi_dtype_name(node->out[0].dtype));
        return false;
    }
    for (int k = 1; k < node->n_in; ++k) {
        const struct epabi_value_desc* b = &node->in[k];
        if (!epabi_desc_present(node, k)) continue;
        if (b->dtype != t) {
            snprintf(why, why_len, "%s has dtype %s, the input %s", k == 1 ? "min" : "max", epabi_dtype_name(b->dtype),
                     epabi_dtype_name(t));
            return false;
        }
        bool known = b->rank >= 0;
        for (int d = 0; d < b->rank; ++d) known = known && b->dims[d] >= 0;
        if (known && !clip_bound_shape(b->rank, b->dims)) {
            char sb[128];
            snprintf(why, why_len, "%s has shape %s, not a scalar", k == 1 ? "min" : "max",
                     epabi_shape_str(sb, sizeof sb, b->rank, b->dims));
            return false;
        }
    }
    float lo = 0, hi = 0;
    if (node->since_version < 11 && epabi_attr_float(node, "min", &lo) && epabi_attr_float(node, "max", &hi) &&
        lo > hi) {
        snprintf(why, why_len, "min %g is above max %g (ORT's CPU EP rejects such a Clip-6)", (double)lo, (double)hi);
        return false;
    }
    return true;
}

static OrtStatus* init_clip(const struct epabi_node* node, void** state) {
    struct clip_state* s = calloc(1, sizeof *s);
    if (s == NULL) return epabi_error(node->api, ORT_FAIL, "Clip: out of memory");
    if (node->since_version < 11) {
        s->has_min = epabi_attr_float(node, "min", &s->min);
        s->has_max = epabi_attr_float(node, "max", &s->max);
    }
    *state = s;
    return NULL;
}

/* Input k (min or max), a scalar of X's dtype, or NULL when absent. */
static OrtStatus* clip_bound(struct epabi_exec* ex, const struct epabi_tensor* const* in, int n_in, int k,
                             const void** data) {
    const struct epabi_tensor* b = epabi_opt_input(in, n_in, k);
    *data = NULL;
    if (b == NULL) return NULL;
    const char* what = k == 1 ? "min" : "max";
    if (b->dtype != in[0]->dtype)
        return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "Clip: %s has dtype %s, the input %s", what,
                           epabi_dtype_name(b->dtype), epabi_dtype_name(in[0]->dtype));
    if (!clip_bound_shape(b->rank, b->dims)) {
        char sb[128];
        return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "Clip: %s must be a scalar, got shape %s", what,
                           epabi_shape_str(sb, sizeof sb, b->rank, b->dims));
    }
    *data = b->data;
    return NULL;
}

static OrtStatus* run_clip(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                           int n_out) {
    (void)n_out;
    const struct clip_state* s = state;
    if (n_in < 1 || in[0] == NULL) return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "expected an input");
    const struct epabi_tensor* x = in[0];
    if (!epabi_is_numeric_dtype(x->dtype))
        return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "Clip: dtype %s is not supported",
                           epabi_dtype_name(x->dtype));
    struct un_args proto = {.op = UN_CLIP};
    EPABI_RETURN_IF_ERROR(clip_bound(ex, in, n_in, 1, &proto.lo));
    EPABI_RETURN_IF_ERROR(clip_bound(ex, in, n_in, 2, &proto.hi));
    const double limit = x->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ? FLT_MAX : DBL_MAX;
    proto.alpha = s->has_min ? s->min : -limit;
    proto.beta = s->has_max ? s->max : limit;
    return launch_over(ex, &proto, x);
}

/* A chain link of a float Clip: its bounds are attributes (opset 6) or constant scalars (11+); absent ones are
 * -FLT_MAX and FLT_MAX, as run_clip gives. A bound computed at run time: no link. */
static bool link_clip(const void* state, const struct epabi_tensor* const* in, int n_in, struct chain_op* out) {
    const struct clip_state* s = state;
    float bound[2] = {s->has_min ? s->min : -FLT_MAX, s->has_max ? s->max : FLT_MAX};
    for (int k = 1; k < n_in && k < 3; ++k) {
        if (in[k] == NULL) continue;
        if (in[k]->host == NULL || in[k]->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ||
            epabi_numel(in[k]->rank, in[k]->dims) != 1)
            return false;
        bound[k - 1] = *(const float*)in[k]->host;
    }
    *out = (struct chain_op){.kind = CHAIN_CLIP, .op = UN_CLIP, .out = -1, .alpha = bound[0], .beta = bound[1]};
    return n_in >= 1 && n_in <= 3;
}

/* ---- CUDA coverage ------------------------------------------------------------------------------------------ */

/* CUDA: Relu, Abs, Neg and Sign have int32 and int64 kernels besides float and double (un_i32, un_i64). */
static bool cuda_float_or_index(const struct epabi_node* node, char* why, size_t why_len) {
    const ONNXTensorElementDataType t = epabi_cuda_in_dtype(node, 0);
    return epabi_cuda_floating(t) || epabi_is_index_dtype(t) || epabi_cuda_refuse(node, why, why_len, "input", t);
}

/* Neg and Clip (like Add or Mod) may be host steps of int shape computations (plan.h), e.g. a clamped slice bound.
 * Opset ranges: versions 6 and 13 differ only in types (13 adds bfloat16), as do 7/11 and 22 of Sin, Cos and
 * Round, 6 and 22 of HardSigmoid, 14 and 22 of HardSwish, 6 and 16 of LeakyRelu; Relu 14 adds integer types;
 * Erf starts at 9, Sign at 9; Abs-1, Neg-1, Floor-1, Ceil-1, Log-1 and HardSigmoid-1 had the legacy
 * consumed_inputs attribute. Clip: 6 has min/max attributes, 11 inputs, 12 integer types, 13 bfloat16. */
const struct epabi_kernel epabi_kernels_unary[] = {
    {.op_type = "Sqrt", .since_min = 6, .since_max = 13, .supports = supports_sqrt, .run = run_sqrt,
     .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input,
     .chain_link = link_sqrt},
    {.op_type = "Reciprocal", .since_min = 6, .since_max = 13, .supports = supports_reciprocal,
     .run = run_reciprocal, .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input,
     .chain_link = link_reciprocal},
    {.op_type = "Exp", .since_min = 6, .since_max = 13, .supports = supports_exp, .run = run_exp,
     .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input,
     .chain_link = link_exp},
    {.op_type = "Erf", .since_min = 9, .since_max = 13, .supports = supports_erf, .run = run_erf,
     .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input,
     .chain_link = link_erf},
    {.op_type = "Tanh", .since_min = 6, .since_max = 13, .supports = supports_tanh, .run = run_tanh,
     .launch = EPABI_LAUNCH_UNARY, .as_epilogue = EPABI_EPILOGUE_TANH, .cuda = epabi_cuda_floating_input,
     .linear_activation = tanh_activation,
     .chain_link = link_tanh},
    {.op_type = "Relu", .since_min = 6, .since_max = 14, .supports = supports_relu, .run = run_relu,
     .launch = EPABI_LAUNCH_UNARY, .as_epilogue = EPABI_EPILOGUE_RELU, .cuda = cuda_float_or_index,
     .linear_activation = relu_activation,
     .chain_link = link_relu},
    {.op_type = "Sigmoid", .since_min = 6, .since_max = 13, .supports = supports_sigmoid, .run = run_sigmoid,
     .launch = EPABI_LAUNCH_UNARY, .as_epilogue = EPABI_EPILOGUE_SIGMOID, .times_input = EPABI_EPILOGUE_SILU,
     .cuda = epabi_cuda_floating_input, .linear_activation = sigmoid_activation,
     .chain_link = link_sigmoid},
    {.op_type = "Abs", .since_min = 6, .since_max = 13, .supports = supports_abs, .run = run_abs,
     .launch = EPABI_LAUNCH_UNARY, .cuda = cuda_float_or_index,
     .chain_link = link_abs},
    {.op_type = "Neg", .since_min = 6, .since_max = 13, .supports = supports_neg, .run = run_neg,
     .launch = EPABI_LAUNCH_UNARY, .host_step = true, .cuda = cuda_float_or_index,
     .chain_link = link_neg},
    {.op_type = "Floor", .since_min = 6, .since_max = 13, .supports = supports_floor, .run = run_floor,
     .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input,
     .chain_link = link_floor},
    {.op_type = "Ceil", .since_min = 6, .since_max = 13, .supports = supports_ceil, .run = run_ceil,
     .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input,
     .chain_link = link_ceil},
    {.op_type = "Round", .since_min = 11, .since_max = 22, .supports = supports_round, .run = run_round,
     .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input,
     .chain_link = link_round},
    {.op_type = "Log", .since_min = 6, .since_max = 13, .supports = supports_log, .run = run_log,
     .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input,
     .chain_link = link_log},
    {.op_type = "Sin", .since_min = 7, .since_max = 22, .supports = supports_sin, .run = run_sin,
     .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input,
     .chain_link = link_sin},
    {.op_type = "Cos", .since_min = 7, .since_max = 22, .supports = supports_cos, .run = run_cos,
     .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input,
     .chain_link = link_cos},
    {.op_type = "Sign", .since_min = 9, .since_max = 13, .supports = supports_sign, .run = run_sign,
     .launch = EPABI_LAUNCH_UNARY, .cuda = cuda_float_or_index,
     .chain_link = link_sign},
    {.op_type = "Not", .since_min = 1, .since_max = 1, .supports = supports_not, .run = run_not,
     .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_bool_inputs},
    {.op_type = "Clip", .since_min = 6, .since_max = 13, .supports = supports_clip, .init = init_clip,
     .release = free, .run = run_clip, .launch = EPABI_LAUNCH_UNARY, .host_step = true,
     .cuda = epabi_cuda_numeric_inputs,
     .chain_link = link_clip},
    {.op_type = "HardSigmoid", .since_min = 6, .since_max = 22, .supports = supports_hard_sigmoid,
     .init = init_hard_sigmoid, .release = free, .run = run_with_params, .launch = EPABI_LAUNCH_UNARY,
     .as_epilogue = EPABI_EPILOGUE_HARD_SIGMOID, .epilogue_params = params_of, .cuda = epabi_cuda_floating_input,
     .chain_link = link_params},
    {.op_type = "HardSwish", .since_min = 14, .since_max = 22, .supports = supports_hard_swish,
     .run = run_hard_swish, .launch = EPABI_LAUNCH_UNARY, .as_epilogue = EPABI_EPILOGUE_HARD_SWISH,
     .cuda = epabi_cuda_floating_input,
     .chain_link = link_hard_swish},
    {.op_type = "LeakyRelu", .since_min = 6, .since_max = 16, .supports = supports_leaky_relu,
     .init = init_leaky_relu, .release = free, .run = run_with_params, .launch = EPABI_LAUNCH_UNARY,
     .as_epilogue = EPABI_EPILOGUE_LEAKY_RELU, .epilogue_params = params_of, .cuda = epabi_cuda_floating_input,
     .chain_link = link_params},
    {.op_type = "Gelu", .since_min = 20, .since_max = 20, .supports = supports_gelu, .init = init_gelu,
     .release = free, .run = run_with_params, .launch = EPABI_LAUNCH_UNARY, .cuda = epabi_cuda_floating_input,
     .linear_activation = gelu_activation,
     .chain_link = link_params},
    {.op_type = NULL},
};
