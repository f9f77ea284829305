/*
 * cuda_backend.c - CUDA as a backend (backend.h): GPU EP devices run their plans on NVRTC-compiled kernels and
 * cuBLAS, on one non-blocking stream per thread (cuda_stream.h), in memory from a device arena; the factory is
 * stream aware (cuda_sync_stream.h).
 *
 * Everything is loaded at run time (cuda_libs.h; cuDNN, cuda_cudnn.h, at the first EP with option cudnn=1). Without the driver or NVRTC a GPU EP device still works and
 * claims nothing (one WARNING says why); a device_id the driver does not know is an error.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "cuda_cudnn.h"
#include "cuda_device.h"
#include "cuda_libs.h"
#include "cuda_memory.h"
#include "cuda_stream.h"
#include "cuda_sync_stream.h"
#include "ep_factory.h"

static bool available(const char** why) {
    const struct epabi_cuda_libs* libs = epabi_cuda_libs();
    if (why != NULL) *why = libs->why;
    return epabi_cuda_usable(libs);
}

static int hardware_count(void) {
    char why[256];
    const struct epabi_cuda_driver* cu = epabi_cuda_driver(why, sizeof why);
    int count = 0;
    if (cu == NULL || cu->DeviceGetCount(&count) != 0) return 0;
    return count > 0 ? count : 0;
}

static bool hardware_describe(int index, struct epabi_backend_hardware* out) {
    char why[256];
    const struct epabi_cuda_driver* cu = epabi_cuda_driver(why, sizeof why);
    epabi_cu_device dev = 0;
    if (cu == NULL || cu->DeviceGet(&dev, index) != 0) return false;
    if (cu->DeviceGetPCIBusId(out->pci_bus_id, (int)sizeof out->pci_bus_id, dev) != 0) out->pci_bus_id[0] = '\0';
    if (cu->DeviceGetName(out->name, (int)sizeof out->name, dev) != 0) snprintf(out->name, sizeof out->name, "NVIDIA GPU");
    return true;
}

/* The descriptor says what the CUDA kernels cover; a kernel without CUDA support is never claimed on the GPU
 * (claiming it would fail in Compute). */
static bool claims(const struct epabi_kernel* kernel, const struct epabi_node* node, char* why, size_t why_len) {
    if (kernel->cuda == NULL) {
        snprintf(why, why_len, "the op has no CUDA kernel");
        return false;
    }
    return kernel->cuda(node, why, why_len);
}

static void* plan_upload(void* ctx, const void* host, size_t bytes) {
    return epabi_cuda_upload(ctx, host, bytes);
}

static void plan_release(void* ctx, void* device_ptr) {
    epabi_cuda_device_free(ctx, device_ptr);
}

static void ep_close(struct epabi_backend_ep* ep) {
    epabi_arena_release(ep->arena);   /* after the graphs: their capture pools hold arena blocks */
    ep->arena = NULL;
    ep->device = NULL;
}

static OrtStatus* ep_open(const struct epabi_api* api, const struct epabi_backend_ep_config* config,
                          struct epabi_backend_ep* out) {
    memset(out, 0, sizeof *out);
    out->backend = epabi_backend_cuda();
    out->arena = config->host_arena;   /* until a device is set up: an EP that claims nothing computes nowhere */
    epabi_arena_retain(out->arena);
    const struct epabi_cuda_libs* libs = epabi_cuda_libs();
    int ordinal = config->ordinal;
    if (!epabi_cuda_usable(libs)) {
        if (config->ordinal_given && libs->cu == NULL) {
            ep_close(out);
            return epabi_error(api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": device_id=%d: no CUDA driver (%s)",
                               ordinal, libs->why);
        }
        EPABI_LOG(api, config->logger, ORT_LOGGING_LEVEL_WARNING,
                  EPABI_EP_NAME ": the CUDA backend is not available: %s; the GPU device claims no node", libs->why);
        return NULL;
    }
    if (!config->ordinal_given && ordinal >= epabi_cuda_device_count()) {
        /* a GPU the host listed that the driver does not see (a stale or injected hardware device) */
        EPABI_LOG(api, config->logger, ORT_LOGGING_LEVEL_WARNING,
                  EPABI_EP_NAME ": the CUDA driver sees %d GPU(s), none with ordinal %d for this EP device; it claims "
                  "no node (set device_id to pick a GPU)", epabi_cuda_device_count(), ordinal);
        return NULL;
    }
    const struct epabi_cuda_device* dev = NULL;
    OrtStatus* st = epabi_cuda_device_get(api, ordinal, &dev);
    if (st == NULL && config->use_mempool && !dev->mempools)
        st = epabi_error(api, ORT_INVALID_ARGUMENT,
                         EPABI_EP_NAME ": arena.use_cuda_mempool=1: GPU %d does not support stream-ordered memory "
                         "pools", ordinal);
    struct epabi_arena* device_arena = NULL;
    if (st == NULL) {
        struct epabi_arena_backing backing = epabi_cuda_arena_backing(dev);
        device_arena = epabi_arena_create_backed(&backing);
        if (device_arena == NULL) st = epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory creating the device arena");
    }
    if (st != NULL) {
        ep_close(out);
        return st;
    }
    epabi_arena_release(out->arena);
    out->arena = device_arena;
    out->device = dev;
    out->plan = (struct epabi_plan_device){config->memory, false, plan_upload, plan_release, NULL, (void*)dev};
    out->thread_streams = true;
    out->mempool = config->use_mempool;
    out->logger = config->logger;
    /* loaded at the first EP that wants it (the first session, not the device listing): it is large */
    const char* cudnn_why = "cudnn=0";
    const struct epabi_cudnn* cudnn = config->cudnn ? epabi_cudnn_load(&cudnn_why) : NULL;
    out->cudnn = cudnn;
    char cudnn_text[700];
    if (cudnn != NULL)
        snprintf(cudnn_text, sizeof cudnn_text, "%zu.%zu.%zu (CUDA %zu) from %s", cudnn->version / 10000,
                 cudnn->version / 100 % 100, cudnn->version % 100, cudnn->cudart_version, cudnn->path);
    else
        snprintf(cudnn_text, sizeof cudnn_text, "not loaded: %s; Conv uses epabi's kernels", cudnn_why);
    EPABI_LOG(api, config->logger, ORT_LOGGING_LEVEL_INFO,
              EPABI_EP_NAME ": CUDA backend on GPU %d (%s, sm_%d%d, PCI %s; driver %d, NVRTC %d.%d from %s, cuBLAS %s, "
              "cuBLASLt %s, cuDNN %s)%s", ordinal, dev->name, dev->cc_major, dev->cc_minor, dev->pci_bus_id,
              libs->cu->version, libs->nvrtc->major, libs->nvrtc->minor, libs->nvrtc_path,
              libs->cublas != NULL ? libs->cublas_path : "not found",
              libs->cublaslt != NULL ? libs->cublaslt_path : "not loaded", cudnn_text,
              config->use_mempool ? "; run memory from the CUDA memory pool" : "");
    return NULL;
}

static struct epabi_stream* thread_stream(const struct epabi_api* api, const struct epabi_backend_ep* ep,
                                          bool adopt_user, uintptr_t user_stream, OrtStatus** status) {
    const struct epabi_cuda_stream_extras extras = {ep->cudnn, ep->logger};
    return epabi_stream_cuda_create(api, ep->device, adopt_user, user_stream, &extras, status);
}

static bool free_bytes(const struct epabi_backend_ep* ep, size_t* free_bytes) {
    const struct epabi_cuda_device* d = ep->device;
    struct epabi_cuda_scope scope;
    size_t total = 0;
    if (d == NULL || !epabi_cuda_enter(d, &scope)) return false;
    bool ok = d->libs->cu->MemGetInfo(free_bytes, &total) == 0;
    epabi_cuda_leave(&scope);
    return ok;
}

/* Every CUDA call of the run targets the EP's GPU, whatever the calling thread had current. Inputs the host
 * copied on its own stream (stream-aware hosts) are complete before our stream reads them. */
static OrtStatus* compute_begin(const struct epabi_api* api, const struct epabi_backend_ep* ep,
                                OrtKernelContext* context, struct epabi_stream* stream,
                                struct epabi_compute_scope* scope) {
    const struct epabi_cuda_device* d = ep->device;
    struct epabi_cuda_scope cuda;
    if (!epabi_cuda_enter(d, &cuda))
        return epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": cannot make GPU %d current", d->ordinal);
    *scope = (struct epabi_compute_scope){d, cuda.pushed};
    if (stream == NULL) return NULL;
    /* a user's stream its owner captures around the run (graph capture off): our kernels are recorded into the
     * owner's graph, so nothing below waits or reads back (stream.h); one driver query, user streams only */
    epabi_stream_check_external_capture(stream);
    if (epabi_stream_in_capture(stream)) return NULL;
    void* host_stream = NULL;
    OrtStatus* q = api->ort->KernelContext_GetGPUComputeStream(context, &host_stream);
    if (q != NULL) {
        api->ort->ReleaseStatus(q);
        return NULL;
    }
    return epabi_stream_cuda_wait_for(stream, (epabi_cu_stream)host_stream);
}

/* Outside a capture window the outputs must be complete when Compute returns (the host copies them with its own
 * synchronous data transfer); then no queued work uses the arena's blocks any more. Inside one (ours, or the
 * user's stream captured by its owner) the work is only recorded: nothing to wait for. */
static OrtStatus* compute_end(const struct epabi_api* api, const struct epabi_backend_ep* ep,
                              struct epabi_stream* stream, struct epabi_compute_scope* scope, OrtStatus* st) {
    if (stream != NULL && !epabi_stream_in_capture(stream)) {
        OrtStatus* sync = epabi_stream_synchronize(stream);
        if (st == NULL) st = sync;
        else if (sync != NULL) api->ort->ReleaseStatus(sync);
        epabi_arena_stream_synced(ep->arena, stream);
    }
    struct epabi_cuda_scope cuda = {scope->device, scope->entered};
    epabi_cuda_leave(&cuda);
    return st;
}

static OrtStatus* allocator_open(const struct epabi_api* api, const OrtLogger* logger,
                                 const struct epabi_memory_record* memory, struct epabi_arena* host_arena,
                                 const struct epabi_alloc_ops** ops, void** ctx) {
    (void)host_arena;
    return epabi_cuda_allocator_open(api, logger, memory, ops, ctx);
}

static bool can_copy(void) {
    return epabi_cuda_libs()->cu != NULL;
}

static OrtStatus* sync_stream(const struct epabi_api* api, int ordinal, OrtSyncStreamImpl** out) {
    const struct epabi_cuda_device* dev = NULL;
    if (ordinal >= 0 && epabi_cuda_usable(epabi_cuda_libs()))
        EPABI_RETURN_IF_ERROR(epabi_cuda_device_get(api, ordinal, &dev));
    return epabi_sync_stream_create(api, dev, out);
}

static const struct epabi_backend kCuda = {
    .name = "cuda",
    .fused_gemm_default = true,
    .available = available,
    .hardware_count = hardware_count,
    .hardware_describe = hardware_describe,
    .claims = claims,
    .ep_open = ep_open,
    .ep_close = ep_close,
    .thread_stream = thread_stream,
    .free_bytes = free_bytes,
    .compute_begin = compute_begin,
    .compute_end = compute_end,
    .allocator_open = allocator_open,
    .copy = epabi_cuda_copy,
    .can_copy = can_copy,
    .sync_stream = sync_stream,
};

const struct epabi_backend* epabi_backend_cuda(void) {
    return &kCuda;
}
