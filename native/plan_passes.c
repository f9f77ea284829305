/*
 * plan_passes.c - the passes epabi_plan_build (plan_build.c) runs over a plan once its steps and values are in:
 * linear-step fusion (MatMul/Gemm + bias + activation), epilogue fusion, scheduling (dependency order and the step
 * after which each intermediate is freed), host placement of shape computations on device plans, and marking the
 * fused-node inputs device steps launch on.
 * Each pass works on the plan in place before it is shared (plan.h), so none takes a lock.
 */
#include "plan_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_factory.h"
#include "kernel.h"
#include "linear.h"

/* Records after which step each intermediate block goes back to the arena: the last step reading it or any value
 * aliasing it (a view step's output is its input's bytes, and a view of a view the same block again), or its producer
 * when nobody reads it. Only blocks an intermediate owns are listed, each once: not fused outputs (the host's buffer,
 * or a staged block freed at run end), not views (they own nothing), never fused inputs or constants. Replaces the
 * frees the plan had. */
static OrtStatus* set_frees(struct epabi_plan* p) {
    for (int si = 0; si < p->n_steps; ++si) {
        free(p->steps[si].frees);
        p->steps[si].frees = NULL;
        p->steps[si].n_frees = 0;
    }
    size_t nv = p->n_values > 0 ? (size_t)p->n_values : 1;
    int* root = malloc(nv * sizeof *root);
    int* last = malloc(nv * sizeof *last);
    OrtStatus* st = NULL;
    if (root == NULL || last == NULL) {
        st = epabi_plan_oom(p, "schedule");
        goto out;
    }
    for (int v = 0; v < p->n_values; ++v) {
        root[v] = v;
        last[v] = p->values[v].producer;
    }
    for (int si = 0; si < p->n_steps; ++si) {   /* steps are in dependency order: a source's root is known first */
        const struct plan_step* s = &p->steps[si];
        if (s->view) root[s->out[0]] = root[s->in[0]];
        for (int j = 0; j < s->n_in; ++j) {
            const int id = s->in[j];
            if (id >= 0 && si > last[root[id]]) last[root[id]] = si;
        }
    }
    for (int v = 0; v < p->n_values; ++v) {
        if (p->values[v].kind != VK_INNER || p->values[v].output_index >= 0 || root[v] != v || last[v] < 0) continue;
        struct plan_step* s = &p->steps[last[v]];
        int* f = realloc(s->frees, (size_t)(s->n_frees + 1) * sizeof *f);
        if (f == NULL) {
            st = epabi_plan_oom(p, "schedule");
            break;
        }
        s->frees = f;
        s->frees[s->n_frees++] = v;
    }
out:
    free(root);
    free(last);
    return st;
}

/* Orders the steps so that every step follows the producers of its inputs (the host's order is kept when
 * it already is one), then records after which step each intermediate can go back to the arena (set_frees). */
OrtStatus* epabi_plan_schedule(struct epabi_plan* p) {
    int n = p->n_steps;
    for (int v = 0; v < p->n_values; ++v) {
        if (p->values[v].kind == VK_INNER && p->values[v].producer < 0)
            return epabi_error(p->api, ORT_EP_FAIL, EPABI_EP_NAME ": value '%s' in '%s' has no producer: it is "
                               "neither an input nor a constant of the fused node", p->values[v].name, p->name);
    }
    struct plan_step* ordered = calloc(n > 0 ? (size_t)n : 1, sizeof *ordered);
    unsigned char* done_step = calloc(n > 0 ? (size_t)n : 1, 1);
    unsigned char* avail = calloc(p->n_values > 0 ? (size_t)p->n_values : 1, 1);
    int* new_index = calloc(n > 0 ? (size_t)n : 1, sizeof *new_index);
    OrtStatus* st = NULL;
    if (ordered == NULL || done_step == NULL || avail == NULL || new_index == NULL) {
        st = epabi_plan_oom(p, "schedule");
        goto out;
    }
    for (int v = 0; v < p->n_values; ++v) avail[v] = p->values[v].kind != VK_INNER;
    int placed = 0;
    while (placed < n) {
        int progress = 0;
        for (int s = 0; s < n; ++s) {
            if (done_step[s]) continue;
            bool ready = true;
            for (int j = 0; j < p->steps[s].n_in && ready; ++j)
                ready = p->steps[s].in[j] < 0 || avail[p->steps[s].in[j]];
            if (!ready) continue;
            for (int j = 0; j < p->steps[s].n_out; ++j) avail[p->steps[s].out[j]] = 1;
            done_step[s] = 1;
            new_index[s] = placed;
            ordered[placed++] = p->steps[s];
            ++progress;
        }
        if (progress == 0) {
            st = epabi_error(p->api, ORT_EP_FAIL, EPABI_EP_NAME ": the nodes of '%s' form a cycle", p->name);
            goto out;
        }
    }
    memcpy(p->steps, ordered, (size_t)n * sizeof *ordered);
    for (int v = 0; v < p->n_values; ++v)
        if (p->values[v].producer >= 0) p->values[v].producer = new_index[p->values[v].producer];

    st = set_frees(p);
out:
    free(ordered);
    free(done_step);
    free(avail);
    free(new_index);
    return st;
}

/* Device plans: marks host steps and host values (plan.h), to a fixed point. A candidate step has no fused
 * output and inputs that are constants or candidates' outputs (Shape reads only its input's dims). A candidate
 * stays one while every reader of its outputs is a candidate or reads them only as host inputs. Outputs of any
 * dtype qualify: exporters compute Range's float start/limit/delta from Shape through Cast and Div, and those
 * scalars must be on the host before Range sizes its output (during capture too, where no copy back may run). */
void epabi_plan_place_steps(struct epabi_plan* p) {
    for (int si = 0; si < p->n_steps; ++si) {
        struct plan_step* s = &p->steps[si];
        bool ok = s->kernel->host_step && s->n_out > 0;
        for (int j = 0; j < s->n_out && ok; ++j) {
            const struct plan_value* v = &p->values[s->out[j]];
            ok = v->output_index < 0;
        }
        s->on_host = ok;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int si = 0; si < p->n_steps; ++si) {
            struct plan_step* s = &p->steps[si];
            if (!s->on_host) continue;
            bool ok = true;
            if (s->kernel->launch != EPABI_LAUNCH_SHAPE) {   /* Shape reads only its input's dims */
                for (int j = 0; j < s->n_in && ok; ++j) {
                    int id = s->in[j];
                    if (id < 0 || p->values[id].kind == VK_CONST) continue;
                    ok = p->values[id].kind == VK_INNER && p->steps[p->values[id].producer].on_host;
                }
            }
            for (int j = 0; j < s->n_out && ok; ++j) {
                int id = s->out[j];
                for (int ri = 0; ri < p->n_steps && ok; ++ri) {
                    const struct plan_step* r = &p->steps[ri];
                    if (r->on_host) continue;
                    uint32_t host_in = r->kernel->host_inputs;
                    for (int k = 0; k < r->n_in && ok; ++k)
                        if (r->in[k] == id) ok = k < 32 && (host_in >> k & 1u) != 0;
                }
            }
            if (!ok) {
                s->on_host = false;
                changed = true;
            }
        }
    }
    p->n_host_steps = 0;
    for (int si = 0; si < p->n_steps; ++si) {
        if (!p->steps[si].on_host) continue;
        ++p->n_host_steps;
        for (int j = 0; j < p->steps[si].n_out; ++j) p->values[p->steps[si].out[j]].on_host = true;
    }
}

/* ---- linear steps (kernels/linear.h) ------------------------------------------------------------------ */

int epabi_plan_sole_reader(const struct epabi_plan* p, int v, int* slot) {
    const struct plan_value* pv = &p->values[v];
    if (pv->kind != VK_INNER || pv->output_index >= 0) return -1;
    int reader = -1, count = 0;
    for (int si = 0; si < p->n_steps; ++si) {
        for (int j = 0; j < p->steps[si].n_in; ++j) {
            if (p->steps[si].in[j] != v) continue;
            ++count;
            reader = si;
            *slot = j;
        }
    }
    return count == 1 ? reader : -1;
}

/* The step reading a float value v that may vanish into a linear step (epabi_plan_sole_reader); -1 otherwise. */
static int sole_reader(const struct epabi_plan* p, int v, int* slot) {
    return p->values[v].dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ? epabi_plan_sole_reader(p, v, slot) : -1;
}

void epabi_plan_erase_step(struct epabi_plan* p, int ri) {
    struct plan_step* r = &p->steps[ri];
    if (r->state != NULL && r->kernel->release != NULL) r->kernel->release(r->state);
    free(r->node_name);
    free(r->op_type);
    free(r->frees);
    for (int v = 0; v < p->n_values; ++v)
        if (p->values[v].producer > ri) p->values[v].producer--;
    memmove(r, r + 1, (size_t)(p->n_steps - ri - 1) * sizeof *r);
    p->n_steps--;
}

int epabi_plan_drop_into(struct epabi_plan* p, int ri, int into) {
    const struct plan_step* r = &p->steps[ri];
    for (int j = 0; j < r->n_out; ++j) p->values[r->out[j]].producer = into;
    epabi_plan_erase_step(p, ri);
    return into > ri ? into - 1 : into;
}

/* Extent of a declared dim, -1 when unknown or symbolic. */
static int64_t decl_dim(const struct plan_value* v, int d) {
    return v->decl_rank >= 0 && d >= 0 && d < v->decl_rank && v->decl_dims[d] >= 0 ? v->decl_dims[d] : -1;
}

/* The static M, K, N of a lead's product from the declared shapes of A and B (-1 where unknown), and the rank of
 * its result (-1 when unknown). False when B is not of rank 2 (a batched MatMul: no linear step). */
static bool lead_extents(const struct epabi_linear_lead* lead, const struct plan_value* a, const struct plan_value* b,
                         int64_t* m, int64_t* k, int64_t* n, int* out_rank) {
    if (b->decl_rank != 2) return false;
    if (lead->matmul) {
        *out_rank = a->decl_rank >= 2 ? a->decl_rank : a->decl_rank == 1 ? 1 : -1;
        *k = a->decl_rank >= 1 ? decl_dim(a, a->decl_rank - 1) : -1;
        *m = a->decl_rank == 1 ? 1 : a->decl_rank >= 2 ? 1 : -1;
        for (int d = 0; d + 1 < a->decl_rank && *m >= 0; ++d) {
            int64_t e = decl_dim(a, d);
            *m = e < 0 ? -1 : *m * e;
        }
        *n = decl_dim(b, 1);
    } else {
        if (a->decl_rank != 2) return false;
        *out_rank = 2;
        *m = decl_dim(a, lead->trans_a ? 1 : 0);
        *k = decl_dim(a, lead->trans_a ? 0 : 1);
        *n = decl_dim(b, lead->trans_b ? 0 : 1);
    }
    return true;
}

/* A constant an Add may hand the linear step as its bias: float, its dims 1 but the last, which is 1 or the
 * product's N (known), and of a rank that does not grow the product's. */
static bool is_bias(const struct plan_value* c, int64_t n, int out_rank) {
    if (c->kind != VK_CONST || c->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || out_rank < 1) return false;
    const struct epabi_tensor* t = &c->tensor;
    if (t->rank > out_rank) return false;
    for (int d = 0; d + 1 < t->rank; ++d)
        if (t->dims[d] != 1) return false;
    int64_t last = t->rank >= 1 ? t->dims[t->rank - 1] : 1;
    return last == 1 || (n >= 0 && last == n);
}

/* Turns every lead (MatMul with a rank-2 B, Gemm) into a linear step, folding in the Add of a constant bias that
 * reads its result alone (when the lead has no C), then a Relu/Sigmoid/Tanh/Gelu that reads that result alone. The
 * last folded node's output becomes the step's output; the values between keep the step as producer but are never
 * written or read. The CUDA path is chosen here from the declared extents (epabi_linear_path). Runs before the
 * schedule, on the host's node order. */
OrtStatus* epabi_plan_fuse_linear(struct epabi_plan* p) {
    for (int li = 0; li < p->n_steps; ++li) {
        struct plan_step* s = &p->steps[li];
        struct epabi_linear_lead lead;
        if (s->kernel->linear_lead == NULL || s->n_out != 1 || s->n_in < 2 || s->in[0] < 0 || s->in[1] < 0 ||
            !s->kernel->linear_lead(s->state, &lead))
            continue;
        lead.has_c = s->n_in >= 3 && s->in[2] >= 0;
        int64_t m = -1, k = -1, n = -1;
        int out_rank = -1;
        if (!lead_extents(&lead, &p->values[s->in[0]], &p->values[s->in[1]], &m, &k, &n, &out_rank)) continue;
        if (p->values[s->out[0]].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) continue;

        int tail = s->out[0], slot = 0, bias = -1, add = -1, act_step = -1;
        int32_t activation = -1;
        int r = lead.has_c ? -1 : sole_reader(p, tail, &slot);
        if (r >= 0 && p->steps[r].kernel->linear_bias && p->steps[r].n_in == 2 && p->steps[r].n_out == 1 &&
            p->steps[r].in[1 - slot] >= 0 && is_bias(&p->values[p->steps[r].in[1 - slot]], n, out_rank) &&
            p->values[p->steps[r].out[0]].dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
            add = r;
            bias = p->steps[r].in[1 - slot];
            tail = p->steps[r].out[0];
        }
        r = sole_reader(p, tail, &slot);
        if (r >= 0 && p->steps[r].kernel->linear_activation != NULL && p->steps[r].n_in == 1 &&
            p->steps[r].n_out == 1 &&
            p->values[p->steps[r].out[0]].dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT &&
            (activation = p->steps[r].kernel->linear_activation(p->steps[r].state)) >= 0) {
            act_step = r;
            tail = p->steps[r].out[0];
        } else {
            activation = -1;
        }

        /* the bias is a constant (is_bias); Gemm's own C may not be */
        const bool weights_const = p->values[s->in[1]].kind == VK_CONST &&
                                   (!lead.has_c || p->values[s->in[2]].kind == VK_CONST);
        struct epabi_linear_state* ls = epabi_linear_state_new(&lead, bias >= 0, activation,
                                                               epabi_linear_path(m, k, n), weights_const);
        if (ls == NULL) return epabi_plan_oom(p, "linear step");
        /* the group's name for messages: the lead's op and what was folded in */
        char name[96];
        snprintf(name, sizeof name, "%s%s%s%s", s->op_type, add >= 0 ? "+" : "", add >= 0 ? p->steps[add].op_type : "",
                 act_step >= 0 ? "+" : "");
        size_t used = strlen(name);
        if (act_step >= 0) snprintf(name + used, sizeof name - used, "%s", p->steps[act_step].op_type);
        char* op_type = strdup(name);
        if (op_type == NULL) {
            free(ls);
            return epabi_plan_oom(p, "linear step");
        }
        if (s->state != NULL && s->kernel->release != NULL) s->kernel->release(s->state);
        free(s->op_type);
        s->op_type = op_type;
        s->kernel = &epabi_kernel_linear;
        s->state = ls;
        if (bias >= 0) {
            s->in[2] = bias;
            s->n_in = 3;
        }
        s->out[0] = tail;
        p->values[tail].producer = li;
        p->n_linear++;
        /* the folded steps go, the later one first so the earlier index stays valid */
        int first = add >= 0 && act_step >= 0 ? (add < act_step ? add : act_step) : add >= 0 ? add : act_step;
        int second = add >= 0 && act_step >= 0 ? (add < act_step ? act_step : add) : -1;
        if (second >= 0) {
            li = epabi_plan_drop_into(p, second, li);
            p->n_linear_folded++;
        }
        if (first >= 0) {
            li = epabi_plan_drop_into(p, first, li);
            p->n_linear_folded++;
        }
    }
    return NULL;
}

/* ---- activation epilogues (kernels/epilogue.h) -------------------------------------------------------- */

int epabi_plan_readers(const struct epabi_plan* p, int v) {
    int n = 0;
    for (int si = 0; si < p->n_steps; ++si)
        for (int j = 0; j < p->steps[si].n_in; ++j) n += p->steps[si].in[j] == v;
    return n;
}

/* Drops step ri, whose work another step took over, keeping producer indices right. */
static void remove_step(struct epabi_plan* p, int ri) {
    epabi_plan_erase_step(p, ri);
    p->n_fused++;
}

/* The step producing X when it can apply epilogue `kind` to X itself: X a float intermediate, read `readers` times
 * in all, produced by a single-output kernel whose launch takes that kind and that has no epilogue yet; else -1. */
static int epilogue_host(const struct epabi_plan* p, int x, enum epabi_epilogue kind, int readers) {
    if (x < 0) return -1;
    const struct plan_value* xv = &p->values[x];
    if (xv->kind != VK_INNER || xv->output_index >= 0 || xv->producer < 0 ||
        (xv->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT && xv->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE))
        return -1;
    const struct plan_step* a = &p->steps[xv->producer];
    if ((a->kernel->epilogues & EPABI_EPILOGUE_BIT(kind)) == 0 || a->n_out != 1 || a->epilogue != EPABI_EPILOGUE_NONE)
        return -1;
    return epabi_plan_readers(p, x) == readers ? xv->producer : -1;
}

/* Producer step ai now writes y with epilogue `kind`. X keeps a producer (so the plan stays consistent) but nobody
 * reads or writes it. */
static void take_epilogue(struct epabi_plan* p, int ai, int y, enum epabi_epilogue kind, float alpha, float beta) {
    struct plan_step* a = &p->steps[ai];
    a->out[0] = y;
    a->epilogue = kind;
    a->epilogue_alpha = alpha;
    a->epilogue_beta = beta;
    p->values[y].producer = ai;
}

/* "S = act(X); Y = X * S" (either operand order; act a kernel with `times_input`, the product a kernel marked
 * `product`), X read by those two alone and S by the product alone, with X's producer taking that epilogue: the
 * producer writes Y. PyTorch exports SiLU (YOLO's activation) as Sigmoid then Mul. */
static bool fuse_gated(struct epabi_plan* p, int mi) {
    const struct plan_step* m = &p->steps[mi];
    if (!m->kernel->product || m->n_in != 2 || m->n_out != 1 || m->in[0] < 0 || m->in[1] < 0) return false;
    for (int side = 0; side < 2; ++side) {
        const int x = m->in[side], sig = m->in[1 - side];
        const struct plan_value* sv = &p->values[sig];
        if (sv->kind != VK_INNER || sv->output_index >= 0 || sv->producer < 0 || epabi_plan_readers(p, sig) != 1) continue;
        const struct plan_step* s = &p->steps[sv->producer];
        const enum epabi_epilogue kind = s->kernel->times_input;
        if (kind == EPABI_EPILOGUE_NONE || s->n_in != 1 || s->in[0] != x || s->n_out != 1 ||
            p->values[m->out[0]].dtype != p->values[x].dtype || p->values[sig].dtype != p->values[x].dtype)
            continue;
        const int ai = epilogue_host(p, x, kind, 2);
        if (ai < 0) continue;
        const int si = sv->producer, y = m->out[0];
        take_epilogue(p, ai, y, kind, 0.0f, 0.0f);
        /* S, like X, is written by nobody now: it keeps a producer that stays in the plan (remove_step does not
         * renumber values of the step it drops, so S would point past the last step) */
        p->values[sig].producer = ai;
        remove_step(p, mi > si ? mi : si);   /* the later one first: the earlier index stays valid */
        remove_step(p, mi > si ? si : mi);
        return true;
    }
    return false;
}

/* Folds "X = producer(...); Y = activation(X)" into one launch with an epilogue, when the producer's kernel takes
 * that epilogue (elementwise arithmetic: Relu; Conv: every kind), the activation's kernel can be one (Relu, Sigmoid,
 * Tanh, LeakyRelu, HardSigmoid, HardSwish) and X is a float/double intermediate read by that activation alone: one
 * kernel instead of two, one intermediate fewer (a CUDA graph of an MLP then has the node count of a hand-fused one),
 * and the activation runs on results still in cache. SiLU's Sigmoid + Mul pair is matched first (fuse_gated). Y keeps
 * its name and dtype. */
void epabi_plan_fuse_epilogues(struct epabi_plan* p) {
    for (int mi = 0; mi < p->n_steps; ++mi)
        if (fuse_gated(p, mi)) mi = -1;   /* indices moved: start over (plans are small, fusions few) */
    for (int ri = 0; ri < p->n_steps; ++ri) {
        const struct plan_step* r = &p->steps[ri];
        const enum epabi_epilogue kind = r->kernel->as_epilogue;
        if (kind == EPABI_EPILOGUE_NONE || r->n_in != 1 || r->n_out != 1 || r->in[0] < 0) continue;
        const int x = r->in[0], ai = epilogue_host(p, x, kind, 1);
        if (ai < 0 || p->values[r->out[0]].dtype != p->values[x].dtype) continue;
        float alpha = 0.0f, beta = 0.0f;
        if (r->kernel->epilogue_params != NULL) r->kernel->epilogue_params(r->state, &alpha, &beta);
        take_epilogue(p, ai, r->out[0], kind, alpha, beta);
        remove_step(p, ri);
        --ri;
    }
}

/* Which fused-node inputs a device step hands to a launch: the others are only read as shape inputs on the
 * host, so a host-resident one needs no copy into device memory (plan.h). */
void epabi_plan_mark_device_reads(struct epabi_plan* p) {
    for (int si = 0; si < p->n_steps; ++si) {
        const struct plan_step* s = &p->steps[si];
        if (s->on_host) continue;
        uint32_t host_in = s->kernel->host_inputs;
        for (int j = 0; j < s->n_in; ++j) {
            int id = s->in[j];
            if (id >= 0 && p->values[id].kind == VK_INPUT && (j >= 32 || (host_in >> j & 1u) == 0))
                p->values[id].device_read = true;
        }
    }
}

/* Zero-copy views: a step whose kernel may hand out its input 0's bytes as output 0 (views_input: Reshape, Squeeze,
 * Unsqueeze, Flatten, Identity, and at run time an Expand that repeats nothing or a Slice of the whole input) does so
 * when
 *   - its output is no fused output (the host owns that buffer: the bytes are copied into it),
 *   - the source is a fused input, a constant or an intermediate, and lives on the step's side (a host step's host
 *     value, a device step's device value; a fused input only for a device step, where its data is bound),
 * so that the view reads as a copy would: no kernel writes into its inputs (in-place epilogues and activations write
 * only their own outputs), so the bytes stay what the source's producer wrote until the block is freed, which
 * set_frees moves after the last reader of every value aliasing it. Runs last, on the steps the other passes left
 * (chain and linear fusion see the steps as without views). */
OrtStatus* epabi_plan_mark_views(struct epabi_plan* p) {
    p->n_views = 0;
    for (int si = 0; si < p->n_steps; ++si) {
        struct plan_step* s = &p->steps[si];
        s->view = false;
        if (!s->kernel->views_input || s->n_in < 1 || s->n_out != 1 || s->in[0] < 0 ||
            s->epilogue != EPABI_EPILOGUE_NONE)
            continue;
        const struct plan_value* src = &p->values[s->in[0]];
        const struct plan_value* out = &p->values[s->out[0]];
        if (out->output_index >= 0 || (out->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED &&
                                       src->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED && out->dtype != src->dtype))
            continue;
        bool same_side = false;
        switch (src->kind) {
        case VK_INNER: same_side = src->on_host == s->on_host; break;
        case VK_INPUT: same_side = !s->on_host; break;
        case VK_CONST: same_side = true; break;
        }
        if (!same_side) continue;
        s->view = true;
        p->n_views++;
    }
    return set_frees(p);
}
