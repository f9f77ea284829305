/*
 * cuda_launch_math.c - the launchers of the float32 math kinds (MatMul, Gemm, Conv, LayerNormalization,
 * GlobalMaxPool, ReduceSum/Mean/Max, the moments step, Softmax) and epabi_cuda_sgemm, the one GEMM behind MatMul,
 * Gemm and Conv: cuBLAS when the launch has a handle, else the sgemm_f32 kernel.
 *
 * cuBLAS is column-major; a row-major C[m,n] = op(A) op(B) is the column-major C^T[n,m] = op(B)^T op(A)^T,
 * so every call swaps the operands (B first) and the dimensions (n, m), keeping each operand's leading
 * dimension and transpose flag. Scratch pointers of the blocks (pack, acc, rowbuf, max, sum) are unused:
 * the CUDA kernels keep their partial results in registers and shared memory.
 * Thread-safety: no state.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda_launch_internal.h"
#include "ep_factory.h"   /* EPABI_EP_NAME */

enum { MAX_GRID_YZ = 65535 };

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static int64_t numel(int rank, const int64_t* dims) {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= dims[d];
    return n;
}

/* ---- GEMM ---------------------------------------------------------------------------------------------- */

static const char* cublas_status_name(int s) {
    switch (s) {
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "cuBLAS error";
    }
}

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

OrtStatus* epabi_cuda_sgemm(const struct epabi_cuda_launch_env* env, const char* what, bool trans_a, bool trans_b,
                            int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                            int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                            int64_t ldc, int64_t stride_c, int64_t batch) {
    if (m <= 0 || n <= 0 || batch <= 0) return NULL;
    if (k <= 0 || alpha == 0.0f) {   /* BLAS: A and B are not read; C = beta * C */
        if (beta == 1.0f) return NULL;
        int64_t items = batch * m * n;
        void* params[] = {&c, &ldc, &stride_c, &m, &n, &beta, &items};
        return epabi_cuda_run(env, what, EPABI_CK_gemm_scale_f32, epabi_cuda_grid(items, EPABI_CUDA_BLOCK), 1, 1,
                              EPABI_CUDA_BLOCK, params);
    }
    const struct epabi_cublas* bl = env->libs->cublas;
    if (env->cublas != NULL && bl != NULL && fits_int(m) && fits_int(n) && fits_int(k) && fits_int(lda) &&
        fits_int(ldb) && fits_int(ldc)) {
        const int op_first = trans_b ? EPABI_CUBLAS_OP_T : EPABI_CUBLAS_OP_N;    /* B^T comes first */
        const int op_second = trans_a ? EPABI_CUBLAS_OP_T : EPABI_CUBLAS_OP_N;
        int s = 0;
        if (batch == 1) {
            s = bl->Sgemm(env->cublas, op_first, op_second, (int)n, (int)m, (int)k, &alpha, b, (int)ldb, a, (int)lda,
                          &beta, c, (int)ldc);
        } else {
            for (int64_t b0 = 0; s == 0 && b0 < batch; b0 += MAX_GRID_YZ) {
                const int64_t cnt = min64(MAX_GRID_YZ, batch - b0);
                s = bl->SgemmStridedBatched(env->cublas, op_first, op_second, (int)n, (int)m, (int)k, &alpha,
                                            b + b0 * stride_b, (int)ldb, (long long)stride_b, a + b0 * stride_a,
                                            (int)lda, (long long)stride_a, &beta, c + b0 * stride_c, (int)ldc,
                                            (long long)stride_c, (int)cnt);
            }
        }
        if (s != 0)
            return epabi_error(env->api, ORT_EP_FAIL, EPABI_EP_NAME ": CUDA launch of %s failed: cuBLAS SGEMM "
                               "(m=%lld n=%lld k=%lld batch=%lld) returned %d (%s)", what, (long long)m, (long long)n,
                               (long long)k, (long long)batch, s, cublas_status_name(s));
        return NULL;
    }
    int ta = trans_a ? 1 : 0, tb = trans_b ? 1 : 0;
    void* params[] = {&ta, &tb, &m, &n, &k, &alpha, &a, &lda, &stride_a, &b, &ldb, &stride_b,
                      &beta, &c, &ldc, &stride_c, &batch};
    const int64_t tiles_n = (n + 63) / 64, tiles_m = (m + 63) / 64;
    return epabi_cuda_run(env, what, EPABI_CK_sgemm_f32, (unsigned)min64(tiles_n, INT_MAX),
                          (unsigned)min64(tiles_m, MAX_GRID_YZ), (unsigned)min64(batch, MAX_GRID_YZ), 256, params);
}

/* ---- MatMul --------------------------------------------------------------------------------------------- */

/* Y[batch..., m, n] = A x B with the batch broadcast through per-dim strides (0 = broadcast). Batch dims
 * whose strides chain (the outer one's stride = the inner one's * its extent, for A and B) merge; the
 * longest remaining dim becomes one strided-batched GEMM, repeated over the others. */
OrtStatus* epabi_cuda_launch_matmul(const struct epabi_cuda_launch_env* env, const struct matmul_launch* L) {
    const char* what = "MatMul";
    if (L->batch_rank < 0 || L->batch_rank > EPABI_MAX_RANK)
        return epabi_error(env->api, ORT_NOT_IMPLEMENTED, EPABI_EP_NAME ": MatMul batch rank %d", L->batch_rank);
    const int64_t count = numel(L->batch_rank, L->batch);
    const int64_t mn = L->m * L->n;
    if (count <= 0 || mn <= 0) return NULL;
    if (L->k == 0) {   /* empty operands: the product is all zeros */
        epabi_cu_result r = env->libs->cu->MemsetD8Async((epabi_cu_ptr)(uintptr_t)L->y, 0,
                                                         (size_t)(count * mn) * sizeof(float), env->stream);
        return r == 0 ? NULL : epabi_cuda_fail(env, what, r);
    }
    if (L->batch_rank == 0)
        return epabi_cuda_sgemm(env, what, false, false, L->m, L->n, L->k, 1.0f, L->a, L->k, 0, L->b, L->n, 0, 0.0f,
                                L->y, L->n, 0, 1);

    /* Y's batch strides are dense; drop unit dims, merge chains. */
    int64_t dim[EPABI_MAX_RANK], sa[EPABI_MAX_RANK], sb[EPABI_MAX_RANK], sy[EPABI_MAX_RANK];
    int r = 0;
    int64_t ys = mn;
    int64_t ystride[EPABI_MAX_RANK];
    for (int d = L->batch_rank - 1; d >= 0; --d) {
        ystride[d] = ys;
        ys *= L->batch[d];
    }
    for (int d = 0; d < L->batch_rank; ++d) {
        if (L->batch[d] == 1) continue;
        if (r > 0 && sa[r - 1] == L->a_stride[d] * L->batch[d] && sb[r - 1] == L->b_stride[d] * L->batch[d]) {
            dim[r - 1] *= L->batch[d];
            sa[r - 1] = L->a_stride[d];
            sb[r - 1] = L->b_stride[d];
            sy[r - 1] = ystride[d];
            continue;
        }
        dim[r] = L->batch[d];
        sa[r] = L->a_stride[d];
        sb[r] = L->b_stride[d];
        sy[r] = ystride[d];
        ++r;
    }
    if (r == 0)
        return epabi_cuda_sgemm(env, what, false, false, L->m, L->n, L->k, 1.0f, L->a, L->k, 0, L->b, L->n, 0, 0.0f,
                                L->y, L->n, 0, 1);
    int j = 0;
    for (int d = 1; d < r; ++d)
        if (dim[d] > dim[j]) j = d;
    int64_t idx[EPABI_MAX_RANK] = {0};
    int64_t ao = 0, bo = 0, yo = 0;
    for (;;) {
        EPABI_RETURN_IF_ERROR(epabi_cuda_sgemm(env, what, false, false, L->m, L->n, L->k, 1.0f, L->a + ao, L->k, sa[j],
                                               L->b + bo, L->n, sb[j], 0.0f, L->y + yo, L->n, sy[j], dim[j]));
        int d = r - 1;
        for (; d >= 0; --d) {   /* odometer over the dims other than j */
            if (d == j) continue;
            if (++idx[d] < dim[d]) {
                ao += sa[d];
                bo += sb[d];
                yo += sy[d];
                break;
            }
            ao -= sa[d] * (dim[d] - 1);
            bo -= sb[d] * (dim[d] - 1);
            yo -= sy[d] * (dim[d] - 1);
            idx[d] = 0;
        }
        if (d < 0) break;
    }
    return NULL;
}

/* ---- Gemm ----------------------------------------------------------------------------------------------- */

/* Y = alpha * op(A) op(B) + beta * C: C broadcast into Y first, then the GEMM with beta (beta == 0 or no C:
 * the GEMM overwrites Y). k == 0 or alpha == 0: Y = beta * C (0 without C), A and B unread, as the host. */
OrtStatus* epabi_cuda_launch_gemm(const struct epabi_cuda_launch_env* env, const struct gemm_launch* in) {
    const char* what = "Gemm";
    struct gemm_launch L = *in;
    if (L.m <= 0 || L.n <= 0) return NULL;
    int64_t items = L.m * L.n;
    const unsigned grid = epabi_cuda_grid(items, EPABI_CUDA_BLOCK);
    if (L.k <= 0 || L.alpha == 0.0f) {
        float scale = L.beta;
        void* params[] = {&L, &scale, &items};
        return epabi_cuda_run(env, what, EPABI_CK_gemm_fill_c, grid, 1, 1, EPABI_CUDA_BLOCK, params);
    }
    float beta = 0.0f;
    if (L.c != NULL) {
        float one = 1.0f;
        void* params[] = {&L, &one, &items};
        EPABI_RETURN_IF_ERROR(epabi_cuda_run(env, what, EPABI_CK_gemm_fill_c, grid, 1, 1, EPABI_CUDA_BLOCK, params));
        beta = L.beta;
    }
    return epabi_cuda_sgemm(env, what, L.trans_a, L.trans_b, L.m, L.n, L.k, L.alpha, L.a, L.lda, 0, L.b, L.ldb, 0,
                            beta, L.y, L.n, 0, 1);
}

/* ---- Conv ------------------------------------------------------------------------------------------------ */

enum { CONV_MAX_GEMM_CALLS = 1024 };   /* im2col tiles beyond this go to the direct kernel instead */

/* Whether every offset and coordinate conv_im2col forms for L fits an int (its 32-bit index math): the group's
 * input (cg planes), one column tile, the output positions and the input coordinates a window reaches. */
static bool im2col_fits_int(const struct conv_launch* L) {
    const int64_t kdim = L->cg * L->kh * L->kw;
    return L->cg * L->h * L->wd <= INT_MAX && kdim * L->tile <= INT_MAX && L->oh * L->ow <= INT_MAX &&
           L->oh * L->sh + L->ph + L->kh * L->dh <= INT_MAX && L->ow * L->sw + L->pw + L->kw * L->dw <= INT_MAX;
}

bool epabi_cuda_conv_gemm_form(const struct conv_launch* L, int64_t* calls) {
    *calls = 0;
    const int64_t P = L->oh * L->ow, kdim = L->cg * L->kh * L->kw;
    if (L->n * L->m * P <= 0 || kdim <= 0 || L->mg <= 0) return false;
    if (L->path == CONV_GEMM_X) {
        *calls = L->group;
        return true;
    }
    if (L->path != CONV_GEMM_COLS || L->col == NULL || L->tile <= 0 || !im2col_fits_int(L)) return false;
    const int64_t n = L->n * L->group * ((P + L->tile - 1) / L->tile);
    if (n > CONV_MAX_GEMM_CALLS) return false;
    *calls = n;
    return true;
}

/* conv_im2col of columns [t0, t0 + tl) of one (image, group) (xg) into L->col: a thread per position (blocks of up
 * to 128 along them, fewer for a narrow tile), rows split over grid.y so that about 2048 blocks share the work. */
static OrtStatus* im2col(const struct epabi_cuda_launch_env* env, const struct conv_launch* L, const float* xg,
                         int64_t t0, int64_t tl) {
    const int64_t kdim = L->cg * L->kh * L->kw;
    const unsigned block = (unsigned)min64(128, (tl + 31) / 32 * 32);
    const int64_t gx = (tl + block - 1) / block;
    int64_t rows = (kdim * gx + 2047) / 2048;
    if (rows < 1) rows = 1;
    if ((kdim + rows - 1) / rows > MAX_GRID_YZ) rows = (kdim + MAX_GRID_YZ - 1) / MAX_GRID_YZ;
    const unsigned gy = (unsigned)((kdim + rows - 1) / rows);
    float* col = L->col;
    int t0i = (int)t0, tli = (int)tl, rows_i = (int)rows;
    void* params[] = {(void*)L, &xg, &col, &t0i, &tli, &rows_i};
    return epabi_cuda_run(env, "Conv", EPABI_CK_conv_im2col, (unsigned)gx, gy, 1, block, params);
}

/* The GEMM form where epabi_cuda_conv_gemm_form takes L: CONV_GEMM_X, per group one GEMM batched over the images
 * (X is its own column matrix); CONV_GEMM_COLS, per image, group and column tile, im2col into L->col then a GEMM.
 * Both first fill Y with the bias and add with beta = 1. Else (CONV_PER_CHANNEL, depthwise; no input channels; too
 * many tiles; offsets beyond int) the direct kernel, which covers every configuration. */
static OrtStatus* conv_body(const struct epabi_cuda_launch_env* env, const struct conv_launch* in) {
    const char* what = "Conv";
    struct conv_launch L = *in;
    const int64_t P = L.oh * L.ow;
    int64_t items = L.n * L.m * P;
    if (items <= 0) return NULL;
    int64_t calls = 0;
    if (!epabi_cuda_conv_gemm_form(&L, &calls)) {
        void* params[] = {&L, &items};
        return epabi_cuda_run(env, what, EPABI_CK_conv_direct, epabi_cuda_grid(items, EPABI_CUDA_BLOCK), 1, 1,
                              EPABI_CUDA_BLOCK, params);
    }
    const int64_t kdim = L.cg * L.kh * L.kw;
    float beta = 0.0f;
    if (L.bias != NULL) {
        int64_t rows = L.n * L.m;
        const unsigned gy = (unsigned)min64(rows, MAX_GRID_YZ);
        const unsigned gx = (unsigned)min64(epabi_cuda_grid(P, EPABI_CUDA_BLOCK), ((int64_t)1 << 20) / gy + 1);
        void* params[] = {&L, &rows};
        EPABI_RETURN_IF_ERROR(epabi_cuda_run(env, what, EPABI_CK_conv_bias_fill, gx, gy, 1, EPABI_CUDA_BLOCK, params));
        beta = 1.0f;
    }
    const int64_t plane = L.h * L.wd;
    if (L.path == CONV_GEMM_X) {
        for (int64_t g = 0; g < L.group; ++g)
            EPABI_RETURN_IF_ERROR(epabi_cuda_sgemm(env, what, false, false, L.mg, P, kdim, 1.0f, L.w + g * L.mg * kdim,
                                                   kdim, 0, L.x + g * L.cg * plane, P, L.c * plane, beta,
                                                   L.y + g * L.mg * P, P, L.m * P, L.n));
        return NULL;
    }
    for (int64_t ni = 0; ni < L.n; ++ni) {
        for (int64_t g = 0; g < L.group; ++g) {
            const float* xg = L.x + (ni * L.c + g * L.cg) * plane;
            const float* wg = L.w + g * L.mg * kdim;
            float* yg = L.y + (ni * L.m + g * L.mg) * P;
            for (int64_t t0 = 0; t0 < P; t0 += L.tile) {
                const int64_t tl = min64(L.tile, P - t0);
                EPABI_RETURN_IF_ERROR(im2col(env, &L, xg, t0, tl));
                EPABI_RETURN_IF_ERROR(epabi_cuda_sgemm(env, what, false, false, L.mg, tl, kdim, 1.0f, wg, kdim, 0,
                                                       L.col, tl, 0, beta, yg + t0, P, 0, 1));
            }
        }
    }
    return NULL;
}

/* The unary op (and its alpha, beta) that computes epilogue `kind` in place (epilogue.h); false for NONE. */
static bool epilogue_op(const struct conv_launch* L, struct un_args* a) {
    a->alpha = L->ep_alpha;
    a->beta = L->ep_beta;
    switch (L->epilogue) {
    case EPABI_EPILOGUE_RELU: a->op = UN_RELU; return true;
    case EPABI_EPILOGUE_SIGMOID: a->op = UN_SIGMOID; return true;
    case EPABI_EPILOGUE_SILU: a->op = UN_SILU; return true;
    case EPABI_EPILOGUE_TANH: a->op = UN_TANH; return true;
    case EPABI_EPILOGUE_LEAKY_RELU: a->op = UN_LEAKY_RELU; return true;
    case EPABI_EPILOGUE_HARD_SIGMOID: a->op = UN_HARD_SIGMOID; return true;
    case EPABI_EPILOGUE_HARD_SWISH: a->op = UN_HARD_SWISH; return true;
    default: return false;
    }
}

OrtStatus* epabi_cuda_conv_epilogue(const struct epabi_cuda_launch_env* env, const struct conv_launch* L) {
    struct un_args a;
    memset(&a, 0, sizeof a);
    if (!epilogue_op(L, &a)) return NULL;
    a.dtype = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    a.in = L->y;
    a.out = L->y;
    a.n = L->n * L->m * L->oh * L->ow;
    if (a.n <= 0) return NULL;
    void* params[] = {&a};
    return epabi_cuda_run(env, "Conv epilogue", EPABI_CK_un_f32, epabi_cuda_grid(a.n, EPABI_CUDA_BLOCK), 1, 1,
                          EPABI_CUDA_BLOCK, params);
}

OrtStatus* epabi_cuda_conv_ours(const struct epabi_cuda_launch_env* env, const struct conv_launch* L) {
    EPABI_RETURN_IF_ERROR(conv_body(env, L));
    return epabi_cuda_conv_epilogue(env, L);
}

/* The conv (through cuDNN when the stream has it and it takes the shape, cuda_cudnn.h; else our kernels), then the
 * activation the plan fused into it (conv_launch.epilogue) as one in-place pass over Y, unless cuDNN fused it. */
OrtStatus* epabi_cuda_launch_conv(const struct epabi_cuda_launch_env* env, const struct conv_launch* in) {
    bool done = false, fused = false;
    if (env->cudnn != NULL) EPABI_RETURN_IF_ERROR(epabi_cudnn_conv(env->cudnn, env, in, &done, &fused));
    if (!done) return epabi_cuda_conv_ours(env, in);
    return fused ? NULL : epabi_cuda_conv_epilogue(env, in);
}

/* ---- row-wise kinds --------------------------------------------------------------------------------------- */

static unsigned rows_grid(int64_t rows) {
    const int64_t cap = (int64_t)1 << 20;   /* the kernels loop grid-stride over rows */
    return (unsigned)(rows < 1 ? 1 : rows < cap ? rows : cap);
}

OrtStatus* epabi_cuda_launch_layernorm(const struct epabi_cuda_launch_env* env, const struct layernorm_launch* in) {
    struct layernorm_launch L = *in;
    if (L.rows <= 0) return NULL;
    if (L.norm > 0 && L.op[0].data == NULL)
        return epabi_error(env->api, ORT_EP_FAIL, EPABI_EP_NAME ": LayerNormalization launch without Scale");
    void* params[] = {&L};
    return epabi_cuda_run(env, "LayerNormalization", EPABI_CK_layernorm_f32, rows_grid(L.rows), 1, 1,
                          epabi_cuda_row_block(L.norm), params);
}

OrtStatus* epabi_cuda_launch_gmaxpool(const struct epabi_cuda_launch_env* env, const struct gmaxpool_launch* in) {
    struct gmaxpool_launch L = *in;
    if (L.planes <= 0) return NULL;
    void* params[] = {&L};
    /* one warp per plane, 8 warps per block */
    return epabi_cuda_run(env, "GlobalMaxPool", EPABI_CK_gmaxpool_f32, epabi_cuda_grid(L.planes, 8), 1, 1, 256,
                          params);
}

/* How a reduction runs: one thread per output (fewer than 32 elements reduced into each), a block per output (the
 * innermost merged dim reduced: threads read along it), or columns (the innermost merged dim kept: each block takes
 * `tw` neighbouring outputs along it and its threads split the reduced elements, so a warp reads consecutive floats;
 * cuda_kernels.cu, reduce_cols). The ReduceSum and moments kernels take the same shape for one geometry, which keeps
 * a moments step's bits those of the unfused ReduceSums. */
enum red_variant { RED_THREAD, RED_BLOCK, RED_COLS };
struct red_shape {
    enum red_variant variant;
    unsigned grid, block, tw;
};

static unsigned pow2_at_least(int64_t n, unsigned cap) {
    unsigned b = 1;
    while (b < cap && (int64_t)b < n) b <<= 1;
    return b;
}

static struct red_shape reduce_shape(const struct reduce_launch* L) {
    int64_t reduced = 1;
    for (int d = 0; d < L->rank; ++d)
        if (L->reduced[d]) reduced *= L->dims[d];
    struct red_shape r = {RED_THREAD, epabi_cuda_grid(L->out_numel, EPABI_CUDA_BLOCK), EPABI_CUDA_BLOCK, 0};
    if (reduced < 32) return r;
    if (L->reduced[L->rank - 1]) {
        r.variant = RED_BLOCK;
        r.grid = rows_grid(L->out_numel);
        r.block = epabi_cuda_row_block(reduced);
        return r;
    }
    /* columns: 32 outputs a block, down to 8 (one 32-byte sector per reduced row) while there are fewer than 64
     * blocks, so a small batch still spreads over the SMs; about 4 reduced elements per thread, 256 threads at most */
    const int64_t inner = L->dims[L->rank - 1], rows = L->out_numel / inner;
    const unsigned cols_threads = 256;   /* EP_COL_THREADS of cuda_kernels.cu: its shared arrays hold one per thread */
    unsigned tw = pow2_at_least(inner, 32);
    while (tw > 8 && rows * ((inner + tw - 1) / tw) < 64) tw >>= 1;
    const unsigned th = pow2_at_least((reduced + 3) / 4, cols_threads / tw);
    const int64_t tiles = rows * ((inner + tw - 1) / tw);
    r.variant = RED_COLS;
    r.tw = tw;
    r.block = tw * th;
    r.grid = rows_grid(tiles);
    return r;
}

OrtStatus* epabi_cuda_launch_reduce(const struct epabi_cuda_launch_env* env, const struct reduce_launch* in) {
    const char* what = "Reduce";
    struct reduce_launch L = *in;
    if (L.copy) {
        if (L.in_numel <= 0) return NULL;
        epabi_cu_result r = env->libs->cu->MemcpyAsync((epabi_cu_ptr)(uintptr_t)L.y, (epabi_cu_ptr)(uintptr_t)L.x,
                                                       (size_t)L.in_numel * sizeof(float), env->stream);
        return r == 0 ? NULL : epabi_cuda_fail(env, what, r);
    }
    if (L.out_numel <= 0) return NULL;
    if (L.rank < 1 || L.rank > EPABI_MAX_RANK)
        return epabi_error(env->api, ORT_NOT_IMPLEMENTED, EPABI_EP_NAME ": Reduce over rank %d", L.rank);
    const struct red_shape r = reduce_shape(&L);
    unsigned tw = r.tw;
    void* one[] = {&L};
    void* with_tw[] = {&L, &tw};   /* the column kernels take the outputs per block */
    void** params = r.variant == RED_COLS ? with_tw : one;
    static const enum epabi_cuda_kernel_id ids[] = {EPABI_CK_reduce_thread_f32, EPABI_CK_reduce_block_f32,
                                                    EPABI_CK_reduce_cols_f32};
    return epabi_cuda_run(env, what, ids[r.variant], r.grid, 1, 1, r.block, params);
}

OrtStatus* epabi_cuda_launch_moments(const struct epabi_cuda_launch_env* env, const struct moments_launch* in) {
    const char* what = "ReduceSum+Mul+ReduceSum";
    struct moments_launch M = *in;
    if (M.r.copy) {
        if (M.r.in_numel <= 0) return NULL;
        void* params[] = {&M};
        return epabi_cuda_run(env, what, EPABI_CK_moments_copy_f32, epabi_cuda_grid(M.r.in_numel, EPABI_CUDA_BLOCK),
                              1, 1, EPABI_CUDA_BLOCK, params);
    }
    if (M.r.out_numel <= 0) return NULL;
    if (M.r.rank < 1 || M.r.rank > EPABI_MAX_RANK || M.r.op != REDUCE_SUM)
        return epabi_error(env->api, ORT_EP_FAIL, EPABI_EP_NAME ": malformed moments launch (rank %d, op %d)",
                           M.r.rank, (int)M.r.op);
    const struct red_shape r = reduce_shape(&M.r);
    unsigned tw = r.tw;
    void* one[] = {&M};
    void* with_tw[] = {&M, &tw};   /* the column kernels take the outputs per block */
    void** params = r.variant == RED_COLS ? with_tw : one;
    static const enum epabi_cuda_kernel_id ids[] = {EPABI_CK_moments_thread_f32, EPABI_CK_moments_block_f32,
                                                    EPABI_CK_moments_cols_f32};
    return epabi_cuda_run(env, what, ids[r.variant], r.grid, 1, 1, r.block, params);
}

OrtStatus* epabi_cuda_launch_softmax(const struct epabi_cuda_launch_env* env, const struct softmax_launch* in) {
    const char* what = "Softmax";
    struct softmax_launch L = *in;
    if (L.outer <= 0 || L.len <= 0 || L.inner <= 0) return NULL;
    if (L.inner == 1) {
        void* params[] = {&L};
        return epabi_cuda_run(env, what, EPABI_CK_softmax_rows_f32, rows_grid(L.outer), 1, 1,
                              epabi_cuda_row_block(L.len), params);
    }
    int64_t items = L.outer * L.inner;
    void* params[] = {&L, &items};
    return epabi_cuda_run(env, what, EPABI_CK_softmax_strided_f32, epabi_cuda_grid(items, EPABI_CUDA_BLOCK), 1, 1,
                          EPABI_CUDA_BLOCK, params);
}

/* The fused softmax step (kernels/softmax_rows.h): one block per row, as the unfused ReduceMax and ReduceSum take a
 * row of this length. */
OrtStatus* epabi_cuda_launch_softmax_rows(const struct epabi_cuda_launch_env* env,
                                          const struct softmax_rows_launch* in) {
    struct softmax_rows_launch L = *in;
    if (L.rows <= 0 || L.len <= 0) return NULL;
    void* params[] = {&L};
    return epabi_cuda_run(env, "softmax step", EPABI_CK_softmax_fused_f32, rows_grid(L.rows), 1, 1,
                          epabi_cuda_row_block(L.len), params);
}
