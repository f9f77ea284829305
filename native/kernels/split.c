/*
 * split.c - Split (opsets 2-18) of one input into n outputs along one (possibly negative) axis.
 *
 * The sizes come from the split attribute (opsets 2-12), the optional int32/int64 split input (13-18; an empty
 * one counts as absent, as in ORT's CPU EP), the num_outputs attribute (18: ceil(dim / n) each, the last one what
 * remains, an error when that would be negative) or, failing all of those, an equal split that must divide the
 * dim. Each output is a strided view of the input, copied out with the shared strided copy. Elements are opaque
 * bytes, so every dtype with a whole-byte size is exact. The split input is read in run(), as kernel.h allows.
 */
#include "cuda_coverage.h"
#include "kernel.h"
#include "strided_copy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct split_state {
    int64_t axis;
    int n_split;                          /* split attribute values; -1: none */
    int64_t split[EPABI_MAX_NODE_IO];
    int64_t num_outputs;                  /* opset 18's attribute; 0: none */
};

static bool present(const struct epabi_node* node, int i) {
    return i < node->n_in && node->in[i].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

/* Reads the attributes; the reason goes to why. */
static bool read_attrs(const struct epabi_node* node, struct split_state* st, char* why, size_t why_len) {
    st->axis = 0;
    epabi_attr_int(node, "axis", &st->axis);
    st->n_split = -1;
    size_t n = 0;
    if (node->since_version < 13 && epabi_attr_ints(node, "split", st->split, EPABI_MAX_NODE_IO, &n)) {
        if (n > EPABI_MAX_NODE_IO) {
            snprintf(why, why_len, "Split: %zu split values; at most %d outputs are supported", n, EPABI_MAX_NODE_IO);
            return false;
        }
        st->n_split = n > 0 ? (int)n : -1;
    }
    st->num_outputs = 0;
    if (node->since_version >= 18 && epabi_attr_int(node, "num_outputs", &st->num_outputs) &&
        st->num_outputs != node->n_out) {
        /* ORT's CPU EP fails shape inference or aborts on such a node; it is not ours to run */
        snprintf(why, why_len, "Split: num_outputs %lld differs from the node's %d outputs",
                 (long long)st->num_outputs, node->n_out);
        return false;
    }
    return true;
}

static bool split_supports(const struct epabi_node* node, char* why, size_t why_len) {
    const struct epabi_value_desc* x = &node->in[0];
    if (node->n_in < 1 || epabi_dtype_size(x->dtype) == 0) {
        snprintf(why, why_len, "Split: dtype %s is not supported", epabi_dtype_name(x->dtype));
        return false;
    }
    if (x->rank > EPABI_MAX_RANK || node->n_out < 1) {
        snprintf(why, why_len, "Split: rank %d or %d outputs not supported", x->rank, node->n_out);
        return false;
    }
    struct split_state st;
    if (!read_attrs(node, &st, why, why_len)) return false;
    int k = 0;
    if (x->rank >= 0 && !epabi_norm_axis(st.axis, x->rank, &k)) {
        snprintf(why, why_len, "Split: axis %lld is out of range for rank %d", (long long)st.axis, x->rank);
        return false;
    }
    if (st.n_split >= 0 && st.n_split != node->n_out) {
        snprintf(why, why_len, "Split: %d split values for %d outputs", st.n_split, node->n_out);
        return false;
    }
    if (present(node, 1)) {
        if (!epabi_is_index_dtype(node->in[1].dtype)) {
            snprintf(why, why_len, "Split: split must be int32 or int64, got %s", epabi_dtype_name(node->in[1].dtype));
            return false;
        }
        if (st.num_outputs > 0) {
            snprintf(why, why_len, "Split: both the split input and num_outputs are given");
            return false;
        }
    }
    return true;
}

static OrtStatus* split_init(const struct epabi_node* node, void** state) {
    struct split_state* st = calloc(1, sizeof *st);
    if (st == NULL) return epabi_error(node->api, ORT_FAIL, "Split: out of memory");
    char why[128];
    if (!read_attrs(node, st, why, sizeof why)) {
        free(st);
        return epabi_error(node->api, ORT_INVALID_ARGUMENT, "%s", why);
    }
    *state = st;
    return NULL;
}

static void split_release(void* state) {
    free(state);
}

/* The split input's values when it is given and not empty (*n = count), else *n = 0. */
static OrtStatus* read_split_input(struct epabi_exec* ex, const struct epabi_tensor* t, int64_t* out, int* n) {
    const struct epabi_api* api = epabi_exec_api(ex);
    *n = 0;
    if (t == NULL || t->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) return NULL;
    if (!epabi_is_index_dtype(t->dtype) || t->rank > 1)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Split: split must be a 1-D int32 or int64 tensor");
    const int64_t count = epabi_numel(t->rank, t->dims);
    if (count > EPABI_MAX_NODE_IO)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Split: %lld split values; at most %d outputs are supported",
                           (long long)count, EPABI_MAX_NODE_IO);
    if (count == 0) return NULL;
    OrtStatus* status = NULL;
    const void* host = epabi_exec_host_data(ex, t, &status);
    if (status != NULL) return status;
    for (int64_t i = 0; i < count; ++i) out[i] = epabi_index_at(t->dtype, host, i);
    *n = (int)count;
    return NULL;
}

/* The size of every output along the axis, checked against the dim d. */
static OrtStatus* split_sizes(struct epabi_exec* ex, const struct split_state* st, const struct epabi_tensor* sp,
                              int n_out, int64_t d, int64_t* sizes) {
    const struct epabi_api* api = epabi_exec_api(ex);
    int n = 0;
    EPABI_RETURN_IF_ERROR(read_split_input(ex, sp, sizes, &n));
    if (n == 0 && st->n_split > 0) {
        n = st->n_split;
        memcpy(sizes, st->split, sizeof(int64_t) * (size_t)n);
    }
    if (n > 0) {
        if (n != n_out)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Split: %d split values for %d outputs", n, n_out);
        int64_t sum = 0;
        for (int i = 0; i < n; ++i) {
            if (sizes[i] < 0 || sizes[i] > d - sum)
                return epabi_error(api, ORT_INVALID_ARGUMENT,
                                   "Split: split values must be >= 0 and sum to the axis dim %lld", (long long)d);
            sum += sizes[i];
        }
        if (sum != d)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Split: split values sum to %lld, the axis dim is %lld",
                               (long long)sum, (long long)d);
        return NULL;
    }
    if (st->num_outputs > 0) {
        const int64_t chunk = (d + n_out - 1) / n_out;
        const int64_t last = d - chunk * (n_out - 1);
        if (last < 0)
            return epabi_error(api, ORT_INVALID_ARGUMENT,
                               "Split: num_outputs %d would give a negative last split of an axis of %lld", n_out,
                               (long long)d);
        for (int i = 0; i < n_out; ++i) sizes[i] = i + 1 < n_out ? chunk : last;
        return NULL;
    }
    if (d % n_out != 0)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Split: an axis of %lld cannot be split evenly into %d outputs",
                           (long long)d, n_out);
    for (int i = 0; i < n_out; ++i) sizes[i] = d / n_out;
    return NULL;
}

static OrtStatus* split_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                            int n_out) {
    const struct split_state* st = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    const struct epabi_tensor* x = in[0];
    if (n_out < 1 || n_out > EPABI_MAX_NODE_IO)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Split: %d outputs; 1 to %d are supported", n_out,
                           EPABI_MAX_NODE_IO);
    int axis = 0;
    if (!epabi_norm_axis(st->axis, x->rank, &axis))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Split: axis %lld is out of range for rank %d",
                           (long long)st->axis, x->rank);
    int64_t sizes[EPABI_MAX_NODE_IO];
    EPABI_RETURN_IF_ERROR(split_sizes(ex, st, n_in > 1 ? in[1] : NULL, n_out, x->dims[axis], sizes));

    int64_t strides[EPABI_MAX_RANK];
    int64_t s = 1;
    for (int k = x->rank - 1; k >= 0; --k) {
        strides[k] = s;
        s *= x->dims[k];
    }
    const size_t elsize = epabi_dtype_size(x->dtype);
    int64_t offset = 0;   /* along the axis */
    for (int i = 0; i < n_out; ++i) {
        struct epabi_strided_copy a = {0};
        a.rank = x->rank;
        a.elsize = elsize;
        for (int k = 0; k < x->rank; ++k) {
            a.dims[k] = k == axis ? sizes[i] : x->dims[k];
            a.strides[k] = strides[k];
        }
        OrtStatus* status = NULL;
        struct epabi_tensor* y = epabi_exec_output(ex, i, x->dtype, x->rank, a.dims, &status);
        if (y == NULL) return status;
        if (epabi_numel(a.rank, a.dims) > 0) {
            a.src = (const unsigned char*)x->data + (size_t)(offset * strides[axis]) * elsize;
            a.dst = y->data;
            EPABI_RETURN_IF_ERROR(epabi_strided_copy_launch(ex, &a));
        }
        offset += sizes[i];
    }
    return NULL;
}

const struct epabi_kernel epabi_kernels_split[] = {
    {.op_type = "Split", .since_min = 2, .since_max = 12, .supports = split_supports, .init = split_init,
     .release = split_release, .run = split_run, .launch = EPABI_LAUNCH_STRIDED_COPY, .host_step = true,
     .cuda = epabi_cuda_byte_data},
    {.op_type = "Split", .since_min = 13, .since_max = 18, .supports = split_supports, .init = split_init,
     .release = split_release, .run = split_run, .launch = EPABI_LAUNCH_STRIDED_COPY, .host_inputs = 1u << 1,
     .host_step = true, .cuda = epabi_cuda_byte_data},
    {.op_type = NULL},
};
