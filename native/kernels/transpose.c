/*
 * transpose.c - Transpose (opsets 1-25): a pure data movement, done as one strided copy.
 *
 * The element type never matters here: elements are moved as opaque bytes, so every dtype with a whole-byte
 * size (epabi_dtype_size() != 0) is exact.
 */
#include "cuda_coverage.h"
#include "kernel.h"
#include "strided_copy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct transpose_state {
    int n_perm;                      /* -1: no perm attribute, reverse the axes at run time */
    int64_t perm[EPABI_MAX_RANK];
};

/* A contiguous output filled from a strided view of the input. Strides are in elements. */
static bool is_permutation(const int64_t* perm, size_t n) {
    bool seen[EPABI_MAX_RANK] = {false};
    for (size_t i = 0; i < n; ++i) {
        /* ONNX shape inference rejects negative perm values, so we do too rather than wrap them. */
        if (perm[i] < 0 || perm[i] >= (int64_t)n || seen[perm[i]]) return false;
        seen[perm[i]] = true;
    }
    return true;
}

static bool transpose_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in < 1 || epabi_dtype_size(node->in[0].dtype) == 0) {
        snprintf(why, why_len, "Transpose: dtype %s is not supported", epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    if (node->in[0].rank > EPABI_MAX_RANK) {
        snprintf(why, why_len, "Transpose: rank %d exceeds %d", node->in[0].rank, EPABI_MAX_RANK);
        return false;
    }
    int64_t perm[EPABI_MAX_RANK];
    size_t n = 0;
    if (epabi_attr_ints(node, "perm", perm, EPABI_MAX_RANK, &n)) {
        if (n > EPABI_MAX_RANK || !is_permutation(perm, n)) {
            snprintf(why, why_len, "Transpose: perm (%zu values) is not a permutation of 0..%zu", n,
                     n > 0 ? n - 1 : 0);
            return false;
        }
        if (node->in[0].rank >= 0 && (size_t)node->in[0].rank != n) {
            snprintf(why, why_len, "Transpose: perm has %zu values but the input has rank %d", n, node->in[0].rank);
            return false;
        }
    }
    return true;
}

static OrtStatus* transpose_init(const struct epabi_node* node, void** state) {
    struct transpose_state* st = calloc(1, sizeof *st);
    if (st == NULL) return epabi_error(node->api, ORT_FAIL, "Transpose: out of memory");
    size_t n = 0;
    if (epabi_attr_ints(node, "perm", st->perm, EPABI_MAX_RANK, &n)) {
        if (n > EPABI_MAX_RANK || !is_permutation(st->perm, n)) {
            free(st);
            return epabi_error(node->api, ORT_INVALID_ARGUMENT, "Transpose: perm is not a permutation");
        }
        st->n_perm = (int)n;
    } else {
        st->n_perm = -1;
    }
    *state = st;
    return NULL;
}

static void transpose_release(void* state) {
    free(state);
}

static OrtStatus* transpose_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                                int n_in, int n_out) {
    (void)n_in;
    (void)n_out;
    const struct transpose_state* st = state;
    const struct epabi_tensor* x = in[0];
    const int r = x->rank;
    int64_t perm[EPABI_MAX_RANK];
    if (st->n_perm < 0) {
        for (int i = 0; i < r; ++i) perm[i] = r - 1 - i;
    } else if (st->n_perm != r) {
        return epabi_error(epabi_exec_api(ex), ORT_INVALID_ARGUMENT,
                           "Transpose: perm has %d values but the input has rank %d", st->n_perm, r);
    } else {
        memcpy(perm, st->perm, sizeof(int64_t) * (size_t)r);
    }

    int64_t in_strides[EPABI_MAX_RANK];
    int64_t s = 1;
    for (int k = r - 1; k >= 0; --k) {
        in_strides[k] = s;
        s *= x->dims[k];
    }
    struct epabi_strided_copy a = {0};
    a.elsize = epabi_dtype_size(x->dtype);
    a.rank = r;
    for (int i = 0; i < r; ++i) {
        a.dims[i] = x->dims[perm[i]];
        a.strides[i] = in_strides[perm[i]];
    }
    OrtStatus* status = NULL;
    struct epabi_tensor* y = epabi_exec_output(ex, 0, x->dtype, r, a.dims, &status);
    if (y == NULL) return status;
    if (epabi_numel(r, a.dims) == 0) return NULL;
    a.src = x->data;
    a.dst = y->data;
    return epabi_strided_copy_launch(ex, &a);
}

const struct epabi_kernel epabi_kernels_transpose[] = {
    {.op_type = "Transpose", .since_min = 1, .since_max = 25, .supports = transpose_supports,
     .init = transpose_init, .release = transpose_release, .run = transpose_run, .launch = EPABI_LAUNCH_STRIDED_COPY,
     .cuda = epabi_cuda_byte_data},
    {.op_type = NULL},
};
