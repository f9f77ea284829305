/*
 * plan_build.c - see plan.h: builds a plan from the fused OrtGraph at Compile (values, constants, steps with
 * their kernels' init() state, the fused node's inputs and outputs), runs the passes of plan_passes.c over it,
 * and destroys it. The executor is plan_exec.c.
 */
#include "plan_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_factory.h"
#include "kernel.h"
#include "node_desc.h"

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

OrtStatus* epabi_plan_oom(const struct epabi_plan* p, const char* what) {
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
    v->decl_rank = -1;
    int id = p->n_values++;
    if (!index_put(p, id)) {
        free(v->name);
        --p->n_values;
        return -1;
    }
    return id;
}

/* The id of a dim's symbol (1 + its index in sym_names, added if new): 0 for "" or NULL (static or unnamed), -1 when
 * out of memory. A plan has a handful of symbols, so a linear search is enough. */
static int32_t intern_symbol(struct epabi_plan* p, const char* name) {
    if (name == NULL || name[0] == '\0') return 0;
    for (int k = 0; k < p->n_syms; ++k)
        if (strcmp(p->sym_names[k], name) == 0) return k + 1;
    if (p->n_syms == p->cap_syms) {
        const int cap = p->cap_syms == 0 ? 8 : 2 * p->cap_syms;
        char** names = realloc(p->sym_names, (size_t)cap * sizeof *names);
        if (names == NULL) return -1;
        p->sym_names = names;
        p->cap_syms = cap;
    }
    char* copy = strdup(name);
    if (copy == NULL) return -1;
    p->sym_names[p->n_syms++] = copy;
    return p->n_syms;
}

/* Records the shape the graph declares for value id, symbols included, unless one is known already (constants:
 * their own). Out of memory: an error. */
static OrtStatus* note_shape(struct epabi_plan* p, int id, const struct epabi_value_desc* d) {
    struct plan_value* v = &p->values[id];
    if (v->decl_rank >= 0 || d->rank < 0 || d->rank > EPABI_MAX_RANK) return NULL;
    for (int k = 0; k < d->rank; ++k) {
        const int32_t sym = d->dims[k] < 0 ? intern_symbol(p, d->dim_names[k]) : 0;
        if (sym < 0) return epabi_plan_oom(p, "dim symbol");
        v->decl_sym[k] = sym;
    }
    v->decl_rank = d->rank;
    memcpy(v->decl_dims, d->dims, sizeof(int64_t) * (size_t)d->rank);
    return NULL;
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
    if (id < 0) return epabi_plan_oom(p, "constant");
    struct epabi_tensor* t = &p->values[id].tensor;
    t->dtype = d->dtype;
    t->rank = d->rank;
    memcpy(t->dims, d->dims, sizeof t->dims);
    size_t bytes = d->const_count * esize;
    void* host = malloc(bytes > 0 ? bytes : 1);
    if (host == NULL) return epabi_plan_oom(p, "constant data");
    if (bytes > 0) memcpy(host, d->const_data, bytes);
    t->host = host;
    t->data = host;
    p->values[id].decl_rank = d->rank;
    memcpy(p->values[id].decl_dims, d->dims, sizeof p->values[id].decl_dims);
    if (p->has_device) {
        t->data = p->device.upload(p->device.ctx, host, bytes > 0 ? bytes : 1);
        if (t->data == NULL)
            return epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of device memory uploading constant '%s' "
                               "(%zu bytes) of '%s'", d->name, bytes, p->name);
    }
    *id_out = id;
    return NULL;
}

OrtStatus* epabi_plan_add_constant(struct epabi_plan* p, const char* name, ONNXTensorElementDataType dtype, int rank,
                                   const int64_t* dims, const void* data, int* id_out) {
    struct epabi_value_desc d;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.dtype = dtype;
    d.rank = rank;
    if (rank >= 0 && rank <= EPABI_MAX_RANK) memcpy(d.dims, dims, sizeof(int64_t) * (size_t)rank);
    d.const_data = data;
    d.const_count = (size_t)epabi_numel(rank, dims);
    return add_constant(p, &d, id_out);
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
    if (s->node_name == NULL || s->op_type == NULL) return epabi_plan_oom(p, "step");
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
            if (id < 0) return epabi_plan_oom(p, "value");
        }
        EPABI_RETURN_IF_ERROR(note_shape(p, id, d));
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
            if (id < 0) return epabi_plan_oom(p, "value");
        }
        if (p->values[id].dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) p->values[id].dtype = d->dtype;
        EPABI_RETURN_IF_ERROR(note_shape(p, id, d));
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
    if (v == NULL) return epabi_plan_oom(p, "io list");
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
    if (p->input_values == NULL) st = epabi_plan_oom(p, "inputs");
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
            if (id < 0) {
                st = epabi_plan_oom(p, "input");
            } else {
                p->values[id].input_index = (int)i;
                st = note_shape(p, id, &d);
            }
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
    if (p->output_values == NULL) st = epabi_plan_oom(p, "outputs");
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

OrtStatus* epabi_plan_build(const struct epabi_api* api, struct epabi_arena* arena,
                            const struct epabi_plan_device* device, bool fuse_linear, const OrtLogger* logger,
                            const OrtGraph* graph, const OrtNode* fused_node, struct epabi_plan** out) {
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
        if (nodes == NULL || p->steps == NULL || desc == NULL) st = epabi_plan_oom(p, "nodes");
    }
    if (st == NULL) p->n_nodes = (int)n_nodes;
    if (st == NULL && n_nodes > 0) st = ort->Graph_GetNodes(graph, nodes, n_nodes);
    for (size_t i = 0; i < n_nodes && st == NULL; ++i) st = add_step(p, nodes[i], desc);
    if (st == NULL) st = add_outputs(p, graph, fused_node);
    if (st == NULL && fuse_linear) st = epabi_plan_fuse_onehot(p);
    if (st == NULL && fuse_linear) st = epabi_plan_fuse_linear(p);
    if (st == NULL) epabi_plan_fuse_epilogues(p);
    if (st == NULL) st = epabi_plan_fuse_moments(p);
    if (st == NULL) st = epabi_plan_fuse_softmax(p);
    if (st == NULL) st = epabi_plan_schedule(p);
    if (st == NULL && p->device_only) epabi_plan_place_steps(p);
    if (st == NULL) st = epabi_plan_fuse_chains(p);
    if (st == NULL && p->has_device) epabi_plan_mark_device_reads(p);
    if (st == NULL) st = epabi_plan_mark_views(p);
    for (int i = 0; st == NULL && i < p->n_steps; ++i)   /* the steps stay where they are from now on */
        p->steps[i].site = (struct epabi_error_site){p->steps[i].node_name, p->steps[i].op_type, p->name};
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
              EPABI_EP_NAME ": compiled '%s': %d steps (%d on the host, %d activation nodes fused, %d linear with %d "
              "node(s) folded in), %d one-hot lookup(s), %d elementwise chain(s) of %d step(s), %d moment pair(s), "
              "%d softmax(es), %d views, %d values, %d inputs, %d outputs", p->name, p->n_steps, p->n_host_steps,
              p->n_fused, p->n_linear, p->n_linear_folded, p->n_onehot, p->n_chains, p->n_chain_nodes, p->n_moments,
              p->n_softmax, p->n_views, p->n_values, p->n_inputs, p->n_outputs);
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
    for (int k = 0; k < p->n_syms; ++k) free(p->sym_names[k]);
    free(p->sym_names);
    free(p->name);
    epabi_arena_release(p->arena);
    free(p);
}

const char* epabi_plan_name(const struct epabi_plan* plan) {
    return plan->name;
}

unsigned epabi_plan_node_count(const struct epabi_plan* plan) {
    return (unsigned)plan->n_nodes;
}
