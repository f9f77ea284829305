/*
 * matmul.c - MatMul (opsets 1-13) and Gemm (opsets 7-13) on float32, and epabi_sgemm (math_common.h), the
 * matrix product Conv shares.
 *
 * MatMul follows numpy.matmul: 1-D operands gain and then lose a unit dimension, batch dimensions broadcast.
 * When B has no batch of its own (the usual weight matrix) A's batch folds into M, so one product covers
 * the whole batch. Gemm: Y = alpha * op(A) * op(B) + beta * C, C unidirectionally broadcast to [M,N]; C is
 * optional from opset 11, and beta == 0 ignores C (as ORT's CPU Gemm does) rather than computing 0 * C.
 * MatMul 1/9/13 and Gemm 7/9/11/13 differ only in the dtypes they list, except that Gemm 7-10 require C.
 */
#include "math_common.h"
#include "blas.h"
#include "cuda_coverage.h"
#include "linear.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- epabi_sgemm -------------------------------------------------------------------------------------- */

/* Blocking of the fallback loop. An MR x NR block of C is accumulated in locals while K streams through
 * it, one accumulator row per A row so each row's update is one plain loop over NR that compilers turn into
 * vector FMAs (4 x 16 measured best across -O2, -O3, AVX2 and AVX-512 with GCC 12; a 2-D accumulator array
 * or other shapes fell to a tenth of that under some flags). A KC x NC panel of B (512 KiB) stays in L2
 * while every MC-row panel of A (64 KiB) passes over it. */
enum { SG_MR = 4, SG_NR = 16, SG_MC = 64, SG_KC = 256, SG_NC = 512 };
_Static_assert(SG_MR == 4, "sg_micro spells out four accumulator rows");

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

size_t epabi_sgemm_scratch_bytes(int64_t m, int64_t n, int64_t k) {
    /* Sized for the loop even with a BLAS: epabi_sgemm falls back to the loop when a size exceeds the
     * BLAS's int (or EPABI_BLAS=none), and the largest buffer is only 576 KiB. */
    if (m <= 0 || n <= 0 || k <= 0) return 0;
    int64_t kb = min64(k, SG_KC);
    int64_t nb = round_up(min64(n, SG_NC), SG_NR);
    int64_t mb = round_up(min64(m, SG_MC), SG_MR);
    return (size_t)round_up(kb * nb + mb * kb, 16) * sizeof(float);
}

/* op(B)[pc.., jc..] (kb x nb) into NR-column panels: panel q holds rows p at q*kb*NR + p*NR, zero-padded
 * past nb so the micro-kernel never needs a column count. */
static void sg_pack_b(bool trans_b, const float* b, int64_t ldb, int64_t pc, int64_t jc, int64_t kb, int64_t nb,
                      float* out) {
    for (int64_t q = 0; q < nb; q += SG_NR) {
        int64_t w = min64(SG_NR, nb - q);
        for (int64_t p = 0; p < kb; ++p) {
            float* dst = out + q * kb + p * SG_NR;
            for (int64_t j = 0; j < w; ++j)
                dst[j] = trans_b ? b[(jc + q + j) * ldb + pc + p] : b[(pc + p) * ldb + jc + q + j];
            for (int64_t j = w; j < SG_NR; ++j) dst[j] = 0.0f;
        }
    }
}

/* op(A)[ic.., pc..] (mb x kb) into MR-row panels, zero-padded past mb. */
static void sg_pack_a(bool trans_a, const float* a, int64_t lda, int64_t ic, int64_t pc, int64_t mb, int64_t kb,
                      float* out) {
    for (int64_t r0 = 0; r0 < mb; r0 += SG_MR) {
        int64_t h = min64(SG_MR, mb - r0);
        for (int64_t p = 0; p < kb; ++p) {
            float* dst = out + r0 * kb + p * SG_MR;
            for (int64_t r = 0; r < h; ++r)
                dst[r] = trans_a ? a[(pc + p) * lda + ic + r0 + r] : a[(ic + r0 + r) * lda + pc + p];
            for (int64_t r = h; r < SG_MR; ++r) dst[r] = 0.0f;
        }
    }
}

/* C[0..mr, 0..nr) += alpha * Apanel * Bpanel over kb. The full MR x NR product is always formed (the
 * panels are zero-padded) so the inner loops have constant trip counts the compiler can vectorize. */
static inline __attribute__((always_inline)) void sg_micro(int64_t kb, const float* restrict ap,
                                                           const float* restrict bp, float alpha, float* c,
                                                           int64_t ldc, int64_t mr, int64_t nr) {
    float acc0[SG_NR] = {0.0f}, acc1[SG_NR] = {0.0f}, acc2[SG_NR] = {0.0f}, acc3[SG_NR] = {0.0f};
    for (int64_t p = 0; p < kb; ++p) {
        const float* restrict bv = bp + p * SG_NR;
        const float a0 = ap[p * SG_MR], a1 = ap[p * SG_MR + 1], a2 = ap[p * SG_MR + 2], a3 = ap[p * SG_MR + 3];
        for (int j = 0; j < SG_NR; ++j) {
            acc0[j] += a0 * bv[j];
            acc1[j] += a1 * bv[j];
            acc2[j] += a2 * bv[j];
            acc3[j] += a3 * bv[j];
        }
    }
    float* acc[SG_MR] = {acc0, acc1, acc2, acc3};
    for (int64_t r = 0; r < mr; ++r)
        for (int64_t j = 0; j < nr; ++j) c[r * ldc + j] += alpha * acc[r][j];
}

static void sg_scale(int64_t m, int64_t n, float beta, float* c, int64_t ldc) {
    if (beta == 1.0f) return;
    for (int64_t i = 0; i < m; ++i) {
        float* row = c + i * ldc;
        if (beta == 0.0f) {
            for (int64_t j = 0; j < n; ++j) row[j] = 0.0f;   /* BLAS: beta == 0 never reads C (NaN stays out) */
        } else {
            for (int64_t j = 0; j < n; ++j) row[j] *= beta;
        }
    }
}

/* The micro-kernel is inlined here, so each clone holds a micro-kernel vectorised for its level. */
EPABI_SIMD_CLONES static void sg_loop(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                                      const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                                      float* pack) {
    float* pack_b = pack;
    float* pack_a = pack + min64(k, SG_KC) * round_up(min64(n, SG_NC), SG_NR);
    for (int64_t jc = 0; jc < n; jc += SG_NC) {
        int64_t nb = min64(SG_NC, n - jc);
        for (int64_t pc = 0; pc < k; pc += SG_KC) {
            int64_t kb = min64(SG_KC, k - pc);
            sg_pack_b(trans_b, b, ldb, pc, jc, kb, nb, pack_b);
            for (int64_t ic = 0; ic < m; ic += SG_MC) {
                int64_t mb = min64(SG_MC, m - ic);
                sg_pack_a(trans_a, a, lda, ic, pc, mb, kb, pack_a);
                for (int64_t ir = 0; ir < mb; ir += SG_MR) {
                    for (int64_t jr = 0; jr < nb; jr += SG_NR) {
                        sg_micro(kb, pack_a + ir * kb, pack_b + jr * kb, alpha, c + (ic + ir) * ldc + jc + jr, ldc,
                                 min64(SG_MR, mb - ir), min64(SG_NR, nb - jr));
                    }
                }
            }
        }
    }
}

void epabi_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc, float* pack) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0 || alpha == 0.0f) {   /* BLAS: A and B are not read; C = beta * C */
        sg_scale(m, n, beta, c, ldc);
        return;
    }
    epabi_cblas_sgemm_fn blas = epabi_blas()->sgemm;
    if (blas != NULL && m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX &&
        ldc <= INT_MAX) {
        blas(EPABI_CBLAS_ROW_MAJOR, trans_a ? EPABI_CBLAS_TRANS : EPABI_CBLAS_NO_TRANS,
             trans_b ? EPABI_CBLAS_TRANS : EPABI_CBLAS_NO_TRANS, (int)m, (int)n, (int)k, alpha, a, (int)lda, b,
             (int)ldb, beta, c, (int)ldc);
        return;
    }
    sg_scale(m, n, beta, c, ldc);
    sg_loop(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, c, ldc, pack);
}

/* ---- epabi_sgemm_pool ---------------------------------------------------------------------------------- */

size_t epabi_sgemm_pool_scratch_bytes(const struct epabi_pool* pool, int64_t m, int64_t n, int64_t k) {
    return (size_t)epabi_pool_threads(pool) * epabi_sgemm_scratch_bytes(m, n, k);
}

/* One product cut into panels of `step` columns (by_rows: rows) of C, one pool task each. */
struct sg_split {
    bool trans_a, trans_b, by_rows;
    int64_t m, n, k, lda, ldb, ldc, step;
    float alpha, beta;
    const float* a;
    const float* b;
    float* c;
    float* pack;
    size_t share;   /* floats of pack per thread */
};

static void sg_piece(void* ctx, int64_t i, int slot) {
    const struct sg_split* s = ctx;
    int64_t at = i * s->step;
    float* pack = s->pack != NULL ? s->pack + (size_t)slot * s->share : NULL;
    if (s->by_rows) {
        const float* a = s->trans_a ? s->a + at : s->a + at * s->lda;
        epabi_sgemm(s->trans_a, s->trans_b, min64(s->step, s->m - at), s->n, s->k, s->alpha, a, s->lda, s->b, s->ldb,
                    s->beta, s->c + at * s->ldc, s->ldc, pack);
    } else {
        const float* b = s->trans_b ? s->b + at * s->ldb : s->b + at;
        epabi_sgemm(s->trans_a, s->trans_b, s->m, min64(s->step, s->n - at), s->k, s->alpha, s->a, s->lda, b, s->ldb,
                    s->beta, s->c + at, s->ldc, pack);
    }
}

void epabi_sgemm_pool(struct epabi_pool* pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                      float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                      int64_t ldc, float* pack) {
    int64_t threads = epabi_pool_threads(pool);
    double macs = (double)m * (double)n * (double)(k > 0 ? k : 1);
    int64_t want = macs / EPABI_PARALLEL_MIN_MACS < (double)threads ? (int64_t)(macs / EPABI_PARALLEL_MIN_MACS)
                                                                    : threads;
    /* Panels keep the micro-kernels' widths whole (16 columns, 4 rows); C is cut along its longer side. */
    bool by_rows = m > n;
    int64_t unit = by_rows ? 4 : 16, extent = by_rows ? m : n;
    if (want > extent / unit) want = extent / unit;
    if (want < 2) {
        epabi_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, pack);
        return;
    }
    struct sg_split s = {trans_a, trans_b, by_rows, m, n, k, lda, ldb, ldc, 0, alpha, beta, a, b, c, pack,
                         epabi_sgemm_scratch_bytes(m, n, k) / sizeof(float)};
    s.step = round_up((extent + want - 1) / want, unit);
    epabi_pool_for(pool, (extent + s.step - 1) / s.step, sg_piece, &s);
}

/* ---- shared kernel plumbing --------------------------------------------------------------------------- */

static bool require_float(const struct epabi_node* node, int i, const char* what, char* why, size_t why_len) {
    if (node->in[i].dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) return true;
    snprintf(why, why_len, "%s: %s has dtype %s; only float is implemented", node->op_type, what,
             epabi_dtype_name(node->in[i].dtype));
    return false;
}

static void* scratch_or_null(struct epabi_exec* ex, size_t bytes, OrtStatus** st) {
    *st = NULL;
    return bytes == 0 ? NULL : epabi_exec_scratch(ex, bytes, st);
}

/* ---- MatMul ------------------------------------------------------------------------------------------- */


/* Element offsets of batch entry t in A and B (batch dims row-major, broadcast dims of stride 0). */
static void matmul_offsets(const struct matmul_launch* L, int64_t t, int64_t* ao, int64_t* bo) {
    *ao = 0;
    *bo = 0;
    for (int d = L->batch_rank - 1; d >= 0; --d) {
        int64_t i = t % L->batch[d];
        t /= L->batch[d];
        *ao += i * L->a_stride[d];
        *bo += i * L->b_stride[d];
    }
}

static void matmul_entry(void* ctx, int64_t t, int slot) {
    const struct matmul_launch* L = ctx;
    int64_t ao, bo;
    matmul_offsets(L, t, &ao, &bo);
    size_t share = epabi_sgemm_scratch_bytes(L->m, L->n, L->k) / sizeof(float);
    float* pack = L->pack != NULL ? L->pack + (size_t)slot * share : NULL;
    epabi_sgemm(false, false, L->m, L->n, L->k, 1.0f, L->a + ao, L->k, L->b + bo, L->n, 0.0f, L->y + t * L->m * L->n,
                L->n, pack);
}

/* A batch of at least as many products as threads, or of products too small to split, spreads whole products over
 * the pool; else each product is split (epabi_sgemm_pool). */
static void matmul_launch_fn(const void* p) {
    const struct matmul_launch* L = p;
    int64_t count = epabi_numel(L->batch_rank, L->batch);
    if (L->k == 0) {   /* empty operands (no data to offset into): the product is all zeros */
        for (int64_t i = 0; i < count * L->m * L->n; ++i) L->y[i] = 0.0f;
        return;
    }
    double macs = (double)L->m * (double)L->n * (double)L->k;
    int threads = epabi_pool_threads(L->pool);
    if (count > 1 && (count >= threads || macs < 2.0 * EPABI_PARALLEL_MIN_MACS)) {
        epabi_pool_for(macs * (double)count < 2.0 * EPABI_PARALLEL_MIN_MACS ? NULL : L->pool, count, matmul_entry,
                       (void*)L);
        return;
    }
    for (int64_t t = 0; t < count; ++t) {
        int64_t ao, bo;
        matmul_offsets(L, t, &ao, &bo);
        epabi_sgemm_pool(L->pool, false, false, L->m, L->n, L->k, 1.0f, L->a + ao, L->k, L->b + bo, L->n, 0.0f,
                         L->y + t * L->m * L->n, L->n, L->pack);
    }
}

static bool matmul_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in != 2 || node->n_out != 1) {
        snprintf(why, why_len, "MatMul: expected 2 inputs and 1 output, got %d and %d", node->n_in, node->n_out);
        return false;
    }
    if (!require_float(node, 0, "A", why, why_len) || !require_float(node, 1, "B", why, why_len)) return false;
    for (int i = 0; i < 2; ++i) {
        if (node->in[i].rank == 0) {
            snprintf(why, why_len, "MatMul: input %d is a scalar; MatMul needs rank >= 1", i);
            return false;
        }
    }
    return true;
}

/* Batch strides of one operand (its batch dims right-aligned to the output's), in elements. */
static void batch_strides(int rank, const int64_t* dims, int out_rank, int64_t matrix, int64_t* strides) {
    int64_t s = matrix;
    for (int d = out_rank - 1; d >= 0; --d) {
        int i = d - (out_rank - rank);
        if (i < 0 || dims[i] == 1) {
            strides[d] = 0;
        } else {
            strides[d] = s;
            s *= dims[i];
        }
    }
}

static OrtStatus* matmul_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                             int n_out) {
    (void)state;
    (void)n_out;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < 2) return epabi_error(api, ORT_INVALID_ARGUMENT, "MatMul: expected 2 inputs, got %d", n_in);
    const struct epabi_tensor* A = in[0];
    const struct epabi_tensor* B = in[1];
    char sa[160], sb[160];
    if (A->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || B->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "MatMul: inputs are %s and %s; only float is implemented",
                           epabi_dtype_name(A->dtype), epabi_dtype_name(B->dtype));
    if (A->rank < 1 || B->rank < 1)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "MatMul: A %s and B %s must both have rank >= 1",
                           epabi_shape_str(sa, sizeof sa, A->rank, A->dims),
                           epabi_shape_str(sb, sizeof sb, B->rank, B->dims));
    /* numpy: a 1-D A is a row [1,K], a 1-D B a column [K,1]; the unit dim is dropped from the result. */
    int ab = A->rank >= 2 ? A->rank - 2 : 0;
    int bb = B->rank >= 2 ? B->rank - 2 : 0;
    int64_t m = A->rank >= 2 ? A->dims[A->rank - 2] : 1;
    int64_t k = A->dims[A->rank - 1];
    int64_t kb = B->rank >= 2 ? B->dims[B->rank - 2] : B->dims[0];
    int64_t n = B->rank >= 2 ? B->dims[B->rank - 1] : 1;
    if (k != kb)
        return epabi_error(api, ORT_INVALID_ARGUMENT,
                           "MatMul: A %s has K=%lld but B %s has K=%lld (A's last dim must equal B's %s)",
                           epabi_shape_str(sa, sizeof sa, A->rank, A->dims), (long long)k,
                           epabi_shape_str(sb, sizeof sb, B->rank, B->dims), (long long)kb,
                           B->rank >= 2 ? "second-to-last" : "only");

    struct matmul_launch L;
    memset(&L, 0, sizeof L);
    if (!epabi_broadcast_shape(ab, A->dims, bb, B->dims, &L.batch_rank, L.batch))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "MatMul: batch dims of A %s and B %s do not broadcast",
                           epabi_shape_str(sa, sizeof sa, A->rank, A->dims),
                           epabi_shape_str(sb, sizeof sb, B->rank, B->dims));
    int64_t out_dims[EPABI_MAX_RANK];
    int out_rank = L.batch_rank;
    memcpy(out_dims, L.batch, sizeof(int64_t) * (size_t)L.batch_rank);
    if (A->rank >= 2) out_dims[out_rank++] = m;
    if (B->rank >= 2) out_dims[out_rank++] = n;

    OrtStatus* st = NULL;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, out_rank, out_dims, &st);
    if (Y == NULL) return st;
    if (epabi_numel(out_rank, out_dims) == 0) return NULL;

    L.a = A->data;
    L.b = B->data;
    L.y = Y->data;
    L.m = m;
    L.n = n;
    L.k = k;
    int64_t batch = epabi_numel(L.batch_rank, L.batch);
    if (epabi_numel(bb, B->dims) == 1 && epabi_numel(ab, A->dims) == batch) {
        L.m = m * batch;   /* A's matrices are contiguous and all meet the same B: one [batch*M, K] product */
        L.batch_rank = 0;
    } else {
        batch_strides(ab, A->dims, L.batch_rank, m * k, L.a_stride);
        batch_strides(bb, B->dims, L.batch_rank, k * n, L.b_stride);
    }
    L.pool = epabi_exec_pool(ex);
    L.pack = scratch_or_null(ex, epabi_sgemm_pool_scratch_bytes(L.pool, L.m, n, k), &st);
    if (st != NULL) return st;
    return epabi_exec_launch(ex, EPABI_LAUNCH_MATMUL, matmul_launch_fn, &L, sizeof L);
}

/* ---- Gemm --------------------------------------------------------------------------------------------- */

struct gemm_state {
    bool trans_a, trans_b;
    float alpha, beta;
};


/* Y = alpha * op(A) op(B) + beta * C on the host: C broadcast into Y row by row, then one sgemm with beta (none
 * without C). Gemm's launch and the linear steps' (linear.c, before their activation) run it. */
void epabi_gemm_host(const struct gemm_launch* L) {
    float beta = 0.0f;
    if (L->c != NULL) {
        for (int64_t i = 0; i < L->m; ++i) {
            const float* crow = L->c + (L->c_rows == 1 ? 0 : i * L->c_cols);
            float* yrow = L->y + i * L->n;
            if (L->c_cols == 1) {
                for (int64_t j = 0; j < L->n; ++j) yrow[j] = crow[0];
            } else {
                memcpy(yrow, crow, sizeof(float) * (size_t)L->n);
            }
        }
        beta = L->beta;
    }
    epabi_sgemm_pool(L->pool, L->trans_a, L->trans_b, L->m, L->n, L->k, L->alpha, L->a, L->lda, L->b, L->ldb, beta,
                     L->y, L->n, L->pack);
}

static void gemm_launch_fn(const void* p) { epabi_gemm_host(p); }

OrtStatus* epabi_gemm_c_extent(const struct epabi_api* api, const struct epabi_tensor* c, int64_t m, int64_t n,
                               int64_t* rows, int64_t* cols) {
    const int64_t cr = c->rank >= 2 ? c->dims[c->rank - 2] : 1;
    const int64_t cc = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
    if (c->rank > 2 || (cr != 1 && cr != m) || (cc != 1 && cc != n)) {
        char text[160];
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Gemm: C %s does not broadcast to the output [%lld,%lld]",
                           epabi_shape_str(text, sizeof text, c->rank, c->dims), (long long)m, (long long)n);
    }
    *rows = cr;
    *cols = cc;
    return NULL;
}

static bool gemm_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in < 2 || node->n_in > 3 || node->n_out != 1) {
        snprintf(why, why_len, "Gemm: expected 2-3 inputs and 1 output, got %d and %d", node->n_in, node->n_out);
        return false;
    }
    if (!require_float(node, 0, "A", why, why_len) || !require_float(node, 1, "B", why, why_len)) return false;
    bool has_c = epabi_desc_present(node, 2);
    if (has_c && !require_float(node, 2, "C", why, why_len)) return false;
    if (!has_c && node->since_version < 11) {
        snprintf(why, why_len, "Gemm: C is required before opset 11 (node is opset %d)", node->since_version);
        return false;
    }
    for (int i = 0; i < 2; ++i) {
        if (node->in[i].rank >= 0 && node->in[i].rank != 2) {
            snprintf(why, why_len, "Gemm: input %d has rank %d; Gemm needs rank 2", i, node->in[i].rank);
            return false;
        }
    }
    if (has_c && node->in[2].rank > 2) {
        snprintf(why, why_len, "Gemm: C has rank %d; it must broadcast to [M,N]", node->in[2].rank);
        return false;
    }
    return true;
}

static OrtStatus* gemm_init(const struct epabi_node* node, void** state) {
    struct gemm_state* s = calloc(1, sizeof *s);
    if (s == NULL) return epabi_error(node->api, ORT_FAIL, "Gemm: out of memory");
    int64_t v = 0;
    s->trans_a = epabi_attr_int(node, "transA", &v) && v != 0;
    s->trans_b = epabi_attr_int(node, "transB", &v) && v != 0;
    s->alpha = 1.0f;
    s->beta = 1.0f;
    epabi_attr_float(node, "alpha", &s->alpha);
    epabi_attr_float(node, "beta", &s->beta);
    *state = s;
    return NULL;
}

static OrtStatus* gemm_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                           int n_out) {
    (void)n_out;
    const struct gemm_state* s = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < 2) return epabi_error(api, ORT_INVALID_ARGUMENT, "Gemm: expected at least 2 inputs, got %d", n_in);
    const struct epabi_tensor* A = in[0];
    const struct epabi_tensor* B = in[1];
    const struct epabi_tensor* C = epabi_opt_input(in, n_in, 2);
    char sa[160], sb[160];
    if (A->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || B->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ||
        (C != NULL && C->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Gemm: only float inputs are implemented");
    if (A->rank != 2 || B->rank != 2)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Gemm: A %s and B %s must both have rank 2",
                           epabi_shape_str(sa, sizeof sa, A->rank, A->dims),
                           epabi_shape_str(sb, sizeof sb, B->rank, B->dims));
    int64_t m = s->trans_a ? A->dims[1] : A->dims[0];
    int64_t k = s->trans_a ? A->dims[0] : A->dims[1];
    int64_t kb = s->trans_b ? B->dims[1] : B->dims[0];
    int64_t n = s->trans_b ? B->dims[0] : B->dims[1];
    if (k != kb)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Gemm: op(A) of A %s (transA=%d) has K=%lld but op(B) of B %s "
                           "(transB=%d) has K=%lld",
                           epabi_shape_str(sa, sizeof sa, A->rank, A->dims), (int)s->trans_a, (long long)k,
                           epabi_shape_str(sb, sizeof sb, B->rank, B->dims), (int)s->trans_b, (long long)kb);

    struct gemm_launch L;
    memset(&L, 0, sizeof L);
    if (C != NULL && s->beta != 0.0f) {
        EPABI_RETURN_IF_ERROR(epabi_gemm_c_extent(api, C, m, n, &L.c_rows, &L.c_cols));
        L.c = C->data;
    }
    int64_t out_dims[2] = {m, n};
    OrtStatus* st = NULL;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, 2, out_dims, &st);
    if (Y == NULL) return st;
    if (m == 0 || n == 0) return NULL;
    L.a = A->data;
    L.b = B->data;
    L.y = Y->data;
    L.trans_a = s->trans_a;
    L.trans_b = s->trans_b;
    L.m = m;
    L.n = n;
    L.k = k;
    L.lda = A->dims[1];
    L.ldb = B->dims[1];
    L.alpha = s->alpha;
    L.beta = s->beta;
    L.pool = epabi_exec_pool(ex);
    L.pack = scratch_or_null(ex, epabi_sgemm_pool_scratch_bytes(L.pool, m, n, k), &st);
    if (st != NULL) return st;
    return epabi_exec_launch(ex, EPABI_LAUNCH_GEMM, gemm_launch_fn, &L, sizeof L);
}

/* ---- leads of linear steps (linear.h) ------------------------------------------------------------------- */

static bool matmul_linear_lead(const void* state, struct epabi_linear_lead* out) {
    (void)state;
    *out = (struct epabi_linear_lead){.matmul = true, .alpha = 1.0f, .beta = 1.0f};
    return true;
}

static bool gemm_linear_lead(const void* state, struct epabi_linear_lead* out) {
    const struct gemm_state* s = state;
    if (s == NULL) return false;
    *out = (struct epabi_linear_lead){.trans_a = s->trans_a, .trans_b = s->trans_b, .alpha = s->alpha,
                                      .beta = s->beta};
    return true;
}

const struct epabi_kernel epabi_kernels_matmul[] = {
    {.op_type = "MatMul", .since_min = 1, .since_max = 13, .supports = matmul_supports, .run = matmul_run,
     .launch = EPABI_LAUNCH_MATMUL, .cuda = epabi_cuda_float32_math, .linear_lead = matmul_linear_lead},
    {.op_type = "Gemm", .since_min = 7, .since_max = 13, .supports = gemm_supports, .init = gemm_init,
     .release = free, .run = gemm_run, .launch = EPABI_LAUNCH_GEMM, .cuda = epabi_cuda_float32_math,
     .linear_lead = gemm_linear_lead},
    {.op_type = NULL},
};
