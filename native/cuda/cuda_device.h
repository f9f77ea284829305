/*
 * cuda_device.h - one NVIDIA GPU as the CUDA backend sees it: its CUdevice, its primary context (retained
 * once and kept for the life of the process, like the CUDA runtime does), its properties, and the helpers
 * that make it current around every CUDA call on a run's path, whatever device the calling thread had.
 *
 * Memory helpers: the device arena's backing (cuMemAlloc/cuMemFree), constant uploads, and pinned host
 * memory (cuMemAllocHost). Each makes the device current itself, so they may be called from any thread.
 *
 * Thread-safety: epabi_cuda_device_get is safe from any thread (a table under a lock, filled once per
 * ordinal); a device is read-only afterwards. Global state: that table (never freed: primary contexts stay
 * retained until the process exits).
 */
#ifndef EPABI_CUDA_DEVICE_H
#define EPABI_CUDA_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "api.h"
#include "arena.h"
#include "cuda_libs.h"

struct epabi_cuda_device {
    int ordinal;                  /* CUDA device ordinal (the device_id option) */
    epabi_cu_device device;
    epabi_cu_context ctx;         /* primary context, retained */
    int cc_major, cc_minor;       /* compute capability */
    bool mempools;                /* stream-ordered allocation supported (arena.use_cuda_mempool) */
    char name[128];
    char pci_bus_id[32];          /* "0000:19:00.0" as cuDeviceGetPCIBusId writes it */
    size_t total_bytes;
    const struct epabi_cuda_libs* libs;
};

/* GPUs the driver sees; 0 without a driver. */
int epabi_cuda_device_count(void);

/* The device of that ordinal, set up on first use. Errors: ORT_EP_FAIL naming what is missing (no driver,
 * no NVRTC) or the driver's error; ORT_INVALID_ARGUMENT for an ordinal the driver does not know. */
OrtStatus* epabi_cuda_device_get(const struct epabi_api* api, int ordinal, const struct epabi_cuda_device** out);

/* Makes d's primary context current on this thread until epabi_cuda_leave (nesting is fine). */
struct epabi_cuda_scope {
    const struct epabi_cuda_device* device;
    bool pushed;
};
bool epabi_cuda_enter(const struct epabi_cuda_device* d, struct epabi_cuda_scope* scope);
void epabi_cuda_leave(struct epabi_cuda_scope* scope);

/* OrtStatus for a failed driver call: ORT_EP_FAIL "<what> failed: <driver text> (CUDA error <r>)". */
OrtStatus* epabi_cuda_status(const struct epabi_api* api, epabi_cu_result r, const char* what);

/* cuMemAlloc/cuMemFree (and their pinned-host forms) are "unsafe" while the calling thread captures a stream in
 * thread-local or global mode: they would invalidate the capture. Memory a host allocates from our allocators inside
 * a capture window (onnxruntime copies the feeds of the capturing run into fresh device buffers) and arena growth
 * there switch this thread to relaxed mode around the call, as PyTorch's caching allocator and cuBLAS do: the memory
 * is real and outlives the graph, it just is not part of it. No-op on drivers without
 * cuThreadExchangeStreamCaptureMode (CUDA < 10.1). */
struct epabi_cuda_relaxed {
    int mode;
    bool exchanged;
};
void epabi_cuda_relax(const struct epabi_cuda_driver* cu, struct epabi_cuda_relaxed* r);
void epabi_cuda_unrelax(const struct epabi_cuda_driver* cu, struct epabi_cuda_relaxed* r);

/* The device arena's backing (arena.h): chunks from cuMemAlloc on d. */
struct epabi_arena_backing epabi_cuda_arena_backing(const struct epabi_cuda_device* d);

/* A device copy of host bytes (cuMemAlloc + cuMemcpy), or NULL; and its release. */
void* epabi_cuda_upload(const struct epabi_cuda_device* d, const void* host, size_t bytes);
void epabi_cuda_device_free(const struct epabi_cuda_device* d, void* device_ptr);

#endif
