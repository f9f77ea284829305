/*
 * memory_kinds.c - see memory_kinds.h.
 */
#include "memory_kinds.h"

#include "ep_factory.h"

/* GPU-typed memory with NVIDIA's vendor id for the software adapter too: ORT then treats it as it treats the
 * GPU's (copies graph inputs in and outputs out through our data transfer, Memcpy nodes for CPU consumers).
 * Observed with hosts 1.24.4 and 1.32.0 (tests/ort_smoke.py): CPU-typed memory with vendor 0x10DE also gives
 * correct results, but ORT then hands graph outputs to the caller in our memory, zero-copy, and 1.32.0 crashes
 * at exit when the caller keeps one past unregister_execution_provider_library. */
const struct epabi_memory_kind_info epabi_memory_kinds[EPABI_MEMORY_KINDS] = {
    [EPABI_MEMORY_SOFTWARE] = {"EpAbi_Software", EPABI_DEVICE_SOFTWARE, OrtMemoryInfoDeviceType_GPU,
                               OrtDeviceMemoryType_DEFAULT, OrtDeviceAllocator, true},
    [EPABI_MEMORY_GPU] = {"EpAbi_GPU", EPABI_DEVICE_GPU, OrtMemoryInfoDeviceType_GPU, OrtDeviceMemoryType_DEFAULT,
                          OrtDeviceAllocator, false},
    [EPABI_MEMORY_GPU_READONLY] = {"EpAbi_GPU_readonly", EPABI_DEVICE_GPU, OrtMemoryInfoDeviceType_GPU,
                                   OrtDeviceMemoryType_DEFAULT, OrtReadOnlyAllocator, false},
    /* as ORT's CUDA EP offers: host memory the GPU can reach (cuMemAllocHost) */
    [EPABI_MEMORY_GPU_PINNED] = {"EpAbi_GPU_pinned", EPABI_DEVICE_GPU, OrtMemoryInfoDeviceType_GPU,
                                 OrtDeviceMemoryType_HOST_ACCESSIBLE, OrtDeviceAllocator, true},
};

OrtStatus* epabi_memory_attach(const struct epabi_api* api, struct epabi_memory_table* t, OrtEpDevice* dev,
                               enum epabi_memory_kind kind, int ordinal, const struct epabi_memory_record** out) {
    *out = NULL;
    struct epabi_memory_record* rec = NULL;
    for (size_t i = 0; i < t->n && rec == NULL; ++i)
        if (t->records[i].kind == kind && t->records[i].ordinal == ordinal) rec = &t->records[i];
    if (rec == NULL) {
        if (t->n == EPABI_MAX_MEMORY_RECORDS)
            return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": too many memory infos (%d)", EPABI_MAX_MEMORY_RECORDS);
        const struct epabi_memory_kind_info* k = &epabi_memory_kinds[kind];
        OrtMemoryInfo* info = NULL;
        EPABI_RETURN_IF_ERROR(api->ort->CreateMemoryInfo_V2(k->name, k->device_type, EPABI_MEMORY_VENDOR_ID, ordinal,
                                                            k->memory_type, 0, k->allocator_type, &info));
        rec = &t->records[t->n++];
        *rec = (struct epabi_memory_record){kind, ordinal, info, api->ep->MemoryInfo_GetMemoryDevice(info)};
    }
    *out = rec;
    return api->ep->EpDevice_AddAllocatorInfo(dev, rec->info);
}

const struct epabi_memory_record* epabi_memory_find_info(const struct epabi_api* api,
                                                         const struct epabi_memory_table* t,
                                                         const OrtMemoryInfo* info) {
    if (info == NULL) return NULL;
    for (size_t i = 0; i < t->n; ++i)
        if (t->records[i].info == info) return &t->records[i];
    OrtAllocatorType type = OrtInvalidAllocator;
    OrtStatus* st = api->ort->MemoryInfoGetType(info, &type);
    if (st != NULL) {
        api->ort->ReleaseStatus(st);
        return NULL;
    }
    const OrtMemoryDevice* device = api->ep->MemoryInfo_GetMemoryDevice(info);
    for (size_t i = 0; i < t->n && device != NULL; ++i) {
        const struct epabi_memory_record* r = &t->records[i];
        if (epabi_memory_kinds[r->kind].allocator_type == type && api->ep->MemoryDevice_AreEqual(device, r->device))
            return r;
    }
    return NULL;
}

const struct epabi_memory_record* epabi_memory_find_device(const struct epabi_api* api,
                                                           const struct epabi_memory_table* t,
                                                           const OrtMemoryDevice* device) {
    for (size_t i = 0; i < t->n && device != NULL; ++i)
        if (api->ep->MemoryDevice_AreEqual(device, t->records[i].device)) return &t->records[i];
    return NULL;
}

bool epabi_memory_is_host(const struct epabi_api* api, const OrtMemoryDevice* device) {
    return api->ep->MemoryDevice_GetDeviceType(device) == OrtMemoryInfoDeviceType_CPU ||
           api->ep->MemoryDevice_GetMemoryType(device) == OrtDeviceMemoryType_HOST_ACCESSIBLE;
}

void epabi_memory_release_all(const struct epabi_api* api, struct epabi_memory_table* t) {
    for (size_t i = 0; i < t->n; ++i) api->ort->ReleaseMemoryInfo(t->records[i].info);
    t->n = 0;
}
