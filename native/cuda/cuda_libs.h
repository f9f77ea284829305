/*
 * cuda_libs.h - the CUDA toolkit libraries the backend uses, loaded at run time with dlopen: the runtime
 * (libcudart), NVRTC (libnvrtc, kernel compilation) and cuBLAS (libcublas, MatMul/Gemm). Nothing of CUDA
 * is needed at build time, and CUDA 12 and 13 both work (sonames .13 then .12 are tried).
 *
 * Where each library is searched, in order (the first that loads wins):
 *   1. EPABI_CUDA_LIB_DIR (one folder), if set;
 *   2. the folders of the nvidia-* and CuPy wheels next to this plugin: <site-packages>/nvidia/cu13/lib,
 *      nvidia/<component>/lib (CUDA 12 wheels), found from this library's own path (dladdr), which sits in
 *      <site-packages>/epabi/ when installed as a wheel;
 *   3. $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64;
 *   4. the system search path (plain soname: LD_LIBRARY_PATH, ld.so.cache).
 * A library that is missing leaves its table NULL and its reason in `why`; the GPU EP device then reports
 * one clear log line and claims no node, and nothing crashes.
 *
 * Thread-safety: loaded once (pthread_once); the tables are read-only afterwards.
 */
#ifndef EPABI_CUDA_LIBS_H
#define EPABI_CUDA_LIBS_H

#include <stddef.h>

#include "cuda_driver.h"

typedef void* epabi_nvrtc_program;   /* nvrtcProgram */
typedef void* epabi_cublas_handle;   /* cublasHandle_t */

struct epabi_nvrtc {
    int major, minor;   /* nvrtcVersion */
    int (*Version)(int* major, int* minor);
    int (*CreateProgram)(epabi_nvrtc_program* prog, const char* src, const char* name, int num_headers,
                         const char* const* headers, const char* const* include_names);
    int (*CompileProgram)(epabi_nvrtc_program prog, int num_options, const char* const* options);
    int (*GetCUBINSize)(epabi_nvrtc_program prog, size_t* size);
    int (*GetCUBIN)(epabi_nvrtc_program prog, char* cubin);
    int (*GetPTXSize)(epabi_nvrtc_program prog, size_t* size);
    int (*GetPTX)(epabi_nvrtc_program prog, char* ptx);
    int (*GetProgramLogSize)(epabi_nvrtc_program prog, size_t* size);
    int (*GetProgramLog)(epabi_nvrtc_program prog, char* log);
    int (*DestroyProgram)(epabi_nvrtc_program* prog);
    const char* (*GetErrorString)(int result);
};

/* cuBLAS enum values (cublas_api.h, stable across CUDA 11-13) */
enum {
    EPABI_CUBLAS_OP_N = 0,
    EPABI_CUBLAS_OP_T = 1
};

struct epabi_cublas {
    int version;
    int (*Create)(epabi_cublas_handle* handle);
    int (*Destroy)(epabi_cublas_handle handle);
    int (*SetStream)(epabi_cublas_handle handle, epabi_cu_stream stream);
    int (*SetWorkspace)(epabi_cublas_handle handle, void* workspace, size_t bytes);
    int (*GetVersion)(epabi_cublas_handle handle, int* version);
    int (*Sgemm)(epabi_cublas_handle handle, int transa, int transb, int m, int n, int k, const float* alpha,
                 const float* a, int lda, const float* b, int ldb, const float* beta, float* c, int ldc);
    int (*SgemmStridedBatched)(epabi_cublas_handle handle, int transa, int transb, int m, int n, int k,
                               const float* alpha, const float* a, int lda, long long stride_a, const float* b,
                               int ldb, long long stride_b, const float* beta, float* c, int ldc, long long stride_c,
                               int batch);
};

struct epabi_cudart {
    int version;   /* cudaRuntimeGetVersion */
    int (*RuntimeGetVersion)(int* version);
};

/* Everything the CUDA backend needs, or NULL members with the reasons. */
struct epabi_cuda_libs {
    const struct epabi_cuda_driver* cu;   /* NULL: no driver */
    const struct epabi_nvrtc* nvrtc;      /* NULL: no NVRTC (no kernels) */
    const struct epabi_cublas* cublas;    /* NULL: no cuBLAS (MatMul/Gemm fall back to our kernels) */
    const struct epabi_cudart* cudart;    /* NULL: no runtime */
    char nvrtc_path[512], cublas_path[512], cudart_path[512];   /* where each was found ("" if not) */
    char why[768];                        /* what is missing, "" when all loaded */
};

/* The libraries, loaded once per process. Never NULL. */
const struct epabi_cuda_libs* epabi_cuda_libs(void);

/* True when the backend can run kernels: driver and NVRTC loaded. */
static inline int epabi_cuda_usable(const struct epabi_cuda_libs* libs) {
    return libs->cu != NULL && libs->nvrtc != NULL;
}

#endif
