/*
 * cuda_launch_nn.c - the launchers of the neural-network layer kinds: MaxPool / AveragePool (POOL),
 * GlobalAveragePool (GLOBAL_AVGPOOL), BatchNormalization (BATCHNORM), InstanceNormalization (INSTANCENORM),
 * ConvTranspose (CONV_TRANSPOSE), LSTM (LSTM). The pack and col scratch of the blocks are unused (the kernels
 * keep partial results in registers, the GEMMs go through epabi_cuda_sgemm); LSTM's xw, gates, h and c are
 * device scratch.
 *
 * Each computes what its kind's host function in native/kernels computes (see cuda_launch.c), issues nothing
 * for empty work, never allocates and never synchronizes, so it can run inside a stream capture.
 * Thread-safety: no state.
 */
#include <stdint.h>

#include "cuda_launch_internal.h"
#include "ep_factory.h"   /* EPABI_EP_NAME */

static OrtStatus* not_covered(const struct epabi_cuda_launch_env* env, const char* what, const char* detail,
                              int value) {
    return epabi_error(env->api, ORT_NOT_IMPLEMENTED, EPABI_EP_NAME ": the CUDA kernels do not cover %s with %s %d",
                       what, detail, value);
}

/* ---- pooling ------------------------------------------------------------------------------------------ */

OrtStatus* epabi_cuda_launch_pool(const struct epabi_cuda_launch_env* env, const struct pool_launch* in) {
    struct pool_launch L = *in;
    const char* what = L.op == POOL_MAX ? "MaxPool" : "AveragePool";
    int64_t n = L.planes * L.out[0] * L.out[1] * L.out[2];
    if (n <= 0) return NULL;
    enum epabi_cuda_kernel_id id;
    if (L.op == POOL_AVERAGE && L.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        id = EPABI_CK_pool_avg_f32;
    else if (L.op == POOL_MAX && L.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        id = EPABI_CK_pool_max_f32;
    else if (L.op == POOL_MAX && L.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE)
        id = EPABI_CK_pool_max_f64;
    else if (L.op == POOL_MAX && L.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8)
        id = EPABI_CK_pool_max_i8;
    else if (L.op == POOL_MAX && L.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8)
        id = EPABI_CK_pool_max_u8;
    else
        return not_covered(env, what, "dtype", (int)L.dtype);
    void* params[] = {&L, &n};
    return epabi_cuda_run(env, what, id, epabi_cuda_grid(n, EPABI_CUDA_BLOCK), 1, 1, EPABI_CUDA_BLOCK, params);
}

OrtStatus* epabi_cuda_launch_gavgpool(const struct epabi_cuda_launch_env* env, const struct gavgpool_launch* in) {
    struct gavgpool_launch L = *in;
    if (L.planes <= 0 || L.size <= 0) return NULL;
    void* params[] = {&L};
    /* one warp per plane, 8 warps per block */
    return epabi_cuda_run(env, "GlobalAveragePool", EPABI_CK_gavgpool_f32, epabi_cuda_grid(L.planes, 8), 1, 1, 256,
                          params);
}

/* ---- normalization ------------------------------------------------------------------------------------ */

OrtStatus* epabi_cuda_launch_batchnorm(const struct epabi_cuda_launch_env* env, const struct batchnorm_launch* in) {
    struct batchnorm_launch L = *in;
    int64_t items = L.n * L.c * L.inner;
    if (items <= 0) return NULL;
    void* params[] = {&L, &items};
    return epabi_cuda_run(env, "BatchNormalization", EPABI_CK_batchnorm_f32, epabi_cuda_grid(items, EPABI_CUDA_BLOCK),
                          1, 1, EPABI_CUDA_BLOCK, params);
}

OrtStatus* epabi_cuda_launch_instancenorm(const struct epabi_cuda_launch_env* env,
                                          const struct instancenorm_launch* in) {
    struct instancenorm_launch L = *in;
    if (L.planes <= 0 || L.size <= 0 || L.c <= 0) return NULL;
    const int64_t cap = (int64_t)1 << 20;   /* the kernel loops grid-stride over planes */
    void* params[] = {&L};
    return epabi_cuda_run(env, "InstanceNormalization", EPABI_CK_instancenorm_f32,
                          (unsigned)(L.planes < cap ? L.planes : cap), 1, 1, epabi_cuda_row_block(L.size), params);
}

/* ---- ConvTranspose ------------------------------------------------------------------------------------ */

OrtStatus* epabi_cuda_launch_conv_transpose(const struct epabi_cuda_launch_env* env, const struct convt_launch* in) {
    struct convt_launch L = *in;
    int64_t items = L.n * L.m * L.out[0] * L.out[1] * L.out[2];
    if (items <= 0 || L.mg <= 0) return NULL;
    void* params[] = {&L, &items};
    return epabi_cuda_run(env, "ConvTranspose", EPABI_CK_convt_direct, epabi_cuda_grid(items, EPABI_CUDA_BLOCK), 1, 1,
                          EPABI_CUDA_BLOCK, params);
}

/* ---- LSTM ---------------------------------------------------------------------------------------------- */

static OrtStatus* lstm_copy(const struct epabi_cuda_launch_env* env, float* dst, const float* src, size_t bytes) {
    epabi_cu_result r = src != NULL
        ? env->libs->cu->MemcpyAsync((epabi_cu_ptr)(uintptr_t)dst, (epabi_cu_ptr)(uintptr_t)src, bytes, env->stream)
        : env->libs->cu->MemsetD8Async((epabi_cu_ptr)(uintptr_t)dst, 0, bytes, env->stream);
    return r == 0 ? NULL : epabi_cuda_fail(env, "LSTM", r);
}

/* Per direction: xw = X W^T (one GEMM), the states from initial_h / initial_c (or zeros), then per step
 * gates = H R^T and lstm_cell_f32; Y_h / Y_c copied from the states at the end (lstm_launch_fn in lstm.c). */
OrtStatus* epabi_cuda_launch_lstm(const struct epabi_cuda_launch_env* env, const struct lstm_launch* in) {
    const char* what = "LSTM";
    struct lstm_launch L = *in;
    const int64_t H = L.hidden, G = 4 * H, state = L.batch * H;
    if (state <= 0 || L.dirs < 1 || L.dirs > 2) return NULL;
    if (L.h == NULL || L.c == NULL || L.gates == NULL || (L.seq > 0 && L.xw == NULL))
        return epabi_error(env->api, ORT_EP_FAIL, EPABI_EP_NAME ": LSTM launch without its scratch");
    const size_t state_bytes = (size_t)state * sizeof(float);
    for (int d = 0; d < L.dirs; ++d) {
        const bool backward = d == 1 || L.reverse;
        EPABI_RETURN_IF_ERROR(epabi_cuda_sgemm(env, what, false, true, L.seq * L.batch, G, L.input, 1.0f, L.x, L.input,
                                               0, L.w + d * G * L.input, L.input, 0, 0.0f, L.xw, G, 0, 1));
        EPABI_RETURN_IF_ERROR(lstm_copy(env, L.h, L.init_h != NULL ? L.init_h + d * state : NULL, state_bytes));
        EPABI_RETURN_IF_ERROR(lstm_copy(env, L.c, L.init_c != NULL ? L.init_c + d * state : NULL, state_bytes));
        for (int64_t s = 0; s < L.seq; ++s) {
            int64_t t = backward ? L.seq - 1 - s : s;
            EPABI_RETURN_IF_ERROR(epabi_cuda_sgemm(env, what, false, true, L.batch, G, H, 1.0f, L.h, H, 0,
                                                   L.r + d * G * H, H, 0, 0.0f, L.gates, G, 0, 1));
            int dir = d;
            int64_t items = state;
            void* params[] = {&L, &dir, &t, &items};
            EPABI_RETURN_IF_ERROR(epabi_cuda_run(env, what, EPABI_CK_lstm_cell_f32,
                                                 epabi_cuda_grid(items, EPABI_CUDA_BLOCK), 1, 1, EPABI_CUDA_BLOCK,
                                                 params));
        }
        if (L.y_h != NULL) EPABI_RETURN_IF_ERROR(lstm_copy(env, L.y_h + d * state, L.h, state_bytes));
        if (L.y_c != NULL) EPABI_RETURN_IF_ERROR(lstm_copy(env, L.y_c + d * state, L.c, state_bytes));
    }
    return NULL;
}
