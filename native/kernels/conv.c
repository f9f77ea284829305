/*
 * conv.c - Conv (opsets 1-22) on float32, NCHW, 1-D and 2-D: group, dilations, strides, pads, auto_pad
 * (NOTSET, VALID, SAME_UPPER, SAME_LOWER), kernel_shape, optional bias.
 *
 * On the software adapter of an AVX-512 CPU, a conv with more than one input channel per group (or at least
 * EPABI_CONVP_MR output channels per group) runs as an implicit GEMM over weights packed at Compile
 * (conv_packed.h), with the bias and a fused activation (epilogue.h) applied before its results are stored.
 * Elsewhere each (image, group) is one matrix product W_g[Mg, Cg*kh*kw] x columns[Cg*kh*kw, OH*OW] (im2col). The
 * column matrix is built a tile of output positions at a time so its scratch stays bounded whatever the
 * image size; a 1x1, stride-1, unpadded conv skips it and multiplies X directly. Groups of one input channel
 * (depthwise) skip the product altogether. 1-D runs as 2-D with H = 1. On the software adapter every
 * (image, group, tile) is one task of the EP's thread pool (thread_pool.h), with its own column and packing
 * share, so im2col and the products of one conv run on every thread.
 * Opsets 1, 11 and 22 differ only in the dtypes they list. 3-D convs are refused.
 */
#include "math_common.h"
#include "conv_packed.h"
#include "cuda_coverage.h"
#include "epilogue.h"

#include <stdlib.h>
#include <string.h>

enum conv_auto_pad { CONV_NOTSET, CONV_VALID, CONV_SAME_UPPER, CONV_SAME_LOWER };

/* Column-matrix tile: at most this many floats (16 MiB) in all, but at least one output position. */
enum { CONV_COL_FLOATS = 1 << 22 };
/* With a thread pool, a thread's column tile: about this many floats (512 KiB), so that im2col writes it into the
 * core's L2 and the GEMM packs it from there (4 MiB tiles measured 1.6x slower on a 3x3 conv of 32 channels)...
 * but at least CONV_TILE_MIN_COLS output positions, so that a GEMM repacks W rarely enough (a few % of its work). */
enum { CONV_COL_FLOATS_THREAD = 1 << 17, CONV_TILE_MIN_COLS = 256 };
/* ... and of at least this many output positions where it can (a narrower product wastes the GEMM); tests build
 * with 1 so that their small images are cut too. */
#ifndef EPABI_CONV_MIN_TILE
#define EPABI_CONV_MIN_TILE 16
#endif

struct conv_state {
    int sr;                        /* spatial rank: 1 or 2 */
    int64_t group;
    bool has_kernel_shape;
    int64_t kernel_shape[2];
    int64_t strides[2], dilations[2];
    int64_t pads[4];               /* ONNX order: begin of each axis, then end of each axis */
    enum conv_auto_pad auto_pad;
    float* wpack;                  /* a constant W packed for CONV_PACKED (conv_packed.h) at init, or NULL */
    int64_t wpack_dims[4];         /* the W it was packed from */
};



/* The output columns ox whose input column ox * sw + base lies inside [0, wd), clamped to [from, to). */
static void conv_valid_cols(const struct conv_launch* L, int64_t base, int64_t from, int64_t to, int64_t* lo,
                            int64_t* hi) {
    int64_t first = base >= 0 ? 0 : (-base + L->sw - 1) / L->sw;
    int64_t end = base >= L->wd ? 0 : (L->wd - 1 - base) / L->sw + 1;
    *lo = first > from ? first : from;
    *hi = end < to ? end : to;
    if (*hi < *lo) *hi = *lo;
}

/* The output rows oy whose input row oy * sh + base lies inside [0, h), clamped to [from, to). */
static void conv_valid_rows(const struct conv_launch* L, int64_t base, int64_t from, int64_t to, int64_t* lo,
                            int64_t* hi) {
    int64_t first = base >= 0 ? 0 : (-base + L->sh - 1) / L->sh;
    int64_t end = base >= L->h ? 0 : (L->h - 1 - base) / L->sh + 1;
    *lo = first > from ? first : from;
    *hi = end < to ? end : to;
    if (*hi < *lo) *hi = *lo;
}

/* Columns t0 .. t0+tl of the im2col matrix of one group's input channels xg: row (c, ki, kj) holds, for each
 * output position, the input value that kernel tap meets there (0 in the padding). The valid bounds of a tap are
 * worked out once; a row is then filled an output row's run at a time, or, for one output column (1-D convs over
 * H, as magika's), as one strided gather down the column. */
static void conv_im2col(const struct conv_launch* L, const float* xg, int64_t t0, int64_t tl, float* col) {
    for (int64_t c = 0; c < L->cg; ++c) {
        const float* xc = xg + c * L->h * L->wd;
        for (int64_t ki = 0; ki < L->kh; ++ki) {
            int64_t ybase = ki * L->dh - L->ph;
            for (int64_t kj = 0; kj < L->kw; ++kj) {
                float* row = col + ((c * L->kh + ki) * L->kw + kj) * tl;
                int64_t base = kj * L->dw - L->pw;
                int64_t xlo = 0, xhi = 0;   /* valid output columns of this tap, on every output row */
                conv_valid_cols(L, base, 0, L->ow, &xlo, &xhi);
                if (L->ow == 1) {
                    int64_t ylo = t0, yhi = t0;
                    if (xlo < xhi) conv_valid_rows(L, ybase, t0, t0 + tl, &ylo, &yhi);
                    const int64_t step = L->sh * L->wd, at = ybase * L->wd + base;   /* input row oy * sh + ybase */
                    for (int64_t oy = t0; oy < ylo; ++oy) row[oy - t0] = 0.0f;
                    for (int64_t oy = ylo; oy < yhi; ++oy) row[oy - t0] = xc[oy * step + at];
                    for (int64_t oy = yhi; oy < t0 + tl; ++oy) row[oy - t0] = 0.0f;
                    continue;
                }
                int64_t oy = t0 / L->ow, ox0 = t0 % L->ow;
                for (int64_t t = 0; t < tl; oy++, ox0 = 0) {
                    int64_t run = L->ow - ox0 < tl - t ? L->ow - ox0 : tl - t;
                    float* dst = row + t;   /* dst[ox - ox0] is output column ox */
                    int64_t iy = oy * L->sh + ybase;
                    int64_t lo = ox0, hi = ox0;
                    if (iy >= 0 && iy < L->h) {
                        lo = xlo > ox0 ? xlo : ox0;
                        hi = xhi < ox0 + run ? xhi : ox0 + run;
                        if (hi < lo) hi = lo;
                        const float* srow = xc + iy * L->wd;
                        if (L->sw == 1) {
                            if (hi > lo) memcpy(dst + (lo - ox0), srow + lo + base, sizeof(float) * (size_t)(hi - lo));
                        } else {
                            for (int64_t ox = lo; ox < hi; ++ox) dst[ox - ox0] = srow[ox * L->sw + base];
                        }
                    }
                    for (int64_t ox = ox0; ox < lo; ++ox) dst[ox - ox0] = 0.0f;
                    for (int64_t ox = hi; ox < ox0 + run; ++ox) dst[ox - ox0] = 0.0f;
                    t += run;
                }
            }
        }
    }
}

/* One input channel xc into the Mg output planes yg (already holding the bias or 0): every kernel tap adds
 * a shifted, strided copy of the channel. The im2col route would spend a product of inner size kh*kw and
 * four-row panels holding one live row per output channel. */
static void conv_per_channel(const struct conv_launch* L, const float* xc, const float* wg, float* yg) {
    for (int64_t r = 0; r < L->mg; ++r) {
        float* yr = yg + r * L->oh * L->ow;
        for (int64_t ki = 0; ki < L->kh; ++ki) {
            for (int64_t kj = 0; kj < L->kw; ++kj) {
                float wv = wg[(r * L->kh + ki) * L->kw + kj];
                int64_t base = kj * L->dw - L->pw;
                int64_t lo = 0, hi = 0;
                conv_valid_cols(L, base, 0, L->ow, &lo, &hi);
                for (int64_t oy = 0; oy < L->oh; ++oy) {
                    int64_t iy = oy * L->sh - L->ph + ki * L->dh;
                    if (iy < 0 || iy >= L->h) continue;
                    const float* srow = xc + iy * L->wd;
                    float* dst = yr + oy * L->ow;
                    if (L->sw == 1) {
                        for (int64_t ox = lo; ox < hi; ++ox) dst[ox] += wv * srow[ox + base];
                    } else {
                        for (int64_t ox = lo; ox < hi; ++ox) dst[ox] += wv * srow[ox * L->sw + base];
                    }
                }
            }
        }
    }
}

/* Floats of col and of pack one pool thread owns (run() sized both buffers with these). */
static size_t conv_col_share(const struct conv_launch* L) {
    int64_t kdim = L->cg * L->kh * L->kw;
    return L->path == CONV_GEMM_COLS ? (size_t)((kdim * L->tile + 15) / 16 * 16) : 0;
}

static size_t conv_pack_share(const struct conv_launch* L) {
    if (L->path == CONV_PER_CHANNEL) return 0;
    return epabi_sgemm_scratch_bytes(L->mg, L->tile, L->cg * L->kh * L->kw) / sizeof(float);
}

/* Task t: image ni, group g, output positions [t0, t0 + tl) of tile tt. Y's rows of that range get the bias (or 0),
 * then the product adds to them. */
static void conv_task(void* ctx, int64_t t, int slot) {
    const struct conv_launch* L = ctx;
    int64_t kdim = L->cg * L->kh * L->kw;
    int64_t P = L->oh * L->ow;
    int64_t tiles = (P + L->tile - 1) / L->tile;
    int64_t tt = t % tiles, g = t / tiles % L->group, ni = t / tiles / L->group;
    int64_t t0 = tt * L->tile, tl = P - t0 < L->tile ? P - t0 : L->tile;
    float* yg = L->y + (ni * L->m + g * L->mg) * P;
    float beta = 0.0f;
    if (L->bias != NULL) {
        for (int64_t r = 0; r < L->mg; ++r) {
            float b = L->bias[g * L->mg + r];
            for (int64_t i = t0; i < t0 + tl; ++i) yg[r * P + i] = b;
        }
        beta = 1.0f;
    } else if (L->path == CONV_PER_CHANNEL || kdim == 0) {
        for (int64_t r = 0; r < L->mg; ++r)
            for (int64_t i = t0; i < t0 + tl; ++i) yg[r * P + i] = 0.0f;
    }
    if (kdim == 0) {   /* no input channels: Y is the bias (or zero); X and W have no data */
        if (L->epilogue != EPABI_EPILOGUE_NONE)
            for (int64_t r = 0; r < L->mg; ++r)
                epabi_epilogue_f32(yg + r * P + t0, tl, L->epilogue, L->ep_alpha, L->ep_beta, 0.0f);
        return;
    }
    const float* xg = L->x + (ni * L->c + g * L->cg) * L->h * L->wd;
    const float* wg = L->w + g * L->mg * kdim;
    float* pack = L->pack != NULL ? L->pack + (size_t)slot * conv_pack_share(L) : NULL;
    switch (L->path) {
    case CONV_GEMM_X:
        epabi_sgemm(false, false, L->mg, tl, kdim, 1.0f, wg, kdim, xg + t0, P, beta, yg + t0, P, pack);
        break;
    case CONV_GEMM_COLS: {
        float* col = L->col + (size_t)slot * conv_col_share(L);
        conv_im2col(L, xg, t0, tl, col);
        epabi_sgemm(false, false, L->mg, tl, kdim, 1.0f, wg, kdim, col, tl, beta, yg + t0, P, pack);
        break;
    }
    case CONV_PER_CHANNEL:
        conv_per_channel(L, xg, wg, yg);   /* one tile per (image, group): run() sets tile = P */
        break;
    case CONV_PACKED:   /* conv_launch_fn hands it to conv_packed.c */
        break;
    }
    if (L->epilogue != EPABI_EPILOGUE_NONE)   /* on the tile the task computed, while it is in cache */
        for (int64_t r = 0; r < L->mg; ++r)
            epabi_epilogue_f32(yg + r * P + t0, tl, L->epilogue, L->ep_alpha, L->ep_beta, 0.0f);
}

/* Every (image, group, tile) is one task of the pool; tasks write disjoint parts of Y. */
static void conv_launch_fn(const void* p) {
    const struct conv_launch* L = p;
    if (L->path == CONV_PACKED) {
        epabi_convp_launch(L);
        return;
    }
    int64_t P = L->oh * L->ow;
    int64_t tasks = L->n * L->group * ((P + L->tile - 1) / L->tile);
    double macs = (double)L->n * (double)L->m * (double)P * (double)(L->cg * L->kh * L->kw + 1);
    epabi_pool_for(macs < 2.0 * EPABI_PARALLEL_MIN_MACS ? NULL : L->pool, tasks, conv_task, (void*)L);
}

/* Output positions per tile. Without a pool (device backends) one tile covers as much of an image as
 * CONV_COL_FLOATS allows. With one, tiles are also cut small enough for the column share of each thread
 * (CONV_COL_FLOATS_THREAD) and numerous enough that every thread has work (tasks a multiple of the thread count
 * or at least four per thread); the depthwise path keeps whole images (its tasks are (image, group)). */
static int64_t conv_tile(const struct conv_launch* L, int64_t kdim, int64_t P) {
    if (L->path == CONV_PER_CHANNEL || kdim == 0) return P;
    int64_t cap = L->pool == NULL ? CONV_COL_FLOATS : CONV_COL_FLOATS_THREAD;
    int64_t fit = L->path == CONV_GEMM_COLS ? cap / kdim : P;
    if (fit < 1) fit = 1;
    if (L->pool == NULL) return fit < P ? fit : P;
    if (fit < CONV_TILE_MIN_COLS && kdim <= CONV_COL_FLOATS / CONV_TILE_MIN_COLS) fit = CONV_TILE_MIN_COLS;
    int64_t tiles = (P + fit - 1) / fit;
    int64_t threads = epabi_pool_threads(L->pool), jobs = L->n * L->group;
    int64_t most = P / EPABI_CONV_MIN_TILE > 1 ? P / EPABI_CONV_MIN_TILE : 1;
    while (threads > 1 && tiles < most && (jobs * tiles) % threads != 0 && jobs * tiles < 4 * threads) ++tiles;
    return (P + tiles - 1) / tiles;
}

/* Reads the attributes into s; false with a reason when a value is outside what this kernel computes. */
static bool conv_parse(const struct epabi_node* node, struct conv_state* s, char* why, size_t why_len) {
    memset(s, 0, sizeof *s);
    int wr = node->n_in >= 2 ? node->in[1].rank : -1;
    int xr = node->in[0].rank;
    if (wr >= 0 && xr >= 0 && wr != xr) {
        snprintf(why, why_len, "Conv: X has rank %d but W has rank %d", xr, wr);
        return false;
    }
    int64_t vals[8];
    size_t cnt = 0;
    int rank = wr >= 0 ? wr : xr;
    if (rank < 0) {
        /* Rank unknown from the graph: any per-axis attribute still pins the spatial rank. */
        const char* per_axis[] = {"kernel_shape", "strides", "dilations"};
        for (size_t i = 0; i < 3 && rank < 0; ++i)
            if (epabi_attr_ints(node, per_axis[i], vals, 8, &cnt)) rank = (int)cnt + 2;
        if (rank < 0 && epabi_attr_ints(node, "pads", vals, 8, &cnt)) rank = (int)(cnt / 2) + 2;
    }
    if (rank != 3 && rank != 4) {
        if (rank < 0)
            snprintf(why, why_len, "Conv: the input rank is unknown");
        else
            snprintf(why, why_len, "Conv: rank %d inputs; only 1-D and 2-D convs (rank 3 or 4) are implemented", rank);
        return false;
    }
    s->sr = rank - 2;

    s->group = 1;
    s->wpack = NULL;
    if (epabi_attr_int(node, "group", &s->group) && s->group < 1) {
        snprintf(why, why_len, "Conv: group=%lld must be >= 1", (long long)s->group);
        return false;
    }
    char pad[32] = "NOTSET";
    epabi_attr_string(node, "auto_pad", pad, sizeof pad);
    if (strcmp(pad, "NOTSET") == 0) {
        s->auto_pad = CONV_NOTSET;
    } else if (strcmp(pad, "VALID") == 0) {
        s->auto_pad = CONV_VALID;
    } else if (strcmp(pad, "SAME_UPPER") == 0) {
        s->auto_pad = CONV_SAME_UPPER;
    } else if (strcmp(pad, "SAME_LOWER") == 0) {
        s->auto_pad = CONV_SAME_LOWER;
    } else {
        snprintf(why, why_len, "Conv: auto_pad='%s' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", pad);
        return false;
    }

    struct {
        const char* name;
        int64_t* dst;
        size_t len;
        int64_t deflt, min;
    } lists[] = {
        {"kernel_shape", s->kernel_shape, (size_t)s->sr, 0, 1},
        {"strides", s->strides, (size_t)s->sr, 1, 1},
        {"dilations", s->dilations, (size_t)s->sr, 1, 1},
        {"pads", s->pads, 2 * (size_t)s->sr, 0, 0},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; ++i) {
        for (size_t j = 0; j < lists[i].len; ++j) lists[i].dst[j] = lists[i].deflt;
        if (!epabi_attr_ints(node, lists[i].name, vals, 8, &cnt)) continue;
        if (cnt != lists[i].len) {
            snprintf(why, why_len, "Conv: %s has %zu values; a %d-D conv needs %zu", lists[i].name, cnt, s->sr,
                     lists[i].len);
            return false;
        }
        for (size_t j = 0; j < cnt; ++j) {
            /* The upper bound keeps every extent product of the shape arithmetic inside int64. */
            if (vals[j] < lists[i].min || vals[j] > INT32_MAX) {
                snprintf(why, why_len, "Conv: %s[%zu]=%lld must be in [%lld, %d]", lists[i].name, j,
                         (long long)vals[j], (long long)lists[i].min, INT32_MAX);
                return false;
            }
            lists[i].dst[j] = vals[j];
        }
        if (i == 0) s->has_kernel_shape = true;
        if (i == 3 && s->auto_pad != CONV_NOTSET) {
            /* The spec forbids both; hosts disagree on which wins, so we do not guess. */
            snprintf(why, why_len, "Conv: explicit pads together with auto_pad='%s'", pad);
            return false;
        }
    }
    return true;
}

static bool conv_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in < 2 || node->n_in > 3 || node->n_out != 1) {
        snprintf(why, why_len, "Conv: expected 2-3 inputs and 1 output, got %d and %d", node->n_in, node->n_out);
        return false;
    }
    const char* names[] = {"X", "W", "B"};
    for (int i = 0; i < node->n_in; ++i) {
        if (i == 2 && !epabi_desc_present(node, 2)) break;
        if (node->in[i].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
            snprintf(why, why_len, "Conv: %s has dtype %s; only float is implemented", names[i],
                     epabi_dtype_name(node->in[i].dtype));
            return false;
        }
    }
    struct conv_state s;
    return conv_parse(node, &s, why, why_len);
}

static void conv_release(void* state) {
    struct conv_state* s = state;
    if (s != NULL) free(s->wpack);
    free(s);
}

/* A constant W of a shape the packed path takes is packed once here, not per run. Out of memory only costs the
 * packing at run time. */
static void conv_pack_constant(const struct epabi_node* node, struct conv_state* s) {
    const struct epabi_value_desc* w = &node->in[1];
    if (!epabi_convp_supported() || w->const_data == NULL || w->rank != s->sr + 2 || w->dims[0] % s->group != 0)
        return;
    int64_t kdim = 1;
    for (int d = 1; d < w->rank; ++d) kdim *= w->dims[d];
    const int64_t mg = w->dims[0] / s->group;
    if (kdim <= 0 || mg <= 0 || (size_t)kdim * (size_t)w->dims[0] != w->const_count) return;
    s->wpack = malloc(epabi_convp_packed_floats(s->group, mg, kdim) * sizeof(float));
    if (s->wpack == NULL) return;
    epabi_convp_pack(w->const_data, s->group, mg, kdim, s->wpack);
    memcpy(s->wpack_dims, w->dims, sizeof(int64_t) * (size_t)w->rank);
}

static OrtStatus* conv_init(const struct epabi_node* node, void** state) {
    struct conv_state* s = malloc(sizeof *s);
    if (s == NULL) return epabi_error(node->api, ORT_FAIL, "Conv: out of memory");
    char why[256];
    if (!conv_parse(node, s, why, sizeof why)) {
        free(s);
        return epabi_error(node->api, ORT_INVALID_ARGUMENT, "%s", why);
    }
    conv_pack_constant(node, s);
    *state = s;
    return NULL;
}

/* Output extent and begin padding of one spatial axis; false when the (padded) input is shorter than the
 * dilated kernel. */
static bool conv_axis(const struct conv_state* s, int axis, int64_t in, int64_t k, int64_t* out, int64_t* pad_begin) {
    int64_t st = s->strides[axis], dk = (k - 1) * s->dilations[axis] + 1;
    int64_t pb = 0, pe = 0;
    switch (s->auto_pad) {
    case CONV_NOTSET:
        pb = s->pads[axis];
        pe = s->pads[s->sr + axis];
        break;
    case CONV_VALID:
        break;
    case CONV_SAME_UPPER:
    case CONV_SAME_LOWER: {
        /* out = ceil(in / stride); the padding that needs is split evenly, the odd one going to the end
         * (SAME_UPPER) or the beginning (SAME_LOWER). */
        int64_t o = (in + st - 1) / st;
        int64_t total = (o - 1) * st + dk - in;
        if (total < 0) total = 0;
        pb = s->auto_pad == CONV_SAME_UPPER ? total / 2 : total - total / 2;
        *out = o;
        *pad_begin = pb;
        return true;
    }
    }
    if (in + pb + pe < dk) return false;
    *out = (in + pb + pe - dk) / st + 1;
    *pad_begin = pb;
    return true;
}

static OrtStatus* conv_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                           int n_out) {
    (void)n_out;
    const struct conv_state* s = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < 2) return epabi_error(api, ORT_INVALID_ARGUMENT, "Conv: expected at least 2 inputs, got %d", n_in);
    const struct epabi_tensor* X = in[0];
    const struct epabi_tensor* W = in[1];
    const struct epabi_tensor* B = epabi_opt_input(in, n_in, 2);
    char sx[160], sw[160];
    if (X->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || W->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ||
        (B != NULL && B->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Conv: only float inputs are implemented");
    if (X->rank != s->sr + 2 || W->rank != s->sr + 2)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Conv: X %s and W %s must both have rank %d for a %d-D conv",
                           epabi_shape_str(sx, sizeof sx, X->rank, X->dims),
                           epabi_shape_str(sw, sizeof sw, W->rank, W->dims), s->sr + 2, s->sr);
    int64_t N = X->dims[0], C = X->dims[1], M = W->dims[0], Cg = W->dims[1];
    if (C % s->group != 0 || C / s->group != Cg || M % s->group != 0)
        return epabi_error(api, ORT_INVALID_ARGUMENT,
                           "Conv: with group=%lld, X %s needs C = W.dims[1]*group and W %s needs M divisible by group",
                           (long long)s->group, epabi_shape_str(sx, sizeof sx, X->rank, X->dims),
                           epabi_shape_str(sw, sizeof sw, W->rank, W->dims));
    if (B != NULL && (B->rank != 1 || B->dims[0] != M))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Conv: bias %s must be [%lld] (W %s has M=%lld)",
                           epabi_shape_str(sx, sizeof sx, B->rank, B->dims), (long long)M,
                           epabi_shape_str(sw, sizeof sw, W->rank, W->dims), (long long)M);

    int64_t out_dims[4] = {N, M, 1, 1};
    int64_t ext[2] = {1, 1}, kern[2] = {1, 1}, outs[2] = {1, 1}, pbeg[2] = {0, 0};
    for (int a = 0; a < s->sr; ++a) {
        ext[a] = X->dims[2 + a];
        kern[a] = W->dims[2 + a];
        if (kern[a] < 1 || kern[a] > INT32_MAX || (s->has_kernel_shape && s->kernel_shape[a] != kern[a]))
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Conv: W %s does not match kernel_shape on axis %d (%lld)",
                               epabi_shape_str(sw, sizeof sw, W->rank, W->dims), a,
                               (long long)(s->has_kernel_shape ? s->kernel_shape[a] : kern[a]));
        if (!conv_axis(s, a, ext[a], kern[a], &outs[a], &pbeg[a]))
            return epabi_error(api, ORT_INVALID_ARGUMENT,
                               "Conv: X %s spatial axis %d (%lld, padded by %lld+%lld) is smaller than the dilated "
                               "kernel (%lld)",
                               epabi_shape_str(sx, sizeof sx, X->rank, X->dims), a, (long long)ext[a],
                               (long long)(s->auto_pad == CONV_NOTSET ? s->pads[a] : 0),
                               (long long)(s->auto_pad == CONV_NOTSET ? s->pads[s->sr + a] : 0),
                               (long long)((kern[a] - 1) * s->dilations[a] + 1));
        out_dims[2 + a] = outs[a];
    }
    OrtStatus* st = NULL;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, X->rank, out_dims, &st);
    if (Y == NULL) return st;

    /* The 1-D case is the 2-D one with a unit H axis; axis 0 of a 1-D conv becomes the W axis. */
    int h = s->sr == 2 ? 0 : -1, w = s->sr == 2 ? 1 : 0;
    struct conv_launch L;
    memset(&L, 0, sizeof L);
    L.x = X->data;
    L.w = W->data;
    L.bias = B != NULL ? B->data : NULL;
    L.y = Y->data;
    L.n = N;
    L.c = C;
    L.m = M;
    L.group = s->group;
    L.cg = Cg;
    L.mg = M / s->group;
    L.h = h >= 0 ? ext[h] : 1;
    L.kh = h >= 0 ? kern[h] : 1;
    L.sh = h >= 0 ? s->strides[h] : 1;
    L.dh = h >= 0 ? s->dilations[h] : 1;
    L.ph = h >= 0 ? pbeg[h] : 0;
    L.oh = h >= 0 ? outs[h] : 1;
    L.wd = ext[w];
    L.kw = kern[w];
    L.sw = s->strides[w];
    L.dw = s->dilations[w];
    L.pw = pbeg[w];
    L.ow = outs[w];

    int64_t kdim = Cg * L.kh * L.kw, P = L.oh * L.ow;
    if (N == 0 || M == 0 || P == 0) return NULL;   /* empty output: nothing to compute */
    L.epilogue = epabi_exec_epilogue(ex);
    epabi_exec_epilogue_params(ex, &L.ep_alpha, &L.ep_beta);
    L.pool = epabi_exec_pool(ex);
    size_t packed_bytes = 0;
    if (L.pool != NULL && kdim > 0 && (Cg > 1 || L.mg >= EPABI_CONVP_MR) && epabi_convp_supported()) {
        bool constant = s->wpack != NULL && memcmp(s->wpack_dims, W->dims, sizeof(int64_t) * (size_t)W->rank) == 0;
        L.wpack = constant ? s->wpack : NULL;
        L.path = CONV_PACKED;
        packed_bytes = epabi_convp_scratch_bytes(&L);
    }
    if (packed_bytes > 0) {
        L.work = epabi_exec_scratch(ex, packed_bytes, &st);
        if (L.work == NULL) return st;
        return epabi_exec_launch(ex, EPABI_LAUNCH_CONV, conv_launch_fn, &L, sizeof L);
    }
    L.wpack = NULL;
    if (Cg == 1)
        L.path = CONV_PER_CHANNEL;
    else if (L.kh == 1 && L.kw == 1 && L.sh == 1 && L.sw == 1 && L.ph == 0 && L.pw == 0 && L.oh == L.h &&
             L.ow == L.wd)
        L.path = CONV_GEMM_X;
    else
        L.path = CONV_GEMM_COLS;
    L.tile = conv_tile(&L, kdim, P);
    if (L.path == CONV_GEMM_COLS && kdim > 0) {
        size_t col_bytes = 0;
        if (!epabi_mul_size(conv_col_share(&L) * sizeof(float), (size_t)epabi_pool_threads(L.pool), &col_bytes))
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Conv: column buffer for W %s overflows",
                               epabi_shape_str(sw, sizeof sw, W->rank, W->dims));
        L.col = epabi_exec_scratch(ex, col_bytes, &st);
        if (L.col == NULL) return st;
    }
    size_t pack_bytes = conv_pack_share(&L) * sizeof(float) * (size_t)epabi_pool_threads(L.pool);
    if (pack_bytes > 0) {
        L.pack = epabi_exec_scratch(ex, pack_bytes, &st);
        if (L.pack == NULL) return st;
    }
    return epabi_exec_launch(ex, EPABI_LAUNCH_CONV, conv_launch_fn, &L, sizeof L);
}

const struct epabi_kernel epabi_kernels_conv[] = {
    {.op_type = "Conv", .since_min = 1, .since_max = 22, .supports = conv_supports, .init = conv_init,
     .release = conv_release, .run = conv_run, .launch = EPABI_LAUNCH_CONV, .epilogues = EPABI_EPILOGUES_ALL,
     .cuda = epabi_cuda_float32_math},
    {.op_type = NULL},
};
