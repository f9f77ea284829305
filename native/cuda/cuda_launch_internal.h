/*
 * cuda_launch_internal.h - private to the CUDA kernels' C side (cuda_module.c, cuda_launch*.c): the table of
 * kernel functions a compiled module holds, the launcher of each launch kind, and the helpers they share.
 *
 * EPABI_CUDA_KERNEL_LIST names every `extern "C" __global__` function of cuda_kernels.cu that the launchers
 * call; cuda_module.c looks each one up once (cuModuleGetFunction) into epabi_cuda_module.fn, indexed by
 * enum epabi_cuda_kernel_id, so a launch never looks a name up. tools/check_nvrtc.py checks that every name
 * here is a kernel of the .cu file.
 */
#ifndef EPABI_CUDA_LAUNCH_INTERNAL_H
#define EPABI_CUDA_LAUNCH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "cuda_kernels.h"

#define EPABI_CUDA_KERNEL_LIST(X)                                                                         \
    X(ew_arith_f32) X(ew_arith_f64) X(ew_arith_i8) X(ew_arith_u8) X(ew_arith_i16) X(ew_arith_u16)          \
    X(ew_arith_i32) X(ew_arith_u32) X(ew_arith_i64) X(ew_arith_u64)                                        \
    X(ew_fast_f32) X(ew_pow_f32) X(ew_pow_f64) X(ew_equal)                                                                \
    X(ew_select_1) X(ew_select_2) X(ew_select_4) X(ew_select_8)                                            \
    X(un_f32) X(un_f64) X(un_i32) X(un_i64)                                                                \
    X(cast_from_f32) X(cast_from_f64) X(cast_from_i8) X(cast_from_u8) X(cast_from_i16) X(cast_from_u16)    \
    X(cast_from_i32) X(cast_from_u32) X(cast_from_i64) X(cast_from_u64) X(cast_from_bool)                  \
    X(strided_copy_1) X(strided_copy_2) X(strided_copy_4) X(strided_copy_8) X(strided_copy_bytes)          \
    X(concat_1) X(concat_2) X(concat_4) X(concat_8) X(concat_16)                                           \
    X(gather_1) X(gather_2) X(gather_4) X(gather_8) X(gather_16)                                           \
    X(shape_write)                                                                                         \
    X(sgemm_f32) X(gemm_scale_f32) X(gemm_fill_c)                                                          \
    X(linear_nn_1) X(linear_nn_2) X(linear_nn_4) X(linear_nn_8) X(linear_nn_16)                            \
    X(linear_nt_1) X(linear_nt_2) X(linear_nt_4) X(linear_nt_8) X(linear_nt_16) X(linear_epilogue_f32)     \
    X(conv_direct) X(conv_im2col) X(conv_bias_fill) X(conv_timing_hold)                                    \
    X(layernorm_f32) X(gmaxpool_f32) X(reduce_thread_f32) X(reduce_block_f32) X(reduce_cols_f32)            \
    X(moments_thread_f32) X(moments_block_f32) X(moments_cols_f32) X(moments_copy_f32)                     \
    X(softmax_rows_f32) X(softmax_strided_f32) X(softmax_fused_f32)                                        \
    X(ew_compare) X(un_not) X(un_clip)                                                                     \
    X(pool_max_f32) X(pool_max_f64) X(pool_max_i8) X(pool_max_u8) X(pool_avg_f32) X(gavgpool_f32)          \
    X(batchnorm_f32) X(instancenorm_f32)                                                                   \
    X(convt_direct) X(lstm_cell_f32)                                                                       \
    X(pad_copy_1) X(pad_copy_2) X(pad_copy_4) X(pad_copy_8)                                                \
    X(fill_1) X(fill_2) X(fill_4) X(fill_8) X(range_fill)                                                  \
    X(argreduce)                                                                                           \
    X(resize_nearest_1) X(resize_nearest_4) X(resize_linear_f32)                                         \
    X(chain_f32)                                                                                           \
    X(onehot_lookup_f32) X(onehot_lookup_f32x4) X(onehot_per_key_f32)

enum epabi_cuda_kernel_id {
#define EPABI_CK_ENUM_(name) EPABI_CK_##name,
    EPABI_CUDA_KERNEL_LIST(EPABI_CK_ENUM_)
#undef EPABI_CK_ENUM_
    EPABI_CK_COUNT
};

/* One device's compiled kernels. Created once per device by epabi_cuda_module_get and never freed (see
 * cuda_module.c): the module lives in the device's primary context, which cuda_module.c retains for the
 * life of the process so the functions stay valid. */
struct epabi_cuda_module {
    int ordinal;
    int cc_major, cc_minor;
    bool from_ptx;                       /* loaded from PTX (the arch was unknown to NVRTC) */
    epabi_cu_module module;
    epabi_cu_function fn[EPABI_CK_COUNT];
};

/* Compiles `source` (CUDA C, which may include "launch_args.h" and "cuda_math.cuh") as cuda_module.c compiles the
 * kernels' module for `kernels`' device (same options, same architecture fallbacks) and loads it into the current
 * context, which must be that device's primary context (a launch's). `name` names the program in errors. The module
 * is the caller's (never unloaded by us). Errors: ORT_EP_FAIL with the head of NVRTC's log, or the driver's error.
 * Thread-safety: NVRTC and the driver are thread-safe; this holds no lock. */
OrtStatus* epabi_cuda_program_load(const struct epabi_api* api, const struct epabi_cuda_libs* libs,
                                   const struct epabi_cuda_module* kernels, const char* source, const char* name,
                                   epabi_cu_module* out);

/* Threads per block of the one-dimensional grid-stride kernels. */
enum { EPABI_CUDA_BLOCK = 256 };

/* Blocks for n items at `block` threads each, capped (the kernels loop grid-stride); at least 1. */
unsigned epabi_cuda_grid(int64_t n, unsigned block);

/* Smallest power of two >= n, clamped to [32, 256]: the block of a row-per-block kernel. */
unsigned epabi_cuda_row_block(int64_t n);

/* cuLaunchKernel of kernel `id` on env->stream; `what` names the launch kind in the error. */
OrtStatus* epabi_cuda_run(const struct epabi_cuda_launch_env* env, const char* what, enum epabi_cuda_kernel_id id,
                          unsigned gx, unsigned gy, unsigned gz, unsigned block, void** params);

/* epabi_cuda_run of a function of another module (a chain's own kernel, cuda_chain_jit.c). */
OrtStatus* epabi_cuda_run_fn(const struct epabi_cuda_launch_env* env, const char* what, epabi_cu_function fn,
                             unsigned gx, unsigned gy, unsigned gz, unsigned block, void** params);

/* The kernel of its own that chain `a` (n elements, its dims merged) runs instead of the interpreting chain_f32:
 * compiled from the chain's op list on its first launch on the device and kept for the process (cuda_chain_jit.c).
 * *fn is NULL when the chain runs chain_f32: EPABI_CHAIN_JIT=0 in the environment, an index or offset beyond 2^31 - 1,
 * or 1024 distinct chains already compiled (the last two are errors under EPABI_CHAIN_JIT=require). Must run with the device's context current (inside a launch); may be
 * called inside a capture (the compile runs in relaxed capture mode). Errors: ORT_EP_FAIL when NVRTC or the driver
 * refuses the program (with NVRTC's log). Thread-safety: safe (one lock around the cache). */
OrtStatus* epabi_cuda_chain_kernel(const struct epabi_cuda_launch_env* env, const struct chain_args* a, int64_t n,
                                   epabi_cu_function* fn);

/* An ORT_EP_FAIL status for a failed driver call (cuMemsetD8Async, cuMemcpyAsync...). */
OrtStatus* epabi_cuda_fail(const struct epabi_cuda_launch_env* env, const char* what, epabi_cu_result r);

/* Row-major, strided-batched float GEMM on env->stream: for b in [0, batch),
 *   C_b[m,n] = alpha * op(A_b)[m,k] * op(B_b)[k,n] + beta * C_b      (A_b = a + b * stride_a, ...)
 * with BLAS semantics: beta == 0 never reads C; k == 0 or alpha == 0 leaves beta * C without reading A/B.
 * Through cuBLAS when env->cublas is set and every size fits its int, else through sgemm_f32. */
OrtStatus* epabi_cuda_sgemm(const struct epabi_cuda_launch_env* env, const char* what, bool trans_a, bool trans_b,
                            int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                            int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                            int64_t ldc, int64_t stride_c, int64_t batch);

/* Conv's own forms (cuda_launch_math.c), which cuda_cudnn.c times against cuDNN:
 *   epabi_cuda_conv_gemm_form  whether epabi's kernels run L as GEMMs (im2col + SGEMM per column tile, or GEMMs
 *                              over X), with *calls the GEMMs it issues; false: the direct kernel runs it
 *   epabi_cuda_conv_ours       L on epabi's kernels, its fused activation included (the launch without cuDNN)
 *   epabi_cuda_conv_epilogue   L's fused activation alone, in place over Y (nothing without one)
 * Asynchronous on env->stream, no allocation (as every launcher). */
bool epabi_cuda_conv_gemm_form(const struct conv_launch* L, int64_t* calls);
OrtStatus* epabi_cuda_conv_ours(const struct epabi_cuda_launch_env* env, const struct conv_launch* L);
OrtStatus* epabi_cuda_conv_epilogue(const struct epabi_cuda_launch_env* env, const struct conv_launch* L);

/* The launcher of each launch kind: epabi_cuda_launch_<stem>(env, const struct <block>*) for every
 * X(kind, stem, block) of launch_args.h's EPABI_LAUNCH_KINDS; the dtype-generic kinds are in cuda_launch.c, the
 * float32 math kinds in cuda_launch_math.c, and cuda_launch.c's table holds them all. The declarations come from the
 * list and are hidden, so a kind whose launcher is missing fails to link, and one taking another block fails to
 * compile. Each computes what its kind's host function computes (see cuda_launch.c). The index-mapping kinds (Pad and
 * Tile, fill, Range, ArgMax/ArgMin, Resize) are in cuda_launch_index.c, the linear steps in cuda_launch_linear.c, the one-hot lookups in
 * cuda_launch_onehot.c. */
#define EPABI_CUDA_LAUNCHER_DECL_(kind, stem, block)                                                    \
    __attribute__((visibility("hidden"))) OrtStatus* epabi_cuda_launch_##stem(                           \
        const struct epabi_cuda_launch_env* env, const struct block* args);
EPABI_LAUNCH_KINDS(EPABI_CUDA_LAUNCHER_DECL_)
#undef EPABI_CUDA_LAUNCHER_DECL_

#endif
