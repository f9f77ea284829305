/*
 * cuda_module.c - epabi_cuda_module_get: NVRTC compiles cuda_kernels.cu once per device and process, the
 * driver loads it, and every kernel of EPABI_CUDA_KERNEL_LIST is looked up once into the module's table.
 *
 * Compilation: the embedded source, with the embedded launch_args.h and cuda_math.cuh as the in-memory headers
 * "launch_args.h" and "cuda_math.cuh", for --gpu-architecture=sm_XY (XY: the device's compute capability) into CUBIN. When
 * this NVRTC does not know sm_XY (NVRTC_ERROR_INVALID_OPTION: a device newer than the toolkit), it
 * compiles PTX for compute_XY instead, and failing that for the newest older virtual arch it knows, which
 * the driver JIT-compiles for the device. No fast math: results must match the CPU kernels. A compile
 * error is reported with the head of NVRTC's log (the first errors) and remembered for the device, so
 * later calls fail at once with the same message instead of recompiling; driver errors are not
 * remembered (they may be transient, e.g. out of memory).
 *
 * Lifetime: a module is loaded into the device's primary context, which cuda_device.c retains for the life
 * of the process, so the context, and with it the module and its functions, cannot be destroyed under a
 * launch. Modules are never unloaded: they live until the process exits (the driver frees them then).
 *
 * epabi_cuda_program_load compiles other programs (the elementwise chains' own kernels, cuda_chain_jit.c) the same
 * way, with the same headers.
 *
 * Thread-safety: one mutex guards the table; compilation happens under it (NVRTC takes seconds, once).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_launch_internal.h"
#include "ep_factory.h"   /* EPABI_EP_NAME */

/* NVRTC options besides --gpu-architecture (tools/check_nvrtc.py reads this line and compiles with it). */
#define EPABI_NVRTC_OPTIONS "-default-device", "--std=c++17"

enum {
    MAX_DEVICES = 64,
    LOG_CHARS = 640,            /* of NVRTC's log in an error (epabi_error formats at most 1 KiB) */
    NVRTC_INVALID_OPTION = 5    /* NVRTC_ERROR_INVALID_OPTION: e.g. an arch this NVRTC does not know */
};

static const char* const kKernelNames[EPABI_CK_COUNT] = {
#define EPABI_CK_NAME_(name) #name,
    EPABI_CUDA_KERNEL_LIST(EPABI_CK_NAME_)
#undef EPABI_CK_NAME_
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct epabi_cuda_module* g_modules[MAX_DEVICES];   /* under g_lock; never freed */
static char* g_compile_error[MAX_DEVICES];                 /* a remembered NVRTC failure, or NULL */

/* Virtual archs tried, newest first, when NVRTC knows neither sm_XY nor compute_XY of the device. */
static const int kFallbackArchs[] = {121, 120, 110, 103, 101, 100, 90, 89, 87, 86, 80, 75, 72, 70, 61, 60, 53, 52};

/* One NVRTC compilation. On success *image is malloc'ed (CUBIN, or NUL-terminated PTX) and 0 is returned;
 * otherwise the NVRTC result, with the head of the log in `log`. */
static int nvrtc_build(const struct epabi_nvrtc* nv, const char* source, const char* name, const char* arch, bool ptx,
                       char** image, char* log, size_t log_len) {
    *image = NULL;
    log[0] = '\0';
    epabi_nvrtc_program prog = NULL;
    const char* header_src[2] = {epabi_launch_args_source, epabi_cuda_math_source};
    const char* header_name[2] = {"launch_args.h", "cuda_math.cuh"};
    int rc = nv->CreateProgram(&prog, source, name, 2, header_src, header_name);
    if (rc != 0) {
        snprintf(log, log_len, "nvrtcCreateProgram: %s", nv->GetErrorString(rc));
        return rc;
    }
    char arch_opt[48];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
    const char* options[] = {arch_opt, EPABI_NVRTC_OPTIONS};
    rc = nv->CompileProgram(prog, (int)(sizeof options / sizeof options[0]), options);
    if (rc != 0) {
        size_t n = 0;
        if (nv->GetProgramLogSize(prog, &n) == 0 && n > 1) {
            char* full = malloc(n);
            if (full != NULL && nv->GetProgramLog(prog, full) == 0) {
                full[n - 1] = '\0';
                snprintf(log, log_len, "%s", full);
                if (strlen(full) >= log_len && log_len > 4) memcpy(log + log_len - 4, "...", 4);
            }
            free(full);
        }
        nv->DestroyProgram(&prog);
        return rc;
    }
    size_t size = 0;
    rc = ptx ? nv->GetPTXSize(prog, &size) : nv->GetCUBINSize(prog, &size);
    if (rc == 0) {
        *image = malloc(size + 1);
        if (*image == NULL) {
            rc = 1;   /* NVRTC_ERROR_OUT_OF_MEMORY */
        } else {
            rc = ptx ? nv->GetPTX(prog, *image) : nv->GetCUBIN(prog, *image);
            (*image)[size] = '\0';
        }
    }
    if (rc != 0) {
        snprintf(log, log_len, "fetching the %s: %s", ptx ? "PTX" : "CUBIN", nv->GetErrorString(rc));
        free(*image);
        *image = NULL;
    }
    nv->DestroyProgram(&prog);
    return rc;
}

/* Compiles for compute capability cc (e.g. 90): sm_cc, else compute_cc, else an older virtual arch. On
 * failure returns a malloc'ed message (NULL on success, with *image, *ptx and the arch used). */
static char* compile_for(const struct epabi_nvrtc* nv, const char* source, const char* name, int cc, char** image,
                         bool* ptx, char* arch, size_t arch_len) {
    char log[LOG_CHARS + 1];
    snprintf(arch, arch_len, "sm_%d", cc);
    *ptx = false;
    int rc = nvrtc_build(nv, source, name, arch, false, image, log, sizeof log);
    if (rc == NVRTC_INVALID_OPTION) {
        *ptx = true;
        snprintf(arch, arch_len, "compute_%d", cc);
        rc = nvrtc_build(nv, source, name, arch, true, image, log, sizeof log);
        for (size_t i = 0; rc == NVRTC_INVALID_OPTION && i < sizeof kFallbackArchs / sizeof kFallbackArchs[0]; ++i) {
            if (kFallbackArchs[i] >= cc) continue;
            snprintf(arch, arch_len, "compute_%d", kFallbackArchs[i]);
            rc = nvrtc_build(nv, source, name, arch, true, image, log, sizeof log);
        }
        if (rc == NVRTC_INVALID_OPTION) snprintf(arch, arch_len, "sm_%d", cc);
    }
    if (rc == 0) return NULL;
    char msg[LOG_CHARS + 256];
    if (rc == NVRTC_INVALID_OPTION)
        snprintf(msg, sizeof msg, "NVRTC %d.%d knows no architecture for this device (sm_%d, compute capability %d.%d)",
                 nv->major, nv->minor, cc, cc / 10, cc % 10);
    else
        snprintf(msg, sizeof msg, "NVRTC %d.%d could not compile %s for %s (%s): %s", nv->major, nv->minor, name, arch,
                 nv->GetErrorString(rc), log);
    char* out = malloc(strlen(msg) + 1);
    if (out != NULL) strcpy(out, msg);
    return out;
}

/* Compiles and loads the module of device d; called under g_lock. */
static OrtStatus* build_module(const struct epabi_api* api, const struct epabi_cuda_device* d,
                               struct epabi_cuda_module** out) {
    const struct epabi_cuda_libs* libs = d->libs;
    const struct epabi_cuda_driver* cu = libs->cu;
    const int ordinal = d->ordinal, major = d->cc_major, minor = d->cc_minor;
    epabi_cu_result r = 0;

    char* image = NULL;
    bool ptx = false;
    char arch[32];
    char* failure = compile_for(libs->nvrtc, epabi_cuda_kernels_source, "cuda_kernels.cu", major * 10 + minor, &image,
                                &ptx, arch, sizeof arch);
    if (failure != NULL || image == NULL) {
        g_compile_error[ordinal] = failure;   /* deterministic: remembered */
        return epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": CUDA device %d: %s", ordinal,
                           failure != NULL ? failure : "NVRTC compilation failed (out of memory)");
    }

    struct epabi_cuda_module* m = calloc(1, sizeof *m);
    if (m == NULL) {
        free(image);
        return epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": out of memory for the CUDA module");
    }
    m->ordinal = ordinal;
    m->cc_major = major;
    m->cc_minor = minor;
    m->from_ptx = ptx;

    struct epabi_cuda_scope scope;
    if (!epabi_cuda_enter(d, &scope)) {
        free(image);
        free(m);
        return epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": making CUDA device %d current failed", ordinal);
    }
    r = cu->ModuleLoadData(&m->module, image);
    free(image);
    int missing = -1;
    for (int i = 0; r == 0 && i < EPABI_CK_COUNT; ++i) {
        r = cu->ModuleGetFunction(&m->fn[i], m->module, kKernelNames[i]);
        if (r != 0) missing = i;
    }
    if (r != 0 && m->module != NULL) cu->ModuleUnload(m->module);
    epabi_cuda_leave(&scope);
    if (r != 0) {
        OrtStatus* st;
        if (missing >= 0)
            st = epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": the CUDA kernel '%s' is missing from the module: %s",
                             kKernelNames[missing], epabi_cuda_error_text(cu, r));
        else
            st = epabi_error(api, ORT_EP_FAIL,
                             EPABI_EP_NAME ": loading the CUDA kernels (%s, from NVRTC %d.%d) on device %d failed: %s "
                             "(the driver, version %d, may be older than NVRTC)",
                             arch, libs->nvrtc->major, libs->nvrtc->minor, ordinal, epabi_cuda_error_text(cu, r),
                             cu->version);
        free(m);
        return st;
    }
    *out = m;
    return NULL;
}

OrtStatus* epabi_cuda_module_get(const struct epabi_api* api, const struct epabi_cuda_device* device,
                                 struct epabi_cuda_module** out) {
    *out = NULL;
    const struct epabi_cuda_libs* libs = device->libs;
    const int ordinal = device->ordinal;
    if (libs == NULL || libs->cu == NULL || libs->nvrtc == NULL)
        return epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": the CUDA kernels need the driver and NVRTC: %s",
                           libs != NULL && libs->why[0] != '\0' ? libs->why : "not loaded");
    if (ordinal < 0 || ordinal >= MAX_DEVICES)
        return epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": CUDA device %d is beyond the %d devices supported",
                           ordinal, MAX_DEVICES);
    OrtStatus* st = NULL;
    pthread_mutex_lock(&g_lock);
    if (g_modules[ordinal] != NULL) {
        *out = g_modules[ordinal];
    } else if (g_compile_error[ordinal] != NULL) {
        st = epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": CUDA device %d: %s", ordinal, g_compile_error[ordinal]);
    } else {
        st = build_module(api, device, &g_modules[ordinal]);
        *out = g_modules[ordinal];
    }
    pthread_mutex_unlock(&g_lock);
    return st;
}

OrtStatus* epabi_cuda_program_load(const struct epabi_api* api, const struct epabi_cuda_libs* libs,
                                   const struct epabi_cuda_module* kernels, const char* source, const char* name,
                                   epabi_cu_module* out) {
    *out = NULL;
    char* image = NULL;
    bool ptx = false;
    char arch[32];
    char* failure = compile_for(libs->nvrtc, source, name, kernels->cc_major * 10 + kernels->cc_minor, &image, &ptx,
                                arch, sizeof arch);
    if (failure != NULL || image == NULL) {
        OrtStatus* st = epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": CUDA device %d: %s", kernels->ordinal,
                                    failure != NULL ? failure : "NVRTC compilation failed (out of memory)");
        free(failure);
        return st;
    }
    epabi_cu_result r = libs->cu->ModuleLoadData(out, image);
    free(image);
    if (r == 0) return NULL;
    *out = NULL;
    return epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": loading %s (%s) on CUDA device %d failed: %s", name, arch,
                       kernels->ordinal, epabi_cuda_error_text(libs->cu, r));
}
