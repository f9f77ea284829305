#include "ep_factory.h"

#include <stdlib.h>
#include <string.h>

#include "ep.h"
#include "cuda_sync_stream.h"
#include "gpu_allocator.h"
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

/* Only the software device registers a memory info, so only its DEFAULT memory gets an allocator: the
 * shared arena in a thin OrtAllocator. The host may pass our own memory info or an equal copy of it. */
static bool is_software_memory(struct epabi_factory* f, const OrtMemoryInfo* info) {
    if (info == NULL || f->software_memory_info == NULL) return false;
    if (info == f->software_memory_info) return true;
    int diff = 1;
    OrtStatus* st = f->api.ort->CompareMemoryInfo(info, f->software_memory_info, &diff);
    if (st != NULL) {
        f->api.ort->ReleaseStatus(st);
        return false;
    }
    return diff == 0;
}

static OrtStatus* CreateAllocatorImpl(OrtEpFactory* this_ptr, const OrtMemoryInfo* memory_info,
                                      const OrtKeyValuePairs* allocator_options, OrtAllocator** allocator) {
    (void)allocator_options;   /* the arena has no tunables */
    struct epabi_factory* f = (struct epabi_factory*)this_ptr;
    if (allocator == NULL)
        return epabi_error(&f->api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": CreateAllocator got a NULL output pointer");
    *allocator = NULL;
    pthread_mutex_lock(&f->lock);
    const OrtMemoryInfo* ours = is_software_memory(f, memory_info) ? f->software_memory_info : NULL;
    pthread_mutex_unlock(&f->lock);
    if (ours != NULL) return epabi_allocator_create(&f->api, f->arena, ours, allocator);
    const char* name = NULL;
    int ordinal = 0;
    if (memory_info != NULL) {
        OrtStatus* st = f->api.ort->MemoryInfoGetName(memory_info, &name);
        if (st == NULL) st = f->api.ort->MemoryInfoGetId(memory_info, &ordinal);
        if (st != NULL) f->api.ort->ReleaseStatus(st);
    }
    /* the GPU devices' memory (device and read-only infos): hosts create these allocators at registration */
    if (name != NULL && (strcmp(name, EPABI_GPU_MEMORY_NAME) == 0 || strcmp(name, EPABI_GPU_READONLY_MEMORY_NAME) == 0 ||
                         strcmp(name, EPABI_GPU_PINNED_MEMORY_NAME) == 0))
        return epabi_gpu_allocator_create(&f->api, f->logger, memory_info, ordinal,
                                          strcmp(name, EPABI_GPU_PINNED_MEMORY_NAME) == 0, allocator);
    return epabi_error(&f->api, ORT_NOT_IMPLEMENTED, EPABI_EP_NAME ": no allocator for memory info '%s'",
                       name != NULL ? name : "(null)");
}

static void ReleaseAllocatorImpl(OrtEpFactory* this_ptr, OrtAllocator* allocator) {
    (void)this_ptr;
    if (epabi_allocator_is_ours(allocator)) epabi_allocator_destroy(allocator);
    else if (epabi_gpu_allocator_is_ours(allocator)) epabi_gpu_allocator_destroy(allocator);
}

static OrtStatus* CreateDataTransferImpl(OrtEpFactory* this_ptr, OrtDataTransferImpl** data_transfer) {
    struct epabi_factory* f = (struct epabi_factory*)this_ptr;
    if (data_transfer == NULL)
        return epabi_error(&f->api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": CreateDataTransfer got a NULL output pointer");
    /* Only the software device has memory of its own so far; without it NULL is the documented answer.
     * The member itself must stay non-NULL: real hosts call it unconditionally. */
    pthread_mutex_lock(&f->lock);
    *data_transfer = f->data_transfer.initialized ? &f->data_transfer.base : NULL;
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

/* Stream aware when the CUDA backend serves a GPU EP device this factory listed (cuda_sync_stream.h). */
static bool IsStreamAwareImpl(const OrtEpFactory* this_ptr) {
    struct epabi_factory* f = (struct epabi_factory*)(uintptr_t)this_ptr;
    bool gpu = false;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->num_devices && !gpu; ++i) gpu = f->devices[i].kind == EPABI_DEVICE_GPU;
    pthread_mutex_unlock(&f->lock);
    return gpu && epabi_cuda_usable(epabi_cuda_libs());
}

static OrtStatus* CreateSyncStreamForDeviceImpl(OrtEpFactory* this_ptr, const OrtMemoryDevice* memory_device,
                                                const OrtKeyValuePairs* stream_options, OrtSyncStreamImpl** stream) {
    (void)stream_options;
    struct epabi_factory* f = (struct epabi_factory*)this_ptr;
    const struct epabi_api* api = &f->api;
    if (stream == NULL || memory_device == NULL)
        return epabi_error(api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": CreateSyncStreamForDevice got a NULL pointer");
    *stream = NULL;
    const struct epabi_cuda_device* dev = NULL;
    pthread_mutex_lock(&f->lock);
    bool gpu = f->data_transfer.initialized && epabi_data_transfer_is_gpu_device(&f->data_transfer, memory_device);
    pthread_mutex_unlock(&f->lock);
    if (gpu && epabi_cuda_usable(epabi_cuda_libs()))
        EPABI_RETURN_IF_ERROR(
            epabi_cuda_device_get(api, (int)api->ep->MemoryDevice_GetDeviceId(memory_device), &dev));
    return epabi_sync_stream_create(api, dev, stream);
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
    if (f->arena == NULL) {
        pthread_mutex_destroy(&f->lock);
        free(f);
        return NULL;
    }

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
    for (size_t i = 0; i < f->num_memory_infos; ++i) f->api.ort->ReleaseMemoryInfo(f->memory_infos[i]);
    f->num_memory_infos = 0;
    for (size_t i = 0; i < f->num_cuda_hw; ++i)
        if (f->cuda_hw[i] != NULL) f->api.ep->ReleaseHardwareDevice(f->cuda_hw[i]);
    f->num_cuda_hw = 0;
    if (f->virtual_hw != NULL) f->api.ep->ReleaseHardwareDevice(f->virtual_hw);
    f->virtual_hw = NULL;
    epabi_arena_release(f->arena);
    f->arena = NULL;
    pthread_mutex_destroy(&f->lock);
    free(f);
}
