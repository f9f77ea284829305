/*
 * chain.c - the chain step (chain.h): run() checks the inputs against the compiled shapes and issues one
 * EPABI_LAUNCH_CHAIN launch; the host launch walks the output in blocks of CHAIN_BLOCK elements and applies the op
 * list to a block at a time, one plain loop per op (vectorised), with the unfused kernels' math.
 */
#include "chain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "math_common.h"

/* Elements per block: the registers of a block (EPABI_CHAIN_MAX_OPS of them) stay in the L1 cache. */
enum { CHAIN_BLOCK = 256 };

/* Clip as unary.c's: lo then hi, so a min above the max gives the max; NaN passes. */
EPABI_SIMD_CLONES static void clip_block(const float* X, float lo, float hi, float* O, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = X[i] < lo ? lo : X[i];
        O[i] = v > hi ? hi : v;
    }
}

/* One block of n elements: input k starts at ip[k] with stride is[k] along the block; results at `at`. */
static void chain_block(const struct chain_args* a, const float* const* ip, const int64_t* is, int64_t at, int64_t n,
                        float (*reg)[CHAIN_BLOCK], float (*tmp)[CHAIN_BLOCK]) {
    for (int k = 0; k < a->n_ops; ++k) {
        const struct chain_op* o = &a->ops[k];
        const int n_operands = o->kind == CHAIN_BINARY ? 2 : 1;
        const float* src[2] = {NULL, NULL};
        int64_t stride[2] = {1, 1};
        for (int t = 0; t < n_operands; ++t) {
            const int32_t r = t == 0 ? o->a : o->b;
            if (r == EPABI_CHAIN_IMMEDIATE) {   /* one value read as a broadcast operand */
                src[t] = t == 0 ? &o->alpha : &o->beta;
                stride[t] = 0;
                continue;
            }
            if (r >= 0) {
                src[t] = reg[r];
                continue;
            }
            const int in = -1 - r;
            src[t] = ip[in];
            stride[t] = is[in];
            /* a unary op takes a contiguous run; a stride other than 0 and 1 is gathered for every op */
            if ((stride[t] == 0 && o->kind != CHAIN_BINARY) || (stride[t] != 0 && stride[t] != 1)) {
                for (int64_t i = 0; i < n; ++i) tmp[t][i] = ip[in][i * is[in]];
                src[t] = tmp[t];
                stride[t] = 1;
            }
        }
        float* out = reg[k];
        if (o->kind == CHAIN_BINARY) {
            epabi_arith_f32_span(o->op, src[0], stride[0], src[1], stride[1], out, n);
        } else if (o->kind == CHAIN_CLIP) {
            clip_block(src[0], o->alpha, o->beta, out, n);
        } else {
            const struct un_args u = {.op = (enum un_op)o->op, .dtype = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT,
                                      .in = src[0], .out = out, .n = n, .alpha = o->alpha, .beta = o->beta};
            epabi_unary_span(&u, 0, n);
        }
        if (o->out >= 0) memcpy(a->out[o->out] + at, out, (size_t)n * sizeof(float));
    }
}

/* Output elements [begin, end) in row-major order, as elementwise.c's ew_span walks them (an odometer over the
 * outer dims); one chunk of epabi_pool_for_range. */
static void chain_span(void* ctx, int64_t begin, int64_t end) {
    const struct chain_args* a = ctx;
    float reg[EPABI_CHAIN_MAX_OPS][CHAIN_BLOCK];
    float tmp[2][CHAIN_BLOCK];
    const int r = a->rank;
    const int64_t inner = a->dims[r - 1];
    int64_t idx[EPABI_MAX_RANK] = {0};
    int64_t off[EPABI_CHAIN_MAX_INPUTS] = {0};
    int64_t col = begin % inner;
    for (int64_t rest = begin / inner, d = r - 2; d >= 0; --d) {
        idx[d] = rest % a->dims[d];
        rest /= a->dims[d];
        for (int k = 0; k < a->n_in; ++k) off[k] += idx[d] * a->strides[k][d];
    }
    int64_t s[EPABI_CHAIN_MAX_INPUTS];
    for (int k = 0; k < a->n_in; ++k) s[k] = a->strides[k][r - 1];
    for (int64_t at = begin; at < end;) {
        const int64_t row = inner - col < end - at ? inner - col : end - at;
        for (int64_t done = 0; done < row; done += CHAIN_BLOCK) {
            const int64_t n = row - done < CHAIN_BLOCK ? row - done : CHAIN_BLOCK;
            const float* ip[EPABI_CHAIN_MAX_INPUTS];
            for (int k = 0; k < a->n_in; ++k) ip[k] = a->in[k] + off[k] + (col + done) * s[k];
            chain_block(a, ip, s, at + done, n, reg, tmp);
        }
        at += row;
        col = 0;
        for (int d = r - 2; d >= 0; --d) {   /* advance the odometer over the outer dimensions */
            for (int k = 0; k < a->n_in; ++k) off[k] += a->strides[k][d];
            if (++idx[d] < a->dims[d]) break;
            for (int k = 0; k < a->n_in; ++k) off[k] -= a->strides[k][d] * a->dims[d];
            idx[d] = 0;
        }
    }
}

static void chain_launch(const void* vargs) {
    const struct chain_args* a = vargs;
    epabi_pool_for_range(a->pool, epabi_numel(a->rank, a->dims), EPABI_PARALLEL_MIN_ELEMS, chain_span, (void*)a);
}

/* Drops unit dims and merges neighbours every input walks as one, as elementwise.c's ew_coalesce (the output is
 * contiguous, so its flat index is unchanged): a chain over contiguous operands is one row. */
static void chain_coalesce(struct chain_args* a) {
    int r = 0;
    for (int d = 0; d < a->rank; ++d) {
        if (a->dims[d] == 1) continue;
        bool merge = r > 0;
        for (int k = 0; k < a->n_in && merge; ++k) merge = a->strides[k][r - 1] == a->strides[k][d] * a->dims[d];
        if (merge) {
            a->dims[r - 1] *= a->dims[d];
            for (int k = 0; k < a->n_in; ++k) a->strides[k][r - 1] = a->strides[k][d];
            continue;
        }
        a->dims[r] = a->dims[d];
        for (int k = 0; k < a->n_in; ++k) a->strides[k][r] = a->strides[k][d];
        ++r;
    }
    if (r == 0) {
        a->dims[0] = 1;
        for (int k = 0; k < a->n_in; ++k) a->strides[k][0] = 0;
        r = 1;
    }
    for (int d = r; d < EPABI_MAX_RANK; ++d) {
        a->dims[d] = 0;
        for (int k = 0; k < a->n_in; ++k) a->strides[k][d] = 0;
    }
    a->rank = r;
}

/* Whether run-time dims a match the compiled dims b (-1 in b: symbolic, any extent). */
static bool same_dims(int ra, const int64_t* a, int rb, const int64_t* b) {
    if (ra != rb) return false;
    for (int d = 0; d < ra; ++d)
        if (a[d] != b[d] && b[d] >= 0) return false;
    return true;
}

/* Input k's mismatch with the shapes the plan proved the fusion on: ORT_INVALID_ARGUMENT naming it, its shape, the
 * output shape the inputs gave (dims), and the declared shapes (a graph whose same-named symbols differ at run
 * time). */
static OrtStatus* shape_error(const struct epabi_api* api, const struct epabi_chain_state* c, int k,
                              const struct epabi_tensor* t, const int64_t* dims, const char* why) {
    char got[128], out[128];
    return epabi_error(api, ORT_INVALID_ARGUMENT,
                       "elementwise chain input %d has shape %s, %s the output shape %s; the plan fused its nodes for "
                       "the declared shapes %s (input %d) and %s (output), whose same-named dims must be equal", k,
                       epabi_shape_str(got, sizeof got, t->rank, t->dims), why,
                       epabi_shape_str(out, sizeof out, c->rank, dims), c->in_decl[k], k, c->out_decl);
}

/* A symbolic chain's output shape (dims, c->rank of them): the broadcast of its inputs' run-time shapes, right-aligned,
 * which must keep the declared static dims and be the shape of each output too (the broadcast of the inputs it
 * depends on), as plan_chains.c proved from the declared shapes: a graph whose same-named dims differ at run time
 * could make a written value smaller. The inputs have their declared ranks and static dims (run_chain checked). */
static OrtStatus* symbolic_shape(const struct epabi_api* api, const struct epabi_chain_state* c,
                                 const struct epabi_tensor* const* in, int n_in, int64_t* dims) {
    for (int d = 0; d < c->rank; ++d) dims[d] = 1;
    for (int k = 0; k < n_in; ++k) {
        const struct epabi_tensor* t = in[k];
        for (int d = 0; d < t->rank; ++d) {
            int64_t* o = &dims[c->rank - t->rank + d];
            if (*o == 1) *o = t->dims[d];
            else if (t->dims[d] != 1 && t->dims[d] != *o)
                return shape_error(api, c, k, t, dims, "which does not broadcast with");
        }
    }
    for (int d = 0; d < c->rank; ++d) {
        if (c->dims[d] < 0 || dims[d] == c->dims[d]) continue;
        for (int k = 0; k < n_in; ++k) {   /* name an input that gave the extent */
            const struct epabi_tensor* t = in[k];
            const int td = d - (c->rank - t->rank);
            if (td >= 0 && t->dims[td] == dims[d]) return shape_error(api, c, k, t, dims, "which makes");
        }
        return shape_error(api, c, 0, in[0], dims, "which with the others makes");
    }
    for (int o = 0; o < c->n_out; ++o) {   /* a value of fewer inputs, when same-named dims differ: smaller */
        int64_t own[EPABI_MAX_RANK];
        for (int d = 0; d < c->rank; ++d) own[d] = 1;
        int last = 0;
        for (int k = 0; k < n_in; ++k) {
            if ((c->out_cone[o] >> k & 1u) == 0) continue;
            last = k;
            for (int d = 0; d < in[k]->rank; ++d) {
                int64_t* e = &own[c->rank - in[k]->rank + d];
                if (*e == 1) *e = in[k]->dims[d];
            }
        }
        for (int d = 0; d < c->rank; ++d)
            if (own[d] != dims[d]) {
                char mine[128];
                epabi_shape_str(mine, sizeof mine, c->rank, own);
                char why[256];
                snprintf(why, sizeof why, "which with the other inputs of output %d gives it the shape %s, not", o,
                         mine);
                return shape_error(api, c, last, in[last], dims, why);
            }
    }
    return NULL;
}

static OrtStatus* run_chain(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                            int n_out) {
    const struct epabi_chain_state* c = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in != c->n_in || n_out != c->n_out)
        return epabi_error(api, ORT_EP_FAIL, "elementwise chain with %d inputs and %d outputs, compiled for %d and %d",
                           n_in, n_out, c->n_in, c->n_out);
    for (int k = 0; k < n_in; ++k) {
        const struct epabi_tensor* t = in[k];
        if (t == NULL || t->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "elementwise chain input %d is %s, not float", k,
                               t == NULL ? "absent" : epabi_dtype_name(t->dtype));
        if (!same_dims(t->rank, t->dims, c->in_rank[k], c->in_dims[k])) {
            char got[128], want[128];
            return epabi_error(api, ORT_INVALID_ARGUMENT,
                               "elementwise chain input %d has shape %s; the plan fused its nodes for the declared "
                               "shape %s", k, epabi_shape_str(got, sizeof got, t->rank, t->dims),
                               epabi_shape_str(want, sizeof want, c->in_rank[k], c->in_dims[k]));
        }
    }
    int64_t dims[EPABI_MAX_RANK];   /* the output shape: compiled, or a symbolic chain's inputs' broadcast */
    memcpy(dims, c->dims, sizeof dims);
    if (c->symbolic) EPABI_RETURN_IF_ERROR(symbolic_shape(api, c, in, n_in, dims));
    struct chain_args args;
    memset(&args, 0, sizeof args);
    args.n_ops = c->n_ops;
    args.n_in = c->n_in;
    args.n_out = c->n_out;
    memcpy(args.ops, c->ops, sizeof args.ops);
    args.rank = c->rank > 0 ? c->rank : 1;
    args.dims[0] = 1;
    memcpy(args.dims, dims, sizeof(int64_t) * (size_t)c->rank);
    for (int k = 0; k < n_in; ++k) {
        const struct epabi_tensor* t = in[k];
        /* broadcast strides against the output shape, both right-aligned */
        int64_t s = 1;
        for (int d = args.rank - 1; d >= 0; --d) {
            const int td = d - (args.rank - t->rank);
            if (td < 0 || c->rank == 0) {
                args.strides[k][d] = 0;
                continue;
            }
            args.strides[k][d] = t->dims[td] == 1 && args.dims[d] != 1 ? 0 : s;
            s *= t->dims[td];
        }
        args.in[k] = t->data;
    }
    for (int o = 0; o < n_out; ++o) {
        OrtStatus* st = NULL;
        struct epabi_tensor* t = epabi_exec_output(ex, o, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, c->rank, dims, &st);
        if (t == NULL) return st;
        args.out[o] = t->data;
    }
    if (epabi_numel(c->rank, dims) == 0) return NULL;
    chain_coalesce(&args);
    args.pool = epabi_exec_pool(ex);
    return epabi_exec_launch(ex, EPABI_LAUNCH_CHAIN, chain_launch, &args, sizeof args);
}

static bool chain_supports(const struct epabi_node* node, char* why, size_t why_len) {
    (void)node;
    snprintf(why, why_len, "the chain step is built by the plan, not claimed");
    return false;
}

const struct epabi_kernel epabi_kernel_chain = {
    .op_type = "Chain", .since_min = 0, .since_max = -1, .supports = chain_supports, .run = run_chain,
    .release = free, .launch = EPABI_LAUNCH_CHAIN,
};
