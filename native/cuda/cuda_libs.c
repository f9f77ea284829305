/*
 * cuda_libs.c - see cuda_libs.h. The search order is built once into a list of folders; each library tries
 * every folder with every soname, then the plain sonames (the system search path).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* dladdr */
#endif
#include "cuda_libs.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

enum { MAX_DIRS = 16, PATH_LEN = 512 };

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct epabi_cuda_libs g_libs;   /* written once under g_once, read-only afterwards */
static struct epabi_nvrtc g_nvrtc;
static struct epabi_cublas g_cublas;
static struct epabi_cudart g_cudart;
static struct epabi_cublaslt g_cublaslt;

struct dirs {
    char path[MAX_DIRS][PATH_LEN];
    int n;
};

static void add_dir(struct dirs* d, const char* a, const char* b) {
    if (d->n >= MAX_DIRS || a == NULL || a[0] == '\0') return;
    int len = snprintf(d->path[d->n], PATH_LEN, "%s%s", a, b != NULL ? b : "");
    if (len > 0 && len < PATH_LEN) d->n++;
}

/* <site-packages> of this library when it is installed as <site-packages>/epabi/<lib>.so */
static void add_wheel_dirs(struct dirs* d) {
    Dl_info info;
    if (dladdr((void*)&add_wheel_dirs, &info) == 0 || info.dli_fname == NULL) return;
    char site[PATH_LEN];
    snprintf(site, sizeof site, "%s", info.dli_fname);
    for (int up = 0; up < 2; ++up) {   /* strip the file name, then the package folder */
        char* slash = strrchr(site, '/');
        if (slash == NULL) return;
        *slash = '\0';
    }
    static const char* const kSub[] = {"/nvidia/cu13/lib",      "/nvidia/cuda_nvrtc/lib", "/nvidia/cublas/lib",
                                       "/nvidia/cuda_runtime/lib", "/nvidia/cu12/lib"};
    for (size_t i = 0; i < sizeof kSub / sizeof kSub[0]; ++i) add_dir(d, site, kSub[i]);
}

static void build_dirs(struct dirs* d) {
    memset(d, 0, sizeof *d);
    add_dir(d, getenv("EPABI_CUDA_LIB_DIR"), NULL);
    add_wheel_dirs(d);
    add_dir(d, getenv("CUDA_HOME"), "/lib64");
    add_dir(d, getenv("CUDA_PATH"), "/lib64");
    add_dir(d, "/usr/local/cuda/lib64", NULL);
}

/* Tries dir/soname for every dir, then soname alone; records the path that loaded. */
static void* open_lib(const struct dirs* d, const char* const* sonames, char* found, size_t found_len) {
    char path[PATH_LEN + 64];
    for (int i = 0; i < d->n; ++i) {
        for (const char* const* s = sonames; *s != NULL; ++s) {
            int len = snprintf(path, sizeof path, "%s/%s", d->path[i], *s);
            if (len < 0 || (size_t)len >= found_len) continue;   /* too long to report: skip it */
            void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h != NULL) {
                memcpy(found, path, (size_t)len + 1);
                return h;
            }
        }
    }
    for (const char* const* s = sonames; *s != NULL; ++s) {
        void* h = dlopen(*s, RTLD_NOW | RTLD_LOCAL);
        if (h != NULL) {
            Dl_info info;
            void* any = dlsym(h, "nvrtcVersion");
            if (any == NULL) any = dlsym(h, "cublasCreate_v2");
            if (any == NULL) any = dlsym(h, "cudaRuntimeGetVersion");
            if (any == NULL) any = dlsym(h, "cublasLtCreate");
            snprintf(found, found_len, "%s", any != NULL && dladdr(any, &info) != 0 && info.dli_fname != NULL
                                                 ? info.dli_fname
                                                 : *s);
            return h;
        }
    }
    return NULL;
}

static void append_why(const char* fmt, const char* a) {
    size_t used = strlen(g_libs.why);
    if (used + 2 >= sizeof g_libs.why) return;
    snprintf(g_libs.why + used, sizeof g_libs.why - used, "%s", used > 0 ? "; " : "");
    used = strlen(g_libs.why);
    snprintf(g_libs.why + used, sizeof g_libs.why - used, fmt, a);
}

/* object-to-function pointer conversion through memcpy: ISO C has no direct cast */
#define LOAD(lib, table, field, name)                                  \
    do {                                                               \
        void* p_ = dlsym((lib), (name));                               \
        if (p_ == NULL) {                                              \
            append_why("%s lacks a symbol", #table);                   \
            ok = false;                                                \
        } else {                                                       \
            memcpy(&(table).field, &p_, sizeof p_);                    \
        }                                                              \
    } while (0)

static void load_nvrtc(const struct dirs* d) {
    static const char* const kNames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", NULL};
    void* lib = open_lib(d, kNames, g_libs.nvrtc_path, sizeof g_libs.nvrtc_path);
    if (lib == NULL) {
        append_why("%s", "NVRTC (libnvrtc.so.13/.12) was not found: set CUDA_HOME or install nvidia-cuda-nvrtc");
        return;
    }
    bool ok = true;
    LOAD(lib, g_nvrtc, Version, "nvrtcVersion");
    LOAD(lib, g_nvrtc, CreateProgram, "nvrtcCreateProgram");
    LOAD(lib, g_nvrtc, CompileProgram, "nvrtcCompileProgram");
    LOAD(lib, g_nvrtc, GetCUBINSize, "nvrtcGetCUBINSize");
    LOAD(lib, g_nvrtc, GetCUBIN, "nvrtcGetCUBIN");
    LOAD(lib, g_nvrtc, GetPTXSize, "nvrtcGetPTXSize");
    LOAD(lib, g_nvrtc, GetPTX, "nvrtcGetPTX");
    LOAD(lib, g_nvrtc, GetProgramLogSize, "nvrtcGetProgramLogSize");
    LOAD(lib, g_nvrtc, GetProgramLog, "nvrtcGetProgramLog");
    LOAD(lib, g_nvrtc, DestroyProgram, "nvrtcDestroyProgram");
    LOAD(lib, g_nvrtc, GetErrorString, "nvrtcGetErrorString");
    if (!ok || g_nvrtc.Version(&g_nvrtc.major, &g_nvrtc.minor) != 0) return;
    g_libs.nvrtc = &g_nvrtc;
}

static void load_cudart(const struct dirs* d) {
    /* loaded first and global: cuBLAS of some installations resolves the runtime from the process */
    static const char* const kNames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so", NULL};
    void* lib = open_lib(d, kNames, g_libs.cudart_path, sizeof g_libs.cudart_path);
    if (lib == NULL) {
        append_why("%s", "the CUDA runtime (libcudart.so.13/.12) was not found");
        return;
    }
    bool ok = true;
    LOAD(lib, g_cudart, RuntimeGetVersion, "cudaRuntimeGetVersion");
    if (!ok || g_cudart.RuntimeGetVersion(&g_cudart.version) != 0) return;
    g_libs.cudart = &g_cudart;
}

static void load_cublas(const struct dirs* d) {
    static const char* const kNames[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so", NULL};
    void* lib = open_lib(d, kNames, g_libs.cublas_path, sizeof g_libs.cublas_path);
    if (lib == NULL) {
        append_why("%s", "cuBLAS (libcublas.so.13/.12) was not found: MatMul/Gemm use epabi's own CUDA kernel");
        return;
    }
    bool ok = true;
    LOAD(lib, g_cublas, Create, "cublasCreate_v2");
    LOAD(lib, g_cublas, Destroy, "cublasDestroy_v2");
    LOAD(lib, g_cublas, SetStream, "cublasSetStream_v2");
    LOAD(lib, g_cublas, SetWorkspace, "cublasSetWorkspace_v2");
    LOAD(lib, g_cublas, GetVersion, "cublasGetVersion_v2");
    LOAD(lib, g_cublas, Sgemm, "cublasSgemm_v2");
    LOAD(lib, g_cublas, SgemmStridedBatched, "cublasSgemmStridedBatched");
    if (!ok) return;
    g_libs.cublas = &g_cublas;
}

/* Optional: without it large linear steps run cuBLAS and a bias/activation kernel. Not a reason in `why`. */
static void load_cublaslt(const struct dirs* d) {
    const char* off = getenv("EPABI_CUBLASLT");
    if (off != NULL && strcmp(off, "0") == 0) return;
    static const char* const kNames[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so", NULL};
    void* lib = open_lib(d, kNames, g_libs.cublaslt_path, sizeof g_libs.cublaslt_path);
    if (lib == NULL) return;
    bool ok = true;
    LOAD(lib, g_cublaslt, GetVersion, "cublasLtGetVersion");
    LOAD(lib, g_cublaslt, Create, "cublasLtCreate");
    LOAD(lib, g_cublaslt, Destroy, "cublasLtDestroy");
    LOAD(lib, g_cublaslt, MatmulDescCreate, "cublasLtMatmulDescCreate");
    LOAD(lib, g_cublaslt, MatmulDescDestroy, "cublasLtMatmulDescDestroy");
    LOAD(lib, g_cublaslt, MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
    LOAD(lib, g_cublaslt, MatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
    LOAD(lib, g_cublaslt, MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
    LOAD(lib, g_cublaslt, MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
    LOAD(lib, g_cublaslt, MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
    LOAD(lib, g_cublaslt, MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
    LOAD(lib, g_cublaslt, MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
    LOAD(lib, g_cublaslt, Matmul, "cublasLtMatmul");
    if (!ok) {
        g_libs.cublaslt_path[0] = '\0';
        return;
    }
    g_cublaslt.version = g_cublaslt.GetVersion();
    g_libs.cublaslt = &g_cublaslt;
}

#undef LOAD

static void load(void) {
    char why[256] = "";
    g_libs.cu = epabi_cuda_driver(why, sizeof why);
    if (g_libs.cu == NULL) {
        append_why("%s", why);
        return;   /* without the driver the toolkit libraries are of no use */
    }
    struct dirs* d = malloc(sizeof *d);
    if (d == NULL) {
        append_why("%s", "out of memory");
        return;
    }
    build_dirs(d);
    load_cudart(d);
    load_nvrtc(d);
    load_cublas(d);
    load_cublaslt(d);
    free(d);
}

const struct epabi_cuda_libs* epabi_cuda_libs(void) {
    pthread_once(&g_once, load);
    return &g_libs;
}
