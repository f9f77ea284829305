/*
 * shape.c - Shape (opsets 1-25; start/end attributes from opset 15). The input's data is never touched, only
 * its shape; the int64 output is still written inside a launch so a captured run replays it.
 */
#include "cuda_coverage.h"
#include "kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct shape_state {
    int64_t start;
    int64_t end;
    bool has_end;                    /* no end attribute: up to the rank */
};


static bool shape_supports(const struct epabi_node* node, char* why, size_t why_len) {
    /* The dtype is irrelevant to us; we only ask that the executor can bind the tensor at all. */
    if (node->n_in < 1 || epabi_dtype_size(node->in[0].dtype) == 0) {
        snprintf(why, why_len, "Shape: dtype %s is not supported", epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    if (node->in[0].rank > EPABI_MAX_RANK) {
        snprintf(why, why_len, "Shape: rank %d exceeds %d", node->in[0].rank, EPABI_MAX_RANK);
        return false;
    }
    return true;
}

static OrtStatus* shape_init(const struct epabi_node* node, void** state) {
    struct shape_state* st = calloc(1, sizeof *st);
    if (st == NULL) return epabi_error(node->api, ORT_FAIL, "Shape: out of memory");
    if (node->since_version >= 15) {
        epabi_attr_int(node, "start", &st->start);
        st->has_end = epabi_attr_int(node, "end", &st->end);
    }
    *state = st;
    return NULL;
}

static void shape_release(void* state) {
    free(state);
}

static void shape_launch(const void* p) {
    const struct shape_args* a = p;
    memcpy(a->dst, a->dims, sizeof(int64_t) * (size_t)a->n);
}

/* Opset 15: negative start/end count from the back, then both clamp to [0, rank]. */
static int64_t clamp_bound(int64_t v, int rank) {
    if (v < 0) v += rank;
    return v < 0 ? 0 : (v > rank ? rank : v);
}

static OrtStatus* shape_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                            int n_out) {
    (void)n_in;
    (void)n_out;
    const struct shape_state* st = state;
    const struct epabi_tensor* x = in[0];
    const int64_t start = clamp_bound(st->start, x->rank);
    const int64_t end = st->has_end ? clamp_bound(st->end, x->rank) : x->rank;
    struct shape_args a = {0};
    a.n = end > start ? (int)(end - start) : 0;
    memcpy(a.dims, x->dims + start, sizeof(int64_t) * (size_t)a.n);
    const int64_t out_dims[1] = {a.n};
    OrtStatus* status = NULL;
    struct epabi_tensor* y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, 1, out_dims, &status);
    if (y == NULL) return status;
    if (a.n == 0) return NULL;
    a.dst = y->data;
    return epabi_exec_launch(ex, EPABI_LAUNCH_SHAPE, shape_launch, &a, sizeof a);
}

const struct epabi_kernel epabi_kernels_shape[] = {
    {.op_type = "Shape", .since_min = 1, .since_max = 25, .supports = shape_supports, .init = shape_init,
     .release = shape_release, .run = shape_run, .launch = EPABI_LAUNCH_SHAPE, .host_step = true,
     .cuda = epabi_cuda_byte_data},
    {.op_type = NULL},
};
