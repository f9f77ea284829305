/*
 * argreduce.c - ArgMax and ArgMin (opsets 1-13): the int64 index of the largest / smallest element along one
 * (possibly negative) axis, keepdims (default 1), select_last_index (from opset 12: the last of equal extremes), on
 * float, double, int8, uint8, int32 and int64 (ORT's CPU EP's dtypes but float16).
 *
 * As ORT's CPU EP: the scan starts from the first element and takes a later one only when it compares greater
 * (ArgMax) or less (ArgMin), or equal with select_last_index; so a NaN is never taken unless it comes first. An
 * empty axis is an error unless the output is empty too.
 */
#include "cuda_coverage.h"
#include "kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct argreduce_state {
    int64_t axis;
    bool keepdims, last, is_min;
};

static bool arg_dtype(ONNXTensorElementDataType t) {
    switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return true;
    default: return false;
    }
}

static void read_attrs(const struct epabi_node* node, struct argreduce_state* st) {
    int64_t v = 0;
    st->axis = 0;
    epabi_attr_int(node, "axis", &st->axis);
    v = 1;
    st->keepdims = !epabi_attr_int(node, "keepdims", &v) || v != 0;
    v = 0;
    st->last = node->since_version >= 12 && epabi_attr_int(node, "select_last_index", &v) && v != 0;
    st->is_min = strcmp(node->op_type, "ArgMin") == 0;
}

static bool arg_supports(const struct epabi_node* node, char* why, size_t why_len) {
    const struct epabi_value_desc* x = &node->in[0];
    if (node->n_in != 1 || node->n_out != 1 || !arg_dtype(x->dtype)) {
        snprintf(why, why_len, "%s: dtype %s is not supported", node->op_type, epabi_dtype_name(x->dtype));
        return false;
    }
    if (x->rank == 0 || x->rank > EPABI_MAX_RANK) {
        snprintf(why, why_len, "%s: rank %d is not supported", node->op_type, x->rank);
        return false;
    }
    struct argreduce_state st;
    read_attrs(node, &st);
    int k = 0;
    if (x->rank > 0 && !epabi_norm_axis(st.axis, x->rank, &k)) {
        snprintf(why, why_len, "%s: axis %lld is out of range for rank %d", node->op_type, (long long)st.axis,
                 x->rank);
        return false;
    }
    return true;
}

static OrtStatus* arg_init(const struct epabi_node* node, void** state) {
    struct argreduce_state* st = calloc(1, sizeof *st);
    if (st == NULL) return epabi_error(node->api, ORT_FAIL, "%s: out of memory", node->op_type);
    read_attrs(node, st);
    *state = st;
    return NULL;
}

static void arg_release(void* state) {
    free(state);
}

/* Walks the axis in memory order: y[i] holds the best index so far for each inner position i, so x is read
 * row by row. */
#define ARG_LOOP(T)                                                                                          \
    do {                                                                                                     \
        const T* x = (const T*)a->x;                                                                         \
        for (int64_t o = 0; o < a->outer; ++o) {                                                             \
            const T* xo = x + o * a->len * a->inner;                                                         \
            int64_t* y = a->y + o * a->inner;                                                                \
            for (int64_t i = 0; i < a->inner; ++i) y[i] = 0;                                                 \
            for (int64_t j = 1; j < a->len; ++j) {                                                           \
                const T* row = xo + j * a->inner;                                                            \
                for (int64_t i = 0; i < a->inner; ++i) {                                                     \
                    const T v = row[i], best = xo[y[i] * a->inner + i];                                      \
                    const bool take = a->is_min ? (a->last ? v <= best : v < best)                           \
                                                : (a->last ? v >= best : v > best);                          \
                    if (take) y[i] = j;                                                                      \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
    } while (0)

static void argreduce_fn(const void* p) {
    const struct argreduce_args* a = p;
    switch (a->dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: ARG_LOOP(float); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: ARG_LOOP(double); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: ARG_LOOP(int8_t); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: ARG_LOOP(uint8_t); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: ARG_LOOP(int32_t); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: ARG_LOOP(int64_t); break;
    default: break;
    }
}

static OrtStatus* arg_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                          int n_out) {
    (void)n_in;
    (void)n_out;
    const struct argreduce_state* st = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    const struct epabi_tensor* x = in[0];
    const char* op = st->is_min ? "ArgMin" : "ArgMax";
    if (!arg_dtype(x->dtype))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "%s: dtype %s is not supported", op, epabi_dtype_name(x->dtype));
    int axis = 0;
    if (!epabi_norm_axis(st->axis, x->rank, &axis))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "%s: axis %lld is out of range for rank %d", op,
                           (long long)st->axis, x->rank);
    struct argreduce_args a = {.dtype = x->dtype, .is_min = st->is_min, .last = st->last, .outer = 1, .inner = 1};
    int64_t dims[EPABI_MAX_RANK];
    int r = 0;
    for (int k = 0; k < x->rank; ++k) {
        if (k < axis) a.outer *= x->dims[k];
        if (k > axis) a.inner *= x->dims[k];
        if (k != axis || st->keepdims) dims[r++] = k == axis ? 1 : x->dims[k];
    }
    a.len = x->dims[axis];
    OrtStatus* status = NULL;
    struct epabi_tensor* y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, r, dims, &status);
    if (y == NULL) return status;
    if (a.outer * a.inner == 0) return NULL;
    if (a.len == 0)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "%s: axis %d is empty; it has no extreme element", op, axis);
    a.x = x->data;
    a.y = y->data;
    return epabi_exec_launch(ex, EPABI_LAUNCH_ARGREDUCE, argreduce_fn, &a, sizeof a);
}

/* CUDA: the argreduce kernel has the same six dtypes. */
static bool cuda_arg(const struct epabi_node* node, char* why, size_t why_len) {
    const ONNXTensorElementDataType t = epabi_cuda_in_dtype(node, 0);
    return arg_dtype(t) || epabi_cuda_refuse(node, why, why_len, "input", t);
}

const struct epabi_kernel epabi_kernels_argreduce[] = {
    {.op_type = "ArgMax", .since_min = 1, .since_max = 13, .supports = arg_supports, .init = arg_init,
     .release = arg_release, .run = arg_run, .launch = EPABI_LAUNCH_ARGREDUCE, .cuda = cuda_arg},
    {.op_type = "ArgMin", .since_min = 1, .since_max = 13, .supports = arg_supports, .init = arg_init,
     .release = arg_release, .run = arg_run, .launch = EPABI_LAUNCH_ARGREDUCE, .cuda = cuda_arg},
    {.op_type = NULL},
};
