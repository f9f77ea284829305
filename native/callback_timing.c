/*
 * callback_timing.c - see callback_timing.h.
 */
#include "callback_timing.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct timed_call {
    int64_t start_ns, end_ns;
    int64_t phase_ns[EPABI_REPLAY_PHASES];
    int32_t tid;
    uint8_t cb;
};

struct epabi_callback_timer {
    char* path;                      /* owned copy of EPABI_CALLBACK_TIMING */
    uint64_t ep;                     /* numbers the EPs of the process, for the file's readers */
    atomic_size_t next;              /* slots handed out; past the capacity: dropped calls */
    struct timed_call* calls;        /* EPABI_CALLBACK_TIMING_MAX_EVENTS slots */
};

static atomic_uint_fast64_t g_next_ep = 1;

static const char* const kNames[EPABI_CB_COUNT] = {
    [EPABI_CB_ON_RUN_START] = "OnRunStart",
    [EPABI_CB_ON_RUN_END] = "OnRunEnd",
    [EPABI_CB_IS_GRAPH_CAPTURE_ENABLED] = "IsGraphCaptureEnabled",
    [EPABI_CB_IS_GRAPH_CAPTURED] = "IsGraphCaptured",
    [EPABI_CB_REPLAY_GRAPH] = "ReplayGraph",
    [EPABI_CB_SYNC] = "Sync",
    [EPABI_CB_COMPUTE] = "Compute",
};

struct epabi_callback_timer* epabi_callback_timer_create(void) {
    const char* path = getenv("EPABI_CALLBACK_TIMING");
    if (path == NULL || path[0] == '\0') return NULL;
    struct epabi_callback_timer* t = calloc(1, sizeof *t);
    if (t == NULL) return NULL;
    t->path = malloc(strlen(path) + 1);
    t->calls = calloc(EPABI_CALLBACK_TIMING_MAX_EVENTS, sizeof *t->calls);
    if (t->path == NULL || t->calls == NULL) {
        free(t->path);
        free(t->calls);
        free(t);
        return NULL;
    }
    strcpy(t->path, path);
    t->ep = atomic_fetch_add(&g_next_ep, 1);
    atomic_init(&t->next, 0);
    return t;
}

void epabi_callback_begin(const struct epabi_callback_timer* t, struct epabi_callback_span* span) {
    if (t == NULL) return;
    memset(span->phase_ns, 0, sizeof span->phase_ns);
    span->start_ns = epabi_callback_now_ns();
}

void epabi_callback_end(struct epabi_callback_timer* t, enum epabi_callback cb, const struct epabi_callback_span* span) {
    if (t == NULL) return;
    int64_t end = epabi_callback_now_ns();
    size_t i = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed);
    if (i >= EPABI_CALLBACK_TIMING_MAX_EVENTS) return;   /* counted as dropped */
    struct timed_call* c = &t->calls[i];
    c->start_ns = span->start_ns;
    c->end_ns = end;
    memcpy(c->phase_ns, span->phase_ns, sizeof c->phase_ns);
    c->tid = (int32_t)syscall(SYS_gettid);
    c->cb = (uint8_t)cb;
}

void epabi_callback_timer_destroy(struct epabi_callback_timer* t) {
    if (t == NULL) return;
    size_t handed = atomic_load(&t->next);
    size_t n = handed < EPABI_CALLBACK_TIMING_MAX_EVENTS ? handed : EPABI_CALLBACK_TIMING_MAX_EVENTS;
    FILE* f = fopen(t->path, "a");
    if (f == NULL) {
        fprintf(stderr, "epabi: EPABI_CALLBACK_TIMING=%s: cannot open the file (%s); %zu timed call(s) lost\n",
                t->path, strerror(errno), n);
    } else {
        for (size_t i = 0; i < n; ++i) {
            const struct timed_call* c = &t->calls[i];
            fprintf(f, "{\"ep\": %" PRIu64 ", \"cb\": \"%s\", \"tid\": %" PRId32 ", \"start_ns\": %" PRId64
                    ", \"end_ns\": %" PRId64, t->ep, kNames[c->cb], c->tid, c->start_ns, c->end_ns);
            if (c->cb == EPABI_CB_REPLAY_GRAPH)
                fprintf(f, ", \"launch_ns\": %" PRId64 ", \"wait_ns\": %" PRId64 ", \"error_check_ns\": %" PRId64
                        ", \"profiler_ns\": %" PRId64, c->phase_ns[EPABI_REPLAY_LAUNCH], c->phase_ns[EPABI_REPLAY_WAIT],
                        c->phase_ns[EPABI_REPLAY_ERROR_CHECK], c->phase_ns[EPABI_REPLAY_PROFILER]);
            fputs("}\n", f);
        }
        fprintf(f, "{\"ep\": %" PRIu64 ", \"released\": true, \"events\": %zu, \"dropped\": %zu}\n", t->ep, n,
                handed - n);
        if (fclose(f) != 0)
            fprintf(stderr, "epabi: EPABI_CALLBACK_TIMING=%s: writing the file failed (%s)\n", t->path,
                    strerror(errno));
    }
    free(t->calls);
    free(t->path);
    free(t);
}
