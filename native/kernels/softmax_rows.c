/*
 * softmax_rows.c - the fused softmax step (softmax_rows.h): the views' shapes replayed and checked in run(), then one
 * launch walking each row as the unfused kernels would.
 */
#include "softmax_rows.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmath.h"

/* elementwise.c's float32 Max: NaN when either operand is */
static inline float nan_max_f(float a, float b) { return isnan(a) || isnan(b) ? NAN : (a > b ? a : b); }

static void softmax_rows_launch_fn(const void* args) {
    const struct softmax_rows_launch* L = args;
    for (int64_t r = 0; r < L->rows; ++r) {
        const float* x = L->x + r * L->len;
        float* y = L->y + r * L->len;
        float m = -INFINITY;
        for (int64_t j = 0; j < L->len; ++j)
            if (x[j] > m || x[j] != x[j]) m = x[j];   /* reduce.c's ReduceMax: a NaN sticks */
        if (L->has_floor) m = nan_max_f(m, L->floor);
        double acc = 0.0;
        for (int64_t j = 0; j < L->len; ++j) {
            const float d = x[j] - m;
            y[j] = epabi_vm_expf(d);
            acc += y[j];
        }
        const float s = (float)acc;
        for (int64_t j = 0; j < L->len; ++j) y[j] = y[j] / s;
    }
}

/* The three shapes a row value may take on its way back to X: A = X's dims without the last (keepdims 0), B = A
 * with a last dim of 1 (keepdims 1), C = X's dims (broadcast back); -1 for any other. */
static int form_of(int x_rank, const int64_t* x_dims, int rank, const int64_t* dims) {
    const int r = x_rank;
    bool lead = rank >= r - 1;
    for (int k = 0; lead && k < r - 1; ++k) lead = dims[k] == x_dims[k];
    if (!lead) return -1;
    if (rank == r - 1) return 0;
    if (rank != r) return -1;
    if (dims[r - 1] == 1) return 1;
    return dims[r - 1] == x_dims[r - 1] ? 2 : -1;
}

static void format_dims(char* buf, size_t cap, int rank, const int64_t* dims) {
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && used < cap; ++i)
        used += (size_t)snprintf(buf + used, cap - used, i ? ",%lld" : "%lld", (long long)dims[i]);
    if (used < cap) snprintf(buf + used, cap - used, "]");
}

/* Each view must keep every element of the row value where its row reads it: order-keeping (same count) between
 * forms A and B, or a broadcast of B to C. The last shape must be B or C, so that the Sub or Div broadcasts it along
 * the rows to X's shape, or A when X has one row (its one value broadcasts along it). */
OrtStatus* epabi_softmax_rows_replay(const struct epabi_api* api, const struct epabi_softmax_rows_state* s,
                                     int x_rank, const int64_t* x_dims, const int64_t (*req)[EPABI_MAX_RANK],
                                     const int* n_req, int of_sum) {
    const bool keepdims = of_sum ? s->sum_keepdims : s->max_keepdims;
    int rank = x_rank - (keepdims ? 0 : 1);
    int64_t dims[EPABI_MAX_RANK];
    memcpy(dims, x_dims, (size_t)x_rank * sizeof *dims);
    if (keepdims) dims[x_rank - 1] = 1;
    int form = keepdims ? 1 : 0;
    for (int v = 0; v < s->n_views; ++v) {
        const struct epabi_softmax_view* view = &s->views[v];
        if (view->of_sum != of_sum) continue;
        int out_rank = 0;
        int64_t out[EPABI_MAX_RANK];
        EPABI_RETURN_IF_ERROR(view->kernel->view_dims(api, view->state, rank, dims, req[v], n_req[v], &out_rank, out));
        const int next = form_of(x_rank, x_dims, out_rank, out);
        const bool same_count = epabi_numel(out_rank, out) == epabi_numel(rank, dims);
        const bool ok = next >= 0 && (same_count ? (form == 2) == (next == 2) : form == 1 && next == 2);
        if (!ok) {
            char from_s[160], to_s[160], x_s[160];
            format_dims(from_s, sizeof from_s, rank, dims);
            format_dims(to_s, sizeof to_s, out_rank, out);
            format_dims(x_s, sizeof x_s, x_rank, x_dims);
            return epabi_error(api, ORT_EP_FAIL, "softmax step: a %s view of the row %s takes %s to %s, which does "
                               "not put each row's value back along its row of %s (the fused softmax needs that)",
                               view->kernel->op_type, of_sum ? "sums" : "maxima", from_s, to_s, x_s);
        }
        rank = out_rank;
        memcpy(dims, out, sizeof dims);
        form = next;
    }
    if (form == 0 && epabi_numel(rank, dims) != 1) {
        char d_s[160], x_s[160];
        format_dims(d_s, sizeof d_s, rank, dims);
        format_dims(x_s, sizeof x_s, x_rank, x_dims);
        return epabi_error(api, ORT_EP_FAIL, "softmax step: the row %s reach the %s as %s, which broadcasts across "
                           "the rows of %s (the fused softmax needs a column)", of_sum ? "sums" : "maxima",
                           of_sum ? "Div" : "Sub", d_s, x_s);
    }
    return NULL;
}

/* Reads the shape inputs of one row value's views (of_sum 0: the max, 1: the sum) on the host and replays them. */
static OrtStatus* check_views(struct epabi_exec* ex, const struct epabi_softmax_rows_state* s,
                              const struct epabi_tensor* X, const struct epabi_tensor* const* in, int n_in,
                              int of_sum) {
    const struct epabi_api* api = epabi_exec_api(ex);
    int64_t req[EPABI_SOFTMAX_MAX_VIEWS][EPABI_MAX_RANK];
    int n_req[EPABI_SOFTMAX_MAX_VIEWS] = {0};
    for (int v = 0; v < s->n_views; ++v) {
        if (s->views[v].of_sum != of_sum) continue;
        const struct epabi_tensor* t = 1 + v < n_in ? in[1 + v] : NULL;
        if (t == NULL || !epabi_is_index_dtype(t->dtype) || t->rank != 1 || t->dims[0] > EPABI_MAX_RANK)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "softmax step: view %d's shape input must be a 1-D int32 or "
                               "int64 tensor of at most %d values", v, EPABI_MAX_RANK);
        OrtStatus* st = NULL;
        n_req[v] = (int)t->dims[0];
        const void* host = n_req[v] > 0 ? epabi_exec_host_data(ex, t, &st) : NULL;
        if (st != NULL) return st;
        for (int i = 0; i < n_req[v]; ++i) req[v][i] = epabi_index_at(t->dtype, host, i);
    }
    return epabi_softmax_rows_replay(api, s, X->rank, X->dims, (const int64_t (*)[EPABI_MAX_RANK])req, n_req, of_sum);
}

static OrtStatus* softmax_rows_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                                   int n_in, int n_out) {
    const struct epabi_softmax_rows_state* s = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in != 1 + s->n_views || n_out != 1 || in[0] == NULL)
        return epabi_error(api, ORT_EP_FAIL, "softmax step: expected %d inputs and one output, got %d and %d",
                           1 + s->n_views, n_in, n_out);
    const struct epabi_tensor* X = in[0];
    if (X->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || X->rank != s->rank)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "softmax step: X is %s of rank %d; it was compiled for float "
                           "of rank %d", epabi_dtype_name(X->dtype), X->rank, s->rank);
    EPABI_RETURN_IF_ERROR(check_views(ex, s, X, in, n_in, 0));
    EPABI_RETURN_IF_ERROR(check_views(ex, s, X, in, n_in, 1));
    OrtStatus* st = NULL;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, X->rank, X->dims, &st);
    if (Y == NULL) return st;
    const int64_t len = X->dims[X->rank - 1];
    const int64_t total = epabi_numel(X->rank, X->dims);
    if (total == 0) return NULL;
    const struct softmax_rows_launch L = {X->data, Y->data, total / len, len, s->floor, s->has_floor ? 1 : 0};
    return epabi_exec_launch(ex, EPABI_LAUNCH_SOFTMAX_ROWS, softmax_rows_launch_fn, &L, sizeof L);
}

static void softmax_rows_release(void* state) {
    struct epabi_softmax_rows_state* s = state;
    if (s == NULL) return;
    for (int v = 0; v < s->n_views; ++v)
        if (s->views[v].state != NULL && s->views[v].kernel->release != NULL)
            s->views[v].kernel->release(s->views[v].state);
    free(s);
}

static bool softmax_rows_supports(const struct epabi_node* node, char* why, size_t why_len) {
    (void)node;
    snprintf(why, why_len, "the fused softmax step is built by the plan, not claimed");
    return false;
}

const struct epabi_kernel epabi_kernel_softmax_rows = {
    .op_type = "SoftmaxRows", .since_min = 0, .since_max = -1, .supports = softmax_rows_supports,
    .run = softmax_rows_run, .release = softmax_rows_release, .launch = EPABI_LAUNCH_SOFTMAX_ROWS,
    .host_inputs = ~1u,
};
