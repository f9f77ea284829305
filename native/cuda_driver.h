/*
 * cuda_driver.h - the CUDA driver API, loaded at run time with dlopen (libcuda.so.1 from the system: the
 * driver library always comes with the NVIDIA driver, never from a toolkit or a wheel). One build runs
 * with and without a GPU: without the driver, epabi_cuda_driver() answers NULL and a reason.
 *
 * Only what the GPU memory allocator needs is declared here; the CUDA backend will add to it.
 * Thread-safety: loaded once (pthread_once); the table is read-only afterwards.
 */
#ifndef EPABI_CUDA_DRIVER_H
#define EPABI_CUDA_DRIVER_H

#include <stddef.h>

typedef int epabi_cu_result;          /* CUresult: 0 = CUDA_SUCCESS */
typedef int epabi_cu_device;          /* CUdevice */
typedef void* epabi_cu_context;       /* CUcontext */
typedef unsigned long long epabi_cu_ptr;   /* CUdeviceptr */

struct epabi_cuda_driver {
    epabi_cu_result (*Init)(unsigned flags);
    epabi_cu_result (*DeviceGetCount)(int* count);
    epabi_cu_result (*DeviceGet)(epabi_cu_device* device, int ordinal);
    epabi_cu_result (*DevicePrimaryCtxRetain)(epabi_cu_context* ctx, epabi_cu_device device);
    epabi_cu_result (*DevicePrimaryCtxRelease)(epabi_cu_device device);
    epabi_cu_result (*CtxPushCurrent)(epabi_cu_context ctx);
    epabi_cu_result (*CtxPopCurrent)(epabi_cu_context* ctx);
    epabi_cu_result (*MemAlloc)(epabi_cu_ptr* ptr, size_t bytes);
    epabi_cu_result (*MemFree)(epabi_cu_ptr ptr);
    epabi_cu_result (*GetErrorString)(epabi_cu_result error, const char** text);
};

/* The driver table after a successful cuInit(0), or NULL with why (NUL-terminated, truncated to why_len)
 * saying what is missing. The library stays loaded for the life of the process. */
const struct epabi_cuda_driver* epabi_cuda_driver(char* why, size_t why_len);

/* A printable name for a CUresult ("CUDA error 2" when the driver gives none). */
const char* epabi_cuda_error_text(const struct epabi_cuda_driver* cu, epabi_cu_result r);

#endif
