/*
 * cuda_cudnn.h - cuDNN 9 for Conv on the GPU, loaded at run time with dlopen like cuBLAS (cuda_libs.h): nothing of
 * cuDNN is needed at build time, and without it every Conv runs epabi's own CUDA kernels as before.
 *
 * The library (cuda_cudnn_load.c). libcudnn.so.9 is cuDNN 9's dispatcher: it exports the whole API and dlopens its
 * sub-libraries (libcudnn_graph, libcudnn_ops, libcudnn_cnn, libcudnn_engines_*) by soname. Those found next to it
 * are loaded first, so that the dispatcher's own dlopen reuses them instead of another cuDNN on the system path
 * (a mix of versions fails with CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH). Searched, in order (the first that
 * loads wins):
 *   EPABI_CUDNN_LIB_DIR, when set: that folder alone (nothing else is tried);
 *   else EPABI_CUDA_LIB_DIR, the nvidia-cudnn wheels next to this plugin (<site-packages>/nvidia/cudnn/lib, also
 *   nvidia/cu13/lib and nvidia/cu12/lib), $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64, then the
 *   system search path (a cuDNN the process already loaded, e.g. PyTorch's, is found there by its soname).
 * Only cuDNN 9 is taken (its legacy convolution API is the one declared below); EPABI_CUDNN=0 leaves it unloaded.
 * The prototypes follow cuDNN 9's cudnn_graph.h, cudnn_ops.h and cudnn_cnn.h, declared here with plain ints for
 * the enums (their values below) and void* for the descriptors. Every cudnnStatus_t is an int, 0 = success.
 *
 * Per stream (cuda_cudnn.c). Each CUDA stream of the EP that runs with cuDNN (option cudnn, default 1) owns a
 * cuDNN handle bound to it and a workspace of EPABI_CUDNN_WORKSPACE_BYTES allocated with it, so that a conv never
 * allocates device memory inside a capture. A conv shape is set up at its first launch on the stream outside any
 * capture: descriptors, an algorithm from cudnnGetConvolutionForwardAlgorithm_v7 (cuDNN's heuristics, host work
 * only) among those whose workspace fits, FP32 with CUDNN_FMA_MATH (no TF32: CUDNN_DEFAULT_MATH permits TF32 on
 * Ampere and newer), and one real run; the set-up is cached per shape on the stream. A shape met for the first time
 * inside a capture (ours, or a caller's capture of its own stream) runs epabi's kernel in that capture, and cuDNN
 * from the next run outside one: cuDNN's first run of an algorithm may load code or allocate, which a capture must
 * not record.
 *
 * Thread-safety: the library is loaded once (pthread_once) and read-only afterwards; a stream's state is used by the
 * one thread that runs the stream (as the stream itself).
 */
#ifndef EPABI_CUDA_CUDNN_H
#define EPABI_CUDA_CUDNN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "cuda_driver.h"

/* cuDNN 9 enum values used (cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h). */
enum {
    EPABI_CUDNN_DATA_FLOAT = 0,                     /* cudnnDataType_t */
    EPABI_CUDNN_TENSOR_NCHW = 0,                    /* cudnnTensorFormat_t */
    EPABI_CUDNN_CROSS_CORRELATION = 1,              /* cudnnConvolutionMode_t: ONNX Conv does not flip W */
    EPABI_CUDNN_FMA_MATH = 3,                       /* cudnnMathType_t: FMA kernels only (DEFAULT 0, TENSOR_OP 1-2) */
    EPABI_CUDNN_TENSOR_OP_MATH = 1,
    EPABI_CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2,
    EPABI_CUDNN_ACTIVATION_RELU = 1,                /* cudnnActivationMode_t */
    EPABI_CUDNN_ACTIVATION_IDENTITY = 5,
    EPABI_CUDNN_PROPAGATE_NAN = 1,                  /* cudnnNanPropagation_t */
    EPABI_CUDNN_FWD_ALGO_IMPLICIT_GEMM = 0,         /* cudnnConvolutionFwdAlgo_t */
    EPABI_CUDNN_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1,
    EPABI_CUDNN_FWD_ALGO_GEMM = 2,
    EPABI_CUDNN_FWD_ALGO_DIRECT = 3,
    EPABI_CUDNN_FWD_ALGO_COUNT = 8
};

/* cudnnConvolutionFwdAlgoPerf_t (cudnn_cnn.h) */
struct epabi_cudnn_fwd_perf {
    int algo;
    int status;
    float time;
    size_t memory;
    int determinism;
    int math_type;
    int reserved[3];
};

typedef void* epabi_cudnn_handle;   /* cudnnHandle_t */

struct epabi_cudnn {
    size_t version;                 /* cudnnGetVersion: major * 10000 + minor * 100 + patch */
    size_t cudart_version;          /* cudnnGetCudartVersion: the CUDA runtime it was built for */
    char path[512];                 /* where libcudnn.so.9 was loaded from */
    int sublibraries;               /* libcudnn_*.so.9 preloaded from its folder */
    size_t (*GetVersion)(void);
    size_t (*GetCudartVersion)(void);
    const char* (*GetErrorString)(int status);
    int (*Create)(epabi_cudnn_handle* handle);
    int (*Destroy)(epabi_cudnn_handle handle);
    int (*SetStream)(epabi_cudnn_handle handle, epabi_cu_stream stream);
    int (*CreateTensorDescriptor)(void** desc);
    int (*SetTensor4dDescriptor)(void* desc, int format, int dtype, int n, int c, int h, int w);
    int (*DestroyTensorDescriptor)(void* desc);
    int (*CreateFilterDescriptor)(void** desc);
    int (*SetFilter4dDescriptor)(void* desc, int dtype, int format, int k, int c, int h, int w);
    int (*DestroyFilterDescriptor)(void* desc);
    int (*CreateConvolutionDescriptor)(void** desc);
    int (*SetConvolution2dDescriptor)(void* desc, int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h,
                                      int dilation_w, int mode, int compute_type);
    int (*SetConvolutionGroupCount)(void* desc, int groups);
    int (*SetConvolutionMathType)(void* desc, int math_type);
    int (*GetConvolution2dForwardOutputDim)(const void* conv, const void* x, const void* w, int* n, int* c, int* h,
                                            int* wd);
    int (*DestroyConvolutionDescriptor)(void* desc);
    int (*CreateActivationDescriptor)(void** desc);
    int (*SetActivationDescriptor)(void* desc, int mode, int nan_propagation, double coef);
    int (*DestroyActivationDescriptor)(void* desc);
    int (*GetConvolutionForwardAlgorithm_v7)(epabi_cudnn_handle handle, const void* x, const void* w,
                                             const void* conv, const void* y, int requested, int* returned,
                                             struct epabi_cudnn_fwd_perf* results);
    int (*GetConvolutionForwardWorkspaceSize)(epabi_cudnn_handle handle, const void* x, const void* w,
                                              const void* conv, const void* y, int algo, size_t* bytes);
    int (*ConvolutionForward)(epabi_cudnn_handle handle, const void* alpha, const void* x_desc, const void* x,
                              const void* w_desc, const void* w, const void* conv, int algo, void* workspace,
                              size_t workspace_bytes, const void* beta, const void* y_desc, void* y);
    int (*ConvolutionBiasActivationForward)(epabi_cudnn_handle handle, const void* alpha1, const void* x_desc,
                                            const void* x, const void* w_desc, const void* w, const void* conv,
                                            int algo, void* workspace, size_t workspace_bytes, const void* alpha2,
                                            const void* z_desc, const void* z, const void* bias_desc,
                                            const void* bias, const void* activation, const void* y_desc, void* y);
    int (*AddTensor)(epabi_cudnn_handle handle, const void* alpha, const void* a_desc, const void* a,
                     const void* beta, const void* c_desc, void* c);
};

/* cuDNN, loaded once per process (the search above). NULL with *why saying what is missing (never NULL itself)
 * when it is not loaded. Needs no GPU and no CUDA driver. */
const struct epabi_cudnn* epabi_cudnn_load(const char** why);

/* ---- per stream (cuda_cudnn.c) ----------------------------------------------------------------------------- */

enum { EPABI_CUDNN_WORKSPACE_BYTES = 16 << 20 };

struct epabi_cudnn_stream;
struct epabi_cuda_launch_env;
struct conv_launch;

/* A handle bound to `stream` and its workspace, on the current context. NULL when cuDNN cannot be set up there
 * (*why says why; the stream's convs then run epabi's kernels). logger: VERBOSE lines naming each conv shape's
 * set-up (which algorithm, or why epabi's kernel runs it); it must outlive the runs that use the stream. */
struct epabi_cudnn_stream* epabi_cudnn_stream_create(const struct epabi_cudnn* lib, const struct epabi_cuda_driver* cu,
                                                     epabi_cu_stream stream, const struct epabi_api* api,
                                                     const OrtLogger* logger, char* why, size_t why_len);

/* Frees the cached set-ups, the workspace and the handle (the stream's work must be finished); NULL is a no-op. */
void epabi_cudnn_stream_destroy(struct epabi_cudnn_stream* s);

/* Runs conv `L` through cuDNN on the env's stream when it can: *done false leaves it to epabi's kernel (nothing was
 * queued). *fused: the conv also applied L->epilogue (ReLU through cudnnConvolutionBiasActivationForward); else the
 * caller applies it. Errors: ORT_EP_FAIL naming the cuDNN call and its status, for a set-up that ran before. */
OrtStatus* epabi_cudnn_conv(struct epabi_cudnn_stream* s, const struct epabi_cuda_launch_env* env,
                            const struct conv_launch* L, bool* done, bool* fused);

#endif
