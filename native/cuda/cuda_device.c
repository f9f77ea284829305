/*
 * cuda_device.c - see cuda_device.h.
 */
#include "cuda_device.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ep_factory.h"

enum { MAX_DEVICES = 64 };

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct epabi_cuda_device g_devices[MAX_DEVICES];   /* under g_lock until ready[i], read-only after */
static bool g_ready[MAX_DEVICES];

int epabi_cuda_device_count(void) {
    const struct epabi_cuda_libs* libs = epabi_cuda_libs();
    int n = 0;
    if (libs->cu == NULL || libs->cu->DeviceGetCount(&n) != 0) return 0;
    return n;
}

OrtStatus* epabi_cuda_status(const struct epabi_api* api, epabi_cu_result r, const char* what) {
    const struct epabi_cuda_libs* libs = epabi_cuda_libs();
    return epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": %s failed: %s (CUDA error %d)", what,
                       epabi_cuda_error_text(libs->cu, r), r);
}

OrtStatus* epabi_cuda_device_get(const struct epabi_api* api, int ordinal, const struct epabi_cuda_device** out) {
    *out = NULL;
    const struct epabi_cuda_libs* libs = epabi_cuda_libs();
    if (libs->cu == NULL)
        return epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": no CUDA driver: %s", libs->why);
    int count = epabi_cuda_device_count();
    if (ordinal < 0 || ordinal >= count || ordinal >= MAX_DEVICES)
        return epabi_error(api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": device_id=%d: the CUDA driver sees %d GPU(s), ordinals 0..%d", ordinal,
                           count, count - 1);
    pthread_mutex_lock(&g_lock);
    struct epabi_cuda_device* d = &g_devices[ordinal];
    OrtStatus* st = NULL;
    if (!g_ready[ordinal]) {
        const struct epabi_cuda_driver* cu = libs->cu;
        memset(d, 0, sizeof *d);
        d->ordinal = ordinal;
        d->libs = libs;
        epabi_cu_result r = cu->DeviceGet(&d->device, ordinal);
        if (r == 0) r = cu->DevicePrimaryCtxRetain(&d->ctx, d->device);
        if (r != 0) {
            st = epabi_cuda_status(api, r, "retaining the GPU's primary context");
        } else {
            int v = 0;
            cu->DeviceGetAttribute(&d->cc_major, EPABI_CU_DEVICE_ATTRIBUTE_CC_MAJOR, d->device);
            cu->DeviceGetAttribute(&d->cc_minor, EPABI_CU_DEVICE_ATTRIBUTE_CC_MINOR, d->device);
            bool pool_calls = cu->MemAllocFromPoolAsync != NULL && cu->MemFreeAsync != NULL &&
                              cu->DeviceGetDefaultMemPool != NULL && cu->MemPoolSetAttribute != NULL;
            d->mempools = pool_calls && cu->DeviceGetAttribute(&v, EPABI_CU_DEVICE_ATTRIBUTE_MEMPOOLS_SUPPORTED,
                                                               d->device) == 0 && v != 0;
            if (cu->DeviceGetName(d->name, (int)sizeof d->name, d->device) != 0) snprintf(d->name, sizeof d->name, "GPU");
            if (cu->DeviceGetPCIBusId(d->pci_bus_id, (int)sizeof d->pci_bus_id, d->device) != 0) d->pci_bus_id[0] = '\0';
            if (cu->DeviceTotalMem(&d->total_bytes, d->device) != 0) d->total_bytes = 0;
            g_ready[ordinal] = true;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (st == NULL) *out = d;
    return st;
}

bool epabi_cuda_enter(const struct epabi_cuda_device* d, struct epabi_cuda_scope* scope) {
    scope->device = d;
    scope->pushed = d != NULL && d->libs->cu->CtxPushCurrent(d->ctx) == 0;
    return scope->pushed;
}

void epabi_cuda_leave(struct epabi_cuda_scope* scope) {
    if (!scope->pushed) return;
    epabi_cu_context popped = NULL;
    scope->device->libs->cu->CtxPopCurrent(&popped);
    scope->pushed = false;
}

void epabi_cuda_relax(const struct epabi_cuda_driver* cu, struct epabi_cuda_relaxed* r) {
    r->mode = EPABI_CU_STREAM_CAPTURE_MODE_RELAXED;
    r->exchanged = cu->ThreadExchangeStreamCaptureMode != NULL && cu->ThreadExchangeStreamCaptureMode(&r->mode) == 0;
}

void epabi_cuda_unrelax(const struct epabi_cuda_driver* cu, struct epabi_cuda_relaxed* r) {
    if (r->exchanged) cu->ThreadExchangeStreamCaptureMode(&r->mode);
    r->exchanged = false;
}

/* An arena that must grow inside a capture window (the warm-up did not reach a steady state, or other threads took
 * the free blocks) does so in relaxed mode; the capture-window detector still reports the growth. */
static void* backing_reserve(void* ctx, size_t bytes) {
    const struct epabi_cuda_device* d = ctx;
    const struct epabi_cuda_driver* cu = d->libs->cu;
    struct epabi_cuda_scope scope;
    if (!epabi_cuda_enter(d, &scope)) return NULL;
    epabi_cu_ptr p = 0;
    struct epabi_cuda_relaxed relaxed;
    epabi_cuda_relax(cu, &relaxed);
    epabi_cu_result r = cu->MemAlloc(&p, bytes > 0 ? bytes : 1);
    epabi_cuda_unrelax(cu, &relaxed);
    epabi_cuda_leave(&scope);
    return r == 0 ? (void*)(uintptr_t)p : NULL;
}

void epabi_cuda_device_free(const struct epabi_cuda_device* d, void* device_ptr) {
    if (device_ptr == NULL) return;
    const struct epabi_cuda_driver* cu = d->libs->cu;
    struct epabi_cuda_scope scope;
    if (!epabi_cuda_enter(d, &scope)) return;
    struct epabi_cuda_relaxed relaxed;
    epabi_cuda_relax(cu, &relaxed);
    cu->MemFree((epabi_cu_ptr)(uintptr_t)device_ptr);
    epabi_cuda_unrelax(cu, &relaxed);
    epabi_cuda_leave(&scope);
}

static void backing_release(void* ctx, void* p) {
    epabi_cuda_device_free(ctx, p);
}

struct epabi_arena_backing epabi_cuda_arena_backing(const struct epabi_cuda_device* d) {
    struct epabi_arena_backing b = {backing_reserve, backing_release, (void*)d};
    return b;
}

void* epabi_cuda_upload(const struct epabi_cuda_device* d, const void* host, size_t bytes) {
    void* p = backing_reserve((void*)d, bytes);
    if (p == NULL) return NULL;
    struct epabi_cuda_scope scope;
    epabi_cu_result r = 1;
    if (epabi_cuda_enter(d, &scope)) {
        r = d->libs->cu->MemcpyHtoD((epabi_cu_ptr)(uintptr_t)p, host, bytes);
        epabi_cuda_leave(&scope);
    }
    if (r != 0) {
        epabi_cuda_device_free(d, p);
        return NULL;
    }
    return p;
}
