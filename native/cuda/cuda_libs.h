/*
 * cuda_libs.h - the CUDA toolkit libraries the backend uses, loaded at run time with dlopen: the runtime
 * (libcudart), NVRTC (libnvrtc, kernel compilation), cuBLAS (libcublas, MatMul/Gemm) and cuBLASLt (libcublasLt,
 * the GEMMs with a bias/ReLU epilogue of large linear steps; EPABI_CUBLASLT=0 leaves it unloaded). Nothing of CUDA
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
#include <stdint.h>

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

/* cuBLASLt, declared from the cuBLAS documentation's cublasLt.h (CUDA 11-13): opaque handles, the enum values used,
 * and the two structs passed by pointer (the algorithm, 64 opaque bytes, and a heuristic result). */
typedef void* epabi_cublaslt_handle;   /* cublasLtHandle_t */
typedef void* epabi_lt_matmul_desc;    /* cublasLtMatmulDesc_t */
typedef void* epabi_lt_layout;         /* cublasLtMatrixLayout_t */
typedef void* epabi_lt_preference;     /* cublasLtMatmulPreference_t */

enum {
    EPABI_CUBLAS_COMPUTE_32F = 68,           /* cublasComputeType_t: FP32 math, no TF32 */
    EPABI_CUDA_R_32F = 0,                    /* cudaDataType */
    EPABI_LT_DESC_TRANSA = 3,                /* cublasLtMatmulDescAttributes_t, int32_t (cublasOperation_t) */
    EPABI_LT_DESC_TRANSB = 4,
    EPABI_LT_DESC_EPILOGUE = 7,              /* uint32_t (cublasLtEpilogue_t) */
    EPABI_LT_DESC_BIAS_POINTER = 8,          /* const void* */
    EPABI_LT_PREF_MAX_WORKSPACE_BYTES = 1,   /* cublasLtMatmulPreferenceAttributes_t, uint64_t */
    EPABI_LT_PREF_REDUCTION_SCHEME_MASK = 3, /* uint32_t; 0: no split-K reduction (no second kernel) */
    EPABI_LT_PREF_MIN_ALIGNMENT_A_BYTES = 5, /* uint32_t each (default 256: the heuristic assumes that much) */
    EPABI_LT_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    EPABI_LT_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    EPABI_LT_PREF_MIN_ALIGNMENT_D_BYTES = 8,
    EPABI_LT_EPILOGUE_DEFAULT = 1,           /* cublasLtEpilogue_t */
    EPABI_LT_EPILOGUE_RELU = 2,
    EPABI_LT_EPILOGUE_BIAS = 4,
    EPABI_LT_EPILOGUE_RELU_BIAS = 6
};

struct epabi_lt_algo {                       /* cublasLtMatmulAlgo_t */
    uint64_t data[8];
};

struct epabi_lt_heuristic {                  /* cublasLtMatmulHeuristicResult_t */
    struct epabi_lt_algo algo;
    size_t workspace_size;
    int state;                               /* cublasStatus_t */
    float waves_count;
    int reserved[4];
};

struct epabi_cublaslt {
    size_t version;                          /* cublasLtGetVersion */
    size_t (*GetVersion)(void);
    int (*Create)(epabi_cublaslt_handle* handle);
    int (*Destroy)(epabi_cublaslt_handle handle);
    int (*MatmulDescCreate)(epabi_lt_matmul_desc* desc, int compute_type, int scale_type);
    int (*MatmulDescDestroy)(epabi_lt_matmul_desc desc);
    int (*MatmulDescSetAttribute)(epabi_lt_matmul_desc desc, int attr, const void* buf, size_t bytes);
    int (*MatrixLayoutCreate)(epabi_lt_layout* layout, int type, uint64_t rows, uint64_t cols, int64_t ld);
    int (*MatrixLayoutDestroy)(epabi_lt_layout layout);
    int (*MatmulPreferenceCreate)(epabi_lt_preference* pref);
    int (*MatmulPreferenceDestroy)(epabi_lt_preference pref);
    int (*MatmulPreferenceSetAttribute)(epabi_lt_preference pref, int attr, const void* buf, size_t bytes);
    int (*MatmulAlgoGetHeuristic)(epabi_cublaslt_handle handle, epabi_lt_matmul_desc desc, epabi_lt_layout a,
                                  epabi_lt_layout b, epabi_lt_layout c, epabi_lt_layout d, epabi_lt_preference pref,
                                  int requested, struct epabi_lt_heuristic* results, int* returned);
    int (*Matmul)(epabi_cublaslt_handle handle, epabi_lt_matmul_desc desc, const void* alpha, const void* a,
                  epabi_lt_layout a_layout, const void* b, epabi_lt_layout b_layout, const void* beta, const void* c,
                  epabi_lt_layout c_layout, void* d, epabi_lt_layout d_layout, const struct epabi_lt_algo* algo,
                  void* workspace, size_t workspace_bytes, epabi_cu_stream stream);
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
    const struct epabi_cublaslt* cublaslt;   /* NULL: no cuBLASLt (large linear steps: cuBLAS + an epilogue kernel) */
    char nvrtc_path[512], cublas_path[512], cudart_path[512], cublaslt_path[512];   /* where each was found, or "" */
    char why[768];                        /* what is missing, "" when all loaded */
};

/* The libraries, loaded once per process. Never NULL. */
const struct epabi_cuda_libs* epabi_cuda_libs(void);

/* True when the backend can run kernels: driver and NVRTC loaded. */
static inline int epabi_cuda_usable(const struct epabi_cuda_libs* libs) {
    return libs->cu != NULL && libs->nvrtc != NULL;
}

#endif
