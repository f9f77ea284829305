/*
 * cuda_launch_index.c - the launchers of the kinds whose kernels compute, per output element, which input element
 * (or constant) it takes: PAD (Pad, Tile), FILL (ConstantOfShape), RANGE, ARGREDUCE (ArgMax, ArgMin) and RESIZE.
 * Which nodes they cover is stated on the kernel descriptors (pad.c, tile.c, constant_of_shape.c, range.c,
 * argreduce.c, resize.c); like every launcher (cuda_launch.c) each computes what its kind's host function computes,
 * issues nothing for empty work, never allocates and never synchronizes. The RESIZE block's host table is unused:
 * the kernels compute each axis's taps per element. Thread-safety: no state.
 */
#include <stdint.h>

#include "cuda_launch_internal.h"
#include "ep_factory.h"   /* EPABI_EP_NAME */

static OrtStatus* unsupported(const struct epabi_cuda_launch_env* env, const char* what, const char* detail,
                              int value) {
    return epabi_error(env->api, ORT_NOT_IMPLEMENTED, EPABI_EP_NAME ": the CUDA kernels do not cover %s with %s %d",
                       what, detail, value);
}

static int64_t numel(int rank, const int64_t* dims) {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= dims[d];
    return n;
}

/* The kernel of an element size among four consecutive ids (1, 2, 4, 8 bytes); -1 for another size. */
static int by_elsize(enum epabi_cuda_kernel_id first, size_t elsize) {
    switch (elsize) {
    case 1: return (int)first;
    case 2: return (int)first + 1;
    case 4: return (int)first + 2;
    case 8: return (int)first + 3;
    default: return -1;
    }
}

_Static_assert(EPABI_CK_pad_copy_8 - EPABI_CK_pad_copy_1 == 3, "pad_copy kernels in size order");

OrtStatus* epabi_cuda_launch_pad(const struct epabi_cuda_launch_env* env, const struct pad_args* in) {
    struct pad_args a = *in;
    if (a.rank < 1 || a.rank > EPABI_MAX_RANK) return unsupported(env, "Pad", "rank", a.rank);
    int64_t n = numel(a.rank, a.out_dims);
    if (n <= 0) return NULL;
    const int id = by_elsize(EPABI_CK_pad_copy_1, a.elsize);
    if (id < 0) return unsupported(env, "Pad", "element size", (int)a.elsize);
    void* params[] = {&a, &n};
    return epabi_cuda_run(env, "Pad", (enum epabi_cuda_kernel_id)id, epabi_cuda_grid(n, EPABI_CUDA_BLOCK), 1, 1,
                          EPABI_CUDA_BLOCK, params);
}

_Static_assert(EPABI_CK_fill_8 - EPABI_CK_fill_1 == 3, "fill kernels in size order");

OrtStatus* epabi_cuda_launch_fill(const struct epabi_cuda_launch_env* env, const struct fill_args* in) {
    struct fill_args a = *in;
    if (a.n <= 0) return NULL;
    const int id = by_elsize(EPABI_CK_fill_1, a.elsize);
    if (id < 0) return unsupported(env, "ConstantOfShape", "element size", (int)a.elsize);
    void* params[] = {&a};
    return epabi_cuda_run(env, "ConstantOfShape", (enum epabi_cuda_kernel_id)id, epabi_cuda_grid(a.n, EPABI_CUDA_BLOCK),
                          1, 1, EPABI_CUDA_BLOCK, params);
}

OrtStatus* epabi_cuda_launch_range(const struct epabi_cuda_launch_env* env, const struct range_args* in) {
    struct range_args a = *in;
    if (a.n <= 0) return NULL;
    switch (a.dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: break;
    default: return unsupported(env, "Range", "dtype", (int)a.dtype);
    }
    void* params[] = {&a};
    return epabi_cuda_run(env, "Range", EPABI_CK_range_fill, epabi_cuda_grid(a.n, EPABI_CUDA_BLOCK), 1, 1,
                          EPABI_CUDA_BLOCK, params);
}

OrtStatus* epabi_cuda_launch_argreduce(const struct epabi_cuda_launch_env* env, const struct argreduce_args* in) {
    struct argreduce_args a = *in;
    int64_t n = a.outer * a.inner;
    if (n <= 0 || a.len <= 0) return NULL;
    switch (a.dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: break;
    default: return unsupported(env, "ArgMax/ArgMin", "dtype", (int)a.dtype);
    }
    void* params[] = {&a, &n};
    return epabi_cuda_run(env, "ArgMax/ArgMin", EPABI_CK_argreduce, epabi_cuda_grid(n, EPABI_CUDA_BLOCK), 1, 1,
                          EPABI_CUDA_BLOCK, params);
}

OrtStatus* epabi_cuda_launch_resize(const struct epabi_cuda_launch_env* env, const struct resize_args* in) {
    const char* what = "Resize";
    struct resize_args a = *in;
    if (a.rank < 1 || a.rank > EPABI_MAX_RANK) return unsupported(env, what, "rank", a.rank);
    int64_t n = numel(a.rank, a.out_dims);
    if (n <= 0) return NULL;
    if (a.copy) {
        const size_t bytes = (size_t)numel(a.rank, a.in_dims) * a.elsize;
        epabi_cu_result r =
            env->libs->cu->MemcpyAsync((epabi_cu_ptr)(uintptr_t)a.y, (epabi_cu_ptr)(uintptr_t)a.x, bytes, env->stream);
        return r == 0 ? NULL : epabi_cuda_fail(env, what, r);
    }
    enum epabi_cuda_kernel_id id;
    if (a.linear && a.elsize == 4)
        id = EPABI_CK_resize_linear_f32;
    else if (!a.linear && a.elsize == 4)
        id = EPABI_CK_resize_nearest_4;
    else if (!a.linear && a.elsize == 1)
        id = EPABI_CK_resize_nearest_1;
    else
        return unsupported(env, what, "element size", (int)a.elsize);
    void* params[] = {&a, &n};
    return epabi_cuda_run(env, what, id, epabi_cuda_grid(n, EPABI_CUDA_BLOCK), 1, 1, EPABI_CUDA_BLOCK, params);
}
