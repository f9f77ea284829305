/*
 * onehot.h - the one-hot lookup step: an embedding written as a one-hot product, run as one launch of kind
 * EPABI_LAUNCH_ONEHOT (struct onehot_args, launch_args.h):
 *
 *     E = Equal(X, C)  ->  Cast(E, to=float)  ->  MatMul(., W)  [->  Add(., bias)]
 *     Y[.., j] = sum over k with C[k] == X[..] of W[k, j]  (+ bias[j])
 *
 * (magika's first layer: bytes [B, 2048, 1] against C = arange(257) [1, 1, 257], W [257, 64].) The plan builds one
 * (plan_onehot.c, epabi_plan_fuse_onehot; with EP option fused_gemm, default 1) when C is an int32 or int64 constant
 * whose dims are 1 but the last (K), X has C's dtype and a last dim that is 1 or unknown at build, E and the Cast's
 * output are read by the next node alone and are not fused-node outputs, the Cast is to float, W is a finite float
 * constant [K, N] (a NaN or infinity in W makes 0 * W of every non-matching value count), and the optional bias is
 * a float constant whose dims are 1 but the last, which is N or 1, of a rank that does not grow the product's.
 *
 * At build the distinct values of C are sorted and each gets one row of a table: the sum of the W rows of its
 * occurrences in k order (one row when C's values are distinct, as in a one-hot), plus the bias; a last row holds the
 * bias alone (zeros without one), for values of X that are none of C's. Values that are consecutive (C = c0 +
 * arange(K) in any order) are found by subtracting c0, others by binary search in a sorted copy. So a row of Y is
 * one copy of a table row: no compare, no cast, no product. If X's last dim turns out at run time to be K rather
 * than 1 (an Equal of two full tensors), the general path computes the sum over k per element from C and W.
 *
 * Values are those of the unfused nodes: a table row is the float sum the product forms from its non-zero terms
 * (exact for distinct C values), plus the bias as the Add adds it.
 *
 * Thread-safety: a state is read-only after the plan is built.
 */
#ifndef EPABI_ONEHOT_H
#define EPABI_ONEHOT_H

#include <stdbool.h>
#include <stdint.h>

#include "kernel.h"

/* The step's inputs, in this order (the plan wires them; keys and bias may be absent, -1). */
enum { ONEHOT_IN_X = 0, ONEHOT_IN_C = 1, ONEHOT_IN_W = 2, ONEHOT_IN_TABLE = 3, ONEHOT_IN_KEYS = 4, ONEHOT_IN_BIAS = 5,
       ONEHOT_N_IN = 6 };

/* A step's state (malloc'ed by epabi_onehot_table_build's caller through epabi_onehot_state_new; free()). */
struct epabi_onehot_state {
    int64_t base;   /* the first of C's values when they are consecutive (no keys input) */
};

/* What the build derives from C, W and the bias: the table [n_keys + 1, n] and, unless the values are consecutive,
 * their sorted copy [n_keys]. Both malloc'ed, the caller's to free. */
struct epabi_onehot_table {
    float* table;
    int64_t* keys;      /* NULL: consecutive from base */
    int64_t n_keys;     /* distinct values of C */
    int64_t base;
};

/* Builds the table from C (int32 or int64, k values), W [k, n] and the bias (bias_cols 1 or n values; NULL: none).
 * False when out of memory (nothing is left allocated). */
bool epabi_onehot_table_build(ONNXTensorElementDataType c_dtype, const void* c, int64_t k, const float* w, int64_t n,
                              const float* bias, int64_t bias_cols, struct epabi_onehot_table* out);

/* A malloc'ed state; NULL when out of memory. */
struct epabi_onehot_state* epabi_onehot_state_new(int64_t base);

/* The kernel of every one-hot lookup step; not in the registry (no ONNX op has it), only the plan installs it. */
extern const struct epabi_kernel epabi_kernel_onehot;

#endif
