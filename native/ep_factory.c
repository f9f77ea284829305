#include "ep_factory.h"

#include <stdlib.h>
#include <string.h>

#include "ep.h"

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

static OrtStatus* CreateAllocatorImpl(OrtEpFactory* this_ptr, const OrtMemoryInfo* memory_info,
                                      const OrtKeyValuePairs* allocator_options, OrtAllocator** allocator) {
    (void)memory_info;
    (void)allocator_options;
    struct epabi_factory* f = (struct epabi_factory*)this_ptr;
    if (allocator != NULL) *allocator = NULL;
    return epabi_error(&f->api, ORT_NOT_IMPLEMENTED,
                       EPABI_EP_NAME ": device memory allocators are not available in this build");
}

static void ReleaseAllocatorImpl(OrtEpFactory* this_ptr, OrtAllocator* allocator) {
    (void)this_ptr;
    (void)allocator;   /* CreateAllocator never hands one out */
}

static OrtStatus* CreateDataTransferImpl(OrtEpFactory* this_ptr, OrtDataTransferImpl** data_transfer) {
    struct epabi_factory* f = (struct epabi_factory*)this_ptr;
    if (data_transfer == NULL)
        return epabi_error(&f->api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": CreateDataTransfer got a NULL output pointer");
    /* No device memory is handed out yet, so there is nothing to copy; NULL is the documented answer.
     * The member itself must stay non-NULL: real hosts call it unconditionally. */
    *data_transfer = NULL;
    return NULL;
}

static bool IsStreamAwareImpl(const OrtEpFactory* this_ptr) {
    (void)this_ptr;
    return false;
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
    t->CreateSyncStreamForDevice = NULL;                /* not stream aware */
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
    if (f->virtual_hw != NULL) f->api.ep->ReleaseHardwareDevice(f->virtual_hw);
    f->virtual_hw = NULL;
    pthread_mutex_destroy(&f->lock);
    free(f);
}
