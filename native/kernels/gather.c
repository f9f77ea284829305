/*
 * gather.c - Gather (opsets 1-13) along any (possibly negative) axis with int32/int64 indices, negative
 * indices counting from the end.
 *
 * Output shape is data.shape[:axis] + indices.shape + data.shape[axis+1:]; each (outer, index) pair is one
 * contiguous block of the inner dims, so the copy is outer x n_indices memcpys.
 *
 * Out-of-range indices: indices are data, which run() may not read (kernel.h), and a launch cannot return
 * a status. So the launch checks every index and writes zeros for a bad one (what ONNX Runtime's CUDA kernel
 * does) instead of reading out of bounds; supports() refuses nodes whose *constant* indices are already out
 * of range, which leaves them to the CPU EP and its error.
 */
#include "cuda_coverage.h"
#include "kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gather_state {
    int64_t axis;
};


static bool gather_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in < 2 || epabi_dtype_size(node->in[0].dtype) == 0) {
        snprintf(why, why_len, "Gather: dtype %s is not supported", epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    const struct epabi_value_desc* data = &node->in[0];
    const struct epabi_value_desc* idx = &node->in[1];
    if (idx->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 && idx->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32) {
        snprintf(why, why_len, "Gather: indices must be int32 or int64, got %s", epabi_dtype_name(idx->dtype));
        return false;
    }
    if (data->rank > EPABI_MAX_RANK || idx->rank > EPABI_MAX_RANK ||
        (node->n_out > 0 && node->out[0].rank > EPABI_MAX_RANK)) {
        snprintf(why, why_len, "Gather: rank exceeds %d", EPABI_MAX_RANK);
        return false;
    }
    int64_t axis = 0;
    epabi_attr_int(node, "axis", &axis);
    int k = 0;
    if (data->rank >= 0 && !epabi_norm_axis(axis, data->rank, &k)) {
        snprintf(why, why_len, "Gather: axis %lld is out of range for rank %d", (long long)axis, data->rank);
        return false;
    }
    if (data->rank >= 0 && idx->const_data != NULL && data->dims[k] >= 0) {
        const int64_t d = data->dims[k];
        for (size_t i = 0; i < idx->const_count; ++i) {
            const int64_t v = epabi_index_at(idx->dtype, idx->const_data, (int64_t)i);
            if (v < -d || v >= d) {
                snprintf(why, why_len, "Gather: constant index %lld is out of range for axis dim %lld", (long long)v,
                         (long long)d);
                return false;
            }
        }
    }
    return true;
}

static OrtStatus* gather_init(const struct epabi_node* node, void** state) {
    struct gather_state* st = malloc(sizeof *st);
    if (st == NULL) return epabi_error(node->api, ORT_FAIL, "Gather: out of memory");
    st->axis = 0;
    epabi_attr_int(node, "axis", &st->axis);
    *state = st;
    return NULL;
}

static void gather_release(void* state) {
    free(state);
}

static void gather_launch(const void* p) {
    const struct gather_args* a = p;
    unsigned char* dst = a->dst;
    for (int64_t o = 0; o < a->outer; ++o) {
        for (int64_t i = 0; i < a->n_indices; ++i, dst += a->block_bytes) {
            int64_t v = a->indices64 ? ((const int64_t*)a->indices)[i] : ((const int32_t*)a->indices)[i];
            if (v < 0) v += a->axis_dim;
            if (v < 0 || v >= a->axis_dim) {
                memset(dst, 0, a->block_bytes);
                epabi_launch_report(a->err_word, a->err_site);
                continue;
            }
            memcpy(dst, a->src + (size_t)(o * a->axis_dim + v) * a->block_bytes, a->block_bytes);
        }
    }
}

static OrtStatus* gather_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                             int n_in, int n_out) {
    (void)n_out;
    const struct gather_state* st = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < 2) return epabi_error(api, ORT_INVALID_ARGUMENT, "Gather: the indices input is missing");
    const struct epabi_tensor* x = in[0];
    const struct epabi_tensor* idx = in[1];
    if (idx->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 && idx->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Gather: indices must be int32 or int64, got %s",
                           epabi_dtype_name(idx->dtype));
    int axis = 0;
    if (!epabi_norm_axis(st->axis, x->rank, &axis))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Gather: axis %lld is out of range for rank %d",
                           (long long)st->axis, x->rank);
    const int r = x->rank - 1 + idx->rank;
    if (r > EPABI_MAX_RANK)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Gather: output rank %d exceeds %d", r, EPABI_MAX_RANK);
    int64_t dims[EPABI_MAX_RANK];
    int j = 0;
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < axis; ++k) {
        dims[j++] = x->dims[k];
        outer *= x->dims[k];
    }
    for (int k = 0; k < idx->rank; ++k) dims[j++] = idx->dims[k];
    for (int k = axis + 1; k < x->rank; ++k) {
        dims[j++] = x->dims[k];
        inner *= x->dims[k];
    }
    /* Indices are validated here when the host can read them (the host stream, where earlier launches have
     * already run, also while capturing; constants and host-computed values on CUDA), so a bad index is an
     * error rather than silently zero-filled output. Indices only a device holds are not read back (no host
     * synchronization per Gather), and a replay runs no run() at all: there the launch bounds-checks, zero-fills
     * and reports the bad index through the stream's error word, which fails the run at its synchronize. */
    const int64_t n_indices = epabi_numel(idx->rank, idx->dims);
    const int64_t axis_dim = x->dims[axis];
    for (int64_t i = 0; idx->host != NULL && i < n_indices; ++i) {
        const int64_t v = epabi_index_at(idx->dtype, idx->host, i);
        if (v < -axis_dim || v >= axis_dim)
            return epabi_error(api, ORT_INVALID_ARGUMENT,
                               "Gather: index %lld at position %lld is out of range [-%lld, %lld) for axis %d",
                               (long long)v, (long long)i, (long long)axis_dim, (long long)axis_dim, axis);
    }
    OrtStatus* status = NULL;
    struct epabi_tensor* y = epabi_exec_output(ex, 0, x->dtype, r, dims, &status);
    if (y == NULL) return status;
    if (epabi_numel(r, dims) == 0) return NULL;
    const struct gather_args a = {
        .src = x->data,
        .indices = idx->data,
        .indices64 = idx->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64,
        .dst = y->data,
        .outer = outer,
        .n_indices = epabi_numel(idx->rank, idx->dims),
        .axis_dim = x->dims[axis],
        .block_bytes = (size_t)inner * epabi_dtype_size(x->dtype),
        .err_word = epabi_exec_error_word(ex),
        .err_site = epabi_exec_error_site(ex, EPABI_LAUNCH_ERR_INDEX),
    };
    return epabi_exec_launch(ex, EPABI_LAUNCH_GATHER, gather_launch, &a, sizeof a);
}

/* CUDA: byte copies of any whole-byte dtype, with int32 or int64 indices. */
static bool cuda_gather(const struct epabi_node* node, char* why, size_t why_len) {
    if (!epabi_cuda_byte_data(node, why, why_len)) return false;
    if (node->n_in > 1 && !epabi_is_index_dtype(node->in[1].dtype))
        return epabi_cuda_refuse(node, why, why_len, "indices", node->in[1].dtype);
    return true;
}

const struct epabi_kernel epabi_kernels_gather[] = {
    {.op_type = "Gather", .since_min = 1, .since_max = 13, .supports = gather_supports, .init = gather_init,
     .release = gather_release, .run = gather_run, .launch = EPABI_LAUNCH_GATHER, .host_step = true,
     .cuda = cuda_gather},
    {.op_type = NULL},
};
