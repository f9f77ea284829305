/*
 * trace_shim.c - a plugin EP library that loads another one and records every call the host makes into it, and
 * every OrtApi/OrtEpApi function it calls back, for the differential tests (tests/test_differential.py): the same
 * model through epabi's host and through real onnxruntime must give the plugin the same call sequence.
 * Built by tests/plugin_builder.py; runs under epabi's host and under real onnxruntime alike.
 *
 * Environment (read by CreateEpFactories):
 *   EPABI_TRACE_PLUGIN=path   the plugin library to load and forward to (required)
 *   EPABI_TRACE_FILE=path     append one line per call (optional; without it the shim only forwards)
 *   EPABI_TRACE_HARDWARE=cpu  offer the plugin only the hardware devices of that type (cpu, gpu, npu), so that a
 *                             machine with GPUs gives both hosts the same CPU-only view (read per GetSupportedDevices)
 *
 * Lines (no pointers, only values both hosts should agree on):
 *   "> obj.Function args"   the host calls into the plugin (obj: factory, ep, nci, dt, stream, note, alloc,
 *                           profiler)
 *   "< obj.Function result" it returns: "ok", "error <OrtErrorCode>" or the value returned
 *   "api Function args"     the plugin calls a host function (OrtApi, or OrtEpApi for the ep_api functions)
 * The test's own marker lines ("# ...") are appended to the same file by the driver script (O_APPEND on both sides
 * keeps whole lines in call order).
 *
 * The host sees wrapper objects, one per plugin object: OrtEpFactory, OrtEp, OrtNodeComputeInfo,
 * OrtDataTransferImpl, OrtSyncStreamImpl, OrtSyncNotificationImpl, OrtAllocator, OrtEpProfilerImpl. Each copies the wrapped table's
 * version and leaves NULL what the plugin left NULL, so the host takes the same paths; every object the host hands
 * back (ReleaseEp, ReleaseAllocator, ReleaseNodeComputeInfos, ReleaseEpFactory) is unwrapped first, and
 * OrtEpApi::CreateEpDevice gets the wrapper factory in place of the plugin's, so the host calls CreateEp through
 * the shim. The plugin gets copies of the host's OrtApi/OrtEpApi tables (as many slots as the host's release has,
 * ORT_EP_ABI_FACTS.md section 1) with logging trampolines in the slots of the
 * functions our plugin (native/) calls (SHIM_ORT_* and SHIM_EP_* list them), logged with the values they were
 * asked and answered. A plugin calling another slot reaches the host's function unlogged.
 *
 * Limits: reads every member of the plugin's tables (the plugin must be compiled against ort_abi.h, as ours is);
 * one host table per loaded copy of the shim (a second CreateEpFactories with another host's table while the first
 * one's factories live is refused with ORT_FAIL): load one copy (file) per host. Thread-safety: one mutex guards
 * the library state, the wrapper lists and the trace file.
 */
#define _POSIX_C_SOURCE 200809L /* open(O_CLOEXEC), dlopen under -std=c11 */

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "epabi/ort_abi.h"

#define EXPORT __attribute__((visibility("default")))

typedef OrtStatus* (*CreateEpFactoriesFn)(const char*, const OrtApiBase*, const OrtLogger*, OrtEpFactory**, size_t,
                                          size_t*);
typedef OrtStatus* (*ReleaseEpFactoryFn)(OrtEpFactory*);

/* ---- library state (one per loaded copy; every field under g_lock) ------------------------------------------- */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static void* g_plugin;                    /* dlopen handle of EPABI_TRACE_PLUGIN while factories live */
static CreateEpFactoriesFn g_create;
static ReleaseEpFactoryFn g_release;
static int g_factories;                   /* live wrapper factories */
static int g_trace_fd = -1;
static const OrtApiBase* g_real_base;
static const OrtApi* g_real_api;          /* the host's tables the trampolines call */
static const OrtEpApi* g_real_ep;
static OrtApi g_api_copy;                 /* what the plugin gets */
static OrtEpApi g_ep_copy;

/* OrtApi and OrtEpApi slots per API version 22..32 (facts sheet, section 1); newer hosts: the newest known. */
static const unsigned k_api_slots[] = {318, 390, 415, 419, 419, 422, 424, 425, 426, 428, 429};
static const unsigned k_ep_slots[] = {2, 16, 50, 73, 73, 73, 73, 74, 74, 78, 78};
enum { SHIM_FIRST_API = 22, SHIM_LAST_API = 32 };

static void trace(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void trace(const char* fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t len = (size_t)n < sizeof line - 1 ? (size_t)n : sizeof line - 2;
    line[len++] = '\n';
    pthread_mutex_lock(&g_lock);
    if (g_trace_fd >= 0) {
        ssize_t w = write(g_trace_fd, line, len);
        (void)w;   /* a lost trace line shows as a difference; nothing else to do about it */
    }
    pthread_mutex_unlock(&g_lock);
}

/* "ok" or "error <code>": the result of a status-returning plugin function (the status goes on to the host). */
static const char* status_text(OrtStatus* st, char* buf, size_t size) {
    if (st == NULL) return "ok";
    snprintf(buf, size, "error %d", g_real_api != NULL ? (int)g_real_api->GetErrorCode(st) : -1);
    return buf;
}

#define TRACE_STATUS(name, expr)                                              \
    do {                                                                      \
        char st_buf_[32];                                                     \
        OrtStatus* st_ = (expr);                                              \
        trace("< " name " %s", status_text(st_, st_buf_, sizeof st_buf_));    \
        return st_;                                                           \
    } while (0)

static const char* device_type_name(OrtHardwareDeviceType t) {
    switch (t) {
    case OrtHardwareDeviceType_CPU: return "cpu";
    case OrtHardwareDeviceType_GPU: return "gpu";
    case OrtHardwareDeviceType_NPU: return "npu";
    }
    return "?";
}

static const char* memory_device_text(const OrtMemoryDevice* d, char* buf, size_t size) {
    if (d == NULL) return "none";
    static const char* const kinds[] = {"cpu", "gpu", "fpga", "npu"};
    OrtMemoryInfoDeviceType t = g_real_ep->MemoryDevice_GetDeviceType(d);
    snprintf(buf, size, "%s:%d", (unsigned)t < 4 ? kinds[t] : "?", (int)g_real_ep->MemoryDevice_GetMemoryType(d));
    return buf;
}

static const char* memory_info_name(const OrtMemoryInfo* info) {
    const char* name = NULL;
    if (info == NULL) return "(null)";
    OrtStatus* st = g_real_api->MemoryInfoGetName(info, &name);
    if (st != NULL) g_real_api->ReleaseStatus(st);
    return name != NULL ? name : "(null)";
}

/* ---- wrapper objects: the ABI table first (the host's pointer), then a list link and the wrapped object ------- */

struct link {
    struct link* prev;
    struct link* next;
    void (*destroy)(struct link*);   /* frees the wrapper (leftovers at ReleaseEpFactory) */
};

struct shim_factory {
    OrtEpFactory base;
    OrtEpFactory* inner;
    struct link objects;             /* every live wrapper made for this factory (circular, head) */
    struct shim_factory* next;       /* g_factory_list */
};

static struct shim_factory* g_factory_list;

static void link_add(struct shim_factory* f, struct link* l, void (*destroy)(struct link*)) {
    l->destroy = destroy;
    pthread_mutex_lock(&g_lock);
    l->next = f->objects.next;
    l->prev = &f->objects;
    f->objects.next->prev = l;
    f->objects.next = l;
    pthread_mutex_unlock(&g_lock);
}

static void link_remove(struct link* l) {
    pthread_mutex_lock(&g_lock);
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->prev = l->next = l;
    pthread_mutex_unlock(&g_lock);
}

#define WRAPPER_OF(type, ptr) ((type*)(uintptr_t)(ptr))
#define CONTAINER(type, l) ((type*)(void*)((char*)(l) - offsetof(type, link)))

/* -- OrtAllocator -- */

struct shim_alloc {
    OrtAllocator base;
    struct link link;
    OrtAllocator* inner;
};

static void* AllocAlloc(OrtAllocator* this_, size_t size) {
    OrtAllocator* in = WRAPPER_OF(struct shim_alloc, this_)->inner;
    trace("> alloc.Alloc bytes=%zu", size);
    return in->Alloc(in, size);
}
static void AllocFree(OrtAllocator* this_, void* p) {
    OrtAllocator* in = WRAPPER_OF(struct shim_alloc, this_)->inner;
    trace("> alloc.Free%s", p == NULL ? " null" : "");
    in->Free(in, p);
}
static const OrtMemoryInfo* AllocInfo(const OrtAllocator* this_) {
    OrtAllocator* in = WRAPPER_OF(struct shim_alloc, this_)->inner;
    trace("> alloc.Info");
    return in->Info(in);
}
static void* AllocReserve(OrtAllocator* this_, size_t size) {
    OrtAllocator* in = WRAPPER_OF(struct shim_alloc, this_)->inner;
    trace("> alloc.Reserve bytes=%zu", size);
    return in->Reserve(in, size);
}
static OrtStatus* AllocGetStats(const OrtAllocator* this_, OrtKeyValuePairs** out) {
    OrtAllocator* in = WRAPPER_OF(struct shim_alloc, this_)->inner;
    trace("> alloc.GetStats");
    TRACE_STATUS("alloc.GetStats", in->GetStats(in, out));
}
static void* AllocAllocOnStream(OrtAllocator* this_, size_t size, OrtSyncStream* stream) {
    OrtAllocator* in = WRAPPER_OF(struct shim_alloc, this_)->inner;
    trace("> alloc.AllocOnStream bytes=%zu%s", size, stream == NULL ? " no-stream" : "");
    return in->AllocOnStream(in, size, stream);
}
static OrtStatus* AllocShrink(OrtAllocator* this_) {
    OrtAllocator* in = WRAPPER_OF(struct shim_alloc, this_)->inner;
    trace("> alloc.Shrink");
    TRACE_STATUS("alloc.Shrink", in->Shrink(in));
}

static void destroy_alloc(struct link* l) { free(CONTAINER(struct shim_alloc, l)); }

/* Wraps a plugin allocator (NULL stays NULL); on failure to allocate the wrapper the plugin's own is handed out. */
static OrtAllocator* wrap_alloc(struct shim_factory* f, OrtAllocator* in) {
    if (in == NULL) return NULL;
    struct shim_alloc* a = calloc(1, sizeof *a);
    if (a == NULL) return in;
    a->inner = in;
    a->base.version = in->version;
    a->base.Alloc = in->Alloc != NULL ? AllocAlloc : NULL;
    a->base.Free = in->Free != NULL ? AllocFree : NULL;
    a->base.Info = in->Info != NULL ? AllocInfo : NULL;
    if (in->version >= 18) a->base.Reserve = in->Reserve != NULL ? AllocReserve : NULL;
    if (in->version >= 23) {
        a->base.GetStats = in->GetStats != NULL ? AllocGetStats : NULL;
        a->base.AllocOnStream = in->AllocOnStream != NULL ? AllocAllocOnStream : NULL;
    }
    if (in->version >= 25) a->base.Shrink = in->Shrink != NULL ? AllocShrink : NULL;
    link_add(f, &a->link, destroy_alloc);
    return &a->base;
}

/* The plugin's allocator behind a wrapper of factory f (or the pointer itself when it is none of ours). */
static OrtAllocator* unwrap_alloc(struct shim_factory* f, OrtAllocator* a, int forget) {
    OrtAllocator* in = a;
    struct link* found = NULL;
    pthread_mutex_lock(&g_lock);
    for (struct link* l = f->objects.next; l != &f->objects; l = l->next) {
        if (l->destroy == destroy_alloc && &CONTAINER(struct shim_alloc, l)->base == a) {
            found = l;
            in = CONTAINER(struct shim_alloc, l)->inner;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (found != NULL && forget) {
        link_remove(found);
        destroy_alloc(found);
    }
    return in;
}

/* -- OrtSyncNotificationImpl -- */

struct shim_note {
    OrtSyncNotificationImpl base;
    struct link link;
    OrtSyncNotificationImpl* inner;
};

static void destroy_note(struct link* l) { free(CONTAINER(struct shim_note, l)); }

static void NoteRelease(OrtSyncNotificationImpl* this_ptr) {
    struct shim_note* n = WRAPPER_OF(struct shim_note, this_ptr);
    trace("> note.Release");
    n->inner->Release(n->inner);
    link_remove(&n->link);
    destroy_note(&n->link);
}
static OrtStatus* NoteActivate(OrtSyncNotificationImpl* this_ptr) {
    OrtSyncNotificationImpl* in = WRAPPER_OF(struct shim_note, this_ptr)->inner;
    trace("> note.Activate");
    TRACE_STATUS("note.Activate", in->Activate(in));
}
static OrtStatus* NoteWaitOnDevice(OrtSyncNotificationImpl* this_ptr, OrtSyncStream* consumer) {
    OrtSyncNotificationImpl* in = WRAPPER_OF(struct shim_note, this_ptr)->inner;
    trace("> note.WaitOnDevice");
    TRACE_STATUS("note.WaitOnDevice", in->WaitOnDevice(in, consumer));
}
static OrtStatus* NoteWaitOnHost(OrtSyncNotificationImpl* this_ptr) {
    OrtSyncNotificationImpl* in = WRAPPER_OF(struct shim_note, this_ptr)->inner;
    trace("> note.WaitOnHost");
    TRACE_STATUS("note.WaitOnHost", in->WaitOnHost(in));
}

/* -- OrtSyncStreamImpl -- */

struct shim_stream {
    OrtSyncStreamImpl base;
    struct link link;
    OrtSyncStreamImpl* inner;
    struct shim_factory* f;
};

static void destroy_stream(struct link* l) { free(CONTAINER(struct shim_stream, l)); }

static void StreamRelease(OrtSyncStreamImpl* this_ptr) {
    struct shim_stream* s = WRAPPER_OF(struct shim_stream, this_ptr);
    trace("> stream.Release");
    s->inner->Release(s->inner);
    link_remove(&s->link);
    destroy_stream(&s->link);
}
static void* StreamGetHandle(OrtSyncStreamImpl* this_ptr) {
    OrtSyncStreamImpl* in = WRAPPER_OF(struct shim_stream, this_ptr)->inner;
    trace("> stream.GetHandle");
    return in->GetHandle(in);
}
static OrtStatus* StreamCreateNotification(OrtSyncStreamImpl* this_ptr, OrtSyncNotificationImpl** out) {
    struct shim_stream* s = WRAPPER_OF(struct shim_stream, this_ptr);
    trace("> stream.CreateNotification");
    OrtStatus* st = s->inner->CreateNotification(s->inner, out);
    if (st == NULL && out != NULL && *out != NULL) {
        struct shim_note* n = calloc(1, sizeof *n);
        if (n != NULL) {
            OrtSyncNotificationImpl* in = *out;
            n->inner = in;
            n->base.ort_version_supported = in->ort_version_supported;
            n->base.Release = in->Release != NULL ? NoteRelease : NULL;
            n->base.Activate = in->Activate != NULL ? NoteActivate : NULL;
            n->base.WaitOnDevice = in->WaitOnDevice != NULL ? NoteWaitOnDevice : NULL;
            n->base.WaitOnHost = in->WaitOnHost != NULL ? NoteWaitOnHost : NULL;
            link_add(s->f, &n->link, destroy_note);
            *out = &n->base;
        }
    }
    TRACE_STATUS("stream.CreateNotification", st);
}
static OrtStatus* StreamFlush(OrtSyncStreamImpl* this_ptr) {
    OrtSyncStreamImpl* in = WRAPPER_OF(struct shim_stream, this_ptr)->inner;
    trace("> stream.Flush");
    TRACE_STATUS("stream.Flush", in->Flush(in));
}
static OrtStatus* StreamOnSessionRunEnd(OrtSyncStreamImpl* this_ptr) {
    OrtSyncStreamImpl* in = WRAPPER_OF(struct shim_stream, this_ptr)->inner;
    trace("> stream.OnSessionRunEnd");
    TRACE_STATUS("stream.OnSessionRunEnd", in->OnSessionRunEnd(in));
}

static OrtSyncStreamImpl* wrap_stream(struct shim_factory* f, OrtSyncStreamImpl* in) {
    if (in == NULL) return NULL;
    struct shim_stream* s = calloc(1, sizeof *s);
    if (s == NULL) return in;
    s->inner = in;
    s->f = f;
    s->base.ort_version_supported = in->ort_version_supported;
    s->base.Release = in->Release != NULL ? StreamRelease : NULL;
    s->base.GetHandle = in->GetHandle != NULL ? StreamGetHandle : NULL;
    s->base.CreateNotification = in->CreateNotification != NULL ? StreamCreateNotification : NULL;
    s->base.Flush = in->Flush != NULL ? StreamFlush : NULL;
    s->base.OnSessionRunEnd = in->OnSessionRunEnd != NULL ? StreamOnSessionRunEnd : NULL;
    link_add(f, &s->link, destroy_stream);
    return &s->base;
}

/* -- OrtDataTransferImpl -- */

struct shim_dt {
    OrtDataTransferImpl base;
    struct link link;
    OrtDataTransferImpl* inner;
};

static void destroy_dt(struct link* l) { free(CONTAINER(struct shim_dt, l)); }

static void DtRelease(OrtDataTransferImpl* this_ptr) {
    struct shim_dt* d = WRAPPER_OF(struct shim_dt, this_ptr);
    trace("> dt.Release");
    d->inner->Release(d->inner);
    link_remove(&d->link);
    destroy_dt(&d->link);
}
static bool DtCanCopy(const OrtDataTransferImpl* this_ptr, const OrtMemoryDevice* src, const OrtMemoryDevice* dst) {
    OrtDataTransferImpl* in = WRAPPER_OF(struct shim_dt, this_ptr)->inner;
    char a[32], b[32];
    trace("> dt.CanCopy %s->%s", memory_device_text(src, a, sizeof a), memory_device_text(dst, b, sizeof b));
    bool can = in->CanCopy(in, src, dst);
    trace("< dt.CanCopy %d", (int)can);
    return can;
}
static OrtStatus* DtCopyTensors(OrtDataTransferImpl* this_ptr, const OrtValue** src, OrtValue** dst,
                                OrtSyncStream** streams, size_t n) {
    OrtDataTransferImpl* in = WRAPPER_OF(struct shim_dt, this_ptr)->inner;
    char text[512];
    size_t used = 0;
    text[0] = '\0';
    for (size_t i = 0; i < n && used + 48 < sizeof text; ++i) {
        char a[32], b[32];
        const OrtMemoryDevice* s = src != NULL ? g_real_ep->Value_GetMemoryDevice(src[i]) : NULL;
        const OrtMemoryDevice* d = dst != NULL ? g_real_ep->Value_GetMemoryDevice(dst[i]) : NULL;
        int w = snprintf(text + used, sizeof text - used, " %s->%s%s", memory_device_text(s, a, sizeof a),
                         memory_device_text(d, b, sizeof b), streams != NULL && streams[i] != NULL ? "@stream" : "");
        if (w < 0) break;
        used += (size_t)w;
    }
    trace("> dt.CopyTensors n=%zu%s", n, text);
    TRACE_STATUS("dt.CopyTensors", in->CopyTensors(in, src, dst, streams, n));
}

/* -- OrtNodeComputeInfo -- */

struct shim_nci {
    OrtNodeComputeInfo base;
    struct link link;
    OrtNodeComputeInfo* inner;
};

static void destroy_nci(struct link* l) { free(CONTAINER(struct shim_nci, l)); }

static OrtStatus* NciCreateState(OrtNodeComputeInfo* this_ptr, OrtNodeComputeContext* ctx, void** state) {
    OrtNodeComputeInfo* in = WRAPPER_OF(struct shim_nci, this_ptr)->inner;
    trace("> nci.CreateState");
    TRACE_STATUS("nci.CreateState", in->CreateState(in, ctx, state));
}
static OrtStatus* NciCompute(OrtNodeComputeInfo* this_ptr, void* state, OrtKernelContext* kc) {
    OrtNodeComputeInfo* in = WRAPPER_OF(struct shim_nci, this_ptr)->inner;
    size_t inputs = 0, outputs = 0;
    OrtStatus* st = g_real_api->KernelContext_GetInputCount(kc, &inputs);
    if (st != NULL) g_real_api->ReleaseStatus(st);
    st = g_real_api->KernelContext_GetOutputCount(kc, &outputs);
    if (st != NULL) g_real_api->ReleaseStatus(st);
    trace("> nci.Compute inputs=%zu outputs=%zu", inputs, outputs);
    TRACE_STATUS("nci.Compute", in->Compute(in, state, kc));
}
static void NciReleaseState(OrtNodeComputeInfo* this_ptr, void* state) {
    OrtNodeComputeInfo* in = WRAPPER_OF(struct shim_nci, this_ptr)->inner;
    trace("> nci.ReleaseState");
    in->ReleaseState(in, state);
}

/* -- OrtEpProfilerImpl -- */

struct shim_profiler {
    OrtEpProfilerImpl base;
    struct link link;
    OrtEpProfilerImpl* inner;
};

static void destroy_profiler(struct link* l) { free(CONTAINER(struct shim_profiler, l)); }

static void ProfRelease(OrtEpProfilerImpl* this_ptr) {
    struct shim_profiler* p = WRAPPER_OF(struct shim_profiler, this_ptr);
    trace("> profiler.Release");
    p->inner->Release(p->inner);
    link_remove(&p->link);
    destroy_profiler(&p->link);
}
/* The offset and the correlation ids are times and counters of the host: not logged. */
static OrtStatus* ProfStartProfiling(OrtEpProfilerImpl* this_ptr, int64_t offset_ns) {
    OrtEpProfilerImpl* in = WRAPPER_OF(struct shim_profiler, this_ptr)->inner;
    trace("> profiler.StartProfiling");
    TRACE_STATUS("profiler.StartProfiling", in->StartProfiling(in, offset_ns));
}
static OrtStatus* ProfStartEvent(OrtEpProfilerImpl* this_ptr, uint64_t id) {
    OrtEpProfilerImpl* in = WRAPPER_OF(struct shim_profiler, this_ptr)->inner;
    trace("> profiler.StartEvent");
    TRACE_STATUS("profiler.StartEvent", in->StartEvent(in, id));
}
static OrtStatus* ProfStopEvent(OrtEpProfilerImpl* this_ptr, uint64_t id, const OrtProfilingEvent* event) {
    OrtEpProfilerImpl* in = WRAPPER_OF(struct shim_profiler, this_ptr)->inner;
    trace("> profiler.StopEvent");
    TRACE_STATUS("profiler.StopEvent", in->StopEvent(in, id, event));
}
static OrtStatus* ProfEndProfiling(OrtEpProfilerImpl* this_ptr, OrtProfilingEventsContainer* events) {
    OrtEpProfilerImpl* in = WRAPPER_OF(struct shim_profiler, this_ptr)->inner;
    trace("> profiler.EndProfiling");
    TRACE_STATUS("profiler.EndProfiling", in->EndProfiling(in, events));
}

static OrtEpProfilerImpl* wrap_profiler(struct shim_factory* f, OrtEpProfilerImpl* in) {
    if (in == NULL) return NULL;
    struct shim_profiler* p = calloc(1, sizeof *p);
    if (p == NULL) return in;
    p->inner = in;
    p->base.ort_version_supported = in->ort_version_supported;
    p->base.Release = in->Release != NULL ? ProfRelease : NULL;
    p->base.StartProfiling = in->StartProfiling != NULL ? ProfStartProfiling : NULL;
    p->base.StartEvent = in->StartEvent != NULL ? ProfStartEvent : NULL;
    p->base.StopEvent = in->StopEvent != NULL ? ProfStopEvent : NULL;
    p->base.EndProfiling = in->EndProfiling != NULL ? ProfEndProfiling : NULL;
    link_add(f, &p->link, destroy_profiler);
    return &p->base;
}

/* -- OrtEp -- */

struct shim_ep {
    OrtEp base;
    struct link link;
    OrtEp* inner;
    struct shim_factory* f;
};

static void destroy_ep(struct link* l) { free(CONTAINER(struct shim_ep, l)); }

#define EP_IN(p) (WRAPPER_OF(struct shim_ep, p)->inner)

static const char* EpGetName(const OrtEp* this_ptr) {
    OrtEp* in = EP_IN(this_ptr);
    const char* name = in->GetName(in);
    trace("> ep.GetName %s", name != NULL ? name : "(null)");
    return name;
}
static OrtStatus* EpGetCapability(OrtEp* this_ptr, const OrtGraph* graph, OrtEpGraphSupportInfo* info) {
    OrtEp* in = EP_IN(this_ptr);
    size_t nodes = 0;
    OrtStatus* st = g_real_api->Graph_GetNumNodes(graph, &nodes);
    if (st != NULL) g_real_api->ReleaseStatus(st);
    trace("> ep.GetCapability nodes=%zu", nodes);
    TRACE_STATUS("ep.GetCapability", in->GetCapability(in, graph, info));
}
static OrtStatus* EpCompile(OrtEp* this_ptr, const OrtGraph** graphs, const OrtNode** fused, size_t count,
                            OrtNodeComputeInfo** infos, OrtNode** ep_context_nodes) {
    struct shim_ep* e = WRAPPER_OF(struct shim_ep, this_ptr);
    char text[512];
    size_t used = 0;
    text[0] = '\0';
    for (size_t i = 0; i < count && used + 24 < sizeof text; ++i) {
        size_t nodes = 0;
        OrtStatus* st = g_real_api->Graph_GetNumNodes(graphs[i], &nodes);
        if (st != NULL) g_real_api->ReleaseStatus(st);
        int w = snprintf(text + used, sizeof text - used, "%s%zu", i == 0 ? "" : ",", nodes);
        if (w < 0) break;
        used += (size_t)w;
    }
    trace("> ep.Compile count=%zu nodes=%s", count, text);
    OrtStatus* st = e->inner->Compile(e->inner, graphs, fused, count, infos, ep_context_nodes);
    if (st == NULL && infos != NULL) {
        for (size_t i = 0; i < count; ++i) {
            OrtNodeComputeInfo* ci = infos[i];
            if (ci == NULL) continue;
            struct shim_nci* w = calloc(1, sizeof *w);
            if (w == NULL) continue;
            w->inner = ci;
            w->base.ort_version_supported = ci->ort_version_supported;
            w->base.CreateState = ci->CreateState != NULL ? NciCreateState : NULL;
            w->base.Compute = ci->Compute != NULL ? NciCompute : NULL;
            w->base.ReleaseState = ci->ReleaseState != NULL ? NciReleaseState : NULL;
            link_add(e->f, &w->link, destroy_nci);
            infos[i] = &w->base;
        }
    }
    TRACE_STATUS("ep.Compile", st);
}
static void EpReleaseNodeComputeInfos(OrtEp* this_ptr, OrtNodeComputeInfo** infos, size_t n) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.ReleaseNodeComputeInfos n=%zu", n);
    OrtNodeComputeInfo** inner = n > 0 ? calloc(n, sizeof *inner) : NULL;
    if (n > 0 && inner == NULL) return;   /* out of memory: leak the plugin's infos rather than free wrappers */
    for (size_t i = 0; i < n; ++i) {
        struct shim_nci* w = WRAPPER_OF(struct shim_nci, infos[i]);
        inner[i] = w != NULL ? w->inner : NULL;
    }
    in->ReleaseNodeComputeInfos(in, inner, n);
    for (size_t i = 0; i < n; ++i) {
        struct shim_nci* w = WRAPPER_OF(struct shim_nci, infos[i]);
        if (w == NULL) continue;
        link_remove(&w->link);
        destroy_nci(&w->link);
    }
    free(inner);
}
static OrtStatus* EpGetPreferredDataLayout(OrtEp* this_ptr, OrtEpDataLayout* layout) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.GetPreferredDataLayout");
    TRACE_STATUS("ep.GetPreferredDataLayout", in->GetPreferredDataLayout(in, layout));
}
static OrtStatus* EpShouldConvertDataLayoutForOp(OrtEp* this_ptr, const char* domain, const char* op,
                                                 OrtEpDataLayout target, int* convert) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.ShouldConvertDataLayoutForOp %s:%s %d", domain != NULL ? domain : "", op != NULL ? op : "",
          (int)target);
    TRACE_STATUS("ep.ShouldConvertDataLayoutForOp", in->ShouldConvertDataLayoutForOp(in, domain, op, target, convert));
}
static OrtStatus* EpSetDynamicOptions(OrtEp* this_ptr, const char* const* keys, const char* const* values, size_t n) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.SetDynamicOptions n=%zu", n);
    TRACE_STATUS("ep.SetDynamicOptions", in->SetDynamicOptions(in, keys, values, n));
}
static OrtStatus* EpOnRunStart(OrtEp* this_ptr, const OrtRunOptions* ro) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.OnRunStart");
    TRACE_STATUS("ep.OnRunStart", in->OnRunStart(in, ro));
}
static OrtStatus* EpOnRunEnd(OrtEp* this_ptr, const OrtRunOptions* ro, bool sync) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.OnRunEnd sync=%d", (int)sync);
    TRACE_STATUS("ep.OnRunEnd", in->OnRunEnd(in, ro, sync));
}
static OrtStatus* EpCreateAllocator(OrtEp* this_ptr, const OrtMemoryInfo* info, OrtAllocator** out) {
    struct shim_ep* e = WRAPPER_OF(struct shim_ep, this_ptr);
    trace("> ep.CreateAllocator %s", memory_info_name(info));
    OrtStatus* st = e->inner->CreateAllocator(e->inner, info, out);
    if (st == NULL && out != NULL) *out = wrap_alloc(e->f, *out);
    TRACE_STATUS("ep.CreateAllocator", st);
}
static OrtStatus* EpCreateSyncStreamForDevice(OrtEp* this_ptr, const OrtMemoryDevice* device, OrtSyncStreamImpl** out) {
    struct shim_ep* e = WRAPPER_OF(struct shim_ep, this_ptr);
    char d[32];
    trace("> ep.CreateSyncStreamForDevice %s", memory_device_text(device, d, sizeof d));
    OrtStatus* st = e->inner->CreateSyncStreamForDevice(e->inner, device, out);
    if (st == NULL && out != NULL) *out = wrap_stream(e->f, *out);
    TRACE_STATUS("ep.CreateSyncStreamForDevice", st);
}
static const char* EpGetCompiledModelCompatibilityInfo(OrtEp* this_ptr, const OrtGraph* graph) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.GetCompiledModelCompatibilityInfo");
    return in->GetCompiledModelCompatibilityInfo(in, graph);
}
static OrtStatus* EpGetKernelRegistry(OrtEp* this_ptr, const OrtKernelRegistry** out) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.GetKernelRegistry");
    TRACE_STATUS("ep.GetKernelRegistry", in->GetKernelRegistry(in, out));
}
static OrtStatus* EpIsConcurrentRunSupported(OrtEp* this_ptr, bool* out) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.IsConcurrentRunSupported");
    OrtStatus* st = in->IsConcurrentRunSupported(in, out);
    if (st == NULL && out != NULL) {
        trace("< ep.IsConcurrentRunSupported %d", (int)*out);
        return NULL;
    }
    TRACE_STATUS("ep.IsConcurrentRunSupported", st);
}
static OrtStatus* EpSync(OrtEp* this_ptr) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.Sync");
    TRACE_STATUS("ep.Sync", in->Sync(in));
}
static OrtStatus* EpCreateProfiler(OrtEp* this_ptr, OrtEpProfilerImpl** out) {
    struct shim_ep* e = WRAPPER_OF(struct shim_ep, this_ptr);
    trace("> ep.CreateProfiler");
    OrtStatus* st = e->inner->CreateProfiler(e->inner, out);
    if (st == NULL && out != NULL) *out = wrap_profiler(e->f, *out);
    TRACE_STATUS("ep.CreateProfiler", st);
}
static bool EpIsGraphCaptureEnabled(const OrtEp* this_ptr) {
    OrtEp* in = EP_IN(this_ptr);
    bool on = in->IsGraphCaptureEnabled(in);
    trace("> ep.IsGraphCaptureEnabled %d", (int)on);
    return on;
}
static bool EpIsGraphCaptured(const OrtEp* this_ptr, int id) {
    OrtEp* in = EP_IN(this_ptr);
    bool captured = in->IsGraphCaptured(in, id);
    trace("> ep.IsGraphCaptured id=%d %d", id, (int)captured);
    return captured;
}
static OrtStatus* EpReplayGraph(OrtEp* this_ptr, int id) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.ReplayGraph id=%d", id);
    TRACE_STATUS("ep.ReplayGraph", in->ReplayGraph(in, id));
}
static OrtGraphCaptureNodeAssignmentPolicy EpGetGraphCaptureNodeAssignmentPolicy(const OrtEp* this_ptr) {
    OrtEp* in = EP_IN(this_ptr);
    OrtGraphCaptureNodeAssignmentPolicy policy = in->GetGraphCaptureNodeAssignmentPolicy(in);
    trace("> ep.GetGraphCaptureNodeAssignmentPolicy %d", (int)policy);
    return policy;
}
static OrtStatus* EpGetAvailableResource(const OrtEp* this_ptr, OrtResourceCount* out) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.GetAvailableResource");
    TRACE_STATUS("ep.GetAvailableResource", in->GetAvailableResource(in, out));
}
static OrtStatus* EpOnSessionInitializationEnd(OrtEp* this_ptr) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.OnSessionInitializationEnd");
    TRACE_STATUS("ep.OnSessionInitializationEnd", in->OnSessionInitializationEnd(in));
}
static OrtStatus* EpGetDefaultMemoryDevice(const OrtEp* this_ptr, const OrtMemoryDevice** out) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.GetDefaultMemoryDevice");
    TRACE_STATUS("ep.GetDefaultMemoryDevice", in->GetDefaultMemoryDevice(in, out));
}
static OrtStatus* EpReleaseCapturedGraph(OrtEp* this_ptr, int id) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.ReleaseCapturedGraph id=%d", id);
    TRACE_STATUS("ep.ReleaseCapturedGraph", in->ReleaseCapturedGraph(in, id));
}
static OrtStatus* EpGetWeightlessSupport(const OrtEp* this_ptr, OrtWeightlessSupport* out) {
    OrtEp* in = EP_IN(this_ptr);
    trace("> ep.GetWeightlessSupport");
    TRACE_STATUS("ep.GetWeightlessSupport", in->GetWeightlessSupport(in, out));
}

#define WRAP_SLOT(dst, src, member, fn) ((dst)->member = (src)->member != NULL ? (fn) : NULL)

static OrtEp* wrap_ep(struct shim_factory* f, OrtEp* in) {
    struct shim_ep* e = calloc(1, sizeof *e);
    if (e == NULL) return NULL;
    e->inner = in;
    e->f = f;
    OrtEp* t = &e->base;
    t->ort_version_supported = in->ort_version_supported;
    WRAP_SLOT(t, in, GetName, EpGetName);
    WRAP_SLOT(t, in, GetCapability, EpGetCapability);
    WRAP_SLOT(t, in, Compile, EpCompile);
    WRAP_SLOT(t, in, ReleaseNodeComputeInfos, EpReleaseNodeComputeInfos);
    WRAP_SLOT(t, in, GetPreferredDataLayout, EpGetPreferredDataLayout);
    WRAP_SLOT(t, in, ShouldConvertDataLayoutForOp, EpShouldConvertDataLayoutForOp);
    WRAP_SLOT(t, in, SetDynamicOptions, EpSetDynamicOptions);
    WRAP_SLOT(t, in, OnRunStart, EpOnRunStart);
    WRAP_SLOT(t, in, OnRunEnd, EpOnRunEnd);
    WRAP_SLOT(t, in, CreateAllocator, EpCreateAllocator);
    WRAP_SLOT(t, in, CreateSyncStreamForDevice, EpCreateSyncStreamForDevice);
    WRAP_SLOT(t, in, GetCompiledModelCompatibilityInfo, EpGetCompiledModelCompatibilityInfo);
    WRAP_SLOT(t, in, GetKernelRegistry, EpGetKernelRegistry);
    WRAP_SLOT(t, in, IsConcurrentRunSupported, EpIsConcurrentRunSupported);
    WRAP_SLOT(t, in, Sync, EpSync);
    WRAP_SLOT(t, in, CreateProfiler, EpCreateProfiler);
    WRAP_SLOT(t, in, IsGraphCaptureEnabled, EpIsGraphCaptureEnabled);
    WRAP_SLOT(t, in, IsGraphCaptured, EpIsGraphCaptured);
    WRAP_SLOT(t, in, ReplayGraph, EpReplayGraph);
    WRAP_SLOT(t, in, GetGraphCaptureNodeAssignmentPolicy, EpGetGraphCaptureNodeAssignmentPolicy);
    WRAP_SLOT(t, in, GetAvailableResource, EpGetAvailableResource);
    WRAP_SLOT(t, in, OnSessionInitializationEnd, EpOnSessionInitializationEnd);
    WRAP_SLOT(t, in, GetDefaultMemoryDevice, EpGetDefaultMemoryDevice);
    WRAP_SLOT(t, in, ReleaseCapturedGraph, EpReleaseCapturedGraph);
    WRAP_SLOT(t, in, GetWeightlessSupport, EpGetWeightlessSupport);
    link_add(f, &e->link, destroy_ep);
    return t;
}

/* -- OrtEpFactory -- */

#define F_IN(p) (WRAPPER_OF(struct shim_factory, p)->inner)

static const char* FGetName(const OrtEpFactory* this_ptr) {
    OrtEpFactory* in = F_IN(this_ptr);
    const char* name = in->GetName(in);
    trace("> factory.GetName %s", name != NULL ? name : "(null)");
    return name;
}
static const char* FGetVendor(const OrtEpFactory* this_ptr) {
    OrtEpFactory* in = F_IN(this_ptr);
    const char* vendor = in->GetVendor(in);
    trace("> factory.GetVendor %s", vendor != NULL ? vendor : "(null)");
    return vendor;
}
/* EPABI_TRACE_HARDWARE=cpu|gpu|npu: the hardware devices of that type, the only ones the plugin is offered. */
static int hardware_filter(OrtHardwareDeviceType* type) {
    const char* v = getenv("EPABI_TRACE_HARDWARE");
    if (v == NULL || v[0] == '\0') return 0;
    for (int t = OrtHardwareDeviceType_CPU; t <= OrtHardwareDeviceType_NPU; ++t) {
        if (strcmp(v, device_type_name((OrtHardwareDeviceType)t)) == 0) {
            *type = (OrtHardwareDeviceType)t;
            return 1;
        }
    }
    return 0;
}

static OrtStatus* FGetSupportedDevices(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices, size_t n,
                                       OrtEpDevice** ep_devices, size_t max, size_t* count) {
    OrtEpFactory* in = F_IN(this_ptr);
    OrtHardwareDeviceType only = OrtHardwareDeviceType_CPU;
    int filter = hardware_filter(&only);
    const OrtHardwareDevice** offered = n > 0 ? calloc(n, sizeof *offered) : NULL;
    if (n > 0 && offered == NULL) return g_real_api->CreateStatus(ORT_FAIL, "trace shim: out of memory");
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i)
        if (!filter || g_real_api->HardwareDevice_Type(devices[i]) == only) offered[kept++] = devices[i];
    char text[256];
    size_t used = 0;
    text[0] = '\0';
    for (size_t i = 0; i < kept && used + 8 < sizeof text; ++i) {
        int w = snprintf(text + used, sizeof text - used, "%s%s", i == 0 ? "" : ",",
                         device_type_name(g_real_api->HardwareDevice_Type(offered[i])));
        if (w < 0) break;
        used += (size_t)w;
    }
    trace("> factory.GetSupportedDevices hardware=%s max=%zu", text, max);
    OrtStatus* st = in->GetSupportedDevices(in, offered, kept, ep_devices, max, count);
    free(offered);
    if (st == NULL && count != NULL) {
        trace("< factory.GetSupportedDevices ok ep_devices=%zu", *count);
        return NULL;
    }
    TRACE_STATUS("factory.GetSupportedDevices", st);
}
static OrtStatus* FCreateEp(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                            const OrtKeyValuePairs* const* metadata, size_t n, const OrtSessionOptions* so,
                            const OrtLogger* logger, OrtEp** out) {
    struct shim_factory* f = WRAPPER_OF(struct shim_factory, this_ptr);
    trace("> factory.CreateEp devices=%zu %s", n, n > 0 ? device_type_name(g_real_api->HardwareDevice_Type(devices[0])) : "");
    OrtStatus* st = f->inner->CreateEp(f->inner, devices, metadata, n, so, logger, out);
    if (st == NULL && out != NULL && *out != NULL) {
        OrtEp* w = wrap_ep(f, *out);
        if (w == NULL) {
            f->inner->ReleaseEp(f->inner, *out);
            *out = NULL;
            st = g_real_api->CreateStatus(ORT_FAIL, "trace shim: out of memory wrapping the OrtEp");
        } else {
            *out = w;
        }
    }
    TRACE_STATUS("factory.CreateEp", st);
}
static void FReleaseEp(OrtEpFactory* this_ptr, OrtEp* ep) {
    OrtEpFactory* in = F_IN(this_ptr);
    trace("> factory.ReleaseEp");
    struct shim_ep* e = WRAPPER_OF(struct shim_ep, ep);
    if (e == NULL) {
        in->ReleaseEp(in, NULL);
        return;
    }
    in->ReleaseEp(in, e->inner);
    link_remove(&e->link);
    destroy_ep(&e->link);
}
static uint32_t FGetVendorId(const OrtEpFactory* this_ptr) {
    OrtEpFactory* in = F_IN(this_ptr);
    uint32_t id = in->GetVendorId(in);
    trace("> factory.GetVendorId 0x%x", (unsigned)id);
    return id;
}
static const char* FGetVersion(const OrtEpFactory* this_ptr) {
    OrtEpFactory* in = F_IN(this_ptr);
    const char* v = in->GetVersion(in);
    trace("> factory.GetVersion %s", v != NULL ? v : "(null)");
    return v;
}
static OrtStatus* FValidateCompiledModelCompatibilityInfo(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* d,
                                                          size_t n, const char* info,
                                                          OrtCompiledModelCompatibility* out) {
    OrtEpFactory* in = F_IN(this_ptr);
    trace("> factory.ValidateCompiledModelCompatibilityInfo devices=%zu", n);
    TRACE_STATUS("factory.ValidateCompiledModelCompatibilityInfo",
                 in->ValidateCompiledModelCompatibilityInfo(in, d, n, info, out));
}
static OrtStatus* FCreateAllocator(OrtEpFactory* this_ptr, const OrtMemoryInfo* info, const OrtKeyValuePairs* options,
                                   OrtAllocator** out) {
    struct shim_factory* f = WRAPPER_OF(struct shim_factory, this_ptr);
    trace("> factory.CreateAllocator %s", memory_info_name(info));
    OrtStatus* st = f->inner->CreateAllocator(f->inner, info, options, out);
    if (st == NULL && out != NULL) *out = wrap_alloc(f, *out);
    TRACE_STATUS("factory.CreateAllocator", st);
}
static void FReleaseAllocator(OrtEpFactory* this_ptr, OrtAllocator* a) {
    struct shim_factory* f = WRAPPER_OF(struct shim_factory, this_ptr);
    trace("> factory.ReleaseAllocator");
    f->inner->ReleaseAllocator(f->inner, a != NULL ? unwrap_alloc(f, a, 1) : NULL);
}
static OrtStatus* FCreateDataTransfer(OrtEpFactory* this_ptr, OrtDataTransferImpl** out) {
    struct shim_factory* f = WRAPPER_OF(struct shim_factory, this_ptr);
    trace("> factory.CreateDataTransfer");
    OrtStatus* st = f->inner->CreateDataTransfer(f->inner, out);
    if (st == NULL && out != NULL && *out != NULL) {
        struct shim_dt* d = calloc(1, sizeof *d);
        if (d != NULL) {
            OrtDataTransferImpl* in = *out;
            d->inner = in;
            d->base.ort_version_supported = in->ort_version_supported;
            d->base.Release = in->Release != NULL ? DtRelease : NULL;
            d->base.CanCopy = in->CanCopy != NULL ? DtCanCopy : NULL;
            d->base.CopyTensors = in->CopyTensors != NULL ? DtCopyTensors : NULL;
            link_add(f, &d->link, destroy_dt);
            *out = &d->base;
        }
    }
    if (st == NULL) {
        trace("< factory.CreateDataTransfer ok %s", out != NULL && *out != NULL ? "transfer" : "none");
        return NULL;
    }
    TRACE_STATUS("factory.CreateDataTransfer", st);
}
static bool FIsStreamAware(const OrtEpFactory* this_ptr) {
    OrtEpFactory* in = F_IN(this_ptr);
    bool aware = in->IsStreamAware(in);
    trace("> factory.IsStreamAware %d", (int)aware);
    return aware;
}
static OrtStatus* FCreateSyncStreamForDevice(OrtEpFactory* this_ptr, const OrtMemoryDevice* device,
                                             const OrtKeyValuePairs* options, OrtSyncStreamImpl** out) {
    struct shim_factory* f = WRAPPER_OF(struct shim_factory, this_ptr);
    char d[32];
    trace("> factory.CreateSyncStreamForDevice %s", memory_device_text(device, d, sizeof d));
    OrtStatus* st = f->inner->CreateSyncStreamForDevice(f->inner, device, options, out);
    if (st == NULL && out != NULL) *out = wrap_stream(f, *out);
    TRACE_STATUS("factory.CreateSyncStreamForDevice", st);
}
static OrtStatus* FGetHardwareDeviceIncompatibilityDetails(OrtEpFactory* this_ptr, const OrtHardwareDevice* hw,
                                                           OrtDeviceEpIncompatibilityDetails* details) {
    OrtEpFactory* in = F_IN(this_ptr);
    trace("> factory.GetHardwareDeviceIncompatibilityDetails %s", device_type_name(g_real_api->HardwareDevice_Type(hw)));
    TRACE_STATUS("factory.GetHardwareDeviceIncompatibilityDetails",
                 in->GetHardwareDeviceIncompatibilityDetails(in, hw, details));
}
static OrtStatus* FCreateExternalResourceImporterForDevice(OrtEpFactory* this_ptr, const OrtEpDevice* d,
                                                           OrtExternalResourceImporterImpl** out) {
    OrtEpFactory* in = F_IN(this_ptr);
    trace("> factory.CreateExternalResourceImporterForDevice");
    TRACE_STATUS("factory.CreateExternalResourceImporterForDevice",
                 in->CreateExternalResourceImporterForDevice(in, d, out));
}
static OrtStatus* FGetNumCustomOpDomains(OrtEpFactory* this_ptr, size_t* n) {
    OrtEpFactory* in = F_IN(this_ptr);
    trace("> factory.GetNumCustomOpDomains");
    TRACE_STATUS("factory.GetNumCustomOpDomains", in->GetNumCustomOpDomains(in, n));
}
static OrtStatus* FGetCustomOpDomains(OrtEpFactory* this_ptr, OrtCustomOpDomain** domains, size_t n) {
    OrtEpFactory* in = F_IN(this_ptr);
    trace("> factory.GetCustomOpDomains n=%zu", n);
    TRACE_STATUS("factory.GetCustomOpDomains", in->GetCustomOpDomains(in, domains, n));
}
static OrtStatus* FInitGraphicsInterop(OrtEpFactory* this_ptr, const OrtEpDevice* d,
                                       const OrtGraphicsInteropConfig* config) {
    OrtEpFactory* in = F_IN(this_ptr);
    trace("> factory.InitGraphicsInterop");
    TRACE_STATUS("factory.InitGraphicsInterop", in->InitGraphicsInterop(in, d, config));
}
static OrtStatus* FDeinitGraphicsInterop(OrtEpFactory* this_ptr, const OrtEpDevice* d) {
    OrtEpFactory* in = F_IN(this_ptr);
    trace("> factory.DeinitGraphicsInterop");
    TRACE_STATUS("factory.DeinitGraphicsInterop", in->DeinitGraphicsInterop(in, d));
}
static OrtStatus* FSelectBestModelCandidate(OrtEpFactory* this_ptr, const OrtHardwareDevice* d,
                                            const OrtKeyValuePairs* const* candidates, size_t n,
                                            const OrtSessionOptions* so, size_t* selected) {
    OrtEpFactory* in = F_IN(this_ptr);
    trace("> factory.SelectBestModelCandidate n=%zu", n);
    TRACE_STATUS("factory.SelectBestModelCandidate", in->SelectBestModelCandidate(in, d, candidates, n, so, selected));
}

static struct shim_factory* wrap_factory(OrtEpFactory* in) {
    struct shim_factory* f = calloc(1, sizeof *f);
    if (f == NULL) return NULL;
    f->inner = in;
    f->objects.next = f->objects.prev = &f->objects;
    OrtEpFactory* t = &f->base;
    t->ort_version_supported = in->ort_version_supported;
    WRAP_SLOT(t, in, GetName, FGetName);
    WRAP_SLOT(t, in, GetVendor, FGetVendor);
    WRAP_SLOT(t, in, GetSupportedDevices, FGetSupportedDevices);
    WRAP_SLOT(t, in, CreateEp, FCreateEp);
    WRAP_SLOT(t, in, ReleaseEp, FReleaseEp);
    WRAP_SLOT(t, in, GetVendorId, FGetVendorId);
    WRAP_SLOT(t, in, GetVersion, FGetVersion);
    WRAP_SLOT(t, in, ValidateCompiledModelCompatibilityInfo, FValidateCompiledModelCompatibilityInfo);
    WRAP_SLOT(t, in, CreateAllocator, FCreateAllocator);
    WRAP_SLOT(t, in, ReleaseAllocator, FReleaseAllocator);
    WRAP_SLOT(t, in, CreateDataTransfer, FCreateDataTransfer);
    WRAP_SLOT(t, in, IsStreamAware, FIsStreamAware);
    WRAP_SLOT(t, in, CreateSyncStreamForDevice, FCreateSyncStreamForDevice);
    WRAP_SLOT(t, in, GetHardwareDeviceIncompatibilityDetails, FGetHardwareDeviceIncompatibilityDetails);
    WRAP_SLOT(t, in, CreateExternalResourceImporterForDevice, FCreateExternalResourceImporterForDevice);
    WRAP_SLOT(t, in, GetNumCustomOpDomains, FGetNumCustomOpDomains);
    WRAP_SLOT(t, in, GetCustomOpDomains, FGetCustomOpDomains);
    WRAP_SLOT(t, in, InitGraphicsInterop, FInitGraphicsInterop);
    WRAP_SLOT(t, in, DeinitGraphicsInterop, FDeinitGraphicsInterop);
    WRAP_SLOT(t, in, SelectBestModelCandidate, FSelectBestModelCandidate);
    return f;
}

/* The wrapper of a plugin factory (the plugin passes its own to CreateEpDevice), or NULL. */
static OrtEpFactory* wrapper_of_factory(OrtEpFactory* inner) {
    OrtEpFactory* found = NULL;
    pthread_mutex_lock(&g_lock);
    for (struct shim_factory* f = g_factory_list; f != NULL && found == NULL; f = f->next)
        if (f->inner == inner) found = &f->base;
    pthread_mutex_unlock(&g_lock);
    return found;
}

/* ---- the host tables the plugin sees: copies with logging trampolines ---------------------------------------- */

/* One "api" line, written when the host function returns: its name, what it was asked and answered (values both
 * hosts must agree on), and " -> error <code>" when it failed. */
static void api_line(const char* name, OrtStatus* st, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static void api_line(const char* name, OrtStatus* st, const char* fmt, ...) {
    char detail[640];
    detail[0] = '\0';
    if (fmt != NULL && fmt[0] != '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
    }
    char failed[32] = "";
    if (st != NULL) snprintf(failed, sizeof failed, " -> error %d", (int)g_real_api->GetErrorCode(st));
    trace("api %s%s%s%s", name, detail[0] != '\0' ? " " : "", detail, failed);
}

static const char* str_or_null(OrtStatus* st, const char* const* out) {
    return st == NULL && out != NULL && *out != NULL ? *out : "(null)";
}

static size_t size_or_zero(OrtStatus* st, const size_t* out) { return st == NULL && out != NULL ? *out : 0; }

/* "n=3 null=1,2": how many entries an array getter filled and which of them are NULL (absent optional values). */
static const char* null_entries(OrtStatus* st, const void* const* items, size_t n, char* buf, size_t size) {
    int used = snprintf(buf, size, "n=%zu", n);
    if (st != NULL || items == NULL || used < 0) return buf;
    const char* sep = " null=";
    for (size_t i = 0; i < n && (size_t)used + 24 < size; ++i) {
        if (items[i] != NULL) continue;
        int w = snprintf(buf + used, size - (size_t)used, "%s%zu", sep, i);
        if (w < 0) break;
        used += w;
        sep = ",";
    }
    return buf;
}

/* Status functions logged by name only. */
#define SHIM_ORT_PLAIN(S)                                                                                            \
    S(CastTypeInfoToTensorInfo, (const OrtTypeInfo* t, const OrtTensorTypeAndShapeInfo** out), (t, out))             \
    S(GetTensorMutableData, (OrtValue* v, void** out), (v, out))                                                     \
    S(GetTensorTypeAndShape, (const OrtValue* v, OrtTensorTypeAndShapeInfo** out), (v, out))                         \
    S(KernelContext_GetGPUComputeStream, (const OrtKernelContext* c, void** out), (c, out))                          \
    S(GetTensorMemoryInfo, (const OrtValue* v, const OrtMemoryInfo** out), (v, out))                                 \
    S(GetValueInfoTypeInfo, (const OrtValueInfo* v, const OrtTypeInfo** out), (v, out))                              \
    S(OpAttr_GetTensorAttributeAsOrtValue, (const OrtOpAttr* a, OrtValue** out), (a, out))                           \
    S(GetTensorData, (const OrtValue* v, const void** out), (v, out))                                                \
    S(GetSessionOptionsConfigEntries, (const OrtSessionOptions* o, OrtKeyValuePairs** out), (o, out))

#define SHIM_ORT_VOID(V)                                                                                             \
    V(ReleaseStatus, (OrtStatus* s), (s))                                                                            \
    V(ReleaseMemoryInfo, (OrtMemoryInfo* m), (m))                                                                    \
    V(ReleaseValue, (OrtValue* v), (v))                                                                              \
    V(ReleaseTensorTypeAndShapeInfo, (OrtTensorTypeAndShapeInfo* i), (i))                                            \
    V(CreateKeyValuePairs, (OrtKeyValuePairs** out), (out))                                                          \
    V(ReleaseKeyValuePairs, (OrtKeyValuePairs* k), (k))

#define SHIM_ORT_OTHER(R)                                                                                            \
    R(const char*, GetErrorMessage, (const OrtStatus* s), (s))                                                       \
    R(const OrtKeyValuePairs*, HardwareDevice_Metadata, (const OrtHardwareDevice* d), (d))                           \
    R(void*, SyncStream_GetHandle, (OrtSyncStream* s), (s))

#define SHIM_EP_VOID(V)                                                                                              \
    V(ReleaseEpDevice, (OrtEpDevice* d), (d))                                                                        \
    V(ReleaseHardwareDevice, (OrtHardwareDevice* d), (d))                                                            \
    V(ReleaseProfilingEvent, (OrtProfilingEvent* e), (e))

#define SHIM_EP_PLAIN(S)                                                                                             \
    S(GetEnvConfigEntries, (OrtKeyValuePairs** out), (out))                                                          \
    S(ProfilingEvent_GetName, (const OrtProfilingEvent* e, const char** out), (e, out))

#define DEFINE_PLAIN(name, params, args)                                                                             \
    static OrtStatus* Api_##name params {                                                                            \
        OrtStatus* st = g_real_api->name args;                                                                       \
        api_line(#name, st, NULL);                                                                                   \
        return st;                                                                                                   \
    }
#define DEFINE_VOID(name, params, args)                                                                              \
    static void Api_##name params {                                                                                  \
        g_real_api->name args;                                                                                       \
        api_line(#name, NULL, NULL);                                                                                 \
    }
#define DEFINE_OTHER(ret, name, params, args)                                                                        \
    static ret Api_##name params {                                                                                   \
        ret value = g_real_api->name args;                                                                           \
        api_line(#name, NULL, NULL);                                                                                 \
        return value;                                                                                                \
    }
#define DEFINE_EP_VOID(name, params, args)                                                                           \
    static void EpApi_##name params {                                                                                \
        g_real_ep->name args;                                                                                        \
        api_line(#name, NULL, NULL);                                                                                 \
    }
#define DEFINE_EP_PLAIN(name, params, args)                                                                          \
    static OrtStatus* EpApi_##name params {                                                                          \
        OrtStatus* st = g_real_ep->name args;                                                                        \
        api_line(#name, st, NULL);                                                                                   \
        return st;                                                                                                   \
    }
SHIM_ORT_PLAIN(DEFINE_PLAIN)
SHIM_ORT_VOID(DEFINE_VOID)
SHIM_ORT_OTHER(DEFINE_OTHER)
SHIM_EP_VOID(DEFINE_EP_VOID)
SHIM_EP_PLAIN(DEFINE_EP_PLAIN)

/* Status functions with one output of the given kind, logged with it ("= value"). */
#define DEFINE_COUNT(name, T)                                                                                        \
    static OrtStatus* Api_##name(const T* obj, size_t* out) {                                                        \
        OrtStatus* st = g_real_api->name(obj, out);                                                                  \
        api_line(#name, st, "= %zu", size_or_zero(st, out));                                                         \
        return st;                                                                                                   \
    }
#define DEFINE_TEXT(name, T)                                                                                         \
    static OrtStatus* Api_##name(const T* obj, const char** out) {                                                   \
        OrtStatus* st = g_real_api->name(obj, out);                                                                  \
        api_line(#name, st, "= %s", str_or_null(st, out));                                                           \
        return st;                                                                                                   \
    }
#define DEFINE_ARRAY(name, T, Item)                                                                                  \
    static OrtStatus* Api_##name(const T* obj, const Item** items, size_t n) {                                       \
        char buf[256];                                                                                               \
        OrtStatus* st = g_real_api->name(obj, items, n);                                                             \
        api_line(#name, st, "%s", null_entries(st, (const void* const*)items, n, buf, sizeof buf));                 \
        return st;                                                                                                   \
    }
DEFINE_COUNT(Graph_GetNumNodes, OrtGraph)
DEFINE_COUNT(Graph_GetNumInputs, OrtGraph)
DEFINE_COUNT(Graph_GetNumOutputs, OrtGraph)
DEFINE_COUNT(Node_GetNumInputs, OrtNode)
DEFINE_COUNT(Node_GetNumOutputs, OrtNode)
DEFINE_COUNT(Node_GetNumImplicitInputs, OrtNode)
DEFINE_COUNT(GetDimensionsCount, OrtTensorTypeAndShapeInfo)
DEFINE_COUNT(GetTensorShapeElementCount, OrtTensorTypeAndShapeInfo)
DEFINE_COUNT(GetTensorSizeInBytes, OrtValue)
DEFINE_COUNT(KernelContext_GetInputCount, OrtKernelContext)
DEFINE_TEXT(Node_GetName, OrtNode)
DEFINE_TEXT(Node_GetOperatorType, OrtNode)
DEFINE_TEXT(Node_GetDomain, OrtNode)
DEFINE_TEXT(Node_GetEpName, OrtNode)
DEFINE_TEXT(GetValueInfoName, OrtValueInfo)
DEFINE_TEXT(MemoryInfoGetName, OrtMemoryInfo)
DEFINE_ARRAY(Graph_GetInputs, OrtGraph, OrtValueInfo)
DEFINE_ARRAY(Graph_GetOutputs, OrtGraph, OrtValueInfo)
DEFINE_ARRAY(Graph_GetNodes, OrtGraph, OrtNode)
DEFINE_ARRAY(Node_GetInputs, OrtNode, OrtValueInfo)
DEFINE_ARRAY(Node_GetOutputs, OrtNode, OrtValueInfo)
DEFINE_ARRAY(Node_GetImplicitInputs, OrtNode, OrtValueInfo)

static OrtStatus* Api_CreateStatus(OrtErrorCode code, const char* msg) {
    OrtStatus* st = g_real_api->CreateStatus(code, msg);
    api_line("CreateStatus", NULL, "code=%d", (int)code);
    return st;
}
static OrtErrorCode Api_GetErrorCode(const OrtStatus* s) {
    OrtErrorCode code = g_real_api->GetErrorCode(s);
    api_line("GetErrorCode", NULL, "= %d", (int)code);
    return code;
}
static OrtStatus* Api_GetOnnxTypeFromTypeInfo(const OrtTypeInfo* t, enum ONNXType* out) {
    OrtStatus* st = g_real_api->GetOnnxTypeFromTypeInfo(t, out);
    api_line("GetOnnxTypeFromTypeInfo", st, "= %d", st == NULL && out != NULL ? (int)*out : -1);
    return st;
}
static OrtStatus* Api_GetTensorElementType(const OrtTensorTypeAndShapeInfo* i, enum ONNXTensorElementDataType* out) {
    OrtStatus* st = g_real_api->GetTensorElementType(i, out);
    api_line("GetTensorElementType", st, "= %d", st == NULL && out != NULL ? (int)*out : -1);
    return st;
}
static OrtStatus* Api_GetDimensions(const OrtTensorTypeAndShapeInfo* i, int64_t* dims, size_t n) {
    OrtStatus* st = g_real_api->GetDimensions(i, dims, n);
    char buf[512];
    int used = snprintf(buf, sizeof buf, "= [");
    for (size_t k = 0; st == NULL && dims != NULL && k < n && used > 0 && (size_t)used + 24 < sizeof buf; ++k) {
        int w = snprintf(buf + used, sizeof buf - (size_t)used, "%s%lld", k == 0 ? "" : ",", (long long)dims[k]);
        if (w < 0) break;
        used += w;
    }
    api_line("GetDimensions", st, "%s]", buf);
    return st;
}
static bool Api_TensorTypeAndShape_HasShape(const OrtTensorTypeAndShapeInfo* i) {
    bool has = g_real_api->TensorTypeAndShape_HasShape(i);
    api_line("TensorTypeAndShape_HasShape", NULL, "= %d", (int)has);
    return has;
}
static OrtStatus* Api_MemoryInfoGetType(const OrtMemoryInfo* m, OrtAllocatorType* out) {
    OrtStatus* st = g_real_api->MemoryInfoGetType(m, out);
    api_line("MemoryInfoGetType", st, "= %d", st == NULL && out != NULL ? (int)*out : -1);
    return st;
}
static OrtStatus* Api_KernelContext_GetInput(const OrtKernelContext* c, size_t i, const OrtValue** out) {
    OrtStatus* st = g_real_api->KernelContext_GetInput(c, i, out);
    api_line("KernelContext_GetInput", st, "%zu%s", i, st == NULL && out != NULL && *out == NULL ? " = null" : "");
    return st;
}
static OrtStatus* Api_KernelContext_GetOutput(OrtKernelContext* c, size_t i, const int64_t* dims, size_t n,
                                              OrtValue** out) {
    OrtStatus* st = g_real_api->KernelContext_GetOutput(c, i, dims, n, out);
    char buf[400];
    int used = snprintf(buf, sizeof buf, "%zu [", i);
    for (size_t k = 0; dims != NULL && k < n && used > 0 && (size_t)used + 24 < sizeof buf; ++k) {
        int w = snprintf(buf + used, sizeof buf - (size_t)used, "%s%lld", k == 0 ? "" : ",", (long long)dims[k]);
        if (w < 0) break;
        used += w;
    }
    api_line("KernelContext_GetOutput", st, "%s]", buf);
    return st;
}
static OrtStatus* Api_Logger_LogMessage(const OrtLogger* l, OrtLoggingLevel level, const char* m, const ORTCHAR_T* f,
                                        int line, const char* fn) {
    OrtStatus* st = g_real_api->Logger_LogMessage(l, level, m, f, line, fn);
    api_line("Logger_LogMessage", st, "level=%d", (int)level);
    return st;
}
static OrtStatus* Api_Logger_GetLoggingSeverityLevel(const OrtLogger* l, OrtLoggingLevel* out) {
    OrtStatus* st = g_real_api->Logger_GetLoggingSeverityLevel(l, out);
    api_line("Logger_GetLoggingSeverityLevel", st, "= %d", st == NULL && out != NULL ? (int)*out : -1);
    return st;
}
static OrtStatus* Api_ReadOpAttr(const OrtOpAttr* a, OrtOpAttrType t, void* data, size_t len, size_t* out) {
    OrtStatus* st = g_real_api->ReadOpAttr(a, t, data, len, out);
    api_line("ReadOpAttr", st, "type=%d len=%zu = %zu", (int)t, len, out != NULL ? *out : 0);
    return st;
}
static OrtStatus* Api_Node_GetSinceVersion(const OrtNode* n, int* out) {
    OrtStatus* st = g_real_api->Node_GetSinceVersion(n, out);
    api_line("Node_GetSinceVersion", st, "= %d", st == NULL && out != NULL ? *out : -1);
    return st;
}
static OrtStatus* Api_Node_GetAttributeByName(const OrtNode* n, const char* name, const OrtOpAttr** out) {
    OrtStatus* st = g_real_api->Node_GetAttributeByName(n, name, out);
    api_line("Node_GetAttributeByName", st, "%s%s", name != NULL ? name : "(null)",
             st == NULL && out != NULL && *out == NULL ? " = null" : "");
    return st;
}
static OrtStatus* Api_OpAttr_GetType(const OrtOpAttr* a, OrtOpAttrType* out) {
    OrtStatus* st = g_real_api->OpAttr_GetType(a, out);
    api_line("OpAttr_GetType", st, "= %d", st == NULL && out != NULL ? (int)*out : -1);
    return st;
}
static OrtStatus* Api_ValueInfo_GetValueProducer(const OrtValueInfo* v, const OrtNode** node, size_t* index) {
    OrtStatus* st = g_real_api->ValueInfo_GetValueProducer(v, node, index);
    if (st == NULL && node != NULL && *node != NULL)
        api_line("ValueInfo_GetValueProducer", st, "= node output %zu", index != NULL ? *index : 0);
    else
        api_line("ValueInfo_GetValueProducer", st, "= none");
    return st;
}
static OrtStatus* Api_ValueInfo_GetInitializerValue(const OrtValueInfo* v, const OrtValue** out) {
    OrtStatus* st = g_real_api->ValueInfo_GetInitializerValue(v, out);
    api_line("ValueInfo_GetInitializerValue", st, "= %s", st == NULL && out != NULL && *out != NULL ? "value" : "none");
    return st;
}
static OrtStatus* Api_ValueInfo_IsConstantInitializer(const OrtValueInfo* v, bool* out) {
    OrtStatus* st = g_real_api->ValueInfo_IsConstantInitializer(v, out);
    api_line("ValueInfo_IsConstantInitializer", st, "= %d", st == NULL && out != NULL ? (int)*out : -1);
    return st;
}
static void Api_AddKeyValuePair(OrtKeyValuePairs* k, const char* key, const char* value) {
    g_real_api->AddKeyValuePair(k, key, value);
    api_line("AddKeyValuePair", NULL, "%s", key != NULL ? key : "(null)");
}
static const char* Api_GetKeyValue(const OrtKeyValuePairs* k, const char* key) {
    const char* value = g_real_api->GetKeyValue(k, key);
    api_line("GetKeyValue", NULL, "%s = %s", key != NULL ? key : "(null)", value != NULL ? value : "(null)");
    return value;
}
static const char* Api_GetRunConfigEntry(const OrtRunOptions* o, const char* key) {
    const char* value = g_real_api->GetRunConfigEntry(o, key);
    api_line("GetRunConfigEntry", NULL, "%s = %s", key != NULL ? key : "(null)", value != NULL ? value : "(null)");
    return value;
}
static OrtHardwareDeviceType Api_HardwareDevice_Type(const OrtHardwareDevice* d) {
    OrtHardwareDeviceType t = g_real_api->HardwareDevice_Type(d);
    api_line("HardwareDevice_Type", NULL, "= %s", device_type_name(t));
    return t;
}
static uint32_t Api_HardwareDevice_VendorId(const OrtHardwareDevice* d) {
    uint32_t id = g_real_api->HardwareDevice_VendorId(d);
    api_line("HardwareDevice_VendorId", NULL, "= 0x%x", (unsigned)id);
    return id;
}
static uint32_t Api_HardwareDevice_DeviceId(const OrtHardwareDevice* d) {
    uint32_t id = g_real_api->HardwareDevice_DeviceId(d);
    api_line("HardwareDevice_DeviceId", NULL, "= 0x%x", (unsigned)id);
    return id;
}
static OrtStatus* Api_CreateMemoryInfo_V2(const char* name, enum OrtMemoryInfoDeviceType t, uint32_t vendor,
                                          int32_t id, enum OrtDeviceMemoryType m, size_t align,
                                          enum OrtAllocatorType at, OrtMemoryInfo** out) {
    OrtStatus* st = g_real_api->CreateMemoryInfo_V2(name, t, vendor, id, m, align, at, out);
    api_line("CreateMemoryInfo_V2", st, "%s", name != NULL ? name : "(null)");
    return st;
}

static const OrtMemoryDevice* EpApi_MemoryInfo_GetMemoryDevice(const OrtMemoryInfo* m) {
    const OrtMemoryDevice* d = g_real_ep->MemoryInfo_GetMemoryDevice(m);
    char buf[32];
    api_line("MemoryInfo_GetMemoryDevice", NULL, "%s = %s", memory_info_name(m), memory_device_text(d, buf, sizeof buf));
    return d;
}
static const OrtMemoryDevice* EpApi_Value_GetMemoryDevice(const OrtValue* v) {
    const OrtMemoryDevice* d = g_real_ep->Value_GetMemoryDevice(v);
    char buf[32];
    api_line("Value_GetMemoryDevice", NULL, "= %s", memory_device_text(d, buf, sizeof buf));
    return d;
}
static bool EpApi_MemoryDevice_AreEqual(const OrtMemoryDevice* a, const OrtMemoryDevice* b) {
    bool equal = g_real_ep->MemoryDevice_AreEqual(a, b);
    api_line("MemoryDevice_AreEqual", NULL, "= %d", (int)equal);
    return equal;
}
static OrtMemoryInfoDeviceType EpApi_MemoryDevice_GetDeviceType(const OrtMemoryDevice* d) {
    OrtMemoryInfoDeviceType t = g_real_ep->MemoryDevice_GetDeviceType(d);
    api_line("MemoryDevice_GetDeviceType", NULL, "= %d", (int)t);
    return t;
}
static OrtDeviceMemoryType EpApi_MemoryDevice_GetMemoryType(const OrtMemoryDevice* d) {
    OrtDeviceMemoryType t = g_real_ep->MemoryDevice_GetMemoryType(d);
    api_line("MemoryDevice_GetMemoryType", NULL, "= %d", (int)t);
    return t;
}
static uint32_t EpApi_MemoryDevice_GetVendorId(const OrtMemoryDevice* d) {
    uint32_t id = g_real_ep->MemoryDevice_GetVendorId(d);
    api_line("MemoryDevice_GetVendorId", NULL, "= 0x%x", (unsigned)id);
    return id;
}
static uint32_t EpApi_MemoryDevice_GetDeviceId(const OrtMemoryDevice* d) {
    uint32_t id = g_real_ep->MemoryDevice_GetDeviceId(d);
    api_line("MemoryDevice_GetDeviceId", NULL, "= %u", (unsigned)id);
    return id;
}
static OrtStatus* EpApi_EpDevice_AddAllocatorInfo(OrtEpDevice* d, const OrtMemoryInfo* m) {
    OrtStatus* st = g_real_ep->EpDevice_AddAllocatorInfo(d, m);
    api_line("EpDevice_AddAllocatorInfo", st, "%s", memory_info_name(m));
    return st;
}
static OrtStatus* EpApi_CreateHardwareDevice(OrtHardwareDeviceType t, uint32_t vendor, uint32_t id, const char* name,
                                             const OrtKeyValuePairs* m, OrtHardwareDevice** out) {
    OrtStatus* st = g_real_ep->CreateHardwareDevice(t, vendor, id, name, m, out);
    api_line("CreateHardwareDevice", st, "%s 0x%x 0x%x", device_type_name(t), (unsigned)vendor, (unsigned)id);
    return st;
}
static OrtStatus* EpApi_CreateProfilingEvent(OrtProfilingEventCategory category, int32_t pid, int32_t tid,
                                             const char* name, int64_t ts, int64_t duration, const char* const* keys,
                                             const char* const* values, size_t n, OrtProfilingEvent** out) {
    OrtStatus* st = g_real_ep->CreateProfilingEvent(category, pid, tid, name, ts, duration, keys, values, n, out);
    api_line("CreateProfilingEvent", st, "category=%d args=%zu", (int)category, n);
    return st;
}
static OrtStatus* EpApi_ProfilingEventsContainer_AddEvents(OrtProfilingEventsContainer* c,
                                                           const OrtProfilingEvent* const* events, size_t n) {
    OrtStatus* st = g_real_ep->ProfilingEventsContainer_AddEvents(c, events, n);
    api_line("ProfilingEventsContainer_AddEvents", st, "n=%zu", n);
    return st;
}
static OrtStatus* EpApi_CreateEpDevice(OrtEpFactory* factory, const OrtHardwareDevice* hw, const OrtKeyValuePairs* md,
                                       const OrtKeyValuePairs* options, OrtEpDevice** out) {
    OrtEpFactory* wrapper = wrapper_of_factory(factory);
    OrtStatus* st = g_real_ep->CreateEpDevice(wrapper != NULL ? wrapper : factory, hw, md, options, out);
    api_line("CreateEpDevice", st, "%s%s", device_type_name(g_real_api->HardwareDevice_Type(hw)),
             wrapper == NULL ? " (unknown factory)" : "");
    return st;
}
static OrtStatus* EpApi_EpGraphSupportInfo_AddNodesToFuse(OrtEpGraphSupportInfo* info, const OrtNode* const* nodes,
                                                          size_t n, const OrtNodeFusionOptions* options) {
    OrtStatus* st = g_real_ep->EpGraphSupportInfo_AddNodesToFuse(info, nodes, n, options);
    api_line("EpGraphSupportInfo_AddNodesToFuse", st, "nodes=%zu drop_constants=%d", n,
             options != NULL ? (int)options->drop_constant_initializers : -1);
    return st;
}

static const OrtEpApi* Api_GetEpApi(void) {
    api_line("GetEpApi", NULL, NULL);
    return g_real_ep != NULL ? &g_ep_copy : NULL;
}

/* Every trampolined slot, for build_tables. */
#define SHIM_ORT_CUSTOM(P)                                                                                           \
    P(Graph_GetNumNodes) P(Graph_GetNumInputs) P(Graph_GetNumOutputs) P(Node_GetNumInputs) P(Node_GetNumOutputs)     \
    P(Node_GetNumImplicitInputs) P(GetDimensionsCount) P(GetTensorShapeElementCount) P(GetTensorSizeInBytes)         \
    P(KernelContext_GetInputCount) P(Node_GetName) P(Node_GetOperatorType) P(Node_GetDomain) P(Node_GetEpName)       \
    P(GetValueInfoName) P(MemoryInfoGetName) P(Graph_GetInputs) P(Graph_GetOutputs) P(Graph_GetNodes)                \
    P(Node_GetInputs) P(Node_GetOutputs) P(Node_GetImplicitInputs) P(CreateStatus) P(GetErrorCode)                   \
    P(GetOnnxTypeFromTypeInfo) P(GetTensorElementType) P(GetDimensions) P(TensorTypeAndShape_HasShape)               \
    P(MemoryInfoGetType) P(KernelContext_GetInput) P(KernelContext_GetOutput) P(Logger_LogMessage)                   \
    P(Logger_GetLoggingSeverityLevel) P(ReadOpAttr) P(Node_GetSinceVersion) P(Node_GetAttributeByName)               \
    P(OpAttr_GetType) P(ValueInfo_GetValueProducer) P(ValueInfo_GetInitializerValue)                                 \
    P(ValueInfo_IsConstantInitializer) P(AddKeyValuePair) P(GetKeyValue) P(GetRunConfigEntry) P(HardwareDevice_Type) \
    P(HardwareDevice_VendorId) P(HardwareDevice_DeviceId) P(CreateMemoryInfo_V2) P(GetEpApi)
#define SHIM_EP_CUSTOM(P)                                                                                            \
    P(MemoryInfo_GetMemoryDevice) P(Value_GetMemoryDevice) P(MemoryDevice_AreEqual) P(MemoryDevice_GetDeviceType)    \
    P(MemoryDevice_GetMemoryType) P(MemoryDevice_GetVendorId) P(MemoryDevice_GetDeviceId) P(EpDevice_AddAllocatorInfo) \
    P(CreateHardwareDevice) P(CreateEpDevice) P(EpGraphSupportInfo_AddNodesToFuse) P(CreateProfilingEvent)        \
    P(ProfilingEventsContainer_AddEvents)

static unsigned slots_for(const unsigned* table, unsigned api) {
    if (api < SHIM_FIRST_API) api = SHIM_FIRST_API;
    if (api > SHIM_LAST_API) api = SHIM_LAST_API;
    return table[api - SHIM_FIRST_API];
}

/* Copies the host's tables (as many slots as its release has) and puts the trampolines in. Under g_lock. */
static void build_tables(const OrtApi* real, unsigned host_api) {
    memset(&g_api_copy, 0, sizeof g_api_copy);
    memset(&g_ep_copy, 0, sizeof g_ep_copy);
    size_t n = slots_for(k_api_slots, host_api) * sizeof(void*);
    memcpy(&g_api_copy, real, n < sizeof g_api_copy ? n : sizeof g_api_copy);
    g_real_api = real;
    g_real_ep = real->GetEpApi();
    if (g_real_ep != NULL) {
        n = slots_for(k_ep_slots, host_api) * sizeof(void*);
        memcpy(&g_ep_copy, g_real_ep, n < sizeof g_ep_copy ? n : sizeof g_ep_copy);
    }
    size_t api_bytes = slots_for(k_api_slots, host_api) * sizeof(void*);
    size_t ep_bytes = g_real_ep != NULL ? slots_for(k_ep_slots, host_api) * sizeof(void*) : 0;
    /* a trampoline only where the host's table has the slot: the others stay NULL, as past the host's table */
#define PUT(name) \
    if (offsetof(OrtApi, name) < api_bytes) g_api_copy.name = Api_##name;
#define PUT_EP(name) \
    if (offsetof(OrtEpApi, name) < ep_bytes) g_ep_copy.name = EpApi_##name;
#define PUT3(name, params, args) PUT(name)
#define PUT4(ret, name, params, args) PUT(name)
#define PUT_EP3(name, params, args) PUT_EP(name)
    SHIM_ORT_PLAIN(PUT3)
    SHIM_ORT_VOID(PUT3)
    SHIM_ORT_OTHER(PUT4)
    SHIM_ORT_CUSTOM(PUT)
    SHIM_EP_VOID(PUT_EP3)
    SHIM_EP_PLAIN(PUT_EP3)
    SHIM_EP_CUSTOM(PUT_EP)
}

/* ORT 1.N serves API N: the release string names the table size. */
static unsigned host_api_of(const char* release) {
    unsigned major = 0, minor = 0;
    if (release == NULL || sscanf(release, "%u.%u", &major, &minor) != 2 || major != 1) return SHIM_FIRST_API;
    return minor;
}

static const OrtApi* ShimGetApi(uint32_t version) {
    const OrtApi* real = g_real_base->GetApi(version);
    trace("api GetApi %u%s", (unsigned)version, real == NULL ? " = null" : "");
    if (real == NULL) return NULL;
    const OrtApi* out = real;
    pthread_mutex_lock(&g_lock);
    if (g_real_api == NULL) build_tables(real, host_api_of(g_real_base->GetVersionString()));
    if (g_real_api == real) out = &g_api_copy;
    pthread_mutex_unlock(&g_lock);
    if (out == real) trace("note GetApi %u returned another table than the first: not traced", (unsigned)version);
    return out;
}

static const char* ShimGetVersionString(void) {
    const char* release = g_real_base->GetVersionString();
    trace("api GetVersionString = %s", release != NULL ? release : "(null)");
    return release;
}

static const OrtApiBase g_shim_base = {ShimGetApi, ShimGetVersionString};

/* ---- the two exports ------------------------------------------------------------------------------------------ */

static OrtStatus* shim_error(const OrtApiBase* base, OrtErrorCode code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static OrtStatus* shim_error(const OrtApiBase* base, OrtErrorCode code, const char* fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const OrtApi* v1 = base->GetApi(1);
    return v1 != NULL ? v1->CreateStatus(code, msg) : NULL;
}

/* Loads the plugin and opens the trace file for the first live factory. Under g_lock. */
static OrtStatus* open_library(const OrtApiBase* base) {
    const char* path = getenv("EPABI_TRACE_PLUGIN");
    if (path == NULL || path[0] == '\0')
        return shim_error(base, ORT_INVALID_ARGUMENT, "trace shim: EPABI_TRACE_PLUGIN names no plugin library");
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return shim_error(base, ORT_FAIL, "trace shim: cannot load EPABI_TRACE_PLUGIN '%s': %s", path, dlerror());
    CreateEpFactoriesFn create = (CreateEpFactoriesFn)(uintptr_t)dlsym(lib, "CreateEpFactories");
    ReleaseEpFactoryFn release = (ReleaseEpFactoryFn)(uintptr_t)dlsym(lib, "ReleaseEpFactory");
    if (create == NULL || release == NULL) {
        dlclose(lib);
        return shim_error(base, ORT_FAIL, "trace shim: '%s' does not export CreateEpFactories and ReleaseEpFactory",
                          path);
    }
    const char* trace_path = getenv("EPABI_TRACE_FILE");
    if (trace_path != NULL && trace_path[0] != '\0') {
        g_trace_fd = open(trace_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (g_trace_fd < 0) {
            dlclose(lib);
            return shim_error(base, ORT_FAIL, "trace shim: cannot open EPABI_TRACE_FILE '%s'", trace_path);
        }
    }
    g_plugin = lib;
    g_create = create;
    g_release = release;
    g_real_base = base;
    return NULL;
}

/* Unloads the plugin and forgets the host's tables once no factory lives. Under g_lock. */
static void close_library_if_unused(void) {
    if (g_factories > 0 || g_plugin == NULL) return;
    dlclose(g_plugin);
    g_plugin = NULL;
    g_create = NULL;
    g_release = NULL;
    g_real_base = NULL;
    g_real_api = NULL;
    g_real_ep = NULL;
    if (g_trace_fd >= 0) close(g_trace_fd);
    g_trace_fd = -1;
}

EXPORT OrtStatus* CreateEpFactories(const char* registration_name, const OrtApiBase* ort_api_base,
                                    const OrtLogger* default_logger, OrtEpFactory** factories, size_t max_factories,
                                    size_t* num_factories) {
    if (num_factories != NULL) *num_factories = 0;
    if (ort_api_base == NULL || ort_api_base->GetApi == NULL) return NULL;
    pthread_mutex_lock(&g_lock);
    OrtStatus* st = NULL;
    if (g_plugin == NULL) {
        st = open_library(ort_api_base);
    } else if (g_real_base != ort_api_base && ort_api_base->GetApi(1) != g_real_base->GetApi(1)) {
        st = shim_error(ort_api_base, ORT_FAIL, "trace shim: this copy already serves another host's tables; load "
                        "one copy of the shim library per host");
    }
    if (st != NULL) {
        pthread_mutex_unlock(&g_lock);
        return st;
    }
    CreateEpFactoriesFn create = g_create;
    ++g_factories;   /* holds the library while the plugin runs, even when it makes no factory */
    pthread_mutex_unlock(&g_lock);

    trace("> CreateEpFactories max=%zu", max_factories);
    st = create(registration_name, &g_shim_base, default_logger, factories, max_factories, num_factories);
    size_t made = st == NULL && num_factories != NULL ? *num_factories : 0;
    for (size_t i = 0; i < made && i < max_factories; ++i) {
        struct shim_factory* f = factories[i] != NULL ? wrap_factory(factories[i]) : NULL;
        if (f == NULL) continue;   /* NULL entry, or out of memory: the host gets the plugin's own factory */
        pthread_mutex_lock(&g_lock);
        f->next = g_factory_list;
        g_factory_list = f;
        ++g_factories;
        pthread_mutex_unlock(&g_lock);
        factories[i] = &f->base;
    }
    if (st == NULL) trace("< CreateEpFactories ok factories=%zu", made);
    else TRACE_STATUS("CreateEpFactories", st);
    pthread_mutex_lock(&g_lock);
    --g_factories;
    close_library_if_unused();
    pthread_mutex_unlock(&g_lock);
    return st;
}

EXPORT OrtStatus* ReleaseEpFactory(OrtEpFactory* factory) {
    struct shim_factory* f = NULL;
    pthread_mutex_lock(&g_lock);
    for (struct shim_factory** p = &g_factory_list; *p != NULL; p = &(*p)->next) {
        if (&(*p)->base == factory) {
            f = *p;
            *p = f->next;
            break;
        }
    }
    ReleaseEpFactoryFn release = g_release;
    pthread_mutex_unlock(&g_lock);
    trace("> ReleaseEpFactory");
    if (release == NULL) return NULL;   /* nothing of ours was ever loaded */
    OrtStatus* st = release(f != NULL ? f->inner : factory);
    if (f != NULL) {
        /* wrappers the host never released (it released the plugin objects through other paths, or not at all) */
        for (struct link* l = f->objects.next; l != &f->objects;) {
            struct link* next = l->next;
            l->destroy(l);
            l = next;
        }
        free(f);
    }
    if (st == NULL) trace("< ReleaseEpFactory ok");
    else {
        char buf[32];
        trace("< ReleaseEpFactory %s", status_text(st, buf, sizeof buf));
    }
    pthread_mutex_lock(&g_lock);
    if (f != NULL) --g_factories;
    close_library_if_unused();
    pthread_mutex_unlock(&g_lock);
    return st;
}
