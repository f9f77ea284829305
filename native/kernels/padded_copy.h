/*
 * padded_copy.h - the launch shared by Pad and Tile (struct pad_args in launch_args.h): a contiguous output whose
 * every element is either an element of a strided view of the input, reached through a per-dim index map (reflect,
 * edge, wrap), or the constant. Thread-safe: pure functions over the launch's own argument block.
 */
#ifndef EPABI_PADDED_COPY_H
#define EPABI_PADDED_COPY_H

#include <stdint.h>

#include "kernel.h"

#include "launch_args.h"

/* Where view index i (any integer) lands in a dim of n elements under the mode: in [0, n), or -1 for CONSTANT's
 * "no element" (n >= 1 for the other modes). The CUDA kernel (cuda_kernels.cu) maps the same way. */
int64_t epabi_pad_map_index(enum pad_mode mode, int64_t i, int64_t n);

/* Drops unit dims and merges neighbouring dims that are neither padded nor cropped (begin 0, in == out) and lie
 * contiguously in the view, then launches the copy on the exec's stream. a->rank >= 1; the output is not empty. */
OrtStatus* epabi_padded_copy_launch(struct epabi_exec* ex, struct pad_args* a);

#endif
