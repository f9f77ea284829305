/*
 * cuda_launch_linear.c - the launcher of linear steps (kernels/linear.h, struct linear_launch): one MatMul or Gemm
 * with its bias and activation, issued as one kernel whenever a kernel can do it all:
 *   - no product (k == 0 or alpha == 0): linear_epilogue_f32 writes act(beta * C) (BLAS reads neither A nor B);
 *   - the plan's path SMALL (or SMALL_IF_FEW_ROWS and m <= EPABI_LINEAR_SMALL_ROWS): linear_nn_R / linear_nt_R,
 *     R the smallest of 1, 2, 4, 8, 16 rows per block covering m (more rows loop over row tiles);
 *   - else cuBLASLt, when loaded, with the epilogue DEFAULT, BIAS, RELU or RELU_BIAS: a bias is a row vector of C
 *     with beta 1, a C of the full [m, n] goes in as cuBLASLt's C with beta (Sigmoid, Tanh, Gelu and other
 *     broadcasts of C have no epilogue there: cuBLASLt's GELU is its tanh form, and its accuracy is not documented);
 *   - else a GEMM (epabi_cuda_sgemm: cuBLAS, or sgemm_f32) into Y and linear_epilogue_f32 for C and the activation
 *     (two kernels; one when there is neither).
 * Split-K algorithms are excluded (their reduction is a second kernel). A cuBLASLt call that finds no algorithm or
 * fails is not an error: the GEMM path runs instead (a replay's kernel
 * count then shows it). FP32 throughout (CUBLAS_COMPUTE_32F: no TF32). cuBLASLt's ReLU is max(x, 0), which turns a
 * NaN into 0 where the Unary kernels keep it.
 *
 * Like every launcher: no allocation (cuBLASLt gets cuBLAS's workspace of the same stream), no synchronization, so
 * it may run inside a stream capture; its descriptors are host objects made and destroyed within the call.
 */
#include <stdint.h>
#include <string.h>

#include "cuda_launch_internal.h"
#include "ep_factory.h"   /* EPABI_EP_NAME */

enum { MAX_GRID_Y = 65535 };

static const char kWhat[] = "MatMul/Gemm (linear step)";

static unsigned cap_grid(int64_t blocks, int64_t cap) {
    return (unsigned)(blocks < 1 ? 1 : blocks < cap ? blocks : cap);
}

/* Y = act(beta * C) without a product, or act(Y + beta * C) after one (from_product). */
static OrtStatus* epilogue(const struct epabi_cuda_launch_env* env, const struct linear_launch* L, int from_product) {
    struct linear_launch a = *L;
    int64_t items = a.m * a.n;
    void* params[] = {&a, &from_product, &items};
    return epabi_cuda_run(env, kWhat, EPABI_CK_linear_epilogue_f32, epabi_cuda_grid(items, EPABI_CUDA_BLOCK), 1, 1,
                          EPABI_CUDA_BLOCK, params);
}

_Static_assert(EPABI_CK_linear_nn_16 - EPABI_CK_linear_nn_1 == 4, "linear_nn kernels by row tile 1, 2, 4, 8, 16");
_Static_assert(EPABI_CK_linear_nt_16 - EPABI_CK_linear_nt_1 == 4, "linear_nt kernels by row tile 1, 2, 4, 8, 16");
_Static_assert(1 << 4 == EPABI_LINEAR_SMALL_ROWS, "the largest row tile is EPABI_LINEAR_SMALL_ROWS");

static OrtStatus* small_kernel(const struct epabi_cuda_launch_env* env, const struct linear_launch* L) {
    struct linear_launch a = *L;
    int tile = 1, index = 0;
    while (tile < EPABI_LINEAR_SMALL_ROWS && (int64_t)tile < a.m) {
        tile <<= 1;
        ++index;
    }
    const int64_t cols = a.trans_b ? EPABI_LINEAR_NT_COLS : EPABI_LINEAR_NN_COLS;
    const int id = (a.trans_b ? EPABI_CK_linear_nt_1 : EPABI_CK_linear_nn_1) + index;
    const unsigned gx = cap_grid((a.n + cols - 1) / cols, (int64_t)1 << 20);   /* the kernels loop past the grid */
    const unsigned gy = cap_grid((a.m + tile - 1) / tile, MAX_GRID_Y);
    void* params[] = {&a};
    return epabi_cuda_run(env, kWhat, (enum epabi_cuda_kernel_id)id, gx, gy, 1, EPABI_LINEAR_THREADS, params);
}

/* ---- cuBLASLt ---------------------------------------------------------------------------------------------------- */

struct lt_objects {
    epabi_lt_matmul_desc desc;
    epabi_lt_layout a, b, c;   /* C and D share one layout */
    epabi_lt_preference pref;
};

static void lt_release(const struct epabi_cublaslt* lt, struct lt_objects* o) {
    if (o->pref != NULL) lt->MatmulPreferenceDestroy(o->pref);
    if (o->c != NULL) lt->MatrixLayoutDestroy(o->c);
    if (o->b != NULL) lt->MatrixLayoutDestroy(o->b);
    if (o->a != NULL) lt->MatrixLayoutDestroy(o->a);
    if (o->desc != NULL) lt->MatmulDescDestroy(o->desc);
}

/* The alignment of a buffer for cuBLASLt's preferences: the largest power of two dividing its address, at most 256
 * (the heuristic otherwise assumes 256, and the arena hands out 64-byte aligned blocks). */
static uint32_t alignment_of(const void* p) {
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a != 0) a >>= 1;
    return a;
}

/* The row-major product is cuBLASLt's column-major Y^T = op(B)^T op(A)^T: its A is our B (n x k), its B our A
 * (k x m), its C and D Y^T (n x m, ld n), and a bias of length n (the rows of D) adds bias[j] to each row of Y.
 * *done tells whether the call went through; false leaves Y untouched for the GEMM path. */
static void lt_matmul(const struct epabi_cuda_launch_env* env, const struct linear_launch* L, bool* done) {
    *done = false;
    const struct epabi_cublaslt* lt = env->libs->cublaslt;
    if (lt == NULL || env->cublaslt == NULL || env->workspace == NULL) return;
    const bool vector_bias = L->c != NULL && L->c_rows == 1 && L->c_cols == L->n && L->beta == 1.0f;
    const bool matrix_c = L->c != NULL && !vector_bias && L->c_rows == L->m && L->c_cols == L->n;
    if (L->c != NULL && !vector_bias && !matrix_c) return;
    uint32_t epi;
    if (L->activation < 0) epi = vector_bias ? EPABI_LT_EPILOGUE_BIAS : EPABI_LT_EPILOGUE_DEFAULT;
    else if (L->activation == UN_RELU) epi = vector_bias ? EPABI_LT_EPILOGUE_RELU_BIAS : EPABI_LT_EPILOGUE_RELU;
    else return;

    struct lt_objects o;
    memset(&o, 0, sizeof o);
    const int32_t op_a = L->trans_b ? EPABI_CUBLAS_OP_T : EPABI_CUBLAS_OP_N;   /* our B comes first */
    const int32_t op_b = L->trans_a ? EPABI_CUBLAS_OP_T : EPABI_CUBLAS_OP_N;
    const uint64_t m = (uint64_t)L->m, n = (uint64_t)L->n, k = (uint64_t)L->k;
    const uint64_t ws = env->workspace_bytes;
    const void* bias = L->c;
    const uint32_t no_split_k = 0;   /* algorithms that reduce split-K partial sums run a second kernel */
    const void* c_ptr = matrix_c ? (const void*)L->c : (const void*)L->y;
    /* cuBLASLt's A is our B, its B our A */
    const uint32_t align[4] = {alignment_of(L->b), alignment_of(L->a), alignment_of(c_ptr), alignment_of(L->y)};
    bool ok = lt->MatmulDescCreate(&o.desc, EPABI_CUBLAS_COMPUTE_32F, EPABI_CUDA_R_32F) == 0 &&
              lt->MatmulDescSetAttribute(o.desc, EPABI_LT_DESC_TRANSA, &op_a, sizeof op_a) == 0 &&
              lt->MatmulDescSetAttribute(o.desc, EPABI_LT_DESC_TRANSB, &op_b, sizeof op_b) == 0 &&
              lt->MatmulDescSetAttribute(o.desc, EPABI_LT_DESC_EPILOGUE, &epi, sizeof epi) == 0 &&
              (!vector_bias ||
               lt->MatmulDescSetAttribute(o.desc, EPABI_LT_DESC_BIAS_POINTER, &bias, sizeof bias) == 0) &&
              lt->MatrixLayoutCreate(&o.a, EPABI_CUDA_R_32F, L->trans_b ? k : n, L->trans_b ? n : k, L->ldb) == 0 &&
              lt->MatrixLayoutCreate(&o.b, EPABI_CUDA_R_32F, L->trans_a ? m : k, L->trans_a ? k : m, L->lda) == 0 &&
              lt->MatrixLayoutCreate(&o.c, EPABI_CUDA_R_32F, n, m, L->n) == 0 &&
              lt->MatmulPreferenceCreate(&o.pref) == 0 &&
              lt->MatmulPreferenceSetAttribute(o.pref, EPABI_LT_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) == 0 &&
              lt->MatmulPreferenceSetAttribute(o.pref, EPABI_LT_PREF_REDUCTION_SCHEME_MASK, &no_split_k,
                                               sizeof no_split_k) == 0;
    for (int i = 0; i < 4 && ok; ++i)
        ok = lt->MatmulPreferenceSetAttribute(o.pref, EPABI_LT_PREF_MIN_ALIGNMENT_A_BYTES + i, &align[i],
                                              sizeof align[i]) == 0;
    struct epabi_lt_heuristic found[2];   /* one asked for; room to spare should the struct have grown */
    memset(found, 0, sizeof found);
    int count = 0;
    ok = ok && lt->MatmulAlgoGetHeuristic(env->cublaslt, o.desc, o.a, o.b, o.c, o.c, o.pref, 1, found, &count) == 0 &&
         count >= 1 && found[0].state == 0 && found[0].workspace_size <= ws;
    if (ok) {
        const float alpha = L->alpha, beta = matrix_c ? L->beta : 0.0f;
        *done = lt->Matmul(env->cublaslt, o.desc, &alpha, L->b, o.a, L->a, o.b, &beta, c_ptr, o.c, L->y, o.c,
                           &found[0].algo, env->workspace, ws, env->stream) == 0;
    }
    lt_release(lt, &o);
}

/* ---- the launcher ------------------------------------------------------------------------------------------------ */

OrtStatus* epabi_cuda_launch_linear(const struct epabi_cuda_launch_env* env, const struct linear_launch* in) {
    const struct linear_launch L = *in;
    if (L.m <= 0 || L.n <= 0) return NULL;
    if (L.k <= 0 || L.alpha == 0.0f) return epilogue(env, &L, 0);
    const bool small = L.path == LINEAR_PATH_SMALL ||
                       (L.path == LINEAR_PATH_SMALL_IF_FEW_ROWS && L.m <= EPABI_LINEAR_SMALL_ROWS);
    if (small) return small_kernel(env, &L);
    bool done = false;
    lt_matmul(env, &L, &done);
    if (done) return NULL;
    EPABI_RETURN_IF_ERROR(epabi_cuda_sgemm(env, kWhat, L.trans_a, L.trans_b, L.m, L.n, L.k, L.alpha, L.a, L.lda, 0,
                                           L.b, L.ldb, 0, 0.0f, L.y, L.n, 0, 1));
    if (L.c == NULL && L.activation < 0) return NULL;
    return epilogue(env, &L, 1);
}
