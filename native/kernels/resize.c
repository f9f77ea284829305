/*
 * resize.c - Resize (opsets 10-19), modes nearest (float, int32, int8, uint8) and linear (float), on inputs of
 * rank 1 to 8, as ORT's CPU EP computes them:
 *   - output size from scales (floor of scale * dim, in float) or from sizes (scale = size / dim, in float; the
 *     keep_aspect_ratio_policy of opset 18 applied), over every axis or, from opset 18, the axes attribute's;
 *   - coordinate transformations half_pixel (default), asymmetric, pytorch_half_pixel, align_corners,
 *     tf_half_pixel_for_nn and (opset 19) half_pixel_symmetric, in float; opset 10 is asymmetric;
 *   - nearest_mode round_prefer_floor (default), round_prefer_ceil, floor and ceil; opset 10 truncates when
 *     upsampling and rounds up when downsampling; the index clamps into the input;
 *   - linear: the two neighbours of the clamped coordinate on every axis whose scale is not 1, weighted by the
 *     distance to the other one (0.5 each when they coincide), on the axis patterns ORT's CPU EP accepts (2-D, 3-D,
 *     4-D with the two outer or the outer and inner scales 1, 5-D with the two outer scales 1);
 *   - an axis of scale exactly 1 maps index i to i, and output dims equal to the input's copy the input.
 * Refused: cubic, tf_crop_and_resize (roi), antialias, exclude_outside. roi, scales and sizes are read in run(), as
 * kernel.h allows. The host launch tabulates each axis's input offsets and weights in scratch first; the CUDA
 * kernels compute the same per element.
 */
#include "cuda_coverage.h"
#include "kernel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum resize_policy { POLICY_STRETCH, POLICY_NOT_LARGER, POLICY_NOT_SMALLER };

struct resize_state {
    bool linear;
    enum resize_coord coord;
    enum resize_nearest nearest;
    enum resize_policy policy;
    int n_axes;                           /* the axes attribute (opset 18); 0: every axis */
    int64_t axes[EPABI_MAX_RANK];
    bool opset10;                         /* inputs X, scales (from 11: X, roi, scales, sizes) */
};

/* One output index of one axis: the input offsets (in elements) it reads and their weights (nearest: off[0]). */
struct resize_tap {
    int64_t off[2];
    float w[2];
};

static bool present(const struct epabi_node* node, int i) {
    return i < node->n_in && node->in[i].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

static bool nearest_dtype(ONNXTensorElementDataType t) {
    return t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 ||
           t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8;
}

/* Parses the attributes; the reason goes to why. */
static bool read_attrs(const struct epabi_node* node, struct resize_state* st, char* why, size_t why_len) {
    const int v = node->since_version;
    st->opset10 = v < 11;
    char s[32] = "nearest";
    epabi_attr_string(node, "mode", s, sizeof s);
    if (strcmp(s, "nearest") != 0 && strcmp(s, "linear") != 0) {
        snprintf(why, why_len, "Resize: mode '%s' is not supported", s);
        return false;
    }
    st->linear = strcmp(s, "linear") == 0;
    st->coord = RESIZE_ASYMMETRIC;
    if (v >= 11) {
        snprintf(s, sizeof s, "half_pixel");
        epabi_attr_string(node, "coordinate_transformation_mode", s, sizeof s);
        if (strcmp(s, "half_pixel") == 0) st->coord = RESIZE_HALF_PIXEL;
        else if (strcmp(s, "asymmetric") == 0) st->coord = RESIZE_ASYMMETRIC;
        else if (strcmp(s, "pytorch_half_pixel") == 0) st->coord = RESIZE_PYTORCH_HALF_PIXEL;
        else if (strcmp(s, "align_corners") == 0) st->coord = RESIZE_ALIGN_CORNERS;
        else if (strcmp(s, "tf_half_pixel_for_nn") == 0) st->coord = RESIZE_TF_HALF_PIXEL_FOR_NN;
        else if (strcmp(s, "half_pixel_symmetric") == 0 && v >= 19) st->coord = RESIZE_HALF_PIXEL_SYMMETRIC;
        else {
            snprintf(why, why_len, "Resize: coordinate_transformation_mode '%s' is not supported", s);
            return false;
        }
    }
    st->nearest = RESIZE_SIMPLE;
    if (v >= 11) {
        snprintf(s, sizeof s, "round_prefer_floor");
        epabi_attr_string(node, "nearest_mode", s, sizeof s);
        if (strcmp(s, "round_prefer_floor") == 0) st->nearest = RESIZE_ROUND_PREFER_FLOOR;
        else if (strcmp(s, "round_prefer_ceil") == 0) st->nearest = RESIZE_ROUND_PREFER_CEIL;
        else if (strcmp(s, "floor") == 0) st->nearest = RESIZE_FLOOR;
        else if (strcmp(s, "ceil") == 0) st->nearest = RESIZE_CEIL;
        else if (!st->linear) {
            snprintf(why, why_len, "Resize: nearest_mode '%s' is not supported", s);
            return false;
        }
    }
    int64_t i = 0;
    if ((epabi_attr_int(node, "antialias", &i) && i != 0) || (epabi_attr_int(node, "exclude_outside", &i) && i != 0)) {
        snprintf(why, why_len, "Resize: antialias and exclude_outside are not supported");
        return false;
    }
    st->policy = POLICY_STRETCH;
    st->n_axes = 0;
    if (v >= 18) {
        snprintf(s, sizeof s, "stretch");
        epabi_attr_string(node, "keep_aspect_ratio_policy", s, sizeof s);
        if (strcmp(s, "stretch") == 0) st->policy = POLICY_STRETCH;
        else if (strcmp(s, "not_larger") == 0) st->policy = POLICY_NOT_LARGER;
        else if (strcmp(s, "not_smaller") == 0) st->policy = POLICY_NOT_SMALLER;
        else {
            snprintf(why, why_len, "Resize: keep_aspect_ratio_policy '%s' is not supported", s);
            return false;
        }
        size_t n = 0;
        if (epabi_attr_ints(node, "axes", st->axes, EPABI_MAX_RANK, &n)) {
            if (n > EPABI_MAX_RANK) {
                snprintf(why, why_len, "Resize: %zu axes exceed rank %d", n, EPABI_MAX_RANK);
                return false;
            }
            st->n_axes = (int)n;
        }
    }
    return true;
}

/* align_corners and pytorch_half_pixel read the output length. ORT's CPU EP takes the integer one (floor of
 * scale * dim), the ONNX spec scale * dim itself; they agree when that product is whole, so the node is ours only
 * when it must be: sizes given (without an aspect-ratio policy, which rescales), or constant scales that are whole
 * numbers or whose products with known dims are. */
static bool whole_output_lengths(const struct epabi_node* node, const struct resize_state* st, int scales) {
    const struct epabi_value_desc* s = scales < node->n_in ? &node->in[scales] : NULL;
    const bool no_scales = s == NULL || s->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED ||
                           (s->const_data != NULL && s->const_count == 0);
    if (no_scales) return st->policy == POLICY_STRETCH;   /* the sizes path: the lengths are the sizes */
    if (s->const_data == NULL || s->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) return false;
    const struct epabi_value_desc* x = &node->in[0];
    for (size_t i = 0; i < s->const_count; ++i) {
        float v;
        memcpy(&v, (const float*)s->const_data + i, sizeof v);
        if (v == floorf(v)) continue;
        int d = (int)i;
        if (st->n_axes > 0 && (i >= (size_t)st->n_axes || !epabi_norm_axis(st->axes[i], x->rank, &d))) return false;
        if (x->rank <= d || x->dims[d] < 0) return false;
        const float len = v * (float)x->dims[d];
        if (len != floorf(len)) return false;
    }
    return true;
}

static bool resize_supports(const struct epabi_node* node, char* why, size_t why_len) {
    const struct epabi_value_desc* x = &node->in[0];
    struct resize_state st;
    if (!read_attrs(node, &st, why, why_len)) return false;
    if (st.linear ? x->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT : !nearest_dtype(x->dtype)) {
        snprintf(why, why_len, "Resize: %s mode on %s is not supported", st.linear ? "linear" : "nearest",
                 epabi_dtype_name(x->dtype));
        return false;
    }
    if (x->rank == 0 || x->rank > EPABI_MAX_RANK) {
        snprintf(why, why_len, "Resize: rank %d is not supported", x->rank);
        return false;
    }
    for (int k = 0; k < st.n_axes; ++k) {
        int a = 0;
        if (x->rank > 0 && !epabi_norm_axis(st.axes[k], x->rank, &a)) {
            snprintf(why, why_len, "Resize: axis %lld is out of range for rank %d", (long long)st.axes[k], x->rank);
            return false;
        }
    }
    const int scales = node->since_version >= 11 ? 2 : 1;
    if (present(node, scales) && node->in[scales].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        snprintf(why, why_len, "Resize: scales must be float");
        return false;
    }
    if (node->since_version >= 11 && present(node, 3) && node->in[3].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64) {
        snprintf(why, why_len, "Resize: sizes must be int64");
        return false;
    }
    if ((st.coord == RESIZE_ALIGN_CORNERS || st.coord == RESIZE_PYTORCH_HALF_PIXEL) &&
        !whole_output_lengths(node, &st, scales)) {
        snprintf(why, why_len, "Resize: %s with scales that may give a fractional output length, where ORT's CPU EP "
                 "and the ONNX spec differ", st.coord == RESIZE_ALIGN_CORNERS ? "align_corners" : "pytorch_half_pixel");
        return false;
    }
    return true;
}

static OrtStatus* resize_init(const struct epabi_node* node, void** state) {
    struct resize_state* st = calloc(1, sizeof *st);
    if (st == NULL) return epabi_error(node->api, ORT_FAIL, "Resize: out of memory");
    char why[160];
    if (!read_attrs(node, st, why, sizeof why)) {
        free(st);
        return epabi_error(node->api, ORT_INVALID_ARGUMENT, "%s", why);
    }
    *state = st;
    return NULL;
}

static void resize_release(void* state) {
    free(state);
}

/* ---- coordinates (the CUDA kernels compute the same; cuda_kernels.cu) --------------------------------- */

static float original_coordinate(enum resize_coord c, float o, float scale, float out_len, float in_len) {
    switch (c) {
    case RESIZE_ASYMMETRIC: return o / scale;
    case RESIZE_PYTORCH_HALF_PIXEL: return out_len > 1 ? (o + 0.5f) / scale - 0.5f : 0.0f;
    case RESIZE_TF_HALF_PIXEL_FOR_NN: return (o + 0.5f) / scale;
    case RESIZE_ALIGN_CORNERS: return out_len == 1 ? 0.0f : o * (in_len - 1) / (out_len - 1);
    case RESIZE_HALF_PIXEL_SYMMETRIC: {
        const float adjustment = out_len / (scale * in_len);
        const float offset = in_len / 2 * (1 - adjustment);
        return (float)(offset + (o + 0.5) / scale - 0.5);   /* the tail in double, as ORT's CPU EP */
    }
    default: return (o + 0.5f) / scale - 0.5f;
    }
}

static int64_t nearest_index(enum resize_nearest m, float x, bool down, int64_t in_len) {
    /* beyond [-1, in_len] every mode clamps to the same index; bounding first keeps the conversions defined */
    if (x < -1.0f) x = -1.0f;
    if (x > (float)in_len) x = (float)in_len;
    int64_t i;
    switch (m) {
    case RESIZE_SIMPLE: i = down ? (int64_t)ceilf(x) : (int64_t)x; break;
    case RESIZE_ROUND_PREFER_CEIL: i = (int64_t)roundf(x); break;
    case RESIZE_FLOOR: i = (int64_t)floorf(x); break;
    case RESIZE_CEIL: i = (int64_t)ceilf(x); break;
    default: i = x == (float)(int64_t)x + 0.5f ? (int64_t)floorf(x) : (int64_t)roundf(x); break;
    }
    return i < 0 ? 0 : (i >= in_len ? in_len - 1 : i);
}

/* The taps of output index o on an axis (input offsets in elements via stride). */
static struct resize_tap axis_tap(const struct resize_args* a, int d, int64_t o, int64_t stride) {
    struct resize_tap t = {{o * stride, o * stride}, {1.0f, 0.0f}};
    const float scale = a->scales[d];
    if (scale == 1.0f) return t;
    const int64_t n = a->in_dims[d];
    const float x = original_coordinate(a->coord, (float)o, scale, (float)a->out_dims[d], (float)n);
    if (!a->linear) {
        t.off[0] = t.off[1] = nearest_index(a->nearest, x, scale < 1.0f, n) * stride;
        return t;
    }
    const float c = fmaxf(0.0f, fminf(x, (float)(n - 1)));
    int64_t i1 = (int64_t)c;
    if (i1 > n - 1) i1 = n - 1;
    const int64_t i2 = i1 + 1 < n ? i1 + 1 : n - 1;
    t.off[0] = i1 * stride;
    t.off[1] = i2 * stride;
    if (i1 == i2) {
        t.w[0] = t.w[1] = 0.5f;
    } else {
        t.w[0] = fabsf(c - (float)i2);
        t.w[1] = fabsf(c - (float)i1);
    }
    return t;
}

/* ---- the launch ----------------------------------------------------------------------------------------- */

static void resize_fn(const void* p) {
    const struct resize_args* a = p;
    const int r = a->rank;
    if (a->copy) {
        memcpy(a->y, a->x, (size_t)epabi_numel(r, a->in_dims) * a->elsize);
        return;
    }
    const struct resize_tap* taps[EPABI_MAX_RANK];
    struct resize_tap* t = (struct resize_tap*)(void*)a->table;
    int64_t stride = 1;
    int interp[EPABI_MAX_RANK], k = 0;   /* the axes a linear resize interpolates along */
    for (int d = r - 1; d >= 0; --d) {
        for (int64_t o = 0; o < a->out_dims[d]; ++o) t[o] = axis_tap(a, d, o, stride);
        taps[d] = t;
        t += a->out_dims[d];
        stride *= a->in_dims[d];
    }
    for (int d = 0; d < r; ++d)
        if (a->linear && a->scales[d] != 1.0f) interp[k++] = d;
    const int last = r - 1;
    const int64_t inner = a->out_dims[last];
    int64_t outer = 1;
    for (int d = 0; d < last; ++d) outer *= a->out_dims[d];
    int64_t idx[EPABI_MAX_RANK] = {0};
    unsigned char* dst = a->y;
    for (int64_t row = 0; row < outer; ++row) {
        int64_t base = 0;   /* the outer axes' first taps */
        for (int d = 0; d < last; ++d) base += taps[d][idx[d]].off[0];
        if (!a->linear) {
            const struct resize_tap* tl = taps[last];
            if (a->elsize == 4) {
                const uint32_t* src = (const uint32_t*)(const void*)a->x + base;
                uint32_t* y = (uint32_t*)(void*)dst;
                for (int64_t j = 0; j < inner; ++j) y[j] = src[tl[j].off[0]];
            } else {
                const unsigned char* src = a->x + base;
                for (int64_t j = 0; j < inner; ++j) dst[j] = src[tl[j].off[0]];
            }
        } else {
            const float* x = (const float*)(const void*)a->x;
            float* y = (float*)(void*)dst;
            for (int64_t j = 0; j < inner; ++j) {
                idx[last] = j;
                int64_t plain = base + taps[last][j].off[0];   /* every axis's first tap */
                for (int q = 0; q < k; ++q) plain -= taps[interp[q]][idx[interp[q]]].off[0];
                float acc = 0.0f;
                /* corners with the innermost interpolated axis varying fastest; weights multiplied from it out */
                for (int c = 0; c < (1 << k); ++c) {
                    int64_t off = plain;
                    float w = 1.0f;
                    for (int q = k - 1; q >= 0; --q) {
                        const int bit = (c >> (k - 1 - q)) & 1;
                        const struct resize_tap* tq = &taps[interp[q]][idx[interp[q]]];
                        off += tq->off[bit];
                        w *= tq->w[bit];
                    }
                    acc += w * x[off];
                }
                y[j] = acc;
            }
            idx[last] = 0;
        }
        dst += (size_t)inner * a->elsize;
        for (int d = last - 1; d >= 0; --d) {
            if (++idx[d] < a->out_dims[d]) break;
            idx[d] = 0;
        }
    }
}

/* ---- run -------------------------------------------------------------------------------------------- */

static const struct epabi_tensor* optional_input(const struct epabi_tensor* const* in, int n_in, int i) {
    if (i >= n_in || in[i] == NULL || in[i]->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) return NULL;
    if (epabi_numel(in[i]->rank, in[i]->dims) == 0) return NULL;   /* an empty scales or sizes means "not given" */
    return in[i];
}

/* The values of a host-readable 1-D scales (float) or sizes (int64) input, spread over the axes attribute's
 * axes (the others: 1 for scales, the input dim for sizes). */
static OrtStatus* read_per_axis(struct epabi_exec* ex, const struct resize_state* st, const struct epabi_tensor* t,
                                const struct epabi_tensor* x, float* scales, int64_t* sizes) {
    const struct epabi_api* api = epabi_exec_api(ex);
    const char* what = scales != NULL ? "scales" : "sizes";
    const int64_t n = epabi_numel(t->rank, t->dims);
    const int want = st->n_axes > 0 ? st->n_axes : x->rank;
    if (t->rank != 1 || n != want)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Resize: %s has %lld values; %d are needed", what,
                           (long long)n, want);
    OrtStatus* status = NULL;
    const void* host = epabi_exec_host_data(ex, t, &status);
    if (status != NULL) return status;
    for (int d = 0; d < x->rank; ++d) {
        if (scales != NULL) scales[d] = 1.0f;
        else sizes[d] = x->dims[d];
    }
    for (int i = 0; i < want; ++i) {
        int d = i;
        if (st->n_axes > 0 && !epabi_norm_axis(st->axes[i], x->rank, &d))
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Resize: axis %lld is out of range for rank %d",
                               (long long)st->axes[i], x->rank);
        if (scales != NULL) memcpy(&scales[d], (const float*)host + i, sizeof(float));
        else memcpy(&sizes[d], (const int64_t*)host + i, sizeof(int64_t));
    }
    return NULL;
}

/* Whether axis d is one the axes attribute names (every axis without it). */
static bool on_axes(const struct resize_state* st, int d, int rank) {
    if (st->n_axes == 0) return true;
    for (int i = 0; i < st->n_axes; ++i) {
        int a = 0;
        if (epabi_norm_axis(st->axes[i], rank, &a) && a == d) return true;
    }
    return false;
}

static OrtStatus* check_scales(const struct epabi_api* api, bool linear, int r, const float* s) {
    for (int d = 0; d < r; ++d)
        if (!(s[d] > 0.0f) || !isfinite(s[d]))
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Resize: scale %g of axis %d is not a positive number",
                               (double)s[d], d);
    if (!linear) return NULL;
    const bool ok = r == 2 || r == 3 || (r == 4 && s[0] == 1.0f && (s[1] == 1.0f || s[3] == 1.0f)) ||
                    (r == 5 && s[0] == 1.0f && s[1] == 1.0f);
    if (!ok)
        return epabi_error(api, ORT_INVALID_ARGUMENT,
                           "Resize: linear mode covers 2-D and 3-D inputs, 4-D ones with the two outer or the outer "
                           "and inner scales 1, and 5-D ones with the two outer scales 1 (rank %d)", r);
    return NULL;
}

static OrtStatus* resize_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                             int n_out) {
    (void)n_out;
    const struct resize_state* st = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    const struct epabi_tensor* x = in[0];
    const int r = x->rank;
    if (r < 1 || r > EPABI_MAX_RANK)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Resize: rank %d is not supported", r);
    struct resize_args a = {0};
    a.rank = r;
    a.linear = st->linear;
    a.coord = st->coord;
    a.nearest = st->nearest;
    a.elsize = epabi_dtype_size(x->dtype);
    const bool opset10 = st->opset10;
    const struct epabi_tensor* scales = optional_input(in, n_in, opset10 ? 1 : 2);
    const struct epabi_tensor* sizes = opset10 ? NULL : optional_input(in, n_in, 3);
    if ((scales == NULL) == (sizes == NULL))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Resize: exactly one of scales and sizes must be given");
    for (int d = 0; d < r; ++d) a.in_dims[d] = x->dims[d];
    if (scales != NULL) {
        if (scales->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Resize: scales must be float");
        EPABI_RETURN_IF_ERROR(read_per_axis(ex, st, scales, x, a.scales, NULL));
        EPABI_RETURN_IF_ERROR(check_scales(api, a.linear, r, a.scales));
        for (int d = 0; d < r; ++d) {
            const float len = a.scales[d] * (float)x->dims[d];
            if (len >= 4611686018427387904.0f)   /* 2^62: beyond any tensor, and beyond exact int64 conversion */
                return epabi_error(api, ORT_INVALID_ARGUMENT, "Resize: scale %g makes axis %d too long",
                                   (double)a.scales[d], d);
            a.out_dims[d] = (int64_t)len;
        }
    } else {
        if (sizes->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Resize: sizes must be int64");
        EPABI_RETURN_IF_ERROR(read_per_axis(ex, st, sizes, x, NULL, a.out_dims));
        for (int d = 0; d < r; ++d) {
            if (a.out_dims[d] < 0)
                return epabi_error(api, ORT_INVALID_ARGUMENT, "Resize: size %lld of axis %d is negative",
                                   (long long)a.out_dims[d], d);
            if (x->dims[d] == 0 && a.out_dims[d] != 0)
                return epabi_error(api, ORT_INVALID_ARGUMENT, "Resize: axis %d is empty but its size is %lld", d,
                                   (long long)a.out_dims[d]);
            a.scales[d] = x->dims[d] == 0 ? 1.0f : (float)a.out_dims[d] / (float)x->dims[d];
        }
        if (st->policy != POLICY_STRETCH) {
            float s = st->policy == POLICY_NOT_LARGER ? INFINITY : 0.0f;
            for (int d = 0; d < r; ++d)
                if (on_axes(st, d, r)) s = st->policy == POLICY_NOT_LARGER ? fminf(s, a.scales[d]) : fmaxf(s, a.scales[d]);
            for (int d = 0; d < r; ++d) {
                const bool on = on_axes(st, d, r);
                a.scales[d] = on ? s : 1.0f;
                a.out_dims[d] = on ? (int64_t)roundf(s * (float)x->dims[d]) : x->dims[d];
            }
        }
        EPABI_RETURN_IF_ERROR(check_scales(api, a.linear, r, a.scales));
    }
    OrtStatus* status = NULL;
    struct epabi_tensor* y = epabi_exec_output(ex, 0, x->dtype, r, a.out_dims, &status);
    if (y == NULL) return status;
    if (epabi_numel(r, a.out_dims) == 0) return NULL;
    a.copy = memcmp(a.in_dims, a.out_dims, sizeof(int64_t) * (size_t)r) == 0;
    if (!a.copy) {
        int64_t taps = 0;
        for (int d = 0; d < r; ++d) taps += a.out_dims[d];
        a.table = epabi_exec_scratch(ex, (size_t)taps * sizeof(struct resize_tap), &status);
        if (a.table == NULL) return status;
    }
    a.x = x->data;
    a.y = y->data;
    return epabi_exec_launch(ex, EPABI_LAUNCH_RESIZE, resize_fn, &a, sizeof a);
}

/* CUDA: nearest on 1- and 4-byte elements and linear on float, as on the host (supports() took the rest). */
static bool cuda_resize(const struct epabi_node* node, char* why, size_t why_len) {
    const ONNXTensorElementDataType t = epabi_cuda_in_dtype(node, 0);
    return nearest_dtype(t) || epabi_cuda_refuse(node, why, why_len, "input", t);
}

/* Opset 10 has only X and scales (host_inputs bit 1); from 11 roi, scales and sizes (bits 1-3; roi is never
 * read, as tf_crop_and_resize is refused). */
const struct epabi_kernel epabi_kernels_resize[] = {
    {.op_type = "Resize", .since_min = 10, .since_max = 10, .supports = resize_supports, .init = resize_init,
     .release = resize_release, .run = resize_run, .launch = EPABI_LAUNCH_RESIZE, .host_inputs = 1u << 1,
     .cuda = cuda_resize},
    {.op_type = "Resize", .since_min = 11, .since_max = 19, .supports = resize_supports, .init = resize_init,
     .release = resize_release, .run = resize_run, .launch = EPABI_LAUNCH_RESIZE, .host_inputs = 0xEu,
     .cuda = cuda_resize},
    {.op_type = NULL},
};
