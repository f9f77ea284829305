/*
 * cuda_kernels.h - the CUDA kernels of every launch kind (kernels/launch_args.h): CUDA C source compiled
 * with NVRTC once per device and cached for the process, plus cuBLAS for MatMul/Gemm and cuBLASLt for large
 * linear steps (kernels/linear.h).
 *
 * The source (cuda_kernels.cu) and launch_args.h are embedded in the library at build time (CMake turns
 * them into byte arrays), and NVRTC compiles them for the device's compute capability at the first use of
 * a device; the module stays loaded (in the device's primary context) until the process ends.
 *
 * Thread-safety: epabi_cuda_module_get may be called from any thread (one compilation per device, under a
 * lock); epabi_cuda_launch is safe on distinct streams concurrently.
 */
#ifndef EPABI_CUDA_KERNELS_H
#define EPABI_CUDA_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

#include "api.h"
#include "cuda_cudnn.h"
#include "cuda_device.h"
#include "cuda_libs.h"
#include "kernel.h"
#include "launch_args.h"

/* Embedded at build time (generated file): NUL-terminated. */
extern const char epabi_cuda_kernels_source[];
extern const char epabi_launch_args_source[];
extern const char epabi_cuda_math_source[];   /* cuda_math.cuh */

struct epabi_cuda_module;   /* one compiled module of one device */

/* The module of `device` (its architecture, its primary context), compiled on first use. Errors: ORT_EP_FAIL
 * with NVRTC's log on a compile error, or the driver's error. */
OrtStatus* epabi_cuda_module_get(const struct epabi_api* api, const struct epabi_cuda_device* device,
                                 struct epabi_cuda_module** out);

/* Where one launch goes. The device's primary context is current on the calling thread. */
struct epabi_cuda_launch_env {
    const struct epabi_api* api;
    const struct epabi_cuda_libs* libs;
    struct epabi_cuda_module* module;
    epabi_cu_stream stream;
    epabi_cublas_handle cublas;   /* bound to `stream`; NULL: MatMul/Gemm use our own kernel */
    epabi_cublaslt_handle cublaslt;   /* NULL: no cuBLASLt (large linear steps: GEMM + an epilogue kernel) */
    void* workspace;              /* cuBLAS's workspace, shared by cuBLASLt (both run in `stream`'s order) */
    size_t workspace_bytes;
    struct epabi_cudnn_stream* cudnn;   /* bound to `stream` (cuda_cudnn.h); NULL: Conv runs our own kernels */
    bool pdl;                     /* launch our kernels with programmatic stream serialization (cuda_launch.c) */
};

/* Issues the kernels of one launch block on env->stream (asynchronously; no host synchronization, no
 * allocation, so it may run inside a stream capture). Errors: ORT_EP_FAIL naming the kind and the CUDA
 * or cuBLAS error; ORT_NOT_IMPLEMENTED for a dtype/op combination the CUDA kernels do not cover (which the
 * kernel descriptor's cuda predicate refuses at GetCapability, so it is never reached from a compiled plan). */
OrtStatus* epabi_cuda_launch(const struct epabi_cuda_launch_env* env, enum epabi_launch_kind kind, const void* args);

#endif
