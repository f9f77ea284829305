/*
 * gpu_allocator.h - the OrtAllocator for a GPU EP device's memory infos (EpAbi_GPU, EpAbi_GPU_readonly:
 * cuMemAlloc/cuMemFree; EpAbi_GPU_pinned, host-accessible: cuMemAllocHost/cuMemFreeHost) in the device's primary
 * context (cuda_device.h), through the driver loaded at run time. Real hosts create these at registration, so
 * creation never needs the driver: the device is looked up at the first Alloc, and without it Alloc returns
 * NULL after one WARNING naming the reason.
 *
 * Ownership: created by OrtEpFactory::CreateAllocator, freed by ReleaseAllocator. The memory info is the host's or ours and must outlive the allocator.
 * Thread-safety: all members may be called concurrently.
 */
#ifndef EPABI_GPU_ALLOCATOR_H
#define EPABI_GPU_ALLOCATOR_H

#include <stdbool.h>

#include "api.h"

OrtStatus* epabi_gpu_allocator_create(const struct epabi_api* api, const OrtLogger* logger, const OrtMemoryInfo* info,
                                      int ordinal, bool pinned, OrtAllocator** out);

/* True when allocator was made by epabi_gpu_allocator_create. */
bool epabi_gpu_allocator_is_ours(const OrtAllocator* allocator);

void epabi_gpu_allocator_destroy(OrtAllocator* allocator);

#endif
