/*
 * plan_exec.c - the executor: epabi_plan_run (plan.h) and the executor half of kernel.h (epabi_exec_*). One run
 * binds the fused node's inputs from the kernel context, runs the steps in order (host steps on the host),
 * hands each kernel its outputs, scratch and host reads, stages values in host memory through device memory,
 * and gives every block back before it returns. Its state (struct epabi_exec) is per run; the plan is only read.
 */
#include "plan_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi_since.h"
#include "ep_factory.h"
#include "graph_capture.h"
#include "kernel.h"
#include "thread_pool.h"

struct epabi_exec {
    const struct epabi_plan* plan;
    OrtKernelContext* ctx;
    struct epabi_stream* stream;       /* NULL: launches execute at once */
    struct epabi_arena_pool* pool;     /* non-NULL inside a capture window */
    bool mempool;                      /* stream-ordered allocation (env->mempool) */
    const void* stream_tag;            /* arena reuse key: the CUDA stream, NULL on the host */
    bool host_mode;                    /* running a host step: host memory, launches execute at once */
    struct epabi_pool* threads;        /* env->threads; kernels see it outside host steps */
    const struct plan_step* step;      /* the step being run */
    const struct epabi_tensor* step_src;   /* what its run() got as input 0 (a view aliases it) */
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
    struct epabi_graph_manager* graphs;   /* env->graphs: graph capture is on */
    bool capturing;                    /* inside a capture window */
    bool classify;                     /* host memory, graph capture on: which outputs did the host allocate? */
    unsigned char* out_host;           /* per fused output (classify): the host's buffer, not the caller's */
    bool all_host;                     /* every fused output is the host's (a plain run): inputs are copied too */
    uint64_t error_word;               /* launches without a stream (and host steps) report here */
};

/* A fused output the host placed in host memory (struct epabi_plan_device): computed at `device`, an owned
 * run block, and copied to `host` once every step has run. */
struct staged_output {
    void* host;
    const void* device;
    size_t bytes;
};

const struct epabi_api* epabi_exec_api(const struct epabi_exec* ex) {
    return ex->plan->api;
}

struct epabi_pool* epabi_exec_pool(const struct epabi_exec* ex) {
    return ex->host_mode ? NULL : ex->threads;
}

/* In the owner's capture of a user's stream nothing of ours reads the word when the owner's graph runs: its
 * kernels report nothing rather than an error a later run would read. */
uint64_t* epabi_exec_error_word(struct epabi_exec* ex) {
    if (ex->stream == NULL || ex->host_mode) return &ex->error_word;
    return ex->stream->external_capture ? NULL : ex->stream->error_word;
}

uint64_t epabi_exec_error_site(const struct epabi_exec* ex, enum epabi_launch_error kind) {
    return ex->step != NULL ? (uint64_t)(uintptr_t)&ex->step->site | (uint64_t)kind : (uint64_t)kind;
}

int epabi_exec_epilogue(const struct epabi_exec* ex) {
    return ex->step != NULL ? ex->step->epilogue : EPABI_EPILOGUE_NONE;
}

void epabi_exec_epilogue_params(const struct epabi_exec* ex, float* alpha, float* beta) {
    *alpha = ex->step != NULL ? ex->step->epilogue_alpha : 0.0f;
    *beta = ex->step != NULL ? ex->step->epilogue_beta : 0.0f;
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

static bool staged_room(struct epabi_exec* ex) {
    if (ex->n_staged < ex->cap_staged) return true;
    int cap = ex->cap_staged == 0 ? 4 : 2 * ex->cap_staged;
    struct staged_output* grown = realloc(ex->staged, (size_t)cap * sizeof *grown);
    if (grown == NULL) return false;
    ex->staged = grown;
    ex->cap_staged = cap;
    return true;
}

/* Output id goes to host memory: it is computed in an owned run block, copied to `host` at run end. */
static OrtStatus* stage_output(struct epabi_exec* ex, int id, void* host, size_t bytes, struct epabi_tensor* t) {
    const struct epabi_plan* p = ex->plan;
    if (ex->stream != NULL && epabi_stream_in_capture(ex->stream))
        return staging_while_capturing(p, "output", p->values[id].name);
    if (!staged_room(ex)) return epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of memory staging an output");
    void* data = exec_alloc(ex, bytes);
    if (data == NULL)
        return epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of memory: %zu bytes staging output '%s' of '%s'",
                           bytes, p->values[id].name, p->name);
    ex->owned[id] = data;
    ex->staged[ex->n_staged++] = (struct staged_output){host, data, bytes};
    t->data = data;
    return NULL;
}

/* ---- graph capture: the host's buffers (graph_capture.h) ------------------------------------------------ */

static OrtStatus* capture_oom(const struct epabi_plan* p, const char* what, const char* name, size_t bytes) {
    return epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of memory: %zu bytes keeping %s '%s' of '%s' in the "
                       "graph being captured", bytes, what, name, p->name);
}

/* Host memory with graph capture on: which fused outputs the host allocated for this run (GetPreallocatedOutput
 * gives none of those, or, in later executions of one call, a buffer an earlier execution got unbound). */
static OrtStatus* classify_outputs(struct epabi_exec* ex) {
    const struct epabi_plan* p = ex->plan;
    const OrtApi* ort = p->api->ort;
    ex->out_host = calloc(p->n_outputs > 0 ? (size_t)p->n_outputs : 1, 1);
    if (ex->out_host == NULL) return epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": out of memory starting a run");
    ex->all_host = p->n_outputs > 0;
    for (int k = 0; k < p->n_outputs; ++k) {
        OrtValue* bound = NULL;
        EPABI_RETURN_IF_ERROR(ort->KernelContext_GetPreallocatedOutput(ex->ctx, (size_t)k, &bound));
        bool host = bound == NULL;
        if (!host && ex->capturing) {
            void* data = NULL;
            EPABI_RETURN_IF_ERROR(ort->GetTensorMutableData(bound, &data));
            host = epabi_graph_manager_was_host_output(ex->graphs, data);
        }
        ex->out_host[k] = host;
        if (!host) ex->all_host = false;
    }
    return NULL;
}

/* Fused output `index` at the host's `data`: in a capture window its block is held (device memory), or, when the
 * host allocated it (host memory), the graph computes it in a pool block copied to data at run end; in a regular
 * run a host-allocated buffer is remembered, so that later executions handing it back as pre-allocated are
 * known. */
static OrtStatus* capture_output(struct epabi_exec* ex, int id, int index, void* data, size_t bytes,
                                 struct epabi_tensor* t) {
    const struct epabi_plan* p = ex->plan;
    if (ex->classify && ex->out_host[index]) {
        if (!ex->capturing) {
            epabi_graph_manager_note_host_output(ex->graphs, data);
            return NULL;
        }
        void* block = epabi_graph_manager_keep_block(ex->graphs, bytes);
        if (block == NULL || !staged_room(ex) || !epabi_graph_manager_redirect(ex->graphs, data, block))
            return capture_oom(p, "output", p->values[id].name, bytes);
        /* not owned: the block stays the graph's when the run ends */
        ex->staged[ex->n_staged++] = (struct staged_output){data, block, bytes};
        t->data = block;
        return NULL;
    }
    if (ex->capturing) epabi_graph_manager_hold(ex->graphs, data, bytes);
    return NULL;
}

/* Fused input id in a capture window: read from the pool block an earlier fused node of this capture computes
 * the host's buffer in; in a plain run (every output the host's) from a copy in the pool, as the feed may be
 * gone at a replay; else from the caller's buffer, held when it is a block of ours. */
static OrtStatus* capture_input(struct epabi_exec* ex, int id, struct epabi_tensor* t) {
    const struct epabi_plan* p = ex->plan;
    size_t bytes = (size_t)epabi_numel(t->rank, t->dims) * epabi_dtype_size(t->dtype);
    void* block = epabi_graph_manager_redirected(ex->graphs, t->data);
    if (block == NULL && ex->classify && ex->all_host) {
        block = epabi_graph_manager_keep_block(ex->graphs, bytes);
        if (block == NULL) return capture_oom(p, "input", p->values[id].name, bytes);
        if (bytes > 0) memcpy(block, t->data, bytes);   /* host memory, once: a replay reads the graph's copy */
    }
    if (block == NULL) {
        epabi_graph_manager_hold(ex->graphs, t->data, bytes);
        return NULL;
    }
    if (t->host == t->data) t->host = block;
    t->data = block;
    return NULL;
}

/* The value id of the running step's output `index` when the step may ask for it with this dtype and shape (in
 * range, the declared dtype, a valid shape, not produced yet), its size in *bytes; else -1 and *status. */
static int checked_output(struct epabi_exec* ex, int index, ONNXTensorElementDataType dtype, int rank,
                          const int64_t* dims, size_t* bytes_out, OrtStatus** status) {
    const struct epabi_plan* p = ex->plan;
    const struct plan_step* s = ex->step;
    *status = NULL;
    if (s == NULL || index < 0 || index >= s->n_out) {
        *status = epabi_error(p->api, ORT_EP_FAIL, EPABI_EP_NAME ": node '%s' asked for output %d of %d",
                              s != NULL ? s->node_name : "?", index, s != NULL ? s->n_out : 0);
        return -1;
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
        return -1;
    }
    if (v->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED && v->dtype != dtype) {
        *status = epabi_error(p->api, ORT_EP_FAIL,
                              EPABI_EP_NAME ": node '%s' (%s) produced output '%s' as %s; the graph declares %s",
                              s->node_name, s->op_type, v->name, epabi_dtype_name(dtype), epabi_dtype_name(v->dtype));
        return -1;
    }
    if (ex->ready[id]) {
        *status = epabi_error(p->api, ORT_EP_FAIL, EPABI_EP_NAME ": node '%s' (%s) asked for output '%s' twice",
                              s->node_name, s->op_type, v->name);
        return -1;
    }
    *bytes_out = bytes;
    return id;
}

struct epabi_tensor* epabi_exec_output(struct epabi_exec* ex, int index, ONNXTensorElementDataType dtype, int rank,
                                       const int64_t* dims, OrtStatus** status) {
    const struct epabi_plan* p = ex->plan;
    size_t bytes = 0;
    const int id = checked_output(ex, index, dtype, rank, dims, &bytes, status);
    if (id < 0) return NULL;
    const struct plan_value* v = &p->values[id];
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
        if (st == NULL && ex->graphs != NULL && t->data == data && data != NULL)
            st = capture_output(ex, id, v->output_index, data, bytes, t);
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

/* A view owns nothing (owned stays NULL): the block is its source's root's, which the plan frees after every reader
 * of every value aliasing it (plan_passes.c, set_frees); in a capture window that block is already the graph's or
 * held, so the captured launches reading the view read the same address. */
struct epabi_tensor* epabi_exec_output_view(struct epabi_exec* ex, int index, const struct epabi_tensor* src, int rank,
                                            const int64_t* dims, bool* is_view, OrtStatus** status) {
    const struct epabi_plan* p = ex->plan;
    const struct plan_step* s = ex->step;
    *is_view = false;
    if (s == NULL || !s->view || index != 0 || src == NULL || src != ex->step_src)
        return epabi_exec_output(ex, index, src != NULL ? src->dtype : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED, rank,
                                 dims, status);
    size_t bytes = 0;
    const int id = checked_output(ex, index, src->dtype, rank, dims, &bytes, status);
    if (id < 0) return NULL;
    const size_t src_bytes = (size_t)epabi_numel(src->rank, src->dims) * epabi_dtype_size(src->dtype);
    if (bytes != src_bytes) {
        *status = epabi_error(p->api, ORT_EP_FAIL,
                              EPABI_EP_NAME ": node '%s' (%s) asked for output '%s' (%zu bytes) as a view of its "
                              "input of %zu bytes", s->node_name, s->op_type, p->values[id].name, bytes, src_bytes);
        return NULL;
    }
    struct epabi_tensor* t = &ex->tensors[id];
    t->dtype = src->dtype;
    t->rank = rank;
    for (int i = 0; i < rank; ++i) t->dims[i] = dims[i];
    t->data = src->data;
    t->host = src->host;
    ex->ready[id] = 1;
    *is_view = true;
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
    if (epabi_stream_in_capture(ex->stream)) {
        *status = epabi_error(p->api, ORT_FAIL, EPABI_EP_NAME ": node '%s' of '%s' needs the values of a shape input "
                              "that only the device holds, and reading them back would synchronize inside the graph "
                              "capture (the EP's own, or its owner's of user_compute_stream); make it a constant or "
                              "compute it from shapes", node, p->name);
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
    if (ex->stream != NULL && epabi_stream_in_capture(ex->stream)) return staging_while_capturing(p, "input", v->name);
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
        if (ex->capturing && t->data == data && data != NULL) EPABI_RETURN_IF_ERROR(capture_input(ex, id, t));
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
        ex->step_src = s->n_in > 0 ? in[0] : NULL;
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
    ex->step_src = NULL;
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
        ex.threads = env->threads;
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
        if (env != NULL && env->graphs != NULL) {
            ex.graphs = env->graphs;
            ex.capturing = epabi_graph_manager_is_capturing(env->graphs, NULL);
            ex.classify = !p->has_device &&
                          epabi_has(p->api, EPABI_SINCE_OrtApi_KernelContext_GetPreallocatedOutput);
            if (ex.classify) st = classify_outputs(&ex);
        }
        epabi_pool_run_begin(ex.threads);   /* workers wake while the inputs are bound, not at the first loop */
        if (st == NULL) st = bind_inputs(&ex);
        if (st == NULL) st = run_steps(&ex);
        epabi_pool_run_end(ex.threads);
        /* what launches found: at once without a stream, and on the host stream, which executes as it goes
         * (also while capturing); a device stream's word is read at its synchronize (stream.h) */
        if (st == NULL && ex.error_word != 0) st = epabi_launch_error_status(p->api, ex.error_word, false);
        if (ex.stream != NULL && ex.stream->ops->backend == EPABI_STREAM_HOST) {
            OrtStatus* found = epabi_stream_take_error(ex.stream);   /* taken in any case: it is this run's */
            if (st == NULL) st = found;
            else if (found != NULL) p->api->ort->ReleaseStatus(found);
        }
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
    free(ex.out_host);
    free(ex.staged);
    free(ex.scratch_host);
    free(ex.scratch);
    free(ex.owned);
    free(ex.ready);
    free(ex.tensors);
    return st;
}
