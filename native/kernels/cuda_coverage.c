/*
 * cuda_coverage.c - the descriptor predicates several ops share (cuda_coverage.h). Thread-safe: no state.
 */
#include "cuda_coverage.h"

#include <stdio.h>

bool epabi_cuda_refuse(const struct epabi_node* node, char* why, size_t why_len, const char* what,
                       ONNXTensorElementDataType t) {
    snprintf(why, why_len, "%s: the CUDA kernels do not cover %s dtype %s", node->op_type, what, epabi_dtype_name(t));
    return false;
}

bool epabi_cuda_numeric_inputs(const struct epabi_node* node, char* why, size_t why_len) {
    for (int i = 0; i < node->n_in; ++i) {
        const ONNXTensorElementDataType t = node->in[i].dtype;
        if (t != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED && !epabi_cuda_numeric(t))
            return epabi_cuda_refuse(node, why, why_len, "input", t);
    }
    return true;
}

bool epabi_cuda_floating_input(const struct epabi_node* node, char* why, size_t why_len) {
    const ONNXTensorElementDataType t = epabi_cuda_in_dtype(node, 0);
    return epabi_cuda_floating(t) || epabi_cuda_refuse(node, why, why_len, "input", t);
}

bool epabi_cuda_byte_data(const struct epabi_node* node, char* why, size_t why_len) {
    const ONNXTensorElementDataType t = epabi_cuda_in_dtype(node, 0);
    return epabi_dtype_size(t) != 0 || epabi_cuda_refuse(node, why, why_len, "data", t);
}

bool epabi_cuda_float32_math(const struct epabi_node* node, char* why, size_t why_len) {
    const ONNXTensorElementDataType f32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    const ONNXTensorElementDataType t = epabi_cuda_in_dtype(node, 0);
    if (t != f32) return epabi_cuda_refuse(node, why, why_len, "input", t);
    for (int i = 0; i < node->n_out; ++i)
        if (node->out[i].dtype != f32 && node->out[i].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED)
            return epabi_cuda_refuse(node, why, why_len, "output", node->out[i].dtype);
    return true;
}

bool epabi_cuda_bool_inputs(const struct epabi_node* node, char* why, size_t why_len) {
    for (int i = 0; i < node->n_in; ++i) {
        const ONNXTensorElementDataType t = node->in[i].dtype;
        if (t != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED && t != ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL)
            return epabi_cuda_refuse(node, why, why_len, "input", t);
    }
    return true;
}
