#include "cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct epabi_cuda_driver g_driver;   /* written once under g_once, read-only afterwards */
static const struct epabi_cuda_driver* g_loaded;
static char g_why[256];

static void* symbol(void* lib, const char* name) {
    void* p = dlsym(lib, name);
    if (p == NULL) snprintf(g_why, sizeof g_why, "libcuda.so.1 lacks %s", name);
    return p;
}

static void load(void) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(g_why, sizeof g_why, "the NVIDIA driver library libcuda.so.1 is not installed (%s)", dlerror());
        return;
    }
    struct epabi_cuda_driver d;
    memset(&d, 0, sizeof d);
    /* object-to-function pointer conversion through memcpy: ISO C has no direct cast */
#define LOAD(field, name)                         \
    do {                                          \
        void* p_ = symbol(lib, name);             \
        if (p_ == NULL) return;                   \
        memcpy(&d.field, &p_, sizeof p_);         \
    } while (0)
    LOAD(Init, "cuInit");
    LOAD(DriverGetVersion, "cuDriverGetVersion");
    LOAD(DeviceGetCount, "cuDeviceGetCount");
    LOAD(DeviceGet, "cuDeviceGet");
    LOAD(DeviceGetAttribute, "cuDeviceGetAttribute");
    LOAD(DeviceGetName, "cuDeviceGetName");
    LOAD(DeviceGetPCIBusId, "cuDeviceGetPCIBusId");
    LOAD(DeviceTotalMem, "cuDeviceTotalMem_v2");
    LOAD(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    LOAD(CtxPushCurrent, "cuCtxPushCurrent_v2");
    LOAD(CtxPopCurrent, "cuCtxPopCurrent_v2");
    LOAD(MemAlloc, "cuMemAlloc_v2");
    LOAD(MemFree, "cuMemFree_v2");
    LOAD(MemAllocHost, "cuMemAllocHost_v2");
    LOAD(MemFreeHost, "cuMemFreeHost");
    LOAD(MemGetInfo, "cuMemGetInfo_v2");
    LOAD(Memcpy, "cuMemcpy");
    LOAD(MemcpyHtoD, "cuMemcpyHtoD_v2");
    LOAD(MemcpyDtoH, "cuMemcpyDtoH_v2");
    LOAD(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    LOAD(MemcpyAsync, "cuMemcpyAsync");
    LOAD(MemsetD8Async, "cuMemsetD8Async");
    LOAD(StreamCreate, "cuStreamCreate");
    LOAD(StreamDestroy, "cuStreamDestroy_v2");
    LOAD(StreamSynchronize, "cuStreamSynchronize");
    LOAD(StreamWaitEvent, "cuStreamWaitEvent");
    LOAD(StreamBeginCapture, "cuStreamBeginCapture_v2");
    LOAD(StreamEndCapture, "cuStreamEndCapture");
    LOAD(EventCreate, "cuEventCreate");
    LOAD(EventDestroy, "cuEventDestroy_v2");
    LOAD(EventRecord, "cuEventRecord");
    LOAD(EventSynchronize, "cuEventSynchronize");
    LOAD(GraphInstantiate, "cuGraphInstantiateWithFlags");
    LOAD(GraphLaunch, "cuGraphLaunch");
    LOAD(GraphExecDestroy, "cuGraphExecDestroy");
    LOAD(GraphDestroy, "cuGraphDestroy");
    LOAD(ModuleLoadData, "cuModuleLoadData");
    LOAD(ModuleUnload, "cuModuleUnload");
    LOAD(ModuleGetFunction, "cuModuleGetFunction");
    LOAD(LaunchKernel, "cuLaunchKernel");
    LOAD(GetErrorString, "cuGetErrorString");
#undef LOAD
    /* optional: newer than the CUDA 10 baseline or used only by one feature; a missing one turns that off */
#define LOAD_OPTIONAL(field, name)                \
    do {                                          \
        void* p_ = dlsym(lib, name);              \
        memcpy(&d.field, &p_, sizeof p_);         \
    } while (0)
    LOAD_OPTIONAL(MemAllocFromPoolAsync, "cuMemAllocFromPoolAsync");   /* arena.use_cuda_mempool (11.2) */
    LOAD_OPTIONAL(MemFreeAsync, "cuMemFreeAsync");
    LOAD_OPTIONAL(DeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool");
    LOAD_OPTIONAL(MemPoolSetAttribute, "cuMemPoolSetAttribute");
    LOAD_OPTIONAL(ThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode");   /* relaxed arena growth */
    LOAD_OPTIONAL(GraphGetNodes, "cuGraphGetNodes");   /* diagnostics: a captured graph's node count */
    LOAD_OPTIONAL(StreamIsCapturing, "cuStreamIsCapturing");   /* a user's stream the caller captures */
    LOAD_OPTIONAL(LaunchKernelEx, "cuLaunchKernelEx");   /* programmatic dependent launch (11.8) */
    LOAD_OPTIONAL(EventElapsedTime, "cuEventElapsedTime");   /* Conv: timing cuDNN against the GEMM form */
#undef LOAD_OPTIONAL
    epabi_cu_result r = d.Init(0);
    if (r != 0) {
        const char* text = NULL;
        if (d.GetErrorString(r, &text) != 0 || text == NULL) text = "unknown error";
        snprintf(g_why, sizeof g_why, "cuInit failed: %s (CUDA error %d)", text, r);
        return;
    }
    if (d.DriverGetVersion(&d.version) != 0) d.version = 0;
    g_driver = d;
    g_loaded = &g_driver;
}

const struct epabi_cuda_driver* epabi_cuda_driver(char* why, size_t why_len) {
    pthread_once(&g_once, load);
    if (g_loaded == NULL && why != NULL && why_len > 0) snprintf(why, why_len, "%s", g_why);
    return g_loaded;
}

const char* epabi_cuda_error_text(const struct epabi_cuda_driver* cu, epabi_cu_result r) {
    const char* text = NULL;
    if (cu == NULL || cu->GetErrorString(r, &text) != 0 || text == NULL) return "CUDA error";
    return text;
}
