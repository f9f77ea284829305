/*
 * cuda_memory.c - see cuda_memory.h.
 */
#include "cuda_memory.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda_device.h"
#include "ep_factory.h"

struct gpu_memory {
    const struct epabi_api* api;
    const OrtLogger* logger;
    int ordinal;
    bool pinned;                       /* page-locked host memory (cuMemAllocHost) instead of device memory */
    pthread_mutex_t lock;              /* guards the fields below */
    const struct epabi_cuda_device* dev;   /* looked up at first use (cuda_device.h), NULL when unavailable */
    bool tried;                        /* the lookup already ran (and may have failed) */
};

/* The device at first use; NULL (and one WARNING) when the driver or the device is missing. */
static const struct epabi_cuda_device* ensure_device(struct gpu_memory* m) {
    pthread_mutex_lock(&m->lock);
    if (!m->tried) {
        m->tried = true;
        OrtStatus* st = epabi_cuda_device_get(m->api, m->ordinal, &m->dev);
        if (st != NULL) {
            EPABI_LOG(m->api, m->logger, ORT_LOGGING_LEVEL_WARNING,
                      EPABI_EP_NAME ": GPU %d memory cannot be allocated: %s", m->ordinal,
                      m->api->ort->GetErrorMessage(st));
            m->api->ort->ReleaseStatus(st);
            m->dev = NULL;
        }
    }
    const struct epabi_cuda_device* d = m->dev;
    pthread_mutex_unlock(&m->lock);
    return d;
}

static void* gpu_alloc(void* ctx, size_t size) {
    struct gpu_memory* m = ctx;
    const struct epabi_cuda_device* d = size > 0 ? ensure_device(m) : NULL;
    if (d == NULL) return NULL;
    struct epabi_cuda_scope scope;
    if (!epabi_cuda_enter(d, &scope)) return NULL;
    epabi_cu_ptr p = 0;
    void* host = NULL;
    struct epabi_cuda_relaxed relaxed;   /* the host may allocate inside our capture window (cuda_device.h) */
    epabi_cuda_relax(d->libs->cu, &relaxed);
    epabi_cu_result r = m->pinned ? d->libs->cu->MemAllocHost(&host, size) : d->libs->cu->MemAlloc(&p, size);
    epabi_cuda_unrelax(d->libs->cu, &relaxed);
    epabi_cuda_leave(&scope);
    if (m->pinned) return r == 0 ? host : NULL;
    return r == 0 ? (void*)(uintptr_t)p : NULL;
}

static void gpu_free(void* ctx, void* p) {
    struct gpu_memory* m = ctx;
    const struct epabi_cuda_device* d = ensure_device(m);
    struct epabi_cuda_scope scope;
    if (d == NULL || !epabi_cuda_enter(d, &scope)) return;
    struct epabi_cuda_relaxed relaxed;
    epabi_cuda_relax(d->libs->cu, &relaxed);
    if (m->pinned) d->libs->cu->MemFreeHost(p);
    else d->libs->cu->MemFree((epabi_cu_ptr)(uintptr_t)p);
    epabi_cuda_unrelax(d->libs->cu, &relaxed);
    epabi_cuda_leave(&scope);
}

static void gpu_close(void* ctx) {
    struct gpu_memory* m = ctx;
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* plain allocations, no arena yet: no statistics, nothing to shrink */
static const struct epabi_alloc_ops kGpuOps = {gpu_alloc, gpu_free, NULL, NULL, gpu_close};

OrtStatus* epabi_cuda_allocator_open(const struct epabi_api* api, const OrtLogger* logger,
                                     const struct epabi_memory_record* memory, const struct epabi_alloc_ops** ops,
                                     void** ctx) {
    struct gpu_memory* m = calloc(1, sizeof *m);
    if (m == NULL) return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory creating a GPU allocator");
    if (pthread_mutex_init(&m->lock, NULL) != 0) {
        free(m);
        return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": cannot create a mutex for a GPU allocator");
    }
    m->api = api;
    m->logger = logger;
    m->ordinal = memory->ordinal;
    m->pinned = memory->kind == EPABI_MEMORY_GPU_PINNED;
    *ops = &kGpuOps;
    *ctx = m;
    return NULL;
}

OrtStatus* epabi_cuda_copy(const struct epabi_api* api, int ordinal, void* dst, const void* src, size_t bytes,
                           void* stream) {
    const struct epabi_cuda_device* d = NULL;
    EPABI_RETURN_IF_ERROR(epabi_cuda_device_get(api, ordinal, &d));
    struct epabi_cuda_scope scope;
    if (!epabi_cuda_enter(d, &scope))
        return epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": CopyTensors cannot make GPU %d current", ordinal);
    epabi_cu_result r =
        stream != NULL
            ? d->libs->cu->MemcpyAsync((epabi_cu_ptr)(uintptr_t)dst, (epabi_cu_ptr)(uintptr_t)src, bytes, stream)
            : d->libs->cu->Memcpy((epabi_cu_ptr)(uintptr_t)dst, (epabi_cu_ptr)(uintptr_t)src, bytes);
    epabi_cuda_leave(&scope);
    return r == 0 ? NULL : epabi_cuda_status(api, r, "CopyTensors (cuMemcpy)");
}
