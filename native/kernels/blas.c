/*
 * blas.c - see blas.h. Each candidate is dlopen'ed (RTLD_LOCAL: its symbols stay out of the host's namespace) and
 * kept only when it exports cblas_sgemm, under the plain name or scipy-openblas's "scipy_" prefix.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* dladdr */
#endif
#include "blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct epabi_blas g_blas;     /* written once under g_once, read-only afterwards */
static char g_summary[1024];

/* object-to-function pointer conversion through memcpy: ISO C has no direct cast */
static void* sym(void* lib, const char* prefix, const char* name) {
    char full[96];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return dlsym(lib, full);
}

/* src into dst[cap], cut to fit */
static void copy(char* dst, size_t cap, const char* src) {
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void why(const char* fmt, const char* a) {
    size_t used = strlen(g_blas.why);
    if (used + 3 >= sizeof g_blas.why) return;
    if (used > 0) {
        memcpy(g_blas.why + used, "; ", 3);
        used += 2;
    }
    snprintf(g_blas.why + used, sizeof g_blas.why - used, fmt, a);
}

/* Loads `file`; keeps it (true) when it has cblas_sgemm. Sets it to one thread when it can. A file that does not
 * load is a reason only when `missing_is_news` (the system candidates are mostly absent, and that is normal). */
static bool try_lib(const char* file, const char* source, bool missing_is_news) {
    void* lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char* err = dlerror();
        if (missing_is_news) why("%s", err != NULL ? err : file);
        return false;
    }
    static const char* const kPrefixes[] = {"", "scipy_"};
    const char* prefix = NULL;
    void* gemm = NULL;
    for (size_t i = 0; i < sizeof kPrefixes / sizeof kPrefixes[0] && gemm == NULL; ++i) {
        gemm = sym(lib, kPrefixes[i], "cblas_sgemm");
        if (gemm != NULL) prefix = kPrefixes[i];
    }
    if (gemm == NULL) {
        why("%s has no cblas_sgemm", file);
        dlclose(lib);
        return false;
    }
    memcpy(&g_blas.sgemm, &gemm, sizeof gemm);
    g_blas.source = source;
    Dl_info info;
    copy(g_blas.path, sizeof g_blas.path, dladdr(gemm, &info) != 0 && info.dli_fname != NULL ? info.dli_fname : file);

    static const char* const kThreadControls[] = {"openblas_set_num_threads", "bli_thread_set_num_threads",
                                                  "flexiblas_set_num_threads"};
    for (size_t i = 0; i < sizeof kThreadControls / sizeof kThreadControls[0]; ++i) {
        void* p = sym(lib, prefix, kThreadControls[i]);
        if (p == NULL) continue;
        void (*set_threads)(int);
        memcpy(&set_threads, &p, sizeof p);
        set_threads(1);
        break;
    }
    void* p = sym(lib, prefix, "openblas_get_config");
    const char* base = strrchr(g_blas.path, '/');
    copy(g_blas.config, sizeof g_blas.config, base != NULL ? base + 1 : g_blas.path);
    if (p != NULL) {
        char* (*get_config)(void);
        memcpy(&get_config, &p, sizeof p);
        const char* c = get_config();
        if (c != NULL && c[0] != '\0') copy(g_blas.config, sizeof g_blas.config, c);
    }
    return true;   /* kept loaded for the life of the process */
}

/* <site-packages>/scipy_openblas32/lib/libscipy_openblas.so when this library is <site-packages>/epabi/<lib>.so */
static bool try_wheel(void) {
    Dl_info info;
    if (dladdr((void*)&try_wheel, &info) == 0 || info.dli_fname == NULL) return false;
    char path[600];
    copy(path, sizeof path, info.dli_fname);
    for (int up = 0; up < 2; ++up) {   /* strip the file name, then the package folder */
        char* slash = strrchr(path, '/');
        if (slash == NULL) return false;
        *slash = '\0';
    }
    size_t used = strlen(path);
    static const char kSub[] = "/scipy_openblas32/lib/libscipy_openblas.so";
    if (used + sizeof kSub > sizeof path) return false;
    memcpy(path + used, kSub, sizeof kSub);
    if (try_lib(path, "scipy-openblas32 wheel", false)) return true;
    why("%s", "no scipy-openblas32 wheel next to epabi (pip install scipy-openblas32)");
    return false;
}

static void load(void) {
    g_blas.source = "built-in";
    const char* env = getenv("EPABI_BLAS");
    if (env != NULL && (strcmp(env, "none") == 0 || strcmp(env, "builtin") == 0)) {
        why("EPABI_BLAS=%s", env);
    } else if (env != NULL && env[0] != '\0' && strcmp(env, "auto") != 0) {
        if (!try_lib(env, "EPABI_BLAS", true)) why("EPABI_BLAS=%s is not a CBLAS library", env);
    } else if (!try_wheel()) {
        static const char* const kSystem[] = {"libopenblas.so.0", "libopenblas.so", "libblis.so.4",
                                              "libflexiblas.so.3", "libcblas.so.3", "libblas.so.3"};
        bool found = false;
        for (size_t i = 0; i < sizeof kSystem / sizeof kSystem[0] && !found; ++i)
            found = try_lib(kSystem[i], "system", false);
        if (!found) why("%s", "no system CBLAS (libopenblas.so.0, libblis.so.4, libblas.so.3, ...)");
    }
    if (g_blas.sgemm != NULL) {
        g_blas.why[0] = '\0';
        snprintf(g_summary, sizeof g_summary, "%s (%s: %s)", g_blas.config, g_blas.source, g_blas.path);
    } else {
        snprintf(g_summary, sizeof g_summary, "built-in loop (%s)", g_blas.why);
    }
}

const struct epabi_blas* epabi_blas(void) {
    pthread_once(&g_once, load);
    return &g_blas;
}

const char* epabi_blas_summary(void) {
    pthread_once(&g_once, load);
    return g_summary;
}
