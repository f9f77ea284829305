/*
 * cuda_stream.c - see cuda_stream.h.
 */
#include "cuda_stream.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_kernels.h"
#include "ep_factory.h"

struct cuda_stream {
    struct epabi_stream base;               /* first member */
    const struct epabi_cuda_device* dev;
    const struct epabi_cuda_driver* cu;
    epabi_cu_stream cs;
    struct epabi_cuda_module* module;
    epabi_cublas_handle cublas;             /* NULL without cuBLAS */
    epabi_cublaslt_handle cublaslt;         /* NULL without cuBLASLt; shares the workspace (same stream) */
    epabi_cu_ptr workspace;                 /* cuBLAS workspace, owned */
    struct epabi_cudnn_stream* cudnn;       /* NULL without cuDNN (cudnn=0, not loaded, or set-up failed) */
    epabi_cu_mempool pool;                  /* the device's default pool, for alloc_async */
    epabi_cu_event order;                   /* for epabi_stream_cuda_wait_for */
    uint64_t* error_word;                   /* base.error_word: pinned host memory kernels write (cuMemAllocHost) */
    int graph_timing_runs;                  /* EPABI_CUDA_GRAPH_TIMING, read once at creation */
    bool pdl;                               /* programmatic dependent launch (launch env .pdl) */
    /* Nothing was queued on cs since its last completed synchronize, so the next one has nothing to wait for:
     * ONNX Runtime >= 1.27 calls OrtEp::Sync right after each ReplayGraph, which already synchronized. Cleared by
     * everything that queues work (launches, replays, captures, async copies and allocations, cross-stream waits);
     * never trusted for a user's stream, where its owner queues work too. */
    bool idle;
};

struct cuda_graph {
    struct epabi_stream_graph base;         /* first member */
    epabi_cu_graph graph;
    epabi_cu_graph_exec exec;
    size_t nodes;
    bool timed;                             /* EPABI_CUDA_GRAPH_TIMING done */
};

static struct cuda_stream* cs_of(struct epabi_stream* s) {
    return (struct cuda_stream*)s;
}

static OrtStatus* cuda_launch(struct epabi_stream* s, enum epabi_launch_kind kind, epabi_launch_fn fn,
                              const void* args, size_t args_size) {
    (void)fn;   /* the host function is the software adapter's; the kind selects the CUDA kernels */
    (void)args_size;
    struct cuda_stream* c = cs_of(s);
    c->idle = false;
    struct epabi_cuda_launch_env env = {.api = s->api, .libs = c->dev->libs, .module = c->module, .stream = c->cs,
                                        .cublas = c->cublas, .cublaslt = c->cublaslt,
                                        .workspace = (void*)(uintptr_t)c->workspace,
                                        .workspace_bytes = c->workspace != 0 ? EPABI_CUBLAS_WORKSPACE_BYTES : 0,
                                        .cudnn = c->cudnn, .pdl = c->pdl};
    return epabi_cuda_launch(&env, kind, args);
}

static OrtStatus* cuda_begin_capture(struct epabi_stream* s) {
    struct cuda_stream* c = cs_of(s);
    c->idle = false;
    struct epabi_cuda_scope scope;
    epabi_cuda_enter(c->dev, &scope);
    epabi_cu_result r = c->cu->StreamBeginCapture(c->cs, EPABI_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    epabi_cuda_leave(&scope);
    return r == 0 ? NULL : epabi_cuda_status(s->api, r, "cuStreamBeginCapture");
}

static OrtStatus* cuda_end_capture(struct epabi_stream* s, struct epabi_stream_graph** out) {
    struct cuda_stream* c = cs_of(s);
    struct epabi_cuda_scope scope;
    epabi_cuda_enter(c->dev, &scope);
    epabi_cu_graph graph = NULL;
    epabi_cu_graph_exec exec = NULL;
    OrtStatus* st = NULL;
    epabi_cu_result r = c->cu->StreamEndCapture(c->cs, &graph);
    if (r != 0 || graph == NULL) {
        st = epabi_cuda_status(s->api, r != 0 ? r : 1, "cuStreamEndCapture (the capture was invalidated)");
    } else if ((r = c->cu->GraphInstantiate(&exec, graph, 0)) != 0) {
        st = epabi_cuda_status(s->api, r, "cuGraphInstantiate");
    }
    struct cuda_graph* g = NULL;
    if (st == NULL) {
        g = calloc(1, sizeof *g);
        if (g == NULL) st = epabi_error(s->api, ORT_FAIL, EPABI_EP_NAME ": out of memory ending a graph capture");
    }
    if (st != NULL) {
        if (exec != NULL) c->cu->GraphExecDestroy(exec);
        if (graph != NULL) c->cu->GraphDestroy(graph);
        epabi_cuda_leave(&scope);
        return st;
    }
    g->base.ops = s->ops;
    g->base.stream = s;
    g->graph = graph;
    g->exec = exec;
    if (c->cu->GraphGetNodes == NULL || c->cu->GraphGetNodes(graph, NULL, &g->nodes) != 0) g->nodes = 0;
    epabi_cuda_leave(&scope);
    *out = &g->base;
    return NULL;
}

static void cuda_abort_capture(struct epabi_stream* s) {
    struct cuda_stream* c = cs_of(s);
    struct epabi_cuda_scope scope;
    epabi_cuda_enter(c->dev, &scope);
    epabi_cu_graph graph = NULL;
    if (c->cu->StreamEndCapture(c->cs, &graph) == 0 && graph != NULL) c->cu->GraphDestroy(graph);
    epabi_cuda_leave(&scope);
}

/* Diagnostics (EPABI_CUDA_GRAPH_TIMING=N): the first replay of each graph also times N more launches, each
 * followed by a stream synchronization, and prints the mean to stderr: the graph's own cost without any host
 * overhead, comparable with bench/cuda_floor. */
static void time_graph(struct cuda_stream* c, struct cuda_graph* cg) {
    const int n = c->graph_timing_runs;
    if (n <= 0 || cg->timed) return;
    cg->timed = true;
    c->cu->StreamSynchronize(c->cs);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; ++i) {
        c->cu->GraphLaunch(cg->exec, c->cs);
        c->cu->StreamSynchronize(c->cs);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) / n;
    fprintf(stderr, "epabi: CUDA graph of %zu nodes: %.1f us per launch + synchronize (mean of %d)\n", cg->nodes, us, n);
}

static OrtStatus* cuda_replay(struct epabi_stream* s, const struct epabi_stream_graph* g) {
    struct cuda_stream* c = cs_of(s);
    const struct cuda_graph* cg = (const struct cuda_graph*)g;
    struct epabi_cuda_scope scope;
    c->idle = false;
    epabi_cuda_enter(c->dev, &scope);
    if (c->graph_timing_runs > 0) time_graph(c, (struct cuda_graph*)(uintptr_t)cg);
    epabi_cu_result r = c->cu->GraphLaunch(cg->exec, c->cs);
    epabi_cuda_leave(&scope);
    if (r != 0) return epabi_cuda_status(s->api, r, "cuGraphLaunch");
    s->launches += cg->nodes;
    return NULL;
}

static OrtStatus* cuda_synchronize(struct epabi_stream* s) {
    struct cuda_stream* c = cs_of(s);
    if (c->idle && !s->user_owned) return NULL;   /* the last synchronize already waited for everything queued */
    struct epabi_cuda_scope scope;
    epabi_cuda_enter(c->dev, &scope);
    epabi_cu_result r = c->cu->StreamSynchronize(c->cs);
    epabi_cuda_leave(&scope);
    c->idle = r == 0;
    return r == 0 ? NULL : epabi_cuda_status(s->api, r, "cuStreamSynchronize");
}

static size_t cuda_graph_launches(const struct epabi_stream_graph* g) {
    return ((const struct cuda_graph*)g)->nodes;
}

static void cuda_graph_destroy(struct epabi_stream_graph* g) {
    struct cuda_graph* cg = (struct cuda_graph*)g;
    struct cuda_stream* c = (struct cuda_stream*)(uintptr_t)g->stream;
    struct epabi_cuda_scope scope;
    epabi_cuda_enter(c->dev, &scope);
    /* a replay may still be running: the memory its capture pool returns to the arena must be idle */
    c->cu->StreamSynchronize(c->cs);
    c->cu->GraphExecDestroy(cg->exec);
    c->cu->GraphDestroy(cg->graph);
    epabi_cuda_leave(&scope);
    free(cg);
}

static void cuda_destroy(struct epabi_stream* s) {
    struct cuda_stream* c = cs_of(s);
    struct epabi_cuda_scope scope;
    epabi_cuda_enter(c->dev, &scope);
    if (c->cs != NULL) c->cu->StreamSynchronize(c->cs);
    if (c->cublas != NULL) c->dev->libs->cublas->Destroy(c->cublas);
    if (c->cublaslt != NULL) c->dev->libs->cublaslt->Destroy(c->cublaslt);
    epabi_cudnn_stream_destroy(c->cudnn);   /* before the stream it is bound to */
    if (c->order != NULL) c->cu->EventDestroy(c->order);
    if (c->workspace != 0) c->cu->MemFree(c->workspace);
    if (c->error_word != NULL) c->cu->MemFreeHost(c->error_word);
    if (c->cs != NULL && !s->user_owned) c->cu->StreamDestroy(c->cs);   /* a user's stream is never destroyed */
    epabi_cuda_leave(&scope);
    free(c);
}

static void* cuda_alloc_async(struct epabi_stream* s, size_t bytes) {
    struct cuda_stream* c = cs_of(s);
    epabi_cu_ptr p = 0;
    c->idle = false;
    epabi_cu_result r = c->cu->MemAllocFromPoolAsync(&p, bytes > 0 ? bytes : 1, c->pool, c->cs);
    return r == 0 ? (void*)(uintptr_t)p : NULL;
}

static void cuda_free_async(struct epabi_stream* s, void* p) {
    struct cuda_stream* c = cs_of(s);
    c->idle = false;
    c->cu->MemFreeAsync((epabi_cu_ptr)(uintptr_t)p, c->cs);
}

static OrtStatus* cuda_read_to_host(struct epabi_stream* s, void* dst, const void* src, size_t bytes) {
    struct cuda_stream* c = cs_of(s);
    epabi_cu_result r = c->cu->StreamSynchronize(c->cs);
    if (r == 0 && bytes > 0) r = c->cu->MemcpyDtoH(dst, (epabi_cu_ptr)(uintptr_t)src, bytes);
    return r == 0 ? NULL : epabi_cuda_status(s->api, r, "reading a shape input back from the GPU");
}

static OrtStatus* cuda_write_from_host(struct epabi_stream* s, void* dst, const void* src, size_t bytes) {
    struct cuda_stream* c = cs_of(s);
    c->idle = false;
    epabi_cu_result r = bytes > 0 ? c->cu->MemcpyHtoDAsync((epabi_cu_ptr)(uintptr_t)dst, src, bytes, c->cs) : 0;
    return r == 0 ? NULL : epabi_cuda_status(s->api, r, "copying a host-resident input to the GPU");
}

/* Runs only for a user's stream (stream.h): the owner may be capturing it. Without cuStreamIsCapturing: never. */
static bool cuda_captured_now(struct epabi_stream* s) {
    struct cuda_stream* c = cs_of(s);
    int status = EPABI_CU_STREAM_CAPTURE_STATUS_NONE;
    struct epabi_cuda_scope scope;
    if (c->cu->StreamIsCapturing == NULL || !epabi_cuda_enter(c->dev, &scope)) return false;
    epabi_cu_result r = c->cu->StreamIsCapturing(c->cs, &status);
    epabi_cuda_leave(&scope);
    return r == 0 && status != EPABI_CU_STREAM_CAPTURE_STATUS_NONE;
}

static const struct epabi_stream_ops kCudaOps = {
    .backend = EPABI_STREAM_CUDA,
    .name = "cuda",
    .launch = cuda_launch,
    .begin_capture = cuda_begin_capture,
    .end_capture = cuda_end_capture,
    .abort_capture = cuda_abort_capture,
    .replay = cuda_replay,
    .synchronize = cuda_synchronize,
    .graph_launches = cuda_graph_launches,
    .graph_destroy = cuda_graph_destroy,
    .destroy = cuda_destroy,
    .alloc_async = cuda_alloc_async,
    .free_async = cuda_free_async,
    .read_to_host = cuda_read_to_host,
    .write_from_host = cuda_write_from_host,
    .captured_now = cuda_captured_now,
};

OrtStatus* epabi_stream_cuda_wait_for(struct epabi_stream* s, epabi_cu_stream producer) {
    if (s == NULL || s->ops != &kCudaOps || producer == NULL || epabi_stream_in_capture(s)) return NULL;
    struct cuda_stream* c = cs_of(s);
    if (producer == c->cs) return NULL;
    c->idle = false;
    struct epabi_cuda_scope scope;
    epabi_cuda_enter(c->dev, &scope);
    epabi_cu_result r = c->cu->EventRecord(c->order, producer);
    if (r == 0) r = c->cu->StreamWaitEvent(c->cs, c->order, 0);
    epabi_cuda_leave(&scope);
    return r == 0 ? NULL : epabi_cuda_status(s->api, r, "ordering the EP's stream after the host's stream");
}

struct epabi_stream* epabi_stream_cuda_create(const struct epabi_api* api, const struct epabi_cuda_device* device,
                                              bool adopt_user, uintptr_t user_handle,
                                              const struct epabi_cuda_stream_extras* extras, OrtStatus** status) {
    *status = NULL;
    const struct epabi_cuda_libs* libs = device->libs;
    struct cuda_stream* c = calloc(1, sizeof *c);
    if (c == NULL) {
        *status = epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory creating a CUDA stream");
        return NULL;
    }
    c->base.ops = &kCudaOps;
    c->base.api = api;
    c->base.user_owned = adopt_user;
    c->dev = device;
    c->cu = libs->cu;
    const char* timing = getenv("EPABI_CUDA_GRAPH_TIMING");
    c->graph_timing_runs = timing != NULL ? atoi(timing) : 0;
    /* Hopper and newer with cuLaunchKernelEx; EPABI_CUDA_PDL=0 turns it off (to compare, or to rule it out) */
    const char* pdl = getenv("EPABI_CUDA_PDL");
    c->pdl = device->cc_major >= 9 && c->cu->LaunchKernelEx != NULL && (pdl == NULL || strcmp(pdl, "0") != 0);
    struct epabi_cuda_scope scope;
    if (!epabi_cuda_enter(device, &scope)) {
        free(c);
        *status = epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": cannot make GPU %d current", device->ordinal);
        return NULL;
    }
    /* a thread's first run may come while the caller captures its own stream (user_compute_stream): the setup's
     * allocations and module load are not stream work, so this thread relaxes the capture rules for them */
    struct epabi_cuda_relaxed relaxed;
    epabi_cuda_relax(c->cu, &relaxed);
    OrtStatus* st = epabi_cuda_module_get(api, device, &c->module);
    epabi_cu_result r = 0;
    if (st == NULL) {
        if (adopt_user) {
            c->cs = (epabi_cu_stream)user_handle;
        } else if ((r = c->cu->StreamCreate(&c->cs, EPABI_CU_STREAM_NON_BLOCKING)) != 0) {
            c->cs = NULL;
            st = epabi_cuda_status(api, r, "cuStreamCreate");
        }
    }
    c->base.handle = (uintptr_t)c->cs;
    /* page-locked and, with unified addressing (every 64-bit GPU), mapped at the same address for the device:
     * kernels store an error there and the host reads it after a synchronize with one load (stream.h) */
    void* word = NULL;
    if (st == NULL && (r = c->cu->MemAllocHost(&word, sizeof(uint64_t))) != 0) {
        word = NULL;
        st = epabi_cuda_status(api, r, "cuMemAllocHost (the stream's error word)");
    }
    c->error_word = word;
    if (c->error_word != NULL) *c->error_word = 0;
    c->base.error_word = c->error_word;
    if (st == NULL && (r = c->cu->EventCreate(&c->order, EPABI_CU_EVENT_DISABLE_TIMING)) != 0) {
        c->order = NULL;
        st = epabi_cuda_status(api, r, "cuEventCreate");
    }
    if (st == NULL && device->mempools && (r = c->cu->DeviceGetDefaultMemPool(&c->pool, device->device)) == 0) {
        /* keep freed memory in the pool instead of giving it back at every synchronization */
        uint64_t keep = UINT64_MAX;
        c->cu->MemPoolSetAttribute(c->pool, EPABI_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
    }
    if (st == NULL && libs->cublas != NULL) {
        const struct epabi_cublas* cb = libs->cublas;
        if (cb->Create(&c->cublas) != 0) {
            c->cublas = NULL;   /* MatMul/Gemm fall back to our own kernel */
        } else if (c->cu->MemAlloc(&c->workspace, EPABI_CUBLAS_WORKSPACE_BYTES) != 0 ||
                   cb->SetStream(c->cublas, c->cs) != 0 ||
                   cb->SetWorkspace(c->cublas, (void*)(uintptr_t)c->workspace, EPABI_CUBLAS_WORKSPACE_BYTES) != 0) {
            st = epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": cannot set up cuBLAS on GPU %d's stream",
                             device->ordinal);
        }
    }
    /* cuBLASLt only with the workspace cuBLAS set up: a matmul inside a capture must not allocate one */
    if (st == NULL && libs->cublaslt != NULL && c->workspace != 0 && libs->cublaslt->Create(&c->cublaslt) != 0)
        c->cublaslt = NULL;   /* large linear steps use cuBLAS and an epilogue kernel */
    /* cuDNN's set-up is not stream work a caller's capture of its own stream may see (cudnnCreate's allocations and
     * launches are unknown to us); cuda_cudnn.c needs cuStreamIsCapturing to keep first runs out of captures */
    int capturing = EPABI_CU_STREAM_CAPTURE_STATUS_NONE;
    if (st == NULL && extras != NULL && extras->cudnn != NULL && c->cu->StreamIsCapturing != NULL &&
        (c->cu->StreamIsCapturing(c->cs, &capturing) != 0 || capturing != EPABI_CU_STREAM_CAPTURE_STATUS_NONE)) {
        EPABI_LOG(api, extras->logger, ORT_LOGGING_LEVEL_INFO,
                  EPABI_EP_NAME ": the caller captures its stream while this thread's first run sets it up: Conv "
                  "uses epabi's kernels on it, not cuDNN");
    } else if (st == NULL && extras != NULL && extras->cudnn != NULL && c->cu->StreamIsCapturing != NULL) {
        char why[320];
        c->cudnn = epabi_cudnn_stream_create(extras->cudnn, c->cu, c->cs, api, extras->logger, why, sizeof why);
        if (c->cudnn == NULL)   /* Conv runs our own kernels on this stream */
            EPABI_LOG(api, extras->logger, ORT_LOGGING_LEVEL_WARNING,
                      EPABI_EP_NAME ": cuDNN cannot run on GPU %d's stream (%s); Conv uses epabi's kernels there",
                      device->ordinal, why);
    }
    epabi_cuda_unrelax(c->cu, &relaxed);
    epabi_cuda_leave(&scope);
    if (st != NULL) {
        cuda_destroy(&c->base);
        *status = st;
        return NULL;
    }
    return &c->base;
}
