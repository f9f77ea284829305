/*
 * slice.c - Slice: opset 1-9 (starts/ends/axes attributes) and opsets 10-13 (starts/ends/axes/steps inputs,
 * negative steps), with the clamping rules of the ONNX spec.
 *
 * A slice is a strided view of the input (steps may be negative), copied out row by row; one that keeps the whole
 * input in order (every axis its full extent at step 1, as exporters write "x[:, 0:INT_MAX]") hands out the input's
 * bytes instead where the plan allows (kernel.h, epabi_exec_output_view). Elements are opaque
 * bytes, so every dtype with a whole-byte size (epabi_dtype_size() != 0) is exact. The starts/ends/axes/steps
 * inputs are read in run(), as kernel.h allows; each may be int32 or int64.
 */
#include "cuda_coverage.h"
#include "kernel.h"
#include "strided_copy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Slice-1 attributes. */
struct slice_state {
    int n;
    bool has_axes;
    int64_t starts[EPABI_MAX_RANK], ends[EPABI_MAX_RANK], axes[EPABI_MAX_RANK];
};

/* The slice parameters in one place, whichever opset they came from. */
struct slice_params {
    size_t n;
    int64_t starts[EPABI_MAX_RANK], ends[EPABI_MAX_RANK], axes[EPABI_MAX_RANK], steps[EPABI_MAX_RANK];
};

static bool present(const struct epabi_node* node, int i) {
    return i < node->n_in && node->in[i].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

static bool data_supported(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in < 1 || epabi_dtype_size(node->in[0].dtype) == 0) {
        snprintf(why, why_len, "Slice: dtype %s is not supported", epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    if (node->in[0].rank > EPABI_MAX_RANK) {
        snprintf(why, why_len, "Slice: rank %d exceeds %d", node->in[0].rank, EPABI_MAX_RANK);
        return false;
    }
    return true;
}

/* ---- Slice-1: attributes ------------------------------------------------------------------------ */

/* Reads and checks the attributes; the message goes to why (supports) or into a status (init). */
static bool read_attrs(const struct epabi_node* node, struct slice_state* st, char* why, size_t why_len) {
    size_t ns = 0, ne = 0, na = 0;
    if (!epabi_attr_ints(node, "starts", st->starts, EPABI_MAX_RANK, &ns) ||
        !epabi_attr_ints(node, "ends", st->ends, EPABI_MAX_RANK, &ne)) {
        snprintf(why, why_len, "Slice: the starts or ends attribute is missing");
        return false;
    }
    st->has_axes = epabi_attr_ints(node, "axes", st->axes, EPABI_MAX_RANK, &na);
    if (ns != ne || (st->has_axes && na != ns)) {
        snprintf(why, why_len, "Slice: starts (%zu), ends (%zu) and axes (%zu) differ in length", ns, ne, na);
        return false;
    }
    if (ns > EPABI_MAX_RANK) {
        snprintf(why, why_len, "Slice: %zu sliced axes exceed rank %d", ns, EPABI_MAX_RANK);
        return false;
    }
    st->n = (int)ns;
    return true;
}

static bool slice1_supports(const struct epabi_node* node, char* why, size_t why_len) {
    struct slice_state st;
    return data_supported(node, why, why_len) && read_attrs(node, &st, why, why_len);
}

static OrtStatus* slice1_init(const struct epabi_node* node, void** state) {
    struct slice_state* st = calloc(1, sizeof *st);
    if (st == NULL) return epabi_error(node->api, ORT_FAIL, "Slice: out of memory");
    char why[128];
    if (!read_attrs(node, st, why, sizeof why)) {
        free(st);
        return epabi_error(node->api, ORT_INVALID_ARGUMENT, "%s", why);
    }
    *state = st;
    return NULL;
}

static void slice1_release(void* state) {
    free(state);
}

/* ---- Slice-10+: inputs --------------------------------------------------------------------------- */

static bool slice10_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (!data_supported(node, why, why_len)) return false;
    static const char* const names[] = {"data", "starts", "ends", "axes", "steps"};
    for (int i = 1; i < 5; ++i) {
        if (i <= 2 && !present(node, i)) {
            snprintf(why, why_len, "Slice: the %s input is missing", names[i]);
            return false;
        }
        if (present(node, i) && !epabi_is_index_dtype(node->in[i].dtype)) {
            snprintf(why, why_len, "Slice: %s must be int32 or int64, got %s", names[i],
                     epabi_dtype_name(node->in[i].dtype));
            return false;
        }
    }
    return true;
}

/* Reads one host-readable 1-D int32/int64 parameter input of at most EPABI_MAX_RANK values. */
static OrtStatus* read_ints(struct epabi_exec* ex, const char* what, const struct epabi_tensor* t, int64_t* out,
                            size_t* n) {
    const struct epabi_api* api = epabi_exec_api(ex);
    if (!epabi_is_index_dtype(t->dtype))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Slice: %s must be int32 or int64, got %s", what,
                           epabi_dtype_name(t->dtype));
    if (t->rank != 1)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Slice: %s must be 1-D, got rank %d", what, t->rank);
    if (t->dims[0] > EPABI_MAX_RANK)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Slice: %s has %lld values; at most %d are supported", what,
                           (long long)t->dims[0], EPABI_MAX_RANK);
    OrtStatus* status = NULL;
    const void* host = t->dims[0] > 0 ? epabi_exec_host_data(ex, t, &status) : NULL;
    if (status != NULL) return status;
    for (int64_t i = 0; i < t->dims[0]; ++i) out[i] = epabi_index_at(t->dtype, host, i);
    *n = (size_t)t->dims[0];
    return NULL;
}

static const struct epabi_tensor* optional_input(const struct epabi_tensor* const* in, int n_in, int i) {
    if (i >= n_in || in[i] == NULL || in[i]->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) return NULL;
    return in[i];
}

static OrtStatus* params_from_inputs(struct epabi_exec* ex, const struct epabi_tensor* const* in, int n_in,
                                     struct slice_params* p) {
    const struct epabi_api* api = epabi_exec_api(ex);
    const struct epabi_tensor* starts = optional_input(in, n_in, 1);
    const struct epabi_tensor* ends = optional_input(in, n_in, 2);
    const struct epabi_tensor* axes = optional_input(in, n_in, 3);
    const struct epabi_tensor* steps = optional_input(in, n_in, 4);
    if (starts == NULL || ends == NULL)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Slice: the starts and ends inputs are required");
    size_t ne = 0, na = 0, nst = 0;
    EPABI_RETURN_IF_ERROR(read_ints(ex, "starts", starts, p->starts, &p->n));
    EPABI_RETURN_IF_ERROR(read_ints(ex, "ends", ends, p->ends, &ne));
    if (ne != p->n)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Slice: starts has %zu values but ends has %zu", p->n, ne);
    if (axes != NULL) {
        EPABI_RETURN_IF_ERROR(read_ints(ex, "axes", axes, p->axes, &na));
        if (na != p->n)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Slice: starts has %zu values but axes has %zu", p->n, na);
    } else {
        for (size_t i = 0; i < p->n; ++i) p->axes[i] = (int64_t)i;
    }
    if (steps != NULL) {
        EPABI_RETURN_IF_ERROR(read_ints(ex, "steps", steps, p->steps, &nst));
        if (nst != p->n)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Slice: starts has %zu values but steps has %zu", p->n,
                               nst);
    } else {
        for (size_t i = 0; i < p->n; ++i) p->steps[i] = 1;
    }
    return NULL;
}

/* ---- the copy ------------------------------------------------------------------------------------ */

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

/* Number of elements in start, start+step, ... before end; step != 0. Unsigned math keeps a step of
 * INT64_MIN well-defined. */
static int64_t span_count(int64_t start, int64_t end, int64_t step) {
    if (step > 0) return end > start ? (int64_t)(1 + (uint64_t)(end - start - 1) / (uint64_t)step) : 0;
    return start > end ? (int64_t)(1 + (uint64_t)(start - end - 1) / ((uint64_t)0 - (uint64_t)step)) : 0;
}

static OrtStatus* slice_apply(struct epabi_exec* ex, const struct epabi_tensor* x, const struct slice_params* p) {
    const struct epabi_api* api = epabi_exec_api(ex);
    const int r = x->rank;
    int64_t in_strides[EPABI_MAX_RANK];
    int64_t s = 1;
    for (int k = r - 1; k >= 0; --k) {
        in_strides[k] = s;
        s *= x->dims[k];
    }
    struct epabi_strided_copy a = {0};
    a.rank = r;
    a.elsize = epabi_dtype_size(x->dtype);
    for (int k = 0; k < r; ++k) {
        a.dims[k] = x->dims[k];
        a.strides[k] = in_strides[k];
    }
    bool seen[EPABI_MAX_RANK] = {false};
    int64_t base = 0;
    for (size_t i = 0; i < p->n; ++i) {
        int k = 0;
        if (!epabi_norm_axis(p->axes[i], r, &k))
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Slice: axis %lld is out of range for rank %d",
                               (long long)p->axes[i], r);
        if (seen[k])
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Slice: axis %lld is repeated", (long long)p->axes[i]);
        seen[k] = true;
        const int64_t step = p->steps[i];
        if (step == 0) return epabi_error(api, ORT_INVALID_ARGUMENT, "Slice: steps[%zu] is 0", i);
        const int64_t d = x->dims[k];
        int64_t start = p->starts[i], end = p->ends[i];
        if (start < 0) start += d;      /* cannot overflow: d >= 0 */
        if (end < 0) end += d;
        /* ONNX Runtime (CPU and CUDA alike) reads an end of INT32_MAX or INT64_MAX as numpy's "None", which
         * with a negative step runs through index 0; the spec's clamp would give an empty slice. Models are
         * validated against ONNX Runtime, so we follow it. */
        if (step < 0 && (p->ends[i] == INT32_MAX || p->ends[i] == INT64_MAX)) end = -1;
        int64_t n = 0;
        if (d == 0) {
            start = 0;
        } else if (step > 0) {
            start = clamp(start, 0, d);
            end = clamp(end, 0, d);
            n = span_count(start, end, step);
        } else {
            start = clamp(start, 0, d - 1);
            end = clamp(end, -1, d - 1);
            n = span_count(start, end, step);
        }
        a.dims[k] = n;
        /* With one element or none the step is never taken; zero keeps a huge step from overflowing. */
        a.strides[k] = n > 1 ? step * in_strides[k] : 0;
        if (n > 0) base += start * in_strides[k];
    }
    bool whole = base == 0;   /* every element where it was: an extent of one may have any step */
    for (int k = 0; k < r && whole; ++k)
        whole = a.dims[k] == x->dims[k] && (a.dims[k] <= 1 || a.strides[k] == in_strides[k]);
    OrtStatus* status = NULL;
    bool view = false;
    struct epabi_tensor* y = whole ? epabi_exec_output_view(ex, 0, x, r, a.dims, &view, &status)
                                   : epabi_exec_output(ex, 0, x->dtype, r, a.dims, &status);
    if (y == NULL) return status;
    if (view) return NULL;
    if (epabi_numel(r, a.dims) == 0) return NULL;
    a.src = (const unsigned char*)x->data + (size_t)base * a.elsize;
    a.dst = y->data;
    return epabi_strided_copy_launch(ex, &a);
}

static OrtStatus* slice1_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                             int n_in, int n_out) {
    (void)n_in;
    (void)n_out;
    const struct slice_state* st = state;
    struct slice_params p = {0};
    p.n = (size_t)st->n;
    for (int i = 0; i < st->n; ++i) {
        p.starts[i] = st->starts[i];
        p.ends[i] = st->ends[i];
        p.axes[i] = st->has_axes ? st->axes[i] : i;
        p.steps[i] = 1;
    }
    return slice_apply(ex, in[0], &p);
}

static OrtStatus* slice10_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                              int n_in, int n_out) {
    (void)state;
    (void)n_out;
    struct slice_params p = {0};
    EPABI_RETURN_IF_ERROR(params_from_inputs(ex, in, n_in, &p));
    return slice_apply(ex, in[0], &p);
}

const struct epabi_kernel epabi_kernels_slice[] = {
    {.op_type = "Slice", .since_min = 1, .since_max = 9, .supports = slice1_supports, .init = slice1_init,
     .release = slice1_release, .run = slice1_run, .launch = EPABI_LAUNCH_STRIDED_COPY, .host_inputs = 0x1eu,
     .host_step = true, .views_input = true, .cuda = epabi_cuda_byte_data},
    {.op_type = "Slice", .since_min = 10, .since_max = 13, .supports = slice10_supports, .run = slice10_run,
     .launch = EPABI_LAUNCH_STRIDED_COPY, .host_inputs = 0x1eu, .host_step = true, .views_input = true,
     .cuda = epabi_cuda_byte_data},
    {.op_type = NULL},
};
