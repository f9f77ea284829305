#include "ep_factory.h"

#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ep.h"
#include "ep_allocator.h"

#ifndef EPABI_PLUGIN_VERSION
#error "EPABI_PLUGIN_VERSION must be defined by the build (CMakeLists.txt reads it from pyproject.toml)"
#endif

static const char* GetNameImpl(const OrtEpFactory* this_ptr) {
    (void)this_ptr;
    return EPABI_EP_NAME;
}

static const char* GetVendorImpl(const OrtEpFactory* this_ptr) {
    (void)this_ptr;
    return EPABI_VENDOR;
}

static uint32_t GetVendorIdImpl(const OrtEpFactory* this_ptr) {
    (void)this_ptr;
    return EPABI_NVIDIA_VENDOR_ID;   /* the hardware we target; used by ORT's selection policies */
}

static const char* GetVersionImpl(const OrtEpFactory* this_ptr) {
    (void)this_ptr;
    return EPABI_PLUGIN_VERSION;
}

static OrtStatus* GetSupportedDevicesImpl(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                                          size_t num_devices, OrtEpDevice** ep_devices, size_t max_ep_devices,
                                          size_t* num_ep_devices) {
    return epabi_factory_list_devices((struct epabi_factory*)this_ptr, devices, num_devices, ep_devices,
                                      max_ep_devices, num_ep_devices);
}

static OrtStatus* CreateEpImpl(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                               const OrtKeyValuePairs* const* ep_metadata_pairs, size_t num_devices,
                               const OrtSessionOptions* session_options, const OrtLogger* logger, OrtEp** ep) {
    (void)ep_metadata_pairs;
    struct epabi_factory* f = (struct epabi_factory*)this_ptr;
    if (ep == NULL) return epabi_error(&f->api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": CreateEp got a NULL output pointer");
    *ep = NULL;
    if (num_devices != 1 || devices == NULL) {
        return epabi_error(&f->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": CreateEp was given %zu devices; this EP runs on exactly one device per "
                           "session (select a single EP device)", num_devices);
    }
    struct epabi_device_record rec;
    if (!epabi_factory_find_device(f, devices[0], &rec)) {
        return epabi_error(&f->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": CreateEp was given a hardware device this factory did not list");
    }
    return epabi_ep_create(f, &rec, session_options, logger, ep);
}

static void ReleaseEpImpl(OrtEpFactory* this_ptr, OrtEp* ep) {
    (void)this_ptr;
    epabi_ep_destroy(ep);
}

/* Every allocator is ep_allocator.c's filler over the operations of the memory's backend; the host may pass our
 * own memory info or an equal copy of it (real hosts create the GPU allocators at registration). */
static OrtStatus* CreateAllocatorImpl(OrtEpFactory* this_ptr, const OrtMemoryInfo* memory_info,
                                      const OrtKeyValuePairs* allocator_options, OrtAllocator** allocator) {
    (void)allocator_options;   /* no tunables */
    struct epabi_factory* f = (struct epabi_factory*)this_ptr;
    const struct epabi_api* api = &f->api;
    if (allocator == NULL)
        return epabi_error(api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": CreateAllocator got a NULL output pointer");
    *allocator = NULL;
    struct epabi_memory_record rec;
    if (!epabi_factory_find_memory_info(f, memory_info, &rec)) {
        const char* name = NULL;
        if (memory_info != NULL) {
            OrtStatus* st = api->ort->MemoryInfoGetName(memory_info, &name);
            if (st != NULL) api->ort->ReleaseStatus(st);
        }
        return epabi_error(api, ORT_NOT_IMPLEMENTED, EPABI_EP_NAME ": no allocator for memory info '%s'",
                           name != NULL ? name : "(null)");
    }
    const struct epabi_backend* backend = epabi_backend_for(epabi_memory_kinds[rec.kind].device);
    const struct epabi_alloc_ops* ops = NULL;
    void* ctx = NULL;
    EPABI_RETURN_IF_ERROR(backend->allocator_open(api, f->logger, &rec, f->arena, &ops, &ctx));
    return epabi_allocator_create(api, rec.info, ops, ctx, f->blocks, allocator);
}

static void ReleaseAllocatorImpl(OrtEpFactory* this_ptr, OrtAllocator* allocator) {
    (void)this_ptr;
    epabi_allocator_destroy(allocator);   /* ignores allocators it did not make */
}

static OrtStatus* CreateDataTransferImpl(OrtEpFactory* this_ptr, OrtDataTransferImpl** data_transfer) {
    struct epabi_factory* f = (struct epabi_factory*)this_ptr;
    if (data_transfer == NULL)
        return epabi_error(&f->api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": CreateDataTransfer got a NULL output pointer");
    /* Without memory of our own (host-memory devices only) NULL is the documented answer. The member itself
     * must stay non-NULL: real hosts call it unconditionally. */
    pthread_mutex_lock(&f->lock);
    *data_transfer = f->memory.n > 0 ? &f->data_transfer.base : NULL;
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

/* The stream-aware backend of the listed devices (CUDA, when it can run), or NULL. */
static const struct epabi_backend* stream_backend(struct epabi_factory* f) {
    const struct epabi_backend* found = NULL;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->num_devices && found == NULL; ++i) {
        const struct epabi_backend* b = epabi_backend_for(f->devices[i].kind);
        if (b != NULL && b->sync_stream != NULL && b->available(NULL)) found = b;
    }
    pthread_mutex_unlock(&f->lock);
    return found;
}

static bool IsStreamAwareImpl(const OrtEpFactory* this_ptr) {
    return stream_backend((struct epabi_factory*)(uintptr_t)this_ptr) != NULL;
}

/* ORT dereferences what this returns, for every non-CPU memory info we declared once we are stream aware: memory
 * it does not know gets a stream without a handle (cuda_sync_stream.h). */
static OrtStatus* CreateSyncStreamForDeviceImpl(OrtEpFactory* this_ptr, const OrtMemoryDevice* memory_device,
                                                const OrtKeyValuePairs* stream_options, OrtSyncStreamImpl** stream) {
    (void)stream_options;
    struct epabi_factory* f = (struct epabi_factory*)this_ptr;
    const struct epabi_api* api = &f->api;
    if (stream == NULL || memory_device == NULL)
        return epabi_error(api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": CreateSyncStreamForDevice got a NULL pointer");
    *stream = NULL;
    struct epabi_memory_record rec;
    const struct epabi_backend* b = NULL;
    int ordinal = -1;
    if (epabi_factory_find_memory_device(f, memory_device, &rec)) {
        b = epabi_backend_for(epabi_memory_kinds[rec.kind].device);
        ordinal = rec.ordinal;
    }
    if (b == NULL || b->sync_stream == NULL || !b->available(NULL)) {
        b = stream_backend(f);
        ordinal = -1;
    }
    if (b == NULL)
        return epabi_error(api, ORT_NOT_IMPLEMENTED, EPABI_EP_NAME ": CreateSyncStreamForDevice: no device of this "
                           "factory is stream aware");
    return b->sync_stream(api, ordinal, stream);
}

struct epabi_factory* epabi_factory_create(const struct epabi_api* api, const OrtLogger* logger) {
    struct epabi_factory* f = calloc(1, sizeof *f);
    if (f == NULL) return NULL;
    if (pthread_mutex_init(&f->lock, NULL) != 0) {
        free(f);
        return NULL;
    }
    f->api = *api;
    f->logger = logger;
    f->arena = epabi_arena_create();
    f->blocks = epabi_alloc_registry_create();
    if (f->arena == NULL || f->blocks == NULL) {
        epabi_arena_release(f->arena);
        epabi_alloc_registry_release(f->blocks);
        pthread_mutex_destroy(&f->lock);
        free(f);
        return NULL;
    }
    epabi_data_transfer_init(&f->data_transfer, f);

    OrtEpFactory* t = &f->base;
    t->ort_version_supported = EPABI_ORT_API_VERSION;
    t->GetName = GetNameImpl;
    t->GetVendor = GetVendorImpl;
    t->GetSupportedDevices = GetSupportedDevicesImpl;
    t->CreateEp = CreateEpImpl;
    t->ReleaseEp = ReleaseEpImpl;
    t->GetVendorId = GetVendorIdImpl;
    t->GetVersion = GetVersionImpl;               /* never NULL: NULL crashes real hosts */
    t->ValidateCompiledModelCompatibilityInfo = NULL;   /* we write no EPContext models */
    t->CreateAllocator = CreateAllocatorImpl;
    t->ReleaseAllocator = ReleaseAllocatorImpl;
    t->CreateDataTransfer = CreateDataTransferImpl;     /* never NULL: NULL crashes real hosts */
    t->IsStreamAware = IsStreamAwareImpl;
    t->CreateSyncStreamForDevice = CreateSyncStreamForDeviceImpl;
    t->GetHardwareDeviceIncompatibilityDetails = NULL;  /* host default: compatible */
    t->CreateExternalResourceImporterForDevice = NULL;  /* no external resource import */
    t->GetNumCustomOpDomains = NULL;                    /* no custom ops */
    t->GetCustomOpDomains = NULL;
    t->InitGraphicsInterop = NULL;                      /* no graphics interop */
    t->DeinitGraphicsInterop = NULL;
    t->SelectBestModelCandidate = NULL;                 /* host default selection */
    return f;
}

void epabi_factory_destroy(struct epabi_factory* f) {
    if (f == NULL) return;
    epabi_memory_release_all(&f->api, &f->memory);
    for (size_t i = 0; i < f->num_found_hw; ++i)
        if (f->found_hw[i] != NULL) f->api.ep->ReleaseHardwareDevice(f->found_hw[i]);
    f->num_found_hw = 0;
    if (f->virtual_hw != NULL) f->api.ep->ReleaseHardwareDevice(f->virtual_hw);
    f->virtual_hw = NULL;
    epabi_arena_release(f->arena);
    f->arena = NULL;
    epabi_alloc_registry_release(f->blocks);
    f->blocks = NULL;
    pthread_mutex_destroy(&f->lock);
    free(f);
}
