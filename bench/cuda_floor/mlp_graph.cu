// mlp_graph.cu - the raw CUDA-graph floor for an MLP of LAYERS x (MatMul -> Add -> Relu), the last layer without
// Relu (the model of epabi.models.mlp): per layer one GEMM (cuBLAS sgemm; a simple kernel when built with
// -DEPABI_SIMPLE_GEMM) and one fused bias-add(+ReLU) kernel, captured once into a CUDA graph on a non-blocking
// stream; then RUNS launches of the graph, each followed by cudaStreamSynchronize and timed with the host's
// steady clock (what one synchronous inference costs at the least, with no framework around it).
//
// Usage: mlp_graph LAYERS WIDTH BATCH RUNS [WARMUP]
// Prints one JSON line: layers, width, batch, gemm ("cublas"/"simple"), kernels_per_run, runs, median_us, mean_us,
// min_us, p90_us, max_abs_err (the graph's output against a double-precision host reference).
// Exit status 0 on success; 2 for bad arguments; 1 for a CUDA/cuBLAS error (message on stderr).
//
// Built at run time by bench/graph_replay.py: nvcc -O3 -std=c++17 -arch=native mlp_graph.cu -lcublas

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#ifndef EPABI_SIMPLE_GEMM
#include <cublas_v2.h>
#endif

#define CHECK_CUDA(call)                                                                                     \
    do {                                                                                                     \
        cudaError_t err_ = (call);                                                                           \
        if (err_ != cudaSuccess) {                                                                           \
            std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
            std::exit(1);                                                                                    \
        }                                                                                                    \
    } while (0)

#ifndef EPABI_SIMPLE_GEMM
#define CHECK_CUBLAS(call)                                                                                   \
    do {                                                                                                     \
        cublasStatus_t st_ = (call);                                                                         \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                                  \
            std::fprintf(stderr, "%s:%d: %s failed: cuBLAS status %d\n", __FILE__, __LINE__, #call, (int)st_); \
            std::exit(1);                                                                                    \
        }                                                                                                    \
    } while (0)
#endif

// y[b, j] = sum_k x[b, k] * w[k, j]  (row-major; one thread per output element)
__global__ void simple_gemm(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                            int batch, int width) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y;
    if (j >= width || b >= batch) return;
    float acc = 0.0f;
    for (int k = 0; k < width; ++k) acc = fmaf(x[b * width + k], w[k * width + j], acc);
    y[b * width + j] = acc;
}

// y[b, j] += bias[j], then ReLU unless last
__global__ void bias_relu(float* __restrict__ y, const float* __restrict__ bias, int n, int width, int relu) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = y[i] + bias[i % width];
    y[i] = relu ? fmaxf(v, 0.0f) : v;
}

static float lcg(uint64_t* state) {  // uniform in [-1, 1)
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*state >> 40) & 0xFFFFFF) / (float)0x800000 - 1.0f;
}

int main(int argc, char** argv) {
    if (argc < 5) {
        std::fprintf(stderr, "usage: %s LAYERS WIDTH BATCH RUNS [WARMUP [IDLE_US]]\n", argv[0]);
        return 2;
    }
    const int layers = std::atoi(argv[1]), width = std::atoi(argv[2]), batch = std::atoi(argv[3]);
    const int runs = std::atoi(argv[4]), warmup = argc > 5 ? std::atoi(argv[5]) : 50;
    // IDLE_US: the host spins this long between runs (untimed), as a host's own per-run work would leave the GPU
    // idle; shows how much of a host's replay time is the graph running slower after idling
    const int idle_us = argc > 6 ? std::atoi(argv[6]) : 0;
    if (layers < 1 || width < 1 || batch < 1 || runs < 1 || warmup < 0) {
        std::fprintf(stderr, "LAYERS, WIDTH, BATCH and RUNS must be >= 1, WARMUP >= 0\n");
        return 2;
    }
    const size_t wn = (size_t)width * width, an = (size_t)batch * width;

    // weights ~ U(-1, 1)/sqrt(width), biases ~ U(-0.1, 0.1), input ~ U(-1, 1): fixed seed
    uint64_t seed = 42;
    std::vector<float> h_w((size_t)layers * wn), h_b((size_t)layers * width), h_x(an);
    const float scale = 1.0f / std::sqrt((float)width);
    for (auto& v : h_w) v = lcg(&seed) * scale;
    for (auto& v : h_b) v = lcg(&seed) * 0.1f;
    for (auto& v : h_x) v = lcg(&seed);

    float *d_w = nullptr, *d_b = nullptr, *d_act = nullptr;
    CHECK_CUDA(cudaMalloc(&d_w, h_w.size() * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&d_b, h_b.size() * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&d_act, (size_t)(layers + 1) * an * sizeof(float)));  // input, then one per layer
    CHECK_CUDA(cudaMemcpy(d_w, h_w.data(), h_w.size() * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(d_b, h_b.data(), h_b.size() * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(d_act, h_x.data(), an * sizeof(float), cudaMemcpyHostToDevice));

    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
#ifndef EPABI_SIMPLE_GEMM
    const char* gemm = "cublas";
    cublasHandle_t handle;
    CHECK_CUBLAS(cublasCreate(&handle));
    CHECK_CUBLAS(cublasSetStream(handle, stream));
    void* workspace = nullptr;  // a fixed workspace: cuBLAS allocates nothing while the stream is captured
    const size_t workspace_bytes = 4u << 20;
    CHECK_CUDA(cudaMalloc(&workspace, workspace_bytes));
    CHECK_CUBLAS(cublasSetWorkspace(handle, workspace, workspace_bytes));
#else
    const char* gemm = "simple";
#endif

    auto enqueue = [&]() {
        for (int l = 0; l < layers; ++l) {
            const float* x = d_act + (size_t)l * an;
            float* y = d_act + (size_t)(l + 1) * an;
            const float* w = d_w + (size_t)l * wn;
#ifndef EPABI_SIMPLE_GEMM
            // row-major Y[B,W] = X[B,W] @ Wl[W,W] is column-major Y^T = Wl^T X^T: sgemm(N, N, W, B, W, Wl, X)
            const float one = 1.0f, zero = 0.0f;
            CHECK_CUBLAS(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, width, batch, width, &one, w, width, x, width,
                                     &zero, y, width));
#else
            dim3 grid((width + 127) / 128, batch);
            simple_gemm<<<grid, 128, 0, stream>>>(x, w, y, batch, width);
#endif
            bias_relu<<<(int)((an + 255) / 256), 256, 0, stream>>>(y, d_b + (size_t)l * width, (int)an, width,
                                                                 l + 1 < layers);
        }
    };

    enqueue();  // initialises cuBLAS outside the capture
    CHECK_CUDA(cudaStreamSynchronize(stream));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    enqueue();
    CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    size_t nodes = 0;
    CHECK_CUDA(cudaGraphGetNodes(graph, nullptr, &nodes));

    for (int i = 0; i < warmup; ++i) {
        CHECK_CUDA(cudaGraphLaunch(exec, stream));
        CHECK_CUDA(cudaStreamSynchronize(stream));
    }
    std::vector<double> us(runs);
    for (int i = 0; i < runs; ++i) {
        for (auto s = std::chrono::steady_clock::now();
             std::chrono::steady_clock::now() - s < std::chrono::microseconds(idle_us);) {
        }
        auto t0 = std::chrono::steady_clock::now();
        CHECK_CUDA(cudaGraphLaunch(exec, stream));
        CHECK_CUDA(cudaStreamSynchronize(stream));
        auto t1 = std::chrono::steady_clock::now();
        us[i] = std::chrono::duration<double, std::micro>(t1 - t0).count();
    }

    // the graph's output against a double-precision host reference
    std::vector<float> out(an);
    CHECK_CUDA(cudaMemcpy(out.data(), d_act + (size_t)layers * an, an * sizeof(float), cudaMemcpyDeviceToHost));
    std::vector<double> cur(h_x.begin(), h_x.end()), next(an);
    for (int l = 0; l < layers; ++l) {
        for (int b = 0; b < batch; ++b)
            for (int j = 0; j < width; ++j) {
                double acc = h_b[(size_t)l * width + j];
                for (int k = 0; k < width; ++k) acc += cur[(size_t)b * width + k] * h_w[(size_t)l * wn + (size_t)k * width + j];
                next[(size_t)b * width + j] = (l + 1 < layers && acc < 0) ? 0.0 : acc;
            }
        cur.swap(next);
    }
    double err = 0;
    for (size_t i = 0; i < an; ++i) err = std::max(err, std::fabs((double)out[i] - cur[i]));

    std::vector<double> sorted(us);
    std::sort(sorted.begin(), sorted.end());
    double mean = 0;
    for (double v : us) mean += v;
    mean /= runs;
    std::printf("{\"layers\": %d, \"width\": %d, \"batch\": %d, \"gemm\": \"%s\", \"kernels_per_run\": %zu, "
                "\"runs\": %d, \"median_us\": %.3f, \"mean_us\": %.3f, \"min_us\": %.3f, \"p90_us\": %.3f, "
                "\"max_abs_err\": %.3g}\n",
                layers, width, batch, gemm, nodes, runs, sorted[runs / 2], mean, sorted[0],
                sorted[std::min(runs - 1, (int)(runs * 0.9))], err);

    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(graph));
#ifndef EPABI_SIMPLE_GEMM
    CHECK_CUBLAS(cublasDestroy(handle));
    CHECK_CUDA(cudaFree(workspace));
#endif
    CHECK_CUDA(cudaStreamDestroy(stream));
    CHECK_CUDA(cudaFree(d_act));
    CHECK_CUDA(cudaFree(d_b));
    CHECK_CUDA(cudaFree(d_w));
    return 0;
}
