/*
 * cuda_cudnn_load.c - finding and loading cuDNN 9 (see cuda_cudnn.h): the folders in search order, the
 * sub-libraries next to the dispatcher, the symbol table. Uses nothing but dlopen, so it runs (and is tested,
 * tests/native/cudnn_loader_unit.c) without a GPU or a CUDA driver.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* dladdr */
#endif
#include "cuda_cudnn.h"

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DIRS = 12, DIR_LEN = 512, MAX_SUBLIBS = 16 };

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct epabi_cudnn g_cudnn;      /* written once under g_once, read-only afterwards */
static const struct epabi_cudnn* g_loaded;
static char g_why[768];

struct dirs {
    char path[MAX_DIRS][DIR_LEN];
    int n;
};

static void add_dir(struct dirs* d, const char* a, const char* b) {
    if (d->n >= MAX_DIRS || a == NULL || a[0] == '\0') return;
    int len = snprintf(d->path[d->n], DIR_LEN, "%s%s", a, b != NULL ? b : "");
    if (len > 0 && len < DIR_LEN) d->n++;
}

/* <site-packages> of this library when installed as <site-packages>/epabi/<lib>.so: the nvidia-cudnn-cu12/-cu13
 * wheels put libcudnn.so.9 in nvidia/cudnn/lib. */
static void add_wheel_dirs(struct dirs* d) {
    Dl_info info;
    if (dladdr((void*)&add_wheel_dirs, &info) == 0 || info.dli_fname == NULL) return;
    char site[DIR_LEN];
    snprintf(site, sizeof site, "%s", info.dli_fname);
    for (int up = 0; up < 2; ++up) {
        char* slash = strrchr(site, '/');
        if (slash == NULL) return;
        *slash = '\0';
    }
    static const char* const kSub[] = {"/nvidia/cudnn/lib", "/nvidia/cu13/lib", "/nvidia/cu12/lib"};
    for (size_t i = 0; i < sizeof kSub / sizeof kSub[0]; ++i) add_dir(d, site, kSub[i]);
}

static void why(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void why(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_why, sizeof g_why, fmt, ap);
    va_end(ap);
}

/* Every libcudnn_<name>.so.9 in dir, libcudnn_graph first (the others need it): loaded so that the dispatcher's own
 * dlopen of each by soname finds this copy. A sub-library that fails to load is left to cuDNN (it reports
 * CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED when it needs it). The handles stay open for the process. */
static int preload_sublibraries(const char* dir) {
    DIR* dp = opendir(dir);
    if (dp == NULL) return 0;
    char names[MAX_SUBLIBS][128];
    int n = 0;
    for (struct dirent* e = readdir(dp); e != NULL && n < MAX_SUBLIBS; e = readdir(dp)) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "libcudnn_", 9) != 0 || len < 6 || len >= sizeof names[0] ||
            strcmp(e->d_name + len - 5, ".so.9") != 0)
            continue;
        memcpy(names[n++], e->d_name, len + 1);
    }
    closedir(dp);
    int loaded = 0;
    for (int pass = 0; pass < 2; ++pass) {
        for (int i = 0; i < n; ++i) {
            bool graph = strcmp(names[i], "libcudnn_graph.so.9") == 0;
            if (graph != (pass == 0)) continue;
            char path[DIR_LEN + 160];
            int len = snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            if (len > 0 && (size_t)len < sizeof path && dlopen(path, RTLD_NOW | RTLD_LOCAL) != NULL) ++loaded;
        }
    }
    return loaded;
}

/* object-to-function pointer conversion through memcpy: ISO C has no direct cast */
#define LOAD(field, name)                                                       \
    do {                                                                        \
        void* p_ = dlsym(lib, (name));                                          \
        if (p_ == NULL) {                                                       \
            why("%s lacks the symbol %s", g_cudnn.path, (name));                \
            return false;                                                       \
        }                                                                       \
        memcpy(&g_cudnn.field, &p_, sizeof p_);                                 \
    } while (0)

static bool resolve(void* lib) {
    LOAD(GetVersion, "cudnnGetVersion");
    LOAD(GetCudartVersion, "cudnnGetCudartVersion");
    LOAD(GetErrorString, "cudnnGetErrorString");
    LOAD(Create, "cudnnCreate");
    LOAD(Destroy, "cudnnDestroy");
    LOAD(SetStream, "cudnnSetStream");
    LOAD(CreateTensorDescriptor, "cudnnCreateTensorDescriptor");
    LOAD(SetTensor4dDescriptor, "cudnnSetTensor4dDescriptor");
    LOAD(DestroyTensorDescriptor, "cudnnDestroyTensorDescriptor");
    LOAD(CreateFilterDescriptor, "cudnnCreateFilterDescriptor");
    LOAD(SetFilter4dDescriptor, "cudnnSetFilter4dDescriptor");
    LOAD(DestroyFilterDescriptor, "cudnnDestroyFilterDescriptor");
    LOAD(CreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor");
    LOAD(SetConvolution2dDescriptor, "cudnnSetConvolution2dDescriptor");
    LOAD(SetConvolutionGroupCount, "cudnnSetConvolutionGroupCount");
    LOAD(SetConvolutionMathType, "cudnnSetConvolutionMathType");
    LOAD(GetConvolution2dForwardOutputDim, "cudnnGetConvolution2dForwardOutputDim");
    LOAD(DestroyConvolutionDescriptor, "cudnnDestroyConvolutionDescriptor");
    LOAD(CreateActivationDescriptor, "cudnnCreateActivationDescriptor");
    LOAD(SetActivationDescriptor, "cudnnSetActivationDescriptor");
    LOAD(DestroyActivationDescriptor, "cudnnDestroyActivationDescriptor");
    LOAD(GetConvolutionForwardAlgorithm_v7, "cudnnGetConvolutionForwardAlgorithm_v7");
    LOAD(GetConvolutionForwardWorkspaceSize, "cudnnGetConvolutionForwardWorkspaceSize");
    LOAD(ConvolutionForward, "cudnnConvolutionForward");
    LOAD(ConvolutionBiasActivationForward, "cudnnConvolutionBiasActivationForward");
    LOAD(AddTensor, "cudnnAddTensor");
    return true;
}

#undef LOAD

/* The first folder holding a loadable libcudnn.so.9, else the plain soname; NULL when none loads. */
static void* open_cudnn(const struct dirs* d, bool system) {
    static const char kSoname[] = "libcudnn.so.9";
    for (int i = 0; i < d->n; ++i) {
        char path[DIR_LEN + 32];
        int len = snprintf(path, sizeof path, "%s/%s", d->path[i], kSoname);
        if (len < 0 || (size_t)len >= sizeof g_cudnn.path) continue;   /* too long to report: skip it */
        void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h != NULL) {
            memcpy(g_cudnn.path, path, (size_t)len + 1);
            return h;
        }
    }
    if (!system) return NULL;
    void* h = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) return NULL;
    Dl_info info;
    void* any = dlsym(h, "cudnnGetVersion");
    snprintf(g_cudnn.path, sizeof g_cudnn.path, "%s",
             any != NULL && dladdr(any, &info) != 0 && info.dli_fname != NULL ? info.dli_fname : kSoname);
    return h;
}

static void load(void) {
    const char* off = getenv("EPABI_CUDNN");
    if (off != NULL && strcmp(off, "0") == 0) {
        why("EPABI_CUDNN=0");
        return;
    }
    struct dirs* d = calloc(1, sizeof *d);
    if (d == NULL) {
        why("out of memory");
        return;
    }
    const char* only = getenv("EPABI_CUDNN_LIB_DIR");
    bool system = only == NULL || only[0] == '\0';
    if (!system) {
        add_dir(d, only, NULL);
    } else {
        add_dir(d, getenv("EPABI_CUDA_LIB_DIR"), NULL);
        add_wheel_dirs(d);
        add_dir(d, getenv("CUDA_HOME"), "/lib64");
        add_dir(d, getenv("CUDA_PATH"), "/lib64");
        add_dir(d, "/usr/local/cuda/lib64", NULL);
    }
    /* the sub-libraries first: the dispatcher may open some while it loads */
    for (int i = 0; i < d->n; ++i) {
        char probe[DIR_LEN + 32];
        snprintf(probe, sizeof probe, "%s/libcudnn.so.9", d->path[i]);
        FILE* f = fopen(probe, "rb");
        if (f == NULL) continue;
        fclose(f);
        g_cudnn.sublibraries = preload_sublibraries(d->path[i]);
        break;
    }
    void* lib = open_cudnn(d, system);
    free(d);
    if (lib == NULL) {
        if (system)
            why("libcudnn.so.9 was not found (pip install nvidia-cudnn-cu12 or nvidia-cudnn-cu13, or set "
                "EPABI_CUDNN_LIB_DIR)");
        else
            why("libcudnn.so.9 was not found in EPABI_CUDNN_LIB_DIR=%s", only);
        return;
    }
    if (!resolve(lib)) {
        dlclose(lib);
        return;
    }
    g_cudnn.version = g_cudnn.GetVersion();
    g_cudnn.cudart_version = g_cudnn.GetCudartVersion();
    if (g_cudnn.version / 10000 != 9) {
        why("%s reports version %zu; epabi uses cuDNN 9", g_cudnn.path, g_cudnn.version);
        dlclose(lib);
        return;
    }
    g_loaded = &g_cudnn;
}

const struct epabi_cudnn* epabi_cudnn_load(const char** reason) {
    pthread_once(&g_once, load);
    if (reason != NULL) *reason = g_why;
    return g_loaded;
}
