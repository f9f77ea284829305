/*
 * reshape.c - the ops that keep the bytes and change only the shape: Reshape (5-25), Squeeze (1-25),
 * Unsqueeze (1-25), Identity (1-25, tensors only), Flatten (1-25).
 *
 * The output is the input's bytes: a view of them where the plan allows one (kernel.h, epabi_exec_output_view: no
 * launch, no memory), else a fresh buffer and one memcpy launch (a fused output, the host's buffer). Elements are
 * opaque bytes, so every dtype with a whole-byte size (epabi_dtype_size() != 0) is exact. The shape-deciding
 * inputs (Reshape's shape, Squeeze/Unsqueeze axes from opset 13) are read in run(), as kernel.h allows, and
 * may be int32 or int64 even where ONNX only names int64.
 */
#include "cuda_coverage.h"
#include "kernel.h"
#include "math_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Reshape's allowzero, the axes attribute of Squeeze/Unsqueeze before opset 13, or Flatten's axis. */
struct reshape_state {
    bool allowzero;
    int n_axes;                      /* -1: no axes attribute */
    int64_t axes[EPABI_MAX_RANK];
    int64_t axis;
};

static void copy_chunk(void* ctx, int64_t begin, int64_t end) {
    const struct copy_args* a = ctx;
    memcpy((unsigned char*)a->dst + begin, (const unsigned char*)a->src + begin, (size_t)(end - begin));
}

/* Copies of more than a few hundred KiB spread over the pool (memory bandwidth grows with the cores that pull). */
static void copy_launch(const void* p) {
    const struct copy_args* a = p;
    epabi_pool_for_range(a->pool, (int64_t)a->bytes, 64 * (int64_t)EPABI_PARALLEL_MIN_ELEMS, copy_chunk, (void*)a);
}

static const struct epabi_tensor* optional_input(const struct epabi_tensor* const* in, int n_in, int i) {
    if (i >= n_in || in[i] == NULL || in[i]->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) return NULL;
    return in[i];
}

/* Reads a host-readable int32/int64 vector (or scalar, when allow_scalar) of at most cap values. */
static OrtStatus* read_ints(struct epabi_exec* ex, const char* what, const struct epabi_tensor* t, bool allow_scalar,
                            int64_t* out, size_t cap, size_t* n) {
    const struct epabi_api* api = epabi_exec_api(ex);
    if (!epabi_is_index_dtype(t->dtype))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "%s must be int32 or int64, got %s", what,
                           epabi_dtype_name(t->dtype));
    if (!(t->rank == 1 || (allow_scalar && t->rank == 0)))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "%s must be a 1-D tensor, got rank %d", what, t->rank);
    const int64_t count = epabi_numel(t->rank, t->dims);
    if (count > (int64_t)cap)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "%s has %lld values; at most %zu are supported", what,
                           (long long)count, cap);
    OrtStatus* status = NULL;
    const void* host = count > 0 ? epabi_exec_host_data(ex, t, &status) : NULL;
    if (status != NULL) return status;
    for (int64_t i = 0; i < count; ++i) out[i] = epabi_index_at(t->dtype, host, i);
    *n = (size_t)count;
    return NULL;
}

/* Every op here ends the same way: an output of the input's dtype and bytes under a new shape. */
static OrtStatus* emit_copy(struct epabi_exec* ex, const struct epabi_tensor* x, int rank, const int64_t* dims) {
    OrtStatus* status = NULL;
    bool view = false;
    struct epabi_tensor* y = epabi_exec_output_view(ex, 0, x, rank, dims, &view, &status);
    if (y == NULL) return status;
    if (view) return NULL;
    const struct copy_args a = {x->data, y->data, (size_t)epabi_numel(x->rank, x->dims) * epabi_dtype_size(x->dtype),
                                epabi_exec_pool(ex)};
    if (a.bytes == 0) return NULL;
    return epabi_exec_launch(ex, EPABI_LAUNCH_COPY, copy_launch, &a, sizeof a);
}

static void format_dims(char* buf, size_t cap, int rank, const int64_t* dims) {
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < rank && used < cap; ++i)
        used += (size_t)snprintf(buf + used, cap - used, i ? ",%lld" : "%lld", (long long)dims[i]);
    if (used < cap) snprintf(buf + used, cap - used, ")");
}

/* Checks shared by all four ops: a movable tensor in, a representable rank out. */
static bool data_supported(const struct epabi_node* node, const char* op, char* why, size_t why_len) {
    if (node->n_in < 1 || epabi_dtype_size(node->in[0].dtype) == 0) {
        snprintf(why, why_len, "%s: dtype %s is not supported (only tensors of whole-byte elements)", op,
                 epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    if (node->in[0].rank > EPABI_MAX_RANK || (node->n_out > 0 && node->out[0].rank > EPABI_MAX_RANK)) {
        snprintf(why, why_len, "%s: rank exceeds %d", op, EPABI_MAX_RANK);
        return false;
    }
    return true;
}

static void reshape_release(void* state) {
    free(state);
}

/* ---- Reshape ------------------------------------------------------------------------------------ */

static bool reshape_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (!data_supported(node, "Reshape", why, why_len)) return false;
    if (node->n_in < 2 || !epabi_is_index_dtype(node->in[1].dtype)) {
        snprintf(why, why_len, "Reshape: shape input must be int32 or int64, got %s",
                 epabi_dtype_name(node->n_in < 2 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED : node->in[1].dtype));
        return false;
    }
    return true;
}

static OrtStatus* reshape_init(const struct epabi_node* node, void** state) {
    struct reshape_state* st = calloc(1, sizeof *st);
    if (st == NULL) return epabi_error(node->api, ORT_FAIL, "Reshape: out of memory");
    int64_t allowzero = 0;
    /* allowzero exists from opset 14; older models mean "0 copies the input dim". */
    if (node->since_version >= 14 && epabi_attr_int(node, "allowzero", &allowzero)) st->allowzero = allowzero != 0;
    st->n_axes = -1;
    *state = st;
    return NULL;
}

/* Reshape's output dims for an input of shape rank/in_dims and the shape input's n values req (kernel.h, view_dims);
 * errors as reshape_run reports them. */
static OrtStatus* reshape_view_dims(const struct epabi_api* api, const void* state, int rank, const int64_t* in_dims,
                                    const int64_t* req, int n, int* out_rank, int64_t* dims) {
    const struct reshape_state* st = state;
    char req_s[160], in_s[160];
    format_dims(req_s, sizeof req_s, n, req);
    format_dims(in_s, sizeof in_s, rank, in_dims);
    int unknown = -1;
    bool has_zero = false;
    int64_t known = 1;               /* product of the dims other than the -1 */
    for (int i = 0; i < n; ++i) {
        int64_t d = req[i];
        if (d == 0 && !st->allowzero) {
            if (i >= rank)
                return epabi_error(api, ORT_INVALID_ARGUMENT,
                                   "Reshape: shape %s has 0 at index %d, but the input %s has no dim there", req_s,
                                   i, in_s);
            d = in_dims[i];
        } else if (d == -1) {
            if (unknown >= 0)
                return epabi_error(api, ORT_INVALID_ARGUMENT, "Reshape: shape %s has more than one -1", req_s);
            unknown = i;
            dims[i] = -1;
            continue;
        } else if (d < 0) {
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Reshape: shape %s has the invalid value %lld", req_s,
                               (long long)d);
        }
        if (d == 0) has_zero = true;
        if (d != 0 && known > INT64_MAX / d)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Reshape: shape %s is too large", req_s);
        known *= d;
        dims[i] = d;
    }
    if (st->allowzero && has_zero && unknown >= 0)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Reshape: shape %s has both 0 and -1 while allowzero=1",
                           req_s);
    const int64_t total = epabi_numel(rank, in_dims);
    if (unknown >= 0) {
        if (known == 0 || total % known != 0)
            return epabi_error(api, ORT_INVALID_ARGUMENT,
                               "Reshape: the input %s (%lld elements) cannot be reshaped to %s", in_s,
                               (long long)total, req_s);
        dims[unknown] = total / known;
    } else if (known != total) {
        return epabi_error(api, ORT_INVALID_ARGUMENT,
                           "Reshape: the input %s has %lld elements but the shape %s needs %lld", in_s,
                           (long long)total, req_s, (long long)known);
    }
    *out_rank = n;
    return NULL;
}

static OrtStatus* reshape_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                              int n_in, int n_out) {
    (void)n_out;
    const struct reshape_state* st = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    const struct epabi_tensor* x = in[0];
    const struct epabi_tensor* shape = optional_input(in, n_in, 1);
    if (shape == NULL) return epabi_error(api, ORT_INVALID_ARGUMENT, "Reshape: the shape input is missing");
    int64_t req[EPABI_MAX_RANK];
    size_t n = 0;
    EPABI_RETURN_IF_ERROR(read_ints(ex, "Reshape: shape", shape, false, req, EPABI_MAX_RANK, &n));

    int64_t dims[EPABI_MAX_RANK];
    EPABI_RETURN_IF_ERROR(reshape_view_dims(api, st, x->rank, x->dims, req, (int)n, &(int){0}, dims));
    return emit_copy(ex, x, (int)n, dims);
}

/* ---- Squeeze / Unsqueeze ------------------------------------------------------------------------ */

/* Before opset 13 the axes are an attribute; from 13 an optional (Squeeze) or required (Unsqueeze) input. */
static bool axes_supported(const struct epabi_node* node, const char* op, bool required, char* why, size_t why_len) {
    if (!data_supported(node, op, why, why_len)) return false;
    if (node->since_version < 13) {
        int64_t axes[EPABI_MAX_RANK];
        size_t n = 0;
        bool present = epabi_attr_ints(node, "axes", axes, EPABI_MAX_RANK, &n);
        if (required && !present) {
            snprintf(why, why_len, "%s: the axes attribute is missing", op);
            return false;
        }
        if (n > EPABI_MAX_RANK) {
            snprintf(why, why_len, "%s: %zu axes exceed rank %d", op, n, EPABI_MAX_RANK);
            return false;
        }
        return true;
    }
    const bool present = node->n_in >= 2 && node->in[1].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    if (required && !present) {
        snprintf(why, why_len, "%s: the axes input is missing", op);
        return false;
    }
    if (present && !epabi_is_index_dtype(node->in[1].dtype)) {
        snprintf(why, why_len, "%s: axes must be int32 or int64, got %s", op, epabi_dtype_name(node->in[1].dtype));
        return false;
    }
    return true;
}

static OrtStatus* axes_init(const struct epabi_node* node, void** state) {
    struct reshape_state* st = calloc(1, sizeof *st);
    if (st == NULL) return epabi_error(node->api, ORT_FAIL, "%s: out of memory", node->op_type);
    size_t n = 0;
    st->n_axes = -1;
    if (epabi_attr_ints(node, "axes", st->axes, EPABI_MAX_RANK, &n)) {
        if (n > EPABI_MAX_RANK) {
            free(st);
            return epabi_error(node->api, ORT_INVALID_ARGUMENT, "%s: %zu axes exceed rank %d", node->op_type, n,
                               EPABI_MAX_RANK);
        }
        st->n_axes = (int)n;
    }
    *state = st;
    return NULL;
}

/* The axes from the attribute (state) or the input; *n = -1 when neither gives any. */
static OrtStatus* get_axes(struct epabi_exec* ex, const char* op, const struct reshape_state* st,
                           const struct epabi_tensor* const* in, int n_in, int64_t* axes, int* n) {
    if (st != NULL) {
        *n = st->n_axes;
        if (st->n_axes > 0) memcpy(axes, st->axes, sizeof(int64_t) * (size_t)st->n_axes);
        return NULL;
    }
    const struct epabi_tensor* t = optional_input(in, n_in, 1);
    if (t == NULL) {
        *n = -1;
        return NULL;
    }
    char what[32];
    snprintf(what, sizeof what, "%s: axes", op);
    size_t count = 0;
    EPABI_RETURN_IF_ERROR(read_ints(ex, what, t, true, axes, EPABI_MAX_RANK, &count));
    *n = (int)count;
    return NULL;
}

static bool squeeze_supports(const struct epabi_node* node, char* why, size_t why_len) {
    return axes_supported(node, "Squeeze", false, why, why_len);
}

static OrtStatus* squeeze_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                              int n_in, int n_out) {
    (void)n_out;
    const struct epabi_api* api = epabi_exec_api(ex);
    const struct epabi_tensor* x = in[0];
    int64_t axes[EPABI_MAX_RANK];
    int n = 0;
    EPABI_RETURN_IF_ERROR(get_axes(ex, "Squeeze", state, in, n_in, axes, &n));
    bool drop[EPABI_MAX_RANK] = {false};
    if (n <= 0) {
        /* No axes, or an empty list: like ONNX Runtime's CPU kernel, drop every dim of size 1. */
        for (int k = 0; k < x->rank; ++k) drop[k] = x->dims[k] == 1;
    } else {
        for (int i = 0; i < n; ++i) {
            int k = 0;
            if (!epabi_norm_axis(axes[i], x->rank, &k))
                return epabi_error(api, ORT_INVALID_ARGUMENT, "Squeeze: axis %lld is out of range for rank %d",
                                   (long long)axes[i], x->rank);
            if (x->dims[k] != 1)
                return epabi_error(api, ORT_INVALID_ARGUMENT,
                                   "Squeeze: axis %lld has size %lld; only dims of size 1 can be squeezed",
                                   (long long)axes[i], (long long)x->dims[k]);
            drop[k] = true;      /* repeated axes are harmless, as in ONNX Runtime */
        }
    }
    int64_t dims[EPABI_MAX_RANK];
    int r = 0;
    for (int k = 0; k < x->rank; ++k)
        if (!drop[k]) dims[r++] = x->dims[k];
    return emit_copy(ex, x, r, dims);
}

static bool unsqueeze_supports(const struct epabi_node* node, char* why, size_t why_len) {
    return axes_supported(node, "Unsqueeze", true, why, why_len);
}

static OrtStatus* unsqueeze_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                                int n_in, int n_out) {
    (void)n_out;
    const struct epabi_api* api = epabi_exec_api(ex);
    const struct epabi_tensor* x = in[0];
    int64_t axes[EPABI_MAX_RANK];
    int n = 0;
    EPABI_RETURN_IF_ERROR(get_axes(ex, "Unsqueeze", state, in, n_in, axes, &n));
    if (n < 0) return epabi_error(api, ORT_INVALID_ARGUMENT, "Unsqueeze: axes are missing");
    const int r = x->rank + n;
    if (r > EPABI_MAX_RANK)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Unsqueeze: output rank %d exceeds %d", r, EPABI_MAX_RANK);
    bool ins[EPABI_MAX_RANK] = {false};
    for (int i = 0; i < n; ++i) {
        int k = 0;
        if (!epabi_norm_axis(axes[i], r, &k))
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Unsqueeze: axis %lld is out of range for output rank %d",
                               (long long)axes[i], r);
        if (ins[k])
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Unsqueeze: axis %lld is repeated", (long long)axes[i]);
        ins[k] = true;
    }
    int64_t dims[EPABI_MAX_RANK];
    int j = 0;
    for (int k = 0; k < r; ++k) dims[k] = ins[k] ? 1 : x->dims[j++];
    return emit_copy(ex, x, r, dims);
}

/* ---- Identity ----------------------------------------------------------------------------------- */

static bool identity_supports(const struct epabi_node* node, char* why, size_t why_len) {
    /* From opset 14 Identity also passes sequences and optionals; those reach us as UNDEFINED and are refused. */
    return data_supported(node, "Identity", why, why_len);
}

static OrtStatus* identity_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                               int n_in, int n_out) {
    (void)state;
    (void)n_in;
    (void)n_out;
    return emit_copy(ex, in[0], in[0]->rank, in[0]->dims);
}

/* ---- Flatten ------------------------------------------------------------------------------------ */

/* axis in [-rank, rank] (default 1); negative axes from opset 11. Dims before it multiply into the first output
 * dim, the rest into the second: a scalar becomes [1, 1]. */
static bool flatten_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (!data_supported(node, "Flatten", why, why_len)) return false;
    int64_t axis = 1;
    epabi_attr_int(node, "axis", &axis);
    const int r = node->in[0].rank;
    if (r >= 0 && (axis < -r || axis > r)) {
        snprintf(why, why_len, "Flatten: axis %lld is out of range for rank %d", (long long)axis, r);
        return false;
    }
    return true;
}

static OrtStatus* flatten_init(const struct epabi_node* node, void** state) {
    struct reshape_state* st = calloc(1, sizeof *st);
    if (st == NULL) return epabi_error(node->api, ORT_FAIL, "Flatten: out of memory");
    st->n_axes = -1;
    st->axis = 1;
    epabi_attr_int(node, "axis", &st->axis);
    *state = st;
    return NULL;
}

static OrtStatus* flatten_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                              int n_in, int n_out) {
    (void)n_in;
    (void)n_out;
    const struct reshape_state* st = state;
    const struct epabi_tensor* x = in[0];
    int64_t axis = st->axis;
    if (axis < -x->rank || axis > x->rank)
        return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT, "Flatten: axis %lld is out of range for rank %d",
                           (long long)axis, x->rank);
    if (axis < 0) axis += x->rank;
    int64_t dims[2] = {1, 1};
    for (int k = 0; k < x->rank; ++k) dims[k < axis ? 0 : 1] *= x->dims[k];
    return emit_copy(ex, x, 2, dims);
}

const struct epabi_kernel epabi_kernels_reshape[] = {
    /* Reshape-1 took the shape as an attribute; no model we target uses it. */
    {.op_type = "Reshape", .since_min = 5, .since_max = 25, .supports = reshape_supports, .init = reshape_init,
     .release = reshape_release, .run = reshape_run, .launch = EPABI_LAUNCH_COPY, .host_inputs = 1u << 1,
     .host_step = true, .views_input = true, .cuda = epabi_cuda_byte_data, .view_dims = reshape_view_dims},
    {.op_type = "Squeeze", .since_min = 1, .since_max = 12, .supports = squeeze_supports, .init = axes_init,
     .release = reshape_release, .run = squeeze_run, .launch = EPABI_LAUNCH_COPY, .host_inputs = 1u << 1,
     .host_step = true, .views_input = true, .cuda = epabi_cuda_byte_data},
    {.op_type = "Squeeze", .since_min = 13, .since_max = 25, .supports = squeeze_supports, .run = squeeze_run,
     .launch = EPABI_LAUNCH_COPY, .host_inputs = 1u << 1, .host_step = true, .views_input = true,
     .cuda = epabi_cuda_byte_data},
    {.op_type = "Unsqueeze", .since_min = 1, .since_max = 12, .supports = unsqueeze_supports, .init = axes_init,
     .release = reshape_release, .run = unsqueeze_run, .launch = EPABI_LAUNCH_COPY, .host_inputs = 1u << 1,
     .host_step = true, .views_input = true, .cuda = epabi_cuda_byte_data},
    {.op_type = "Unsqueeze", .since_min = 13, .since_max = 25, .supports = unsqueeze_supports,
     .run = unsqueeze_run, .launch = EPABI_LAUNCH_COPY, .host_inputs = 1u << 1,
     .host_step = true, .views_input = true, .cuda = epabi_cuda_byte_data},
    {.op_type = "Identity", .since_min = 1, .since_max = 25, .supports = identity_supports, .run = identity_run,
     .launch = EPABI_LAUNCH_COPY, .views_input = true, .cuda = epabi_cuda_byte_data},
    {.op_type = "Flatten", .since_min = 1, .since_max = 25, .supports = flatten_supports, .init = flatten_init,
     .release = reshape_release, .run = flatten_run, .launch = EPABI_LAUNCH_COPY, .host_step = true,
     .views_input = true, .cuda = epabi_cuda_byte_data},
    {.op_type = NULL},
};
