/*
 * plan_onehot.c - one-hot lookup fusion (kernels/onehot.h), the first pass epabi_plan_build (plan_build.c) runs, before
 * the linear steps take the MatMul: Equal(X, C) -> Cast(to float) -> MatMul(., W) [-> Add(., bias)] becomes one
 * lookup step when C is an int32/int64 constant whose dims are 1 but the last (K), W a finite float constant [K, N]
 * and the bias a float constant of dims 1 but the last (N or 1) that does not grow the product's rank. Equal's and
 * the Cast's outputs must be read by the next node alone and not be fused-node outputs; the MatMul's may be read
 * elsewhere, and then the Add stays a step of its own. The lookup's table and sorted keys become plan constants
 * (uploaded with the others on device plans), so the step's launch reads device memory only.
 * The pass works on the plan in place before it is shared (plan.h), so it takes no lock.
 */
#include "plan_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "linear.h"
#include "onehot.h"

/* C: an int32/int64 constant of rank >= 1 whose dims are 1 but the last; its K in *k. */
static bool is_keys(const struct plan_value* c, int64_t* k) {
    if (c->kind != VK_CONST || !epabi_is_index_dtype(c->dtype) || c->tensor.host == NULL || c->tensor.rank < 1)
        return false;
    for (int d = 0; d + 1 < c->tensor.rank; ++d)
        if (c->tensor.dims[d] != 1) return false;
    *k = c->tensor.dims[c->tensor.rank - 1];
    return *k >= 1;
}

/* W: a float constant [k, n] ([n, k] transposed) with no NaN or infinity (0 * inf would make every row's sum NaN). */
static bool is_weights(const struct plan_value* w, int64_t k, bool trans) {
    const struct epabi_tensor* t = &w->tensor;
    if (w->kind != VK_CONST || t->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || t->host == NULL || t->rank != 2 ||
        t->dims[trans ? 1 : 0] != k)
        return false;
    const float* f = t->host;
    for (int64_t i = 0; i < t->dims[0] * t->dims[1]; ++i)
        if (!isfinite(f[i])) return false;
    return true;
}

/* The bias of an Add after the product of rank out_rank: a float constant, dims 1 but the last, which is n or 1. */
static bool is_bias(const struct plan_value* b, int64_t n, int out_rank, int64_t* cols) {
    const struct epabi_tensor* t = &b->tensor;
    if (b->kind != VK_CONST || t->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || t->host == NULL || out_rank < 1 ||
        t->rank > out_rank)
        return false;
    for (int d = 0; d + 1 < t->rank; ++d)
        if (t->dims[d] != 1) return false;
    *cols = t->rank >= 1 ? t->dims[t->rank - 1] : 1;
    return *cols == 1 || *cols == n;
}

/* A constant of the plan for a table the pass derived; its name from the product's output, unique in the plan. */
static OrtStatus* add_derived(struct epabi_plan* p, const char* base, const char* what, ONNXTensorElementDataType dtype,
                              int rank, const int64_t* dims, const void* data, int* id) {
    char name[256];
    snprintf(name, sizeof name, "%s/epabi_onehot_%s.%d", base, what, p->n_values);
    return epabi_plan_add_constant(p, name, dtype, rank, dims, data, id);
}

/* The group that Equal step ei leads, or false. */
struct group {
    int eq, cast, matmul, add;   /* steps; add -1: none */
    int x, c, w, bias;           /* values; bias -1: none */
    int tail;                    /* the value the fused step writes */
    int64_t k, n, bias_cols;
    bool trans_w;                /* a Gemm with transB: W is [n, k] */
};

static bool match(const struct epabi_plan* p, int ei, struct group* g) {
    const struct plan_step* e = &p->steps[ei];
    if (!e->kernel->onehot_compare || e->n_in != 2 || e->n_out != 1 || e->in[0] < 0 || e->in[1] < 0) return false;
    memset(g, 0, sizeof *g);
    g->eq = ei;
    g->add = g->bias = -1;
    int side = 0;
    for (side = 0; side < 2; ++side)
        if (is_keys(&p->values[e->in[side]], &g->k)) break;
    if (side == 2) return false;
    g->c = e->in[side];
    g->x = e->in[1 - side];
    const struct plan_value* xv = &p->values[g->x];
    if (xv->dtype != p->values[g->c].dtype) return false;
    /* X's last dim: 1 (the lookup), or unknown at build (the step checks at run time; K there takes the general
     * path); a known one that is neither 1 nor K could not have passed Equal */
    if (xv->decl_rank >= 1) {
        const int64_t last = xv->decl_dims[xv->decl_rank - 1];
        if (last >= 0 && last != 1 && last != g->k) return false;
    }
    int slot = 0;
    const int eq_out = e->out[0];
    g->cast = epabi_plan_sole_reader(p, eq_out, &slot);
    if (g->cast < 0) return false;
    const struct plan_step* c = &p->steps[g->cast];
    if (c->kernel->cast_to == NULL || c->n_in != 1 || c->n_out != 1 ||
        c->kernel->cast_to(c->state) != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        return false;
    const int a = c->out[0];
    g->matmul = epabi_plan_sole_reader(p, a, &slot);
    if (g->matmul < 0 || slot != 0) return false;
    const struct plan_step* m = &p->steps[g->matmul];
    struct epabi_linear_lead lead;
    if (m->kernel->linear_lead == NULL || m->n_in < 2 || m->n_out != 1 || m->in[1] < 0 ||
        !m->kernel->linear_lead(m->state, &lead) || p->values[m->out[0]].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        return false;
    /* a Gemm (ORT's MatMulAddFusion makes one of a 2-D MatMul + Add): op(A) must be A and alpha 1; its C, with beta
     * 1, is the bias */
    const bool has_c = m->n_in >= 3 && m->in[2] >= 0;
    const int out_rank = p->values[a].decl_rank;   /* the product's rank is the one-hot's */
    if (!lead.matmul && (lead.trans_a || lead.alpha != 1.0f || (has_c && lead.beta != 1.0f))) return false;
    if (lead.matmul && m->n_in != 2) return false;
    g->trans_w = !lead.matmul && lead.trans_b;
    if (!is_weights(&p->values[m->in[1]], g->k, g->trans_w)) return false;
    g->w = m->in[1];
    g->n = p->values[g->w].tensor.dims[g->trans_w ? 0 : 1];
    g->tail = m->out[0];
    if (has_c) {
        if (!is_bias(&p->values[m->in[2]], g->n, out_rank, &g->bias_cols)) return false;
        g->bias = m->in[2];
        return true;
    }
    /* the Add of a bias */
    const int r = p->values[g->tail].dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ? epabi_plan_sole_reader(p, g->tail, &slot) : -1;
    if (r >= 0 && p->steps[r].kernel->linear_bias && p->steps[r].n_in == 2 && p->steps[r].n_out == 1 &&
        p->steps[r].in[1 - slot] >= 0 && is_bias(&p->values[p->steps[r].in[1 - slot]], g->n, out_rank, &g->bias_cols) &&
        p->values[p->steps[r].out[0]].dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        g->add = r;
        g->bias = p->steps[r].in[1 - slot];
        g->tail = p->steps[r].out[0];
    }
    return true;
}

static OrtStatus* fuse(struct epabi_plan* p, struct group* g) {
    const struct plan_value* cv = &p->values[g->c];
    const struct plan_value* bv = g->bias >= 0 ? &p->values[g->bias] : NULL;
    const char* base = p->values[g->tail].name;   /* owned by the value: it stays where it is */
    if (g->trans_w) {   /* the lookup and the general path read W as [k, n] */
        const float* wt = p->values[g->w].tensor.host;
        float* w = malloc((size_t)(g->k * g->n > 0 ? g->k * g->n : 1) * sizeof *w);
        if (w == NULL) return epabi_plan_oom(p, "one-hot weights");
        for (int64_t i = 0; i < g->k; ++i)
            for (int64_t j = 0; j < g->n; ++j) w[i * g->n + j] = wt[j * g->k + i];
        const int64_t dims[2] = {g->k, g->n};
        OrtStatus* st = add_derived(p, base, "weights", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, 2, dims, w, &g->w);
        free(w);
        EPABI_RETURN_IF_ERROR(st);
        cv = &p->values[g->c];   /* the value table may have moved */
        bv = g->bias >= 0 ? &p->values[g->bias] : NULL;
    }
    struct epabi_onehot_table t;
    if (!epabi_onehot_table_build(cv->dtype, cv->tensor.host, g->k, p->values[g->w].tensor.host, g->n,
                                  bv != NULL ? bv->tensor.host : NULL, g->bias_cols, &t))
        return epabi_plan_oom(p, "one-hot table");
    struct epabi_onehot_state* state = epabi_onehot_state_new(t.base);
    char op_type[64];
    snprintf(op_type, sizeof op_type, "%s+%s+%s%s%s", p->steps[g->eq].op_type, p->steps[g->cast].op_type,
             p->steps[g->matmul].op_type, g->add >= 0 ? "+" : "", g->add >= 0 ? p->steps[g->add].op_type : "");
    char* op = strdup(op_type);
    int table_id = -1, keys_id = -1;
    OrtStatus* st = NULL;
    if (state == NULL || op == NULL) st = epabi_plan_oom(p, "one-hot step");
    const int64_t table_dims[2] = {t.n_keys + 1, g->n};
    if (st == NULL)
        st = add_derived(p, base, "table", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, 2, table_dims, t.table, &table_id);
    if (st == NULL && t.keys != NULL)
        st = add_derived(p, base, "keys", ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, 1, &t.n_keys, t.keys, &keys_id);
    free(t.table);
    free(t.keys);
    if (st != NULL) {
        free(state);
        free(op);
        return st;
    }
    struct plan_step* s = &p->steps[g->eq];   /* Equal's step becomes the lookup */
    if (s->state != NULL && s->kernel->release != NULL) s->kernel->release(s->state);
    free(s->op_type);
    s->op_type = op;
    s->kernel = &epabi_kernel_onehot;
    s->state = state;
    s->n_in = ONEHOT_N_IN;
    s->in[ONEHOT_IN_X] = g->x;
    s->in[ONEHOT_IN_C] = g->c;
    s->in[ONEHOT_IN_W] = g->w;
    s->in[ONEHOT_IN_TABLE] = table_id;
    s->in[ONEHOT_IN_KEYS] = keys_id;
    s->in[ONEHOT_IN_BIAS] = g->bias;
    s->out[0] = g->tail;
    /* the folded steps go, the latest first so the earlier indices stay valid */
    int folded[3] = {g->cast, g->matmul, g->add};
    int into = g->eq;
    for (int round = 0; round < 3; ++round) {
        int latest = -1, at = -1;
        for (int i = 0; i < 3; ++i)
            if (folded[i] > latest) {
                latest = folded[i];
                at = i;
            }
        if (latest < 0) break;
        folded[at] = -1;
        into = epabi_plan_drop_into(p, latest, into);
    }
    p->values[g->tail].producer = into;
    p->n_onehot++;
    return NULL;
}

OrtStatus* epabi_plan_fuse_onehot(struct epabi_plan* p) {
    for (int ei = 0; ei < p->n_steps; ++ei) {
        struct group g;
        if (!match(p, ei, &g)) continue;
        EPABI_RETURN_IF_ERROR(fuse(p, &g));
        ei = -1;   /* indices moved: start over (plans are small, lookups few) */
    }
    return NULL;
}
