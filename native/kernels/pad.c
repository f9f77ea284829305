/*
 * pad.c - Pad: opsets 2-10 (pads and value attributes) and 11-25 (pads, constant_value and, from 18, axes
 * inputs), modes constant, reflect, edge and (from 19) wrap, on every dtype with a whole-byte size.
 *
 * Negative pads crop first; the padding then applies to what is left (the view), as ORT's CPU EP does, with its
 * checks: reflect needs at least 2 elements on a padded axis and pads of at most that length minus one, edge and
 * wrap cannot pad an empty axis, and an output axis cannot be shorter than zero (a crop past the input's end
 * leaves nothing but padding). An axis named twice takes the later
 * pads. The pads and axes inputs are read in run(), as kernel.h allows; the constant_value input (one element) is
 * read by the launch, like data. The copy itself is padded_copy.c's.
 */
#include "cuda_coverage.h"
#include "kernel.h"
#include "padded_copy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pad_state {
    enum pad_mode mode;
    int n_pads;                            /* opsets 2-10: the pads attribute */
    int64_t pads[2 * EPABI_MAX_RANK];
    float value;                           /* opsets 2-10: the value attribute */
};

static bool present(const struct epabi_node* node, int i) {
    return i < node->n_in && node->in[i].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

static bool read_mode(const struct epabi_node* node, enum pad_mode* mode, char* why, size_t why_len) {
    char m[16] = "constant";
    epabi_attr_string(node, "mode", m, sizeof m);
    if (strcmp(m, "constant") == 0) *mode = PAD_CONSTANT;
    else if (strcmp(m, "reflect") == 0) *mode = PAD_REFLECT;
    else if (strcmp(m, "edge") == 0) *mode = PAD_EDGE;
    else if (strcmp(m, "wrap") == 0 && node->since_version >= 19) *mode = PAD_WRAP;
    else {
        snprintf(why, why_len, "Pad: mode '%s' is not supported at opset %d", m, node->since_version);
        return false;
    }
    return true;
}

static bool read_attrs(const struct epabi_node* node, struct pad_state* st, char* why, size_t why_len) {
    if (!read_mode(node, &st->mode, why, why_len)) return false;
    st->n_pads = 0;
    st->value = 0.0f;
    if (node->since_version >= 11) return true;
    size_t n = 0;
    if (!epabi_attr_ints(node, "pads", st->pads, 2 * EPABI_MAX_RANK, &n)) {
        snprintf(why, why_len, "Pad: the pads attribute is missing");
        return false;
    }
    if (n > 2 * EPABI_MAX_RANK || n % 2 != 0) {
        snprintf(why, why_len, "Pad: %zu pads are not two per axis of a rank up to %d", n, EPABI_MAX_RANK);
        return false;
    }
    st->n_pads = (int)n;
    epabi_attr_float(node, "value", &st->value);
    return true;
}

static bool pad_supports(const struct epabi_node* node, char* why, size_t why_len) {
    const struct epabi_value_desc* x = &node->in[0];
    if (node->n_in < 1 || epabi_dtype_size(x->dtype) == 0) {
        snprintf(why, why_len, "Pad: dtype %s is not supported", epabi_dtype_name(x->dtype));
        return false;
    }
    if (x->rank > EPABI_MAX_RANK || x->rank == 0) {
        snprintf(why, why_len, "Pad: rank %d is not supported", x->rank);
        return false;
    }
    struct pad_state st;
    if (!read_attrs(node, &st, why, why_len)) return false;
    if (node->since_version < 11) {
        /* the value attribute is a float; Pad-2 is defined for the floating dtypes */
        if (x->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT && x->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE) {
            snprintf(why, why_len, "Pad: opset %d on %s is not supported", node->since_version,
                     epabi_dtype_name(x->dtype));
            return false;
        }
        if (x->rank >= 0 && st.n_pads != 2 * x->rank) {
            snprintf(why, why_len, "Pad: %d pads for rank %d", st.n_pads, x->rank);
            return false;
        }
        return true;
    }
    if (!present(node, 1) || !epabi_is_index_dtype(node->in[1].dtype)) {
        snprintf(why, why_len, "Pad: the pads input must be int32 or int64");
        return false;
    }
    if (present(node, 2) && node->in[2].dtype != x->dtype) {
        snprintf(why, why_len, "Pad: constant_value is %s, data is %s", epabi_dtype_name(node->in[2].dtype),
                 epabi_dtype_name(x->dtype));
        return false;
    }
    if (present(node, 3) && (node->since_version < 18 || !epabi_is_index_dtype(node->in[3].dtype))) {
        snprintf(why, why_len, "Pad: axes must be int32 or int64 (from opset 18)");
        return false;
    }
    return true;
}

static OrtStatus* pad_init(const struct epabi_node* node, void** state) {
    struct pad_state* st = calloc(1, sizeof *st);
    if (st == NULL) return epabi_error(node->api, ORT_FAIL, "Pad: out of memory");
    char why[128];
    if (!read_attrs(node, st, why, sizeof why)) {
        free(st);
        return epabi_error(node->api, ORT_INVALID_ARGUMENT, "%s", why);
    }
    *state = st;
    return NULL;
}

static void pad_release(void* state) {
    free(state);
}

static const struct epabi_tensor* optional_input(const struct epabi_tensor* const* in, int n_in, int i) {
    if (i >= n_in || in[i] == NULL || in[i]->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) return NULL;
    return in[i];
}

/* A host-readable 1-D int32/int64 input of at most cap values. */
static OrtStatus* read_ints(struct epabi_exec* ex, const char* what, const struct epabi_tensor* t, int64_t* out,
                            size_t cap, size_t* n) {
    const struct epabi_api* api = epabi_exec_api(ex);
    if (!epabi_is_index_dtype(t->dtype) || t->rank != 1)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Pad: %s must be a 1-D int32 or int64 tensor", what);
    if (t->dims[0] > (int64_t)cap)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Pad: %s has %lld values; at most %zu are supported", what,
                           (long long)t->dims[0], cap);
    OrtStatus* status = NULL;
    const void* host = t->dims[0] > 0 ? epabi_exec_host_data(ex, t, &status) : NULL;
    if (status != NULL) return status;
    for (int64_t i = 0; i < t->dims[0]; ++i) out[i] = epabi_index_at(t->dtype, host, i);
    *n = (size_t)t->dims[0];
    return NULL;
}

/* Per-axis pads (pre[k], post[k]) and the constant element: from the state or, for the constant_value input, its
 * data, which the launch reads (value_src). */
static OrtStatus* read_params(struct epabi_exec* ex, const struct pad_state* st, const struct epabi_tensor* const* in,
                              int n_in, int64_t* pre, int64_t* post, uint64_t* value,
                              const unsigned char** value_src) {
    const struct epabi_api* api = epabi_exec_api(ex);
    const struct epabi_tensor* x = in[0];
    const int r = x->rank;
    *value = 0;
    *value_src = NULL;
    if (st->n_pads > 0 || optional_input(in, n_in, 1) == NULL) {   /* opsets 2-10 */
        if (st->n_pads != 2 * r)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Pad: %d pads for rank %d", st->n_pads, r);
        for (int k = 0; k < r; ++k) {
            pre[k] = st->pads[k];
            post[k] = st->pads[r + k];
        }
        if (x->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE) {
            const double v = st->value;
            memcpy(value, &v, sizeof v);
        } else {
            memcpy(value, &st->value, sizeof st->value);
        }
        return NULL;
    }
    int64_t axes[EPABI_MAX_RANK];
    size_t n_axes = (size_t)r;
    const struct epabi_tensor* ta = optional_input(in, n_in, 3);
    if (ta != NULL) {
        EPABI_RETURN_IF_ERROR(read_ints(ex, "axes", ta, axes, EPABI_MAX_RANK, &n_axes));
    } else {
        for (int k = 0; k < r; ++k) axes[k] = k;
    }
    int64_t pads[2 * EPABI_MAX_RANK];
    size_t n_pads = 0;
    EPABI_RETURN_IF_ERROR(read_ints(ex, "pads", in[1], pads, 2 * EPABI_MAX_RANK, &n_pads));
    if (n_pads != 2 * n_axes)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Pad: %zu pads for %zu axes; two per axis are needed", n_pads,
                           n_axes);
    for (int k = 0; k < r; ++k) pre[k] = post[k] = 0;
    for (size_t i = 0; i < n_axes; ++i) {
        int k = 0;
        if (!epabi_norm_axis(axes[i], r, &k))
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Pad: axis %lld is out of range for rank %d",
                               (long long)axes[i], r);
        pre[k] = pads[i];
        post[k] = pads[n_axes + i];
    }
    const struct epabi_tensor* cv = optional_input(in, n_in, 2);
    if (cv != NULL) {
        if (cv->dtype != x->dtype || epabi_numel(cv->rank, cv->dims) != 1)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Pad: constant_value must be one %s element",
                               epabi_dtype_name(x->dtype));
        *value_src = cv->data;
    }
    return NULL;
}

static const char* mode_name(enum pad_mode m) {
    return m == PAD_REFLECT ? "reflect" : m == PAD_EDGE ? "edge" : m == PAD_WRAP ? "wrap" : "constant";
}

static OrtStatus* pad_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                          int n_out) {
    (void)n_out;
    const struct pad_state* st = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    const struct epabi_tensor* x = in[0];
    const int r = x->rank;
    if (r < 1) return epabi_error(api, ORT_INVALID_ARGUMENT, "Pad: the input must have a rank of at least 1");
    int64_t pre[EPABI_MAX_RANK], post[EPABI_MAX_RANK];
    struct pad_args a = {0};
    EPABI_RETURN_IF_ERROR(read_params(ex, st, in, n_in, pre, post, &a.value, &a.value_src));

    a.mode = st->mode;
    a.rank = r;
    a.elsize = epabi_dtype_size(x->dtype);
    int64_t stride = 1, base = 0;
    for (int k = r - 1; k >= 0; --k) {
        /* output index o reads input index o - pre[k]: the view is what survives the negative pads, the leading
         * pad what precedes it (both clipped to the output) */
        const int64_t n = x->dims[k];
        const int64_t out = n + pre[k] + post[k];
        if (out < 0)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Pad: pads %lld, %lld leave axis %d of size %lld below zero",
                               (long long)pre[k], (long long)post[k], k, (long long)n);
        const int64_t start = pre[k] < 0 ? (-pre[k] < n ? -pre[k] : n) : 0;
        const int64_t end = post[k] < 0 ? (n + post[k] > start ? n + post[k] : start) : n;
        const int64_t lead = pre[k] > 0 ? (pre[k] < out ? pre[k] : out) : 0;
        const int64_t view = end - start < out - lead ? end - start : out - lead;
        const int64_t trail = out - lead - view;
        if (lead + trail > 0 && a.mode != PAD_CONSTANT) {
            if (view == 0)
                return epabi_error(api, ORT_INVALID_ARGUMENT, "Pad: %s mode cannot pad axis %d, which is empty",
                                   mode_name(a.mode), k);
            if (a.mode == PAD_REFLECT && (view < 2 || lead > view - 1 || trail > view - 1))
                return epabi_error(api, ORT_INVALID_ARGUMENT,
                                   "Pad: reflect mode pads axis %d of %lld elements by %lld and %lld; each must be "
                                   "less than the axis length, which must be at least 2",
                                   k, (long long)view, (long long)lead, (long long)trail);
        }
        a.in_dims[k] = view;
        a.in_strides[k] = stride;
        a.begin[k] = lead;
        a.out_dims[k] = out;
        base += start * stride;
        stride *= n;
    }
    OrtStatus* status = NULL;
    struct epabi_tensor* y = epabi_exec_output(ex, 0, x->dtype, r, a.out_dims, &status);
    if (y == NULL) return status;
    if (epabi_numel(r, a.out_dims) == 0) return NULL;
    const bool view_empty = epabi_numel(r, a.in_dims) == 0;
    a.src = view_empty ? x->data : (const unsigned char*)x->data + (size_t)base * a.elsize;
    a.dst = y->data;
    return epabi_padded_copy_launch(ex, &a);
}

/* CUDA: the padded copy moves whole elements of 1, 2, 4 or 8 bytes. */
const struct epabi_kernel epabi_kernels_pad[] = {
    {.op_type = "Pad", .since_min = 2, .since_max = 10, .supports = pad_supports, .init = pad_init,
     .release = pad_release, .run = pad_run, .launch = EPABI_LAUNCH_PAD, .host_step = true,
     .cuda = epabi_cuda_byte_data},
    {.op_type = "Pad", .since_min = 11, .since_max = 25, .supports = pad_supports, .init = pad_init,
     .release = pad_release, .run = pad_run, .launch = EPABI_LAUNCH_PAD, .host_inputs = 0xAu, .host_step = true,
     .cuda = epabi_cuda_byte_data},
    {.op_type = NULL},
};
