/*
 * math_common.h - pieces shared by the float32 math kernels (matmul, conv, pool, softmax, layernorm, reduce).
 *
 * epabi_sgemm is the one matrix product behind MatMul, Gemm and Conv: the cblas_sgemm of the BLAS that blas.h
 * loads at run time (OpenBLAS from the scipy-openblas32 wheel, or the system's), else a cache-blocked loop that
 * packs its operands into caller-provided scratch. The packing buffer comes from the caller because a launch
 * cannot allocate: run() sizes it with epabi_sgemm_scratch_bytes() and takes it from epabi_exec_scratch().
 * epabi_sgemm_pool is the same product spread over the EP's thread pool (thread_pool.h).
 * Thread-safety: no state; concurrent calls on distinct outputs and scratch are safe.
 */
#ifndef EPABI_MATH_COMMON_H
#define EPABI_MATH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kernel.h"
#include "thread_pool.h"

/* Bytes of packing scratch one epabi_sgemm call of this size needs. A run that makes several calls passes the
 * largest m, n, k it uses (the need grows with each). A multiple of 64 bytes, so that per-thread shares of one
 * buffer (epabi_sgemm_pool) stay cache-line aligned. */
size_t epabi_sgemm_scratch_bytes(int64_t m, int64_t n, int64_t k);

/* Row-major C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C, op = transpose when trans_*. As in BLAS,
 * beta == 0 overwrites C without reading it and k == 0 leaves beta * C. pack: epabi_sgemm_scratch_bytes()
 * bytes (may be NULL when that is 0). Runs on the calling thread. */
void epabi_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc, float* pack);

/* Bytes of packing scratch for epabi_sgemm_pool on this pool: one epabi_sgemm_scratch_bytes share per pool
 * thread (NULL pool: one share). */
size_t epabi_sgemm_pool_scratch_bytes(const struct epabi_pool* pool, int64_t m, int64_t n, int64_t k);

/* epabi_sgemm spread over pool's threads (NULL: the calling thread): C is cut into panels of columns (or of rows
 * when C is tall and narrow), each one epabi_sgemm on one thread; a product too small to gain from threads runs
 * on the caller. Same results as epabi_sgemm up to the summation order a BLAS picks per panel size.
 * pack: epabi_sgemm_pool_scratch_bytes() bytes. */
void epabi_sgemm_pool(struct epabi_pool* pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                      float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                      int64_t ldc, float* pack);

/* On a hot loop: compiled once per x86-64 level (AVX-512, AVX2 + FMA, baseline SSE2) and picked by the CPU at load
 * time (an ifunc), so a wheel built for any x86-64 still runs vector code as wide as the machine has. Elsewhere
 * (other CPUs, compilers without target_clones) nothing. */
#if defined(__x86_64__) && defined(__linux__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define EPABI_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
#endif
#ifndef EPABI_SIMD_CLONES
#define EPABI_SIMD_CLONES
#endif

/* Multiply-adds below which a product is not worth handing to another thread (waking one costs microseconds).
 * Tests build with a smaller value so that their small cases take the threaded paths. */
#ifndef EPABI_PARALLEL_MIN_MACS
#define EPABI_PARALLEL_MIN_MACS (1 << 19)
#endif

/* Elements per chunk below which an elementwise launch is not worth spreading over threads (a wake-up costs
 * microseconds: what a vmath.h function takes over ten thousand elements, a plain add over tens of thousands).
 * Tests build with 1 so that their small cases are cut too. */
#ifndef EPABI_PARALLEL_MIN_ELEMS
#define EPABI_PARALLEL_MIN_ELEMS 16384
#endif

/* Input i of a run, or NULL when the optional input is absent (past n_in, a NULL slot, or UNDEFINED). */
static inline const struct epabi_tensor* epabi_opt_input(const struct epabi_tensor* const* in, int n_in, int i) {
    if (i >= n_in || in[i] == NULL || in[i]->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) return NULL;
    return in[i];
}

/* Whether a node's optional input i is wired (present with a known dtype). */
static inline bool epabi_desc_present(const struct epabi_node* node, int i) {
    return i < node->n_in && node->in[i].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

/* "[2,3,4]" for error messages; truncated to cap. Returns buf so it can sit inside a printf call. */
static inline const char* epabi_shape_str(char* buf, size_t cap, int rank, const int64_t* dims) {
    if (cap == 0) return buf;
    buf[0] = '\0';
    size_t used = 0;
    for (int i = -1; i <= rank && used < cap; ++i) {
        int w = i < 0 ? snprintf(buf + used, cap - used, "[")
              : i == rank ? snprintf(buf + used, cap - used, "]")
              : snprintf(buf + used, cap - used, i > 0 ? ",%lld" : "%lld", (long long)dims[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}

/* a * b for sizes, false on overflow (element counts of scratch buffers that no tensor bounds). */
static inline bool epabi_mul_size(size_t a, size_t b, size_t* out) {
    if (a != 0 && b > SIZE_MAX / a) return false;
    *out = a * b;
    return true;
}

#endif
