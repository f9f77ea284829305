/*
 * tensor_util.c - small pure helpers shared by the kernels (declared in kernel.h). Thread-safe: no state.
 */
#include "kernel.h"

size_t epabi_dtype_size(ONNXTensorElementDataType dtype) {
    switch (dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return 1;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return 1;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return 2;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return 2;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return 8;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: return 1;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return 2;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return 8;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: return 8;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return 2;
    default: return 0;   /* strings, complex, sub-byte and 8-bit float types: not handled by our kernels */
    }
}

const char* epabi_dtype_name(ONNXTensorElementDataType dtype) {
    switch (dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED: return "undefined";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return "float";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return "uint8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return "int8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return "uint16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return "int16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return "int32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return "int64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING: return "string";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: return "bool";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return "float16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return "double";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: return "uint32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: return "uint64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX64: return "complex64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX128: return "complex128";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return "bfloat16";
    default: return "unsupported";
    }
}

int64_t epabi_numel(int rank, const int64_t* dims) {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
}

bool epabi_broadcast_shape(int ra, const int64_t* a, int rb, const int64_t* b, int* out_rank, int64_t* out) {
    if (ra < 0 || rb < 0 || ra > EPABI_MAX_RANK || rb > EPABI_MAX_RANK) return false;
    int r = ra > rb ? ra : rb;
    int64_t tmp[EPABI_MAX_RANK];
    for (int i = 0; i < r; ++i) {
        /* align from the right: i counts output dims from the left */
        int ia = i - (r - ra), ib = i - (r - rb);
        int64_t da = ia >= 0 ? a[ia] : 1;
        int64_t db = ib >= 0 ? b[ib] : 1;
        if (da == db || db == 1) {
            tmp[i] = da;
        } else if (da == 1) {
            tmp[i] = db;
        } else {
            return false;
        }
    }
    for (int i = 0; i < r; ++i) out[i] = tmp[i];   /* out may alias a or b */
    *out_rank = r;
    return true;
}

bool epabi_norm_axis(int64_t axis, int rank, int* out) {
    if (axis < -(int64_t)rank || axis >= (int64_t)rank) return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

bool epabi_is_index_dtype(ONNXTensorElementDataType dtype) {
    return dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 || dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
}

int64_t epabi_index_at(ONNXTensorElementDataType dtype, const void* data, int64_t i) {
    return dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 ? ((const int64_t*)data)[i] : ((const int32_t*)data)[i];
}

bool epabi_is_numeric_dtype(ONNXTensorElementDataType dtype) {
    switch (dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: return true;
    default: return false;
    }
}
