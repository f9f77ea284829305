/*
 * softmax_rows.h - the fused softmax step: an expanded softmax over the last axis of a float32 X, as jax2tf exports
 * it (magika's last layer): m0 = ReduceMax(X, last axis), m = Max(m0, c) for an optional scalar constant floor c,
 * views (Reshape, Expand) putting m back as a column, d = Sub(X, m'), e = Exp(d), s = ReduceSum(e, last axis), views,
 * Y = Div(e, s'). One launch (kind EPABI_LAUNCH_SOFTMAX_ROWS, struct softmax_rows_launch) instead of five.
 *
 * The plan builds one (plan_softmax.c, epabi_plan_fuse_softmax) when every intermediate is read only inside the
 * pattern. Inputs: X, then input 1 of each view the pattern held (their shape inputs, read on the host), in pattern
 * order; output: Y, X's shape. run() replays the views' shapes (kernel.h, view_dims) and refuses with ORT_EP_FAIL
 * views that do not put each row's value back along that row (a Reshape to [1, N], say), which the plan could not
 * prove at build when their shapes are computed at run time.
 *
 * Values: the software adapter computes each op as the unfused kernel does (reduce.c's NaN-sticky max and row sum in
 * double, elementwise.c's Max, Sub and Div, unary.c's expf), so it gives the unfused plan's bits. CUDA
 * (cuda_kernels.cu, softmax_rows_fused_f32) sums a row in a block tree, as the ReduceSum kernels do, so it may differ
 * from them in the last bit.
 *
 * Thread-safety: a state is read-only after the plan is built.
 */
#ifndef EPABI_SOFTMAX_ROWS_H
#define EPABI_SOFTMAX_ROWS_H

#include "kernel.h"

enum { EPABI_SOFTMAX_MAX_VIEWS = 8 };

/* One swallowed view: its kernel and its init() state (owned), and which value it views (0: the max, 1: the sum). */
struct epabi_softmax_view {
    const struct epabi_kernel* kernel;
    void* state;
    int of_sum;
};

struct epabi_softmax_rows_state {
    int rank;                  /* X's, >= 1 (the reduced axis is rank - 1) */
    bool max_keepdims, sum_keepdims;
    bool has_floor;
    float floor;
    int n_views;               /* in pattern order: the max's views, then the sum's */
    struct epabi_softmax_view views[EPABI_SOFTMAX_MAX_VIEWS];
};

/* The kernel of every fused softmax step; not in the registry, only the plan installs it. Its state is a malloc'ed
 * struct epabi_softmax_rows_state, whose views' states it releases with their kernels'. */
extern const struct epabi_kernel epabi_kernel_softmax_rows;

/* Replays the views of one row value (of_sum 0: the max, 1: the sum) of s from its reduced shape for an X of
 * x_rank/x_dims, view v reading the n_req[v] values req[v] (entries of the other value's views unread); NULL when
 * they put each row's value back along its row, else ORT_EP_FAIL naming the shapes, or the view's own error for
 * shapes it refuses. The fused step runs it on the run's shapes; the plan (plan_softmax.c) on the declared ones when
 * they and the views' shapes are constants. Thread-safe: reads s only. */
OrtStatus* epabi_softmax_rows_replay(const struct epabi_api* api, const struct epabi_softmax_rows_state* s,
                                     int x_rank, const int64_t* x_dims, const int64_t (*req)[EPABI_MAX_RANK],
                                     const int* n_req, int of_sum);

#endif
