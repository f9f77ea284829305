/*
 * tile.c - Tile (opsets 6-13): the input repeated repeats[k] times along each axis k, on every dtype with a
 * whole-byte size. repeats is a 1-D int32/int64 input of one non-negative value per axis, read in run() as kernel.h
 * allows; a scalar takes an empty repeats and is copied. The copy is padded_copy.c's in wrap mode: an output index
 * reads the input at the index modulo the axis length.
 */
#include "cuda_coverage.h"
#include "kernel.h"
#include "padded_copy.h"

#include <stdio.h>

static bool tile_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in < 2 || epabi_dtype_size(node->in[0].dtype) == 0) {
        snprintf(why, why_len, "Tile: dtype %s is not supported", epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    if (!epabi_is_index_dtype(node->in[1].dtype)) {
        snprintf(why, why_len, "Tile: repeats must be int32 or int64, got %s", epabi_dtype_name(node->in[1].dtype));
        return false;
    }
    if (node->in[0].rank > EPABI_MAX_RANK) {
        snprintf(why, why_len, "Tile: rank %d exceeds %d", node->in[0].rank, EPABI_MAX_RANK);
        return false;
    }
    return true;
}

static OrtStatus* tile_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                           int n_out) {
    (void)state;
    (void)n_out;
    const struct epabi_api* api = epabi_exec_api(ex);
    const struct epabi_tensor* x = in[0];
    const struct epabi_tensor* rep = n_in > 1 ? in[1] : NULL;
    if (rep == NULL || !epabi_is_index_dtype(rep->dtype) || rep->rank != 1)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Tile: repeats must be a 1-D int32 or int64 tensor");
    if (rep->dims[0] != x->rank)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Tile: repeats has %lld values for an input of rank %d",
                           (long long)rep->dims[0], x->rank);
    OrtStatus* status = NULL;
    const void* host = x->rank > 0 ? epabi_exec_host_data(ex, rep, &status) : NULL;
    if (status != NULL) return status;
    struct pad_args a = {0};
    a.mode = PAD_WRAP;
    a.elsize = epabi_dtype_size(x->dtype);
    a.rank = x->rank;
    int64_t stride = 1;
    for (int k = x->rank - 1; k >= 0; --k) {
        const int64_t r = epabi_index_at(rep->dtype, host, k);
        if (r < 0)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Tile: repeats[%d] = %lld is negative", k, (long long)r);
        if (r > 0 && x->dims[k] > INT64_MAX / r)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Tile: the output is too large");
        a.in_dims[k] = x->dims[k];
        a.out_dims[k] = x->dims[k] * r;
        a.in_strides[k] = stride;
        stride *= x->dims[k];
    }
    struct epabi_tensor* y = epabi_exec_output(ex, 0, x->dtype, x->rank, a.out_dims, &status);
    if (y == NULL) return status;
    if (epabi_numel(x->rank, a.out_dims) == 0) return NULL;
    if (a.rank == 0) {   /* a scalar: one element */
        a.rank = 1;
        a.in_dims[0] = a.out_dims[0] = a.in_strides[0] = 1;
    }
    a.src = x->data;
    a.dst = y->data;
    return epabi_padded_copy_launch(ex, &a);
}

const struct epabi_kernel epabi_kernels_tile[] = {
    {.op_type = "Tile", .since_min = 6, .since_max = 13, .supports = tile_supports, .run = tile_run,
     .launch = EPABI_LAUNCH_PAD, .host_inputs = 1u << 1, .host_step = true, .cuda = epabi_cuda_byte_data},
    {.op_type = NULL},
};
