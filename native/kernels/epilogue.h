/*
 * epilogue.h - the activations a launch applies to its results before storing them, when the plan fused the
 * activation node into the node producing its input (plan_passes.c, kernel.h's `epilogues` and `as_epilogue`):
 * each computes exactly what the activation's own kernel (unary.c) computes on the stored value, so fusing never
 * changes a result.
 *
 *   RELU          x < 0 ? 0 : x (NaN stays NaN, -0 stays -0)
 *   SIGMOID       1 / (1 + e^-x)                       (vmath.h)
 *   SILU          x * sigmoid(x): Sigmoid then Mul by the same input, as PyTorch exports SiLU / Swish
 *   TANH          tanh(x)                              (vmath.h)
 *   LEAKY_RELU    x >= 0 ? x : alpha * x
 *   HARD_SIGMOID  max(0, min(1, alpha * x + beta))
 *   HARD_SWISH    x * max(0, min(1, x / 6 + 1/2))
 *
 * EPABI_EPILOGUE_LOOP expands to one plain loop per kind (the kind is chosen outside the loops), so that the
 * function it is expanded in vectorises them at its own x86-64 level. Thread-safety: pure code.
 */
#ifndef EPABI_EPILOGUE_H
#define EPABI_EPILOGUE_H

#include <stdint.h>

#include "launch_args.h"
#include "vmath.h"

#define EPABI_EPILOGUE_APPLY_(V, N, EXPR)                                   \
    do {                                                                    \
        for (int64_t i_ = 0; i_ < (N); ++i_) {                              \
            const float x = (V)[i_] + bias_;                                \
            (V)[i_] = (EXPR);                                               \
        }                                                                   \
    } while (0)

/* v[i] = epilogue(v[i] + bias) for i in [0, n): KIND an enum epabi_epilogue (NONE: the addition alone), ALPHA and
 * BETA its parameters (LeakyRelu's alpha, HardSigmoid's alpha and beta; ignored by the others). */
#define EPABI_EPILOGUE_LOOP(KIND, ALPHA, BETA, BIAS, V, N)                                                        \
    do {                                                                                                          \
        const float bias_ = (BIAS), alpha_ = (ALPHA), beta_ = (BETA);                                             \
        (void)alpha_;                                                                                             \
        (void)beta_;                                                                                              \
        switch (KIND) {                                                                                           \
        case EPABI_EPILOGUE_RELU: EPABI_EPILOGUE_APPLY_(V, N, x < 0.0f ? 0.0f : x); break;                         \
        case EPABI_EPILOGUE_SIGMOID: EPABI_EPILOGUE_APPLY_(V, N, epabi_vm_sigmoidf(x)); break;                    \
        case EPABI_EPILOGUE_SILU: EPABI_EPILOGUE_APPLY_(V, N, x * epabi_vm_sigmoidf(x)); break;                   \
        case EPABI_EPILOGUE_TANH: EPABI_EPILOGUE_APPLY_(V, N, epabi_vm_tanhf(x)); break;                          \
        case EPABI_EPILOGUE_LEAKY_RELU: EPABI_EPILOGUE_APPLY_(V, N, x >= 0.0f ? x : alpha_ * x); break;           \
        case EPABI_EPILOGUE_HARD_SIGMOID: EPABI_EPILOGUE_APPLY_(V, N, epabi_vm_hard_sigmoidf(x, alpha_, beta_));   \
            break;                                                                                                \
        case EPABI_EPILOGUE_HARD_SWISH:                                                                           \
            EPABI_EPILOGUE_APPLY_(V, N, x * epabi_vm_hard_sigmoidf(x, 1.0f / 6.0f, 0.5f));                        \
            break;                                                                                                \
        default: EPABI_EPILOGUE_APPLY_(V, N, x); break;                                                           \
        }                                                                                                         \
    } while (0)

/* The same over a float buffer, compiled per x86-64 level (epilogue.c): for launches whose loops are not
 * vectorised code of their own (the im2col Conv path, elementwise rows). */
void epabi_epilogue_f32(float* v, int64_t n, int32_t kind, float alpha, float beta, float bias);

#endif
