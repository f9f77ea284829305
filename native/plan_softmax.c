/*
 * plan_softmax.c - softmax fusion (kernels/softmax_rows.h), a pass epabi_plan_build (plan_build.c) runs after the
 * moments pass and before the schedule and the elementwise chains (which would otherwise take the Sub, Exp and Div):
 * ReduceMax(X, last axis) [-> Max(., c)] [-> views] -> Sub(X, .) -> Exp -> ReduceSum(last axis) [-> views] -> Div(e, .)
 * becomes one step reading X (and the views' shape inputs) and writing the Div's output.
 *
 * Every intermediate must be a float32 value that nothing outside the pattern reads (no fused output; e read by the
 * ReduceSum and the Div alone), X's rank known at build, both reductions over exactly its last axis (an attribute,
 * or a constant axes input), c a float32 constant of one element and of no more dims than the max, and each row value
 * that reaches its Sub or Div without views kept as a column (keepdims 1) unless X has one row. The views'
 * shapes may be computed at run time, so the fused step checks them there (softmax_rows.h). The fused step reads
 * only values the pattern read already, so no cycle can form. The pass works on the plan in place before it is
 * shared (plan.h), so it takes no lock.
 */
#include "plan_internal.h"

#include <stdlib.h>
#include <string.h>

#include "reduce.h"
#include "softmax_rows.h"

/* The chain link of step si when it is a device step of one float32 output and no epilogue; false otherwise. */
static bool link_of(const struct epabi_plan* p, int si, struct chain_op* op) {
    const struct plan_step* s = &p->steps[si];
    const struct epabi_tensor* none[EPABI_MAX_NODE_IO] = {NULL};
    if (s->kernel->chain_link == NULL || s->on_host || s->n_out != 1 || s->epilogue != EPABI_EPILOGUE_NONE ||
        p->values[s->out[0]].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        return false;
    return s->kernel->chain_link(s->state, none, s->n_in, op);
}

/* The producer of v when v is a float32 intermediate whose only reader is step `reader`; -1 otherwise. */
static int private_producer(const struct epabi_plan* p, int v, int reader) {
    int slot = 0;
    if (v < 0 || p->values[v].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ||
        epabi_plan_sole_reader(p, v, &slot) != reader)
        return -1;
    return p->values[v].producer;
}

/* The spec of step si when it is a device reduction `op` of one output over exactly the last axis of a rank-`rank`
 * input; NULL otherwise. */
static const struct epabi_reduce_spec* last_axis_reduce(const struct epabi_plan* p, int si, enum reduce_op op,
                                                        int rank) {
    const struct plan_step* s = &p->steps[si];
    if (s->kernel->reduce_spec == NULL || s->on_host || s->n_out != 1 || s->n_in < 1 ||
        s->epilogue != EPABI_EPILOGUE_NONE)
        return NULL;
    const struct epabi_reduce_spec* spec = s->kernel->reduce_spec(s->state);
    if (spec == NULL || spec->op != op) return NULL;
    int64_t axis = 0;
    if (spec->axes_input) {
        const int a = s->n_in >= 2 ? s->in[1] : -1;
        if (a < 0) return NULL;
        const struct plan_value* v = &p->values[a];
        if (v->kind != VK_CONST || v->tensor.dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 || v->tensor.rank != 1 ||
            v->tensor.dims[0] != 1 || v->tensor.host == NULL)
            return NULL;
        axis = ((const int64_t*)v->tensor.host)[0];
    } else {
        if (spec->n_axes != 1) return NULL;
        axis = spec->axes[0];
    }
    int norm = 0;
    return epabi_norm_axis(axis, rank, &norm) && norm == rank - 1 ? spec : NULL;
}

/* Whether X's declared dims before the last are all 1 (a rank-1 X included): one row, so that a row value of X's
 * dims without the last (keepdims 0) still broadcasts along it. */
static bool one_row(const struct plan_value* xv) {
    for (int k = 0; k + 1 < xv->decl_rank; ++k)
        if (xv->decl_dims[k] != 1) return false;
    return true;
}

/* Walks back from value v, read by step `reader`, over views only it reads, recording them (nearest first) into
 * steps[]; the value they start from. -1 when more views than fit. */
static int skip_views(const struct epabi_plan* p, int v, int reader, int* steps, int* n, int cap) {
    for (;;) {
        const int pi = private_producer(p, v, reader);
        if (pi < 0) return v;
        const struct plan_step* s = &p->steps[pi];
        if (s->kernel->view_dims == NULL || s->on_host || s->n_in != 2 || s->n_out != 1 || s->in[1] < 0) return v;
        if (*n == cap) return -1;
        steps[(*n)++] = pi;
        reader = pi;
        v = s->in[0];
    }
}

/* False when X's declared dims and the shapes of one row value's views are all constants and the views do not put
 * each row's value back along its row (softmax_rows.h): valid ONNX the fused step would refuse at every run, so the
 * unfused kernels keep it. True otherwise (the fused step checks shapes known only at run time). */
static bool static_views_fit(const struct epabi_plan* p, const struct epabi_softmax_rows_state* st,
                             const struct plan_value* xv, const int* view_steps) {
    for (int k = 0; k < xv->decl_rank; ++k)
        if (xv->decl_dims[k] < 0) return true;
    int64_t req[EPABI_SOFTMAX_MAX_VIEWS][EPABI_MAX_RANK];
    int n_req[EPABI_SOFTMAX_MAX_VIEWS] = {0};
    for (int of_sum = 0; of_sum < 2; ++of_sum) {
        bool known = true;
        for (int v = 0; v < st->n_views && known; ++v) {
            if (st->views[v].of_sum != of_sum) continue;
            const struct plan_value* sv = &p->values[p->steps[view_steps[v]].in[1]];
            known = sv->kind == VK_CONST && sv->tensor.host != NULL && epabi_is_index_dtype(sv->tensor.dtype) &&
                    sv->tensor.rank == 1 && sv->tensor.dims[0] <= EPABI_MAX_RANK;
            if (!known) break;
            n_req[v] = (int)sv->tensor.dims[0];
            for (int i = 0; i < n_req[v]; ++i) req[v][i] = epabi_index_at(sv->tensor.dtype, sv->tensor.host, i);
        }
        if (!known) continue;
        OrtStatus* bad = epabi_softmax_rows_replay(p->api, st, xv->decl_rank, xv->decl_dims,
                                                   (const int64_t (*)[EPABI_MAX_RANK])req, n_req, of_sum);
        if (bad != NULL) {
            p->api->ort->ReleaseStatus(bad);
            return false;
        }
    }
    return true;
}

/* The one fusion rooted at Div step di, installed in place of it; false (nothing changed) when di roots none. */
static OrtStatus* fuse_at(struct epabi_plan* p, int di, bool* fused) {
    *fused = false;
    struct chain_op op;
    const struct plan_step* div = &p->steps[di];
    if (!link_of(p, di, &op) || op.kind != CHAIN_BINARY || op.op != OP_DIV || div->n_in != 2) return NULL;
    int sum_views[EPABI_SOFTMAX_MAX_VIEWS], max_views[EPABI_SOFTMAX_MAX_VIEWS];
    int n_sum = 0, n_max = 0;
    const int s = skip_views(p, div->in[1], di, sum_views, &n_sum, EPABI_SOFTMAX_MAX_VIEWS);
    const int rs = s < 0 ? -1 : private_producer(p, s, n_sum > 0 ? sum_views[n_sum - 1] : di);
    if (rs < 0) return NULL;
    const int e = div->in[0];
    const struct plan_value* ev = &p->values[e];
    if (p->steps[rs].in[0] != e || ev->kind != VK_INNER || ev->output_index >= 0 || ev->producer < 0 ||
        ev->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || epabi_plan_readers(p, e) != 2)
        return NULL;
    const int ei = ev->producer;
    if (!link_of(p, ei, &op) || op.kind != CHAIN_UNARY || op.op != UN_EXP || p->steps[ei].n_in != 1) return NULL;
    const int si = private_producer(p, p->steps[ei].in[0], ei);
    if (si < 0 || !link_of(p, si, &op) || op.kind != CHAIN_BINARY || op.op != OP_SUB || p->steps[si].n_in != 2)
        return NULL;
    const int x = p->steps[si].in[0];
    const struct plan_value* xv = &p->values[x];
    if (x < 0 || xv->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || xv->decl_rank < 1) return NULL;
    const int rank = xv->decl_rank;
    const struct epabi_reduce_spec* sum_spec = last_axis_reduce(p, rs, REDUCE_SUM, rank);
    if (sum_spec == NULL) return NULL;
    const int m = skip_views(p, p->steps[si].in[1], si, max_views, &n_max, EPABI_SOFTMAX_MAX_VIEWS - n_sum);
    int mi = m < 0 ? -1 : private_producer(p, m, n_max > 0 ? max_views[n_max - 1] : si);
    if (mi < 0) return NULL;
    int floor_step = -1;
    float floor = 0.0f;
    if (link_of(p, mi, &op) && op.kind == CHAIN_BINARY && op.op == OP_MAX && p->steps[mi].n_in == 2) {
        /* the floor: a one-element float constant, either operand */
        const int a = p->steps[mi].in[0], b = p->steps[mi].in[1];
        const int c = a >= 0 && p->values[a].kind == VK_CONST ? a : b;
        const int m0 = c == a ? b : a;
        const struct plan_value* cv = c >= 0 ? &p->values[c] : NULL;
        if (cv == NULL || m0 < 0 || cv->kind != VK_CONST || cv->tensor.dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ||
            cv->tensor.host == NULL || epabi_numel(cv->tensor.rank, cv->tensor.dims) != 1 ||
            cv->tensor.rank > rank)
            return NULL;
        floor = *(const float*)cv->tensor.host;
        floor_step = mi;
        mi = private_producer(p, m0, mi);
        if (mi < 0) return NULL;
    }
    const struct epabi_reduce_spec* max_spec = last_axis_reduce(p, mi, REDUCE_MAX, rank);
    if (max_spec == NULL || p->steps[mi].in[0] != x) return NULL;
    /* A row value reaching its Sub or Div as X's dims without the last broadcasts across the rows unless there is one
     * row: valid ONNX (a square X) that the fused step would refuse at run, so leave it to the unfused kernels. */
    if ((n_max == 0 && !max_spec->keepdims) || (n_sum == 0 && !sum_spec->keepdims))
        if (!one_row(xv)) return NULL;
    if (floor_step >= 0) {
        /* Max(m0, c) keeps m0's shape only when c has no more dims than m0 */
        const int c = p->values[p->steps[floor_step].in[0]].kind == VK_CONST ? p->steps[floor_step].in[0]
                                                                             : p->steps[floor_step].in[1];
        if (p->values[c].tensor.rank > rank - (max_spec->keepdims ? 0 : 1)) return NULL;
    }

    struct epabi_softmax_rows_state* st = calloc(1, sizeof *st);
    char* op_type = strdup("ReduceMax+Sub+Exp+ReduceSum+Div");
    if (st == NULL || op_type == NULL) {
        free(st);
        free(op_type);
        return epabi_plan_oom(p, "softmax step");
    }
    st->rank = rank;
    st->max_keepdims = max_spec->keepdims;
    st->sum_keepdims = sum_spec->keepdims;
    st->has_floor = floor_step >= 0;
    st->floor = floor;
    /* pattern order: the max's views from the max on, then the sum's */
    int view_steps[EPABI_SOFTMAX_MAX_VIEWS];
    for (int k = n_max - 1; k >= 0; --k) view_steps[st->n_views++] = max_views[k];
    for (int k = n_sum - 1; k >= 0; --k) view_steps[st->n_views++] = sum_views[k];
    for (int v = 0; v < st->n_views; ++v)
        st->views[v] = (struct epabi_softmax_view){p->steps[view_steps[v]].kernel, p->steps[view_steps[v]].state,
                                                   v >= n_max};
    if (!static_views_fit(p, st, xv, view_steps)) {
        free(st);   /* the views' states are still their steps' */
        free(op_type);
        return NULL;
    }
    int gone[4 + 2 * EPABI_SOFTMAX_MAX_VIEWS];
    int n_gone = 0;
    struct plan_step* d = &p->steps[di];
    d->in[0] = x;
    for (int v = 0; v < st->n_views; ++v) {
        struct plan_step* vs = &p->steps[view_steps[v]];
        vs->state = NULL;   /* the fused step owns it now */
        d->in[1 + v] = vs->in[1];
        gone[n_gone++] = view_steps[v];
    }
    d->n_in = 1 + st->n_views;
    if (d->state != NULL && d->kernel->release != NULL) d->kernel->release(d->state);
    free(d->op_type);
    d->kernel = &epabi_kernel_softmax_rows;
    d->state = st;
    d->op_type = op_type;
    gone[n_gone++] = mi;
    if (floor_step >= 0) gone[n_gone++] = floor_step;
    gone[n_gone++] = si;
    gone[n_gone++] = ei;
    gone[n_gone++] = rs;
    /* the later ones first, so the earlier indices stay valid */
    for (int a = 0; a < n_gone; ++a)
        for (int b = a + 1; b < n_gone; ++b)
            if (gone[b] > gone[a]) {
                const int t = gone[a];
                gone[a] = gone[b];
                gone[b] = t;
            }
    for (int k = 0; k < n_gone; ++k) di = epabi_plan_drop_into(p, gone[k], di);
    p->n_softmax++;
    *fused = true;
    return NULL;
}

OrtStatus* epabi_plan_fuse_softmax(struct epabi_plan* p) {
    for (int di = 0; di < p->n_steps; ++di) {
        bool fused = false;
        OrtStatus* st = fuse_at(p, di, &fused);
        if (st != NULL) return st;
        if (fused) di = -1;   /* indices moved: start over (plans are small, softmaxes few) */
    }
    return NULL;
}
