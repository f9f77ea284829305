/*
 * range.c - Range (opsets 11-27; 27 adds float16, bfloat16 and their stash_type, which we leave to others): the 1-D
 * tensor start, start + delta, ... before limit, of dtype float, double, int16, int32 or int64 (ORT's CPU EP's).
 * start, limit and delta are one-element inputs read in run() as kernel.h allows (delta absent: 1, as ORT's CPU EP
 * takes it). The count is max(ceil((limit - start) / delta), 0), exact for integers and in double for floats, as
 * ORT's CPU EP computes it; a zero delta or a count that is not finite is an error. The host launch
 * accumulates (value += delta, in the dtype, integers wrapping) as ORT's CPU EP does; the CUDA kernel computes
 * start + i * delta as ORT's CUDA EP does: for integers the same values, for floats the same up to rounding.
 */
#include "cuda_coverage.h"
#include "kernel.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool range_dtype(ONNXTensorElementDataType t) {
    return t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE ||
           t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16 || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 ||
           t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
}

static bool range_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in < 2) {
        snprintf(why, why_len, "Range: start and limit are required");
        return false;
    }
    const ONNXTensorElementDataType t = node->in[0].dtype;
    if (!range_dtype(t)) {
        snprintf(why, why_len, "Range: dtype %s is not supported", epabi_dtype_name(t));
        return false;
    }
    for (int i = 1; i < node->n_in && i < 3; ++i) {
        if (node->in[i].dtype != t && node->in[i].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) {
            snprintf(why, why_len, "Range: input %d is %s, start is %s", i, epabi_dtype_name(node->in[i].dtype),
                     epabi_dtype_name(t));
            return false;
        }
    }
    return true;
}

static void range_fn(const void* p) {
    const struct range_args* a = p;
    switch (a->dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: {
        float* y = a->dst;
        float v = (float)a->start_f;
        const float d = (float)a->delta_f;
        for (int64_t i = 0; i < a->n; ++i, v += d) y[i] = v;
        break;
    }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: {
        double* y = a->dst;
        double v = a->start_f;
        for (int64_t i = 0; i < a->n; ++i, v += a->delta_f) y[i] = v;
        break;
    }
    default: {
        /* two's complement accumulation, through uint64 so that it wraps without overflowing */
        uint64_t v = (uint64_t)a->start_i;
        const uint64_t d = (uint64_t)a->delta_i;
        for (int64_t i = 0; i < a->n; ++i, v += d) {
            if (a->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16) ((int16_t*)a->dst)[i] = (int16_t)(uint16_t)v;
            else if (a->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32) ((int32_t*)a->dst)[i] = (int32_t)(uint32_t)v;
            else ((int64_t*)a->dst)[i] = (int64_t)v;
        }
        break;
    }
    }
}

/* One value of a one-element input, widened: integers to int64, floats to double. */
static OrtStatus* read_scalar(struct epabi_exec* ex, const char* what, const struct epabi_tensor* t,
                              ONNXTensorElementDataType dtype, int64_t* i, double* f) {
    const struct epabi_api* api = epabi_exec_api(ex);
    if (t->dtype != dtype || t->rank > 1 || epabi_numel(t->rank, t->dims) != 1)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Range: %s must be one %s value", what, epabi_dtype_name(dtype));
    OrtStatus* status = NULL;
    const void* host = epabi_exec_host_data(ex, t, &status);
    if (status != NULL) return status;
    switch (dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: { float v; memcpy(&v, host, sizeof v); *f = v; break; }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: memcpy(f, host, sizeof *f); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: { int16_t v; memcpy(&v, host, sizeof v); *i = v; break; }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: { int32_t v; memcpy(&v, host, sizeof v); *i = v; break; }
    default: memcpy(i, host, sizeof *i); break;
    }
    return NULL;
}

/* ceil((limit - start) / delta) for integers, exactly: the distance in uint64 cannot overflow. */
static uint64_t int_count(int64_t start, int64_t limit, int64_t delta) {
    if (delta > 0 ? limit <= start : limit >= start) return 0;
    const uint64_t dist = delta > 0 ? (uint64_t)limit - (uint64_t)start : (uint64_t)start - (uint64_t)limit;
    const uint64_t step = delta > 0 ? (uint64_t)delta : (uint64_t)0 - (uint64_t)delta;
    return (dist - 1) / step + 1;
}

static OrtStatus* range_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                            int n_out) {
    (void)state;
    (void)n_out;
    const struct epabi_api* api = epabi_exec_api(ex);
    const ONNXTensorElementDataType t = in[0]->dtype;
    if (!range_dtype(t)) return epabi_error(api, ORT_INVALID_ARGUMENT, "Range: dtype %s", epabi_dtype_name(t));
    const bool is_float = t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;
    struct range_args a = {0};
    a.dtype = t;
    int64_t limit_i = 0;
    double limit_f = 0.0;
    a.delta_i = 1;
    a.delta_f = 1.0;
    EPABI_RETURN_IF_ERROR(read_scalar(ex, "start", in[0], t, &a.start_i, &a.start_f));
    EPABI_RETURN_IF_ERROR(read_scalar(ex, "limit", in[1], t, &limit_i, &limit_f));
    if (n_in > 2 && in[2] != NULL && in[2]->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED)
        EPABI_RETURN_IF_ERROR(read_scalar(ex, "delta", in[2], t, &a.delta_i, &a.delta_f));
    if (is_float) {
        if (a.delta_f == 0.0) return epabi_error(api, ORT_INVALID_ARGUMENT, "Range: delta is zero");
        const double count = ceil((limit_f - a.start_f) / a.delta_f);
        if (!isfinite(count))
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Range: the number of elements is not a finite value");
        if (count > (double)(INT64_MAX / 16))
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Range: %g elements are too many", count);
        a.n = count > 0 ? (int64_t)count : 0;
    } else {
        if (a.delta_i == 0) return epabi_error(api, ORT_INVALID_ARGUMENT, "Range: delta is zero");
        const uint64_t count = int_count(a.start_i, limit_i, a.delta_i);
        if (count > (uint64_t)(INT64_MAX / 16))
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Range: %llu elements are too many",
                               (unsigned long long)count);
        a.n = (int64_t)count;
    }
    OrtStatus* status = NULL;
    const int64_t dims[1] = {a.n};
    struct epabi_tensor* y = epabi_exec_output(ex, 0, t, 1, dims, &status);
    if (y == NULL) return status;
    if (a.n == 0) return NULL;
    a.dst = y->data;
    return epabi_exec_launch(ex, EPABI_LAUNCH_RANGE, range_fn, &a, sizeof a);
}

/* CUDA: the range kernel has all five dtypes. */
static bool cuda_range(const struct epabi_node* node, char* why, size_t why_len) {
    const ONNXTensorElementDataType t = epabi_cuda_in_dtype(node, 0);
    return range_dtype(t) || epabi_cuda_refuse(node, why, why_len, "input", t);
}

const struct epabi_kernel epabi_kernels_range[] = {
    {.op_type = "Range", .since_min = 11, .since_max = 27, .supports = range_supports, .run = range_run,
     .launch = EPABI_LAUNCH_RANGE, .host_inputs = 0x7u, .host_step = true, .cuda = cuda_range},
    {.op_type = NULL},
};
