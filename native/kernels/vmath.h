/*
 * vmath.h - float32 exp and the activations built on it (Sigmoid, Tanh, SiLU, Gelu's tanh form), written so that
 * GCC vectorises a loop calling them: no calls, no branches (every choice is a select both sides of which are
 * computed), integer tricks through a union. libm's expf/tanhf are one call per element (tanhf costs ~10 ns).
 *
 * Accuracy (against float64 numpy over dense sweeps of [-110, 110] and magnitudes 1e-40 .. 100,
 * tests/test_fast_paths.py): exp within 2 ulp where the result is a normal float (denormal results are flushed to
 * 0); Sigmoid and Tanh within 3e-7 relative, or 1.2e-38 absolute below FLT_MIN. ONNX Runtime's CPU EP computes Sigmoid and Tanh with MLAS's own
 * approximations, which differ from libm by about as much. NaN gives NaN; exp(+inf) = inf, exp(-inf) = 0.
 *
 * Results are the same bits on every x86-64 level: the polynomials use fmaf, which is one rounding everywhere (an
 * instruction on the AVX2 and AVX-512 clones, libm on the SSE2 fallback, where it is slow but exact), and nothing
 * else is contracted (the plugin builds as ISO C, where GCC contracts nothing), so the clones and the fused
 * epilogues agree with each other. Thread-safety: pure functions.
 */
#ifndef EPABI_VMATH_H
#define EPABI_VMATH_H

#include <math.h>
#include <stdint.h>

/* 2^n for n in [-126, 127], as the float with that biased exponent. */
static inline float epabi_vm_pow2i(int32_t n) {
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)(n + 127) << 23};
    return v.f;
}

/* e^x for a normal result: x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, so n ln2 is exact), e^r by its
 * Taylor series to r^7 (truncation below 6e-9 relative) in fused multiply-adds, times 2^n. n is clamped to the
 * normal exponents (as a float, which min/max instructions do; a NaN becomes a bound; n = 128 takes one more
 * doubling) and the result is chosen at
 * the end: inf above 88.72 (where e^x passes FLT_MAX), 0 below -87.33 (where it falls under FLT_MIN: denormal
 * results are flushed, an absolute error below 1.2e-38), NaN as it came. (Clamping x itself made GCC split the
 * whole computation into masked paths, 20% slower; scaling by 2^n in two halves for denormals cost 15%.) */
static inline float epabi_vm_expf(float x) {
    const float kLog2e = 1.44269504088896341f;
    const float kLn2Hi = 0.693359375f;             /* 355/512 */
    const float kLn2Lo = -2.12194440e-4f;          /* ln2 - kLn2Hi */
    const float kRound = 12582912.0f;              /* 1.5 * 2^23: adding it rounds to an integer */
    const float n = (x * kLog2e + kRound) - kRound;   /* round(x log2 e), exactly for |x| < 2^22 */
    const float r = fmaf(n, -kLn2Lo, fmaf(n, -kLn2Hi, x));
    float p = fmaf(1.0f / 5040.0f, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    float nc = n < 127.0f ? n : 127.0f;
    nc = nc > -126.0f ? nc : -126.0f;
    float y = p * epabi_vm_pow2i((int32_t)nc);
    y = n > 127.0f ? y * 2.0f : y;                 /* n = 128 for x in (88.03, 88.72] */
    y = x > 88.72283f ? INFINITY : y;
    y = x < -87.33654f ? 0.0f : y;
    return x != x ? x : y;
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
    float p = fmaf(929569.0f / 638512875.0f, x2, -21844.0f / 6081075.0f);   /* tanh's Taylor coefficients */
    p = fmaf(p, x2, 1382.0f / 155925.0f);
    p = fmaf(p, x2, -62.0f / 2835.0f);
    p = fmaf(p, x2, 17.0f / 315.0f);
    p = fmaf(p, x2, -2.0f / 15.0f);
    p = fmaf(p, x2, 1.0f / 3.0f);
    float small = fmaf(-x * x2, p, x);
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
