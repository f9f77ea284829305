/*
 * cuda_coverage.h - which nodes and dtypes the CUDA kernels cover, in plain C (no CUDA types): the predicates
 * the kernel descriptors' cuda field points at (kernel.h), and the dtype tests the CUDA launchers
 * (cuda/cuda_launch.c) pick their per-dtype kernels by, so that what GetCapability claims on a GPU is what the
 * launchers run.
 *
 * A descriptor predicate runs at GetCapability on a GPU device after the kernel's own supports() accepted the
 * node; on "no" it writes "<op>: the CUDA kernels do not cover <what> dtype <dtype>". Thread-safe: pure
 * functions.
 */
#ifndef EPABI_CUDA_COVERAGE_H
#define EPABI_CUDA_COVERAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "kernel.h"

/* The place of a numeric dtype among the CUDA kernels' per-dtype variants, which are listed in the order
 * f32 f64 i8 u8 i16 u16 i32 u32 i64 u64; -1 for every other dtype (bool, float16, bfloat16...). */
static inline int epabi_cuda_numeric_index(ONNXTensorElementDataType t) {
    switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return 0;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return 1;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return 2;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return 3;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return 5;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return 6;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: return 7;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return 8;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: return 9;
    default: return -1;
    }
}

/* The ten numeric dtypes of the per-dtype kernels (elementwise arithmetic, cast sources, Pow's exponent). */
static inline bool epabi_cuda_numeric(ONNXTensorElementDataType t) { return epabi_cuda_numeric_index(t) >= 0; }

/* The numeric dtypes and bool: Cast's sources and targets, Equal's inputs. */
static inline bool epabi_cuda_castable(ONNXTensorElementDataType t) {
    return epabi_cuda_numeric(t) || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL;
}

/* float and double: the dtypes of the unary math kernels and of Pow's base. */
static inline bool epabi_cuda_floating(ONNXTensorElementDataType t) {
    return t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || t == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;
}

/* Dtype of input i, UNDEFINED when the node has no such input or it is an absent optional one. */
static inline ONNXTensorElementDataType epabi_cuda_in_dtype(const struct epabi_node* node, int i) {
    return i < node->n_in ? node->in[i].dtype : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

/* Writes "<op>: the CUDA kernels do not cover <what> dtype <t>" into why; returns false. */
bool epabi_cuda_refuse(const struct epabi_node* node, char* why, size_t why_len, const char* what,
                       ONNXTensorElementDataType t);

/* ---- descriptor predicates shared by several ops (kernel.h's cuda field) ---------------------------------- */

/* Every present input is numeric: the per-dtype elementwise arithmetic (Add Sub Mul Div Max Min). */
bool epabi_cuda_numeric_inputs(const struct epabi_node* node, char* why, size_t why_len);
/* Input 0 is float or double: the unary math kernels. */
bool epabi_cuda_floating_input(const struct epabi_node* node, char* why, size_t why_len);
/* Input 0 has a whole-byte dtype: data movement, which copies bytes (Reshape, Transpose, Slice, Concat...). */
bool epabi_cuda_byte_data(const struct epabi_node* node, char* why, size_t why_len);
/* Input 0 and every output present are float: the float32 math kernels (MatMul, Conv, Softmax, Reduce*...). */
bool epabi_cuda_float32_math(const struct epabi_node* node, char* why, size_t why_len);
/* Every present input is bool: the logic kernels (Not, And, Or). */
bool epabi_cuda_bool_inputs(const struct epabi_node* node, char* why, size_t why_len);

#endif
