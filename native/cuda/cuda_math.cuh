/*
 * cuda_math.cuh - what every NVRTC program of epabi shares: the kernel macros (grid-constant blocks, programmatic
 * dependent launch, grid-stride loops) and the float arithmetic of the elementwise ops (un_apply, chain_binary,
 * NaN-propagating max/min). cuda_kernels.cu includes it, and so does every elementwise chain compiled on its own
 * (cuda_chain_jit.c), so a chain's own kernel computes each op with the very function the unfused kernel uses and
 * gives its bits. Embedded into the library and handed to NVRTC as the in-memory header "cuda_math.cuh".
 * Needs launch_args.h (the UN_* and OP_* codes) included first.
 */
#ifndef EPABI_CUDA_MATH_CUH
#define EPABI_CUDA_MATH_CUH

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
#define EP_GC __grid_constant__
#else
#define EP_GC
#endif
#define EP_DEV static __device__ __forceinline__
#define EP_KERNEL extern "C" __global__ void

/* Programmatic dependent launch (compute capability 9.0 and newer; cuda_launch.c launches with it where the device
 * and driver have it): a kernel may start while the one before it on the stream still runs. So every kernel begins
 * with EP_PDL_ENTER: wait for the previous grid's completion and memory (griddepcontrol.wait, a no-op without the
 * launch attribute), then let the next grid be launched, whose launch latency then hides behind this kernel's work.
 * tests/test_cuda_source.py checks that every kernel begins with it, or with EP_PDL_LAUNCH when it reads only
 * constants before its EP_PDL_WAIT (the linear kernels' weights: linear_launch.weights_const). A grid must not end
 * before its predecessor, so every thread waits before it exits. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define EP_PDL_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#define EP_PDL_LAUNCH() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#else
#define EP_PDL_WAIT() ((void)0)
#define EP_PDL_LAUNCH() ((void)0)
#endif
#define EP_PDL_ENTER() \
    do {               \
        EP_PDL_WAIT(); \
        EP_PDL_LAUNCH(); \
    } while (0)

#define GRID_LOOP(i, n)                                                                              \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)(n);                \
         i += (int64_t)gridDim.x * blockDim.x)

/* ---- small helpers ----------------------------------------------------------------------------------- */

EP_DEV double nan_d() { return __longlong_as_double(0x7fffffffffffffffLL); }
EP_DEV float inf_f() { return __int_as_float(0x7f800000); }

/* max/min that give NaN when either side is NaN (elementwise Max/Min, as the host's max_f/min_f) */
template <typename T> EP_DEV T nan_max(T a, T b) { return (a != a || b != b) ? (T)nan_d() : (a > b ? a : b); }
template <typename T> EP_DEV T nan_min(T a, T b) { return (a != a || b != b) ? (T)nan_d() : (a < b ? a : b); }

/* ---- unary ops (struct un_args) --------------------------------------------------------------------- */

EP_DEV float sigmoid_f(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    const float e = expf(x);
    return e / (1.0f + e);
}
EP_DEV double sigmoid_d(double x) {
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    const double e = exp(x);
    return e / (1.0 + e);
}

/* Activations, as the host's (unary.c): NaN passes through the clamps; Gelu is x Phi(x) or its tanh form. */
template <typename T> EP_DEV T hard_sigmoid(T x, T alpha, T beta) {
    T v = alpha * x + beta;
    v = v < T(0) ? T(0) : v;
    return v > T(1) ? T(1) : v;
}
EP_DEV float gelu_f(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f)); }
EP_DEV double gelu_d(double x) { return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440)); }
EP_DEV float gelu_tanh_f(float x) {
    return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}
EP_DEV double gelu_tanh_d(double x) {
    return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}
/* NaN stays NaN, both zeros give +0 */
template <typename T> EP_DEV T sign_of(T x) { return x > T(0) ? T(1) : x < T(0) ? T(-1) : x == T(0) ? T(0) : x; }

/* p, q: the launch's alpha and beta in the input's type */
EP_DEV float un_apply(int op, float x, float p, float q) {
    switch (op) {
    case UN_SQRT: return sqrtf(x);
    case UN_RECIPROCAL: return 1.0f / x;
    case UN_EXP: return expf(x);
    case UN_ERF: return erff(x);
    case UN_TANH: return tanhf(x);
    case UN_RELU: return x < 0 ? 0.0f : x;   /* NaN stays NaN */
    case UN_SIGMOID: return sigmoid_f(x);
    case UN_ABS: return fabsf(x);
    case UN_NEG: return -x;
    case UN_FLOOR: return floorf(x);
    case UN_CEIL: return ceilf(x);
    case UN_ROUND: return rintf(x);   /* half to even */
    case UN_LOG: return logf(x);
    case UN_SIN: return sinf(x);
    case UN_COS: return cosf(x);
    case UN_SIGN: return sign_of(x);
    case UN_HARD_SIGMOID: return hard_sigmoid(x, p, q);
    case UN_HARD_SWISH: return x * hard_sigmoid(x, 1.0f / 6.0f, 0.5f);
    case UN_LEAKY_RELU: return x >= 0 ? x : p * x;
    case UN_GELU: return gelu_f(x);
    case UN_GELU_TANH: return gelu_tanh_f(x);
    case UN_SILU: return x * sigmoid_f(x);
    default: return x;
    }
}
EP_DEV double un_apply(int op, double x, double p, double q) {
    switch (op) {
    case UN_SQRT: return sqrt(x);
    case UN_RECIPROCAL: return 1.0 / x;
    case UN_EXP: return exp(x);
    case UN_ERF: return erf(x);
    case UN_TANH: return tanh(x);
    case UN_RELU: return x < 0 ? 0.0 : x;
    case UN_SIGMOID: return sigmoid_d(x);
    case UN_ABS: return fabs(x);
    case UN_NEG: return -x;
    case UN_FLOOR: return floor(x);
    case UN_CEIL: return ceil(x);
    case UN_ROUND: return rint(x);
    case UN_LOG: return log(x);
    case UN_SIN: return sin(x);
    case UN_COS: return cos(x);
    case UN_SIGN: return sign_of(x);
    case UN_HARD_SIGMOID: return hard_sigmoid(x, p, q);
    case UN_HARD_SWISH: return x * hard_sigmoid(x, 1.0 / 6.0, 0.5);
    case UN_LEAKY_RELU: return x >= 0 ? x : p * x;
    case UN_GELU: return gelu_d(x);
    case UN_GELU_TANH: return gelu_tanh_d(x);
    case UN_SILU: return x * sigmoid_d(x);
    default: return x;
    }
}

/* The chain's arithmetic in round-to-nearest intrinsics, which are never contracted into a multiply-add with a
 * neighbouring op: each op rounds as its own kernel does (ew_fast_f32, ew_arith_f32: IEEE division, -prec-div). */
EP_DEV float chain_binary(int op, float a, float b) {
    switch (op) {
    case OP_ADD: return __fadd_rn(a, b);
    case OP_SUB: return __fsub_rn(a, b);
    case OP_MUL: return __fmul_rn(a, b);
    case OP_MAX: return nan_max(a, b);
    case OP_MIN: return nan_min(a, b);
    default: return __fdiv_rn(a, b);
    }
}

/* Clip with constant bounds as un_clip compares: NaN passes through. */
EP_DEV float chain_clip(float x, float lo, float hi) {
    const float c = x < lo ? lo : x;
    return c > hi ? hi : c;
}

#endif
