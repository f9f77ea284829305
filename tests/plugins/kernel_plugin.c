/*
 * kernel_plugin.c - a small kernel-registry plugin EP ("KregEp") for the tests: it has no Compile; it registers
 * kernels with OrtKernelDefBuilder, claims nodes one by one (LookUpKernel + AddSingleNode) and computes them in its
 * own "device" memory (host memory behind a GPU-typed memory info "KregDev", copied by its data transfer), so a
 * host has to place values, copy across memories and allocate outputs exactly as ONNX Runtime's core does.
 * Built by tests/plugin_builder.py; runs under epabi's host and under real onnxruntime alike.
 *
 * Environment (read when the EP is created, except KREG_LOG):
 *   KREG_LOG=path     append one line per event (claims, kernel creation, prepacking, computes, run ends)
 *   KREG_DEVICE=0     no device memory: the EP computes in host memory (no allocator, no copies)
 *   KREG_MEMCPY=1     also register MemcpyFromHost/MemcpyToHost kernels
 *   KREG_NHWC=1       prefer NHWC (GetPreferredDataLayout) and register an NHWC GlobalMaxPool
 *   KREG_STREAM=1     the factory is stream aware and makes a sync stream for KregDev
 *   KREG_PACK=1       MatMul pre-packs its constant B input (PrePackWeight) into memory of the allocator given
 *
 * Kernels (float): Relu 14, Add 14, MatMul 13, LeakyRelu 16 (reads attribute alpha), Reshape 14 (shape input in
 * host memory: OrtMemTypeCPUInput), Transpose 13, GlobalMaxPool 1 (NCHW; with KREG_NHWC also the NHWC one).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "epabi/ort_abi.h"

#define EXPORT __attribute__((visibility("default")))
#define KREG_VERSION 24
#define NHWC_DOMAIN "com.ms.internal.nhwc"

/* Test plugin: one host per process at a time is enough here (the tests create hosts one after another). */
static const OrtApi* g_api;
static const OrtEpApi* g_ep_api;
static int g_stream_marker; /* the address every KregEp stream handle points at */

static int env_on(const char* name) {
    const char* v = getenv(name);
    return v != NULL && strcmp(v, "1") == 0;
}

static void kreg_log(const char* fmt, ...) {
    const char* path = getenv("KREG_LOG");
    if (path == NULL || path[0] == '\0') return;
    FILE* f = fopen(path, "a");
    if (f == NULL) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

static OrtStatus* fail(const char* msg) { return g_api->CreateStatus(ORT_EP_FAIL, msg); }

#define RETURN_IF(expr)                 \
    do {                                \
        OrtStatus* st_ = (expr);        \
        if (st_ != NULL) return st_;    \
    } while (0)

/* ---- factory-level objects: memory, allocator, data transfer, stream ------------------------------------------ */

struct kreg_factory {
    OrtEpFactory base;
    OrtMemoryInfo* device_memory; /* "KregDev", owned by the factory */
};

struct kreg_allocator {
    OrtAllocator base;
    const OrtMemoryInfo* info;
};

static void* AllocatorAlloc(OrtAllocator* a, size_t size) {
    (void)a;
    return aligned_alloc(64, (size + 63) / 64 * 64 + 64);
}
static void AllocatorFree(OrtAllocator* a, void* p) { (void)a; free(p); }
static const OrtMemoryInfo* AllocatorInfo(const OrtAllocator* a) { return ((const struct kreg_allocator*)a)->info; }

static OrtStatus* FactoryCreateAllocator(OrtEpFactory* f, const OrtMemoryInfo* info, const OrtKeyValuePairs* opts,
                                         OrtAllocator** out) {
    (void)opts;
    struct kreg_factory* kf = (struct kreg_factory*)f;
    *out = NULL;
    if (kf->device_memory == NULL) return fail("KregEp: no device memory");
    struct kreg_allocator* a = calloc(1, sizeof *a);
    if (a == NULL) return fail("KregEp: out of memory");
    a->base.version = 1;
    a->base.Alloc = AllocatorAlloc;
    a->base.Free = AllocatorFree;
    a->base.Info = AllocatorInfo;
    a->info = info;
    *out = &a->base;
    return NULL;
}
static void FactoryReleaseAllocator(OrtEpFactory* f, OrtAllocator* a) { (void)f; free(a); }

static void TransferRelease(OrtDataTransferImpl* t) { free(t); }
static bool TransferCanCopy(const OrtDataTransferImpl* t, const OrtMemoryDevice* src, const OrtMemoryDevice* dst) {
    (void)t; (void)src; (void)dst;
    return true; /* all KregEp memory is host memory underneath */
}
static OrtStatus* TransferCopy(OrtDataTransferImpl* t, const OrtValue** src, OrtValue** dst, OrtSyncStream** streams,
                               size_t n) {
    (void)t; (void)streams;
    for (size_t i = 0; i < n; ++i) {
        size_t bytes = 0;
        void* from = NULL;
        void* to = NULL;
        RETURN_IF(g_api->GetTensorSizeInBytes(src[i], &bytes));
        RETURN_IF(g_api->GetTensorMutableData((OrtValue*)src[i], &from));
        RETURN_IF(g_api->GetTensorMutableData(dst[i], &to));
        if (bytes) memcpy(to, from, bytes);
    }
    return NULL;
}
static OrtStatus* FactoryCreateDataTransfer(OrtEpFactory* f, OrtDataTransferImpl** out) {
    *out = NULL;
    if (((struct kreg_factory*)f)->device_memory == NULL) return NULL;
    OrtDataTransferImpl* t = calloc(1, sizeof *t);
    if (t == NULL) return fail("KregEp: out of memory");
    t->ort_version_supported = KREG_VERSION;
    t->Release = TransferRelease;
    t->CanCopy = TransferCanCopy;
    t->CopyTensors = TransferCopy;
    *out = t;
    return NULL;
}

static void NotificationRelease(OrtSyncNotificationImpl* n) { free(n); }
static OrtStatus* NotificationActivate(OrtSyncNotificationImpl* n) { (void)n; return NULL; }
static OrtStatus* NotificationWaitOnDevice(OrtSyncNotificationImpl* n, OrtSyncStream* s) { (void)n; (void)s; return NULL; }
static OrtStatus* NotificationWaitOnHost(OrtSyncNotificationImpl* n) { (void)n; return NULL; }

static void StreamRelease(OrtSyncStreamImpl* s) { kreg_log("stream release"); free(s); }
static void* StreamGetHandle(OrtSyncStreamImpl* s) { (void)s; return &g_stream_marker; }
static OrtStatus* StreamCreateNotification(OrtSyncStreamImpl* s, OrtSyncNotificationImpl** out) {
    (void)s;
    OrtSyncNotificationImpl* n = calloc(1, sizeof *n);
    if (n == NULL) return fail("KregEp: out of memory");
    n->ort_version_supported = KREG_VERSION;
    n->Release = NotificationRelease;
    n->Activate = NotificationActivate;
    n->WaitOnDevice = NotificationWaitOnDevice;
    n->WaitOnHost = NotificationWaitOnHost;
    *out = n;
    return NULL;
}
static OrtStatus* StreamFlush(OrtSyncStreamImpl* s) { (void)s; return NULL; }
static OrtStatus* StreamOnSessionRunEnd(OrtSyncStreamImpl* s) { (void)s; kreg_log("stream run end"); return NULL; }

static bool FactoryIsStreamAware(const OrtEpFactory* f) { (void)f; return env_on("KREG_STREAM"); }
static OrtStatus* FactoryCreateSyncStream(OrtEpFactory* f, const OrtMemoryDevice* device, const OrtKeyValuePairs* opts,
                                          OrtSyncStreamImpl** out) {
    (void)f; (void)device; (void)opts;
    OrtSyncStreamImpl* s = calloc(1, sizeof *s);
    if (s == NULL) return fail("KregEp: out of memory");
    s->ort_version_supported = KREG_VERSION;
    s->Release = StreamRelease;
    s->GetHandle = StreamGetHandle;
    s->CreateNotification = StreamCreateNotification;
    s->Flush = StreamFlush;
    s->OnSessionRunEnd = StreamOnSessionRunEnd;
    kreg_log("stream create");
    *out = s;
    return NULL;
}

/* ---- tensors ----------------------------------------------------------------------------------------------- */

struct tensor {
    float* data;
    int64_t dims[8];
    size_t rank;
    size_t count;
};

static OrtStatus* read_tensor(const OrtValue* v, struct tensor* t) {
    OrtTensorTypeAndShapeInfo* info = NULL;
    memset(t, 0, sizeof *t);
    RETURN_IF(g_api->GetTensorTypeAndShape(v, &info));
    OrtStatus* st = g_api->GetDimensionsCount(info, &t->rank);
    if (st == NULL && t->rank > 8) st = fail("KregEp: rank above 8");
    if (st == NULL) st = g_api->GetDimensions(info, t->dims, t->rank);
    g_api->ReleaseTensorTypeAndShapeInfo(info);
    RETURN_IF(st);
    t->count = 1;
    for (size_t i = 0; i < t->rank; ++i) t->count *= (size_t)t->dims[i];
    void* data = NULL;
    RETURN_IF(g_api->GetTensorMutableData((OrtValue*)v, &data));
    t->data = data;
    return NULL;
}

static const char* memory_name(const OrtValue* v) {
    const OrtMemoryInfo* info = NULL;
    const char* name = "?";
    OrtStatus* st = g_api->GetTensorMemoryInfo(v, &info);
    if (st != NULL) { g_api->ReleaseStatus(st); return "?"; }
    st = g_api->MemoryInfoGetName(info, &name);
    if (st != NULL) { g_api->ReleaseStatus(st); return "?"; }
    return name;
}

static OrtStatus* output(OrtKernelContext* ctx, size_t i, const int64_t* dims, size_t rank, struct tensor* t) {
    OrtValue* v = NULL;
    RETURN_IF(g_api->KernelContext_GetOutput(ctx, i, dims, rank, &v));
    return read_tensor(v, t);
}

/* ---- kernels ----------------------------------------------------------------------------------------------- */

enum op { OP_RELU, OP_ADD, OP_MATMUL, OP_LEAKY_RELU, OP_RESHAPE, OP_TRANSPOSE, OP_GLOBAL_MAX_POOL,
          OP_GLOBAL_MAX_POOL_NHWC, OP_FROM_HOST, OP_TO_HOST };
static const char* const OP_NAMES[] = {"Relu", "Add", "MatMul", "LeakyRelu", "Reshape", "Transpose", "GlobalMaxPool",
                                       "GlobalMaxPool", "MemcpyFromHost", "MemcpyToHost"};

struct kreg_kernel {
    OrtKernelImpl base;
    enum op op;
    char name[128];
    float alpha;
    int64_t perm[8];
    size_t perm_len;
    OrtAllocator* packed_allocator; /* MatMul with a pre-packed B it owns: memory from this allocator */
    float* packed;                  /* owned (packed_allocator) or shared (the host's weight cache owns it) */
    int64_t packed_dims[2];
};

static OrtStatus* KernelCompute(OrtKernelImpl* impl, OrtKernelContext* ctx) {
    struct kreg_kernel* k = (struct kreg_kernel*)impl;
    void* stream = NULL;
    RETURN_IF(g_api->KernelContext_GetGPUComputeStream(ctx, &stream));
    const OrtValue* in0 = NULL;
    RETURN_IF(g_api->KernelContext_GetInput(ctx, 0, &in0));
    kreg_log("compute %s %s stream=%s in0=%s", OP_NAMES[k->op], k->name,
             stream == NULL ? "none" : (stream == &g_stream_marker ? "kreg" : "other"), memory_name(in0));
    struct tensor a, b, y;
    RETURN_IF(read_tensor(in0, &a));
    switch (k->op) {
    case OP_RELU:
    case OP_LEAKY_RELU:
        RETURN_IF(output(ctx, 0, a.dims, a.rank, &y));
        for (size_t i = 0; i < a.count; ++i)
            y.data[i] = a.data[i] > 0 ? a.data[i] : (k->op == OP_RELU ? 0.0f : k->alpha * a.data[i]);
        return NULL;
    case OP_FROM_HOST:
    case OP_TO_HOST:
        RETURN_IF(output(ctx, 0, a.dims, a.rank, &y));
        if (a.count) memcpy(y.data, a.data, a.count * sizeof(float));
        return NULL;
    case OP_ADD: {
        const OrtValue* in1 = NULL;
        RETURN_IF(g_api->KernelContext_GetInput(ctx, 1, &in1));
        RETURN_IF(read_tensor(in1, &b));
        if (b.count == 0 || a.count % b.count != 0) return fail("KregEp Add: B must repeat over A's trailing dims");
        RETURN_IF(output(ctx, 0, a.dims, a.rank, &y));
        for (size_t i = 0; i < a.count; ++i) y.data[i] = a.data[i] + b.data[i % b.count];
        return NULL;
    }
    case OP_MATMUL: {
        if (k->packed != NULL) { /* a packed B is not an input any more: the host may have freed it */
            b.data = k->packed;
            b.rank = 2;
            b.dims[0] = k->packed_dims[0];
            b.dims[1] = k->packed_dims[1];
        } else {
            const OrtValue* in1 = NULL;
            RETURN_IF(g_api->KernelContext_GetInput(ctx, 1, &in1));
            RETURN_IF(read_tensor(in1, &b));
        }
        const float* bd = b.data;
        if (a.rank != 2 || b.rank != 2 || a.dims[1] != b.dims[0]) return fail("KregEp MatMul: 2-D [M,K]x[K,N] only");
        int64_t dims[2] = {a.dims[0], b.dims[1]};
        RETURN_IF(output(ctx, 0, dims, 2, &y));
        for (int64_t m = 0; m < dims[0]; ++m)
            for (int64_t n = 0; n < dims[1]; ++n) {
                float acc = 0.0f;
                for (int64_t j = 0; j < a.dims[1]; ++j) acc += a.data[m * a.dims[1] + j] * bd[j * dims[1] + n];
                y.data[m * dims[1] + n] = acc;
            }
        return NULL;
    }
    case OP_RESHAPE: {
        const OrtValue* in1 = NULL;
        RETURN_IF(g_api->KernelContext_GetInput(ctx, 1, &in1));
        kreg_log("reshape shape input in %s", memory_name(in1));
        OrtTensorTypeAndShapeInfo* info = NULL;
        size_t n = 0;
        RETURN_IF(g_api->GetTensorTypeAndShape(in1, &info));
        OrtStatus* st = g_api->GetTensorShapeElementCount(info, &n);
        g_api->ReleaseTensorTypeAndShapeInfo(info);
        RETURN_IF(st);
        if (n > 8) return fail("KregEp Reshape: rank above 8");
        void* raw = NULL;
        RETURN_IF(g_api->GetTensorMutableData((OrtValue*)in1, &raw));
        int64_t dims[8];
        size_t known = 1;
        int infer = -1;
        for (size_t i = 0; i < n; ++i) {
            dims[i] = ((const int64_t*)raw)[i];
            if (dims[i] == 0) dims[i] = a.dims[i];
            if (dims[i] == -1) infer = (int)i; else known *= (size_t)dims[i];
        }
        if (infer >= 0) dims[infer] = (int64_t)(a.count / known);
        RETURN_IF(output(ctx, 0, dims, n, &y));
        if (a.count) memcpy(y.data, a.data, a.count * sizeof(float));
        return NULL;
    }
    case OP_TRANSPOSE: {
        int64_t dims[8];
        size_t in_strides[8], out_strides[8];
        if (k->perm_len != a.rank) return fail("KregEp Transpose: perm must be given for every axis");
        for (size_t i = 0; i < a.rank; ++i) dims[i] = a.dims[k->perm[i]];
        RETURN_IF(output(ctx, 0, dims, a.rank, &y));
        for (size_t i = a.rank, s = 1; i-- > 0;) { in_strides[i] = s; s *= (size_t)a.dims[i]; }
        for (size_t i = a.rank, s = 1; i-- > 0;) { out_strides[i] = s; s *= (size_t)dims[i]; }
        for (size_t o = 0; o < a.count; ++o) {
            size_t src = 0, rest = o;
            for (size_t i = 0; i < a.rank; ++i) {
                size_t idx = rest / out_strides[i];
                rest %= out_strides[i];
                src += idx * in_strides[k->perm[i]];
            }
            y.data[o] = a.data[src];
        }
        return NULL;
    }
    case OP_GLOBAL_MAX_POOL: { /* NCHW: [N, C, spatial...] -> [N, C, 1...] */
        int64_t dims[8];
        size_t nc = (size_t)(a.dims[0] * a.dims[1]), spatial = a.count / nc;
        dims[0] = a.dims[0];
        dims[1] = a.dims[1];
        for (size_t i = 2; i < a.rank; ++i) dims[i] = 1;
        RETURN_IF(output(ctx, 0, dims, a.rank, &y));
        for (size_t i = 0; i < nc; ++i) {
            float m = a.data[i * spatial];
            for (size_t s = 1; s < spatial; ++s)
                if (a.data[i * spatial + s] > m) m = a.data[i * spatial + s];
            y.data[i] = m;
        }
        return NULL;
    }
    case OP_GLOBAL_MAX_POOL_NHWC: { /* [N, spatial..., C] -> [N, 1..., C] */
        int64_t dims[8];
        size_t n = (size_t)a.dims[0], c = (size_t)a.dims[a.rank - 1], spatial = a.count / (n * c);
        dims[0] = a.dims[0];
        for (size_t i = 1; i + 1 < a.rank; ++i) dims[i] = 1;
        dims[a.rank - 1] = a.dims[a.rank - 1];
        RETURN_IF(output(ctx, 0, dims, a.rank, &y));
        for (size_t b0 = 0; b0 < n; ++b0)
            for (size_t ch = 0; ch < c; ++ch) {
                float m = a.data[b0 * spatial * c + ch];
                for (size_t s = 1; s < spatial; ++s) {
                    float v = a.data[(b0 * spatial + s) * c + ch];
                    if (v > m) m = v;
                }
                y.data[b0 * c + ch] = m;
            }
        return NULL;
    }
    }
    return fail("KregEp: unknown op");
}

static void KernelRelease(OrtKernelImpl* impl) {
    struct kreg_kernel* k = (struct kreg_kernel*)impl;
    kreg_log("release %s %s", OP_NAMES[k->op], k->name);
    if (k->packed != NULL && k->packed_allocator != NULL) k->packed_allocator->Free(k->packed_allocator, k->packed);
    free(k);
}

static OrtStatus* KernelPrePack(OrtKernelImpl* impl, const OrtValue* tensor, int index, OrtAllocator* allocator,
                                OrtSharedPrePackedWeightCache* cache, bool* is_packed) {
    struct kreg_kernel* k = (struct kreg_kernel*)impl;
    const char* alloc_name = "?";
    OrtStatus* st = g_api->MemoryInfoGetName(allocator->Info(allocator), &alloc_name);
    if (st != NULL) { g_api->ReleaseStatus(st); alloc_name = "?"; }
    kreg_log("prepack %s %s input=%d tensor=%s allocator=%s cache=%s", OP_NAMES[k->op], k->name, index,
             memory_name(tensor), alloc_name, cache == NULL ? "none" : "some");
    *is_packed = false;
    if (k->op != OP_MATMUL || index != 1 || !env_on("KREG_PACK")) return NULL;
    struct tensor b;
    RETURN_IF(read_tensor(tensor, &b));
    if (b.rank != 2) return NULL;
    size_t bytes = b.count * sizeof(float) + 1;
    float* packed = allocator->Alloc(allocator, bytes);
    if (packed == NULL) return fail("KregEp: PrePackWeight could not allocate");
    if (b.count) memcpy(packed, b.data, b.count * sizeof(float));
    k->packed_dims[0] = b.dims[0];
    k->packed_dims[1] = b.dims[1];
    if (cache != NULL) { /* hand the buffer to the host's cache: SetSharedPrePackedWeight gives it back */
        void* ptrs[1] = {packed};
        size_t sizes[1] = {bytes};
        RETURN_IF(g_ep_api->SharedPrePackedWeightCache_StoreWeightData(cache, ptrs, sizes, 1));
    } else {
        k->packed = packed;
        k->packed_allocator = allocator;
    }
    *is_packed = true;
    return NULL;
}

static OrtStatus* KernelSetShared(OrtKernelImpl* impl, const void* const* buffers, const size_t* sizes, size_t n,
                                  int index) {
    struct kreg_kernel* k = (struct kreg_kernel*)impl;
    kreg_log("shared %s %s input=%d buffers=%zu bytes=%zu", OP_NAMES[k->op], k->name, index, n, n ? sizes[0] : 0);
    if (n != 1) return fail("KregEp: expected one shared buffer");
    k->packed = (float*)buffers[0];
    k->packed_allocator = NULL;
    return NULL;
}

static OrtStatus* create_kernel(void* state, const OrtKernelInfo* info, OrtKernelImpl** out) {
    struct kreg_kernel* k = calloc(1, sizeof *k);
    if (k == NULL) return fail("KregEp: out of memory");
    k->op = (enum op)(intptr_t)state;
    k->base.ort_version_supported = KREG_VERSION;
    k->base.Compute = KernelCompute;
    k->base.Release = KernelRelease;
    k->base.PrePackWeight = KernelPrePack;
    k->base.SetSharedPrePackedWeight = KernelSetShared;
    size_t size = sizeof k->name;
    OrtStatus* st = g_api->KernelInfo_GetNodeName(info, k->name, &size);
    char domain[64] = "", op_type[64] = "";
    size_t dsize = sizeof domain, osize = sizeof op_type, inputs = 0, outputs = 0;
    int since = 0, is_constant = 0;
    const OrtValue* constant = NULL;
    const OrtEp* ep = NULL;
    if (st == NULL) st = g_api->KernelInfo_GetOperatorDomain(info, domain, &dsize);
    if (st == NULL) st = g_api->KernelInfo_GetOperatorType(info, op_type, &osize);
    if (st == NULL) st = g_api->KernelInfo_GetOperatorSinceVersion(info, &since);
    if (st == NULL) st = g_api->KernelInfo_GetInputCount(info, &inputs);
    if (st == NULL) st = g_api->KernelInfo_GetOutputCount(info, &outputs);
    if (st == NULL && inputs > 1) st = g_api->KernelInfoGetConstantInput_tensor(info, 1, &is_constant, &constant);
    if (st == NULL) st = g_ep_api->KernelInfo_GetEp(info, &ep);
    if (st != NULL) { free(k); return st; }
    if (k->op == OP_LEAKY_RELU) {
        k->alpha = 0.01f;
        OrtStatus* a = g_api->KernelInfoGetAttribute_float(info, "alpha", &k->alpha);
        if (a != NULL) {
            kreg_log("attribute alpha missing: code %d", (int)g_api->GetErrorCode(a));
            g_api->ReleaseStatus(a);
        }
    }
    if (k->op == OP_TRANSPOSE) {
        k->perm_len = 8;
        st = g_api->KernelInfoGetAttributeArray_int64(info, "perm", k->perm, &k->perm_len);
        if (st != NULL) { free(k); return st; }
    }
    kreg_log("create %s name=%s domain=%s op=%s since=%d inputs=%zu outputs=%zu const1=%d ep=%s", OP_NAMES[k->op],
             k->name, domain, op_type, since, inputs, outputs, is_constant, ep != NULL ? ep->GetName(ep) : "NULL");
    *out = &k->base;
    return NULL;
}

/* ---- the EP ------------------------------------------------------------------------------------------------ */

struct kreg_ep {
    OrtEp base;
    OrtKernelRegistry* registry;
    int nhwc;
};

static const char* EpGetName(const OrtEp* ep) { (void)ep; return "KregEp"; }

static OrtStatus* EpGetCapability(OrtEp* ep, const OrtGraph* graph, OrtEpGraphSupportInfo* support) {
    (void)ep;
    size_t n = 0;
    RETURN_IF(g_api->Graph_GetNumNodes(graph, &n));
    const OrtNode** nodes = calloc(n ? n : 1, sizeof *nodes);
    if (nodes == NULL) return fail("KregEp: out of memory");
    OrtStatus* st = g_api->Graph_GetNodes(graph, nodes, n);
    for (size_t i = 0; st == NULL && i < n; ++i) {
        const OrtKernelDef* def = NULL;
        st = g_ep_api->EpGraphSupportInfo_LookUpKernel(support, nodes[i], &def);
        if (st == NULL && def != NULL) {
            const char* name = "";
            st = g_api->Node_GetName(nodes[i], &name);
            if (st == NULL) st = g_ep_api->EpGraphSupportInfo_AddSingleNode(support, nodes[i]);
            if (st == NULL) kreg_log("claim %s:%s %s", g_ep_api->KernelDef_GetDomain(def),
                                     g_ep_api->KernelDef_GetOperatorType(def), name);
        }
    }
    free(nodes);
    return st;
}

static OrtStatus* add_kernel(OrtKernelRegistry* reg, const char* domain, enum op op, int start, int end,
                             int cpu_input, int cpu_output) {
    OrtKernelDefBuilder* b = NULL;
    OrtKernelDef* def = NULL;
    const OrtDataType* float_type = NULL;
    RETURN_IF(g_ep_api->GetTensorDataType(ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &float_type));
    RETURN_IF(g_ep_api->CreateKernelDefBuilder(&b));
    OrtStatus* st = g_ep_api->KernelDefBuilder_SetOperatorType(b, OP_NAMES[op]);
    if (st == NULL) st = g_ep_api->KernelDefBuilder_SetDomain(b, domain);
    if (st == NULL) st = g_ep_api->KernelDefBuilder_SetSinceVersion(b, start, end);
    if (st == NULL) st = g_ep_api->KernelDefBuilder_SetExecutionProvider(b, "KregEp");
    if (st == NULL) st = g_ep_api->KernelDefBuilder_AddTypeConstraint(b, "T", &float_type, 1);
    if (st == NULL && cpu_input >= 0) st = g_ep_api->KernelDefBuilder_SetInputMemType(b, (size_t)cpu_input,
                                                                                       OrtMemTypeCPUInput);
    if (st == NULL && cpu_output >= 0) st = g_ep_api->KernelDefBuilder_SetOutputMemType(b, (size_t)cpu_output,
                                                                                         OrtMemTypeCPUOutput);
    if (st == NULL) st = g_ep_api->KernelDefBuilder_Build(b, &def);
    g_ep_api->ReleaseKernelDefBuilder(b);
    if (st == NULL) st = g_ep_api->KernelRegistry_AddKernel(reg, def, create_kernel, (void*)(intptr_t)op);
    g_ep_api->ReleaseKernelDef(def); /* the registry keeps its own copy */
    return st;
}

static OrtStatus* build_registry(struct kreg_ep* ep, int device) {
    OrtKernelRegistry* reg = NULL;
    RETURN_IF(g_ep_api->CreateKernelRegistry(&reg));
    OrtStatus* st = add_kernel(reg, "", OP_RELU, 14, 14, -1, -1);
    if (st == NULL) st = add_kernel(reg, "", OP_ADD, 14, 14, -1, -1);
    if (st == NULL) st = add_kernel(reg, "", OP_MATMUL, 13, 13, -1, -1);
    if (st == NULL) st = add_kernel(reg, "", OP_LEAKY_RELU, 16, 16, -1, -1);
    if (st == NULL) st = add_kernel(reg, "", OP_RESHAPE, 14, 18, device ? 1 : -1, -1);
    if (st == NULL) st = add_kernel(reg, "", OP_TRANSPOSE, 13, 20, -1, -1);
    if (st == NULL) st = add_kernel(reg, "", OP_GLOBAL_MAX_POOL, 1, 1, -1, -1);
    if (st == NULL && ep->nhwc) st = add_kernel(reg, NHWC_DOMAIN, OP_GLOBAL_MAX_POOL_NHWC, 1, 1, -1, -1);
    if (st == NULL && env_on("KREG_MEMCPY")) st = add_kernel(reg, "", OP_FROM_HOST, 1, 1, 0, -1);
    if (st == NULL && env_on("KREG_MEMCPY")) st = add_kernel(reg, "", OP_TO_HOST, 1, 1, -1, 0);
    if (st != NULL) { g_ep_api->ReleaseKernelRegistry(reg); return st; }
    ep->registry = reg;
    return NULL;
}

static OrtStatus* EpGetKernelRegistry(OrtEp* ep, const OrtKernelRegistry** out) {
    kreg_log("get kernel registry");
    *out = ((struct kreg_ep*)ep)->registry;
    return NULL;
}

static OrtStatus* EpGetPreferredDataLayout(OrtEp* ep, OrtEpDataLayout* out) {
    *out = ((struct kreg_ep*)ep)->nhwc ? OrtEpDataLayout_NHWC : OrtEpDataLayout_NCHW;
    return NULL;
}

static OrtStatus* EpOnRunEnd(OrtEp* ep, const OrtRunOptions* opts, bool sync) {
    (void)ep; (void)opts;
    kreg_log("run end sync=%d", (int)sync);
    return NULL;
}

static OrtStatus* FactoryCreateEp(OrtEpFactory* f, const OrtHardwareDevice* const* d, const OrtKeyValuePairs* const* m,
                                  size_t n, const OrtSessionOptions* so, const OrtLogger* l, OrtEp** out) {
    (void)d; (void)m; (void)n; (void)so; (void)l;
    struct kreg_ep* ep = calloc(1, sizeof *ep);
    if (ep == NULL) return fail("KregEp: out of memory");
    ep->base.ort_version_supported = KREG_VERSION;
    ep->base.GetName = EpGetName;
    ep->base.GetCapability = EpGetCapability;
    ep->base.GetKernelRegistry = EpGetKernelRegistry;
    ep->base.GetPreferredDataLayout = EpGetPreferredDataLayout;
    ep->base.OnRunEnd = EpOnRunEnd;
    ep->nhwc = env_on("KREG_NHWC");
    OrtStatus* st = build_registry(ep, ((struct kreg_factory*)f)->device_memory != NULL);
    if (st != NULL) { free(ep); return st; }
    *out = &ep->base;
    return NULL;
}

static void FactoryReleaseEp(OrtEpFactory* f, OrtEp* ep) {
    (void)f;
    g_ep_api->ReleaseKernelRegistry(((struct kreg_ep*)ep)->registry);
    free(ep);
}

static const char* FactoryName(const OrtEpFactory* f) { (void)f; return "KregEp"; }
static const char* FactoryVendor(const OrtEpFactory* f) { (void)f; return "tests"; }
static uint32_t FactoryVendorId(const OrtEpFactory* f) { (void)f; return 0; }
static const char* FactoryVersion(const OrtEpFactory* f) { (void)f; return "0.1.0"; }

static OrtStatus* FactoryGetSupportedDevices(OrtEpFactory* f, const OrtHardwareDevice* const* devices, size_t n,
                                             OrtEpDevice** out, size_t max, size_t* num) {
    struct kreg_factory* kf = (struct kreg_factory*)f;
    *num = 0;
    for (size_t i = 0; i < n && *num < max; ++i) {
        if (g_api->HardwareDevice_Type(devices[i]) != OrtHardwareDeviceType_CPU) continue;
        RETURN_IF(g_ep_api->CreateEpDevice(f, devices[i], NULL, NULL, &out[*num]));
        if (kf->device_memory != NULL) RETURN_IF(g_ep_api->EpDevice_AddAllocatorInfo(out[*num], kf->device_memory));
        ++*num;
        break; /* one EP device is enough */
    }
    return NULL;
}

EXPORT OrtStatus* CreateEpFactories(const char* name, const OrtApiBase* base, const OrtLogger* logger,
                                    OrtEpFactory** factories, size_t max, size_t* num) {
    (void)name; (void)logger;
    *num = 0;
    if (max < 1) return NULL;
    g_api = base->GetApi(KREG_VERSION);
    if (g_api == NULL) return NULL;
    g_ep_api = g_api->GetEpApi();
    struct kreg_factory* f = calloc(1, sizeof *f);
    if (f == NULL) return g_api->CreateStatus(ORT_FAIL, "KregEp: out of memory");
    const char* device = getenv("KREG_DEVICE");
    if (device == NULL || strcmp(device, "0") != 0) {
        OrtStatus* st = g_api->CreateMemoryInfo_V2("KregDev", OrtMemoryInfoDeviceType_GPU, 0, 0,
                                                   OrtDeviceMemoryType_DEFAULT, 0, OrtDeviceAllocator,
                                                   &f->device_memory);
        if (st != NULL) { free(f); return st; }
    }
    f->base.ort_version_supported = KREG_VERSION;
    f->base.GetName = FactoryName;
    f->base.GetVendor = FactoryVendor;
    f->base.GetVendorId = FactoryVendorId;
    f->base.GetVersion = FactoryVersion;
    f->base.GetSupportedDevices = FactoryGetSupportedDevices;
    f->base.CreateEp = FactoryCreateEp;
    f->base.ReleaseEp = FactoryReleaseEp;
    f->base.CreateAllocator = FactoryCreateAllocator;
    f->base.ReleaseAllocator = FactoryReleaseAllocator;
    f->base.CreateDataTransfer = FactoryCreateDataTransfer;
    f->base.IsStreamAware = FactoryIsStreamAware;
    f->base.CreateSyncStreamForDevice = FactoryCreateSyncStream;
    factories[0] = &f->base;
    *num = 1;
    return NULL;
}

EXPORT OrtStatus* ReleaseEpFactory(OrtEpFactory* f) {
    struct kreg_factory* kf = (struct kreg_factory*)f;
    if (kf->device_memory != NULL) g_api->ReleaseMemoryInfo(kf->device_memory);
    free(kf);
    return NULL;
}
