/*
 * cast.c - Cast among float, double, int8, uint8, int16, uint16, int32, uint32, int64, uint64 and bool.
 *
 * Conversions follow C, as ONNX Runtime's CPU kernel (static_cast) does, with the undefined cases pinned to
 * what x86 produces: a NaN or out-of-range float converted to an integer gives the "integer indefinite"
 * value (INT32_MIN for 8/16/32-bit signed and unsigned targets, through int32 as compilers do; INT64_MIN
 * for 64-bit ones and uint32, through int64). Anything converted to bool is (x != 0); bool reads as 0/1.
 * Opsets 6 .. 24: later versions add only types this kernel does not accept (strings, float8, int4, ...).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_coverage.h"
#include "kernel.h"
#include "math_common.h"

struct cast_state {
    ONNXTensorElementDataType to;
};


/* float -> integer through the width a compiler converts through on x86 */
static inline int32_t f_to_i32(double v) {
    return v > -2147483649.0 && v < 2147483648.0 ? (int32_t)v : INT32_MIN;
}
static inline int64_t f_to_i64(double v) {
    return v >= -9223372036854775808.0 && v < 9223372036854775808.0 ? (int64_t)v : INT64_MIN;
}
static inline uint64_t f_to_u64(double v) {
    return v >= 0.0 && v < 18446744073709551616.0 ? (uint64_t)v : (uint64_t)f_to_i64(v);
}
static inline int8_t fto_INT8(double v) { return (int8_t)f_to_i32(v); }
static inline uint8_t fto_UINT8(double v) { return (uint8_t)f_to_i32(v); }
static inline int16_t fto_INT16(double v) { return (int16_t)f_to_i32(v); }
static inline uint16_t fto_UINT16(double v) { return (uint16_t)f_to_i32(v); }
static inline int32_t fto_INT32(double v) { return f_to_i32(v); }
static inline uint32_t fto_UINT32(double v) { return (uint32_t)f_to_i64(v); }
static inline int64_t fto_INT64(double v) { return f_to_i64(v); }
static inline uint64_t fto_UINT64(double v) { return f_to_u64(v); }

/* name, C type, kind: F floating, I integer, B bool (stored as one byte) */
#define CAST_TYPES(X)                                                                          \
    X(FLOAT, float, F) X(DOUBLE, double, F) X(INT8, int8_t, I) X(UINT8, uint8_t, I)            \
    X(INT16, int16_t, I) X(UINT16, uint16_t, I) X(INT32, int32_t, I) X(UINT32, uint32_t, I)    \
    X(INT64, int64_t, I) X(UINT64, uint64_t, I) X(BOOL, uint8_t, B)

#define CONV_F_F(DN, DT, v) ((DT)(v))
#define CONV_F_I(DN, DT, v) fto_##DN((double)(v))
#define CONV_F_B(DN, DT, v) ((DT)((v) != 0))
#define CONV_I_F(DN, DT, v) ((DT)(v))
#define CONV_I_I(DN, DT, v) ((DT)(v))
#define CONV_I_B(DN, DT, v) ((DT)((v) != 0))
#define CONV_B_F(DN, DT, v) ((DT)((v) != 0))
#define CONV_B_I(DN, DT, v) ((DT)((v) != 0))
#define CONV_B_B(DN, DT, v) ((DT)((v) != 0))

#define CAST_LOOP(SN, ST, SK, DN, DT, DK)                                                      \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_##DN: {                                                 \
        const ST* X = a->in;                                                                   \
        DT* Y = a->out;                                                                        \
        for (int64_t i = begin; i < end; ++i) Y[i] = CONV_##SK##_##DK(DN, DT, X[i]);          \
        break;                                                                                 \
    }

/* For one source type, a switch over every destination type. */
#define CAST_FROM(SN, ST, SK)                                                                  \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_##SN:                                                   \
        switch (a->to) {                                                                       \
            CAST_TO_ALL(SN, ST, SK)                                                            \
        default: break;                                                                        \
        }                                                                                      \
        break;

#define CAST_TO_ALL(SN, ST, SK)                                                                \
    CAST_LOOP(SN, ST, SK, FLOAT, float, F) CAST_LOOP(SN, ST, SK, DOUBLE, double, F)            \
    CAST_LOOP(SN, ST, SK, INT8, int8_t, I) CAST_LOOP(SN, ST, SK, UINT8, uint8_t, I)            \
    CAST_LOOP(SN, ST, SK, INT16, int16_t, I) CAST_LOOP(SN, ST, SK, UINT16, uint16_t, I)        \
    CAST_LOOP(SN, ST, SK, INT32, int32_t, I) CAST_LOOP(SN, ST, SK, UINT32, uint32_t, I)        \
    CAST_LOOP(SN, ST, SK, INT64, int64_t, I) CAST_LOOP(SN, ST, SK, UINT64, uint64_t, I)        \
    CAST_LOOP(SN, ST, SK, BOOL, uint8_t, B)

/* Elements [begin, end): one chunk of epabi_pool_for_range, compiled per x86-64 level so the conversions
 * vectorise as wide as the machine's vectors. */
EPABI_SIMD_CLONES static void cast_span(void* ctx, int64_t begin, int64_t end) {
    const struct cast_args* a = ctx;
    switch (a->from) {
        CAST_TYPES(CAST_FROM)
    default: break;
    }
}

static void cast_launch(const void* vargs) {
    const struct cast_args* a = vargs;
    epabi_pool_for_range(a->pool, a->n, 4 * (int64_t)EPABI_PARALLEL_MIN_ELEMS, cast_span, (void*)a);
}

static bool castable(ONNXTensorElementDataType t) {
    switch (t) {
#define CASE(N, T, K) case ONNX_TENSOR_ELEMENT_DATA_TYPE_##N:
        CAST_TYPES(CASE)
#undef CASE
        return true;
    default:
        return false;
    }
}

static bool supports_cast(const struct epabi_node* node, char* why, size_t why_len) {
    int64_t to = 0;
    if (node->n_in != 1 || node->n_out != 1) {
        snprintf(why, why_len, "%d inputs, %d outputs", node->n_in, node->n_out);
        return false;
    }
    if (!epabi_attr_int(node, "to", &to)) {
        snprintf(why, why_len, "attribute 'to' is missing");
        return false;
    }
    if (!castable((ONNXTensorElementDataType)to) || !castable(node->in[0].dtype)) {
        snprintf(why, why_len, "cast from %s to %s is not supported", epabi_dtype_name(node->in[0].dtype),
                 epabi_dtype_name((ONNXTensorElementDataType)to));
        return false;
    }
    if (node->out[0].dtype != (ONNXTensorElementDataType)to) {
        snprintf(why, why_len, "output dtype %s differs from 'to' (%s)", epabi_dtype_name(node->out[0].dtype),
                 epabi_dtype_name((ONNXTensorElementDataType)to));
        return false;
    }
    return true;
}

static OrtStatus* init_cast(const struct epabi_node* node, void** state) {
    int64_t to = 0;
    *state = NULL;
    if (!epabi_attr_int(node, "to", &to) || !castable((ONNXTensorElementDataType)to))
        return epabi_error(node->api, ORT_INVALID_ARGUMENT, "Cast node '%s': attribute 'to' is missing or unsupported",
                           node->name);
    struct cast_state* s = malloc(sizeof *s);
    if (s == NULL) return epabi_error(node->api, ORT_FAIL, "Cast node '%s': out of memory", node->name);
    s->to = (ONNXTensorElementDataType)to;
    *state = s;
    return NULL;
}

static void release_cast(void* state) {
    free(state);
}

static OrtStatus* run_cast(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                           int n_out) {
    (void)n_out;
    const struct cast_state* s = state;
    if (n_in != 1 || in[0] == NULL) return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "expected 1 input");
    if (!castable(in[0]->dtype))
        return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "cannot cast from %s",
                           epabi_dtype_name(in[0]->dtype));
    OrtStatus* st = NULL;
    struct epabi_tensor* out = epabi_exec_output(ex, 0, s->to, in[0]->rank, in[0]->dims, &st);
    if (out == NULL) return st;
    struct cast_args args = {in[0]->dtype, s->to, in[0]->data, out->data, epabi_numel(in[0]->rank, in[0]->dims),
                             epabi_exec_pool(ex)};
    if (args.n == 0) return NULL;
    return epabi_exec_launch(ex, EPABI_LAUNCH_CAST, cast_launch, &args, sizeof args);
}

static ONNXTensorElementDataType cast_target(const void* state) {
    return ((const struct cast_state*)state)->to;
}

/* CUDA: one kernel per numeric or bool source, converting to any numeric or bool target. */
static bool cuda_cast(const struct epabi_node* node, char* why, size_t why_len) {
    const ONNXTensorElementDataType from = epabi_cuda_in_dtype(node, 0);
    if (!epabi_cuda_castable(from)) return epabi_cuda_refuse(node, why, why_len, "input", from);
    if (node->n_out > 0 && !epabi_cuda_castable(node->out[0].dtype))
        return epabi_cuda_refuse(node, why, why_len, "output", node->out[0].dtype);
    return true;
}

const struct epabi_kernel epabi_kernels_cast[] = {
    {.op_type = "Cast", .since_min = 6, .since_max = 24, .supports = supports_cast, .init = init_cast,
     .release = release_cast, .run = run_cast, .launch = EPABI_LAUNCH_CAST, .host_step = true, .cuda = cuda_cast,
     .cast_to = cast_target},
    {.op_type = NULL},
};
