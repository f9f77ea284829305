/*
 * ep_factory.h - epabi's OrtEpFactory: identity, device enumeration, CreateEp/ReleaseEp.
 *
 * Ownership: created by CreateEpFactories, destroyed by ReleaseEpFactory (entry.c). The factory owns the
 * memory infos it attached to EP devices, the virtual hardware device it created, one reference to the
 * host-memory arena (shared with the allocators it hands out and the plans EPs compile) and the software
 * device's data transfer; the host owns the OrtEpDevices. Thread-safety: `lock` guards the device table,
 * the memory infos and the data transfer; the API block is read-only after creation.
 */
#ifndef EPABI_EP_FACTORY_H
#define EPABI_EP_FACTORY_H

#include <pthread.h>
#include <stdbool.h>

#include "api.h"
#include "arena.h"
#include "ep_data_transfer.h"

#define EPABI_EP_NAME "EpAbiExecutionProvider"
#define EPABI_VENDOR "epabi"
#define EPABI_MAX_DEVICES 16
#define EPABI_GPU_MEMORY_NAME "EpAbi_GPU"
#define EPABI_GPU_READONLY_MEMORY_NAME "EpAbi_GPU_readonly"
#define EPABI_GPU_PINNED_MEMORY_NAME "EpAbi_GPU_pinned"
#define EPABI_SOFTWARE_MEMORY_NAME "EpAbi_Software"

enum epabi_device_kind { EPABI_DEVICE_GPU = 0, EPABI_DEVICE_SOFTWARE = 1, EPABI_DEVICE_VIRTUAL = 2 };

struct epabi_device_record {
    const OrtHardwareDevice* hw;
    enum epabi_device_kind kind;
    int ordinal;                       /* index among the GPUs we listed; 0 otherwise */
    const OrtMemoryDevice* memory;     /* its DEFAULT memory (the first memory info attached), NULL: host memory */
};

struct epabi_factory {
    OrtEpFactory base;                 /* first member: the host's OrtEpFactory* is a struct epabi_factory* */
    struct epabi_api api;
    const OrtLogger* logger;           /* the host's default logger; valid for the library's lifetime */

    pthread_mutex_t lock;
    struct epabi_device_record devices[EPABI_MAX_DEVICES];
    size_t num_devices;
    OrtMemoryInfo* memory_infos[4 * EPABI_MAX_DEVICES];
    size_t num_memory_infos;
    OrtHardwareDevice* virtual_hw;     /* made with OrtEpApi::CreateHardwareDevice when allowed */
    /* GPUs the host did not pass but the CUDA driver sees (containers and VMs without DRM nodes), made with
     * OrtEpApi::CreateHardwareDevice at the first enumeration that needs them; index = CUDA ordinal */
    OrtHardwareDevice* cuda_hw[EPABI_MAX_DEVICES];
    size_t num_cuda_hw;

    struct epabi_arena* arena;         /* host memory for the software device; one reference held here */
    const OrtMemoryInfo* software_memory_info;   /* one of memory_infos, or NULL when none is registered */
    struct epabi_data_transfer data_transfer;     /* initialized once software_memory_info exists */
};

/* Returns NULL on allocation failure. */
struct epabi_factory* epabi_factory_create(const struct epabi_api* api, const OrtLogger* logger);

/* Releases, in this order: memory infos, the virtual hardware device, the arena reference, the lock,
 * the factory. */
void epabi_factory_destroy(struct epabi_factory* f);

/* Device enumeration (ep_devices.c): fills ep_devices[0..max) and records what it listed. */
OrtStatus* epabi_factory_list_devices(struct epabi_factory* f, const OrtHardwareDevice* const* devices,
                                      size_t num_devices, OrtEpDevice** ep_devices, size_t max_ep_devices,
                                      size_t* num_ep_devices);

/* Finds the record of a hardware device we listed; false when it is not ours. */
bool epabi_factory_find_device(struct epabi_factory* f, const OrtHardwareDevice* hw,
                               struct epabi_device_record* out);

#endif
