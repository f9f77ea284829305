/*
 * cuda_memory.h - a GPU EP device's memory for ONNX Runtime: allocator operations (ep_allocator.h) for its
 * memory kinds (EpAbi_GPU and EpAbi_GPU_readonly: cuMemAlloc/cuMemFree; EpAbi_GPU_pinned, host-accessible:
 * cuMemAllocHost/cuMemFreeHost) in the device's primary context, and copies for the data transfer.
 *
 * Real hosts create these allocators at registration, so opening one never needs the driver: the device is
 * looked up at the first Alloc, and without it Alloc returns NULL after one WARNING naming the reason.
 * Thread-safety: every operation may be called concurrently.
 */
#ifndef EPABI_CUDA_MEMORY_H
#define EPABI_CUDA_MEMORY_H

#include "api.h"
#include "ep_allocator.h"
#include "memory_kinds.h"

/* Operations and a context for the memory of `memory` (its kind and ordinal). ORT_FAIL when out of memory. */
OrtStatus* epabi_cuda_allocator_open(const struct epabi_api* api, const OrtLogger* logger,
                                     const struct epabi_memory_record* memory, const struct epabi_alloc_ops** ops,
                                     void** ctx);

/* cuMemcpy (unified addressing infers the direction) on GPU ordinal's context: synchronous, or ordered on the
 * host's sync stream when it gives one (cuda_sync_stream.h). Errors: ORT_EP_FAIL from the driver. */
OrtStatus* epabi_cuda_copy(const struct epabi_api* api, int ordinal, void* dst, const void* src, size_t bytes,
                           void* stream);

#endif
