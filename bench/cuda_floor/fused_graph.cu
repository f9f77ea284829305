// fused_graph.cu - the fused floor for an MLP of LAYERS x (MatMul -> Add -> Relu), the last layer without Relu (the
// model of epabi.models.mlp): per layer ONE launch of epabi's own linear kernel (linear_nn_R of
// native/cuda/cuda_kernels.cu, compiled here by NVRTC with the options and the in-memory launch_args.h and
// cuda_math.cuh headers the plugin uses), with the geometry the plugin's launcher gives it (native/cuda/cuda_launch_linear.c: 256 threads,
// a block per 32 columns, R the smallest of 1, 2, 4, 8, 16 covering BATCH), captured once into a CUDA graph on a
// non-blocking stream; then RUNS launches of the graph, each followed by cudaStreamSynchronize and timed with the
// host's steady clock. What a replay of the plugin's fused plan costs at the least, with no framework around it.
//
// Usage: fused_graph LIBNVRTC KERNELS_CU LAUNCH_ARGS_H LAYERS WIDTH BATCH RUNS [WARMUP]
// BATCH <= 16 (the plugin's small-kernel path). Prints one JSON line: layers, width, batch, kernel, arch,
// kernels_per_run, runs, median_us, mean_us, min_us, p90_us, max_abs_err (against a double-precision host
// reference). Exit status 0 on success; 2 for bad arguments; 1 for a CUDA/NVRTC error (message on stderr).
//
// NVRTC and the driver API (libcuda.so.1) are loaded with dlopen, so the build needs neither their headers nor their
// link libraries: nvcc -O3 -std=c++17 fused_graph.cu -o fused_graph -ldl (bench/graph_replay.py does this).

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#define CHECK_CUDA(call)                                                                                     \
    do {                                                                                                     \
        cudaError_t err_ = (call);                                                                           \
        if (err_ != cudaSuccess) {                                                                           \
            std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
            std::exit(1);                                                                                    \
        }                                                                                                    \
    } while (0)

// The mirror of launch_args.h's struct linear_launch (its C layout: the NVRTC side checks the same numbers in the
// generated block of cuda_kernels.cu). A drifted layout gives wrong numbers, which max_abs_err shows.
struct LinearLaunch {
    const float* a;
    const float* b;
    const float* c;
    float* y;
    float* pack;
    bool trans_a, trans_b;
    int32_t activation;   // enum un_op: UN_RELU = 5; -1 none
    int32_t path;
    int32_t weights_const;   // 1: the kernel loads B and the bias before it waits for the kernel before it
    int64_t m, n, k, lda, ldb;
    float alpha, beta;
    int64_t c_rows, c_cols;
    void* pool;
};
static_assert(sizeof(LinearLaunch) == 128, "struct linear_launch is 128 bytes");
static_assert(offsetof(LinearLaunch, activation) == 44 && offsetof(LinearLaunch, m) == 56 &&
                  offsetof(LinearLaunch, alpha) == 96 && offsetof(LinearLaunch, c_rows) == 104,
              "struct linear_launch's offsets");
constexpr int32_t kUnRelu = 5;

// cuLaunchKernelEx's CUlaunchAttribute and CUlaunchConfig (cuda.h, CUDA 11.8), as native/cuda/cuda_driver.h mirrors them
struct LaunchAttribute {
    int id;
    char pad[4];
    union {
        int value;
        char raw[64];
    };
};
struct LaunchConfig {
    unsigned gx, gy, gz, bx, by, bz, shared;
    cudaStream_t stream;
    LaunchAttribute* attrs;
    unsigned num_attrs;
};
static_assert(sizeof(LaunchAttribute) == 72 && sizeof(LaunchConfig) == 56, "the driver's launch config layout");
constexpr int kProgrammaticStreamSerialization = 6;   // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
constexpr unsigned kThreads = 256, kCols = 32;   // EPABI_LINEAR_THREADS, EPABI_LINEAR_NN_COLS

// The few NVRTC and driver entry points used, as plain C functions (nvrtc.h and cuda.h declare them so).
using nvrtcCreateProgram_t = int (*)(void**, const char*, const char*, int, const char* const*, const char* const*);
using nvrtcCompileProgram_t = int (*)(void*, int, const char* const*);
using nvrtcGetSize_t = int (*)(void*, size_t*);
using nvrtcGetData_t = int (*)(void*, char*);
using nvrtcDestroyProgram_t = int (*)(void**);
using cuModuleLoadData_t = int (*)(void**, const void*);
using cuModuleGetFunction_t = int (*)(void**, void*, const char*);
using cuLaunchKernel_t = int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                                 void**, void**);
struct LaunchConfig;
using cuLaunchKernelEx_t = int (*)(const LaunchConfig*, void*, void**, void**);

template <typename F> static F sym(void* lib, const char* name) {
    void* p = dlsym(lib, name);
    if (p == nullptr) {
        std::fprintf(stderr, "missing symbol %s\n", name);
        std::exit(1);
    }
    return reinterpret_cast<F>(p);
}

static std::string read_file(const char* path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "cannot read %s\n", path);
        std::exit(2);
    }
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

static float lcg(uint64_t* state) {  // uniform in [-1, 1), the sequence of mlp_graph.cu
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*state >> 40) & 0xFFFFFF) / (float)0x800000 - 1.0f;
}

// NVRTC compiles the kernels for sm_XY (CUBIN), else compute_XY (PTX for the driver's JIT), as cuda_module.c does.
static std::vector<char> compile(void* nvrtc, const std::string& src, const std::string& header,
                                 const std::string& math, int cc, std::string* arch_used) {
    auto create = sym<nvrtcCreateProgram_t>(nvrtc, "nvrtcCreateProgram");
    auto compile_program = sym<nvrtcCompileProgram_t>(nvrtc, "nvrtcCompileProgram");
    auto log_size = sym<nvrtcGetSize_t>(nvrtc, "nvrtcGetProgramLogSize");
    auto log = sym<nvrtcGetData_t>(nvrtc, "nvrtcGetProgramLog");
    auto destroy = sym<nvrtcDestroyProgram_t>(nvrtc, "nvrtcDestroyProgram");
    const char* hsrc[2] = {header.c_str(), math.c_str()};
    const char* hname[2] = {"launch_args.h", "cuda_math.cuh"};
    for (int ptx = 0; ptx < 2; ++ptx) {
        void* prog = nullptr;
        if (create(&prog, src.c_str(), "cuda_kernels.cu", 2, hsrc, hname) != 0) {
            std::fprintf(stderr, "nvrtcCreateProgram failed\n");
            std::exit(1);
        }
        std::string arch = (ptx ? "--gpu-architecture=compute_" : "--gpu-architecture=sm_") + std::to_string(cc);
        const char* opts[] = {arch.c_str(), "-default-device", "--std=c++17"};
        int rc = compile_program(prog, 3, opts);
        if (rc == 0) {
            auto size = sym<nvrtcGetSize_t>(nvrtc, ptx ? "nvrtcGetPTXSize" : "nvrtcGetCUBINSize");
            auto get = sym<nvrtcGetData_t>(nvrtc, ptx ? "nvrtcGetPTX" : "nvrtcGetCUBIN");
            size_t n = 0;
            size(prog, &n);
            std::vector<char> image(n + 1, 0);
            get(prog, image.data());
            destroy(&prog);
            *arch_used = arch.substr(arch.find('=') + 1);
            return image;
        }
        size_t n = 0;
        log_size(prog, &n);
        std::string text(n, '\0');
        if (n > 0) log(prog, &text[0]);
        destroy(&prog);
        if (rc != 5 || ptx) {   // 5: NVRTC_ERROR_INVALID_OPTION, an arch this NVRTC does not know
            std::fprintf(stderr, "NVRTC failed (%d) for %s:\n%s\n", rc, arch.c_str(), text.c_str());
            std::exit(1);
        }
    }
    std::exit(1);
}

int main(int argc, char** argv) {
    if (argc < 8) {
        std::fprintf(stderr, "usage: %s LIBNVRTC KERNELS_CU LAUNCH_ARGS_H LAYERS WIDTH BATCH RUNS [WARMUP]\n", argv[0]);
        return 2;
    }
    const int layers = std::atoi(argv[4]), width = std::atoi(argv[5]), batch = std::atoi(argv[6]);
    const int runs = std::atoi(argv[7]), warmup = argc > 8 ? std::atoi(argv[8]) : 50;
    if (layers < 1 || width < 1 || batch < 1 || batch > 16 || runs < 1 || warmup < 0) {
        std::fprintf(stderr, "LAYERS, WIDTH, RUNS must be >= 1, BATCH 1..16 (the small-kernel path), WARMUP >= 0\n");
        return 2;
    }
    void* nvrtc = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (nvrtc == nullptr || cuda == nullptr) {
        std::fprintf(stderr, "cannot load %s: %s\n", nvrtc == nullptr ? argv[1] : "libcuda.so.1", dlerror());
        return 1;
    }
    CHECK_CUDA(cudaFree(nullptr));   // the primary context, current on this thread (the module loads into it)
    int dev = 0, major = 0, minor = 0;
    CHECK_CUDA(cudaGetDevice(&dev));
    CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CHECK_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    std::string arch;
    // cuda_kernels.cu includes cuda_math.cuh, which sits next to it
    const std::string cu_path = argv[2];
    const size_t slash = cu_path.rfind('/');
    const std::string math_path = (slash == std::string::npos ? std::string(".") : cu_path.substr(0, slash)) +
                                  "/cuda_math.cuh";
    std::vector<char> image = compile(nvrtc, read_file(argv[2]), read_file(argv[3]), read_file(math_path.c_str()),
                                      major * 10 + minor, &arch);

    int tile = 1;
    while (tile < batch) tile <<= 1;
    const std::string kernel = "linear_nn_" + std::to_string(tile);
    void* module = nullptr;
    void* fn = nullptr;
    auto load = sym<cuModuleLoadData_t>(cuda, "cuModuleLoadData");
    auto get_function = sym<cuModuleGetFunction_t>(cuda, "cuModuleGetFunction");
    auto launch = sym<cuLaunchKernel_t>(cuda, "cuLaunchKernel");
    // programmatic dependent launch as the plugin uses it (cuda_launch.c): compute capability 9.0+, EPABI_CUDA_PDL
    auto launch_ex = reinterpret_cast<cuLaunchKernelEx_t>(dlsym(cuda, "cuLaunchKernelEx"));
    const char* pdl_env = std::getenv("EPABI_CUDA_PDL");
    const bool pdl = major >= 9 && launch_ex != nullptr && (pdl_env == nullptr || std::string(pdl_env) != "0");
    int rc = load(&module, image.data());
    if (rc == 0) rc = get_function(&fn, module, kernel.c_str());
    if (rc != 0) {
        std::fprintf(stderr, "loading %s from the NVRTC image failed: CUresult %d\n", kernel.c_str(), rc);
        return 1;
    }

    const size_t wn = (size_t)width * width, an = (size_t)batch * width;
    uint64_t seed = 42;   // the weights, biases and input of mlp_graph.cu
    std::vector<float> h_w((size_t)layers * wn), h_b((size_t)layers * width), h_x(an);
    const float scale = 1.0f / std::sqrt((float)width);
    for (auto& v : h_w) v = lcg(&seed) * scale;
    for (auto& v : h_b) v = lcg(&seed) * 0.1f;
    for (auto& v : h_x) v = lcg(&seed);
    float *d_w = nullptr, *d_b = nullptr, *d_act = nullptr;
    CHECK_CUDA(cudaMalloc(&d_w, h_w.size() * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&d_b, h_b.size() * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&d_act, (size_t)(layers + 1) * an * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(d_w, h_w.data(), h_w.size() * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(d_b, h_b.data(), h_b.size() * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(d_act, h_x.data(), an * sizeof(float), cudaMemcpyHostToDevice));
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    const unsigned gx = (unsigned)((width + kCols - 1) / kCols), gy = (unsigned)((batch + tile - 1) / tile);
    auto enqueue = [&]() {
        for (int l = 0; l < layers; ++l) {
            LinearLaunch L{};
            L.a = d_act + (size_t)l * an;
            L.b = d_w + (size_t)l * wn;
            L.c = d_b + (size_t)l * width;
            L.y = d_act + (size_t)(l + 1) * an;
            L.activation = l + 1 < layers ? kUnRelu : -1;
            L.path = 1;   // LINEAR_PATH_SMALL
            L.m = batch;
            L.n = width;
            L.k = width;
            L.lda = width;
            L.ldb = width;
            L.alpha = 1.0f;
            L.beta = 1.0f;
            L.c_rows = 1;
            L.c_cols = width;
            L.weights_const = 1;
            void* params[] = {&L};
            int r = 0;
            if (pdl) {
                LaunchAttribute attr{};
                attr.id = kProgrammaticStreamSerialization;
                attr.value = 1;
                const LaunchConfig config{gx, gy, 1, kThreads, 1, 1, 0, stream, &attr, 1};
                r = launch_ex(&config, fn, params, nullptr);
            } else {
                r = launch(fn, gx, gy, 1, kThreads, 1, 1, 0, stream, params, nullptr);
            }
            if (r != 0) {
                std::fprintf(stderr, "cuLaunchKernel(%s) failed: CUresult %d\n", kernel.c_str(), r);
                std::exit(1);
            }
        }
    };

    enqueue();
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
        auto t0 = std::chrono::steady_clock::now();
        CHECK_CUDA(cudaGraphLaunch(exec, stream));
        CHECK_CUDA(cudaStreamSynchronize(stream));
        auto t1 = std::chrono::steady_clock::now();
        us[i] = std::chrono::duration<double, std::micro>(t1 - t0).count();
    }

    std::vector<float> out(an);
    CHECK_CUDA(cudaMemcpy(out.data(), d_act + (size_t)layers * an, an * sizeof(float), cudaMemcpyDeviceToHost));
    std::vector<double> cur(h_x.begin(), h_x.end()), next(an);
    for (int l = 0; l < layers; ++l) {
        for (int b = 0; b < batch; ++b)
            for (int j = 0; j < width; ++j) {
                double acc = h_b[(size_t)l * width + j];
                for (int k = 0; k < width; ++k)
                    acc += cur[(size_t)b * width + k] * h_w[(size_t)l * wn + (size_t)k * width + j];
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
    std::printf("{\"layers\": %d, \"width\": %d, \"batch\": %d, \"kernel\": \"%s\", \"arch\": \"%s\", \"pdl\": %s, "
                "\"kernels_per_run\": %zu, \"runs\": %d, \"median_us\": %.3f, \"mean_us\": %.3f, \"min_us\": %.3f, "
                "\"p90_us\": %.3f, \"max_abs_err\": %.3g}\n",
                layers, width, batch, kernel.c_str(), arch.c_str(), pdl ? "true" : "false", nodes, runs, sorted[runs / 2],
                mean, sorted[0],
                sorted[std::min(runs - 1, (int)(runs * 0.9))], err);

    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(graph));
    CHECK_CUDA(cudaStreamDestroy(stream));
    CHECK_CUDA(cudaFree(d_act));
    CHECK_CUDA(cudaFree(d_b));
    CHECK_CUDA(cudaFree(d_w));
    return 0;
}
