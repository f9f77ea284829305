/*
 * constant_of_shape.c - ConstantOfShape (opsets 9-25): a tensor of the shape given by a 1-D int32/int64 input,
 * every element the value attribute's one element (float 0 without it), of that attribute's dtype (any with a
 * whole-byte size). The shape is read in run() as kernel.h allows; a negative dim is an error, an empty shape gives
 * a scalar. The element is kept in the state and written by the fill launch.
 */
#include "cuda_coverage.h"
#include "kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cos_state {
    ONNXTensorElementDataType dtype;
    uint64_t value;                   /* the element in its first bytes */
};

/* The value attribute: its dtype and element; the reason goes to why. */
static bool read_value(const struct epabi_node* node, struct cos_state* st, char* why, size_t why_len) {
    st->dtype = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    st->value = 0;
    if (!epabi_attr_has(node, "value")) return true;
    size_t count = 0;
    if (!epabi_attr_tensor(node, "value", &st->dtype, &st->value, sizeof st->value, &count)) {
        snprintf(why, why_len, "ConstantOfShape: the value attribute is not a readable tensor");
        return false;
    }
    if (epabi_dtype_size(st->dtype) == 0 || count != 1) {
        snprintf(why, why_len, "ConstantOfShape: value must be one element of a whole-byte dtype, got %zu %s", count,
                 epabi_dtype_name(st->dtype));
        return false;
    }
    return true;
}

static bool cos_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in < 1 || !epabi_is_index_dtype(node->in[0].dtype)) {
        snprintf(why, why_len, "ConstantOfShape: the shape input must be int32 or int64");
        return false;
    }
    struct cos_state st;
    return read_value(node, &st, why, why_len);
}

static OrtStatus* cos_init(const struct epabi_node* node, void** state) {
    struct cos_state* st = calloc(1, sizeof *st);
    if (st == NULL) return epabi_error(node->api, ORT_FAIL, "ConstantOfShape: out of memory");
    char why[160];
    if (!read_value(node, st, why, sizeof why)) {
        free(st);
        return epabi_error(node->api, ORT_INVALID_ARGUMENT, "%s", why);
    }
    *state = st;
    return NULL;
}

static void cos_release(void* state) {
    free(state);
}

static void fill_fn(const void* p) {
    const struct fill_args* a = p;
    memcpy(a->dst, &a->value, a->elsize);
    const size_t total = (size_t)a->n * a->elsize;
    for (size_t done = a->elsize; done < total;) {   /* doubling copies of what is written */
        const size_t n = done < total - done ? done : total - done;
        memcpy(a->dst + done, a->dst, n);
        done += n;
    }
}

static OrtStatus* cos_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                          int n_out) {
    (void)n_in;
    (void)n_out;
    const struct cos_state* st = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    const struct epabi_tensor* shape = in[0];
    if (!epabi_is_index_dtype(shape->dtype) || shape->rank != 1)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "ConstantOfShape: the shape must be a 1-D int32 or int64 tensor");
    if (shape->dims[0] > EPABI_MAX_RANK)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "ConstantOfShape: rank %lld exceeds %d",
                           (long long)shape->dims[0], EPABI_MAX_RANK);
    const int r = (int)shape->dims[0];
    int64_t dims[EPABI_MAX_RANK];
    OrtStatus* status = NULL;
    const void* host = r > 0 ? epabi_exec_host_data(ex, shape, &status) : NULL;
    if (status != NULL) return status;
    for (int k = 0; k < r; ++k) {
        dims[k] = epabi_index_at(shape->dtype, host, k);
        if (dims[k] < 0)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "ConstantOfShape: shape[%d] = %lld is negative", k,
                               (long long)dims[k]);
    }
    struct epabi_tensor* y = epabi_exec_output(ex, 0, st->dtype, r, dims, &status);
    if (y == NULL) return status;
    const struct fill_args a = {
        .dst = y->data, .n = epabi_numel(r, dims), .elsize = epabi_dtype_size(st->dtype), .value = st->value};
    if (a.n == 0) return NULL;
    return epabi_exec_launch(ex, EPABI_LAUNCH_FILL, fill_fn, &a, sizeof a);
}

/* CUDA: the fill kernels write elements of 1, 2, 4 or 8 bytes, i.e. any output dtype supports() accepted. */
static bool cuda_fill(const struct epabi_node* node, char* why, size_t why_len) {
    const ONNXTensorElementDataType t = node->n_out > 0 ? node->out[0].dtype : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    return t == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED || epabi_dtype_size(t) != 0 ||
           epabi_cuda_refuse(node, why, why_len, "output", t);
}

const struct epabi_kernel epabi_kernels_constant_of_shape[] = {
    {.op_type = "ConstantOfShape", .since_min = 9, .since_max = 25, .supports = cos_supports, .init = cos_init,
     .release = cos_release, .run = cos_run, .launch = EPABI_LAUNCH_FILL, .host_inputs = 1u << 0, .host_step = true,
     .cuda = cuda_fill},
    {.op_type = NULL},
};
