#include "gpu_allocator.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda_device.h"
#include "ep_factory.h"

static const uint64_t kMagic = 0x4550414249475055ull;   /* "EPABIGPU" */

struct gpu_allocator {
    OrtAllocator base;                 /* first member: the host's OrtAllocator* is a struct gpu_allocator* */
    uint64_t magic;
    const struct epabi_api* api;
    const OrtLogger* logger;
    const OrtMemoryInfo* info;
    int ordinal;
    bool pinned;                       /* page-locked host memory (cuMemAllocHost) instead of device memory */
    pthread_mutex_t lock;              /* guards the fields below */
    const struct epabi_cuda_device* dev;   /* looked up at first use (cuda_device.h), NULL when unavailable */
    bool tried;                        /* the lookup already ran (and may have failed) */
};

/* The device at first use; NULL (and one WARNING) when the driver or the device is missing. */
static const struct epabi_cuda_device* ensure_device(struct gpu_allocator* a) {
    pthread_mutex_lock(&a->lock);
    if (!a->tried) {
        a->tried = true;
        OrtStatus* st = epabi_cuda_device_get(a->api, a->ordinal, &a->dev);
        if (st != NULL) {
            EPABI_LOG(a->api, a->logger, ORT_LOGGING_LEVEL_WARNING,
                      EPABI_EP_NAME ": GPU %d memory cannot be allocated: %s", a->ordinal,
                      a->api->ort->GetErrorMessage(st));
            a->api->ort->ReleaseStatus(st);
            a->dev = NULL;
        }
    }
    const struct epabi_cuda_device* d = a->dev;
    pthread_mutex_unlock(&a->lock);
    return d;
}

static void* AllocImpl(OrtAllocator* this_, size_t size) {
    struct gpu_allocator* a = (struct gpu_allocator*)this_;
    const struct epabi_cuda_device* d = size > 0 ? ensure_device(a) : NULL;
    if (d == NULL) return NULL;
    struct epabi_cuda_scope scope;
    if (!epabi_cuda_enter(d, &scope)) return NULL;
    epabi_cu_ptr p = 0;
    void* host = NULL;
    epabi_cu_result r = a->pinned ? d->libs->cu->MemAllocHost(&host, size) : d->libs->cu->MemAlloc(&p, size);
    epabi_cuda_leave(&scope);
    if (a->pinned) return r == 0 ? host : NULL;
    return r == 0 ? (void*)(uintptr_t)p : NULL;
}

static void FreeImpl(OrtAllocator* this_, void* p) {
    struct gpu_allocator* a = (struct gpu_allocator*)this_;
    const struct epabi_cuda_device* d = p != NULL ? ensure_device(a) : NULL;
    struct epabi_cuda_scope scope;
    if (d == NULL || !epabi_cuda_enter(d, &scope)) return;
    if (a->pinned) d->libs->cu->MemFreeHost(p);
    else d->libs->cu->MemFree((epabi_cu_ptr)(uintptr_t)p);
    epabi_cuda_leave(&scope);
}

static const OrtMemoryInfo* InfoImpl(const OrtAllocator* this_) {
    return ((const struct gpu_allocator*)this_)->info;
}

static void* ReserveImpl(OrtAllocator* this_, size_t size) {
    return AllocImpl(this_, size);   /* no arena yet: a reservation is a plain allocation */
}

OrtStatus* epabi_gpu_allocator_create(const struct epabi_api* api, const OrtLogger* logger, const OrtMemoryInfo* info,
                                      int ordinal, bool pinned, OrtAllocator** out) {
    *out = NULL;
    struct gpu_allocator* a = calloc(1, sizeof *a);
    if (a == NULL) return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory creating a GPU allocator");
    if (pthread_mutex_init(&a->lock, NULL) != 0) {
        free(a);
        return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": cannot create a mutex for a GPU allocator");
    }
    a->magic = kMagic;
    a->api = api;
    a->logger = logger;
    a->info = info;
    a->ordinal = ordinal;
    a->pinned = pinned;
    /* version 1 members plus Reserve (API 18); the optional later members stay NULL */
    a->base.version = 18;
    a->base.Alloc = AllocImpl;
    a->base.Free = FreeImpl;
    a->base.Info = InfoImpl;
    a->base.Reserve = ReserveImpl;
    *out = &a->base;
    return NULL;
}

bool epabi_gpu_allocator_is_ours(const OrtAllocator* allocator) {
    return allocator != NULL && ((const struct gpu_allocator*)allocator)->magic == kMagic;
}

void epabi_gpu_allocator_destroy(OrtAllocator* allocator) {
    if (!epabi_gpu_allocator_is_ours(allocator)) return;
    struct gpu_allocator* a = (struct gpu_allocator*)allocator;
    a->magic = 0;
    pthread_mutex_destroy(&a->lock);
    free(a);
}
