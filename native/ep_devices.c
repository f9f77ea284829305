/*
 * ep_devices.c - which hardware devices become EP devices.
 *
 *  - GPU: every GPU-typed hardware device with NVIDIA's vendor id, with device, read-only and pinned memory
 *    infos (memory_kinds.h); when the host lists none, the GPUs the CUDA backend finds itself.
 *  - Software adapter: only with EPABI_ALLOW_SOFTWARE_ADAPTER=1 and no GPU listed; one EP device on the
 *    CPU hardware device, with a warning that it is a software device and metadata "blas" naming the BLAS its
 *    MatMul/Gemm/Conv use (kernels/blas.h: epabi_blas_summary). It computes in the host's own
 *    memory (no memory info: zero copies, and bound host buffers are what a captured graph replays on),
 *    unless EPABI_SOFTWARE_DEVICE_MEMORY=device gives it a DEFAULT memory info "EpAbi_Software" served by the
 *    factory's arena and data transfer, like a discrete device (backend_software.c).
 *  - Virtual: when the host's environment config has allow_virtual_devices=1 (ORT sets it for a
 *    registration name ending in ".virtual"), a GPU hardware device we create ourselves, metadata
 *    is_virtual=1, no memory infos; usable only by compile-only sessions (see ep.c).
 * Mirrors the conduct of ONNX Runtime's WebGPU plugin EP (software adapter, virtual device).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "blas.h"
#include "ep_factory.h"

static bool is_virtual_hw(const struct epabi_api* api, const OrtHardwareDevice* hw) {
    const char* v = epabi_kv_get(api, api->ort->HardwareDevice_Metadata(hw), "is_virtual");
    return v != NULL && strcmp(v, "1") == 0;
}

/* EPABI_SOFTWARE_DEVICE_MEMORY=device: the software adapter owns device memory (backend_software.c). */
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
    if (!epabi_has(api, EPABI_SINCE_OrtEpApi_GetEnvConfigEntries)) return NULL;
    OrtKeyValuePairs* env = NULL;
    EPABI_RETURN_IF_ERROR(api->ep->GetEnvConfigEntries(&env));
    const char* v = epabi_kv_get(api, env, "allow_virtual_devices");
    *allowed = v != NULL && strcmp(v, "1") == 0;
    if (env != NULL) api->ort->ReleaseKeyValuePairs(env);
    return NULL;
}

/* Caller holds f->lock. Creates one EP device with the memory infos of its kind and records it. */
static OrtStatus* add_device(struct epabi_factory* f, const OrtHardwareDevice* hw, enum epabi_device_kind kind,
                             int ordinal, OrtEpDevice** out) {
    const struct epabi_api* api = &f->api;
    static const char* const kKindNames[] = {"gpu", "software", "virtual"};
    *out = NULL;
    OrtKeyValuePairs* meta = NULL;
    api->ort->CreateKeyValuePairs(&meta);
    api->ort->AddKeyValuePair(meta, "device_kind", kKindNames[kind]);
    if (kind == EPABI_DEVICE_SOFTWARE) api->ort->AddKeyValuePair(meta, "blas", epabi_blas_summary());
    OrtEpDevice* dev = NULL;
    OrtStatus* st = api->ep->CreateEpDevice(&f->base, hw, meta, NULL, &dev);
    api->ort->ReleaseKeyValuePairs(meta);
    if (st != NULL) return st;
    bool with_memory = kind != EPABI_DEVICE_SOFTWARE || software_device_memory(f);
    const OrtMemoryDevice* device_memory = NULL;
    for (int m = 0; m < EPABI_MEMORY_KINDS && st == NULL && with_memory; ++m) {
        const struct epabi_memory_kind_info* k = &epabi_memory_kinds[m];
        if (k->device != kind) continue;
        const struct epabi_memory_record* rec = NULL;
        st = epabi_memory_attach(api, &f->memory, dev, (enum epabi_memory_kind)m, ordinal, &rec);
        if (st == NULL && device_memory == NULL && k->memory_type == OrtDeviceMemoryType_DEFAULT)
            device_memory = rec->device;
    }
    if (st != NULL) {
        api->ep->ReleaseEpDevice(dev);
        return st;
    }
    f->devices[f->num_devices++] = (struct epabi_device_record){hw, kind, ordinal, device_memory};
    *out = dev;
    return NULL;
}

/* The GPUs the CUDA backend sees, as hardware devices of our own making (host passed none). Metadata:
 * pci_bus_id, cuda_ordinal, Description, DiscoveredBy. EPABI_CUDA_DISCOVERY=0 turns this off (then a host
 * without GPUs gets the software adapter when it is allowed). Caller holds f->lock. */
static OrtStatus* make_found_hw(struct epabi_factory* f, size_t limit) {
    const struct epabi_api* api = &f->api;
    if (f->num_found_hw > 0) return NULL;
    const char* discovery = getenv("EPABI_CUDA_DISCOVERY");
    if (discovery != NULL && strcmp(discovery, "0") == 0) return NULL;   /* the user asked us not to look */
    const struct epabi_backend* gpu = epabi_backend_for(EPABI_DEVICE_GPU);
    int count = gpu->hardware_count();
    OrtStatus* st = NULL;
    for (int i = 0; i < count && (size_t)i < limit && st == NULL; ++i) {
        struct epabi_backend_hardware hw;
        char ordinal[16];
        if (!gpu->hardware_describe(i, &hw)) break;
        snprintf(ordinal, sizeof ordinal, "%d", i);
        OrtKeyValuePairs* meta = NULL;
        api->ort->CreateKeyValuePairs(&meta);
        if (hw.pci_bus_id[0] != '\0') api->ort->AddKeyValuePair(meta, "pci_bus_id", hw.pci_bus_id);
        api->ort->AddKeyValuePair(meta, "cuda_ordinal", ordinal);
        api->ort->AddKeyValuePair(meta, "Description", hw.name);
        api->ort->AddKeyValuePair(meta, "DiscoveredBy", EPABI_EP_NAME);
        st = api->ep->CreateHardwareDevice(OrtHardwareDeviceType_GPU, EPABI_NVIDIA_VENDOR_ID, 0, "NVIDIA", meta,
                                           &f->found_hw[f->num_found_hw]);
        api->ort->ReleaseKeyValuePairs(meta);
        if (st == NULL) f->num_found_hw++;
    }
    if (st == NULL && f->num_found_hw > 0)
        EPABI_LOG(api, f->logger, ORT_LOGGING_LEVEL_INFO,
                  EPABI_EP_NAME ": the host listed no NVIDIA GPU but the %s backend sees %zu; listing them as hardware "
                  "devices of our own (metadata pci_bus_id, cuda_ordinal)", gpu->name, f->num_found_hw);
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
        st = make_found_hw(f, limit - n);
        for (size_t i = 0; i < f->num_found_hw && st == NULL && n < limit; ++i) {
            st = add_device(f, f->found_hw[i], EPABI_DEVICE_GPU, (int)i, &ep_devices[n]);
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

static bool find_memory(struct epabi_factory* f, const OrtMemoryDevice* device, const OrtMemoryInfo* info,
                        struct epabi_memory_record* out) {
    pthread_mutex_lock(&f->lock);
    const struct epabi_memory_record* r = info != NULL ? epabi_memory_find_info(&f->api, &f->memory, info)
                                                       : epabi_memory_find_device(&f->api, &f->memory, device);
    if (r != NULL) *out = *r;
    pthread_mutex_unlock(&f->lock);
    return r != NULL;
}

bool epabi_factory_find_memory_device(struct epabi_factory* f, const OrtMemoryDevice* device,
                                      struct epabi_memory_record* out) {
    return find_memory(f, device, NULL, out);
}

bool epabi_factory_find_memory_info(struct epabi_factory* f, const OrtMemoryInfo* info,
                                    struct epabi_memory_record* out) {
    return find_memory(f, NULL, info, out);
}
