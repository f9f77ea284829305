/*
 * strided_copy.h - the launch shared by the data-movement kernels (Transpose, Slice, Expand): a contiguous
 * output filled from a strided view of the input. Strides are in elements; a stride of 0 repeats an element
 * (broadcast). Thread-safe: pure functions over the launch's own argument block.
 */
#ifndef EPABI_STRIDED_COPY_H
#define EPABI_STRIDED_COPY_H

#include "kernel.h"

#include "launch_args.h"


/* Merges dims that are contiguous (or both broadcast) in the source and drops unit dims, so the innermost
 * row is as long as possible, then launches the copy on the exec's stream. */
OrtStatus* epabi_strided_copy_launch(struct epabi_exec* ex, struct epabi_strided_copy* a);

#endif
