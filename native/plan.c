/*
 * plan.c - see plan.h. Also implements the executor half of kernel.h (epabi_exec_*).
 */
#include "plan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_factory.h"
#include "kernel.h"
#include "node_desc.h"

enum value_kind {
    VK_INPUT = 0,   /* fused-node input, read from the kernel context */
    VK_CONST = 1,   /* constant initializer, copied at Compile */
    VK_INNER = 2    /* produced by a step; output_index >= 0 when it is also a fused output */
};

struct plan_value {
    char* name;                        /* owned; "" for an unnamed (omitted optional) node output */
    enum value_kind kind;
    ONNXTensorElementDataType dtype;   /* as declared by the graph; UNDEFINED when unknown */
    int input_index;                   /* VK_INPUT: kernel-context input index */
    int output_index;                  /* VK_INNER: kernel-context output index, or -1 */
    int producer;                      /* VK_INNER: producing step, -1 until seen */
    bool on_host;                      /* VK_INNER of a host step: lives in host memory (device plans) */
    bool device_read;                  /* VK_INPUT: a device step hands it to a launch (not only a shape read) */
    struct epabi_tensor tensor;        /* VK_CONST: the plan-owned copy (data on the device, host kept) */
};

struct plan_step {
    const struct epabi_kernel* kernel;
    void* state;
    char* node_name;                   /* owned */
    char* op_type;                     /* owned */
    int n_in, n_out;
    int in[EPABI_MAX_NODE_IO];         /* value ids; -1 for an absent optional input */
    int out[EPABI_MAX_NODE_IO];
    int* frees;                        /* intermediates whose last reader is this step (owned) */
    int n_frees;
    bool on_host;                      /* device plans: a host step (plan.h) */
    int epilogue;                      /* enum epabi_epilogue: a Relu fused into this step (fuse_epilogues) */
};

struct epabi_plan {
    const struct epabi_api* api;
    struct epabi_arena* arena;         /* one reference */
    bool has_device;
    bool device_only;                  /* has_device and the host cannot read the device's memory (CUDA) */
    struct epabi_plan_device device;   /* has_device only */
    int n_host_steps;
    int n_fused;                       /* Relu steps folded into their producer */
    char* name;                        /* owned */
    struct plan_value* values;
    int n_values, cap_values;
    struct plan_step* steps;
    int n_steps;
    int n_inputs;
    int* input_values;                 /* kernel-context input index -> value id */
    int n_outputs;
    int* output_values;                /* kernel-context output index -> value id */
    /* build-time name index: open addressing over value ids, -1 = empty */
    int* index;
    size_t index_cap;
};

struct epabi_exec {
    const struct epabi_plan* plan;
    OrtKernelContext* ctx;
    struct epabi_stream* stream;       /* NULL: launches execute at once */
    struct epabi_arena_pool* pool;     /* non-NULL inside a capture window */
    bool mempool;                      /* stream-ordered allocation (env->mempool) */
    const void* stream_tag;            /* arena reuse key: the CUDA stream, NULL on the host */
    bool host_mode;                    /* running a host step: host memory, launches execute at once */
    const struct plan_step* step;      /* the step being run */
    struct epabi_tensor* tensors;      /* per value */
    unsigned char* ready;              /* per value */
    void** owned;                      /* per value: arena block of an intermediate (malloc'ed if on_host) */
    void** scratch;
    unsigned char* scratch_host;       /* per scratch block: malloc'ed (host step) */
    int n_scratch, cap_scratch;
    void** host_reads;                 /* epabi_exec_host_data copies, freed at run end */
    int n_host_reads, cap_host_reads;
    struct staged_output* staged;      /* fused outputs computed in run memory, copied to the host's at run end */
    int n_staged, cap_staged;
};

/* A fused output the host placed in host memory (struct epabi_plan_device): computed at `device`, an owned
 * run block, and copied to `host` once every step has run. */
struct staged_output {
    void* host;
    const void* device;
    size_t bytes;
};

static char* dup_str(const char* s) {
    return strdup(s != NULL ? s : "");
}

/* ---- name index ----------------------------------------------------------------------------------- */

static uint64_t hash_name(const char* s) {
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (; *s != '\0'; ++s) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int index_find(const struct epabi_plan* p, const char* name) {
    if (p->index_cap == 0 || name == NULL || name[0] == '\0') return -1;
    for (size_t i = hash_name(name) & (p->index_cap - 1);; i = (i + 1) & (p->index_cap - 1)) {
        int id = p->index[i];
        if (id < 0) return -1;
        if (strcmp(p->values[id].name, name) == 0) return id;
    }
}

static bool index_put(struct epabi_plan* p, int id) {
    const char* name = p->values[id].name;
    if (name[0] == '\0') return true;   /* unnamed values are never looked up */
    if (2 * ((size_t)p->n_values + 1) > p->index_cap) {
        size_t cap = p->index_cap == 0 ? 64 : 2 * p->index_cap;
        int* idx = malloc(cap * sizeof *idx);
        if (idx == NULL) return false;
        for (size_t i = 0; i < cap; ++i) idx[i] = -1;
        for (int v = 0; v < p->n_values; ++v) {
            if (v == id || p->values[v].name[0] == '\0') continue;
            size_t i = hash_name(p->values[v].name) & (cap - 1);
            while (idx[i] >= 0) i = (i + 1) & (cap - 1);
            idx[i] = v;
        }
        free(p->index);
        p->index = idx;
        p->index_cap = cap;
    }
    size_t i = hash_name(name) & (p->index_cap - 1);
    while (p->index[i] >= 0) i = (i + 1) & (p->index_cap - 1);
    p->index[i] = id;
    return true;
}

/* ---- plan construction ------------------------------------------------------------------------------ */

static OrtStatus* oom(const struct epabi_plan* p, const char* what) {
    return epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of memory building the plan of '%s' (%s)", p->name, what);
}

/* Appends a value (name copied) and indexes it; returns its id or -1 when out of memory. */
static int add_value(struct epabi_plan* p, const char* name, enum value_kind kind, ONNXTensorElementDataType dtype) {
    if (p->n_values == p->cap_values) {
        int cap = p->cap_values == 0 ? 32 : 2 * p->cap_values;
        struct plan_value* v = realloc(p->values, (size_t)cap * sizeof *v);
        if (v == NULL) return -1;
        p->values = v;
        p->cap_values = cap;
    }
    struct plan_value* v = &p->values[p->n_values];
    memset(v, 0, sizeof *v);
    v->name = dup_str(name);
    if (v->name == NULL) return -1;
    v->kind = kind;
    v->dtype = dtype;
    v->input_index = -1;
    v->output_index = -1;
    v->producer = -1;
    int id = p->n_values++;
    if (!index_put(p, id)) {
        free(v->name);
        --p->n_values;
        return -1;
    }
    return id;
}

/* Copies a constant initializer's data into a new VK_CONST value. */
static OrtStatus* add_constant(struct epabi_plan* p, const struct epabi_value_desc* d, int* id_out) {
    *id_out = -1;
    size_t esize = epabi_dtype_size(d->dtype);
    if (esize == 0)
        return epabi_error(p->api, ORT_EP_FAIL, EPABI_EP_NAME ": constant '%s' in '%s' has unsupported dtype %s",
                           d->name, p->name, epabi_dtype_name(d->dtype));
    if (d->rank < 0 || d->rank > EPABI_MAX_RANK || epabi_numel(d->rank, d->dims) != (int64_t)d->const_count)
        return epabi_error(p->api, ORT_EP_FAIL,
                           EPABI_EP_NAME ": constant '%s' in '%s' has a shape that does not match its %zu elements",
                           d->name, p->name, d->const_count);
    int id = add_value(p, d->name, VK_CONST, d->dtype);
    if (id < 0) return oom(p, "constant");
    struct epabi_tensor* t = &p->values[id].tensor;
    t->dtype = d->dtype;
    t->rank = d->rank;
    memcpy(t->dims, d->dims, sizeof t->dims);
    size_t bytes = d->const_count * esize;
    void* host = malloc(bytes > 0 ? bytes : 1);
    if (host == NULL) return oom(p, "constant data");
    if (bytes > 0) memcpy(host, d->const_data, bytes);
    t->host = host;
    t->data = host;
    if (p->has_device) {
        t->data = p->device.upload(p->device.ctx, host, bytes > 0 ? bytes : 1);
        if (t->data == NULL)
            return epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of device memory uploading constant '%s' "
                               "(%zu bytes) of '%s'", d->name, bytes, p->name);
    }
    *id_out = id;
    return NULL;
}

/* Appends a node's step: kernel lookup, value wiring, init(). */
static OrtStatus* add_step(struct epabi_plan* p, const OrtNode* node, struct epabi_node* desc) {
    const struct epabi_api* api = p->api;
    bool describable = true;
    char why[256];
    EPABI_RETURN_IF_ERROR(epabi_node_describe(api, node, desc, &describable, why, sizeof why));
    if (!describable)
        return epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": node '%s' (%s) in '%s' cannot be compiled: %s",
                           desc->name, desc->op_type, p->name, why);
    const struct epabi_kernel* k =
        desc->domain[0] == '\0' ? epabi_kernel_find(desc->op_type, desc->since_version) : NULL;
    if (k == NULL)
        return epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": no kernel for node '%s' (%s, opset %d) in '%s'",
                           desc->name, desc->op_type, desc->since_version, p->name);

    struct plan_step* s = &p->steps[p->n_steps];
    memset(s, 0, sizeof *s);
    s->kernel = k;
    s->n_in = desc->n_in;
    s->n_out = desc->n_out;
    s->node_name = dup_str(desc->name);
    s->op_type = dup_str(desc->op_type);
    ++p->n_steps;   /* counted now so that destroy frees what was set */
    if (s->node_name == NULL || s->op_type == NULL) return oom(p, "step");
    int step_index = p->n_steps - 1;

    for (int j = 0; j < desc->n_in; ++j) {
        const struct epabi_value_desc* d = &desc->in[j];
        s->in[j] = -1;
        if (d->name[0] == '\0') continue;   /* absent optional input */
        int id = index_find(p, d->name);
        if (id < 0 && d->const_data != NULL) {
            EPABI_RETURN_IF_ERROR(add_constant(p, d, &id));
        } else if (id < 0) {
            /* produced by a step listed later; its producer is checked once all steps are in */
            id = add_value(p, d->name, VK_INNER, d->dtype);
            if (id < 0) return oom(p, "value");
        }
        s->in[j] = id;
    }
    for (int j = 0; j < desc->n_out; ++j) {
        const struct epabi_value_desc* d = &desc->out[j];
        int id = index_find(p, d->name);
        if (id >= 0 && (p->values[id].kind != VK_INNER || p->values[id].producer >= 0))
            return epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": value '%s' in '%s' is produced twice (node '%s')",
                               d->name, p->name, desc->name);
        if (id < 0) {
            id = add_value(p, d->name, VK_INNER, d->dtype);   /* unnamed outputs get a private value */
            if (id < 0) return oom(p, "value");
        }
        if (p->values[id].dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) p->values[id].dtype = d->dtype;
        p->values[id].producer = step_index;
        s->out[j] = id;
    }
    if (k->init != NULL) {
        OrtStatus* st = k->init(desc, &s->state);
        if (st != NULL) {
            s->state = NULL;
            return st;
        }
    }
    return NULL;
}

/* Reads the fused node's (or, without one, the graph's) inputs or outputs. *values is malloc'ed. */
static OrtStatus* io_list(const struct epabi_plan* p, const OrtGraph* graph, const OrtNode* fused, bool inputs,
                          const OrtValueInfo*** values, size_t* n) {
    const OrtApi* ort = p->api->ort;
    *values = NULL;
    *n = 0;
    size_t count = 0;
    if (fused != NULL)
        EPABI_RETURN_IF_ERROR(inputs ? ort->Node_GetNumInputs(fused, &count) : ort->Node_GetNumOutputs(fused, &count));
    else
        EPABI_RETURN_IF_ERROR(inputs ? ort->Graph_GetNumInputs(graph, &count) : ort->Graph_GetNumOutputs(graph, &count));
    if (count == 0) return NULL;
    const OrtValueInfo** v = calloc(count, sizeof *v);
    if (v == NULL) return oom(p, "io list");
    OrtStatus* st;
    if (fused != NULL)
        st = inputs ? ort->Node_GetInputs(fused, v, count) : ort->Node_GetOutputs(fused, v, count);
    else
        st = inputs ? ort->Graph_GetInputs(graph, v, count) : ort->Graph_GetOutputs(graph, v, count);
    if (st != NULL) {
        free(v);
        return st;
    }
    *values = v;
    *n = count;
    return NULL;
}

/* The fused node's inputs: VK_INPUT values, or VK_CONST ones for constant initializers, which the plan
 * then serves from its own copy. */
static OrtStatus* add_inputs(struct epabi_plan* p, const OrtGraph* graph, const OrtNode* fused) {
    const OrtValueInfo** vals = NULL;
    size_t n = 0;
    EPABI_RETURN_IF_ERROR(io_list(p, graph, fused, true, &vals, &n));
    OrtStatus* st = NULL;
    p->input_values = calloc(n > 0 ? n : 1, sizeof *p->input_values);
    if (p->input_values == NULL) st = oom(p, "inputs");
    p->n_inputs = (int)n;
    for (size_t i = 0; i < n && st == NULL; ++i) {
        struct epabi_value_desc d;
        bool ok = true;
        char why[256];
        p->input_values[i] = -1;
        st = epabi_value_describe(p->api, vals[i], &d, &ok, why, sizeof why);
        if (st != NULL) break;
        if (!ok) {
            st = epabi_error(p->api, ORT_EP_FAIL, EPABI_EP_NAME ": input %zu of '%s': %s", i, p->name, why);
            break;
        }
        int id = index_find(p, d.name);
        if (id >= 0) {   /* the same value twice: keep the first */
            p->input_values[i] = id;
            continue;
        }
        if (d.const_data != NULL) {
            st = add_constant(p, &d, &id);
        } else {
            id = add_value(p, d.name, VK_INPUT, d.dtype);
            if (id < 0) st = oom(p, "input");
            else p->values[id].input_index = (int)i;
        }
        if (st == NULL) p->input_values[i] = id;
    }
    free(vals);
    return st;
}

static OrtStatus* add_outputs(struct epabi_plan* p, const OrtGraph* graph, const OrtNode* fused) {
    const OrtValueInfo** vals = NULL;
    size_t n = 0;
    EPABI_RETURN_IF_ERROR(io_list(p, graph, fused, false, &vals, &n));
    OrtStatus* st = NULL;
    p->output_values = calloc(n > 0 ? n : 1, sizeof *p->output_values);
    if (p->output_values == NULL) st = oom(p, "outputs");
    p->n_outputs = (int)n;
    for (size_t i = 0; i < n && st == NULL; ++i) {
        const char* name = NULL;
        st = p->api->ort->GetValueInfoName(vals[i], &name);
        if (st != NULL) break;
        int id = index_find(p, name);
        if (id < 0 || p->values[id].kind != VK_INNER || p->values[id].producer < 0) {
            st = epabi_error(p->api, ORT_EP_FAIL, EPABI_EP_NAME ": output %zu ('%s') of '%s' is not produced by "
                             "any of its nodes", i, name != NULL ? name : "", p->name);
        } else if (p->values[id].output_index >= 0) {
            st = epabi_error(p->api, ORT_EP_FAIL, EPABI_EP_NAME ": value '%s' is output %d and %zu of '%s'", name,
                             p->values[id].output_index, i, p->name);
        } else {
            p->values[id].output_index = (int)i;
            p->output_values[i] = id;
        }
    }
    free(vals);
    return st;
}

/* Orders the steps so that every step follows the producers of its inputs (the host's order is kept when
 * it already is one), then records after which step each intermediate can go back to the arena. */
static OrtStatus* schedule(struct epabi_plan* p) {
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
        st = oom(p, "schedule");
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

    /* last reader of each intermediate that is not a fused output; unread ones die at their producer */
    int* last = malloc((p->n_values > 0 ? (size_t)p->n_values : 1) * sizeof *last);
    if (last == NULL) {
        st = oom(p, "schedule");
        goto out;
    }
    for (int v = 0; v < p->n_values; ++v) last[v] = p->values[v].producer;
    for (int s = 0; s < n; ++s)
        for (int j = 0; j < p->steps[s].n_in; ++j)
            if (p->steps[s].in[j] >= 0 && s > last[p->steps[s].in[j]]) last[p->steps[s].in[j]] = s;
    for (int v = 0; v < p->n_values && st == NULL; ++v) {
        if (p->values[v].kind != VK_INNER || p->values[v].output_index >= 0) continue;
        struct plan_step* s = &p->steps[last[v]];
        int* f = realloc(s->frees, (size_t)(s->n_frees + 1) * sizeof *f);
        if (f == NULL) {
            st = oom(p, "schedule");
            break;
        }
        s->frees = f;
        s->frees[s->n_frees++] = v;
    }
    free(last);
out:
    free(ordered);
    free(done_step);
    free(avail);
    free(new_index);
    return st;
}

/* Device plans: marks host steps and host values (plan.h), to a fixed point. A candidate step has only
 * int32/int64 outputs, none a fused output, and inputs that are constants or candidates' outputs (Shape reads
 * only its input's dims). A candidate stays one while every reader of its outputs is a candidate or reads
 * them only as shape inputs. */
static void place_steps(struct epabi_plan* p) {
    for (int si = 0; si < p->n_steps; ++si) {
        struct plan_step* s = &p->steps[si];
        bool ok = s->kernel->host_step && s->n_out > 0;
        for (int j = 0; j < s->n_out && ok; ++j) {
            const struct plan_value* v = &p->values[s->out[j]];
            ok = epabi_is_index_dtype(v->dtype) && v->output_index < 0;
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

/* Folds "X = producer(a, b); Y = activation(X)" into one launch with an epilogue, when the producer's kernel
 * takes one (Add/Sub/Mul/Div/Max/Min), the activation's kernel can be one (Relu) and X is a float/double
 * intermediate read by that activation alone: one kernel instead of two, and one intermediate fewer (a CUDA
 * graph of an MLP then has the node count of a hand-fused one). Y keeps its name and dtype. */
static void fuse_epilogues(struct epabi_plan* p) {
    for (int ri = 0; ri < p->n_steps; ++ri) {
        struct plan_step* r = &p->steps[ri];
        if (r->kernel->as_epilogue == EPABI_EPILOGUE_NONE || r->n_in != 1 || r->n_out != 1 || r->in[0] < 0) continue;
        int x = r->in[0];
        struct plan_value* xv = &p->values[x];
        if (xv->kind != VK_INNER || xv->output_index >= 0 || xv->producer < 0 ||
            (xv->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT && xv->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE) ||
            p->values[r->out[0]].dtype != xv->dtype)
            continue;
        struct plan_step* a = &p->steps[xv->producer];
        if (!a->kernel->takes_epilogue || a->n_out != 1 || a->epilogue != EPABI_EPILOGUE_NONE) continue;
        int readers = 0;
        for (int si = 0; si < p->n_steps; ++si)
            for (int j = 0; j < p->steps[si].n_in; ++j) readers += p->steps[si].in[j] == x;
        if (readers != 1) continue;
        /* a writes Y directly; X keeps a producer (so the plan stays consistent) but nobody reads or writes it */
        int y = r->out[0];
        a->out[0] = y;
        a->epilogue = r->kernel->as_epilogue;
        p->values[y].producer = xv->producer;
        if (r->state != NULL && r->kernel->release != NULL) r->kernel->release(r->state);
        free(r->node_name);
        free(r->op_type);
        free(r->frees);
        for (int v = 0; v < p->n_values; ++v)
            if (p->values[v].producer > ri) p->values[v].producer--;
        memmove(r, r + 1, (size_t)(p->n_steps - ri - 1) * sizeof *r);
        p->n_steps--;
        p->n_fused++;
        --ri;
    }
}

/* Which fused-node inputs a device step hands to a launch: the others are only read as shape inputs on the
 * host, so a host-resident one needs no copy into device memory (plan.h). */
static void mark_device_reads(struct epabi_plan* p) {
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

int epabi_plan_host_steps(const struct epabi_plan* plan) {
    return plan->n_host_steps;
}

OrtStatus* epabi_plan_build(const struct epabi_api* api, struct epabi_arena* arena,
                            const struct epabi_plan_device* device, const OrtLogger* logger, const OrtGraph* graph,
                            const OrtNode* fused_node, struct epabi_plan** out) {
    const OrtApi* ort = api->ort;
    *out = NULL;
    struct epabi_plan* p = calloc(1, sizeof *p);
    if (p == NULL) return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory building a plan");
    p->api = api;
    p->arena = arena;
    if (device != NULL) {
        p->has_device = true;
        p->device_only = !device->host_addressable;
        p->device = *device;
    }
    epabi_arena_retain(arena);
    const char* name = NULL;
    OrtStatus* st = NULL;
    if (fused_node != NULL) st = ort->Node_GetName(fused_node, &name);
    if (st == NULL) {
        p->name = dup_str(name);
        if (p->name == NULL) st = epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory building a plan");
    }

    const OrtNode** nodes = NULL;
    struct epabi_node* desc = NULL;
    size_t n_nodes = 0;
    if (st == NULL) st = add_inputs(p, graph, fused_node);
    if (st == NULL) st = ort->Graph_GetNumNodes(graph, &n_nodes);
    if (st == NULL) {
        nodes = calloc(n_nodes > 0 ? n_nodes : 1, sizeof *nodes);
        p->steps = calloc(n_nodes > 0 ? n_nodes : 1, sizeof *p->steps);
        desc = malloc(sizeof *desc);
        if (nodes == NULL || p->steps == NULL || desc == NULL) st = oom(p, "nodes");
    }
    if (st == NULL && n_nodes > 0) st = ort->Graph_GetNodes(graph, nodes, n_nodes);
    for (size_t i = 0; i < n_nodes && st == NULL; ++i) st = add_step(p, nodes[i], desc);
    if (st == NULL) st = add_outputs(p, graph, fused_node);
    if (st == NULL) fuse_epilogues(p);
    if (st == NULL) st = schedule(p);
    if (st == NULL && p->device_only) place_steps(p);
    if (st == NULL && p->has_device) mark_device_reads(p);
    free(nodes);
    free(desc);
    free(p->index);   /* names are not looked up after the build */
    p->index = NULL;
    p->index_cap = 0;
    if (st != NULL) {
        epabi_plan_destroy(p);
        return st;
    }
    EPABI_LOG(api, logger, ORT_LOGGING_LEVEL_VERBOSE,
              EPABI_EP_NAME ": compiled '%s': %d steps (%d on the host, %d Relu fused), %d values, %d inputs, "
              "%d outputs", p->name, p->n_steps, p->n_host_steps, p->n_fused, p->n_values, p->n_inputs, p->n_outputs);
    *out = p;
    return NULL;
}

void epabi_plan_destroy(struct epabi_plan* p) {
    if (p == NULL) return;
    for (int s = 0; s < p->n_steps; ++s) {
        struct plan_step* step = &p->steps[s];
        if (step->state != NULL && step->kernel->release != NULL) step->kernel->release(step->state);
        free(step->node_name);
        free(step->op_type);
        free(step->frees);
    }
    for (int v = 0; v < p->n_values; ++v) {
        free(p->values[v].name);
        if (p->values[v].kind != VK_CONST) continue;
        if (p->has_device && p->values[v].tensor.data != NULL && p->values[v].tensor.data != p->values[v].tensor.host)
            p->device.release(p->device.ctx, p->values[v].tensor.data);
        free((void*)p->values[v].tensor.host);
    }
    free(p->steps);
    free(p->values);
    free(p->input_values);
    free(p->output_values);
    free(p->index);
    free(p->name);
    epabi_arena_release(p->arena);
    free(p);
}

const char* epabi_plan_name(const struct epabi_plan* plan) {
    return plan->name;
}

/* ---- executor --------------------------------------------------------------------------------------- */

const struct epabi_api* epabi_exec_api(const struct epabi_exec* ex) {
    return ex->plan->api;
}

int epabi_exec_epilogue(const struct epabi_exec* ex) {
    return ex->step != NULL ? ex->step->epilogue : EPABI_EPILOGUE_NONE;
}

/* Run memory: host memory for host steps, stream-ordered allocations in mempool mode, the capture pool
 * inside a capture window, else the plan's arena (linked to the stream that used it, see arena.h). */
static void* exec_alloc(struct epabi_exec* ex, size_t bytes) {
    if (ex->host_mode) return malloc(bytes > 0 ? bytes : 1);
    if (ex->mempool) return ex->stream->ops->alloc_async(ex->stream, bytes);
    return ex->pool != NULL ? epabi_arena_pool_alloc(ex->pool, bytes)
                            : epabi_arena_alloc_on(ex->plan->arena, bytes, ex->stream_tag);
}

static void exec_free_device(struct epabi_exec* ex, void* p) {
    if (p == NULL) return;
    if (ex->mempool) ex->stream->ops->free_async(ex->stream, p);
    else if (ex->pool != NULL) epabi_arena_pool_free(ex->pool, p);
    else epabi_arena_free_on(ex->plan->arena, p, ex->stream_tag);
}

/* Frees value id's block, wherever it came from. */
static void exec_free_value(struct epabi_exec* ex, int id) {
    if (ex->owned[id] == NULL) return;
    if (ex->plan->values[id].on_host) free(ex->owned[id]);
    else exec_free_device(ex, ex->owned[id]);
    ex->owned[id] = NULL;
}

/* Element count and byte size of a shape, refusing negative dims and overflow. */
static bool shape_bytes(int rank, const int64_t* dims, size_t esize, size_t* bytes) {
    uint64_t n = 1;
    for (int i = 0; i < rank; ++i) {
        if (dims[i] < 0) return false;
        if (dims[i] != 0 && n > UINT64_MAX / (uint64_t)dims[i]) return false;
        n *= (uint64_t)dims[i];
    }
    if (n > SIZE_MAX / esize) return false;
    *bytes = (size_t)(n * esize);
    return true;
}

/* Where the host put a fused-node input or output, relative to the plan's device memory. */
enum placement { IN_DEVICE, IN_HOST, IN_OTHER };

static enum placement placement_of(const struct epabi_plan* p, const OrtValue* value) {
    const OrtEpApi* ep = p->api->ep;
    const OrtMemoryDevice* d = ep->Value_GetMemoryDevice(value);
    if (d == NULL || p->device.memory == NULL || ep->MemoryDevice_AreEqual(d, p->device.memory)) return IN_DEVICE;
    if (ep->MemoryDevice_GetDeviceType(d) == OrtMemoryInfoDeviceType_CPU ||
        ep->MemoryDevice_GetMemoryType(d) == OrtDeviceMemoryType_HOST_ACCESSIBLE)
        return IN_HOST;
    return IN_OTHER;
}

/* The error for a value in memory the device cannot use; names it and that memory. */
static OrtStatus* foreign_memory(const struct epabi_plan* p, const OrtValue* value, const char* what, const char* name) {
    const OrtEpApi* ep = p->api->ep;
    const OrtMemoryDevice* d = ep->Value_GetMemoryDevice(value);
    return epabi_error(p->api, ORT_INVALID_ARGUMENT,
                       EPABI_EP_NAME ": %s '%s' of '%s' is in memory this EP's device cannot use (device type %d, "
                       "memory type %d, vendor 0x%x, device %u); it needs its own device memory or host memory",
                       what, name, p->name, (int)ep->MemoryDevice_GetDeviceType(d),
                       (int)ep->MemoryDevice_GetMemoryType(d), (unsigned)ep->MemoryDevice_GetVendorId(d),
                       (unsigned)ep->MemoryDevice_GetDeviceId(d));
}

/* A graph capture records addresses: a copy from or to memory the host frees after the run cannot be part
 * of it. */
static OrtStatus* staging_while_capturing(const struct epabi_plan* p, const char* what, const char* name) {
    return epabi_error(p->api, ORT_INVALID_ARGUMENT,
                       EPABI_EP_NAME ": %s '%s' of '%s' is in host memory, and a graph capture cannot record copies "
                       "from or to memory the host frees after the run; bind it in the EP's device memory", what, name,
                       p->name);
}

/* Copies host bytes into run memory of the device (on the run's stream when it has one). */
static OrtStatus* write_device(struct epabi_exec* ex, void* dst, const void* src, size_t bytes) {
    if (ex->stream != NULL && ex->stream->ops->write_from_host != NULL)
        return ex->stream->ops->write_from_host(ex->stream, dst, src, bytes);
    if (bytes > 0) memcpy(dst, src, bytes);   /* host-addressable device memory */
    return NULL;
}

static OrtStatus* read_device(struct epabi_exec* ex, void* dst, const void* src, size_t bytes) {
    if (ex->stream != NULL && ex->stream->ops->read_to_host != NULL)
        return ex->stream->ops->read_to_host(ex->stream, dst, src, bytes);
    if (bytes > 0) memcpy(dst, src, bytes);
    return NULL;
}

/* Output id goes to host memory: it is computed in an owned run block, copied to `host` at run end. */
static OrtStatus* stage_output(struct epabi_exec* ex, int id, void* host, size_t bytes, struct epabi_tensor* t) {
    const struct epabi_plan* p = ex->plan;
    if (ex->stream != NULL && epabi_stream_is_capturing(ex->stream))
        return staging_while_capturing(p, "output", p->values[id].name);
    if (ex->n_staged == ex->cap_staged) {
        int cap = ex->cap_staged == 0 ? 4 : 2 * ex->cap_staged;
        struct staged_output* grown = realloc(ex->staged, (size_t)cap * sizeof *grown);
        if (grown == NULL) return epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of memory staging an output");
        ex->staged = grown;
        ex->cap_staged = cap;
    }
    void* data = exec_alloc(ex, bytes);
    if (data == NULL)
        return epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of memory: %zu bytes staging output '%s' of '%s'",
                           bytes, p->values[id].name, p->name);
    ex->owned[id] = data;
    ex->staged[ex->n_staged++] = (struct staged_output){host, data, bytes};
    t->data = data;
    return NULL;
}

struct epabi_tensor* epabi_exec_output(struct epabi_exec* ex, int index, ONNXTensorElementDataType dtype, int rank,
                                       const int64_t* dims, OrtStatus** status) {
    const struct epabi_plan* p = ex->plan;
    const struct plan_step* s = ex->step;
    *status = NULL;
    if (s == NULL || index < 0 || index >= s->n_out) {
        *status = epabi_error(p->api, ORT_EP_FAIL, EPABI_EP_NAME ": node '%s' asked for output %d of %d",
                              s != NULL ? s->node_name : "?", index, s != NULL ? s->n_out : 0);
        return NULL;
    }
    int id = s->out[index];
    const struct plan_value* v = &p->values[id];
    size_t esize = epabi_dtype_size(dtype);
    size_t bytes = 0;
    if (esize == 0 || rank < 0 || rank > EPABI_MAX_RANK || (rank > 0 && dims == NULL) ||
        !shape_bytes(rank, dims, esize, &bytes)) {
        *status = epabi_error(p->api, ORT_EP_FAIL,
                              EPABI_EP_NAME ": node '%s' (%s) asked for output '%s' with dtype %s and an invalid "
                              "shape (rank %d)", s->node_name, s->op_type, v->name, epabi_dtype_name(dtype), rank);
        return NULL;
    }
    if (v->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED && v->dtype != dtype) {
        *status = epabi_error(p->api, ORT_EP_FAIL,
                              EPABI_EP_NAME ": node '%s' (%s) produced output '%s' as %s; the graph declares %s",
                              s->node_name, s->op_type, v->name, epabi_dtype_name(dtype), epabi_dtype_name(v->dtype));
        return NULL;
    }
    if (ex->ready[id]) {
        *status = epabi_error(p->api, ORT_EP_FAIL, EPABI_EP_NAME ": node '%s' (%s) asked for output '%s' twice",
                              s->node_name, s->op_type, v->name);
        return NULL;
    }
    struct epabi_tensor* t = &ex->tensors[id];
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; ++i) t->dims[i] = dims[i];
    if (v->output_index >= 0) {
        OrtValue* value = NULL;
        void* data = NULL;
        OrtStatus* st = p->api->ort->KernelContext_GetOutput(ex->ctx, (size_t)v->output_index, dims, (size_t)rank,
                                                             &value);
        if (st == NULL && value == NULL)
            st = epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": the host gave no tensor for output %d ('%s')",
                             v->output_index, v->name);
        if (st == NULL) st = p->api->ort->GetTensorMutableData(value, &data);
        t->data = data;
        if (st == NULL && p->has_device) {
            enum placement where = placement_of(p, value);
            if (where == IN_HOST) st = stage_output(ex, id, data, bytes, t);
            else if (where == IN_OTHER) st = foreign_memory(p, value, "output", v->name);
        }
        if (st != NULL) {
            *status = st;
            return NULL;
        }
    } else {
        void* data = exec_alloc(ex, bytes);
        if (data == NULL) {
            *status = epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of memory: %zu bytes for value '%s' of '%s'",
                                  bytes, v->name, p->name);
            return NULL;
        }
        ex->owned[id] = data;
        t->data = data;
    }
    /* host memory: on the host backend everything; on a device only host steps' values */
    t->host = !p->device_only || v->on_host ? t->data : NULL;
    ex->ready[id] = 1;
    return t;
}

void* epabi_exec_scratch(struct epabi_exec* ex, size_t bytes, OrtStatus** status) {
    const struct epabi_plan* p = ex->plan;
    *status = NULL;
    if (ex->n_scratch == ex->cap_scratch) {
        int cap = ex->cap_scratch == 0 ? 8 : 2 * ex->cap_scratch;
        void** s = realloc(ex->scratch, (size_t)cap * sizeof *s);
        unsigned char* h = s != NULL ? realloc(ex->scratch_host, (size_t)cap) : NULL;
        if (s != NULL) ex->scratch = s;
        if (h == NULL) {
            *status = epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of memory for scratch bookkeeping");
            return NULL;
        }
        ex->scratch_host = h;
        ex->cap_scratch = cap;
    }
    void* data = exec_alloc(ex, bytes);
    if (data == NULL) {
        *status = epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of memory: %zu scratch bytes for node '%s'", bytes,
                              ex->step != NULL ? ex->step->node_name : "?");
        return NULL;
    }
    ex->scratch_host[ex->n_scratch] = ex->host_mode;
    ex->scratch[ex->n_scratch++] = data;
    return data;
}

const void* epabi_exec_host_data(struct epabi_exec* ex, const struct epabi_tensor* t, OrtStatus** status) {
    const struct epabi_plan* p = ex->plan;
    *status = NULL;
    if (t->host != NULL) return t->host;
    if (!p->device_only || ex->stream == NULL || ex->stream->ops->read_to_host == NULL) return t->data;
    const char* node = ex->step != NULL ? ex->step->node_name : "?";
    if (epabi_stream_is_capturing(ex->stream)) {
        *status = epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": node '%s' of '%s' needs the values of a shape input "
                              "that only the device holds, and reading them back would synchronize inside the graph "
                              "capture; make it a constant or compute it from shapes", node, p->name);
        return NULL;
    }
    size_t bytes = (size_t)epabi_numel(t->rank, t->dims) * epabi_dtype_size(t->dtype);
    if (ex->n_host_reads == ex->cap_host_reads) {
        int cap = ex->cap_host_reads == 0 ? 4 : 2 * ex->cap_host_reads;
        void** r = realloc(ex->host_reads, (size_t)cap * sizeof *r);
        if (r == NULL) {
            *status = epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of memory reading a shape input");
            return NULL;
        }
        ex->host_reads = r;
        ex->cap_host_reads = cap;
    }
    void* buf = malloc(bytes > 0 ? bytes : 1);
    if (buf == NULL) {
        *status = epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of memory reading a shape input");
        return NULL;
    }
    ex->host_reads[ex->n_host_reads++] = buf;
    *status = ex->stream->ops->read_to_host(ex->stream, buf, t->data, bytes);
    return *status == NULL ? buf : NULL;
}

/* The one place where work is issued: straight to fn on the calling thread without a stream (graph
 * capture off), else through the thread's graph stream, which records the launch while capturing. */
OrtStatus* epabi_exec_launch(struct epabi_exec* ex, enum epabi_launch_kind kind, epabi_launch_fn fn, const void* args,
                             size_t args_size) {
    if (fn == NULL || (int)kind < 0 || kind >= EPABI_LAUNCH_KIND_COUNT)
        return epabi_error(ex->plan->api, ORT_EP_FAIL, EPABI_EP_NAME ": node '%s' launched a NULL function or kind %d",
                           ex->step != NULL ? ex->step->node_name : "?", (int)kind);
    if (ex->stream != NULL && !ex->host_mode) return epabi_stream_launch(ex->stream, kind, fn, args, args_size);
    fn(args);   /* synchronous: the caller's args outlive the call */
    return NULL;
}

/* An input the host placed in host memory (struct epabi_plan_device) is host-readable as it is; a device
 * step that launches on it gets a copy in an owned run block. */
static OrtStatus* place_input(struct epabi_exec* ex, int id, const OrtValue* value, const void* data,
                              struct epabi_tensor* t) {
    const struct epabi_plan* p = ex->plan;
    const struct plan_value* v = &p->values[id];
    enum placement where = placement_of(p, value);
    if (where == IN_OTHER) return foreign_memory(p, value, "input", v->name);
    if (where == IN_DEVICE) return NULL;
    t->host = data;
    if (!v->device_read) return NULL;
    if (ex->stream != NULL && epabi_stream_is_capturing(ex->stream)) return staging_while_capturing(p, "input", v->name);
    size_t bytes = (size_t)epabi_numel(t->rank, t->dims) * epabi_dtype_size(t->dtype);
    void* copy = exec_alloc(ex, bytes);
    if (copy == NULL)
        return epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of memory: %zu bytes staging input '%s' of '%s'",
                           bytes, v->name, p->name);
    ex->owned[id] = copy;
    t->data = copy;
    return write_device(ex, copy, data, bytes);
}

/* Reads every VK_INPUT value from the kernel context, checking dtype and rank against the plan. */
static OrtStatus* bind_inputs(struct epabi_exec* ex) {
    const struct epabi_plan* p = ex->plan;
    const OrtApi* ort = p->api->ort;
    size_t count = 0;
    EPABI_RETURN_IF_ERROR(ort->KernelContext_GetInputCount(ex->ctx, &count));
    if (count != (size_t)p->n_inputs)
        return epabi_error(p->api, ORT_EP_FAIL, EPABI_EP_NAME ": '%s' was compiled for %d inputs but runs with %zu",
                           p->name, p->n_inputs, count);
    for (int i = 0; i < p->n_inputs; ++i) {
        int id = p->input_values[i];
        if (id < 0 || p->values[id].kind != VK_INPUT || p->values[id].input_index != i) continue;
        const struct plan_value* v = &p->values[id];
        const OrtValue* value = NULL;
        EPABI_RETURN_IF_ERROR(ort->KernelContext_GetInput(ex->ctx, (size_t)i, &value));
        if (value == NULL)
            return epabi_error(p->api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": input %d ('%s') of '%s' is missing", i,
                               v->name, p->name);
        OrtTensorTypeAndShapeInfo* info = NULL;
        EPABI_RETURN_IF_ERROR(ort->GetTensorTypeAndShape(value, &info));
        struct epabi_tensor* t = &ex->tensors[id];
        size_t rank = 0;
        OrtStatus* st = ort->GetTensorElementType(info, &t->dtype);
        if (st == NULL) st = ort->GetDimensionsCount(info, &rank);
        if (st == NULL && rank > EPABI_MAX_RANK)
            st = epabi_error(p->api, ORT_INVALID_ARGUMENT,
                             EPABI_EP_NAME ": input '%s' of '%s' has rank %zu; at most %d is supported", v->name,
                             p->name, rank, EPABI_MAX_RANK);
        if (st == NULL && rank > 0) st = ort->GetDimensions(info, t->dims, rank);
        ort->ReleaseTensorTypeAndShapeInfo(info);
        if (st != NULL) return st;
        t->rank = (int)rank;
        if (v->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED && t->dtype != v->dtype)
            return epabi_error(p->api, ORT_INVALID_ARGUMENT,
                               EPABI_EP_NAME ": input '%s' of '%s' has dtype %s; it was compiled for %s", v->name,
                               p->name, epabi_dtype_name(t->dtype), epabi_dtype_name(v->dtype));
        if (epabi_dtype_size(t->dtype) == 0)
            return epabi_error(p->api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": input '%s' of '%s' has unsupported dtype %s",
                               v->name, p->name, epabi_dtype_name(t->dtype));
        const void* data = NULL;
        EPABI_RETURN_IF_ERROR(ort->GetTensorData(value, &data));
        t->data = (void*)data;   /* kernels treat inputs as read-only */
        t->host = p->device_only ? NULL : data;
        if (p->has_device) EPABI_RETURN_IF_ERROR(place_input(ex, id, value, data, t));
        ex->ready[id] = 1;
    }
    return NULL;
}

/* Prefixes a kernel's status with the node it came from; keeps the code. */
static OrtStatus* node_error(const struct epabi_plan* p, const struct plan_step* s, OrtStatus* st) {
    const OrtApi* ort = p->api->ort;
    OrtStatus* wrapped = epabi_error(p->api, ort->GetErrorCode(st), EPABI_EP_NAME ": node '%s' (%s) in '%s': %s",
                                     s->node_name, s->op_type, p->name, ort->GetErrorMessage(st));
    if (wrapped == NULL) return st;
    ort->ReleaseStatus(st);
    return wrapped;
}

/* plan.h, owns: every launch operand of a device step (its inputs but shape inputs, or its outputs) must lie in
 * the device's memory. */
static OrtStatus* check_operands(struct epabi_exec* ex, const struct plan_step* s, bool inputs) {
    const struct epabi_plan* p = ex->plan;
    uint32_t host_in = inputs ? s->kernel->host_inputs : 0;
    int n = inputs ? s->n_in : s->n_out;
    for (int j = 0; j < n; ++j) {
        int id = inputs ? s->in[j] : s->out[j];
        if (id < 0 || !ex->ready[id] || (j < 32 && (host_in >> j & 1u) != 0)) continue;
        const struct epabi_tensor* t = &ex->tensors[id];
        size_t bytes = (size_t)epabi_numel(t->rank, t->dims) * epabi_dtype_size(t->dtype);
        if (bytes == 0 || p->device.owns(p->device.ctx, t->data, bytes)) continue;
        return epabi_error(p->api, ORT_EP_FAIL,
                           EPABI_EP_NAME ": node '%s' (%s) in '%s': %s '%s' (%zu bytes at %p) is not in the device's "
                           "memory; a kernel on a GPU would read or write memory it cannot access", s->node_name,
                           s->op_type, p->name, inputs ? "input" : "output", p->values[id].name, bytes, t->data);
    }
    return NULL;
}

static OrtStatus* run_steps(struct epabi_exec* ex) {
    const struct epabi_plan* p = ex->plan;
    const struct epabi_tensor* in[EPABI_MAX_NODE_IO];
    struct epabi_tensor host_in[EPABI_MAX_NODE_IO];   /* a host step's inputs, with data = their host copy */
    for (int si = 0; si < p->n_steps; ++si) {
        const struct plan_step* s = &p->steps[si];
        for (int j = 0; j < s->n_in; ++j) {
            int id = s->in[j];
            if (id >= 0 && !ex->ready[id])
                return epabi_error(p->api, ORT_EP_FAIL,
                                   EPABI_EP_NAME ": node '%s' (%s) in '%s' reads '%s', which no earlier node produced",
                                   s->node_name, s->op_type, p->name, p->values[id].name);
            in[j] = id >= 0 ? &ex->tensors[id] : NULL;
            if (id >= 0 && s->on_host) {
                host_in[j] = ex->tensors[id];
                host_in[j].data = (void*)host_in[j].host;   /* NULL only for Shape's input, whose data it never reads */
                in[j] = &host_in[j];
            }
        }
        ex->step = s;
        bool checked = p->device.owns != NULL && !s->on_host;
        if (checked) EPABI_RETURN_IF_ERROR(check_operands(ex, s, true));
        ex->host_mode = s->on_host;
        OrtStatus* st = s->kernel->run(ex, s->state, in, s->n_in, s->n_out);
        ex->host_mode = false;
        if (st != NULL) return node_error(p, s, st);
        if (checked) EPABI_RETURN_IF_ERROR(check_operands(ex, s, false));
        for (int j = 0; j < s->n_out; ++j) {
            int id = s->out[j];
            /* fused outputs must exist; a missing intermediate is reported by the step that reads it */
            if (p->values[id].output_index >= 0 && !ex->ready[id])
                return epabi_error(p->api, ORT_EP_FAIL, EPABI_EP_NAME ": node '%s' (%s) in '%s' did not produce '%s'",
                                   s->node_name, s->op_type, p->name, p->values[id].name);
        }
        for (int f = 0; f < s->n_frees; ++f) exec_free_value(ex, s->frees[f]);
    }
    ex->step = NULL;
    return NULL;
}

OrtStatus* epabi_plan_run(const struct epabi_plan* p, OrtKernelContext* ctx, const struct epabi_run_env* env) {
    struct epabi_exec ex;
    memset(&ex, 0, sizeof ex);
    ex.plan = p;
    ex.ctx = ctx;
    if (env != NULL) {
        ex.stream = env->stream;
        ex.pool = env->capture_pool;
        ex.mempool = env->mempool && env->stream != NULL && env->stream->ops->alloc_async != NULL;
        if (env->stream != NULL && env->stream->ops->backend != EPABI_STREAM_HOST) ex.stream_tag = env->stream;
    }
    size_t nv = p->n_values > 0 ? (size_t)p->n_values : 1;
    ex.tensors = calloc(nv, sizeof *ex.tensors);
    ex.ready = calloc(nv, 1);
    ex.owned = calloc(nv, sizeof *ex.owned);
    OrtStatus* st = NULL;
    if (ex.tensors == NULL || ex.ready == NULL || ex.owned == NULL) {
        st = epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of memory starting a run of '%s'", p->name);
    } else {
        for (int v = 0; v < p->n_values; ++v) {
            if (p->values[v].kind != VK_CONST) continue;
            ex.tensors[v] = p->values[v].tensor;
            ex.ready[v] = 1;
        }
        st = bind_inputs(&ex);
        if (st == NULL) st = run_steps(&ex);
        for (int i = 0; i < ex.n_staged && st == NULL; ++i)
            st = read_device(&ex, ex.staged[i].host, ex.staged[i].device, ex.staged[i].bytes);
    }
    /* inside a capture window these go back to the pool: the captured launches keep pointing at them */
    if (ex.owned != NULL)
        for (int v = 0; v < p->n_values; ++v) exec_free_value(&ex, v);
    for (int i = 0; i < ex.n_scratch; ++i) {
        if (ex.scratch_host[i]) free(ex.scratch[i]);
        else exec_free_device(&ex, ex.scratch[i]);
    }
    for (int i = 0; i < ex.n_host_reads; ++i) free(ex.host_reads[i]);
    free(ex.host_reads);
    free(ex.staged);
    free(ex.scratch_host);
    free(ex.scratch);
    free(ex.owned);
    free(ex.ready);
    free(ex.tensors);
    return st;
}
