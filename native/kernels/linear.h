/*
 * linear.h - the linear step: a MatMul or Gemm fused with the bias Add and the activation that follow it, run as
 * one launch of kind EPABI_LAUNCH_LINEAR (struct linear_launch, launch_args.h):
 *
 *     Y = act(alpha * op(A) op(B) + beta * C)          float32, row-major
 *
 * The plan builds one (plan_passes.c, epabi_plan_fuse_linear; EP option fused_gemm, default 1) from
 *   - a lead: MatMul with a B of rank 2 (A of any rank >= 1, its batch dims folded into M, numpy's 1-D rules), or
 *     Gemm (transA, transB, alpha, beta; its C unidirectionally broadcast to [M, N], ignored when beta == 0);
 *   - optionally an Add of the lead's result and a float constant whose dims are all 1 but the last, which is N
 *     or 1 (a bias), when the lead has no C of its own: it becomes C with beta 1;
 *   - optionally a Relu, Sigmoid, Tanh or Gelu (approximate none or tanh) of that result.
 * Each fused intermediate must be a float value read by the next node alone and not an output of the fused node.
 * A lead with nothing to fuse still becomes a linear step (one launch on every backend, and on CUDA the small
 * kernel for launch-bound shapes instead of cuBLAS).
 *
 * The software adapter computes it as Gemm does (C broadcast into Y, sgemm with beta) and then the activation with
 * the Unary kernels' math (unary.c), so a fused group gives the values of the unfused nodes up to the GEMM's
 * summation order. The CUDA backend picks its kernel from the path the plan chose (enum linear_path):
 * cuda/cuda_launch_linear.c.
 *
 * Thread-safety: a state is read-only after the plan is built.
 */
#ifndef EPABI_LINEAR_H
#define EPABI_LINEAR_H

#include <stdbool.h>
#include <stdint.h>

#include "kernel.h"

/* What a lead node computes, from its state (kernel.h's linear_lead). */
struct epabi_linear_lead {
    bool matmul;            /* numpy MatMul: A of rank >= 1 with its batch folded into M, B of rank 2 */
    bool trans_a, trans_b;  /* Gemm's transA, transB; false for MatMul */
    float alpha, beta;      /* Gemm's; 1 and 1 for MatMul */
    bool has_c;             /* input 2 is wired (Gemm's C): no bias can be folded in */
};

/* The state of a linear step: its lead's, plus what the plan folded in. Created by epabi_linear_state_new,
 * released with free(). */
struct epabi_linear_state {
    struct epabi_linear_lead lead;
    bool bias;              /* input 2 is a folded bias (beta 1; its dims 1 but the last, which is N or 1) */
    int32_t activation;     /* enum un_op (UN_RELU, UN_SIGMOID, UN_TANH, UN_GELU, UN_GELU_TANH), -1: none */
    int32_t path;           /* enum linear_path, from the static extents */
    bool weights_const;     /* B and C (or the bias) are plan constants */
};

/* The kernel of every linear step; it is not in the registry (no ONNX op has it), only the plan installs it. */
extern const struct epabi_kernel epabi_kernel_linear;

/* The CUDA path for a product of these static extents (-1: unknown, e.g. a symbolic batch dim): LINEAR_PATH_SMALL
 * when M <= EPABI_LINEAR_SMALL_ROWS and the weights (K x N) fit the small kernel's limits (launch_args.h),
 * LINEAR_PATH_SMALL_IF_FEW_ROWS when only M is unknown and K, N fit, LINEAR_PATH_BLAS otherwise. */
int32_t epabi_linear_path(int64_t m, int64_t k, int64_t n);

struct gemm_launch;

/* The host's Gemm (matmul.c): Y = alpha * op(A) op(B) + beta * C, C broadcast into Y first; what Gemm launches and
 * what a linear step computes before its activation. Thread-safe on distinct Y (the pool splits the product). */
void epabi_gemm_host(const struct gemm_launch* L);

/* Gemm's C against the output [m, n] (unidirectional broadcast: its dims, right-aligned, each 1 or the full extent):
 * its rows and columns after left-padding to rank 2 (matmul.c). Errors: ORT_INVALID_ARGUMENT naming C's shape. */
OrtStatus* epabi_gemm_c_extent(const struct epabi_api* api, const struct epabi_tensor* c, int64_t m, int64_t n,
                               int64_t* rows, int64_t* cols);

/* A malloc'ed state (NULL when out of memory). */
struct epabi_linear_state* epabi_linear_state_new(const struct epabi_linear_lead* lead, bool bias, int32_t activation,
                                                  int32_t path, bool weights_const);

/* y[0..n) = op(y) in place for an activation of enum un_op, with the math of the Unary kernels (unary.c). */
void epabi_activate_f32(int32_t op, float* y, int64_t n);

#endif
