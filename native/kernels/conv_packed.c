/*
 * conv_packed.c - see conv_packed.h. Not an op family (registry.c has no line for it): conv.c calls it.
 *
 * The tile kernel keeps its 8 x 32 results in sixteen zmm registers across the whole tap loop; each tap costs two
 * loads of the input and eight broadcasts of weights for sixteen FMAs, so the FMA units, not the loads, set the
 * pace. The first panel of a tile reads its taps in place and stores them, contiguous, for the tile's other
 * panels (convp_tile_gathering): read in place, the taps of a 3x3 conv over 64 channels touch 192 rows of
 * different planes per tile, and the kernel measured 66-77 GMAC/s against 86 on the gathered copy; a separate
 * gathering pass cost 7-18% of the kernel time. The last tile of
 * an image gathers with a mask: the lanes past the last valid position would read past the end of X where the
 * layout is X itself.
 */
#include "conv_packed.h"

#include <string.h>

#include "epilogue.h"
#include "math_common.h"

/* Weights of one block of panels: small enough to stay in L2 (2 MB on the machine measured) beside the input its
 * tiles stream, large enough that a tile's gathered taps serve many panels (each block gathers every tile again:
 * 256 KB blocks cost a 3x3 conv over 128 channels 18% of its kernel time in gathers). */
enum { CONVP_BLOCK_BYTES = 768 * 1024 };

/* The largest window read through lane masks (struct convp_geom's masked): kernel rows or columns, and taps of one
 * channel (the masks of a tile are kept on the stack); larger windows use the padded copy. */
enum { CONVP_MASK_WINDOW = 16, CONVP_MASK_TAPS = 64 };

/* The grid of one image (conv_packed.h). */
struct convp_geom {
    int64_t rows, cols;        /* R and Q */
    int64_t phase_h, phase_w;  /* sh and sw */
    int64_t channel;           /* floats of xs per input channel: sh * sw * R * Q */
    bool in_place;             /* xs is X itself: stride 1 and no padding on either side */
    bool masked;               /* xs is X itself, read through per-tap lane masks: stride 1, padded (convp_masks) */
    bool s2;                   /* xs is X itself, column stride 2, each tap's lanes deinterleaved (convp_masks_s2) */
    int64_t last;              /* one past the last valid grid position: (oh - 1) * Q + ow */
    int64_t tiles;             /* ceil(last / NR) */
};

static void convp_geom(const struct conv_launch* L, struct convp_geom* g) {
    g->phase_h = L->sh;
    g->phase_w = L->sw;
    g->rows = L->oh + (L->kh - 1) * L->dh / L->sh;
    g->cols = L->ow + (L->kw - 1) * L->dw / L->sw;
    g->channel = L->sh * L->sw * g->rows * g->cols;
    g->in_place = L->sh == 1 && L->sw == 1 && L->ph == 0 && L->pw == 0 && g->rows == L->h && g->cols == L->wd;
    /* stride 1 with padding: the grid keeps X's row pitch (ow <= wd, so no output column is lost) and the taps that
     * fall in the padding are masked off lane by lane instead of read from a zero-padded copy; oh <= h keeps every
     * tile's first position, where its taps' addresses are formed from, inside X */
    g->masked = !g->in_place && L->sh == 1 && L->sw == 1 && L->ow <= L->wd && L->oh <= L->h &&
                L->kh <= CONVP_MASK_WINDOW &&
                L->kw <= CONVP_MASK_WINDOW && L->kh * L->kw <= CONVP_MASK_TAPS;
    /* column stride 2 (any row stride, padding, dilation): the grid is oh x ow, no column thrown away; a tile's
     * lanes within one output row are every other float of an input row, read as pairs of vectors and
     * deinterleaved. ow >= 8 keeps the 8 lanes of one loaded vector within two output rows (convp_masks_s2). */
    g->s2 = !g->in_place && !g->masked && L->sw == 2 && L->ow >= 8 && L->kh <= CONVP_MASK_WINDOW &&
            L->kw <= CONVP_MASK_WINDOW && L->kh * L->kw <= CONVP_MASK_TAPS;
    if (g->masked || g->s2) {
        g->phase_h = g->phase_w = 1;
        g->rows = L->oh;
        g->cols = g->masked ? L->wd : L->ow;
        g->channel = L->h * L->wd;
    }
    g->last = (L->oh - 1) * g->cols + L->ow;
    g->tiles = (g->last + EPABI_CONVP_NR - 1) / EPABI_CONVP_NR;
}

static int64_t panels_of(int64_t mg) { return (mg + EPABI_CONVP_MR - 1) / EPABI_CONVP_MR; }

size_t epabi_convp_packed_floats(int64_t group, int64_t mg, int64_t kdim) {
    return (size_t)(group * panels_of(mg) * kdim * EPABI_CONVP_MR);
}

void epabi_convp_pack(const float* w, int64_t group, int64_t mg, int64_t kdim, float* out) {
    const int64_t panels = panels_of(mg);
    for (int64_t g = 0; g < group; ++g) {
        for (int64_t p = 0; p < panels; ++p) {
            float* dst = out + (g * panels + p) * kdim * EPABI_CONVP_MR;
            for (int64_t k = 0; k < kdim; ++k) {
                for (int64_t r = 0; r < EPABI_CONVP_MR; ++r) {
                    const int64_t m = p * EPABI_CONVP_MR + r;
                    dst[k * EPABI_CONVP_MR + r] = m < mg ? w[(g * mg + m) * kdim + k] : 0.0f;
                }
            }
        }
    }
}

/* Scratch layout, each part at a multiple of 64 bytes from the start (scratch itself may be less aligned, so the
 * kernels load and store it unaligned): xs (C * channel floats; none in place), the kdim tap offsets (int32),
 * one gathered tile (kdim * NR floats) per pool thread, W's panels when W is no constant. */
struct convp_scratch {
    size_t xs, offsets, gathered, gathered_share, wpack, total;   /* byte offsets of the parts, and the size */
};

static size_t round64(size_t v) { return (v + 63) / 64 * 64; }

static bool convp_layout(const struct conv_launch* L, const struct convp_geom* g, struct convp_scratch* s) {
    const int64_t kdim = L->cg * L->kh * L->kw;
    if (kdim <= 0 || L->mg <= 0) return false;
    /* tap offsets and grid positions are int32 within one group's channels */
    double span = (double)L->cg * (double)g->channel + (double)g->rows * (double)g->cols;
    if (g->s2)   /* a tap's byte offset from the group's first float: rows down to oy*sh + (kh-1)*dh, columns 2*ow + */
        span = (double)L->cg * (double)g->channel +
               ((double)L->oh * (double)L->sh + (double)(L->kh * L->dh)) * (double)L->wd + 2.0 * (double)L->ow +
               (double)(L->kw * L->dw) + 64.0;
    if (span >= (double)INT32_MAX || (double)L->c * (double)g->channel * 4.0 >= (double)SIZE_MAX / 2) return false;
    s->xs = 0;
    s->offsets = g->in_place || g->masked || g->s2 ? 0 : round64((size_t)(L->c * g->channel) * sizeof(float));
    s->gathered = s->offsets + round64((size_t)kdim * sizeof(int32_t));
    s->gathered_share = (size_t)kdim * EPABI_CONVP_NR * sizeof(float);
    s->wpack = s->gathered + s->gathered_share * (size_t)epabi_pool_threads(L->pool);
    s->total = s->wpack + (L->wpack == NULL ? round64(epabi_convp_packed_floats(L->group, L->mg, kdim) * 4) : 0);
    return true;
}

size_t epabi_convp_scratch_bytes(const struct conv_launch* L) {
    struct convp_geom g;
    struct convp_scratch s;
    convp_geom(L, &g);
    return convp_layout(L, &g, &s) ? s.total : 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

bool epabi_convp_supported(void) {
    static int cached = -1;   /* a benign race: every thread computes the same value */
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx512f") ? 1 : 0;
    }
    return cached == 1;
}

#define CONVP_TARGET __attribute__((target("avx512f")))

/* One tap of row r: c<r>0/c<r>1 += a[r] * (b0, b1). */
#define CONVP_ROW(r)                                   \
    do {                                               \
        const __m512 a_ = _mm512_set1_ps(a[r]);        \
        c##r##0 = _mm512_fmadd_ps(a_, b0, c##r##0);    \
        c##r##1 = _mm512_fmadd_ps(a_, b1, c##r##1);    \
    } while (0)

#define CONVP_STORE(r)                                                  \
    do {                                                                \
        _mm512_store_ps(tile + (r) * EPABI_CONVP_NR, c##r##0);          \
        _mm512_store_ps(tile + (r) * EPABI_CONVP_NR + 16, c##r##1);     \
    } while (0)

/* The tap loop: b0 and b1 are the tap's 32 positions (LOAD0, LOAD1, after BEFORE), AFTER runs with them (the
 * gathering tile stores them for the panels after it). */
#define CONVP_TAPS(BEFORE, LOAD0, LOAD1, AFTER)                                                  \
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;     \
    __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00;           \
    __m512 c61 = c00, c70 = c00, c71 = c00;                                                      \
    for (int64_t k = 0; k < kdim; ++k) {                                                         \
        BEFORE;                                                                                  \
        const __m512 b0 = LOAD0, b1 = LOAD1;                                                     \
        AFTER;                                                                                   \
        const float* a = ap + k * EPABI_CONVP_MR;                                                \
        CONVP_ROW(0); CONVP_ROW(1); CONVP_ROW(2); CONVP_ROW(3);                                  \
        CONVP_ROW(4); CONVP_ROW(5); CONVP_ROW(6); CONVP_ROW(7);                                  \
    }                                                                                            \
    CONVP_STORE(0); CONVP_STORE(1); CONVP_STORE(2); CONVP_STORE(3);                              \
    CONVP_STORE(4); CONVP_STORE(5); CONVP_STORE(6); CONVP_STORE(7)

/* tile[r][j] = sum over taps k of ap[k][r] * b[k][j] (b: NR floats per tap, as convp_tile_gathering stores). */
CONVP_TARGET static void convp_tile(int64_t kdim, const float* restrict ap, const float* restrict b,
                                    float* restrict tile) {
    CONVP_TAPS((void)0, _mm512_loadu_ps(b + k * EPABI_CONVP_NR), _mm512_loadu_ps(b + k * EPABI_CONVP_NR + 16),
               (void)0);
}

/* The first panel of a tile: its taps read in place (b[off[k] + j], lanes past `lanes` not loaded but 0) and
 * stored into gathered[k][j] for the other panels, so the scattered loads overlap this panel's FMAs instead of
 * costing a pass of their own. */
CONVP_TARGET static void convp_tile_gathering(int64_t kdim, const float* restrict ap, const float* b,
                                              const int32_t* restrict off, int lanes, float* restrict gathered,
                                              float* restrict tile) {
    if (lanes >= EPABI_CONVP_NR) {
        CONVP_TAPS((void)0, _mm512_loadu_ps(b + off[k]), _mm512_loadu_ps(b + off[k] + 16),
                   (_mm512_storeu_ps(gathered + k * EPABI_CONVP_NR, b0),
                    _mm512_storeu_ps(gathered + k * EPABI_CONVP_NR + 16, b1)));
        return;
    }
    const __mmask16 m0 = (__mmask16)(lanes >= 16 ? 0xFFFFu : (1u << lanes) - 1u);
    const __mmask16 m1 = (__mmask16)(lanes > 16 ? (1u << (lanes - 16)) - 1u : 0u);
    CONVP_TAPS((void)0, _mm512_maskz_loadu_ps(m0, b + off[k]), _mm512_maskz_loadu_ps(m1, b + off[k] + 16),
               (_mm512_storeu_ps(gathered + k * EPABI_CONVP_NR, b0),
                _mm512_storeu_ps(gathered + k * EPABI_CONVP_NR + 16, b1)));
}

/* convp_tile_gathering on X itself (struct convp_geom's masked): tap k reads lanes masks[k % window] of
 * b + off[k], off[k] negative where the tap reaches into the top or left padding. The address is formed as an
 * integer: masked-off lanes are neither read nor faulted on, but a pointer before X would be undefined in C. */
CONVP_TARGET static void convp_tile_gathering_masked(int64_t kdim, const float* restrict ap, const float* b,
                                                     const int32_t* restrict off, const uint32_t* restrict masks,
                                                     int64_t window, float* restrict gathered,
                                                     float* restrict tile) {
    int64_t w = 0;
    uint32_t m = 0;
    const float *lo = b, *hi = b;
#define CONVP_AT(o) ((const float*)((uintptr_t)b + (uintptr_t)((intptr_t)(o) * (intptr_t)sizeof(float))))
    CONVP_TAPS((m = masks[w], w = w + 1 == window ? 0 : w + 1, lo = CONVP_AT(off[k]), hi = CONVP_AT(off[k] + 16)),
               _mm512_maskz_loadu_ps((__mmask16)(m & 0xFFFFu), lo),
               _mm512_maskz_loadu_ps((__mmask16)(m >> 16), hi),
               (_mm512_storeu_ps(gathered + k * EPABI_CONVP_NR, b0),
                _mm512_storeu_ps(gathered + k * EPABI_CONVP_NR + 16, b1)));
#undef CONVP_AT
}

/* convp_tile_gathering on X itself with column stride 2 (struct convp_geom's s2): lane j of the tile reads float
 * 2j of the virtual row at b + off[k] + (delta of j's output row), so the 32 lanes are the even floats of four
 * vectors of 16, each vector q loaded from delta da[q] under masks[w][q] and, where its 8 lanes span two output
 * rows (bit q of split), the rest merged from delta db[q] under masks[w][4 + q]; w = k % window. Only even floats
 * of lanes inside X are in the masks (odd ones and padding are neither read nor faulted on); deltas and offsets
 * are bytes, added as integers as in convp_tile_gathering_masked. */
CONVP_TARGET static void convp_tile_gathering_s2(int64_t kdim, const float* restrict ap, const float* b,
                                                 const int32_t* restrict off, const uint16_t* restrict masks,
                                                 int64_t window, const intptr_t* restrict da,
                                                 const intptr_t* restrict db, unsigned split,
                                                 float* restrict gathered, float* restrict tile) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    int64_t w = 0;
    const uint16_t* mk = masks;
    uintptr_t at = 0;
    __m512 q0, q1, q2, q3;
#define CONVP_S2_LOAD(q, i)                                                                                    \
    (q = _mm512_maskz_loadu_ps((__mmask16)mk[i], (const float*)(at + (uintptr_t)da[i])),                        \
     q = split & (1u << (i)) ? _mm512_mask_loadu_ps(q, (__mmask16)mk[4 + (i)], (const float*)(at + (uintptr_t)db[i])) \
                             : q)
    CONVP_TAPS((mk = masks + w * 8, w = w + 1 == window ? 0 : w + 1,
                at = (uintptr_t)b + (uintptr_t)((intptr_t)off[k] * (intptr_t)sizeof(float)),
                CONVP_S2_LOAD(q0, 0), CONVP_S2_LOAD(q1, 1), CONVP_S2_LOAD(q2, 2), CONVP_S2_LOAD(q3, 3)),
               _mm512_permutex2var_ps(q0, even, q1), _mm512_permutex2var_ps(q2, even, q3),
               (_mm512_storeu_ps(gathered + k * EPABI_CONVP_NR, b0),
                _mm512_storeu_ps(gathered + k * EPABI_CONVP_NR + 16, b1)));
#undef CONVP_S2_LOAD
}

/* dst[0..n) = src[0..n), n <= NR, as masked moves (a memcpy call per short run cost more than the run). */
CONVP_TARGET static inline void convp_copy(float* dst, const float* src, int64_t n) {
    const __mmask16 m0 = (__mmask16)(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
    _mm512_mask_storeu_ps(dst, m0, _mm512_maskz_loadu_ps(m0, src));
    if (n > 16) {
        const __mmask16 m1 = (__mmask16)(n >= 32 ? 0xFFFFu : (1u << (n - 16)) - 1u);
        _mm512_mask_storeu_ps(dst + 16, m1, _mm512_maskz_loadu_ps(m1, src + 16));
    }
}

/* Bias, epilogue and the valid positions of tile (grid positions i0 .. i0 + NR) into the `rows` output channels at
 * y (channel stride oh * ow), bias[r] for channel r (NULL: none). */
CONVP_TARGET static void convp_store(const struct conv_launch* L, const struct convp_geom* g, float* tile, int rows,
                                     int64_t i0, float* y, const float* bias) {
    for (int r = 0; r < rows; ++r) {
        float* t = tile + r * EPABI_CONVP_NR;
        EPABI_EPILOGUE_LOOP(L->epilogue, L->ep_alpha, L->ep_beta, bias != NULL ? bias[r] : 0.0f, t, EPABI_CONVP_NR);
    }
    const int64_t plane = L->oh * L->ow;
    if (g->cols == L->ow) {   /* no thrown-away columns: grid position i is output position i */
        const int64_t n = g->last - i0 < EPABI_CONVP_NR ? g->last - i0 : EPABI_CONVP_NR;
        for (int r = 0; r < rows; ++r) convp_copy(y + r * plane + i0, tile + r * EPABI_CONVP_NR, n);
        return;
    }
    for (int64_t j = 0; j < EPABI_CONVP_NR && i0 + j < g->last;) {
        const int64_t oy = (i0 + j) / g->cols, ox = (i0 + j) % g->cols;
        const int64_t run = EPABI_CONVP_NR - j < g->cols - ox ? EPABI_CONVP_NR - j : g->cols - ox;
        const int64_t valid = ox >= L->ow ? 0 : L->ow - ox < run ? L->ow - ox : run;
        for (int r = 0; r < rows && valid > 0; ++r)
            convp_copy(y + r * plane + oy * L->ow + ox, tile + r * EPABI_CONVP_NR + j, valid);
        j += run;
    }
}

/* d0[q] = src[2q], d1[q] = src[2q + 1] for q < n (src holds 2n floats, rounded up to a multiple of 32): two loads
 * and two permutes per 16 of each, where the strided loops read every input row twice, once per phase. */
CONVP_TARGET static void convp_deinterleave(const float* src, int64_t n, float* d0, float* d1) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int64_t q = 0; q < n; q += 16) {
        const __m512 lo = _mm512_loadu_ps(src + 2 * q), hi = _mm512_loadu_ps(src + 2 * q + 16);
        const __mmask16 m = (__mmask16)(n - q >= 16 ? 0xFFFFu : (1u << (n - q)) - 1u);
        _mm512_mask_storeu_ps(d0 + q, m, _mm512_permutex2var_ps(lo, even, hi));
        _mm512_mask_storeu_ps(d1 + q, m, _mm512_permutex2var_ps(lo, odd, hi));
    }
}

#else   /* no AVX-512 kernel on this target: conv.c never picks the path */

static void convp_deinterleave(const float* src, int64_t n, float* d0, float* d1) {
    (void)src, (void)n, (void)d0, (void)d1;
}

#define CONVP_TARGET

bool epabi_convp_supported(void) { return false; }

static void convp_tile(int64_t kdim, const float* ap, const float* b, float* tile) {
    (void)kdim, (void)ap, (void)b, (void)tile;
}

static void convp_tile_gathering(int64_t kdim, const float* ap, const float* b, const int32_t* off, int lanes,
                                 float* gathered, float* tile) {
    (void)kdim, (void)ap, (void)b, (void)off, (void)lanes, (void)gathered, (void)tile;
}

static void convp_tile_gathering_masked(int64_t kdim, const float* ap, const float* b, const int32_t* off,
                                        const uint32_t* masks, int64_t window, float* gathered, float* tile) {
    (void)kdim, (void)ap, (void)b, (void)off, (void)masks, (void)window, (void)gathered, (void)tile;
}

static void convp_tile_gathering_s2(int64_t kdim, const float* ap, const float* b, const int32_t* off,
                                    const uint16_t* masks, int64_t window, const intptr_t* da, const intptr_t* db,
                                    unsigned split, float* gathered, float* tile) {
    (void)kdim, (void)ap, (void)b, (void)off, (void)masks, (void)window, (void)da, (void)db, (void)split;
    (void)gathered, (void)tile;
}

static void convp_store(const struct conv_launch* L, const struct convp_geom* g, float* tile, int rows, int64_t i0,
                        float* y, const float* bias) {
    (void)L, (void)g, (void)tile, (void)rows, (void)i0, (void)y, (void)bias;
}

#endif

/* One image's share of the launch, for the pool's tasks. */
struct convp_image {
    const struct conv_launch* L;
    struct convp_geom g;
    const float* x;            /* the image's input */
    float* xs;                 /* its rearranged copy (or x itself) */
    const int32_t* offsets;
    const float* wpack;
    float* gathered;           /* convp_tile_gathering.s buffer of pool slot 0; slot s at + s * gathered_share floats */
    int64_t gathered_share;
    float* y;                  /* the image's output */
    int64_t kdim, panels, block, blocks, runs, run_tiles;
};

/* Grid rows [r0, r1) of every channel and phase of xs from X (conv_packed.h): each row is zeros, then the input
 * row's columns q*sw + b - pw, then zeros. Split by rows, as the tiles are, so that on a pool each thread writes
 * the rows its own tiles read (thread_pool.c's shares). At the kernels' level, so the strided copies vectorise. */
/* The widest grid row convp_rearrange_s2 stages on its stack. */
enum { CONVP_S2_COLS = 2048 };

/* convp_rearrange for column stride 2: each input row is staged once, zero-padded (row[j] = X[iy][j - pw]), and
 * split into its two column phases at once (phase b's column q is row[2q + b]). */
CONVP_TARGET static void convp_rearrange_s2(const struct convp_image* im, int64_t r0, int64_t r1) {
    const struct conv_launch* L = im->L;
    const struct convp_geom* g = &im->g;
    float row[2 * CONVP_S2_COLS + 32] __attribute__((aligned(64)));
    const int64_t staged = (2 * g->cols + 31) / 32 * 32;   /* what convp_deinterleave reads */
    const int64_t plane = g->rows * g->cols;
    /* the part of the staged row that X fills: j in [lo, hi) */
    const int64_t lo = L->pw < staged ? L->pw : staged;
    const int64_t hi = L->pw + L->wd < staged ? L->pw + L->wd : staged;
    for (int64_t j = 0; j < lo; ++j) row[j] = 0.0f;
    for (int64_t j = hi > lo ? hi : lo; j < staged; ++j) row[j] = 0.0f;
    for (int64_t c = 0; c < L->c; ++c) {
        const float* xc = im->x + c * L->h * L->wd;
        for (int64_t a = 0; a < g->phase_h; ++a) {
            float* d0 = im->xs + c * g->channel + a * 2 * plane + r0 * g->cols;
            for (int64_t r = r0; r < r1; ++r, d0 += g->cols) {
                const int64_t iy = r * L->sh + a - L->ph;
                if (iy < 0 || iy >= L->h || hi <= lo) {
                    memset(d0, 0, (size_t)g->cols * sizeof(float));
                    memset(d0 + plane, 0, (size_t)g->cols * sizeof(float));
                    continue;
                }
                memcpy(row + lo, xc + iy * L->wd + lo - L->pw, (size_t)(hi - lo) * sizeof(float));
                convp_deinterleave(row, g->cols, d0, d0 + plane);
            }
        }
    }
}

CONVP_TARGET static void convp_rearrange(void* ctx, int64_t r0, int64_t r1) {
    const struct convp_image* im = ctx;
    const struct conv_launch* L = im->L;
    const struct convp_geom* g = &im->g;
    if (L->sw == 2 && g->cols <= CONVP_S2_COLS) {
        convp_rearrange_s2(im, r0, r1);
        return;
    }
    for (int64_t c = 0; c < L->c; ++c) {
        const float* xc = im->x + c * L->h * L->wd;
        for (int64_t a = 0; a < g->phase_h; ++a) {
            for (int64_t b = 0; b < g->phase_w; ++b) {
                float* dst = im->xs + c * g->channel + (a * g->phase_w + b) * g->rows * g->cols;
                /* valid q: 0 <= q*sw + b - pw < wd */
                const int64_t from = L->pw - b, to = L->wd + L->pw - b;
                int64_t qlo = from <= 0 ? 0 : (from + L->sw - 1) / L->sw;
                int64_t qhi = to <= 0 ? 0 : (to + L->sw - 1) / L->sw;
                if (qlo > g->cols) qlo = g->cols;
                if (qhi > g->cols) qhi = g->cols;
                if (qhi < qlo) qhi = qlo;
                dst += r0 * g->cols;
                for (int64_t r = r0; r < r1; ++r, dst += g->cols) {
                    const int64_t iy = r * L->sh + a - L->ph;
                    if (iy < 0 || iy >= L->h || qlo == qhi) {
                        memset(dst, 0, (size_t)g->cols * sizeof(float));
                        continue;
                    }
                    const float* src = xc + iy * L->wd + b - L->pw;
                    for (int64_t q = 0; q < qlo; ++q) dst[q] = 0.0f;
                    if (L->sw == 1) {
                        memcpy(dst + qlo, src + qlo, (size_t)(qhi - qlo) * sizeof(float));
                    } else if (L->sw == 2) {   /* a constant stride: deinterleaving permutes */
                        for (int64_t q = qlo; q < qhi; ++q) dst[q] = src[q * 2];
                    } else {
                        for (int64_t q = qlo; q < qhi; ++q) dst[q] = src[q * L->sw];
                    }
                    for (int64_t q = qhi; q < g->cols; ++q) dst[q] = 0.0f;
                }
            }
        }
    }
}

/* Lanes [a, b) of a tile as bits, 0 <= a <= b <= NR. */
static uint32_t lane_bits(int64_t a, int64_t b) {
    return (uint32_t)(((1ull << b) - 1ull) ^ ((1ull << a) - 1ull));
}

/* The masked layout's lane masks of the tile at grid position i0 with `lanes` valid lanes: bit j of
 * masks[ki * kw + kj] is set when grid position i0 + j, at (oy, ox), reads inside X through tap (ki, kj) (row
 * oy + ki*dh - ph in [0, h), column ox + kj*dw - pw in [0, wd)). Worked out per run of the tile's lanes within one
 * grid row, so a tile costs a few range operations per kernel row and column, not one per lane and tap. */
static void convp_masks(const struct conv_launch* L, const struct convp_geom* g, int64_t i0, int lanes,
                        uint32_t* masks) {
    uint32_t rowm[CONVP_MASK_WINDOW] = {0}, colm[CONVP_MASK_WINDOW] = {0};
    for (int64_t j = 0; j < lanes;) {
        const int64_t oy = (i0 + j) / g->cols, ox = (i0 + j) % g->cols;
        const int64_t n = lanes - j < g->cols - ox ? lanes - j : g->cols - ox;
        for (int64_t ki = 0; ki < L->kh; ++ki) {
            const int64_t iy = oy + ki * L->dh - L->ph;
            if (iy >= 0 && iy < L->h) rowm[ki] |= lane_bits(j, j + n);
        }
        for (int64_t kj = 0; kj < L->kw; ++kj) {
            /* columns ox .. ox + n of the run whose input column ox + kj*dw - pw lies in [0, wd) */
            int64_t lo = L->pw - kj * L->dw, hi = L->wd + L->pw - kj * L->dw;
            if (lo < ox) lo = ox;
            if (hi > ox + n) hi = ox + n;
            if (lo < hi) colm[kj] |= lane_bits(j + lo - ox, j + hi - ox);
        }
        j += n;
    }
    for (int64_t ki = 0; ki < L->kh; ++ki)
        for (int64_t kj = 0; kj < L->kw; ++kj) masks[ki * L->kw + kj] = rowm[ki] & colm[kj];
}

/* Bit j of v to bits 2j (lanes to the even floats of their pairs). */
static uint64_t spread_even(uint32_t v) {
    uint64_t x = v;
    x = (x | x << 16) & 0x0000FFFF0000FFFFull;
    x = (x | x << 8) & 0x00FF00FF00FF00FFull;
    x = (x | x << 4) & 0x0F0F0F0F0F0F0F0Full;
    x = (x | x << 2) & 0x3333333333333333ull;
    x = (x | x << 1) & 0x5555555555555555ull;
    return x;
}

/* ceil(a / 2) for any sign of a. */
static int64_t ceil_half(int64_t a) { return a >= 0 ? (a + 1) / 2 : -((-a) / 2); }

/* The s2 layout's loads of the tile at grid position i0 with `lanes` valid lanes (convp_tile_gathering_s2): the
 * tile's lanes fall in runs within one output row (segments); segment s, lanes [j, j + n) at (oy, ox), reads
 * lane j' at byte delta 4 * (oy*sh*wd + 2*(ox - j) + 2j') of a tap's offset, lane j' valid for tap (ki, kj)
 * when row oy*sh + ki*dh - ph is in [0, h) and column 2*(ox + j' - j) + kj*dw - pw in [0, wd). Vector q holds
 * lanes 8q .. 8q + 8: da[q] and masks[t][q] for the segment of its first lane, db[q] and masks[t][4 + q] for that of
 * its last where it differs (bit q of *split). */
enum { CONVP_S2_SEGMENTS = EPABI_CONVP_NR / 8 + 2 };

static void convp_masks_s2(const struct conv_launch* L, const struct convp_geom* g, int64_t i0, int lanes,
                           uint16_t* masks, intptr_t* da, intptr_t* db, unsigned* split) {
    uint64_t rowe[CONVP_S2_SEGMENTS][CONVP_MASK_WINDOW], cole[CONVP_S2_SEGMENTS][CONVP_MASK_WINDOW];
    intptr_t delta[CONVP_S2_SEGMENTS];
    int seg_of[EPABI_CONVP_NR];
    int segs = 0;
    for (int64_t j = 0; j < lanes; ++segs) {
        const int64_t oy = (i0 + j) / g->cols, ox = (i0 + j) % g->cols;
        const int64_t n = lanes - j < g->cols - ox ? lanes - j : g->cols - ox;
        delta[segs] = (intptr_t)((oy * L->sh * L->wd + 2 * (ox - j)) * (int64_t)sizeof(float));
        for (int64_t ki = 0; ki < L->kh; ++ki) {
            const int64_t iy = oy * L->sh + ki * L->dh - L->ph;
            rowe[segs][ki] = iy >= 0 && iy < L->h ? spread_even(lane_bits(j, j + n)) : 0;
        }
        for (int64_t kj = 0; kj < L->kw; ++kj) {
            /* output columns whose input column 2*ox + kj*dw - pw lies in [0, wd) */
            int64_t lo = ceil_half(L->pw - kj * L->dw), hi = ceil_half(L->wd + L->pw - kj * L->dw);
            if (lo < ox) lo = ox;
            if (hi > ox + n) hi = ox + n;
            cole[segs][kj] = lo < hi ? spread_even(lane_bits(j + lo - ox, j + hi - ox)) : 0;
        }
        for (int64_t i = j; i < j + n; ++i) seg_of[i] = segs;
        j += n;
    }
    *split = 0;
    int sa[4], sb[4];
    for (int q = 0; q < 4; ++q) {
        const int first = 8 * q, last = 8 * q + 7 < lanes - 1 ? 8 * q + 7 : lanes - 1;
        sa[q] = first < lanes ? seg_of[first] : -1;
        sb[q] = first < lanes ? seg_of[last] : -1;
        da[q] = (sa[q] >= 0 ? delta[sa[q]] : 0) + 64 * q;
        db[q] = (sb[q] >= 0 ? delta[sb[q]] : 0) + 64 * q;
        if (sb[q] != sa[q]) *split |= 1u << q;
    }
    for (int64_t ki = 0, t = 0; ki < L->kh; ++ki) {
        for (int64_t kj = 0; kj < L->kw; ++kj, ++t) {
            for (int q = 0; q < 4; ++q) {
                const uint64_t a = sa[q] >= 0 ? rowe[sa[q]][ki] & cole[sa[q]][kj] : 0;
                const uint64_t e = sb[q] != sa[q] ? rowe[sb[q]][ki] & cole[sb[q]][kj] : 0;
                masks[t * 8 + q] = (uint16_t)(a >> (16 * q));
                masks[t * 8 + 4 + q] = (uint16_t)(e >> (16 * q));
            }
        }
    }
}

/* Task t: group, block of panels, run of tiles (struct convp_image). */
static void convp_task(void* ctx, int64_t t, int slot) {
    const struct convp_image* im = ctx;
    const struct conv_launch* L = im->L;
    const int64_t blocks_per_group = im->blocks * im->runs;
    const int64_t g = t / blocks_per_group, rest = t % blocks_per_group;
    const int64_t p0 = rest / im->runs * im->block, tile0 = rest % im->runs * im->run_tiles;
    const int64_t p1 = p0 + im->block < im->panels ? p0 + im->block : im->panels;
    const int64_t tile1 = tile0 + im->run_tiles < im->g.tiles ? tile0 + im->run_tiles : im->g.tiles;
    const float* xg = im->xs + g * L->cg * im->g.channel;
    const int64_t plane = L->oh * L->ow;
    float tile[EPABI_CONVP_MR * EPABI_CONVP_NR] __attribute__((aligned(64)));
    float* gathered = im->gathered + (int64_t)slot * im->gathered_share;
    uint32_t masks[CONVP_MASK_TAPS];
    uint16_t masks_s2[CONVP_MASK_TAPS * 8];
    intptr_t da[4], db[4];
    unsigned split = 0;
    for (int64_t ti = tile0; ti < tile1; ++ti) {
        const int64_t i0 = ti * EPABI_CONVP_NR;
        const int lanes = (int)(im->g.last - i0 < EPABI_CONVP_NR ? im->g.last - i0 : EPABI_CONVP_NR);
        if (im->g.masked) convp_masks(L, &im->g, i0, lanes, masks);
        if (im->g.s2) convp_masks_s2(L, &im->g, i0, lanes, masks_s2, da, db, &split);
        for (int64_t p = p0; p < p1; ++p) {
            const int64_t m0 = g * L->mg + p * EPABI_CONVP_MR;
            const int rows = (int)(L->mg - p * EPABI_CONVP_MR < EPABI_CONVP_MR ? L->mg - p * EPABI_CONVP_MR
                                                                               : EPABI_CONVP_MR);
            const float* ap = im->wpack + (g * im->panels + p) * im->kdim * EPABI_CONVP_MR;
            if (p == p0 && im->g.s2)
                convp_tile_gathering_s2(im->kdim, ap, xg, im->offsets, masks_s2, L->kh * L->kw, da, db,
                                        split, gathered, tile);
            else if (p == p0 && im->g.masked)
                convp_tile_gathering_masked(im->kdim, ap, xg + i0, im->offsets, masks, L->kh * L->kw, gathered,
                                            tile);
            else if (p == p0)
                convp_tile_gathering(im->kdim, ap, xg + i0, im->offsets, lanes, gathered, tile);
            else
                convp_tile(im->kdim, ap, gathered, tile);
            convp_store(L, &im->g, tile, rows, i0, im->y + m0 * plane, L->bias != NULL ? L->bias + m0 : NULL);
        }
    }
}

void epabi_convp_launch(const struct conv_launch* L) {
    struct convp_image im;
    memset(&im, 0, sizeof im);
    im.L = L;
    convp_geom(L, &im.g);
    struct convp_scratch s;
    if (!convp_layout(L, &im.g, &s)) return;   /* conv.c checked epabi_convp_scratch_bytes first */
    unsigned char* work = (unsigned char*)L->work;
    im.kdim = L->cg * L->kh * L->kw;
    im.panels = panels_of(L->mg);
    int32_t* offsets = (int32_t*)(work + s.offsets);
    im.offsets = offsets;
    im.wpack = L->wpack;
    im.gathered = (float*)(work + s.gathered);
    im.gathered_share = (int64_t)(s.gathered_share / sizeof(float));
    if (im.wpack == NULL) {
        float* packed = (float*)(work + s.wpack);
        epabi_convp_pack(L->w, L->group, L->mg, im.kdim, packed);
        im.wpack = packed;
    }
    /* tap (c, ki, kj) of a group: its channel, phase plane, row and column offset in xs */
    const int64_t plane = im.g.rows * im.g.cols;
    for (int64_t c = 0, k = 0; c < L->cg; ++c) {
        for (int64_t ki = 0; ki < L->kh; ++ki) {
            for (int64_t kj = 0; kj < L->kw; ++kj, ++k) {
                const int64_t dy = ki * L->dh, dx = kj * L->dw;
                if (im.g.s2)   /* X itself from the tile's output row (convp_masks_s2's deltas) */
                    offsets[k] = (int32_t)(c * im.g.channel + (dy - L->ph) * L->wd + dx - L->pw);
                else if (im.g.masked)   /* X itself: negative into the top and left padding, which the masks skip */
                    offsets[k] = (int32_t)(c * im.g.channel + (dy - L->ph) * im.g.cols + dx - L->pw);
                else
                    offsets[k] = (int32_t)(c * im.g.channel + (dy % L->sh * L->sw + dx % L->sw) * plane +
                                           dy / L->sh * im.g.cols + dx / L->sw);
            }
        }
    }
    /* blocks of panels that fit CONVP_BLOCK_BYTES; then runs of consecutive tiles, about eight tasks a thread so
     * that the last claims even the threads out, but few enough that outputs of neighbouring tiles (which share
     * cache lines when columns are thrown away) are seldom written by two threads; one run a block on one thread */
    const int64_t panel_bytes = im.kdim * EPABI_CONVP_MR * (int64_t)sizeof(float);
    im.block = CONVP_BLOCK_BYTES / panel_bytes;
    if (im.block < 1) im.block = 1;
    if (im.block > im.panels) im.block = im.panels;
    im.blocks = (im.panels + im.block - 1) / im.block;
    const double macs = (double)L->n * (double)L->m * (double)(L->oh * L->ow) * (double)im.kdim;
    struct epabi_pool* pool = macs < 2.0 * EPABI_PARALLEL_MIN_MACS ? NULL : L->pool;
    const int64_t threads = epabi_pool_threads(pool);
    if (threads > 1 && L->group * im.blocks * im.g.tiles < 8 * threads) {
        /* few tiles (a small image): cut the panels finer too, or 9 tiles on 2 threads leave one thread a tile more */
        int64_t want = (8 * threads + L->group * im.g.tiles - 1) / (L->group * im.g.tiles);
        if (want > im.panels) want = im.panels;
        if (want > im.blocks) {
            im.block = (im.panels + want - 1) / want;
            im.blocks = (im.panels + im.block - 1) / im.block;
        }
    }
    const int64_t jobs = L->group * im.blocks;
    im.runs = threads > 1 && jobs < 8 * threads ? (8 * threads + jobs - 1) / jobs : 1;
    if (im.runs > im.g.tiles) im.runs = im.g.tiles;
    im.run_tiles = (im.g.tiles + im.runs - 1) / im.runs;
    im.runs = (im.g.tiles + im.run_tiles - 1) / im.run_tiles;
    const int64_t in_image = L->c * L->h * L->wd, out_image = L->m * L->oh * L->ow;
    for (int64_t ni = 0; ni < L->n; ++ni) {
        im.x = L->x + ni * in_image;
        im.y = L->y + ni * out_image;
        if (im.g.in_place || im.g.masked || im.g.s2) {
            im.xs = (float*)im.x;   /* only read */
        } else {
            im.xs = (float*)(work + s.xs);
            const int64_t row_floats = L->c * L->sh * L->sw * im.g.cols;
            epabi_pool_for_range(pool, im.g.rows, 16384 / (row_floats > 0 ? row_floats : 1), convp_rearrange, &im);
        }
        epabi_pool_for(pool, L->group * im.blocks * im.runs, convp_task, &im);
    }
}
