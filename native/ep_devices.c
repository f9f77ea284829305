/*
 * ep_devices.c - which hardware devices become EP devices.
 *
 *  - GPU: every GPU-typed hardware device with NVIDIA's vendor id, with default and read-only memory infos.
 *  - Software adapter: only with EPABI_ALLOW_SOFTWARE_ADAPTER=1 and no GPU listed; one EP device on the
 *    CPU hardware device, with a warning that it is a software device. It computes in the host's own
 *    memory (no memory info: zero copies, and bound host buffers are what a captured graph replays on),
 *    unless EPABI_SOFTWARE_DEVICE_MEMORY=device gives it a DEFAULT memory info "EpAbi_Software" (see
 *    attach_software_memory) served by the factory's arena and data transfer, like a discrete device.
 *  - Virtual: when the host's environment config has allow_virtual_devices=1 (ORT sets it for a
 *    registration name ending in ".virtual"), a GPU hardware device we create ourselves, metadata
 *    is_virtual=1, no memory infos; usable only by compile-only sessions (see ep.c).
 * Mirrors the conduct of ONNX Runtime's WebGPU plugin EP (software adapter, virtual device).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"
#include "ep_factory.h"

static bool is_virtual_hw(const struct epabi_api* api, const OrtHardwareDevice* hw) {
    const char* v = epabi_kv_get(api, api->ort->HardwareDevice_Metadata(hw), "is_virtual");
    return v != NULL && strcmp(v, "1") == 0;
}

/* EPABI_SOFTWARE_DEVICE_MEMORY=device: the software adapter owns device memory (see attach_software_memory). */
static bool software_device_memory(const struct epabi_factory* f) {
    const char* v = getenv("EPABI_SOFTWARE_DEVICE_MEMORY");
    if (v != NULL && strcmp(v, "device") != 0 && strcmp(v, "host") != 0 && v[0] != '\0')
        EPABI_LOG(&f->api, f->logger, ORT_LOGGING_LEVEL_WARNING,
                  EPABI_EP_NAME ": EPABI_SOFTWARE_DEVICE_MEMORY='%s' is neither 'host' nor 'device'; using host", v);
    return v != NULL && strcmp(v, "device") == 0;
}

static bool software_adapter_allowed(void) {
    const char* v = getenv("EPABI_ALLOW_SOFTWARE_ADAPTER");
    return v != NULL && strcmp(v, "1") == 0;
}

static OrtStatus* virtual_devices_allowed(const struct epabi_api* api, bool* allowed) {
    *allowed = false;
    if (!epabi_has(api, EPABI_SINCE_ENV_CONFIG)) return NULL;
    OrtKeyValuePairs* env = NULL;
    EPABI_RETURN_IF_ERROR(api->ep->GetEnvConfigEntries(&env));
    const char* v = epabi_kv_get(api, env, "allow_virtual_devices");
    *allowed = v != NULL && strcmp(v, "1") == 0;
    if (env != NULL) api->ort->ReleaseKeyValuePairs(env);
    return NULL;
}

/* Caller holds f->lock. Keeps the memory info alive until the factory is destroyed, because the host
 * may keep referring to it through the EP device. */
static OrtStatus* attach_memory_info_typed(struct epabi_factory* f, OrtEpDevice* dev, const char* name,
                                           OrtMemoryInfoDeviceType type, OrtDeviceMemoryType mem_type, int ordinal,
                                           OrtAllocatorType alloc_type, const OrtMemoryInfo** made) {
    const struct epabi_api* api = &f->api;
    if (f->num_memory_infos >= sizeof f->memory_infos / sizeof f->memory_infos[0])
        return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": too many memory infos");
    OrtMemoryInfo* info = NULL;
    EPABI_RETURN_IF_ERROR(api->ort->CreateMemoryInfo_V2(name, type, EPABI_NVIDIA_VENDOR_ID, ordinal, mem_type, 0,
                                                        alloc_type, &info));
    f->memory_infos[f->num_memory_infos++] = info;
    if (made != NULL) *made = info;
    return api->ep->EpDevice_AddAllocatorInfo(dev, info);
}

static OrtStatus* attach_memory_info(struct epabi_factory* f, OrtEpDevice* dev, const char* name,
                                     OrtMemoryInfoDeviceType type, int ordinal, OrtAllocatorType alloc_type,
                                     const OrtMemoryInfo** made) {
    return attach_memory_info_typed(f, dev, name, type, OrtDeviceMemoryType_DEFAULT, ordinal, alloc_type, made);
}

/* Caller holds f->lock. The software adapter's DEFAULT memory: host memory from the factory's arena that
 * the host treats as device memory (GPU-typed, vendor 0x10DE, device allocator), as it will treat the GPU
 * device's memory; ORT copies graph inputs in and outputs out through our data transfer and inserts
 * Memcpy nodes where CPU nodes consume our values. The allocator type is OrtDeviceAllocator: hosts 1.31+
 * refuse plugin allocators that call themselves arenas.
 *
 * Observed with real hosts 1.24.4 and 1.32.0 (tests/ort_smoke.py): GPU-typed memory gives correct results
 * on both. CPU-typed memory with vendor 0x10DE also gives correct results on both (ORT copies graph inputs
 * into it through our data transfer, but hands graph outputs to the caller in our memory, zero-copy);
 * 1.32.0 then crashes at exit when the caller keeps an output array past
 * unregister_execution_provider_library, because freeing it calls into the unloaded plugin. With GPU-typed
 * memory ORT copies outputs to its own CPU memory, so nothing of ours outlives the library. */
static OrtStatus* attach_software_memory(struct epabi_factory* f, OrtEpDevice* dev) {
    const OrtMemoryInfo* info = NULL;
    EPABI_RETURN_IF_ERROR(attach_memory_info(f, dev, EPABI_SOFTWARE_MEMORY_NAME, OrtMemoryInfoDeviceType_GPU, 0,
                                             OrtDeviceAllocator, &info));
    f->software_memory_info = info;
    epabi_data_transfer_init(&f->data_transfer, &f->api, f->api.ep->MemoryInfo_GetMemoryDevice(info));
    return NULL;
}

/* Caller holds f->lock. Creates one EP device and records it. */
static OrtStatus* add_device(struct epabi_factory* f, const OrtHardwareDevice* hw, enum epabi_device_kind kind,
                             int ordinal, OrtEpDevice** out) {
    const struct epabi_api* api = &f->api;
    static const char* const kKindNames[] = {"gpu", "software", "virtual"};
    *out = NULL;
    OrtKeyValuePairs* meta = NULL;
    api->ort->CreateKeyValuePairs(&meta);
    api->ort->AddKeyValuePair(meta, "device_kind", kKindNames[kind]);
    OrtEpDevice* dev = NULL;
    OrtStatus* st = api->ep->CreateEpDevice(&f->base, hw, meta, NULL, &dev);
    api->ort->ReleaseKeyValuePairs(meta);
    if (st != NULL) return st;
    const OrtMemoryInfo* device_memory = NULL;
    if (kind == EPABI_DEVICE_GPU) {
        st = attach_memory_info(f, dev, EPABI_GPU_MEMORY_NAME, OrtMemoryInfoDeviceType_GPU, ordinal,
                                OrtDeviceAllocator, &device_memory);
        if (st == NULL)
            st = attach_memory_info(f, dev, EPABI_GPU_READONLY_MEMORY_NAME, OrtMemoryInfoDeviceType_GPU, ordinal,
                                    OrtReadOnlyAllocator, NULL);
        /* pinned host memory (cuMemAllocHost) for staging copies, as ORT's CUDA EP offers */
        if (st == NULL)
            st = attach_memory_info_typed(f, dev, EPABI_GPU_PINNED_MEMORY_NAME, OrtMemoryInfoDeviceType_GPU,
                                          OrtDeviceMemoryType_HOST_ACCESSIBLE, ordinal, OrtDeviceAllocator, NULL);
    } else if (kind == EPABI_DEVICE_SOFTWARE && software_device_memory(f)) {
        st = attach_software_memory(f, dev);
        device_memory = f->software_memory_info;
    }
    if (st != NULL) {
        api->ep->ReleaseEpDevice(dev);
        return st;
    }
    if (kind == EPABI_DEVICE_GPU) epabi_data_transfer_enable_gpu(&f->data_transfer, api);
    const OrtMemoryDevice* memory = device_memory != NULL ? api->ep->MemoryInfo_GetMemoryDevice(device_memory) : NULL;
    f->devices[f->num_devices++] = (struct epabi_device_record){hw, kind, ordinal, memory};
    *out = dev;
    return NULL;
}

/* The GPUs the CUDA driver sees, as hardware devices of our own making (host passed none). Metadata:
 * pci_bus_id (cuDeviceGetPCIBusId), cuda_ordinal, DiscoveredBy. EPABI_CUDA_DISCOVERY=0 turns this off (then
 * a host without GPUs gets the software adapter when it is allowed). Caller holds f->lock. */
static OrtStatus* make_cuda_hw(struct epabi_factory* f, size_t limit) {
    const struct epabi_api* api = &f->api;
    if (f->num_cuda_hw > 0) return NULL;
    const char* discovery = getenv("EPABI_CUDA_DISCOVERY");
    if (discovery != NULL && strcmp(discovery, "0") == 0) return NULL;   /* the user asked us not to look */
    char why[256];
    const struct epabi_cuda_driver* cu = epabi_cuda_driver(why, sizeof why);
    int count = 0;
    if (cu == NULL || cu->DeviceGetCount(&count) != 0 || count <= 0) return NULL;
    OrtStatus* st = NULL;
    for (int i = 0; i < count && (size_t)i < limit && st == NULL; ++i) {
        epabi_cu_device dev = 0;
        char bus[32] = "";
        char name[128] = "NVIDIA GPU";
        char ordinal[16];
        if (cu->DeviceGet(&dev, i) != 0) break;
        if (cu->DeviceGetPCIBusId(bus, (int)sizeof bus, dev) != 0) bus[0] = '\0';
        if (cu->DeviceGetName(name, (int)sizeof name, dev) != 0) snprintf(name, sizeof name, "NVIDIA GPU");
        snprintf(ordinal, sizeof ordinal, "%d", i);
        OrtKeyValuePairs* meta = NULL;
        api->ort->CreateKeyValuePairs(&meta);
        if (bus[0] != '\0') api->ort->AddKeyValuePair(meta, "pci_bus_id", bus);
        api->ort->AddKeyValuePair(meta, "cuda_ordinal", ordinal);
        api->ort->AddKeyValuePair(meta, "Description", name);
        api->ort->AddKeyValuePair(meta, "DiscoveredBy", EPABI_EP_NAME);
        st = api->ep->CreateHardwareDevice(OrtHardwareDeviceType_GPU, EPABI_NVIDIA_VENDOR_ID, 0, "NVIDIA", meta,
                                           &f->cuda_hw[f->num_cuda_hw]);
        api->ort->ReleaseKeyValuePairs(meta);
        if (st == NULL) f->num_cuda_hw++;
    }
    if (st == NULL)
        EPABI_LOG(api, f->logger, ORT_LOGGING_LEVEL_INFO,
                  EPABI_EP_NAME ": the host listed no NVIDIA GPU but the CUDA driver sees %zu; listing them as hardware "
                  "devices of our own (metadata pci_bus_id, cuda_ordinal)", f->num_cuda_hw);
    return st;
}

/* The CUDA ordinal of a host GPU: its cuda_ordinal metadata when present, else its rank among the GPUs. */
static int gpu_ordinal(const struct epabi_api* api, const OrtHardwareDevice* hw, int rank) {
    const char* v = epabi_kv_get(api, api->ort->HardwareDevice_Metadata(hw), "cuda_ordinal");
    if (v == NULL || *v < '0' || *v > '9') return rank;
    return atoi(v);
}

static OrtStatus* make_virtual_hw(struct epabi_factory* f) {
    const struct epabi_api* api = &f->api;
    if (f->virtual_hw != NULL) return NULL;
    OrtKeyValuePairs* meta = NULL;
    api->ort->CreateKeyValuePairs(&meta);
    api->ort->AddKeyValuePair(meta, "is_virtual", "1");
    api->ort->AddKeyValuePair(meta, "DiscoveredBy", EPABI_EP_NAME);
    OrtStatus* st = api->ep->CreateHardwareDevice(OrtHardwareDeviceType_GPU, 0, 0, EPABI_VENDOR, meta, &f->virtual_hw);
    api->ort->ReleaseKeyValuePairs(meta);
    return st;
}

OrtStatus* epabi_factory_list_devices(struct epabi_factory* f, const OrtHardwareDevice* const* devices,
                                      size_t num_devices, OrtEpDevice** ep_devices, size_t max_ep_devices,
                                      size_t* num_ep_devices) {
    const struct epabi_api* api = &f->api;
    if (num_ep_devices == NULL || ep_devices == NULL || (devices == NULL && num_devices > 0))
        return epabi_error(api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": GetSupportedDevices got a NULL pointer");
    *num_ep_devices = 0;
    size_t limit = max_ep_devices < EPABI_MAX_DEVICES ? max_ep_devices : EPABI_MAX_DEVICES;
    bool allow_virtual = false;
    EPABI_RETURN_IF_ERROR(virtual_devices_allowed(api, &allow_virtual));

    pthread_mutex_lock(&f->lock);
    f->num_devices = 0;   /* a new enumeration replaces the previous one */
    OrtStatus* st = NULL;
    size_t n = 0;
    int gpus = 0;
    const OrtHardwareDevice* cpu = NULL;
    for (size_t i = 0; i < num_devices && st == NULL; ++i) {
        const OrtHardwareDevice* hw = devices[i];
        OrtHardwareDeviceType type = api->ort->HardwareDevice_Type(hw);
        if (type == OrtHardwareDeviceType_CPU && cpu == NULL) cpu = hw;
        if (type != OrtHardwareDeviceType_GPU || api->ort->HardwareDevice_VendorId(hw) != EPABI_NVIDIA_VENDOR_ID ||
            is_virtual_hw(api, hw))
            continue;
        if (n >= limit) {
            EPABI_LOG(api, f->logger, ORT_LOGGING_LEVEL_WARNING,
                      EPABI_EP_NAME ": more GPUs than the host accepts EP devices (%zu); the rest are not listed", limit);
            break;
        }
        st = add_device(f, hw, EPABI_DEVICE_GPU, gpu_ordinal(api, hw, gpus), &ep_devices[n]);
        if (st == NULL) {
            ++n;
            ++gpus;
        }
    }
    if (st == NULL && gpus == 0 && n < limit) {
        st = make_cuda_hw(f, limit - n);
        for (size_t i = 0; i < f->num_cuda_hw && st == NULL && n < limit; ++i) {
            st = add_device(f, f->cuda_hw[i], EPABI_DEVICE_GPU, (int)i, &ep_devices[n]);
            if (st == NULL) {
                ++n;
                ++gpus;
            }
        }
    }
    if (st == NULL && gpus == 0 && cpu != NULL && software_adapter_allowed() && n < limit) {
        EPABI_LOG(api, f->logger, ORT_LOGGING_LEVEL_WARNING,
                  EPABI_EP_NAME ": no NVIDIA GPU found; offering the CPU software adapter "
                  "(EPABI_ALLOW_SOFTWARE_ADAPTER=1). It is a software device: expect CPU speed.");
        st = add_device(f, cpu, EPABI_DEVICE_SOFTWARE, 0, &ep_devices[n]);
        if (st == NULL) ++n;
    }
    if (st == NULL && allow_virtual && n < limit) {
        st = make_virtual_hw(f);
        if (st == NULL) st = add_device(f, f->virtual_hw, EPABI_DEVICE_VIRTUAL, 0, &ep_devices[n]);
        if (st == NULL) ++n;
    }
    if (st != NULL) {
        /* Nothing half-listed reaches the host: the EP devices made so far are ours to release. */
        for (size_t i = 0; i < n; ++i) api->ep->ReleaseEpDevice(ep_devices[i]);
        f->num_devices = 0;
        n = 0;
    }
    pthread_mutex_unlock(&f->lock);
    *num_ep_devices = n;
    return st;
}

/* Same device as a record: the very pointer we listed, or (for hosts that hand out copies) the same type,
 * vendor, device id and virtual flag. */
static bool same_device(const struct epabi_api* api, const OrtHardwareDevice* a, const OrtHardwareDevice* b) {
    if (a == b) return true;
    if (api->ort->HardwareDevice_Type(a) != api->ort->HardwareDevice_Type(b) ||
        api->ort->HardwareDevice_VendorId(a) != api->ort->HardwareDevice_VendorId(b) ||
        api->ort->HardwareDevice_DeviceId(a) != api->ort->HardwareDevice_DeviceId(b) ||
        is_virtual_hw(api, a) != is_virtual_hw(api, b))
        return false;
    /* two identical cards differ only in where they sit: compare the bus id when both hosts give one */
    const char* pa = epabi_kv_get(api, api->ort->HardwareDevice_Metadata(a), "pci_bus_id");
    const char* pb = epabi_kv_get(api, api->ort->HardwareDevice_Metadata(b), "pci_bus_id");
    return pa == NULL || pb == NULL || strcmp(pa, pb) == 0;
}

bool epabi_factory_find_device(struct epabi_factory* f, const OrtHardwareDevice* hw, struct epabi_device_record* out) {
    if (hw == NULL) return false;
    bool found = false;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->num_devices && !found; ++i) {
        if (f->devices[i].hw == hw) {
            *out = f->devices[i];
            found = true;
        }
    }
    for (size_t i = 0; i < f->num_devices && !found; ++i) {
        if (same_device(&f->api, f->devices[i].hw, hw)) {
            *out = f->devices[i];
            found = true;
        }
    }
    pthread_mutex_unlock(&f->lock);
    return found;
}
