/*
 * elementwise.c - Add Sub Mul Div Pow Max Min Equal Where Mod Less Greater LessOrEqual GreaterOrEqual And Or with
 * numpy broadcasting.
 *
 * Types: Add/Sub/Mul/Div/Max/Min on float, double, int32, int64 (all inputs one type); Pow with a float or
 * double base and a float, double, int32 or int64 exponent; Equal on bool, float, double, int32, int64
 * (output bool); Where on a bool condition and any two same-typed 1/2/4/8-byte values. Max and Min are
 * variadic (one or more inputs). Integer arithmetic wraps (two's complement) instead of overflowing, and
 * integer division by zero is refused in run_div (the launch itself yields 0 rather than trapping). Max/Min propagate NaN.
 * Mod, Less, Greater, LessOrEqual and GreaterOrEqual on float, double and every integer width (the comparisons
 * give bool; NaN compares false); And and Or on bool. Mod's fmod=0 is Python's % (the divisor's sign) on
 * integers and, from opset 28, A - floor(A/B)*B on floats (earlier opsets refuse floats with fmod=0, which ORT's
 * CPU EP fails at run time); fmod=1 is C's % and fmod (the dividend's sign), exact on 64-bit integers. An
 * integer Mod by zero is refused as Div's is; x % -1 is 0 (no trap on the most negative value).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "cuda_coverage.h"
#include "kernel.h"
#include "math_common.h"

/* ---- inner loops: n elements along the last dimension ------------------------------------------- */

#define WRAP_ADD(T, U, a, b) ((T)((U)(a) + (U)(b)))
#define WRAP_SUB(T, U, a, b) ((T)((U)(a) - (U)(b)))
#define WRAP_MUL(T, U, a, b) ((T)((U)(a) * (U)(b)))

static inline int32_t div_i32(int32_t a, int32_t b) {
    if (b == 0) return 0;
    if (b == -1) return (int32_t)(0u - (uint32_t)a);
    return a / b;
}

static inline int64_t div_i64(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0ull - (uint64_t)a);
    return a / b;
}

static inline float max_f(float a, float b) { return isnan(a) || isnan(b) ? NAN : (a > b ? a : b); }
static inline float min_f(float a, float b) { return isnan(a) || isnan(b) ? NAN : (a < b ? a : b); }
static inline double max_d(double a, double b) { return isnan(a) || isnan(b) ? NAN : (a > b ? a : b); }
static inline double min_d(double a, double b) { return isnan(a) || isnan(b) ? NAN : (a < b ? a : b); }

#define LOOP2(T, EXPR)                                                                        \
    do {                                                                                      \
        const T* A = (const T*)pa;                                                            \
        const T* B = (const T*)pb;                                                            \
        T* O = (T*)po;                                                                        \
        for (int64_t i = 0; i < n; ++i) {                                                     \
            T a = A[i * sa], b = B[i * sb];                                                   \
            O[i] = (EXPR);                                                                    \
        }                                                                                     \
    } while (0)

#define ARITH_CASES(OPEXPR_F, OPEXPR_D, OPEXPR_I32, OPEXPR_I64)                                \
    switch (dtype) {                                                                          \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: LOOP2(float, OPEXPR_F); break;                 \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: LOOP2(double, OPEXPR_D); break;               \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: LOOP2(int32_t, OPEXPR_I32); break;             \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: LOOP2(int64_t, OPEXPR_I64); break;             \
    default: break;                                                                           \
    }

/* Float arithmetic over one row, with the fused Relu: a loop per stride pattern (both operands contiguous, or one of
 * them a single value), so that each is a plain indexed loop GCC vectorises; the output may be operand a (Max/Min
 * accumulate in place), so nothing is restrict. Compiled per x86-64 level. */
#define F32_ROW(EXPR)                                                                          \
    do {                                                                                       \
        if (sa == 1 && sb == 1) {                                                              \
            for (int64_t i = 0; i < n; ++i) {                                                  \
                const float a = A[i], b = B[i];                                                \
                O[i] = (EXPR);                                                                 \
            }                                                                                  \
        } else if (sa == 0 && sb == 1) {                                                       \
            const float a = A[0];                                                              \
            for (int64_t i = 0; i < n; ++i) {                                                  \
                const float b = B[i];                                                          \
                O[i] = (EXPR);                                                                 \
            }                                                                                  \
        } else if (sa == 1 && sb == 0) {                                                       \
            const float b = B[0];                                                              \
            for (int64_t i = 0; i < n; ++i) {                                                  \
                const float a = A[i];                                                          \
                O[i] = (EXPR);                                                                 \
            }                                                                                  \
        } else {                                                                               \
            for (int64_t i = 0; i < n; ++i) {                                                  \
                const float a = A[i * sa], b = B[i * sb];                                      \
                O[i] = (EXPR);                                                                 \
            }                                                                                  \
        }                                                                                      \
    } while (0)

EPABI_SIMD_CLONES static void arith_f32(enum ew_op op, const float* A, int64_t sa, const float* B, int64_t sb,
                                        float* O, int64_t n, bool relu) {
    switch (op) {
    case OP_ADD: F32_ROW(a + b); break;
    case OP_SUB: F32_ROW(a - b); break;
    case OP_MUL: F32_ROW(a * b); break;
    case OP_DIV: F32_ROW(a / b); break;
    case OP_MAX: F32_ROW(max_f(a, b)); break;
    case OP_MIN: F32_ROW(min_f(a, b)); break;
    default: break;
    }
    if (relu)   /* as the Relu kernel: x < 0 -> 0, NaN stays NaN */
        for (int64_t i = 0; i < n; ++i) O[i] = O[i] < 0.0f ? 0.0f : O[i];
}
#undef F32_ROW

void epabi_arith_f32_span(int32_t op, const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n) {
    arith_f32((enum ew_op)op, a, sa, b, sb, o, n, false);
}

static void arith_row(enum ew_op op, ONNXTensorElementDataType dtype, const void* pa, int64_t sa, const void* pb,
                      int64_t sb, void* po, int64_t n) {
    switch (op) {
    case OP_ADD:
        ARITH_CASES(a + b, a + b, WRAP_ADD(int32_t, uint32_t, a, b), WRAP_ADD(int64_t, uint64_t, a, b));
        break;
    case OP_SUB:
        ARITH_CASES(a - b, a - b, WRAP_SUB(int32_t, uint32_t, a, b), WRAP_SUB(int64_t, uint64_t, a, b));
        break;
    case OP_MUL:
        ARITH_CASES(a * b, a * b, WRAP_MUL(int32_t, uint32_t, a, b), WRAP_MUL(int64_t, uint64_t, a, b));
        break;
    case OP_DIV:
        ARITH_CASES(a / b, a / b, div_i32(a, b), div_i64(a, b));
        break;
    case OP_MAX:
        ARITH_CASES(max_f(a, b), max_d(a, b), (a > b ? a : b), (a > b ? a : b));
        break;
    case OP_MIN:
        ARITH_CASES(min_f(a, b), min_d(a, b), (a < b ? a : b), (a < b ? a : b));
        break;
    default:
        break;
    }
}

static double load_as_double(ONNXTensorElementDataType dtype, const void* p, int64_t i) {
    switch (dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return ((const float*)p)[i];
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return ((const double*)p)[i];
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return ((const int32_t*)p)[i];
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return (double)((const int64_t*)p)[i];
    default: return 0;
    }
}

static void pow_row(ONNXTensorElementDataType base_t, ONNXTensorElementDataType exp_t, const void* pa, int64_t sa,
                    const void* pb, int64_t sb, void* po, int64_t n) {
    if (base_t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        const float* A = pa;
        float* O = po;
        if (exp_t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
            const float* B = pb;
            for (int64_t i = 0; i < n; ++i) O[i] = powf(A[i * sa], B[i * sb]);
        } else {
            for (int64_t i = 0; i < n; ++i) O[i] = (float)pow(A[i * sa], load_as_double(exp_t, pb, i * sb));
        }
    } else {
        const double* A = pa;
        double* O = po;
        for (int64_t i = 0; i < n; ++i) O[i] = pow(A[i * sa], load_as_double(exp_t, pb, i * sb));
    }
}

/* O[i] = EXPR(A[i * sa], B[i * sb]) with a loop per stride pattern (both contiguous, or one a single value), so
 * that GCC vectorises the common ones (an index times a run-time stride it does not). */
#define PATTERN_LOOP(EXPR)                                                                     \
    do {                                                                                       \
        if (sa == 1 && sb == 1) {                                                              \
            for (int64_t i = 0; i < n; ++i) O[i] = EXPR(A[i], B[i]);                           \
        } else if (sa == 0 && sb == 1) {                                                       \
            const __typeof__(A[0]) a0 = A[0];                                                  \
            for (int64_t i = 0; i < n; ++i) O[i] = EXPR(a0, B[i]);                             \
        } else if (sa == 1 && sb == 0) {                                                       \
            const __typeof__(B[0]) b0 = B[0];                                                  \
            for (int64_t i = 0; i < n; ++i) O[i] = EXPR(A[i], b0);                             \
        } else {                                                                               \
            for (int64_t i = 0; i < n; ++i) O[i] = EXPR(A[i * sa], B[i * sb]);                 \
        }                                                                                      \
    } while (0)

EPABI_SIMD_CLONES static void equal_row(ONNXTensorElementDataType dtype, const void* pa, int64_t sa, const void* pb,
                                        int64_t sb, void* po, int64_t n) {
    uint8_t* O = po;
#define EQ_LOOP(T, EQ)                                                   \
    do {                                                                 \
        const T* A = pa;                                                 \
        const T* B = pb;                                                 \
        PATTERN_LOOP(EQ);                                                \
    } while (0)
#define EQ_PLAIN(x, y) ((uint8_t)((x) == (y)))
#define EQ_BOOL(x, y) ((uint8_t)(((x) != 0) == ((y) != 0)))
    switch (dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: EQ_LOOP(float, EQ_PLAIN); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: EQ_LOOP(double, EQ_PLAIN); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: EQ_LOOP(int32_t, EQ_PLAIN); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: EQ_LOOP(int64_t, EQ_PLAIN); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: EQ_LOOP(uint8_t, EQ_BOOL); break;
    default: break;
    }
#undef EQ_LOOP
#undef EQ_PLAIN
#undef EQ_BOOL
}

/* Less/Greater/LessOrEqual/GreaterOrEqual over the numeric dtypes, And/Or over bool: one byte 0/1 each. */
EPABI_SIMD_CLONES static void compare_row(enum ew_op op, ONNXTensorElementDataType dtype, const void* pa, int64_t sa,
                                          const void* pb, int64_t sb, void* po, int64_t n) {
    uint8_t* O = po;
#define CMP_LOOP(T, CMP)                                                                       \
    do {                                                                                       \
        const T* A = pa;                                                                       \
        const T* B = pb;                                                                       \
        PATTERN_LOOP(CMP);                                                                     \
    } while (0)
#define CMP_LT(x, y) ((uint8_t)((x) < (y)))
#define CMP_GT(x, y) ((uint8_t)((x) > (y)))
#define CMP_LE(x, y) ((uint8_t)((x) <= (y)))
#define CMP_GE(x, y) ((uint8_t)((x) >= (y)))
#define CMP_AND(x, y) ((uint8_t)((x) && (y)))
#define CMP_OR(x, y) ((uint8_t)((x) || (y)))
#define CMP_NUMERIC(CMP)                                                                       \
    switch (dtype) {                                                                           \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: CMP_LOOP(float, CMP); break;                     \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: CMP_LOOP(double, CMP); break;                   \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: CMP_LOOP(int8_t, CMP); break;                     \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: CMP_LOOP(uint8_t, CMP); break;                   \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: CMP_LOOP(int16_t, CMP); break;                   \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: CMP_LOOP(uint16_t, CMP); break;                 \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: CMP_LOOP(int32_t, CMP); break;                   \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: CMP_LOOP(uint32_t, CMP); break;                 \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: CMP_LOOP(int64_t, CMP); break;                   \
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: CMP_LOOP(uint64_t, CMP); break;                 \
    default: break;                                                                            \
    }
    switch (op) {
    case OP_LESS: CMP_NUMERIC(CMP_LT); break;
    case OP_GREATER: CMP_NUMERIC(CMP_GT); break;
    case OP_LESS_EQUAL: CMP_NUMERIC(CMP_LE); break;
    case OP_GREATER_EQUAL: CMP_NUMERIC(CMP_GE); break;
    case OP_AND: CMP_LOOP(uint8_t, CMP_AND); break;
    case OP_OR: CMP_LOOP(uint8_t, CMP_OR); break;
    default: break;
    }
#undef CMP_NUMERIC
#undef CMP_LOOP
#undef CMP_LT
#undef CMP_GT
#undef CMP_LE
#undef CMP_GE
#undef CMP_AND
#undef CMP_OR
}

/* Integer remainders in 64 bits (the result is smaller than the divisor, so it fits the operands' type). A zero
 * divisor gives 0 (run_mod refuses the ones it can read), and so does -1, whose remainder is always 0 but whose
 * division of the most negative value would trap. */
static inline int64_t mod_signed(int64_t a, int64_t b, bool floor_mod) {
    if (b == 0 || b == -1) return 0;
    int64_t r = a % b;
    return floor_mod && r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

static inline uint64_t mod_unsigned(uint64_t a, uint64_t b) { return b == 0 ? 0 : a % b; }

/* A - floor(A/B)*B through fmod, so the result is exact; a zero result takes the divisor's sign (numpy's mod). */
static inline float mod_floor_f(float a, float b) {
    float r = fmodf(a, b);
    if (r == 0.0f) return copysignf(0.0f, b);
    return (r < 0.0f) != (b < 0.0f) ? r + b : r;
}

static inline double mod_floor_d(double a, double b) {
    double r = fmod(a, b);
    if (r == 0.0) return copysign(0.0, b);
    return (r < 0.0) != (b < 0.0) ? r + b : r;
}

/* OP_MOD (the divisor's sign) and OP_FMOD (the dividend's sign) over the numeric dtypes. */
static void mod_row(enum ew_op op, ONNXTensorElementDataType dtype, const void* pa, int64_t sa, const void* pb,
                    int64_t sb, void* po, int64_t n) {
    const bool fl = op == OP_MOD;
    switch (dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: LOOP2(float, fl ? mod_floor_f(a, b) : fmodf(a, b)); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: LOOP2(double, fl ? mod_floor_d(a, b) : fmod(a, b)); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: LOOP2(int8_t, (int8_t)mod_signed(a, b, fl)); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: LOOP2(uint8_t, (uint8_t)mod_unsigned(a, b)); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: LOOP2(int16_t, (int16_t)mod_signed(a, b, fl)); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: LOOP2(uint16_t, (uint16_t)mod_unsigned(a, b)); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: LOOP2(int32_t, (int32_t)mod_signed(a, b, fl)); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: LOOP2(uint32_t, (uint32_t)mod_unsigned(a, b)); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: LOOP2(int64_t, mod_signed(a, b, fl)); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: LOOP2(uint64_t, mod_unsigned(a, b)); break;
    default: break;
    }
}

/* Where and Copy move whole elements, so they only care about the element size. */
static void select_row(size_t esize, const void* pc, int64_t sc, const void* px, int64_t sx, const void* py,
                       int64_t sy, void* po, int64_t n) {
    const uint8_t* C = pc;
#define SEL_LOOP(T)                                                                            \
    do {                                                                                       \
        const T* X = px;                                                                       \
        const T* Y = py;                                                                       \
        T* O = po;                                                                             \
        for (int64_t i = 0; i < n; ++i) O[i] = C == NULL || C[i * sc] != 0 ? X[i * sx] : Y[i * sy]; \
    } while (0)
    switch (esize) {
    case 1: SEL_LOOP(uint8_t); break;
    case 2: SEL_LOOP(uint16_t); break;
    case 4: SEL_LOOP(uint32_t); break;
    case 8: SEL_LOOP(uint64_t); break;
    default: break;
    }
#undef SEL_LOOP
}

/* The fused Relu (plan_passes.c): as the Relu kernel, x < 0 -> 0 and NaN stays NaN. */
static void relu_row(ONNXTensorElementDataType dtype, void* row, int64_t n) {
    if (dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        float* y = row;
        for (int64_t i = 0; i < n; ++i) y[i] = y[i] < 0.0f ? 0.0f : y[i];
    } else if (dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE) {
        double* y = row;
        for (int64_t i = 0; i < n; ++i) y[i] = y[i] < 0.0 ? 0.0 : y[i];
    }
}

/* An integer divisor row holding a zero (err_word is set only for integer Div and Mod). */
static bool divisor_has_zero(size_t esize, const unsigned char* p, int64_t stride, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const unsigned char* e = p + i * stride * (int64_t)esize;
        bool zero = true;
        for (size_t k = 0; k < esize && zero; ++k) zero = e[k] == 0;
        if (zero) return true;
    }
    return false;
}

/* One row of n elements: operand k at p[k] with stride s[k] along the row. */
static void ew_row(const struct ew_args* a, const unsigned char* const* p, const int64_t* s, void* o, int64_t n) {
    switch (a->op) {
    case OP_POW:
        pow_row(a->dtype, a->dtype1, p[0], s[0], p[1], s[1], o, n);
        break;
    case OP_EQUAL:
        equal_row(a->dtype, p[0], s[0], p[1], s[1], o, n);
        break;
    case OP_WHERE:
        select_row(a->out_esize, p[0], s[0], p[1], s[1], p[2], s[2], o, n);
        break;
    case OP_COPY:
        select_row(a->out_esize, NULL, 0, p[0], s[0], p[0], s[0], o, n);
        break;
    case OP_MOD:
    case OP_FMOD:
        mod_row(a->op, a->dtype, p[0], s[0], p[1], s[1], o, n);
        if (a->err_word != NULL && divisor_has_zero(a->esize[1], p[1], s[1], n))
            epabi_launch_report(a->err_word, a->err_site);
        break;
    case OP_LESS:
    case OP_GREATER:
    case OP_LESS_EQUAL:
    case OP_GREATER_EQUAL:
    case OP_AND:
    case OP_OR:
        compare_row(a->op, a->dtype, p[0], s[0], p[1], s[1], o, n);
        break;
    default:
        if (a->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
            arith_f32(a->op, (const float*)p[0], s[0], (const float*)p[1], s[1], o, n,
                      a->epilogue == EPABI_EPILOGUE_RELU);
            break;
        }
        arith_row(a->op, a->dtype, p[0], s[0], p[1], s[1], o, n);
        if (a->epilogue == EPABI_EPILOGUE_RELU) relu_row(a->dtype, o, n);
        if (a->err_word != NULL && divisor_has_zero(a->esize[1], p[1], s[1], n))
            epabi_launch_report(a->err_word, a->err_site);
        break;
    }
}

/* Output elements [begin, end) in row-major order: the odometer over the outer dims starts at begin's row, and
 * the first and last rows may be partial. One chunk of epabi_pool_for_range. */
static void ew_span(void* ctx, int64_t begin, int64_t end) {
    const struct ew_args* a = ctx;
    const int r = a->rank;
    const int64_t inner = a->dims[r - 1];
    int64_t idx[EPABI_MAX_RANK] = {0};
    int64_t off[3] = {0, 0, 0};
    int64_t col = begin % inner;
    for (int64_t rest = begin / inner, d = r - 2; d >= 0; --d) {
        idx[d] = rest % a->dims[d];
        rest /= a->dims[d];
        for (int k = 0; k < a->n_ops; ++k) off[k] += idx[d] * a->strides[k][d];
    }
    int64_t s[3];
    for (int k = 0; k < a->n_ops; ++k) s[k] = a->strides[k][r - 1];
    for (int64_t at = begin; at < end;) {
        const int64_t n = inner - col < end - at ? inner - col : end - at;
        const unsigned char* p[3];
        for (int k = 0; k < a->n_ops; ++k)
            p[k] = (const unsigned char*)a->in[k] + (off[k] + col * s[k]) * (int64_t)a->esize[k];
        ew_row(a, p, s, (unsigned char*)a->out + at * (int64_t)a->out_esize, n);
        at += n;
        col = 0;
        for (int d = r - 2; d >= 0; --d) {   /* advance the odometer over the outer dimensions */
            for (int k = 0; k < a->n_ops; ++k) off[k] += a->strides[k][d];
            if (++idx[d] < a->dims[d]) break;
            for (int k = 0; k < a->n_ops; ++k) off[k] -= a->strides[k][d] * a->dims[d];
            idx[d] = 0;
        }
    }
}

/* Cheap ops (add, compare, select) are worth a thread from four times EPABI_PARALLEL_MIN_ELEMS elements; Pow and
 * float Mod call libm per element. */
static void ew_launch(const void* vargs) {
    const struct ew_args* a = vargs;
    const int64_t n = epabi_numel(a->rank, a->dims);
    const bool costly = a->op == OP_POW || a->op == OP_MOD || a->op == OP_FMOD || a->op == OP_DIV;
    epabi_pool_for_range(a->pool, n, (costly ? 1 : 4) * (int64_t)EPABI_PARALLEL_MIN_ELEMS, ew_span, (void*)a);
}

/* Merges adjacent dims that every operand walks as one (strides[d] == strides[d+1] * dims[d+1], broadcast ones
 * included) and drops unit dims, so rows are as long as the layout allows: a scalar times a tensor is one row. */
static void ew_coalesce(struct ew_args* a) {
    int r = 0;
    for (int d = 0; d < a->rank; ++d) {
        if (a->dims[d] == 1) continue;
        bool merge = r > 0;
        for (int k = 0; k < a->n_ops && merge; ++k)
            merge = a->strides[k][r - 1] == a->strides[k][d] * a->dims[d];
        if (merge) {
            a->dims[r - 1] *= a->dims[d];
            for (int k = 0; k < a->n_ops; ++k) a->strides[k][r - 1] = a->strides[k][d];
            continue;
        }
        a->dims[r] = a->dims[d];
        for (int k = 0; k < a->n_ops; ++k) a->strides[k][r] = a->strides[k][d];
        ++r;
    }
    if (r == 0) {
        a->dims[0] = 1;
        for (int k = 0; k < a->n_ops; ++k) a->strides[k][0] = 0;
        r = 1;
    }
    for (int d = r; d < a->rank; ++d) {
        a->dims[d] = 0;
        for (int k = 0; k < a->n_ops; ++k) a->strides[k][d] = 0;
    }
    a->rank = r;
}

/* Broadcast strides of one operand against the output shape (both right-aligned). */
static void operand_strides(const struct epabi_tensor* t, int out_rank, const int64_t* out_dims, int64_t* strides) {
    int64_t s = 1;
    for (int d = out_rank - 1; d >= 0; --d) {
        int td = d - (out_rank - t->rank);
        if (td < 0) {
            strides[d] = 0;
            continue;
        }
        strides[d] = t->dims[td] == 1 && out_dims[d] != 1 ? 0 : s;
        s *= t->dims[td];
    }
}

static void format_shape(const struct epabi_tensor* t, char* buf, size_t len) {
    size_t used = 0;
    used += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < t->rank && used < len; ++i)
        used += (size_t)snprintf(buf + used, len - used, i == 0 ? "%lld" : ",%lld", (long long)t->dims[i]);
    if (used < len) snprintf(buf + used, len - used, "]");
}

static OrtStatus* broadcast_error(struct epabi_exec* ex, const struct epabi_tensor* a, const struct epabi_tensor* b) {
    char sa[128], sb[128];
    format_shape(a, sa, sizeof sa);
    format_shape(b, sb, sizeof sb);
    return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "shapes %s and %s cannot be broadcast together", sa,
                       sb);
}

/* Output shape of all operands; an error names the first incompatible pair. */
static OrtStatus* broadcast_all(struct epabi_exec* ex, const struct epabi_tensor* const* in, int n, int* rank,
                                int64_t* dims) {
    *rank = in[0]->rank;
    memcpy(dims, in[0]->dims, sizeof(int64_t) * (size_t)in[0]->rank);
    for (int k = 1; k < n; ++k) {
        if (!epabi_broadcast_shape(*rank, dims, in[k]->rank, in[k]->dims, rank, dims))
            return broadcast_error(ex, in[0], in[k]);
    }
    return NULL;
}

/* Fills the geometry of args for operands ops[0..n) and an output of the given shape, then launches. */
static OrtStatus* launch(struct epabi_exec* ex, struct ew_args* args, const struct epabi_tensor* const* ops, int n,
                         const struct epabi_tensor* out) {
    args->n_ops = n;
    args->rank = out->rank > 0 ? out->rank : 1;
    if (out->rank == 0) {
        args->dims[0] = 1;
        for (int k = 0; k < n; ++k) args->strides[k][0] = 0;
    } else {
        memcpy(args->dims, out->dims, sizeof(int64_t) * (size_t)out->rank);
        for (int k = 0; k < n; ++k) operand_strides(ops[k], out->rank, out->dims, args->strides[k]);
    }
    for (int k = 0; k < n; ++k) {
        args->in[k] = ops[k]->data;
        args->esize[k] = epabi_dtype_size(ops[k]->dtype);
    }
    args->out = out->data;
    args->out_esize = epabi_dtype_size(out->dtype);
    args->pool = epabi_exec_pool(ex);
    if (epabi_numel(out->rank, out->dims) == 0) return NULL;
    ew_coalesce(args);
    return epabi_exec_launch(ex, EPABI_LAUNCH_ELEMENTWISE, ew_launch, args, sizeof *args);
}

/* ---- supports() -------------------------------------------------------------------------------- */

static bool is_arith_type(ONNXTensorElementDataType t) {
    return t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE ||
           t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
}

static bool static_shapes_broadcast(const struct epabi_node* node, char* why, size_t why_len) {
    int rank = -1;
    int64_t dims[EPABI_MAX_RANK];
    for (int k = 0; k < node->n_in; ++k) {
        const struct epabi_value_desc* v = &node->in[k];
        if (v->rank < 0) return true;   /* unknown: checked at run time */
        for (int d = 0; d < v->rank; ++d)
            if (v->dims[d] < 0) return true;
        if (rank < 0) {
            rank = v->rank;
            memcpy(dims, v->dims, sizeof(int64_t) * (size_t)rank);
        } else if (!epabi_broadcast_shape(rank, dims, v->rank, v->dims, &rank, dims)) {
            snprintf(why, why_len, "input shapes cannot be broadcast together");
            return false;
        }
    }
    return true;
}

static bool same_type_inputs(const struct epabi_node* node, int first, char* why, size_t why_len) {
    for (int k = first; k < node->n_in; ++k) {
        if (node->in[k].name[0] == '\0') {
            snprintf(why, why_len, "input %d is absent", k);
            return false;
        }
        if (node->in[k].dtype != node->in[first].dtype) {
            snprintf(why, why_len, "inputs have different dtypes (%s, %s)", epabi_dtype_name(node->in[first].dtype),
                     epabi_dtype_name(node->in[k].dtype));
            return false;
        }
    }
    return true;
}

static bool supports_arith(const struct epabi_node* node, char* why, size_t why_len) {
    bool variadic = strcmp(node->op_type, "Max") == 0 || strcmp(node->op_type, "Min") == 0;
    if (variadic ? node->n_in < 1 : node->n_in != 2) {
        snprintf(why, why_len, "%d inputs", node->n_in);
        return false;
    }
    if (node->n_out != 1) {
        snprintf(why, why_len, "%d outputs", node->n_out);
        return false;
    }
    if (!same_type_inputs(node, 0, why, why_len)) return false;
    if (!is_arith_type(node->in[0].dtype)) {
        snprintf(why, why_len, "dtype %s is not supported", epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    if (node->out[0].dtype != node->in[0].dtype) {
        snprintf(why, why_len, "output dtype %s differs from the inputs'", epabi_dtype_name(node->out[0].dtype));
        return false;
    }
    return static_shapes_broadcast(node, why, why_len);
}

static bool supports_pow(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in != 2 || node->n_out != 1) {
        snprintf(why, why_len, "%d inputs, %d outputs", node->n_in, node->n_out);
        return false;
    }
    ONNXTensorElementDataType b = node->in[0].dtype, e = node->in[1].dtype;
    if (b != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT && b != ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE) {
        snprintf(why, why_len, "base dtype %s is not supported (float, double)", epabi_dtype_name(b));
        return false;
    }
    if (!is_arith_type(e)) {
        snprintf(why, why_len, "exponent dtype %s is not supported", epabi_dtype_name(e));
        return false;
    }
    if (node->out[0].dtype != b) {
        snprintf(why, why_len, "output dtype %s differs from the base's", epabi_dtype_name(node->out[0].dtype));
        return false;
    }
    return static_shapes_broadcast(node, why, why_len);
}

static bool supports_equal(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in != 2 || node->n_out != 1) {
        snprintf(why, why_len, "%d inputs, %d outputs", node->n_in, node->n_out);
        return false;
    }
    if (!same_type_inputs(node, 0, why, why_len)) return false;
    ONNXTensorElementDataType t = node->in[0].dtype;
    if (!is_arith_type(t) && t != ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL) {
        snprintf(why, why_len, "dtype %s is not supported", epabi_dtype_name(t));
        return false;
    }
    if (node->out[0].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL) {
        snprintf(why, why_len, "output dtype %s is not bool", epabi_dtype_name(node->out[0].dtype));
        return false;
    }
    return static_shapes_broadcast(node, why, why_len);
}

static bool supports_where(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in != 3 || node->n_out != 1) {
        snprintf(why, why_len, "%d inputs, %d outputs", node->n_in, node->n_out);
        return false;
    }
    if (node->in[0].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL) {
        snprintf(why, why_len, "condition dtype %s is not bool", epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    if (!same_type_inputs(node, 1, why, why_len)) return false;
    size_t es = epabi_dtype_size(node->in[1].dtype);
    if (es != 1 && es != 2 && es != 4 && es != 8) {
        snprintf(why, why_len, "dtype %s is not supported", epabi_dtype_name(node->in[1].dtype));
        return false;
    }
    if (node->out[0].dtype != node->in[1].dtype) {
        snprintf(why, why_len, "output dtype %s differs from the inputs'", epabi_dtype_name(node->out[0].dtype));
        return false;
    }
    return static_shapes_broadcast(node, why, why_len);
}

/* Two same-typed inputs of `ok` dtypes and an output of out_type (UNDEFINED: the inputs' type). */
static bool supports_two(const struct epabi_node* node, bool (*ok)(ONNXTensorElementDataType),
                         ONNXTensorElementDataType out_type, char* why, size_t why_len) {
    if (node->n_in != 2 || node->n_out != 1) {
        snprintf(why, why_len, "%d inputs, %d outputs", node->n_in, node->n_out);
        return false;
    }
    if (!same_type_inputs(node, 0, why, why_len)) return false;
    const ONNXTensorElementDataType t = node->in[0].dtype;
    if (!ok(t)) {
        snprintf(why, why_len, "dtype %s is not supported", epabi_dtype_name(t));
        return false;
    }
    const ONNXTensorElementDataType want = out_type != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED ? out_type : t;
    if (node->out[0].dtype != want) {
        snprintf(why, why_len, "output dtype %s is not %s", epabi_dtype_name(node->out[0].dtype),
                 epabi_dtype_name(want));
        return false;
    }
    return static_shapes_broadcast(node, why, why_len);
}

static bool is_bool(ONNXTensorElementDataType t) { return t == ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL; }

static bool is_floating(ONNXTensorElementDataType t) {
    return t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;
}

static bool supports_compare(const struct epabi_node* node, char* why, size_t why_len) {
    return supports_two(node, epabi_is_numeric_dtype, ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL, why, why_len);
}

static bool supports_logic(const struct epabi_node* node, char* why, size_t why_len) {
    return supports_two(node, is_bool, ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL, why, why_len);
}

/* Mod's fmod attribute: 0 (default) or 1; floats take fmod=0 only from opset 28. */
static bool supports_mod(const struct epabi_node* node, char* why, size_t why_len) {
    if (!supports_two(node, epabi_is_numeric_dtype, ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED, why, why_len))
        return false;
    int64_t fmod_attr = 0;
    epabi_attr_int(node, "fmod", &fmod_attr);
    if (fmod_attr != 0 && fmod_attr != 1) {
        snprintf(why, why_len, "fmod=%lld is not 0 or 1", (long long)fmod_attr);
        return false;
    }
    if (fmod_attr == 0 && is_floating(node->in[0].dtype) && node->since_version < 28) {
        snprintf(why, why_len, "fmod=0 on %s needs opset 28 (before it, floating-point Mod must set fmod=1)",
                 epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    return true;
}

/* ---- run() -------------------------------------------------------------------------------------- */

static OrtStatus* check_same_dtype(struct epabi_exec* ex, const struct epabi_tensor* const* in, int first, int n) {
    for (int k = first; k < n; ++k) {
        if (in[k] == NULL)
            return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "input %d is absent", k);
        if (in[k]->dtype != in[first]->dtype)
            return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "inputs have dtypes %s and %s",
                               epabi_dtype_name(in[first]->dtype), epabi_dtype_name(in[k]->dtype));
    }
    return NULL;
}

static OrtStatus* run_binary(struct epabi_exec* ex, enum ew_op op, const struct epabi_tensor* const* in, int n_in,
                             ONNXTensorElementDataType out_type) {
    if (n_in != 2 || in[0] == NULL || in[1] == NULL)
        return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "expected 2 inputs");
    int rank = 0;
    int64_t dims[EPABI_MAX_RANK];
    EPABI_RETURN_IF_ERROR(broadcast_all(ex, in, 2, &rank, dims));
    OrtStatus* st = NULL;
    struct epabi_tensor* out = epabi_exec_output(ex, 0, out_type, rank, dims, &st);
    if (out == NULL) return st;
    struct ew_args args;
    memset(&args, 0, sizeof args);
    args.op = op;
    args.dtype = in[0]->dtype;
    args.dtype1 = in[1]->dtype;
    args.epilogue = epabi_exec_epilogue(ex);
    /* an integer zero divisor the host could not see before the launch (a replay, device data) is reported by
     * the launch itself (run_div, run_mod check what the host can read) */
    if ((op == OP_DIV || op == OP_MOD || op == OP_FMOD) && !is_floating(in[1]->dtype)) {
        args.err_word = epabi_exec_error_word(ex);
        args.err_site = epabi_exec_error_site(ex, EPABI_LAUNCH_ERR_DIV_ZERO);
    }
    return launch(ex, &args, in, 2, out);
}

#define ARITH_RUN(NAME, OP)                                                                                 \
    static OrtStatus* run_##NAME(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, \
                                 int n_in, int n_out) {                                                     \
        (void)state;                                                                                        \
        (void)n_out;                                                                                        \
        if (n_in == 2 && in[0] != NULL) EPABI_RETURN_IF_ERROR(check_same_dtype(ex, in, 0, n_in));           \
        return run_binary(ex, OP, in, n_in, n_in > 0 && in[0] != NULL ? in[0]->dtype : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED); \
    }
ARITH_RUN(add, OP_ADD)
ARITH_RUN(sub, OP_SUB)
ARITH_RUN(mul, OP_MUL)
#undef ARITH_RUN

/* An integer divisor of zero is an error, as in ORT's CPU EP; the divisor is checked here on the host
 * stream (earlier launches have run), and the launch still yields 0 rather than trapping on a replay. */
static OrtStatus* run_div(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                          int n_out) {
    (void)state;
    (void)n_out;
    if (n_in != 2 || in[0] == NULL || in[1] == NULL)
        return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "expected 2 inputs");
    EPABI_RETURN_IF_ERROR(check_same_dtype(ex, in, 0, n_in));
    const struct epabi_tensor* b = in[1];
    if (epabi_is_index_dtype(b->dtype)) {
        const int64_t n = epabi_numel(b->rank, b->dims);
        /* checked where the host can read the divisor; device-only divisors give 0 like the host kernel */
        for (int64_t i = 0; b->host != NULL && i < n; ++i)
            if (epabi_index_at(b->dtype, b->host, i) == 0)
                return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT,
                                   "Div: integer division by zero (divisor element %lld)", (long long)i);
    }
    return run_binary(ex, OP_DIV, in, n_in, in[0]->dtype);
}

static OrtStatus* run_pow(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                          int n_out) {
    (void)state;
    (void)n_out;
    if (n_in != 2 || in[0] == NULL || in[1] == NULL)
        return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "expected 2 inputs");
    return run_binary(ex, OP_POW, in, n_in, in[0]->dtype);
}

static OrtStatus* run_equal(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                            int n_out) {
    (void)state;
    (void)n_out;
    if (n_in == 2 && in[0] != NULL) EPABI_RETURN_IF_ERROR(check_same_dtype(ex, in, 0, n_in));
    return run_binary(ex, OP_EQUAL, in, n_in, ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL);
}

/* Max/Min of one or two inputs: one binary launch (one input as op(x, x) = x), which also applies a Relu the plan
 * fused in. More: out = broadcast copy of in[0], then out = op(out, in[k]) for each further input, the last of these
 * with the Relu. */
static OrtStatus* run_variadic(struct epabi_exec* ex, enum ew_op op, const struct epabi_tensor* const* in, int n_in) {
    if (n_in < 1 || in[0] == NULL) return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "expected inputs");
    EPABI_RETURN_IF_ERROR(check_same_dtype(ex, in, 0, n_in));
    if (n_in <= 2) {
        const struct epabi_tensor* pair[2] = {in[0], in[n_in - 1]};
        return run_binary(ex, op, pair, 2, in[0]->dtype);
    }
    int rank = 0;
    int64_t dims[EPABI_MAX_RANK];
    EPABI_RETURN_IF_ERROR(broadcast_all(ex, in, n_in, &rank, dims));
    OrtStatus* st = NULL;
    struct epabi_tensor* out = epabi_exec_output(ex, 0, in[0]->dtype, rank, dims, &st);
    if (out == NULL) return st;
    struct ew_args args;
    memset(&args, 0, sizeof args);
    args.op = OP_COPY;
    args.dtype = in[0]->dtype;
    EPABI_RETURN_IF_ERROR(launch(ex, &args, in, 1, out));
    for (int k = 1; k < n_in; ++k) {
        const struct epabi_tensor* ops[2] = {out, in[k]};
        memset(&args, 0, sizeof args);
        args.op = op;
        args.dtype = in[0]->dtype;
        args.dtype1 = in[0]->dtype;
        args.epilogue = k == n_in - 1 ? epabi_exec_epilogue(ex) : EPABI_EPILOGUE_NONE;
        EPABI_RETURN_IF_ERROR(launch(ex, &args, ops, 2, out));
    }
    return NULL;
}

static OrtStatus* run_max(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                          int n_out) {
    (void)state;
    (void)n_out;
    return run_variadic(ex, OP_MAX, in, n_in);
}

static OrtStatus* run_min(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                          int n_out) {
    (void)state;
    (void)n_out;
    return run_variadic(ex, OP_MIN, in, n_in);
}

static OrtStatus* run_where(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                            int n_out) {
    (void)state;
    (void)n_out;
    if (n_in != 3 || in[0] == NULL || in[1] == NULL || in[2] == NULL)
        return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "expected 3 inputs");
    if (in[0]->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL)
        return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "condition has dtype %s",
                           epabi_dtype_name(in[0]->dtype));
    EPABI_RETURN_IF_ERROR(check_same_dtype(ex, in, 1, n_in));
    int rank = 0;
    int64_t dims[EPABI_MAX_RANK];
    EPABI_RETURN_IF_ERROR(broadcast_all(ex, in, 3, &rank, dims));
    OrtStatus* st = NULL;
    struct epabi_tensor* out = epabi_exec_output(ex, 0, in[1]->dtype, rank, dims, &st);
    if (out == NULL) return st;
    struct ew_args args;
    memset(&args, 0, sizeof args);
    args.op = OP_WHERE;
    args.dtype = in[1]->dtype;
    return launch(ex, &args, in, 3, out);
}

#define COMPARE_RUN(NAME, OP)                                                                               \
    static OrtStatus* run_##NAME(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, \
                                 int n_in, int n_out) {                                                     \
        (void)state;                                                                                        \
        (void)n_out;                                                                                        \
        if (n_in == 2 && in[0] != NULL) EPABI_RETURN_IF_ERROR(check_same_dtype(ex, in, 0, n_in));           \
        return run_binary(ex, OP, in, n_in, ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL);                            \
    }
COMPARE_RUN(less, OP_LESS)
COMPARE_RUN(greater, OP_GREATER)
COMPARE_RUN(less_equal, OP_LESS_EQUAL)
COMPARE_RUN(greater_equal, OP_GREATER_EQUAL)
COMPARE_RUN(and, OP_AND)
COMPARE_RUN(or, OP_OR)
#undef COMPARE_RUN

/* Mod's state: OP_MOD (fmod=0) or OP_FMOD (fmod=1). */
static OrtStatus* init_mod(const struct epabi_node* node, void** state) {
    enum ew_op* op = malloc(sizeof *op);
    if (op == NULL) return epabi_error(node->api, ORT_FAIL, "Mod: out of memory");
    int64_t fmod_attr = 0;
    epabi_attr_int(node, "fmod", &fmod_attr);
    *op = fmod_attr != 0 ? OP_FMOD : OP_MOD;
    *state = op;
    return NULL;
}

static bool all_bytes_zero(const unsigned char* p, size_t n) {
    for (size_t k = 0; k < n; ++k)
        if (p[k] != 0) return false;
    return true;
}

/* An integer divisor of zero is an error, as for Div (ORT's CPU EP traps on it). */
static OrtStatus* run_mod(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                          int n_out) {
    (void)n_out;
    if (n_in != 2 || in[0] == NULL || in[1] == NULL)
        return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "expected 2 inputs");
    EPABI_RETURN_IF_ERROR(check_same_dtype(ex, in, 0, n_in));
    const struct epabi_tensor* b = in[1];
    if (!is_floating(b->dtype) && b->host != NULL) {
        const size_t es = epabi_dtype_size(b->dtype);
        const int64_t n = epabi_numel(b->rank, b->dims);
        for (int64_t i = 0; i < n; ++i)
            if (all_bytes_zero((const unsigned char*)b->host + (size_t)i * es, es))
                return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT,
                                   "Mod: integer division by zero (divisor element %lld)", (long long)i);
    }
    return run_binary(ex, *(const enum ew_op*)state, in, n_in, in[0]->dtype);
}

/* ---- chain links (chain.h) -------------------------------------------------------------------------- */

#define LINK(NAME, OP)                                                                                       \
    static bool link_##NAME(const void* state, const struct epabi_tensor* const* in, int n_in,               \
                            struct chain_op* out) {                                                          \
        (void)state;                                                                                         \
        (void)in;                                                                                            \
        *out = (struct chain_op){.kind = CHAIN_BINARY, .op = OP, .out = -1};                                 \
        return n_in == 2;                                                                                    \
    }
LINK(add, OP_ADD)
LINK(sub, OP_SUB)
LINK(mul, OP_MUL)
LINK(div, OP_DIV)
LINK(max, OP_MAX)   /* two inputs only: a variadic Max/Min of more stays its own step */
LINK(min, OP_MIN)
#undef LINK

/* ---- CUDA coverage (cuda_coverage.h) --------------------------------------------------------------- */

/* Pow: a float or double base (ew_pow_f32/f64), any numeric exponent. */
static bool cuda_pow(const struct epabi_node* node, char* why, size_t why_len) {
    const ONNXTensorElementDataType base = epabi_cuda_in_dtype(node, 0);
    if (!epabi_cuda_floating(base)) return epabi_cuda_refuse(node, why, why_len, "base", base);
    if (node->n_in > 1 && !epabi_cuda_numeric(node->in[1].dtype))
        return epabi_cuda_refuse(node, why, why_len, "exponent", node->in[1].dtype);
    return true;
}

/* Equal: one kernel over the numeric dtypes and bool. */
static bool cuda_equal(const struct epabi_node* node, char* why, size_t why_len) {
    const ONNXTensorElementDataType t = epabi_cuda_in_dtype(node, 0);
    return epabi_cuda_castable(t) || epabi_cuda_refuse(node, why, why_len, "input", t);
}

/* Where: a bool condition selecting 1, 2, 4 or 8-byte values (ew_select_<bytes>). */
static bool cuda_where(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in < 3) return true;
    if (node->in[0].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL)
        return epabi_cuda_refuse(node, why, why_len, "condition", node->in[0].dtype);
    const size_t es = epabi_dtype_size(node->in[1].dtype);
    if (es != 1 && es != 2 && es != 4 && es != 8)
        return epabi_cuda_refuse(node, why, why_len, "value", node->in[1].dtype);
    return true;
}

/* Opset ranges: Add/Sub/Mul/Div 7 (numpy broadcasting) .. 14; Pow 7 .. 15; Max/Min 8 (broadcasting)
 * .. 13; Equal 7 .. 19; Where 9 .. 16; Mod 10 .. 28 (28: floats with fmod=0); Less/Greater 7 (broadcasting)
 * .. 13, LessOrEqual/GreaterOrEqual 12 .. 16, And/Or 7 (broadcasting); later versions add types only. */
const struct epabi_kernel epabi_kernels_elementwise[] = {
    {.op_type = "Add", .since_min = 7, .since_max = 14, .supports = supports_arith, .run = run_add,
     .launch = EPABI_LAUNCH_ELEMENTWISE, .host_step = true, .epilogues = EPABI_EPILOGUE_BIT(EPABI_EPILOGUE_RELU),
     .cuda = epabi_cuda_numeric_inputs, .linear_bias = true,
     .chain_link = link_add},
    {.op_type = "Sub", .since_min = 7, .since_max = 14, .supports = supports_arith, .run = run_sub,
     .launch = EPABI_LAUNCH_ELEMENTWISE, .host_step = true, .epilogues = EPABI_EPILOGUE_BIT(EPABI_EPILOGUE_RELU),
     .cuda = epabi_cuda_numeric_inputs,
     .chain_link = link_sub},
    {.op_type = "Mul", .since_min = 7, .since_max = 14, .supports = supports_arith, .run = run_mul,
     .launch = EPABI_LAUNCH_ELEMENTWISE, .host_step = true, .epilogues = EPABI_EPILOGUE_BIT(EPABI_EPILOGUE_RELU),
     .product = true,
     .cuda = epabi_cuda_numeric_inputs,
     .chain_link = link_mul},
    {.op_type = "Div", .since_min = 7, .since_max = 14, .supports = supports_arith, .run = run_div,
     .launch = EPABI_LAUNCH_ELEMENTWISE, .host_step = true, .epilogues = EPABI_EPILOGUE_BIT(EPABI_EPILOGUE_RELU),
     .cuda = epabi_cuda_numeric_inputs,
     .chain_link = link_div},
    {.op_type = "Pow", .since_min = 7, .since_max = 15, .supports = supports_pow, .run = run_pow,
     .launch = EPABI_LAUNCH_ELEMENTWISE, .cuda = cuda_pow},
    {.op_type = "Max", .since_min = 8, .since_max = 13, .supports = supports_arith, .run = run_max,
     .launch = EPABI_LAUNCH_ELEMENTWISE, .host_step = true, .epilogues = EPABI_EPILOGUE_BIT(EPABI_EPILOGUE_RELU),
     .cuda = epabi_cuda_numeric_inputs,
     .chain_link = link_max},
    {.op_type = "Min", .since_min = 8, .since_max = 13, .supports = supports_arith, .run = run_min,
     .launch = EPABI_LAUNCH_ELEMENTWISE, .host_step = true, .epilogues = EPABI_EPILOGUE_BIT(EPABI_EPILOGUE_RELU),
     .cuda = epabi_cuda_numeric_inputs,
     .chain_link = link_min},
    {.op_type = "Equal", .since_min = 7, .since_max = 19, .supports = supports_equal, .run = run_equal,
     .launch = EPABI_LAUNCH_ELEMENTWISE, .cuda = cuda_equal, .onehot_compare = true},
    {.op_type = "Where", .since_min = 9, .since_max = 16, .supports = supports_where, .run = run_where,
     .launch = EPABI_LAUNCH_ELEMENTWISE, .cuda = cuda_where},
    {.op_type = "Mod", .since_min = 10, .since_max = 28, .supports = supports_mod, .init = init_mod, .release = free,
     .run = run_mod, .launch = EPABI_LAUNCH_ELEMENTWISE, .host_step = true, .cuda = epabi_cuda_numeric_inputs},
    {.op_type = "Less", .since_min = 7, .since_max = 13, .supports = supports_compare, .run = run_less,
     .launch = EPABI_LAUNCH_ELEMENTWISE, .cuda = epabi_cuda_numeric_inputs},
    {.op_type = "Greater", .since_min = 7, .since_max = 13, .supports = supports_compare, .run = run_greater,
     .launch = EPABI_LAUNCH_ELEMENTWISE, .cuda = epabi_cuda_numeric_inputs},
    {.op_type = "LessOrEqual", .since_min = 12, .since_max = 16, .supports = supports_compare,
     .run = run_less_equal, .launch = EPABI_LAUNCH_ELEMENTWISE, .cuda = epabi_cuda_numeric_inputs},
    {.op_type = "GreaterOrEqual", .since_min = 12, .since_max = 16, .supports = supports_compare,
     .run = run_greater_equal, .launch = EPABI_LAUNCH_ELEMENTWISE, .cuda = epabi_cuda_numeric_inputs},
    {.op_type = "And", .since_min = 7, .since_max = 7, .supports = supports_logic, .run = run_and,
     .launch = EPABI_LAUNCH_ELEMENTWISE, .cuda = epabi_cuda_bool_inputs},
    {.op_type = "Or", .since_min = 7, .since_max = 7, .supports = supports_logic, .run = run_or,
     .launch = EPABI_LAUNCH_ELEMENTWISE, .cuda = epabi_cuda_bool_inputs},
    {.op_type = NULL},
};
