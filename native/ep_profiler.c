/*
 * ep_profiler.c - see ep_profiler.h.
 */
#include "ep_profiler.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ep_factory.h"

/* Host events open on some thread (StartEvent seen, StopEvent not yet). A host that starts an event and never
 * stops it (an error path) must not grow this without bound: past the cap the oldest entry is forgotten. */
enum { MAX_OPEN_EVENTS = 256 };

struct kept_event {
    struct epabi_profile_event ev;   /* node_name points at `name` below */
    char* name;                      /* owned copy of ev.node_name, or NULL */
    char* parent;                    /* owned: the enclosing host event's name, or NULL */
    int32_t tid;
    uint64_t seq;                    /* recording order, to keep the sort stable */
};

struct open_event {
    uint64_t id;                     /* the host's correlation id */
    int32_t tid;
    size_t first;                    /* events recorded before it started: kept[0 .. first) */
};

struct epabi_profiler {
    OrtEpProfilerImpl base;          /* first member: the host's handle is a struct epabi_profiler* */
    const struct epabi_api* api;
    const OrtLogger* logger;
    atomic_int refs;
    atomic_bool active;
    pthread_mutex_t lock;            /* guards everything below */
    int64_t origin_ns;               /* the host's profiling start on our clock */
    struct kept_event* kept;
    size_t n, cap;
    uint64_t seq;
    uint64_t dropped;                /* events not kept (the cap, or out of memory) */
    struct open_event open[MAX_OPEN_EVENTS];
    size_t n_open;
};

static struct epabi_profiler* of(OrtEpProfilerImpl* impl) {
    return (struct epabi_profiler*)impl;
}

static int32_t thread_id(void) {
    return (int32_t)syscall(SYS_gettid);
}

int64_t epabi_profiler_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

bool epabi_profiler_active(const struct epabi_profiler* p) {
    return p != NULL && atomic_load_explicit(&((struct epabi_profiler*)p)->active, memory_order_acquire);
}

/* Caller holds the lock. */
static void clear_events(struct epabi_profiler* p) {
    for (size_t i = 0; i < p->n; ++i) {
        free(p->kept[i].name);
        free(p->kept[i].parent);
    }
    free(p->kept);
    p->kept = NULL;
    p->n = p->cap = 0;
    p->n_open = 0;
    p->dropped = 0;
}

static void unref(struct epabi_profiler* p) {
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1) return;
    clear_events(p);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void epabi_profiler_release(struct epabi_profiler* p) {
    if (p != NULL) unref(p);
}

void epabi_profiler_record(struct epabi_profiler* p, const struct epabi_profile_event* ev) {
    if (!epabi_profiler_active(p)) return;
    char* name = ev->node_name != NULL ? strdup(ev->node_name) : NULL;
    int32_t tid = thread_id();
    pthread_mutex_lock(&p->lock);
    bool active = atomic_load_explicit(&p->active, memory_order_relaxed);   /* EndProfiling may have come */
    if (!active || (ev->node_name != NULL && name == NULL)) {
        if (active) p->dropped++;
        pthread_mutex_unlock(&p->lock);
        free(name);
        return;
    }
    if (p->n == p->cap) {
        size_t cap = p->cap == 0 ? 64 : p->cap * 2;
        struct kept_event* grown = p->n >= EPABI_PROFILER_MAX_EVENTS ? NULL : realloc(p->kept, cap * sizeof *grown);
        if (grown == NULL) {
            p->dropped++;
            pthread_mutex_unlock(&p->lock);
            free(name);
            return;
        }
        p->kept = grown;
        p->cap = cap;
    }
    struct kept_event* k = &p->kept[p->n++];
    k->ev = *ev;
    k->ev.node_name = name;
    k->name = name;
    k->parent = NULL;
    k->tid = tid;
    k->seq = p->seq++;
    pthread_mutex_unlock(&p->lock);
}

/* ---- OrtEpProfilerImpl ------------------------------------------------------------------------------- */

static void ReleaseImpl(OrtEpProfilerImpl* this_ptr) {
    if (this_ptr != NULL) unref(of(this_ptr));
}

/* A second StartProfiling (a host that profiles again after EndProfiling) starts a new profile. */
static OrtStatus* StartProfilingImpl(OrtEpProfilerImpl* this_ptr, int64_t ep_profiling_start_offset_ns) {
    struct epabi_profiler* p = of(this_ptr);
    if (ep_profiling_start_offset_ns < 0)
        return epabi_error(p->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": StartProfiling got a negative offset (%" PRId64 " ns) from the host's "
                           "profiling start", ep_profiling_start_offset_ns);
    pthread_mutex_lock(&p->lock);
    clear_events(p);
    p->origin_ns = epabi_profiler_now_ns() - ep_profiling_start_offset_ns;
    atomic_store_explicit(&p->active, true, memory_order_release);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static OrtStatus* StartEventImpl(OrtEpProfilerImpl* this_ptr, uint64_t ort_event_correlation_id) {
    struct epabi_profiler* p = of(this_ptr);
    if (!epabi_profiler_active(p)) return NULL;
    int32_t tid = thread_id();
    pthread_mutex_lock(&p->lock);
    if (p->n_open == MAX_OPEN_EVENTS) {
        memmove(p->open, p->open + 1, (MAX_OPEN_EVENTS - 1) * sizeof p->open[0]);
        p->n_open--;
    }
    p->open[p->n_open++] = (struct open_event){ort_event_correlation_id, tid, p->n};
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* Names the events this thread recorded inside the host event that just ended (and no inner one named). The
 * host is asked for the event's name only when there is such an event (most host events enclose none of ours);
 * that accessor only reads the event, so it is called under the lock. */
static OrtStatus* StopEventImpl(OrtEpProfilerImpl* this_ptr, uint64_t ort_event_correlation_id,
                                const OrtProfilingEvent* ort_event) {
    struct epabi_profiler* p = of(this_ptr);
    if (!epabi_profiler_active(p)) return NULL;
    int32_t tid = thread_id();
    OrtStatus* st = NULL;
    pthread_mutex_lock(&p->lock);
    size_t i = p->n_open;
    while (i > 0 && !(p->open[i - 1].id == ort_event_correlation_id && p->open[i - 1].tid == tid)) --i;
    if (i > 0) {
        size_t first = p->open[i - 1].first;
        memmove(p->open + i - 1, p->open + i, (p->n_open - i) * sizeof p->open[0]);
        p->n_open--;
        size_t e = first;
        while (e < p->n && !(p->kept[e].tid == tid && p->kept[e].parent == NULL)) ++e;
        const char* name = NULL;
        if (e < p->n && ort_event != NULL) st = p->api->ep->ProfilingEvent_GetName(ort_event, &name);
        for (; st == NULL && name != NULL && e < p->n; ++e) {
            struct kept_event* k = &p->kept[e];
            if (k->tid == tid && k->parent == NULL) k->parent = strdup(name);   /* out of memory: no parent */
        }
    }
    pthread_mutex_unlock(&p->lock);
    return st;
}

static int by_start(const void* a, const void* b) {
    const struct kept_event* x = a;
    const struct kept_event* y = b;
    if (x->ev.start_ns != y->ev.start_ns) return x->ev.start_ns < y->ev.start_ns ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static const char* const kNames[] = {"epabi_compute", "epabi_capture", "epabi_replay"};

enum { MAX_ARGS = 10, ARG_CHARS = 24 };

/* One host event for k; *out NULL on error. */
static OrtStatus* make_event(const struct epabi_profiler* p, const struct kept_event* k, int32_t pid,
                             OrtProfilingEvent** out) {
    const struct epabi_profile_event* ev = &k->ev;
    const char* keys[MAX_ARGS];
    const char* values[MAX_ARGS];
    char numbers[MAX_ARGS][ARG_CHARS];
    size_t n = 0;
#define ARG_TEXT(key, text) (keys[n] = (key), values[n] = (text), ++n)
#define ARG_NUM(key, fmt, v) (snprintf(numbers[n], ARG_CHARS, fmt, v), ARG_TEXT(key, numbers[n]))
    int64_t dur_ns = ev->end_ns > ev->start_ns ? ev->end_ns - ev->start_ns : 0;
    ARG_TEXT("ep_name", EPABI_EP_NAME);
    ARG_NUM("duration_ns", "%" PRId64, dur_ns);
    ARG_NUM("node_count", "%u", ev->node_count);
    if (ev->kind == EPABI_PROFILE_COMPUTE) {
        ARG_TEXT("node_name", ev->node_name != NULL ? ev->node_name : "");
        if (ev->has_annotation_id) {
            ARG_NUM("annotation_id", "%d", ev->annotation_id);
            ARG_TEXT("graph_phase", ev->capturing ? "capture" : "regular");
        }
    } else {
        ARG_NUM("annotation_id", "%d", ev->annotation_id);
        if (ev->kind == EPABI_PROFILE_CAPTURE) {
            ARG_NUM("fused_node_count", "%u", ev->fused_node_count);
            ARG_NUM("launches", "%" PRIu64, ev->launches);
        } else {
            ARG_NUM("replay", "%" PRIu64, ev->replay);
        }
    }
    if (k->parent != NULL) ARG_TEXT("parent_name", k->parent);
#undef ARG_NUM
#undef ARG_TEXT
    int64_t rel = ev->start_ns - p->origin_ns;
    int64_t ts_us = rel >= 0 ? rel / 1000 : -((-rel + 999) / 1000);
    int64_t dur_us = dur_ns > 0 ? (dur_ns + 999) / 1000 : 1;
    return p->api->ep->CreateProfilingEvent(OrtProfilingEventCategory_KERNEL, pid, k->tid, kNames[ev->kind], ts_us,
                                            dur_us, keys, values, n, out);
}

static OrtStatus* EndProfilingImpl(OrtEpProfilerImpl* this_ptr, OrtProfilingEventsContainer* events_container) {
    struct epabi_profiler* p = of(this_ptr);
    const struct epabi_api* api = p->api;
    pthread_mutex_lock(&p->lock);
    atomic_store_explicit(&p->active, false, memory_order_release);
    struct kept_event* kept = p->kept;
    size_t n = p->n;
    uint64_t dropped = p->dropped;
    p->kept = NULL;   /* ours now; the profiler starts empty */
    p->n = p->cap = 0;
    p->n_open = 0;
    p->dropped = 0;
    pthread_mutex_unlock(&p->lock);
    if (dropped > 0)
        EPABI_LOG(api, p->logger, ORT_LOGGING_LEVEL_WARNING,
                  EPABI_EP_NAME ": the profile lacks %" PRIu64 " EP event(s): at most %d are kept per profile (or "
                  "memory ran out)", dropped, (int)EPABI_PROFILER_MAX_EVENTS);
    OrtStatus* st = NULL;
    OrtProfilingEvent** events = n > 0 ? calloc(n, sizeof *events) : NULL;
    if (n > 0 && events == NULL) st = epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory writing %zu profile "
                                                  "event(s)", n);
    if (n > 0 && events_container == NULL && st == NULL)
        st = epabi_error(api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": EndProfiling got a NULL events container");
    if (st == NULL && n > 0) {
        qsort(kept, n, sizeof *kept, by_start);
        int32_t pid = (int32_t)getpid();
        for (size_t i = 0; i < n && st == NULL; ++i) st = make_event(p, &kept[i], pid, &events[i]);
        if (st == NULL) st = api->ep->ProfilingEventsContainer_AddEvents(events_container,
                                                                         (const OrtProfilingEvent* const*)events, n);
    }
    for (size_t i = 0; events != NULL && i < n; ++i) api->ep->ReleaseProfilingEvent(events[i]);   /* NULL-safe */
    free(events);
    for (size_t i = 0; i < n; ++i) {
        free(kept[i].name);
        free(kept[i].parent);
    }
    free(kept);
    return st;
}

OrtStatus* epabi_profiler_create(const struct epabi_api* api, const OrtLogger* logger, struct epabi_profiler** out,
                                 OrtEpProfilerImpl** impl) {
    *out = NULL;
    *impl = NULL;
    struct epabi_profiler* p = calloc(1, sizeof *p);
    if (p == NULL || pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory creating the EP profiler");
    }
    p->api = api;
    p->logger = logger;
    atomic_init(&p->refs, 2);
    atomic_init(&p->active, false);
    p->base.ort_version_supported = EPABI_ORT_API_VERSION;
    p->base.Release = ReleaseImpl;
    p->base.StartProfiling = StartProfilingImpl;
    p->base.StartEvent = StartEventImpl;
    p->base.StopEvent = StopEventImpl;
    p->base.EndProfiling = EndProfilingImpl;
    *out = p;
    *impl = &p->base;
    return NULL;
}
