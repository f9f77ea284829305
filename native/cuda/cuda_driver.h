/*
 * cuda_driver.h - the CUDA driver API, loaded at run time with dlopen (libcuda.so.1 from the system: the
 * driver library always comes with the NVIDIA driver, never from a toolkit or a wheel). One build runs
 * with and without a GPU: without the driver, epabi_cuda_driver() answers NULL and a reason.
 *
 * The handful of driver types are declared here as opaque pointers / integers with the driver's sizes, so
 * nothing from the CUDA toolkit is needed at build time. Versioned entry points (_v2, _ptsz...) are
 * looked up by the names CUDA 12 and 13 both export. Every member is required (a driver without one is not used)
 * except the optional ones, NULL when the driver lacks them, which turns their feature off: the memory-pool
 * calls (arena.use_cuda_mempool), ThreadExchangeStreamCaptureMode (arena growth inside a capture),
 * StreamIsCapturing (a user's stream the caller captures: taken as never captured without it),
 * GraphGetNodes (a captured graph's node count in diagnostics), LaunchKernelEx (programmatic dependent launch) and
 * EventElapsedTime (timing cuDNN against the GEMM form of a conv: without it cuDNN is taken).
 * Thread-safety: loaded once (pthread_once); the table is read-only afterwards.
 */
#ifndef EPABI_CUDA_DRIVER_H
#define EPABI_CUDA_DRIVER_H

#include <stddef.h>

typedef int epabi_cu_result;               /* CUresult: 0 = CUDA_SUCCESS */
typedef int epabi_cu_device;               /* CUdevice */
typedef void* epabi_cu_context;            /* CUcontext */
typedef unsigned long long epabi_cu_ptr;   /* CUdeviceptr */
typedef void* epabi_cu_stream;             /* CUstream; NULL is the legacy default stream */
typedef void* epabi_cu_event;              /* CUevent */
typedef void* epabi_cu_module;             /* CUmodule */
typedef void* epabi_cu_function;           /* CUfunction */
typedef void* epabi_cu_graph;              /* CUgraph */
typedef void* epabi_cu_graph_exec;         /* CUgraphExec */
typedef void* epabi_cu_mempool;            /* CUmemoryPool */

/* Enum values of the driver API used here (cuda.h, stable since CUDA 10). */
enum {
    EPABI_CU_STREAM_NON_BLOCKING = 1,               /* CU_STREAM_NON_BLOCKING */
    EPABI_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,  /* CU_STREAM_CAPTURE_MODE_THREAD_LOCAL */
    EPABI_CU_STREAM_CAPTURE_MODE_RELAXED = 2,       /* CU_STREAM_CAPTURE_MODE_RELAXED */
    EPABI_CU_STREAM_CAPTURE_STATUS_NONE = 0,        /* CU_STREAM_CAPTURE_STATUS_NONE (ACTIVE 1, INVALIDATED 2) */
    EPABI_CU_DEVICE_ATTRIBUTE_CC_MAJOR = 75,        /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
    EPABI_CU_DEVICE_ATTRIBUTE_CC_MINOR = 76,
    EPABI_CU_DEVICE_ATTRIBUTE_MEMPOOLS_SUPPORTED = 115,
    EPABI_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,     /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */
    EPABI_CU_EVENT_DISABLE_TIMING = 2,
    EPABI_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6   /* CUlaunchAttributeID (CUDA 11.8) */
};

/* CUlaunchAttribute and CUlaunchConfig of cuLaunchKernelEx (CUDA 11.8), with the driver's layout: the attribute's id
 * padded to 8 bytes, then its 64-byte value union (programmaticStreamSerializationAllowed is its first int). */
struct epabi_cu_launch_attribute {
    int id;
    char pad[4];
    union {
        int value;
        char raw[64];
    } value;
};
_Static_assert(sizeof(struct epabi_cu_launch_attribute) == 72, "CUlaunchAttribute is 72 bytes");

struct epabi_cu_launch_config {
    unsigned grid_x, grid_y, grid_z;
    unsigned block_x, block_y, block_z;
    unsigned shared_bytes;
    epabi_cu_stream stream;
    const struct epabi_cu_launch_attribute* attrs;
    unsigned num_attrs;
};
_Static_assert(sizeof(struct epabi_cu_launch_config) == 56 || sizeof(void*) != 8, "CUlaunchConfig is 56 bytes");

struct epabi_cuda_driver {
    int version;   /* cuDriverGetVersion, e.g. 13000 */
    epabi_cu_result (*Init)(unsigned flags);
    epabi_cu_result (*DriverGetVersion)(int* version);
    epabi_cu_result (*DeviceGetCount)(int* count);
    epabi_cu_result (*DeviceGet)(epabi_cu_device* device, int ordinal);
    epabi_cu_result (*DeviceGetAttribute)(int* value, int attribute, epabi_cu_device device);
    epabi_cu_result (*DeviceGetName)(char* name, int len, epabi_cu_device device);
    epabi_cu_result (*DeviceGetPCIBusId)(char* bus_id, int len, epabi_cu_device device);
    epabi_cu_result (*DeviceTotalMem)(size_t* bytes, epabi_cu_device device);
    epabi_cu_result (*DevicePrimaryCtxRetain)(epabi_cu_context* ctx, epabi_cu_device device);
    epabi_cu_result (*CtxPushCurrent)(epabi_cu_context ctx);
    epabi_cu_result (*CtxPopCurrent)(epabi_cu_context* ctx);
    epabi_cu_result (*MemAlloc)(epabi_cu_ptr* ptr, size_t bytes);
    epabi_cu_result (*MemFree)(epabi_cu_ptr ptr);
    epabi_cu_result (*MemAllocHost)(void** ptr, size_t bytes);
    epabi_cu_result (*MemFreeHost)(void* ptr);
    epabi_cu_result (*MemGetInfo)(size_t* free_bytes, size_t* total_bytes);
    epabi_cu_result (*Memcpy)(epabi_cu_ptr dst, epabi_cu_ptr src, size_t bytes);
    epabi_cu_result (*MemcpyHtoD)(epabi_cu_ptr dst, const void* src, size_t bytes);
    epabi_cu_result (*MemcpyDtoH)(void* dst, epabi_cu_ptr src, size_t bytes);
    epabi_cu_result (*MemcpyHtoDAsync)(epabi_cu_ptr dst, const void* src, size_t bytes, epabi_cu_stream stream);
    epabi_cu_result (*MemcpyAsync)(epabi_cu_ptr dst, epabi_cu_ptr src, size_t bytes, epabi_cu_stream stream);
    epabi_cu_result (*MemsetD8Async)(epabi_cu_ptr dst, unsigned char value, size_t count, epabi_cu_stream stream);
    epabi_cu_result (*MemAllocFromPoolAsync)(epabi_cu_ptr* ptr, size_t bytes, epabi_cu_mempool pool,
                                             epabi_cu_stream stream);
    epabi_cu_result (*MemFreeAsync)(epabi_cu_ptr ptr, epabi_cu_stream stream);
    epabi_cu_result (*DeviceGetDefaultMemPool)(epabi_cu_mempool* pool, epabi_cu_device device);
    epabi_cu_result (*MemPoolSetAttribute)(epabi_cu_mempool pool, int attribute, void* value);
    epabi_cu_result (*StreamCreate)(epabi_cu_stream* stream, unsigned flags);
    epabi_cu_result (*StreamDestroy)(epabi_cu_stream stream);
    epabi_cu_result (*StreamSynchronize)(epabi_cu_stream stream);
    epabi_cu_result (*StreamWaitEvent)(epabi_cu_stream stream, epabi_cu_event event, unsigned flags);
    epabi_cu_result (*StreamBeginCapture)(epabi_cu_stream stream, int mode);
    epabi_cu_result (*StreamEndCapture)(epabi_cu_stream stream, epabi_cu_graph* graph);
    epabi_cu_result (*ThreadExchangeStreamCaptureMode)(int* mode);
    epabi_cu_result (*StreamIsCapturing)(epabi_cu_stream stream, int* status);
    epabi_cu_result (*LaunchKernelEx)(const struct epabi_cu_launch_config* config, epabi_cu_function fn, void** params,
                                      void** extra);
    epabi_cu_result (*EventCreate)(epabi_cu_event* event, unsigned flags);
    epabi_cu_result (*EventDestroy)(epabi_cu_event event);
    epabi_cu_result (*EventRecord)(epabi_cu_event event, epabi_cu_stream stream);
    epabi_cu_result (*EventSynchronize)(epabi_cu_event event);
    epabi_cu_result (*EventElapsedTime)(float* ms, epabi_cu_event start, epabi_cu_event end);   /* optional */
    epabi_cu_result (*GraphInstantiate)(epabi_cu_graph_exec* exec, epabi_cu_graph graph, unsigned long long flags);
    epabi_cu_result (*GraphLaunch)(epabi_cu_graph_exec exec, epabi_cu_stream stream);
    epabi_cu_result (*GraphExecDestroy)(epabi_cu_graph_exec exec);
    epabi_cu_result (*GraphDestroy)(epabi_cu_graph graph);
    epabi_cu_result (*GraphGetNodes)(epabi_cu_graph graph, void** nodes, size_t* count);
    epabi_cu_result (*ModuleLoadData)(epabi_cu_module* module, const void* image);
    epabi_cu_result (*ModuleUnload)(epabi_cu_module module);
    epabi_cu_result (*ModuleGetFunction)(epabi_cu_function* fn, epabi_cu_module module, const char* name);
    epabi_cu_result (*LaunchKernel)(epabi_cu_function fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz, unsigned shared_bytes, epabi_cu_stream stream,
                                    void** params, void** extra);
    epabi_cu_result (*GetErrorString)(epabi_cu_result error, const char** text);
};

/* The driver table after a successful cuInit(0), or NULL with why (NUL-terminated, truncated to why_len)
 * saying what is missing. The library stays loaded for the life of the process. */
const struct epabi_cuda_driver* epabi_cuda_driver(char* why, size_t why_len);

/* A printable name for a CUresult ("CUDA error" when the driver gives none). */
const char* epabi_cuda_error_text(const struct epabi_cuda_driver* cu, epabi_cu_result r);

#endif
