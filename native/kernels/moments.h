/*
 * moments.h - the moments step: ReduceSum(X, axes) and ReduceSum(Mul(X, X), axes) of one float32 X, as expanded
 * LayerNorms compute a mean and a mean of squares (magika's two LayerNorms), in one pass over X (launch kind
 * EPABI_LAUNCH_MOMENTS, struct moments_launch of launch_args.h) instead of three launches and an X * X buffer.
 *
 * The plan builds one (plan_moments.c, epabi_plan_fuse_moments) from two ReduceSum steps of equal specs (reduce.h)
 * and the Mul it proved feeds only the second. Inputs: X, then the ReduceSums' axes input when they have one (the
 * same value); outputs: the sums, then the sums of squares, of the ReduceSum's shape (keepdims 0/1). Each square is
 * x * x rounded to float, as the Mul stores it, and both sums accumulate in double in the order the ReduceSum kernel
 * uses, so the software adapter gives the unfused nodes' bits, and so does CUDA (the same kernel variant and block
 * shape as the unfused ReduceSum, cuda_kernels.cu). With noop_with_empty_axes and no axes the outputs are X and
 * X * X.
 *
 * Thread-safety: a state is read-only after the plan is built.
 */
#ifndef EPABI_MOMENTS_H
#define EPABI_MOMENTS_H

#include "kernel.h"
#include "reduce.h"

/* The kernel of every moments step; not in the registry (no ONNX op has it), only the plan installs it. Its state is
 * a malloc'ed struct epabi_reduce_spec (the ReduceSums' own, op REDUCE_SUM), released with free(). */
extern const struct epabi_kernel epabi_kernel_moments;

#endif
