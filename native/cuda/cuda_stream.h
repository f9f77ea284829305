/*
 * cuda_stream.h - the CUDA backend of stream.h: a CUstream of one GPU.
 *
 *   launch        the CUDA kernels of the launch's kind (cuda_kernels.h), asynchronously
 *   capture       cuStreamBeginCapture in thread-local mode (other threads may keep using CUDA while this
 *                 one captures), cuStreamEndCapture + cuGraphInstantiate; nothing is executed while capturing
 *   replay        cuGraphLaunch on the stream
 *   alloc_async   cuMemAllocFromPoolAsync from the device's default memory pool (arena.use_cuda_mempool=1);
 *                 inside a capture these become the graph's own memory nodes
 *   read_to_host  waits for the stream, then copies device to host
 *   write_from_host  cuMemcpyHtoDAsync on the stream (host-resident fused-node inputs)
 *
 * The stream is created non-blocking (it never synchronizes with the legacy default stream, which other
 * threads' synchronous copies use while this one captures). A user's stream (user_compute_stream) is adopted:
 * used as is and never destroyed. Each stream owns a cuBLAS handle bound to it, with its own workspace
 * (cublasSetWorkspace), so a GEMM allocates nothing inside a capture; likewise a cuDNN handle with its workspace
 * when the EP runs Conv through cuDNN (cuda_cudnn.h).
 *
 * launch, alloc_async, free_async, read_to_host and write_from_host are issued only inside a run, where ep.c has made the
 * device current (so the per-launch path pushes no context); every other call makes the stream's device
 * current for its duration, and destroy may run on any thread.
 * Ownership and thread-safety as stream.h.
 */
#ifndef EPABI_CUDA_STREAM_H
#define EPABI_CUDA_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "cuda_cudnn.h"
#include "cuda_device.h"
#include "stream.h"

/* What a stream sets up beyond its device's libraries. */
struct epabi_cuda_stream_extras {
    const struct epabi_cudnn* cudnn;   /* non-NULL: a cuDNN handle and workspace for Conv (cuda_cudnn.h) */
    const OrtLogger* logger;           /* the EP's session logger, for the stream's set-up lines */
};

/* NULL and *status set on failure (stream, cuBLAS handle or kernel module creation; NVRTC compiles the
 * device's kernels here on first use, never inside a capture). extras may be NULL. A cuDNN that cannot be set up
 * is no failure: one WARNING, and the stream's convs run our kernels. */
struct epabi_stream* epabi_stream_cuda_create(const struct epabi_api* api, const struct epabi_cuda_device* device,
                                              bool adopt_user, uintptr_t user_handle,
                                              const struct epabi_cuda_stream_extras* extras, OrtStatus** status);

/* Makes the CUDA stream s wait (on the device) for the work queued so far on `producer` (another CUstream of the
 * same GPU, e.g. ONNX Runtime's sync stream that copied the inputs). Not while capturing. */
OrtStatus* epabi_stream_cuda_wait_for(struct epabi_stream* s, epabi_cu_stream producer);

/* Each stream's cuBLAS (and cuBLASLt) workspace. cuBLAS picks its kernel by the workspace it may use: on the H200
 * (cuBLAS 13.1) magika's conv GEMM, m=508 n=512 k=1280, got a SIMT kernel of 35.9 us with 4 MiB, but a split-K
 * xmma kernel of 19.4 us plus a 2.8 us reduction with 32 MiB, as with cuBLAS's own default. 32 MiB is what
 * PyTorch gives cuBLAS on Hopper. */
enum { EPABI_CUBLAS_WORKSPACE_BYTES = 32 << 20 };

#endif
