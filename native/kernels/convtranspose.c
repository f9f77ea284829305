/*
 * convtranspose.c - ConvTranspose (opsets 1-22) on float32 over 1-3 spatial dims: group, strides, pads,
 * dilations, output_padding, output_shape, auto_pad, kernel_shape, optional bias.
 *
 * X [N, C, in...], W [C, M/group, k...], B [M]. Each (image, group) is one matrix product
 * columns[Mg*K, in positions] = W_g^T [Mg*K, Cg] x X_g [Cg, in positions], done a tile of input positions at a
 * time so its scratch stays bounded, then col2im adds every column entry to the output position its tap
 * reaches (o = i * stride - pad_begin + k * dilation, dropped outside [0, out)).
 *
 * Output extents and pads follow ORT's CPU EP. With output_shape (its spatial dims, or all of them), the total
 * padding is max(0, (in - 1) * stride + output_padding + (k - 1) * dilation + 1 - out), split with the odd
 * one at the end for SAME_UPPER and at the beginning otherwise (the pads attribute is ignored). Without it,
 * SAME_UPPER / SAME_LOWER pad toward out = in * stride the same way, and otherwise
 * out = (in - 1) * stride + output_padding + (k - 1) * dilation + 1 - pads. As ORT 1.32 (whose predecessors
 * leave output positions unwritten), an output_shape extent more than stride - 1 past that unpadded extent,
 * or below 1, and an output_padding not below max(stride, dilation) are run-time errors. Opsets 1, 11 and 22
 * differ only in the dtypes they list.
 */
#include "math_common.h"
#include "cuda_coverage.h"

#include <stdlib.h>
#include <string.h>

enum convt_auto_pad { CONVT_NOTSET, CONVT_VALID, CONVT_SAME_UPPER, CONVT_SAME_LOWER };

/* Column-matrix tile: at most this many floats (16 MiB), but at least one input position. */
enum { CONVT_COL_FLOATS = 1 << 22 };

struct convt_state {
    int sr;                            /* spatial rank: 1, 2 or 3 */
    int64_t group;
    bool has_kernel_shape;
    int64_t kernel_shape[3];
    int64_t strides[3], dilations[3], output_padding[3];
    int64_t pads[6];                   /* ONNX order: the begin of each axis, then the end of each axis */
    int n_output_shape;                /* 0: absent; else sr or sr + 2 values */
    int64_t output_shape[5];
    enum convt_auto_pad auto_pad;
};

/* Adds one column tile (input positions t0 .. t0+tl of one image and group) into that group's output planes. */
static void convt_col2im(const struct convt_launch* L, const float* col, int64_t t0, int64_t tl, float* yg) {
    const int64_t K = L->kernel[0] * L->kernel[1] * L->kernel[2];
    const int64_t out_plane = L->out[0] * L->out[1] * L->out[2];
    for (int64_t r = 0; r < L->mg * K; ++r) {
        const int64_t mo = r / K, k = r % K;
        const int64_t k2 = k % L->kernel[2], k1 = (k / L->kernel[2]) % L->kernel[1];
        const int64_t k0 = k / (L->kernel[1] * L->kernel[2]);
        const int64_t off0 = k0 * L->dilation[0] - L->pad[0], off1 = k1 * L->dilation[1] - L->pad[1];
        const int64_t off2 = k2 * L->dilation[2] - L->pad[2];
        float* ym = yg + mo * out_plane;
        const float* row = col + r * tl;
        int64_t i2 = t0 % L->in[2], i1 = (t0 / L->in[2]) % L->in[1], i0 = t0 / (L->in[1] * L->in[2]);
        for (int64_t t = 0; t < tl; ++t) {
            const int64_t o0 = i0 * L->stride[0] + off0, o1 = i1 * L->stride[1] + off1, o2 = i2 * L->stride[2] + off2;
            if (o0 >= 0 && o0 < L->out[0] && o1 >= 0 && o1 < L->out[1] && o2 >= 0 && o2 < L->out[2])
                ym[(o0 * L->out[1] + o1) * L->out[2] + o2] += row[t];
            if (++i2 == L->in[2]) {
                i2 = 0;
                if (++i1 == L->in[1]) {
                    i1 = 0;
                    ++i0;
                }
            }
        }
    }
}

static void convt_launch_fn(const void* p) {
    const struct convt_launch* L = p;
    const int64_t K = L->kernel[0] * L->kernel[1] * L->kernel[2];
    const int64_t in_plane = L->in[0] * L->in[1] * L->in[2];
    const int64_t out_plane = L->out[0] * L->out[1] * L->out[2];
    for (int64_t ni = 0; ni < L->n; ++ni) {
        for (int64_t g = 0; g < L->group; ++g) {
            float* yg = L->y + (ni * L->m + g * L->mg) * out_plane;
            for (int64_t mo = 0; mo < L->mg; ++mo) {
                const float b = L->bias != NULL ? L->bias[g * L->mg + mo] : 0.0f;
                for (int64_t t = 0; t < out_plane; ++t) yg[mo * out_plane + t] = b;
            }
            if (L->cg == 0 || in_plane == 0) continue;   /* nothing to add: Y is the bias (or zero) */
            const float* xg = L->x + (ni * L->c + g * L->cg) * in_plane;
            const float* wg = L->w + g * L->cg * L->mg * K;
            for (int64_t t0 = 0; t0 < in_plane; t0 += L->tile) {
                const int64_t tl = in_plane - t0 < L->tile ? in_plane - t0 : L->tile;
                epabi_sgemm(true, false, L->mg * K, tl, L->cg, 1.0f, wg, L->mg * K, xg + t0, in_plane, 0.0f, L->col,
                            tl, L->pack);
                convt_col2im(L, L->col, t0, tl, yg);
            }
        }
    }
}

/* Reads the attributes into s; false with a reason when a value is outside what this kernel computes. */
static bool convt_parse(const struct epabi_node* node, struct convt_state* s, char* why, size_t why_len) {
    memset(s, 0, sizeof *s);
    const int wr = node->n_in >= 2 ? node->in[1].rank : -1;
    const int xr = node->in[0].rank;
    if (wr >= 0 && xr >= 0 && wr != xr) {
        snprintf(why, why_len, "ConvTranspose: X has rank %d but W has rank %d", xr, wr);
        return false;
    }
    int64_t vals[8];
    size_t cnt = 0;
    int rank = wr >= 0 ? wr : xr;
    if (rank < 0) {
        /* Rank unknown from the graph: a per-axis attribute still pins the spatial rank. */
        const char* per_axis[] = {"kernel_shape", "strides", "dilations", "output_padding"};
        for (size_t i = 0; i < 4 && rank < 0; ++i)
            if (epabi_attr_ints(node, per_axis[i], vals, 8, &cnt) && cnt > 0) rank = (int)cnt + 2;
        if (rank < 0 && epabi_attr_ints(node, "pads", vals, 8, &cnt) && cnt > 0) rank = (int)(cnt / 2) + 2;
    }
    if (rank < 3 || rank > 5) {
        if (rank < 0)
            snprintf(why, why_len, "ConvTranspose: the input rank is unknown");
        else
            snprintf(why, why_len, "ConvTranspose: rank %d inputs; only 1-D to 3-D (rank 3 to 5) are implemented",
                     rank);
        return false;
    }
    s->sr = rank - 2;
    s->group = 1;
    if (epabi_attr_int(node, "group", &s->group) && (s->group < 1 || s->group > INT32_MAX)) {
        snprintf(why, why_len, "ConvTranspose: group=%lld must be in [1, %d]", (long long)s->group, INT32_MAX);
        return false;
    }
    char pad[32] = "NOTSET";
    epabi_attr_string(node, "auto_pad", pad, sizeof pad);
    if (strcmp(pad, "NOTSET") == 0) {
        s->auto_pad = CONVT_NOTSET;
    } else if (strcmp(pad, "VALID") == 0) {
        s->auto_pad = CONVT_VALID;
    } else if (strcmp(pad, "SAME_UPPER") == 0) {
        s->auto_pad = CONVT_SAME_UPPER;
    } else if (strcmp(pad, "SAME_LOWER") == 0) {
        s->auto_pad = CONVT_SAME_LOWER;
    } else {
        snprintf(why, why_len, "ConvTranspose: auto_pad='%s' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", pad);
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
        {"output_padding", s->output_padding, (size_t)s->sr, 0, 0},
        {"pads", s->pads, 2 * (size_t)s->sr, 0, 0},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; ++i) {
        for (size_t j = 0; j < lists[i].len; ++j) lists[i].dst[j] = lists[i].deflt;
        /* an empty list means the default, as ORT reads it */
        if (!epabi_attr_ints(node, lists[i].name, vals, 8, &cnt) || cnt == 0) continue;
        if (cnt != lists[i].len) {
            snprintf(why, why_len, "ConvTranspose: %s has %zu values; a %d-D ConvTranspose needs %zu", lists[i].name,
                     cnt, s->sr, lists[i].len);
            return false;
        }
        for (size_t j = 0; j < cnt; ++j) {
            /* The upper bound keeps every extent product of the shape arithmetic inside int64. */
            if (vals[j] < lists[i].min || vals[j] > INT32_MAX) {
                snprintf(why, why_len, "ConvTranspose: %s[%zu]=%lld must be in [%lld, %d]", lists[i].name, j,
                         (long long)vals[j], (long long)lists[i].min, INT32_MAX);
                return false;
            }
            lists[i].dst[j] = vals[j];
        }
        if (i == 0) s->has_kernel_shape = true;
    }
    if (epabi_attr_ints(node, "output_shape", vals, 8, &cnt) && cnt > 0) {
        if (cnt != (size_t)s->sr && cnt != (size_t)s->sr + 2) {
            snprintf(why, why_len, "ConvTranspose: output_shape has %zu values; a %d-D ConvTranspose needs %d or %d",
                     cnt, s->sr, s->sr, s->sr + 2);
            return false;
        }
        for (size_t j = 0; j < cnt; ++j) {
            if (vals[j] < 0 || vals[j] > INT32_MAX) {
                snprintf(why, why_len, "ConvTranspose: output_shape[%zu]=%lld must be in [0, %d]", j,
                         (long long)vals[j], INT32_MAX);
                return false;
            }
            s->output_shape[j] = vals[j];
        }
        s->n_output_shape = (int)cnt;
    }
    return true;
}

static bool convt_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in < 2 || node->n_in > 3 || node->n_out != 1) {
        snprintf(why, why_len, "ConvTranspose: expected 2-3 inputs and 1 output, got %d and %d", node->n_in,
                 node->n_out);
        return false;
    }
    const char* names[] = {"X", "W", "B"};
    for (int i = 0; i < node->n_in; ++i) {
        if (i == 2 && !epabi_desc_present(node, 2)) break;
        if (node->in[i].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
            snprintf(why, why_len, "ConvTranspose: %s has dtype %s; only float is implemented", names[i],
                     epabi_dtype_name(node->in[i].dtype));
            return false;
        }
    }
    struct convt_state s;
    return convt_parse(node, &s, why, why_len);
}

static OrtStatus* convt_init(const struct epabi_node* node, void** state) {
    struct convt_state* s = malloc(sizeof *s);
    if (s == NULL) return epabi_error(node->api, ORT_FAIL, "ConvTranspose: out of memory");
    char why[256];
    if (!convt_parse(node, s, why, sizeof why)) {
        free(s);
        return epabi_error(node->api, ORT_INVALID_ARGUMENT, "%s", why);
    }
    *state = s;
    return NULL;
}

/* Splits a total padding the way ORT's CPU EP does: the odd one at the end for SAME_UPPER, else at the beginning. */
static void convt_split(enum convt_auto_pad ap, int64_t total, int64_t* head, int64_t* tail) {
    *head = ap == CONVT_SAME_UPPER ? total / 2 : total - total / 2;
    *tail = total - *head;
}

/* Output extent and begin padding of spatial axis d; false when output_shape asks for an extent that this input
 * cannot give (ORT 1.32's check: no more than stride - 1 past the unpadded extent, and at least 1). */
static bool convt_axis(const struct convt_state* s, int d, int64_t in, int64_t k, int64_t* out, int64_t* pad_begin) {
    const int64_t st = s->strides[d], adj = s->output_padding[d], dk = (k - 1) * s->dilations[d] + 1;
    const int64_t natural = (in - 1) * st + adj + dk;
    int64_t head = s->pads[d], tail = s->pads[s->sr + d];
    if (s->n_output_shape > 0) {
        const int64_t want = s->output_shape[s->n_output_shape == s->sr ? d : d + 2];
        const int64_t total = natural - want > 0 ? natural - want : 0;
        convt_split(s->auto_pad, total, &head, &tail);
        *out = want;
        *pad_begin = head;
        return want > 0 && (want + total - dk) / st + 1 == in;
    }
    if (s->auto_pad == CONVT_SAME_UPPER || s->auto_pad == CONVT_SAME_LOWER) {
        const int64_t total = natural - in * st;
        convt_split(s->auto_pad, total > 0 ? total : 0, &head, &tail);
    }
    *out = natural - head - tail;
    *pad_begin = head;
    return true;
}

static OrtStatus* convt_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                            int n_out) {
    (void)n_out;
    const struct convt_state* s = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < 2)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "ConvTranspose: expected at least 2 inputs, got %d", n_in);
    const struct epabi_tensor* X = in[0];
    const struct epabi_tensor* W = in[1];
    const struct epabi_tensor* B = epabi_opt_input(in, n_in, 2);
    char sx[160], sw[160];
    if (X->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || W->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ||
        (B != NULL && B->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "ConvTranspose: only float inputs are implemented");
    if (X->rank != s->sr + 2 || W->rank != s->sr + 2)
        return epabi_error(api, ORT_INVALID_ARGUMENT,
                           "ConvTranspose: X %s and W %s must both have rank %d for a %d-D ConvTranspose",
                           epabi_shape_str(sx, sizeof sx, X->rank, X->dims),
                           epabi_shape_str(sw, sizeof sw, W->rank, W->dims), s->sr + 2, s->sr);
    const int64_t N = X->dims[0], C = X->dims[1], Mg = W->dims[1], M = Mg * s->group;
    if (W->dims[0] != C || C % s->group != 0)
        return epabi_error(api, ORT_INVALID_ARGUMENT,
                           "ConvTranspose: with group=%lld, W %s needs W.dims[0] = C of X %s, divisible by group",
                           (long long)s->group, epabi_shape_str(sw, sizeof sw, W->rank, W->dims),
                           epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    if (B != NULL && (B->rank != 1 || B->dims[0] != M))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "ConvTranspose: bias %s must be [%lld] (W %s, group=%lld)",
                           epabi_shape_str(sx, sizeof sx, B->rank, B->dims), (long long)M,
                           epabi_shape_str(sw, sizeof sw, W->rank, W->dims), (long long)s->group);

    struct convt_launch L;
    memset(&L, 0, sizeof L);
    int64_t out_dims[5] = {N, M, 1, 1, 1};
    for (int d = 0; d < 3; ++d) {
        L.in[d] = L.out[d] = L.kernel[d] = L.stride[d] = L.dilation[d] = 1;
        if (d >= s->sr) continue;
        const int64_t k = W->dims[2 + d];
        if (k < 1 || k > INT32_MAX || (s->has_kernel_shape && s->kernel_shape[d] != k))
            return epabi_error(api, ORT_INVALID_ARGUMENT,
                               "ConvTranspose: W %s does not match kernel_shape on axis %d (%lld)",
                               epabi_shape_str(sw, sizeof sw, W->rank, W->dims), d,
                               (long long)(s->has_kernel_shape ? s->kernel_shape[d] : k));
        L.in[d] = X->dims[2 + d];
        L.kernel[d] = k;
        L.stride[d] = s->strides[d];
        L.dilation[d] = s->dilations[d];
        const int64_t limit = L.stride[d] > L.dilation[d] ? L.stride[d] : L.dilation[d];
        if (s->output_padding[d] >= limit)   /* ORT 1.32 refuses these at run time */
            return epabi_error(api, ORT_INVALID_ARGUMENT,
                               "ConvTranspose: output_padding[%d]=%lld must be less than max(stride, dilation)=%lld", d,
                               (long long)s->output_padding[d], (long long)limit);
        if (!convt_axis(s, d, L.in[d], k, &L.out[d], &L.pad[d]))
            return epabi_error(api, ORT_INVALID_ARGUMENT,
                               "ConvTranspose: output_shape asks axis %d for %lld, which X %s and W %s cannot give",
                               d, (long long)L.out[d], epabi_shape_str(sx, sizeof sx, X->rank, X->dims),
                               epabi_shape_str(sw, sizeof sw, W->rank, W->dims));
        if (L.out[d] <= 0)
            return epabi_error(api, ORT_INVALID_ARGUMENT,
                               "ConvTranspose: X %s and W %s give spatial axis %d the extent %lld; it must be > 0",
                               epabi_shape_str(sx, sizeof sx, X->rank, X->dims),
                               epabi_shape_str(sw, sizeof sw, W->rank, W->dims), d, (long long)L.out[d]);
        out_dims[2 + d] = L.out[d];
    }
    OrtStatus* st = NULL;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, X->rank, out_dims, &st);
    if (Y == NULL) return st;
    if (epabi_numel(X->rank, out_dims) == 0) return NULL;
    L.x = X->data;
    L.w = W->data;
    L.bias = B != NULL ? B->data : NULL;
    L.y = Y->data;
    L.n = N;
    L.c = C;
    L.m = M;
    L.group = s->group;
    L.cg = C / s->group;
    L.mg = Mg;
    const int64_t rows = Mg * L.kernel[0] * L.kernel[1] * L.kernel[2];
    const int64_t in_plane = L.in[0] * L.in[1] * L.in[2];
    L.tile = in_plane;
    if (L.cg > 0 && in_plane > 0 && rows > 0) {
        int64_t fit = CONVT_COL_FLOATS / rows;
        if (fit < 1) fit = 1;
        if (fit < L.tile) L.tile = fit;
        size_t col_bytes = 0;
        if (!epabi_mul_size((size_t)rows * sizeof(float), (size_t)L.tile, &col_bytes))
            return epabi_error(api, ORT_INVALID_ARGUMENT, "ConvTranspose: column buffer for W %s overflows",
                               epabi_shape_str(sw, sizeof sw, W->rank, W->dims));
        L.col = epabi_exec_scratch(ex, col_bytes, &st);
        if (L.col == NULL) return st;
        size_t pack_bytes = epabi_sgemm_scratch_bytes(rows, L.tile, L.cg);
        if (pack_bytes > 0) {
            L.pack = epabi_exec_scratch(ex, pack_bytes, &st);
            if (L.pack == NULL) return st;
        }
    }
    return epabi_exec_launch(ex, EPABI_LAUNCH_CONV_TRANSPOSE, convt_launch_fn, &L, sizeof L);
}

/* CUDA: convt_direct (a thread per output element; every input float, which supports() checked). */
const struct epabi_kernel epabi_kernels_convtranspose[] = {
    {.op_type = "ConvTranspose", .since_min = 1, .since_max = 22, .supports = convt_supports, .init = convt_init,
     .release = free, .run = convt_run, .launch = EPABI_LAUNCH_CONV_TRANSPOSE, .cuda = epabi_cuda_float32_math},
    {.op_type = NULL},
};
