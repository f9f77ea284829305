/*
 * vmath.h - float32 exp and the activations built on it (Sigmoid, Tanh, SiLU, Gelu's tanh form), written so that
 * GCC vectorises a loop calling them: no calls, no branches (every choice is a select both sides of which are
 * computed), integer tricks through a union. libm's expf/tanhf are one call per element (tanhf costs ~10 ns).
 *
 * Accuracy (measured against double-precision libm over every float in [-100, 100], tests/test_vmath.py): exp within
 * 2 ulp where the result is a normal float (smaller results are flushed towards 0 as a denormal product gives); the
 * others within 3e-7 relative or 1e-9 absolute. ONNX Runtime's CPU EP computes Sigmoid and Tanh with MLAS's own
 * approximations, which differ from libm by about as much. NaN gives NaN; exp(+inf) = inf, exp(-inf) = 0.
 *
 * Results are the same bits on every x86-64 level: the arithmetic is plain IEEE single precision with no
 * contraction into FMA (the plugin builds as ISO C, where GCC contracts nothing), so an AVX-512 clone and the SSE2
 * fallback agree. Thread-safety: pure functions.
 */
#ifndef EPABI_VMATH_H
#define EPABI_VMATH_H

#include <stdint.h>

/* 2^n for integer-valued n in [-126, 127], as the float with that biased exponent. */
static inline float epabi_vm_pow2i(int32_t n) {
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)(n + 127) << 23};
    return v.f;
}

/* e^x. x is clamped to [-104, 89] first (comparisons that a NaN fails, so NaN passes); beyond them the result
 * underflows to 0 or overflows to inf by itself. x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, so n ln2 is
 * exact), e^r by its Taylor series to r^7 (truncation below 6e-9 relative), then times 2^n applied in two halves so
 * that neither leaves the normal exponent range. */
static inline float epabi_vm_expf(float x) {
    const float kLog2e = 1.44269504088896341f;
    const float kLn2Hi = 0.693359375f;             /* 355/512: n * kLn2Hi is exact for |n| <= 2^15 */
    const float kLn2Lo = -2.12194440e-4f;          /* ln2 - kLn2Hi */
    const float kRound = 12582912.0f;              /* 1.5 * 2^23: adding it rounds to an integer */
    x = x > 89.0f ? 89.0f : x;
    x = x < -104.0f ? -104.0f : x;
    float t = x * kLog2e + kRound;
    float n = t - kRound;                          /* round(x log2 e), exactly */
    float r = (x - n * kLn2Hi) - n * kLn2Lo;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t ni = (int32_t)(n == n ? n : 0.0f);     /* in [-150, 129]; a NaN x keeps p NaN */
    int32_t half = ni / 2;
    return p * epabi_vm_pow2i(half) * epabi_vm_pow2i(ni - half);
}

/* 1 / (1 + e^-x): 0 for x below about -104 (e^-x is inf), 1 above 17. */
static inline float epabi_vm_sigmoidf(float x) { return 1.0f / (1.0f + epabi_vm_expf(-x)); }

/* x * sigmoid(x) (SiLU, PyTorch's exported Swish). */
static inline float epabi_vm_siluf(float x) { return x / (1.0f + epabi_vm_expf(-x)); }

/* tanh: an odd Taylor polynomial to x^15 for |x| < 0.5 (truncation below 6e-8 relative), else
 * sign(x) (1 - 2 / (e^{2|x|} + 1)), which has no cancellation there; +-1 from |x| = 9.1 (e^{2|x|} overflows to inf
 * from 44, giving exactly 1). The sign is copied bitwise, so tanh(-0) = -0. */
static inline float epabi_vm_tanhf(float x) {
    union {
        float f;
        uint32_t u;
    } ax = {.f = x}, sign = {.f = x}, big;
    ax.u &= 0x7FFFFFFFu;
    sign.u &= 0x80000000u;
    float e = epabi_vm_expf(2.0f * ax.f);
    big.f = 1.0f - 2.0f / (e + 1.0f);
    big.u |= sign.u;
    float x2 = x * x;
    float p = 929569.0f / 638512875.0f;            /* the Taylor coefficients of tanh, x^15 down to x^3 */
    p = p * x2 - 21844.0f / 6081075.0f;
    p = p * x2 + 1382.0f / 155925.0f;
    p = p * x2 - 62.0f / 2835.0f;
    p = p * x2 + 17.0f / 315.0f;
    p = p * x2 - 2.0f / 15.0f;
    p = p * x2 + 1.0f / 3.0f;
    float small = x - x * x2 * p;
    return ax.f < 0.5f ? small : big.f;
}

/* HardSigmoid: max(0, min(1, alpha x + beta)), NaN passing through both comparisons. */
static inline float epabi_vm_hard_sigmoidf(float x, float alpha, float beta) {
    float v = alpha * x + beta;
    v = v < 0.0f ? 0.0f : v;
    return v > 1.0f ? 1.0f : v;
}

/* Gelu with approximate="tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
static inline float epabi_vm_gelu_tanhf(float x) {
    const float kSqrt2OverPi = 0.79788456080286535588f;
    return 0.5f * x * (1.0f + epabi_vm_tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

#endif
