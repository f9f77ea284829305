#include "gpu_allocator.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda_driver.h"
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
    const struct epabi_cuda_driver* cu;
    epabi_cu_device device;
    epabi_cu_context ctx;              /* the device's primary context, retained at first use */
    bool tried;                        /* the driver/context lookup already ran (and may have failed) */
};

/* Retains the primary context at first use; false (and one WARNING) when the driver or device is missing. */
static bool ensure_context(struct gpu_allocator* a) {
    pthread_mutex_lock(&a->lock);
    if (!a->tried) {
        a->tried = true;
        char why[256] = "";
        const struct epabi_cuda_driver* cu = epabi_cuda_driver(why, sizeof why);
        epabi_cu_result r = 0;
        if (cu != NULL && (r = cu->DeviceGet(&a->device, a->ordinal)) == 0 &&
            (r = cu->DevicePrimaryCtxRetain(&a->ctx, a->device)) == 0) {
            a->cu = cu;
        } else {
            EPABI_LOG(a->api, a->logger, ORT_LOGGING_LEVEL_WARNING,
                      EPABI_EP_NAME ": GPU %d memory cannot be allocated: %s", a->ordinal,
                      cu == NULL ? why : epabi_cuda_error_text(cu, r));
        }
    }
    bool ok = a->cu != NULL;
    pthread_mutex_unlock(&a->lock);
    return ok;
}

static void* AllocImpl(OrtAllocator* this_, size_t size) {
    struct gpu_allocator* a = (struct gpu_allocator*)this_;
    if (size == 0 || !ensure_context(a)) return NULL;
    epabi_cu_ptr p = 0;
    epabi_cu_context popped = NULL;
    if (a->cu->CtxPushCurrent(a->ctx) != 0) return NULL;
    void* host = NULL;
    epabi_cu_result r = a->pinned ? a->cu->MemAllocHost(&host, size) : a->cu->MemAlloc(&p, size);
    a->cu->CtxPopCurrent(&popped);
    if (a->pinned) return r == 0 ? host : NULL;
    return r == 0 ? (void*)(uintptr_t)p : NULL;
}

static void FreeImpl(OrtAllocator* this_, void* p) {
    struct gpu_allocator* a = (struct gpu_allocator*)this_;
    if (p == NULL || !ensure_context(a)) return;
    epabi_cu_context popped = NULL;
    if (a->cu->CtxPushCurrent(a->ctx) != 0) return;
    if (a->pinned) a->cu->MemFreeHost(p);
    else a->cu->MemFree((epabi_cu_ptr)(uintptr_t)p);
    a->cu->CtxPopCurrent(&popped);
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
    if (a->cu != NULL) a->cu->DevicePrimaryCtxRelease(a->device);
    a->magic = 0;
    pthread_mutex_destroy(&a->lock);
    free(a);
}
