/*
 * ep_factory.h - epabi's OrtEpFactory: identity, device enumeration, CreateEp/ReleaseEp.
 *
 * Ownership: created by CreateEpFactories, destroyed by ReleaseEpFactory (entry.c). The factory owns the
 * memory infos it attached to EP devices, the hardware devices it created, one reference to the host-memory
 * arena (shared with the allocators it hands out and the plans EPs compile) and the data transfer; the host
 * owns the OrtEpDevices. The block registry (alloc_registry.h) is shared with every allocator it hands out and every
 * graph manager of its EPs (one reference each). Thread-safety: `lock` guards the device table and the memory table; the API block is
 * read-only after creation.
 */
#ifndef EPABI_EP_FACTORY_H
#define EPABI_EP_FACTORY_H

#include <pthread.h>
#include <stdbool.h>

#include "alloc_registry.h"
#include "api.h"
#include "arena.h"
#include "ep_data_transfer.h"
#include "memory_kinds.h"

#define EPABI_EP_NAME "EpAbiExecutionProvider"   /* the one place; option prefixes derive from it (options.c) */
#define EPABI_VENDOR "epabi"
#define EPABI_MAX_DEVICES 16

struct epabi_device_record {
    const OrtHardwareDevice* hw;
    enum epabi_device_kind kind;
    int ordinal;                       /* the GPU's CUDA ordinal; 0 otherwise */
    const OrtMemoryDevice* memory;     /* its DEFAULT memory (memory_kinds.h), NULL: it computes in host memory */
};

struct epabi_factory {
    OrtEpFactory base;                 /* first member: the host's OrtEpFactory* is a struct epabi_factory* */
    struct epabi_api api;
    const OrtLogger* logger;           /* the host's default logger; valid for the library's lifetime */
    pthread_mutex_t lock;
    struct epabi_device_record devices[EPABI_MAX_DEVICES];
    size_t num_devices;
    struct epabi_memory_table memory;  /* every memory info attached to our EP devices */
    OrtHardwareDevice* virtual_hw;     /* made with OrtEpApi::CreateHardwareDevice when allowed */
    /* GPUs the host did not pass but a backend sees (containers and VMs without DRM nodes), made with
     * OrtEpApi::CreateHardwareDevice at the first enumeration that needs them; index = CUDA ordinal */
    OrtHardwareDevice* found_hw[EPABI_MAX_DEVICES];
    size_t num_found_hw;
    struct epabi_arena* arena;         /* host memory: plans of host-memory devices, the software device's memory */
    struct epabi_data_transfer data_transfer;   /* handed out once some memory info is attached */
    struct epabi_alloc_registry* blocks;        /* the blocks its allocators handed out, graphs' holds on them */
};

/* Returns NULL on allocation failure. */
struct epabi_factory* epabi_factory_create(const struct epabi_api* api, const OrtLogger* logger);

/* Releases, in this order: memory infos, the hardware devices it made, the arena and block-registry references,
 * the lock, the factory. */
void epabi_factory_destroy(struct epabi_factory* f);

/* Device enumeration (ep_devices.c): fills ep_devices[0..max) and records what it listed. */
OrtStatus* epabi_factory_list_devices(struct epabi_factory* f, const OrtHardwareDevice* const* devices,
                                      size_t num_devices, OrtEpDevice** ep_devices, size_t max_ep_devices,
                                      size_t* num_ep_devices);

/* Finds the record of a hardware device we listed; false when it is not ours. */
bool epabi_factory_find_device(struct epabi_factory* f, const OrtHardwareDevice* hw,
                               struct epabi_device_record* out);

/* The record of a memory device or memory info of ours, copied out under the lock; false when not ours. */
bool epabi_factory_find_memory_device(struct epabi_factory* f, const OrtMemoryDevice* device,
                                      struct epabi_memory_record* out);
bool epabi_factory_find_memory_info(struct epabi_factory* f, const OrtMemoryInfo* info,
                                    struct epabi_memory_record* out);

#endif
