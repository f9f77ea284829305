/*
 * plan_chains.c - elementwise-chain fusion (kernels/chain.h), a pass epabi_plan_build (plan_build.c) runs on the
 * scheduled plan: groups of float32 steps with a chain link (unary ops, Clip with constant bounds, Add/Sub/Mul/Div,
 * an Add/Sub/Mul/Div with the Relu the epilogue pass folded into it) that all produce the same statically declared
 * shape become one chain step, so a SiLU, a hand-written HardSwish (Add, Clip, Mul, Div) or a squeeze-excite Mul
 * followed by a residual Add is one launch instead of one per node.
 *
 * A group grows from its first step (in schedule order) by every later candidate that reads one of its values and
 * none of whose other inputs depends on the group (so the fused graph stays acyclic); operands from outside are
 * constants, fused-node inputs or other steps' values of static shapes broadcastable to the group's. A value of
 * the group that a step outside it reads, or that is a fused-node output, is still written; the others never
 * exist. A float32 constant of one element that does not grow the output is an immediate of its op (no input slot).
 * Over symbolic shapes the declared dims' symbols (plan_value.decl_sym) prove extents equal: two dims are one extent
 * when both are static and equal or both are one named symbol (an unnamed symbolic dim equals nothing). A group whose
 * shape is so named takes links producing that shape from operands that broadcast into it without growing it (per
 * aligned dim: static 1, the same static extent or the same symbol), each of the output's dims given by one of them;
 * its first link may so grow [B,1,256] by [1,512,1] into [B,512,256]. The chain then computes its run-time shape as
 * the broadcast of its inputs' and refuses a run where same-named symbols differ (kernels/chain.c). A group whose shape
 * has an unnamed symbolic dim starts from a link reading one value (its root) and takes only links reading the root,
 * its own values and immediates: each keeps the root's run-time shape.
 * Host steps of device plans (plan.h) are never fused, so shape computations stay on the host.
 * The pass works on the plan in place before it is shared (plan.h), so it takes no lock.
 */
#include "plan_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"

static bool static_shape(const struct plan_value* v) {
    if (v->decl_rank < 0 || v->decl_rank > EPABI_MAX_RANK) return false;
    for (int d = 0; d < v->decl_rank; ++d)
        if (v->decl_dims[d] < 0) return false;
    return true;
}

static bool same_shape(const struct plan_value* a, const struct plan_value* b) {
    if (a->decl_rank != b->decl_rank) return false;
    for (int d = 0; d < a->decl_rank; ++d)
        if (a->decl_dims[d] != b->decl_dims[d]) return false;
    return true;
}

/* Whether v's dim d and out's dim od are proved one extent: both static and equal, or one named symbol. */
static bool same_extent(const struct plan_value* v, int d, const struct plan_value* out, int od) {
    if (v->decl_dims[d] >= 0 || out->decl_dims[od] >= 0) return v->decl_dims[d] == out->decl_dims[od];
    return v->decl_sym[d] > 0 && v->decl_sym[d] == out->decl_sym[od];
}

/* Whether every declared dim of v is static or a named symbol. */
static bool named_shape(const struct plan_value* v) {
    if (v->decl_rank < 0 || v->decl_rank > EPABI_MAX_RANK) return false;
    for (int d = 0; d < v->decl_rank; ++d)
        if (v->decl_dims[d] < 0 && v->decl_sym[d] == 0) return false;
    return true;
}

/* Whether a and b are proved of one shape dim by dim (same_extent). */
static bool same_named_shape(const struct plan_value* a, const struct plan_value* b) {
    if (a->decl_rank != b->decl_rank) return false;
    for (int d = 0; d < a->decl_rank; ++d)
        if (!same_extent(a, d, b, d)) return false;
    return true;
}

/* Whether v's declared shape broadcasts into out's without growing it: right-aligned, each dim static 1 or proved
 * the same extent as out's. */
static bool broadcasts_into(const struct plan_value* v, const struct plan_value* out) {
    if (v->decl_rank < 0 || v->decl_rank > out->decl_rank) return false;
    const int lead = out->decl_rank - v->decl_rank;
    for (int d = 0; d < v->decl_rank; ++d)
        if (v->decl_dims[d] != 1 && !same_extent(v, d, out, lead + d)) return false;
    return true;
}

/* Whether each dim of out other than a static 1 is one of some value's (ids[0..n)): then the broadcast of their
 * run-time shapes is out's, not smaller. */
static bool dims_provided(const struct epabi_plan* p, const int* ids, int n, const struct plan_value* out) {
    for (int od = 0; od < out->decl_rank; ++od) {
        if (out->decl_dims[od] == 1) continue;
        bool found = false;
        for (int k = 0; k < n && !found; ++k) {
            const struct plan_value* v = &p->values[ids[k]];
            const int d = od - (out->decl_rank - v->decl_rank);
            found = d >= 0 && same_extent(v, d, out, od);
        }
        if (!found) return false;
    }
    return true;
}

/* The operands of a link: one, or two for a binary one. */
static int operand_count(const struct chain_op* link) { return link->kind == CHAIN_BINARY ? 2 : 1; }

static int32_t operand(const struct chain_op* link, int t) { return t == 0 ? link->a : link->b; }

/* Whether value id can be an immediate of an op producing rank out_rank: a float32 constant of one element whose
 * rank does not grow the output (so broadcasting it changes nothing); its value in *value. */
static bool immediate_value(const struct epabi_plan* p, int id, int out_rank, float* value) {
    const struct plan_value* v = &p->values[id];
    if (v->kind != VK_CONST || v->tensor.dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || v->tensor.host == NULL ||
        v->tensor.rank > out_rank || epabi_numel(v->tensor.rank, v->tensor.dims) != 1)
        return false;
    memcpy(value, v->tensor.host, sizeof *value);
    return true;
}

/* A candidate link: its op (operands that are immediates already encoded, the others not yet filled), whether it
 * carries a folded Relu, and whether it is over symbolic shapes. Then it is `named` when its output's dims are each
 * static or a named symbol, the values it reads (ids) broadcast into it and give each of its dims (a link of a named
 * group), and `rooted` when those values have its declared shape as -1s and extents (a link of a root's group). */
struct cand {
    struct chain_op link;
    bool extra_relu, symbolic, named, rooted;
    bool ranked;   /* over symbolic shapes: the values read have ranks, none above the output's */
    int ids[2], n_ids;   /* the distinct values read (not immediates) */
};

/* Whether step si may be a link of a chain, and which (*c). */
static bool candidate(const struct epabi_plan* p, int si, struct cand* c) {
    const struct plan_step* s = &p->steps[si];
    struct chain_op* link = &c->link;
    c->symbolic = c->named = c->rooted = c->ranked = false;
    c->n_ids = 0;
    if (s->on_host || s->kernel->chain_link == NULL || s->n_out != 1 || s->n_in < 1 || s->n_in > EPABI_MAX_NODE_IO)
        return false;
    if (s->epilogue != EPABI_EPILOGUE_NONE && s->epilogue != EPABI_EPILOGUE_RELU) return false;
    const struct plan_value* y = &p->values[s->out[0]];
    if (y->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || y->decl_rank < 0 || y->decl_rank > EPABI_MAX_RANK)
        return false;
    struct epabi_tensor runtime[EPABI_MAX_NODE_IO];
    const struct epabi_tensor* in[EPABI_MAX_NODE_IO];
    for (int j = 0; j < s->n_in; ++j) {
        const int id = s->in[j];
        in[j] = NULL;
        if (id < 0) continue;
        if (p->values[id].kind == VK_CONST) {
            in[j] = &p->values[id].tensor;
            continue;
        }
        memset(&runtime[j], 0, sizeof runtime[j]);
        runtime[j].dtype = p->values[id].dtype;
        runtime[j].rank = -1;
        in[j] = &runtime[j];
    }
    if (!s->kernel->chain_link(s->state, in, s->n_in, link)) return false;
    c->extra_relu = s->epilogue == EPABI_EPILOGUE_RELU;   /* an arithmetic step's folded Relu */
    if (c->extra_relu && link->kind != CHAIN_BINARY) return false;
    const int n = operand_count(link);
    if (s->n_in < n) return false;
    for (int j = n; j < s->n_in; ++j)   /* what the link consumed (Clip's bounds) is constant */
        if (s->in[j] >= 0 && p->values[s->in[j]].kind != VK_CONST) return false;
    int rank = 0, n_runtime = 0;
    bool symbolic = !static_shape(y);
    int64_t dims[EPABI_MAX_RANK];
    for (int t = 0; t < n; ++t) {
        const int id = s->in[t];
        if (id < 0) return false;
        float value;
        if (link->kind == CHAIN_BINARY && immediate_value(p, id, y->decl_rank, &value)) {
            if (t == 0) {
                link->a = EPABI_CHAIN_IMMEDIATE;
                link->alpha = value;
            } else {
                link->b = EPABI_CHAIN_IMMEDIATE;
                link->beta = value;
            }
            continue;
        }
        const struct plan_value* v = &p->values[id];
        if (v->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || v->decl_rank < 0) return false;
        symbolic = symbolic || !static_shape(v);
        if (c->n_ids == 0 || c->ids[0] != id) c->ids[c->n_ids++] = id;
        if (n_runtime++ == 0) {
            rank = v->decl_rank;
            memcpy(dims, v->decl_dims, sizeof(int64_t) * (size_t)rank);
        } else if (!symbolic && !epabi_broadcast_shape(rank, dims, v->decl_rank, v->decl_dims, &rank, dims)) {
            return false;
        }
    }
    if (n_runtime == 0) return false;   /* constant folding's business, not a chain's */
    if (symbolic) {   /* the group proves the shapes at run time one (a named group's or its root's) */
        c->symbolic = true;
        c->named = named_shape(y) && dims_provided(p, c->ids, c->n_ids, y);
        c->rooted = c->ranked = true;
        for (int k = 0; k < c->n_ids; ++k) {
            const int rank_k = p->values[c->ids[k]].decl_rank;
            c->ranked = c->ranked && rank_k >= 0 && rank_k <= y->decl_rank;
            c->named = c->named && broadcasts_into(&p->values[c->ids[k]], y);
            c->rooted = c->rooted && same_shape(&p->values[c->ids[k]], y);
        }
        return c->named || c->rooted || c->ranked;
    }
    /* every link produces the whole shape: its operands broadcast to exactly its declared output */
    if (rank != y->decl_rank) return false;
    for (int d = 0; d < rank; ++d)
        if (dims[d] != y->decl_dims[d]) return false;
    return true;
}

/* How a group proves its links' shapes: all of one static shape; over symbolic shapes all of one named shape
 * (same_named_shape); each value it writes depending on every input, so that its run-time shape is the broadcast of
 * theirs, which the chain computes (links of one rank, checked by build_state); or all of one value's (its root). */
enum group_mode { G_STATIC, G_NAMED, G_CONE, G_ROOT };

/* A group being formed: its steps in schedule order, the values they read from outside. */
struct group {
    int steps[EPABI_CHAIN_MAX_OPS];
    int n_steps, n_ops;
    int inputs[EPABI_CHAIN_MAX_INPUTS];
    int n_inputs;
    enum group_mode mode;
    int root;   /* G_ROOT: the one value from outside, whose shape each link keeps; else -1 */
};

static int group_input_slot(const struct group* g, int id) {
    for (int k = 0; k < g->n_inputs; ++k)
        if (g->inputs[k] == id) return k;
    return -1;
}

/* Whether value id is produced by a step of the group (member[] marks them). */
static bool in_group(const struct epabi_plan* p, const unsigned char* member, int id) {
    return id >= 0 && p->values[id].kind == VK_INNER && p->values[id].producer >= 0 && member[p->values[id].producer];
}

/* Whether step r can join group g: its operands from outside fit the input slots. */
static bool fits(const struct epabi_plan* p, const unsigned char* member, const struct group* g, int r,
                 const struct chain_op* link, bool extra_relu) {
    if (g->n_steps >= EPABI_CHAIN_MAX_OPS || g->n_ops + 1 + (extra_relu ? 1 : 0) > EPABI_CHAIN_MAX_OPS) return false;
    int extra = 0, seen = -2;
    for (int t = 0; t < operand_count(link); ++t) {
        if (operand(link, t) == EPABI_CHAIN_IMMEDIATE) continue;
        const int id = p->steps[r].in[t];
        if (in_group(p, member, id) || group_input_slot(g, id) >= 0 || id == seen) continue;
        seen = id;
        ++extra;
    }
    return g->n_inputs + extra <= EPABI_CHAIN_MAX_INPUTS;
}

static void add_member(const struct epabi_plan* p, unsigned char* member, struct group* g, int r,
                       const struct chain_op* link, bool extra_relu) {
    for (int t = 0; t < operand_count(link); ++t) {
        if (operand(link, t) == EPABI_CHAIN_IMMEDIATE) continue;
        const int id = p->steps[r].in[t];
        if (!in_group(p, member, id) && group_input_slot(g, id) < 0) g->inputs[g->n_inputs++] = id;
    }
    member[r] = 1;
    g->steps[g->n_steps++] = r;
    g->n_ops += 1 + (extra_relu ? 1 : 0);
}

/* Whether candidate cd (step s) has group g's shape: the same static shape, over named symbolic shapes the same
 * named shape, or else a link of the group's root or of the group's own values. */
static bool same_kind(const struct epabi_plan* p, const unsigned char* member, const struct group* g,
                      const struct cand* cd, const struct plan_value* shape, const struct plan_step* s) {
    const struct plan_value* y = &p->values[s->out[0]];
    if (g->mode == G_NAMED) return cd->named && same_named_shape(y, shape);
    if (g->mode == G_CONE) return cd->symbolic && cd->ranked && y->decl_rank == shape->decl_rank;
    if (g->mode == G_STATIC) return !cd->symbolic && same_shape(y, shape);
    if (!cd->rooted) return false;
    for (int k = 0; k < cd->n_ids; ++k)
        if (cd->ids[k] != g->root && !in_group(p, member, cd->ids[k])) return false;
    return true;
}

/* Whether a step outside the group reads value id (members[] marks the group). */
static bool read_outside(const struct epabi_plan* p, const unsigned char* member, int id) {
    for (int si = 0; si < p->n_steps; ++si) {
        if (member[si]) continue;
        for (int j = 0; j < p->steps[si].n_in; ++j)
            if (p->steps[si].in[j] == id) return true;
    }
    return false;
}

/* Whether value y's declared rank is the highest of group g's inputs (that of their broadcast). */
static bool full_rank(const struct epabi_plan* p, const struct group* g, int y) {
    int rank = 0;
    for (int k = 0; k < g->n_inputs; ++k)
        if (p->values[g->inputs[k]].decl_rank > rank) rank = p->values[g->inputs[k]].decl_rank;
    return p->values[y].decl_rank == rank;
}

/* v's declared shape for messages: "[unk__214,512,256]", "?" for an unnamed symbolic dim (truncated). */
static void decl_str(const struct epabi_plan* p, const struct plan_value* v, char* buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (int d = -1; d <= v->decl_rank && used < cap; ++d) {
        int w;
        if (d < 0 || d == v->decl_rank) w = snprintf(buf + used, cap - used, d < 0 ? "[" : "]");
        else if (v->decl_dims[d] >= 0) w = snprintf(buf + used, cap - used, d > 0 ? ",%lld" : "%lld",
                                                    (long long)v->decl_dims[d]);
        else w = snprintf(buf + used, cap - used, d > 0 ? ",%s" : "%s",
                          v->decl_sym[d] > 0 ? p->sym_names[v->decl_sym[d] - 1] : "?");
        if (w < 0) break;
        used += (size_t)w;
    }
}

/* The state of group g's chain step, and its outputs (value ids) in out_values; NULL when the group cannot be one
 * (too many values leave it, or none does) or out of memory (*oom). */
static struct epabi_chain_state* build_state(const struct epabi_plan* p, const unsigned char* member,
                                             const struct group* g, int* out_values, bool* oom) {
    *oom = false;
    struct epabi_chain_state* c = calloc(1, sizeof *c);
    if (c == NULL) {
        *oom = true;
        return NULL;
    }
    int reg_of_step[EPABI_CHAIN_MAX_OPS];
    unsigned cone[EPABI_CHAIN_MAX_OPS];   /* per member: the inputs (bits) its value depends on */
    for (int m = 0; m < g->n_steps; ++m) {
        const int si = g->steps[m];
        const struct plan_step* s = &p->steps[si];
        struct cand cd;
        candidate(p, si, &cd);   /* true: it was when the step joined */
        struct chain_op link = cd.link;
        const bool extra_relu = cd.extra_relu;
        cone[m] = 0;
        for (int t = 0; t < operand_count(&link); ++t) {
            if (operand(&link, t) == EPABI_CHAIN_IMMEDIATE) continue;
            const int id = s->in[t];
            int32_t ref;
            if (in_group(p, member, id)) {
                int pm = 0;
                while (g->steps[pm] != p->values[id].producer) ++pm;
                ref = reg_of_step[pm];
                cone[m] |= cone[pm];
            } else {
                ref = -1 - group_input_slot(g, id);
                cone[m] |= 1u << group_input_slot(g, id);
            }
            if (t == 0) link.a = ref;
            else link.b = ref;
        }
        link.out = -1;
        c->ops[c->n_ops++] = link;
        if (extra_relu) {
            const int32_t sum = c->n_ops - 1;
            c->ops[c->n_ops] = (struct chain_op){.kind = CHAIN_UNARY, .op = UN_RELU, .a = sum, .out = -1};
            c->n_ops++;
        }
        reg_of_step[m] = c->n_ops - 1;
        const int y = s->out[0];
        if (p->values[y].output_index >= 0 || read_outside(p, member, y)) {
            /* G_CONE: a written value of fewer inputs could be smaller than the chain's run-time shape */
            if (c->n_out == EPABI_CHAIN_MAX_OUTPUTS ||
                (g->mode == G_CONE && (cone[m] != (1u << g->n_inputs) - 1 || !full_rank(p, g, y)))) {
                free(c);
                return NULL;
            }
            c->ops[c->n_ops - 1].out = c->n_out;
            c->out_cone[c->n_out] = cone[m];
            out_values[c->n_out++] = y;
        }
    }
    if (c->n_out == 0) {
        free(c);
        return NULL;
    }
    const struct plan_value* y = &p->values[out_values[0]];
    c->rank = y->decl_rank;
    memcpy(c->dims, y->decl_dims, sizeof c->dims);   /* symbolic dims -1: run() broadcasts the inputs' */
    c->symbolic = g->mode != G_STATIC;
    c->n_in = g->n_inputs;
    decl_str(p, y, c->out_decl, sizeof c->out_decl);
    for (int k = 0; k < g->n_inputs; ++k) {
        const struct plan_value* v = &p->values[g->inputs[k]];
        c->in_rank[k] = v->decl_rank;
        memcpy(c->in_dims[k], v->decl_dims, sizeof c->in_dims[k]);
        /* a named group proved each named dim of an input the output's (broadcasts_into) */
        decl_str(p, v, c->in_decl[k], sizeof c->in_decl[k]);
    }
    return c;
}

/* Whether the plan stays acyclic with every group formed so far (owner[]) and the tentative one (member[], first
 * step seed) each taken as one step: Kahn's algorithm over the contracted graph. The step-level test of the growth
 * loop cannot see a cycle through two groups (A's later step reads B, B's step reads A's earlier one). */
static bool contracted_acyclic(const struct epabi_plan* p, const int* owner, const unsigned char* member, int seed,
                               bool* oom) {
    const int n = p->n_steps;
    int* node = malloc((size_t)n * sizeof *node);
    int* indeg = calloc((size_t)n, sizeof *indeg);
    int* start = calloc((size_t)n + 1, sizeof *start);
    int* edges = malloc(((size_t)n * EPABI_MAX_NODE_IO + 1) * sizeof *edges);
    int* from = malloc(((size_t)n * EPABI_MAX_NODE_IO + 1) * sizeof *from);
    int* queue = malloc((size_t)n * sizeof *queue);
    bool ok = false;
    *oom = node == NULL || indeg == NULL || start == NULL || edges == NULL || from == NULL || queue == NULL;
    if (*oom) goto done;
    for (int si = 0; si < n; ++si) node[si] = member[si] ? seed : owner[si] >= 0 ? owner[si] : si;
    int n_edges = 0;
    for (int si = 0; si < n; ++si) {
        for (int j = 0; j < p->steps[si].n_in; ++j) {
            const int id = p->steps[si].in[j];
            if (id < 0 || p->values[id].kind != VK_INNER || p->values[id].producer < 0) continue;
            const int a = node[p->values[id].producer], b = node[si];
            if (a == b) continue;
            from[n_edges] = a;
            edges[n_edges++] = b;
            start[a + 1]++;
            indeg[b]++;
        }
    }
    for (int v = 0; v < n; ++v) start[v + 1] += start[v];
    int* fill = queue;   /* borrowed as the CSR cursor, then reset as the queue */
    for (int v = 0; v < n; ++v) fill[v] = start[v];
    int* adj = malloc(((size_t)n_edges + 1) * sizeof *adj);
    if (adj == NULL) {
        *oom = true;
        goto done;
    }
    for (int e = 0; e < n_edges; ++e) adj[fill[from[e]]++] = edges[e];
    int head = 0, tail = 0, nodes = 0, done_nodes = 0;
    for (int v = 0; v < n; ++v) {
        if (node[v] != v) continue;   /* one entry per contracted node: its first step */
        ++nodes;
        if (indeg[v] == 0) queue[tail++] = v;
    }
    while (head < tail) {
        const int v = queue[head++];
        ++done_nodes;
        for (int e = start[v]; e < start[v + 1]; ++e)
            if (--indeg[adj[e]] == 0) queue[tail++] = adj[e];
    }
    ok = done_nodes == nodes;
    free(adj);
done:
    free(node);
    free(indeg);
    free(start);
    free(edges);
    free(from);
    free(queue);
    return ok;
}

/* "Sigmoid+Mul" for messages, from the members' op types (truncated). */
static char* group_name(const struct epabi_plan* p, const struct group* g) {
    char name[128] = "";
    size_t used = 0;
    for (int m = 0; m < g->n_steps && used + 1 < sizeof name; ++m) {
        int w = snprintf(name + used, sizeof name - used, m > 0 ? "+%s" : "%s", p->steps[g->steps[m]].op_type);
        if (w < 0) break;
        used += (size_t)w;
    }
    return strdup(name);
}

/* Frees a step's own memory (its kernel state, names, frees list). */
static void release_step(struct plan_step* s) {
    if (s->state != NULL && s->kernel->release != NULL) s->kernel->release(s->state);
    free(s->node_name);
    free(s->op_type);
    free(s->frees);
}

/* Grows group g (its mode and root set) from step seed (candidate seed_cd) in member[]: steps are in dependency
 * order, so a step's dep[] (it depends on the group without joining it) is final when it is visited. */
static void grow(const struct epabi_plan* p, const int* owner, unsigned char* member, unsigned char* dep,
                 struct group* g, int seed, const struct cand* seed_cd) {
    const int n = p->n_steps;
    memset(member, 0, (size_t)n);
    memset(dep, 0, (size_t)n);
    add_member(p, member, g, seed, &seed_cd->link, seed_cd->extra_relu);
    const struct plan_value* shape = &p->values[p->steps[seed].out[0]];
    for (int r = seed + 1; r < n; ++r) {
        const struct plan_step* s = &p->steps[r];
        bool reads = false, tainted = false;
        for (int j = 0; j < s->n_in; ++j) {
            const int id = s->in[j];
            if (id < 0 || p->values[id].kind != VK_INNER || p->values[id].producer < 0) continue;
            const int q = p->values[id].producer;
            if (member[q]) reads = true;
            else if (dep[q]) tainted = true;
        }
        if (!reads && !tainted) continue;
        struct cand cd;
        bool joined = false;
        if (reads && !tainted && owner[r] < 0 && candidate(p, r, &cd) && same_kind(p, member, g, &cd, shape, s) &&
            fits(p, member, g, r, &cd.link, cd.extra_relu)) {
            add_member(p, member, g, r, &cd.link, cd.extra_relu);
            joined = true;
        }
        if (!joined) dep[r] = 1;
    }
}

OrtStatus* epabi_plan_fuse_chains(struct epabi_plan* p) {
    const int n = p->n_steps;
    if (n < 2) return NULL;
    OrtStatus* st = NULL;
    int* owner = malloc((size_t)n * sizeof *owner);            /* the group's first step, or -1 */
    unsigned char* member = calloc((size_t)n, 1);              /* of the group being formed */
    unsigned char* dep = calloc((size_t)n, 1);                 /* depends on the group being formed */
    struct epabi_chain_state** states = calloc((size_t)n, sizeof *states);
    int (*outs)[EPABI_CHAIN_MAX_OUTPUTS] = calloc((size_t)n, sizeof *outs);
    struct group* groups = calloc((size_t)n, sizeof *groups);
    char** names = calloc((size_t)n, sizeof *names);
    if (owner == NULL || member == NULL || dep == NULL || states == NULL || outs == NULL || groups == NULL ||
        names == NULL) {
        st = epabi_plan_oom(p, "elementwise chains");
        goto out;
    }
    for (int si = 0; si < n; ++si) owner[si] = -1;
    int fused = 0;
    for (int seed = 0; seed < n && st == NULL; ++seed) {
        struct cand cd;
        if (owner[seed] >= 0 || !candidate(p, seed, &cd)) continue;
        /* over symbolic shapes: a named group, else one the written values' cones prove (G_CONE), else, when that
         * one fails, one grown from a single root */
        enum group_mode modes[2] = {G_STATIC, G_STATIC};
        int n_modes = 1;
        if (cd.symbolic) {
            modes[0] = cd.named ? G_NAMED : G_CONE;
            if (!cd.named && cd.rooted && cd.n_ids == 1) modes[n_modes++] = G_ROOT;
            if (!cd.named && !cd.ranked) modes[0] = modes[--n_modes];
            if (n_modes == 0) continue;
        }
        const struct cand seed_cd = cd;
        struct group* g = &groups[seed];
        bool oom = false;
        for (int attempt = 0; attempt < n_modes && states[seed] == NULL && !oom; ++attempt) {
            memset(g, 0, sizeof *g);
            g->mode = modes[attempt];
            g->root = g->mode == G_ROOT ? seed_cd.ids[0] : -1;
            grow(p, owner, member, dep, g, seed, &seed_cd);
            if (g->n_steps < 2) continue;
            const bool acyclic = contracted_acyclic(p, owner, member, seed, &oom);
            if (!oom && acyclic) states[seed] = build_state(p, member, g, outs[seed], &oom);
        }
        if (!oom && states[seed] != NULL) {
            names[seed] = group_name(p, g);
            oom = names[seed] == NULL;
        }
        if (oom) {
            st = epabi_plan_oom(p, "elementwise chain");
            break;
        }
        if (states[seed] == NULL) continue;
        for (int m = 0; m < g->n_steps; ++m) owner[g->steps[m]] = seed;
        ++fused;
    }
    if (st != NULL || fused == 0) goto out;

    /* one pass over the steps: a group's first step becomes its chain step, its other steps go */
    int* new_index = owner;   /* reused: step -> its index afterwards */
    int kept = 0;
    for (int si = 0; si < n; ++si) {
        struct plan_step* s = &p->steps[si];
        const int seed = owner[si];
        if (seed < 0) {
            p->steps[kept] = *s;
            new_index[si] = kept++;
            continue;
        }
        if (seed != si) {
            new_index[si] = -2 - seed;   /* resolved below, once the seed's index is known */
            release_step(s);
            continue;
        }
        const struct group* g = &groups[seed];
        const struct epabi_chain_state* c = states[seed];
        char* op_type = names[seed];
        names[seed] = NULL;
        struct plan_step chain = *s;   /* keeps the first node's name for messages */
        if (s->state != NULL && s->kernel->release != NULL) s->kernel->release(s->state);
        free(s->op_type);
        free(s->frees);
        chain.kernel = &epabi_kernel_chain;
        chain.state = states[seed];
        states[seed] = NULL;
        chain.op_type = op_type;
        chain.frees = NULL;
        chain.n_frees = 0;
        chain.epilogue = EPABI_EPILOGUE_NONE;
        chain.n_in = c->n_in;
        chain.n_out = c->n_out;
        for (int k = 0; k < c->n_in; ++k) chain.in[k] = g->inputs[k];
        for (int o = 0; o < c->n_out; ++o) chain.out[o] = outs[seed][o];
        p->steps[kept] = chain;
        new_index[si] = kept++;
        p->n_chains++;
        p->n_chain_nodes += g->n_steps;
    }
    {
        for (int si = 0; si < n; ++si)
            if (new_index[si] <= -2) new_index[si] = new_index[-2 - new_index[si]];
        /* every value of a group keeps its chain step as producer (those it does not write are never read) */
        for (int v = 0; v < p->n_values; ++v)
            if (p->values[v].producer >= 0) p->values[v].producer = new_index[p->values[v].producer];
        p->n_steps = kept;
        st = epabi_plan_schedule(p);   /* made again for the new steps (their frees too) */
        if (st == NULL && p->device_only) epabi_plan_place_steps(p);
    }
out:
    for (int si = 0; states != NULL && si < n; ++si) free(states[si]);
    for (int si = 0; names != NULL && si < n; ++si) free(names[si]);
    free(names);
    free(owner);
    free(member);
    free(dep);
    free(states);
    free(outs);
    free(groups);
    return st;
}
