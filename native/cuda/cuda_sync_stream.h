/*
 * cuda_sync_stream.h - OrtSyncStreamImpl for the GPU EP devices' memory (OrtEpFactory::CreateSyncStreamForDevice,
 * ORT 1.23+): a non-blocking CUstream of the memory's GPU, with CUevent notifications.
 *
 * How ONNX Runtime uses it (ep_plugin_provider_interfaces.cc): when the factory says IsStreamAware, ORT creates
 * one stream per session and non-CPU memory device of ours, runs its copies for that device on it (our data
 * transfer's CopyTensors receives it: cuMemcpyAsync), and orders other streams after it with notifications:
 * Activate records the event, WaitOnDevice makes the consumer's stream wait for it, WaitOnHost blocks the
 * host. The EP's compute runs on its own per-thread stream, which waits for the kernel context's stream
 * (KernelContext_GetGPUComputeStream) before a run (ep.c).
 *
 * ORT dereferences what CreateSyncStreamForDevice returns, so a stream-aware factory must return one for every
 * GPU-typed memory it declared: for memory that is not CUDA memory (the software adapter's) the stream has a
 * NULL handle and its notifications do nothing.
 *
 * Ownership: the host calls Release (stream) and Release (notification). Thread-safety: a stream and its
 * notifications belong to one session run at a time (ORT's guarantee).
 */
#ifndef EPABI_CUDA_SYNC_STREAM_H
#define EPABI_CUDA_SYNC_STREAM_H

#include "api.h"
#include "cuda_device.h"

/* device NULL: a stream with a NULL handle (host-memory device). Errors: ORT_EP_FAIL from the driver,
 * ORT_FAIL when out of memory. */
OrtStatus* epabi_sync_stream_create(const struct epabi_api* api, const struct epabi_cuda_device* device,
                                    OrtSyncStreamImpl** out);

#endif
