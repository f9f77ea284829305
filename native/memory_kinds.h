/*
 * memory_kinds.h - every kind of memory our EP devices declare to ONNX Runtime, in one table, and the memory
 * infos the factory attached.
 *
 * A memory kind says what ORT is told (name, device type, memory type, allocator type) and which EP devices
 * carry it; the backend of those devices (backend.h) says how to allocate it and copy to and from it. An
 * attached memory info is recorded with the OrtMemoryDevice ORT derives from it, and is found again by that
 * device (MemoryDevice_AreEqual), also when ORT hands us an equal copy instead of our own pointer.
 * DEFAULT and read-only device memory share one OrtMemoryDevice (the allocator type is not part of it), so an
 * allocator request is matched on the memory info's allocator type too.
 *
 * Ownership: the table owns the OrtMemoryInfos it created (released with the factory); the host owns the EP
 * devices they are attached to. Thread-safety: the factory's lock guards a table.
 */
#ifndef EPABI_MEMORY_KINDS_H
#define EPABI_MEMORY_KINDS_H

#include <stdbool.h>
#include <stddef.h>

#include "api.h"

enum epabi_device_kind { EPABI_DEVICE_GPU = 0, EPABI_DEVICE_SOFTWARE = 1, EPABI_DEVICE_VIRTUAL = 2 };

enum epabi_memory_kind {
    EPABI_MEMORY_SOFTWARE,        /* the software adapter's own memory (EPABI_SOFTWARE_DEVICE_MEMORY=device) */
    EPABI_MEMORY_GPU,             /* a GPU's device memory, where plans compute */
    EPABI_MEMORY_GPU_READONLY,    /* the same memory, for ORT's read-only allocations (initializers) */
    EPABI_MEMORY_GPU_PINNED,      /* page-locked host memory of a GPU, for staging copies */
    EPABI_MEMORY_KINDS
};

struct epabi_memory_kind_info {
    const char* name;                      /* the memory info's name */
    enum epabi_device_kind device;         /* the EP devices that carry it */
    OrtMemoryInfoDeviceType device_type;
    OrtDeviceMemoryType memory_type;
    OrtAllocatorType allocator_type;       /* never OrtArenaAllocator: hosts 1.31+ refuse plugin "arenas" */
    bool host_accessible;                  /* the host reads and writes it directly (a copy is a memmove) */
};

/* Indexed by enum epabi_memory_kind. */
extern const struct epabi_memory_kind_info epabi_memory_kinds[EPABI_MEMORY_KINDS];

/* The vendor id our memory infos carry: NVIDIA's, also for the software adapter, which stands in for a GPU. */
enum { EPABI_MEMORY_VENDOR_ID = EPABI_NVIDIA_VENDOR_ID };

struct epabi_memory_record {
    enum epabi_memory_kind kind;
    int ordinal;                           /* the GPU's CUDA ordinal; 0 for the software adapter */
    OrtMemoryInfo* info;                   /* owned */
    const OrtMemoryDevice* device;         /* OrtEpApi::MemoryInfo_GetMemoryDevice(info) */
};

enum { EPABI_MAX_MEMORY_RECORDS = 64 };

struct epabi_memory_table {
    struct epabi_memory_record records[EPABI_MAX_MEMORY_RECORDS];
    size_t n;
};

/* Attaches the memory info of (kind, ordinal) to dev, creating and recording it on first use (a new
 * enumeration reuses the record: nothing grows). *out receives the record. Errors: the host's, or ORT_FAIL when
 * the table is full. */
OrtStatus* epabi_memory_attach(const struct epabi_api* api, struct epabi_memory_table* t, OrtEpDevice* dev,
                               enum epabi_memory_kind kind, int ordinal, const struct epabi_memory_record** out);

/* The record of a memory info the host passes (ours or an equal copy): same memory device and allocator type. */
const struct epabi_memory_record* epabi_memory_find_info(const struct epabi_api* api,
                                                         const struct epabi_memory_table* t,
                                                         const OrtMemoryInfo* info);

/* The record of a memory device; the first attached wins (DEFAULT before read-only). NULL when not ours. */
const struct epabi_memory_record* epabi_memory_find_device(const struct epabi_api* api,
                                                           const struct epabi_memory_table* t,
                                                           const OrtMemoryDevice* device);

/* Host memory for a copy: CPU memory, or host-accessible memory of any device. */
bool epabi_memory_is_host(const struct epabi_api* api, const OrtMemoryDevice* device);

/* Releases every memory info of the table. */
void epabi_memory_release_all(const struct epabi_api* api, struct epabi_memory_table* t);

#endif
