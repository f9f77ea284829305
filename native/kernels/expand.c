/*
 * expand.c - Expand (opsets 8-13): numpy-style bidirectional broadcast of the input against a runtime shape.
 *
 * The output is a strided view of the input whose broadcast dims have stride 0, copied out row by row; an Expand
 * that repeats no element (the output has the input's element count: magika's BroadcastTo to the input's own shape)
 * hands out the input's bytes instead where the plan allows (kernel.h, epabi_exec_output_view).
 * Elements are opaque bytes, so every dtype with a whole-byte size (epabi_dtype_size() != 0) is exact. The
 * shape input is read in run(), as kernel.h allows; it may be int32 or int64.
 */
#include "cuda_coverage.h"
#include "kernel.h"
#include "strided_copy.h"

#include <stdio.h>
#include <string.h>

static bool expand_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in < 2 || epabi_dtype_size(node->in[0].dtype) == 0) {
        snprintf(why, why_len, "Expand: dtype %s is not supported", epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    if (!epabi_is_index_dtype(node->in[1].dtype)) {
        snprintf(why, why_len, "Expand: shape must be int32 or int64, got %s", epabi_dtype_name(node->in[1].dtype));
        return false;
    }
    if (node->in[0].rank > EPABI_MAX_RANK || (node->n_out > 0 && node->out[0].rank > EPABI_MAX_RANK)) {
        snprintf(why, why_len, "Expand: rank exceeds %d", EPABI_MAX_RANK);
        return false;
    }
    return true;
}

/* Expand's output dims for an input of shape rank/in_dims and the shape input's n values req (kernel.h, view_dims):
 * their broadcast; errors as expand_run reports them. */
static OrtStatus* expand_view_dims(const struct epabi_api* api, const void* state, int rank, const int64_t* in_dims,
                                   const int64_t* req, int n, int* out_rank, int64_t* out_dims) {
    (void)state;
    for (int i = 0; i < n; ++i)
        if (req[i] < 0)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Expand: shape[%d] = %lld is negative", i,
                               (long long)req[i]);
    if (!epabi_broadcast_shape(rank, in_dims, n, req, out_rank, out_dims)) {
        /* Name the first clash from the right, where numpy broadcasting aligns the shapes. */
        for (int i = 1; i <= rank && i <= n; ++i) {
            const int64_t dx = in_dims[rank - i], ds = req[n - i];
            if (dx != ds && dx != 1 && ds != 1)
                return epabi_error(api, ORT_INVALID_ARGUMENT,
                                   "Expand: input dim %d (%lld) cannot broadcast with shape[%d] = %lld",
                                   rank - i, (long long)dx, n - i, (long long)ds);
        }
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Expand: the input cannot broadcast to the shape");
    }
    return NULL;
}

static OrtStatus* expand_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                             int n_in, int n_out) {
    (void)state;
    (void)n_out;
    const struct epabi_api* api = epabi_exec_api(ex);
    const struct epabi_tensor* x = in[0];
    const struct epabi_tensor* shape = n_in >= 2 ? in[1] : NULL;
    if (shape == NULL || !epabi_is_index_dtype(shape->dtype))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Expand: shape must be an int32 or int64 tensor");
    if (shape->rank != 1)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Expand: shape must be 1-D, got rank %d", shape->rank);
    if (shape->dims[0] > EPABI_MAX_RANK)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Expand: shape has %lld values; rank %d is the maximum",
                           (long long)shape->dims[0], EPABI_MAX_RANK);
    const int n = (int)shape->dims[0];
    int64_t req[EPABI_MAX_RANK];
    OrtStatus* read_status = NULL;
    const void* host = n > 0 ? epabi_exec_host_data(ex, shape, &read_status) : NULL;
    if (read_status != NULL) return read_status;
    for (int i = 0; i < n; ++i) {
        req[i] = epabi_index_at(shape->dtype, host, i);
        if (req[i] < 0)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Expand: shape[%d] = %lld is negative", i,
                               (long long)req[i]);
    }
    struct epabi_strided_copy a = {0};
    EPABI_RETURN_IF_ERROR(expand_view_dims(api, NULL, x->rank, x->dims, req, n, &a.rank, a.dims));

    /* Right-align the input under the output; a size-1 input dim repeats, so it reads with stride 0. */
    int64_t s = 1;
    for (int k = a.rank - 1; k >= 0; --k) {
        const int xk = k - (a.rank - x->rank);
        if (xk < 0 || x->dims[xk] == 1) {
            a.strides[k] = 0;
        } else {
            a.strides[k] = s;
        }
        if (xk >= 0) s *= x->dims[xk];
    }
    a.elsize = epabi_dtype_size(x->dtype);
    OrtStatus* status = NULL;
    bool view = false;
    struct epabi_tensor* y = epabi_numel(a.rank, a.dims) == epabi_numel(x->rank, x->dims)
                                 ? epabi_exec_output_view(ex, 0, x, a.rank, a.dims, &view, &status)
                                 : epabi_exec_output(ex, 0, x->dtype, a.rank, a.dims, &status);
    if (y == NULL) return status;
    if (view) return NULL;
    if (epabi_numel(a.rank, a.dims) == 0) return NULL;
    a.src = x->data;
    a.dst = y->data;
    return epabi_strided_copy_launch(ex, &a);
}

const struct epabi_kernel epabi_kernels_expand[] = {
    {.op_type = "Expand", .since_min = 8, .since_max = 13, .supports = expand_supports, .run = expand_run,
     .launch = EPABI_LAUNCH_STRIDED_COPY, .host_inputs = 1u << 1, .host_step = true, .views_input = true,
     .view_dims = expand_view_dims,
     .cuda = epabi_cuda_byte_data},
    {.op_type = NULL},
};
