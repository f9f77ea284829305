/*
 * pool.c - the pooling ops on N, C, spatial... tensors:
 *   GlobalMaxPool (opsets 1-22) and GlobalAveragePool (1-22) on float32: the max / mean over all spatial
 *     positions of each (N, C) plane;
 *   MaxPool (1-22) on float, double, int8 and uint8, and AveragePool (1-22) on float, over 1-3 spatial dims:
 *     kernel_shape, strides, pads, auto_pad, dilations, ceil_mode; MaxPool's optional Indices output with
 *     storage_order; AveragePool's count_include_pad.
 *
 * Opsets of one op differ only in the dtypes and attributes they list. A NaN in a plane makes that plane's
 * result NaN (the numpy/onnx reference behaviour), and an input with no spatial positions is a run-time error
 * rather than an invented value.
 *
 * MaxPool and AveragePool follow ORT's CPU EP: the output extent is floor (or, with ceil_mode, ceil) of
 * (in + pads - dilated kernel) / stride + 1, and with ceil_mode a last window that would start past
 * in + pad_begin is dropped. SAME_UPPER / SAME_LOWER pad by (ceil(in / stride) - 1) * stride + kernel - in
 * (the undilated kernel, as ORT), the odd one at the end / the beginning; pads are ignored then. A window
 * with no tap inside the input (possible only with dilations) gives the dtype's lowest value and an index
 * built from -1 per dim (MaxPool), or 0 (AveragePool), as ORT does. AveragePool sums in float, as ORT, and
 * count_include_pad divides by the taps inside [-pad_begin, in + pad_end), so a ceil_mode window that reaches
 * past the end padding counts only up to it. Like GlobalMaxPool (and unlike ORT, whose answer depends on
 * where the NaN sits), a NaN in a MaxPool window makes its result NaN, and Indices then point at the first
 * NaN. Ties: the first maximum in the window's row-major order.
 */
#include "math_common.h"
#include "cuda_coverage.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>


/* max(a, b) where a NaN on either side wins: max is then exact and associative, so any order of taps gives the
 * window loop's result (a NaN in the window gives NaN). */
static inline float max_nan(float a, float b) { return a != a || a > b ? a : b; }

/* Planes [p0, p1): sixteen running maxima per plane, one per lane of a vector, folded at the end. */
EPABI_SIMD_CLONES static void gmaxpool_planes(void* ctx, int64_t p0, int64_t p1) {
    const struct gmaxpool_launch* L = ctx;
    enum { LANES = 16 };
    for (int64_t i = p0; i < p1; ++i) {
        const float* x = L->x + i * L->size;
        float m = x[0];
        int64_t j = 0;
        if (L->size >= LANES) {
            float acc[LANES];
            for (int l = 0; l < LANES; ++l) acc[l] = x[l];
            for (j = LANES; j + LANES <= L->size; j += LANES)
                for (int l = 0; l < LANES; ++l) acc[l] = max_nan(acc[l], x[j + l]);
            for (int l = 0; l < LANES; ++l) m = max_nan(m, acc[l]);
        }
        for (; j < L->size; ++j) m = max_nan(m, x[j]);
        L->y[i] = m;
    }
}

static void gmaxpool_launch_fn(const void* p) {
    const struct gmaxpool_launch* L = p;
    int64_t grain = (4 * (int64_t)EPABI_PARALLEL_MIN_ELEMS + L->size - 1) / L->size;
    epabi_pool_for_range(L->pool, L->planes, grain, gmaxpool_planes, (void*)L);
}

static bool gmaxpool_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in != 1 || node->n_out != 1) {
        snprintf(why, why_len, "GlobalMaxPool: expected 1 input and 1 output, got %d and %d", node->n_in, node->n_out);
        return false;
    }
    if (node->in[0].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        snprintf(why, why_len, "GlobalMaxPool: X has dtype %s; only float is implemented",
                 epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    if (node->in[0].rank >= 0 && node->in[0].rank < 3) {
        snprintf(why, why_len, "GlobalMaxPool: X has rank %d; it needs N, C and at least one spatial axis",
                 node->in[0].rank);
        return false;
    }
    return true;
}

static OrtStatus* gmaxpool_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                               int n_in, int n_out) {
    (void)state;
    (void)n_out;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < 1) return epabi_error(api, ORT_INVALID_ARGUMENT, "GlobalMaxPool: expected 1 input, got %d", n_in);
    const struct epabi_tensor* X = in[0];
    char sx[160];
    if (X->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "GlobalMaxPool: X has dtype %s; only float is implemented",
                           epabi_dtype_name(X->dtype));
    if (X->rank < 3)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "GlobalMaxPool: X %s needs rank >= 3 (N, C, spatial...)",
                           epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    struct gmaxpool_launch L;
    memset(&L, 0, sizeof L);
    L.planes = X->dims[0] * X->dims[1];
    L.size = epabi_numel(X->rank - 2, X->dims + 2);
    if (L.size == 0 && L.planes > 0)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "GlobalMaxPool: X %s has no spatial positions to take a max of",
                           epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    int64_t out_dims[EPABI_MAX_RANK];
    for (int i = 0; i < X->rank; ++i) out_dims[i] = i < 2 ? X->dims[i] : 1;
    OrtStatus* st = NULL;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, X->rank, out_dims, &st);
    if (Y == NULL) return st;
    if (L.planes == 0) return NULL;
    L.x = X->data;
    L.y = Y->data;
    L.pool = epabi_exec_pool(ex);
    return epabi_exec_launch(ex, EPABI_LAUNCH_GLOBAL_MAXPOOL, gmaxpool_launch_fn, &L, sizeof L);
}

/* ---- GlobalAveragePool ------------------------------------------------------------------------------ */

/* Planes [p0, p1): sixteen running sums in double per plane, one per lane of a vector, folded at the end (double
 * keeps the mean of a large plane as exact as the sequential double sum this replaced, in any order). */
EPABI_SIMD_CLONES static void gavgpool_planes(void* ctx, int64_t p0, int64_t p1) {
    const struct gavgpool_launch* L = ctx;
    enum { LANES = 16 };
    for (int64_t i = p0; i < p1; ++i) {
        const float* x = L->x + i * L->size;
        double acc[LANES] = {0.0};
        int64_t j = 0;
        for (; j + LANES <= L->size; j += LANES)
            for (int l = 0; l < LANES; ++l) acc[l] += (double)x[j + l];
        double s = 0.0;
        for (int l = 0; l < LANES; ++l) s += acc[l];
        for (; j < L->size; ++j) s += (double)x[j];
        L->y[i] = (float)(s / (double)L->size);
    }
}

/* Serial: spreading the planes over the pool needs a pool member in gavgpool_launch, whose layout
 * native/cuda/cuda_kernels.cu mirrors (tests/test_cuda_source.py). */
static void gavgpool_launch_fn(const void* p) {
    gavgpool_planes((void*)p, 0, ((const struct gavgpool_launch*)p)->planes);
}

static bool gavgpool_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in != 1 || node->n_out != 1) {
        snprintf(why, why_len, "GlobalAveragePool: expected 1 input and 1 output, got %d and %d", node->n_in,
                 node->n_out);
        return false;
    }
    if (node->in[0].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        snprintf(why, why_len, "GlobalAveragePool: X has dtype %s; only float is implemented",
                 epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    if (node->in[0].rank >= 0 && node->in[0].rank < 3) {
        snprintf(why, why_len, "GlobalAveragePool: X has rank %d; it needs N, C and at least one spatial axis",
                 node->in[0].rank);
        return false;
    }
    return true;
}

static OrtStatus* gavgpool_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                               int n_in, int n_out) {
    (void)state;
    (void)n_out;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < 1) return epabi_error(api, ORT_INVALID_ARGUMENT, "GlobalAveragePool: expected 1 input, got %d", n_in);
    const struct epabi_tensor* X = in[0];
    char sx[160];
    if (X->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "GlobalAveragePool: X has dtype %s; only float is implemented",
                           epabi_dtype_name(X->dtype));
    if (X->rank < 3)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "GlobalAveragePool: X %s needs rank >= 3 (N, C, spatial...)",
                           epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    struct gavgpool_launch L;
    memset(&L, 0, sizeof L);
    L.planes = X->dims[0] * X->dims[1];
    L.size = epabi_numel(X->rank - 2, X->dims + 2);
    if (L.size == 0 && L.planes > 0)
        return epabi_error(api, ORT_INVALID_ARGUMENT,
                           "GlobalAveragePool: X %s has no spatial positions to take a mean of",
                           epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    int64_t out_dims[EPABI_MAX_RANK];
    for (int i = 0; i < X->rank; ++i) out_dims[i] = i < 2 ? X->dims[i] : 1;
    OrtStatus* st = NULL;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, X->rank, out_dims, &st);
    if (Y == NULL) return st;
    if (L.planes == 0) return NULL;
    L.x = X->data;
    L.y = Y->data;
    return epabi_exec_launch(ex, EPABI_LAUNCH_GLOBAL_AVGPOOL, gavgpool_launch_fn, &L, sizeof L);
}

/* ---- MaxPool, AveragePool --------------------------------------------------------------------------- */

enum pool_auto_pad { POOL_NOTSET, POOL_VALID, POOL_SAME_UPPER, POOL_SAME_LOWER };

struct pool_state {
    enum pool_op op;
    int sr;                            /* spatial rank: 1, 2 or 3 */
    int64_t kernel[3], strides[3], dilations[3];
    int64_t pads[6];                   /* ONNX order: the begin of each axis, then the end of each axis */
    enum pool_auto_pad auto_pad;
    bool ceil_mode, count_include_pad, col_major;
    bool want_indices;                 /* MaxPool's output 1 is wired */
};

/* The index ORT's MaxPool reports for the tap (h, w, d) of plane p (each dim's -1 when no tap was found). */
static int64_t pool_index(const struct pool_launch* L, int64_t p, const int64_t* at) {
    const int64_t* n = L->in;
    int64_t base = p * n[0] * n[1] * n[2];
    if (L->col_major) return base + at[0] + at[1] * n[0] + at[2] * n[0] * n[1];
    return base + (at[0] * n[1] + at[1]) * n[2] + at[2];
}

/* Where window o of dim d starts, and its taps [lo, hi) that lie inside [0, limit). */
static void pool_taps(const struct pool_launch* L, int d, int64_t o, int64_t limit, int64_t* start, int64_t* lo,
                      int64_t* hi) {
    int64_t s = o * L->stride[d] - L->pad_begin[d];
    int64_t dil = L->dilation[d], k = L->kernel[d];
    int64_t first = s >= 0 ? 0 : (-s + dil - 1) / dil;
    int64_t end = s >= limit ? 0 : (limit - 1 - s) / dil + 1;
    if (end > k) end = k;
    *start = s;
    *lo = first;
    *hi = end > first ? end : first;
}

/* Max over each window, the first NaN sticking; the dtype's lowest value when no tap is inside. */
#define POOL_MAX_LOOP(T, LOWEST, IS_NAN)                                                                            \
    do {                                                                                                            \
        const T* X = (const T*)L->x;                                                                                \
        T* Y = (T*)L->y;                                                                                            \
        int64_t e = p0 * L->out[0] * L->out[1] * L->out[2];                                                         \
        for (int64_t p = p0; p < p1; ++p) {                                                                         \
            const T* xp = X + p * L->in[0] * L->in[1] * L->in[2];                                                   \
            for (int64_t o0 = 0; o0 < L->out[0]; ++o0) {                                                            \
                int64_t s0, a0, b0;                                                                                 \
                pool_taps(L, 0, o0, L->in[0], &s0, &a0, &b0);                                                       \
                for (int64_t o1 = 0; o1 < L->out[1]; ++o1) {                                                        \
                    int64_t s1, a1, b1;                                                                             \
                    pool_taps(L, 1, o1, L->in[1], &s1, &a1, &b1);                                                   \
                    for (int64_t o2 = 0; o2 < L->out[2]; ++o2, ++e) {                                               \
                        int64_t s2, a2, b2;                                                                         \
                        pool_taps(L, 2, o2, L->in[2], &s2, &a2, &b2);                                               \
                        T m = LOWEST;                                                                               \
                        bool found = false;                                                                         \
                        int64_t at[3] = {-1, L->spatial > 1 ? -1 : 0, L->spatial > 2 ? -1 : 0};                     \
                        for (int64_t i0 = a0; i0 < b0; ++i0) {                                                      \
                            int64_t h = s0 + i0 * L->dilation[0];                                                   \
                            for (int64_t i1 = a1; i1 < b1; ++i1) {                                                  \
                                int64_t w = s1 + i1 * L->dilation[1];                                               \
                                const T* row = xp + (h * L->in[1] + w) * L->in[2];                                  \
                                for (int64_t i2 = a2; i2 < b2; ++i2) {                                              \
                                    int64_t d = s2 + i2 * L->dilation[2];                                           \
                                    T v = row[d];                                                                   \
                                    if (!found || (!IS_NAN(m) && (v > m || IS_NAN(v)))) {                           \
                                        m = v;                                                                      \
                                        found = true;                                                               \
                                        at[0] = h;                                                                  \
                                        at[1] = w;                                                                  \
                                        at[2] = d;                                                                  \
                                    }                                                                               \
                                }                                                                                   \
                            }                                                                                       \
                        }                                                                                           \
                        Y[e] = m;                                                                                   \
                        if (L->indices != NULL) L->indices[e] = pool_index(L, p, at);                               \
                    }                                                                                               \
                }                                                                                                   \
            }                                                                                                       \
        }                                                                                                           \
    } while (0)

#define POOL_FLOAT_NAN(v) ((v) != (v))
#define POOL_INT_NAN(v) false

/* The end of a window's counted span for count_include_pad: its taps stop at in + pad_end. */
static int64_t pool_avg_span(const struct pool_launch* L, int d, int64_t start) {
    int64_t end = start + L->kernel[d] * L->dilation[d];
    int64_t limit = L->in[d] + L->pad_end[d];
    if (end > limit) end = limit;
    return 1 + (end - start - 1) / L->dilation[d];
}

/* AveragePool adds the taps inside [0, in) before in + pad_end (a negative pad_end, from SAME with a kernel
 * shorter than the stride, ends the windows early). */
static int64_t avg_limit(const struct pool_launch* L, int d) {
    return L->pad_end[d] < 0 ? L->in[d] + L->pad_end[d] : L->in[d];
}

static void pool_avg(const struct pool_launch* L, int64_t p0, int64_t p1) {
    const float* X = L->x;
    float* Y = L->y;
    int64_t e = p0 * L->out[0] * L->out[1] * L->out[2];
    for (int64_t p = p0; p < p1; ++p) {
        const float* xp = X + p * L->in[0] * L->in[1] * L->in[2];
        for (int64_t o0 = 0; o0 < L->out[0]; ++o0) {
            int64_t s0, a0, b0;
            pool_taps(L, 0, o0, avg_limit(L, 0), &s0, &a0, &b0);
            for (int64_t o1 = 0; o1 < L->out[1]; ++o1) {
                int64_t s1, a1, b1;
                pool_taps(L, 1, o1, avg_limit(L, 1), &s1, &a1, &b1);
                for (int64_t o2 = 0; o2 < L->out[2]; ++o2, ++e) {
                    int64_t s2, a2, b2;
                    pool_taps(L, 2, o2, avg_limit(L, 2), &s2, &a2, &b2);
                    float sum = 0.0f;
                    for (int64_t i0 = a0; i0 < b0; ++i0) {
                        int64_t h = s0 + i0 * L->dilation[0];
                        for (int64_t i1 = a1; i1 < b1; ++i1) {
                            const float* row = xp + (h * L->in[1] + s1 + i1 * L->dilation[1]) * L->in[2];
                            for (int64_t i2 = a2; i2 < b2; ++i2) sum += row[s2 + i2 * L->dilation[2]];
                        }
                    }
                    int64_t taps = (b0 - a0) * (b1 - a1) * (b2 - a2);
                    if (taps > 0 && L->count_include_pad)
                        taps = pool_avg_span(L, 0, s0) * pool_avg_span(L, 1, s1) * pool_avg_span(L, 2, s2);
                    Y[e] = taps > 0 ? sum / (float)taps : 0.0f;
                }
            }
        }
    }
}

/* The max over taps [lo, hi) of a window starting at `start` (max_nan), -FLT_MAX when there is none. */
static inline float window_max(const float* row, int64_t start, int64_t lo, int64_t hi, int64_t dil) {
    if (hi <= lo) return -FLT_MAX;
    float m = row[start + lo * dil];
    for (int64_t i = lo + 1; i < hi; ++i) m = max_nan(m, row[start + i * dil]);
    return m;
}

/* Float MaxPool over dims 0 and 1 without Indices, planes [p0, p1), separably: each input row's maxima along dim
 * 1 into rows[h][o1], then each output's max down dim 0 over those. Each max starts from the window's first tap,
 * so -inf stays -inf; a window with no tap inside gives -FLT_MAX (the window loop's lowest) and a NaN anywhere in
 * it gives NaN: max_nan makes both passes exact. */
EPABI_SIMD_CLONES static void pool_max_separable(const struct pool_launch* L, int64_t p0, int64_t p1, float* rows) {
    const int64_t h_in = L->in[0], w_in = L->in[1], oh = L->out[0], ow = L->out[1];
    const int64_t sw = L->stride[1], dw = L->dilation[1], kw = L->kernel[1];
    /* output columns whose taps all lie inside the row: ox*sw - pad >= 0 and ox*sw - pad + (kw-1)*dw < w_in */
    int64_t mid0 = (L->pad_begin[1] + sw - 1) / sw, mid1 = 0;
    const int64_t reach = w_in - 1 - (kw - 1) * dw + L->pad_begin[1];
    if (reach >= 0) mid1 = reach / sw + 1;
    if (mid1 > ow) mid1 = ow;
    if (mid0 > mid1) mid0 = mid1;
    for (int64_t p = p0; p < p1; ++p) {
        const float* xp = (const float*)L->x + p * h_in * w_in;
        float* yp = (float*)L->y + p * oh * ow;
        for (int64_t h = 0; h < h_in; ++h) {
            const float* row = xp + h * w_in;
            float* r = rows + h * ow;
            for (int64_t o = 0; o < ow; ++o) {
                if (o == mid0 && mid1 > mid0) {   /* the interior: every tap inside, a plain loop per tap */
                    const float* base = row + mid0 * sw - L->pad_begin[1];
                    for (int64_t q = mid0; q < mid1; ++q) r[q] = base[(q - mid0) * sw];
                    for (int64_t i = 1; i < kw; ++i) {
                        const float* tap = base + i * dw;
                        for (int64_t q = mid0; q < mid1; ++q) r[q] = max_nan(r[q], tap[(q - mid0) * sw]);
                    }
                    o = mid1 - 1;
                    continue;
                }
                int64_t s0, a0, b0;
                pool_taps(L, 1, o, w_in, &s0, &a0, &b0);
                r[o] = window_max(row, s0, a0, b0, dw);
            }
        }
        for (int64_t oy = 0; oy < oh; ++oy) {
            int64_t s0, a0, b0;
            pool_taps(L, 0, oy, h_in, &s0, &a0, &b0);
            float* y = yp + oy * ow;
            if (b0 <= a0) {
                for (int64_t q = 0; q < ow; ++q) y[q] = -FLT_MAX;
                continue;
            }
            memcpy(y, rows + (s0 + a0 * L->dilation[0]) * ow, (size_t)ow * sizeof(float));
            for (int64_t i = a0 + 1; i < b0; ++i) {
                const float* r = rows + (s0 + i * L->dilation[0]) * ow;
                for (int64_t q = 0; q < ow; ++q) y[q] = max_nan(y[q], r[q]);
            }
        }
    }
}

/* Planes [p0, p1) of the launch (one task of the pool: a contiguous share of the planes). */
static void pool_planes(const struct pool_launch* L, int64_t p0, int64_t p1, int slot) {
    if (L->op == POOL_AVERAGE) {
        pool_avg(L, p0, p1);
        return;
    }
    if (L->rows != NULL) {
        pool_max_separable(L, p0, p1, L->rows + (int64_t)slot * L->in[0] * L->out[1]);
        return;
    }
    switch (L->dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: POOL_MAX_LOOP(float, -FLT_MAX, POOL_FLOAT_NAN); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: POOL_MAX_LOOP(double, -DBL_MAX, POOL_FLOAT_NAN); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: POOL_MAX_LOOP(int8_t, INT8_MIN, POOL_INT_NAN); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: POOL_MAX_LOOP(uint8_t, 0, POOL_INT_NAN); break;
    default: break;
    }
}

struct pool_split {
    const struct pool_launch* L;
    int64_t per_task;
};

static void pool_task(void* ctx, int64_t t, int slot) {
    const struct pool_split* s = ctx;
    const int64_t p0 = t * s->per_task, p1 = p0 + s->per_task < s->L->planes ? p0 + s->per_task : s->L->planes;
    pool_planes(s->L, p0, p1, slot);
}

/* Planes spread over the pool, four tasks a thread, once a plane's windows hold enough taps to be worth it. */
static void pool_launch_fn(const void* p) {
    const struct pool_launch* L = p;
    const int64_t taps = L->out[0] * L->out[1] * L->out[2] * L->kernel[0] * L->kernel[1] * L->kernel[2];
    const int64_t threads = epabi_pool_threads(L->pool);
    int64_t tasks = taps * L->planes / (int64_t)EPABI_PARALLEL_MIN_ELEMS;
    if (tasks > 4 * threads) tasks = 4 * threads;
    if (tasks > L->planes) tasks = L->planes;
    if (threads <= 1 || tasks < 2) {
        pool_planes(L, 0, L->planes, 0);
        return;
    }
    struct pool_split s = {L, (L->planes + tasks - 1) / tasks};
    epabi_pool_for(L->pool, (L->planes + s.per_task - 1) / s.per_task, pool_task, &s);
}

static bool pool_dtype_ok(enum pool_op op, ONNXTensorElementDataType t) {
    if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) return true;
    return op == POOL_MAX && (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 ||
                              t == ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8);
}

static bool pool_output_wired(const struct epabi_node* node, int i) {
    if (i >= node->n_out) return false;
    const struct epabi_value_desc* d = &node->out[i];
    return d->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED || (d->name != NULL && d->name[0] != '\0');
}

/* Reads the attributes into s; false with a reason when a value is outside what ORT's CPU EP accepts. */
static bool pool_parse(const struct epabi_node* node, struct pool_state* s, char* why, size_t why_len) {
    const char* op = node->op_type;
    memset(s, 0, sizeof *s);
    s->op = strcmp(op, "MaxPool") == 0 ? POOL_MAX : POOL_AVERAGE;
    int64_t vals[8];
    size_t cnt = 0;
    if (!epabi_attr_ints(node, "kernel_shape", vals, 8, &cnt) || cnt < 1 || cnt > 3) {
        snprintf(why, why_len, "%s: kernel_shape must list 1 to 3 dims (got %zu)", op, cnt);
        return false;
    }
    s->sr = (int)cnt;
    int xr = node->in[0].rank;
    if (xr >= 0 && xr != s->sr + 2) {
        snprintf(why, why_len, "%s: X has rank %d but kernel_shape has %d dims", op, xr, s->sr);
        return false;
    }
    char pad[32] = "NOTSET";
    epabi_attr_string(node, "auto_pad", pad, sizeof pad);
    if (strcmp(pad, "NOTSET") == 0) {
        s->auto_pad = POOL_NOTSET;
    } else if (strcmp(pad, "VALID") == 0) {
        s->auto_pad = POOL_VALID;
    } else if (strcmp(pad, "SAME_UPPER") == 0) {
        s->auto_pad = POOL_SAME_UPPER;
    } else if (strcmp(pad, "SAME_LOWER") == 0) {
        s->auto_pad = POOL_SAME_LOWER;
    } else {
        snprintf(why, why_len, "%s: auto_pad='%s' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", op, pad);
        return false;
    }
    struct {
        const char* name;
        int64_t* dst;
        size_t len;
        int64_t deflt, min;
    } lists[] = {
        {"kernel_shape", s->kernel, (size_t)s->sr, 1, 1},
        {"strides", s->strides, (size_t)s->sr, 1, 1},
        {"dilations", s->dilations, (size_t)s->sr, 1, 1},
        {"pads", s->pads, 2 * (size_t)s->sr, 0, 0},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; ++i) {
        for (size_t j = 0; j < lists[i].len; ++j) lists[i].dst[j] = lists[i].deflt;
        /* an empty list means the default, as ORT reads it */
        if (!epabi_attr_ints(node, lists[i].name, vals, 8, &cnt) || cnt == 0) continue;
        if (cnt != lists[i].len) {
            snprintf(why, why_len, "%s: %s has %zu values; a %d-D pool needs %zu", op, lists[i].name, cnt, s->sr,
                     lists[i].len);
            return false;
        }
        for (size_t j = 0; j < cnt; ++j) {
            /* The upper bound keeps every extent product of the shape arithmetic inside int64. */
            if (vals[j] < lists[i].min || vals[j] > INT32_MAX) {
                snprintf(why, why_len, "%s: %s[%zu]=%lld must be in [%lld, %d]", op, lists[i].name, j,
                         (long long)vals[j], (long long)lists[i].min, INT32_MAX);
                return false;
            }
            lists[i].dst[j] = vals[j];
        }
    }
    for (int d = 0; d < s->sr; ++d) {
        if (s->pads[d] >= s->kernel[d] || s->pads[s->sr + d] >= s->kernel[d]) {
            /* ORT's CPU EP refuses the node ("Pad should be smaller than kernel") */
            snprintf(why, why_len, "%s: pads of axis %d (%lld, %lld) must be smaller than its kernel (%lld)", op, d,
                     (long long)s->pads[d], (long long)s->pads[s->sr + d], (long long)s->kernel[d]);
            return false;
        }
    }
    int64_t v = 0;
    s->ceil_mode = epabi_attr_int(node, "ceil_mode", &v) && v != 0;
    v = 0;
    s->count_include_pad = s->op == POOL_AVERAGE && epabi_attr_int(node, "count_include_pad", &v) && v != 0;
    v = 0;
    if (s->op == POOL_MAX && epabi_attr_int(node, "storage_order", &v) && v != 0 && v != 1) {
        snprintf(why, why_len, "%s: storage_order=%lld is not 0 or 1", op, (long long)v);
        return false;
    }
    s->col_major = s->op == POOL_MAX && v == 1;
    s->want_indices = s->op == POOL_MAX && pool_output_wired(node, 1);
    return true;
}

static bool pool_supports(const struct epabi_node* node, char* why, size_t why_len) {
    const bool is_max = strcmp(node->op_type, "MaxPool") == 0;
    const int max_out = is_max && node->since_version >= 8 ? 2 : 1;
    if (node->n_in != 1 || node->n_out < 1 || node->n_out > max_out) {
        snprintf(why, why_len, "%s: expected 1 input and at most %d output%s at opset %d, got %d and %d",
                 node->op_type, max_out, max_out > 1 ? "s" : "", node->since_version, node->n_in, node->n_out);
        return false;
    }
    const ONNXTensorElementDataType t = node->in[0].dtype;
    if (!pool_dtype_ok(is_max ? POOL_MAX : POOL_AVERAGE, t)) {
        snprintf(why, why_len, "%s: X has dtype %s; only %s is implemented", node->op_type, epabi_dtype_name(t),
                 is_max ? "float, double, int8 and uint8" : "float");
        return false;
    }
    struct pool_state s;
    return pool_parse(node, &s, why, why_len);
}

static OrtStatus* pool_init(const struct epabi_node* node, void** state) {
    struct pool_state* s = malloc(sizeof *s);
    if (s == NULL) return epabi_error(node->api, ORT_FAIL, "%s: out of memory", node->op_type);
    char why[256];
    if (!pool_parse(node, s, why, sizeof why)) {
        free(s);
        return epabi_error(node->api, ORT_INVALID_ARGUMENT, "%s", why);
    }
    *state = s;
    return NULL;
}

/* Output extent and padding of spatial axis d; false when the padded input is shorter than the dilated kernel. */
static bool pool_axis(const struct pool_state* s, int d, int64_t in, int64_t* out, int64_t* pb, int64_t* pe) {
    const int64_t st = s->strides[d], k = s->kernel[d], dk = (k - 1) * s->dilations[d] + 1;
    switch (s->auto_pad) {
    case POOL_NOTSET:
        *pb = s->pads[d];
        *pe = s->pads[s->sr + d];
        break;
    case POOL_VALID:
        *pb = *pe = 0;
        break;
    case POOL_SAME_UPPER:
    case POOL_SAME_LOWER: {
        /* may be negative (kernel < stride); C's division then truncates toward zero, as ORT's C++ does */
        int64_t need = ((in + st - 1) / st - 1) * st + k - in;
        *pb = s->auto_pad == POOL_SAME_UPPER ? need / 2 : (need + 1) / 2;
        *pe = need - *pb;
        break;
    }
    }
    /* As ORT: span / stride + 1 with C's division (truncating toward zero, so a span in (-stride, 0) still
     * gives one window), or with ceil_mode the true ceiling of span / stride, plus 1. */
    const int64_t span = in + *pb + *pe - dk;
    int64_t o = !s->ceil_mode ? span / st + 1 : span >= 0 ? (span + st - 1) / st + 1 : -(-span / st) + 1;
    if (o < 0) return false;
    if (s->ceil_mode && o > 0 && (o - 1) * st >= in + *pb) --o;   /* the last window would start past the input */
    *out = o;
    return true;
}

static OrtStatus* pool_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                           int n_out) {
    const struct pool_state* s = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    const char* op = s->op == POOL_MAX ? "MaxPool" : "AveragePool";
    if (n_in < 1) return epabi_error(api, ORT_INVALID_ARGUMENT, "%s: expected 1 input, got %d", op, n_in);
    const struct epabi_tensor* X = in[0];
    char sx[160];
    if (!pool_dtype_ok(s->op, X->dtype))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "%s: X has dtype %s, which is not implemented", op,
                           epabi_dtype_name(X->dtype));
    if (X->rank != s->sr + 2)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "%s: X %s must have rank %d for a %d-D kernel_shape", op,
                           epabi_shape_str(sx, sizeof sx, X->rank, X->dims), s->sr + 2, s->sr);
    if (epabi_numel(X->rank, X->dims) == 0 && X->dims[0] != 0)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "%s: X %s is empty in a dim other than N", op,
                           epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    struct pool_launch L;
    memset(&L, 0, sizeof L);
    L.dtype = X->dtype;
    L.op = s->op;
    L.count_include_pad = s->count_include_pad;
    L.col_major = s->col_major;
    L.spatial = s->sr;
    L.planes = X->dims[0] * X->dims[1];
    int64_t out_dims[5] = {X->dims[0], X->dims[1], 1, 1, 1};
    for (int d = 0; d < 3; ++d) {
        L.in[d] = L.out[d] = L.kernel[d] = L.stride[d] = L.dilation[d] = 1;
        if (d >= s->sr) continue;
        L.in[d] = X->dims[2 + d];
        L.kernel[d] = s->kernel[d];
        L.stride[d] = s->strides[d];
        L.dilation[d] = s->dilations[d];
        if (!pool_axis(s, d, L.in[d], &L.out[d], &L.pad_begin[d], &L.pad_end[d]))
            return epabi_error(api, ORT_INVALID_ARGUMENT,
                               "%s: X %s spatial axis %d (%lld, padded by %lld+%lld) is smaller than the dilated "
                               "kernel (%lld)",
                               op, epabi_shape_str(sx, sizeof sx, X->rank, X->dims), d, (long long)L.in[d],
                               (long long)L.pad_begin[d], (long long)L.pad_end[d],
                               (long long)((s->kernel[d] - 1) * s->dilations[d] + 1));
        out_dims[2 + d] = L.out[d];
    }
    OrtStatus* st = NULL;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, X->dtype, X->rank, out_dims, &st);
    if (Y == NULL) return st;
    struct epabi_tensor* I = NULL;
    if (s->want_indices && n_out > 1) {
        I = epabi_exec_output(ex, 1, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, X->rank, out_dims, &st);
        if (I == NULL) return st;
    }
    if (epabi_numel(X->rank, out_dims) == 0) return NULL;
    L.x = X->data;
    L.y = Y->data;
    L.indices = I != NULL ? I->data : NULL;
    L.pool = epabi_exec_pool(ex);
    if (L.pool != NULL && s->op == POOL_MAX && L.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT && L.indices == NULL &&
        s->sr <= 2) {
        size_t bytes = 0;
        if (epabi_mul_size((size_t)(L.in[0] * L.out[1]) * sizeof(float), (size_t)epabi_pool_threads(L.pool), &bytes) &&
            bytes > 0) {
            L.rows = epabi_exec_scratch(ex, bytes, &st);
            if (L.rows == NULL) return st;
        }
    }
    return epabi_exec_launch(ex, EPABI_LAUNCH_POOL, pool_launch_fn, &L, sizeof L);
}

/* CUDA: pool_max_{f32,f64,i8,u8} and pool_avg_f32, with the Indices output. */
static bool pool_cuda(const struct epabi_node* node, char* why, size_t why_len) {
    const ONNXTensorElementDataType t = epabi_cuda_in_dtype(node, 0);
    const bool is_max = strcmp(node->op_type, "MaxPool") == 0;
    return pool_dtype_ok(is_max ? POOL_MAX : POOL_AVERAGE, t) || epabi_cuda_refuse(node, why, why_len, "X", t);
}

const struct epabi_kernel epabi_kernels_pool[] = {
    {.op_type = "GlobalMaxPool", .since_min = 1, .since_max = 22, .supports = gmaxpool_supports,
     .run = gmaxpool_run, .launch = EPABI_LAUNCH_GLOBAL_MAXPOOL, .cuda = epabi_cuda_float32_math},
    {.op_type = "GlobalAveragePool", .since_min = 1, .since_max = 22, .supports = gavgpool_supports,
     .run = gavgpool_run, .launch = EPABI_LAUNCH_GLOBAL_AVGPOOL, .cuda = epabi_cuda_float32_math},
    {.op_type = "MaxPool", .since_min = 1, .since_max = 22, .supports = pool_supports, .init = pool_init,
     .release = free, .run = pool_run, .launch = EPABI_LAUNCH_POOL, .cuda = pool_cuda},
    {.op_type = "AveragePool", .since_min = 1, .since_max = 22, .supports = pool_supports, .init = pool_init,
     .release = free, .run = pool_run, .launch = EPABI_LAUNCH_POOL, .cuda = pool_cuda},
    {.op_type = NULL},
};
