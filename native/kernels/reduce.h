/*
 * reduce.h - what a Reduce* node computes, shared by the Reduce kernels (reduce.c) and the moments step (moments.h),
 * which computes two ReduceSums of one input in one pass and must resolve axes and shapes exactly as they do.
 *
 * Thread-safety: a spec is read-only after init; epabi_reduce_geometry keeps no state.
 */
#ifndef EPABI_REDUCE_H
#define EPABI_REDUCE_H

#include <stdbool.h>
#include <stdint.h>

#include "kernel.h"

/* A Reduce* node's attributes (its kernel state, kernel.h's reduce_spec). */
struct epabi_reduce_spec {
    enum reduce_op op;
    bool axes_input;                 /* axes come from input 1 (else from the attribute) */
    bool keepdims, noop_empty;
    int n_axes;                      /* attribute axes; -1: attribute absent */
    int64_t axes[EPABI_MAX_RANK];
};

/* Whether two specs reduce every input the same way (the op aside): equal keepdims, noop_with_empty_axes, axes taken
 * from an input or equal attribute lists. Two nodes reading axes inputs agree only when those inputs are one value
 * or equal constants, which the caller checks. */
bool epabi_reduce_spec_same(const struct epabi_reduce_spec* a, const struct epabi_reduce_spec* b);

/* The reduction spec s makes of the float32 data X, with A the axes input (NULL when absent; read on the host when
 * s->axes_input, ONNX ReduceSum-13 / Reduce*-18): the output's rank and dims (*out_rank, out_dims[EPABI_MAX_RANK]), and
 * L's op, copy, rank, dims, reduced, in_numel, out_numel and count (L's pointers are left to the caller). With
 * L->copy (noop_with_empty_axes and no axes) the output is X's shape and nothing else is set. Size-1 axes drop out
 * and neighbours of the same role merge, so L's dims alternate between kept and reduced runs.
 * Errors: ORT_INVALID_ARGUMENT for axes that are not a 1-D int64 tensor, more axes than X's rank, or an axis out of
 * range (naming it and X's shape); ORT_FAIL when the axes cannot be read on the host (inside a graph capture). */
OrtStatus* epabi_reduce_geometry(struct epabi_exec* ex, const struct epabi_reduce_spec* s, const struct epabi_tensor* X,
                                 const struct epabi_tensor* A, struct reduce_launch* L, int* out_rank,
                                 int64_t* out_dims);

#endif
