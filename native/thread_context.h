/*
 * thread_context.h - per-thread execution state of one EP, with graph capture on or off: the calling thread's
 * stream (where its fused nodes launch), and, when graph capture is on, its graph manager (graph_capture.h) and
 * the run in progress (capture_policy.h).
 *
 * A context is owned by its thread: created on first use, freed when the thread exits (pthread key destructor),
 * graphs before stream. The EP holds only a weak reference (a serial number): when an EP is released, its
 * context in EVERY thread's slot is freed at once by the releasing thread (graphs, the arena blocks their
 * capture pools hold, then the stream), so an idle thread never keeps a released EP's memory; the release of
 * the last attached EP also frees every thread's (now empty) slot and deletes the pthread key (so no destructor
 * of ours can outlive the library).
 *
 * Global state: one pthread key, a registry (mutex-protected) of the attached-EP count and the thread slots,
 * and a counter of live contexts; nothing else. Thread-safety: a context is used only by its own thread; it is
 * freed by its thread (at exit) or by the release of its EP on any thread (ORT makes no call of an EP while
 * releasing it, so the context is not in use then). Each slot has a mutex that its thread takes only to add a
 * context (first use of an EP on the thread) and that a release takes to empty that EP's entries; looking a
 * context up takes no lock (see thread_context.c).
 */
#ifndef EPABI_THREAD_CONTEXT_H
#define EPABI_THREAD_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "arena.h"
#include "ep_profiler.h"
#include "graph_capture.h"
#include "plan.h"
#include "stream.h"

/* What an EP tells the machinery about itself. Lives inside the EP; filled before epabi_threads_attach and
 * read-only afterwards. */
struct epabi_thread_owner {
    const struct epabi_api* api;
    const OrtLogger* logger;           /* the session logger */
    struct epabi_arena* arena;         /* where run memory comes from (graph capture pools too) */
    struct epabi_alloc_registry* blocks;   /* the factory's allocator blocks, held by captured graphs */
    bool user_stream_given;            /* user_compute_stream was set: adopt it, never destroy it */
    uintptr_t user_stream;
    /* The backend's stream for a thread (adopting user_stream when user_stream_given); NULL: host streams. */
    struct epabi_stream* (*create_stream)(const struct epabi_thread_owner* owner, OrtStatus** status);
    /* The device's free memory (cuMemGetInfo) for the capture-window detector; NULL: none. */
    bool (*device_free_bytes)(const struct epabi_thread_owner* owner, size_t* free_bytes);
    const void* backend;               /* what the hooks need (the backend's EP device) */
    bool mempool;                      /* run memory is stream-ordered (arena.use_cuda_mempool=1) */
    /* graph capture (capture_policy.h); off: contexts have a stream only */
    bool graph_capture;
    int min_runs;                      /* min_num_runs_before_cuda_graph_capture */
    unsigned fused_nodes;              /* fused nodes the EP compiled: each run computes every one of them */
    bool log_verbose;                  /* the logger shows VERBOSE lines: read once, at attach */
    /* The EP's profiler (ep_profiler.h), set by OrtEp::CreateProfiler before any run; NULL: none. Captures and
     * replays become its events while the host profiles. */
    struct epabi_profiler* profiler;
    uint64_t serial;                   /* set by epabi_threads_attach; 0 = not attached */
};

/* The run in progress on one thread (capture_policy.c). */
struct epabi_thread_run {
    bool failed;                       /* a fused node failed since OnRunStart */
    unsigned computes;                 /* fused-node runs since OnRunStart */
    unsigned nodes;                    /* ONNX nodes those runs computed */
    int annotation_id;                 /* of the run in progress (gpu_graph_id) */
    int64_t capture_start_ns;          /* when the open capture began (epabi_profiler_now_ns) */
    struct epabi_arena_stats watermark;   /* arena stats right before the open capture began */
    size_t device_free;                /* the device's free bytes at the same moment (0: unknown) */
};

struct epabi_thread_context {
    struct epabi_thread_context* next;     /* only on a detach's list of contexts to free */
    uint64_t serial;                       /* the EP it belongs to (weak) */
    struct epabi_stream* stream;           /* owned wrapper; a user's handle inside is never destroyed */
    struct epabi_graph_manager* graphs;    /* owned (graph capture on), destroyed before the stream; else NULL */
    struct epabi_arena* arena;             /* borrowed */
    struct epabi_thread_run run;
    struct epabi_arena_pool** kept_pools;  /* owned: runs recorded into the owner's capture of a user's stream */
    size_t n_kept_pools, cap_kept_pools;
};

/* Registers the EP (gives it a serial) and reads the logger's severity once. Errors: ORT_FAIL when no pthread
 * key is available. */
OrtStatus* epabi_threads_attach(struct epabi_thread_owner* owner);
/* Unregisters the EP and frees its context on every thread now (graphs, their capture pools' arena blocks,
 * streams), whichever thread calls it; when this was the last attached EP, also frees every thread's slot
 * and deletes the pthread key. No call for this EP may be in flight on any thread (ORT's guarantee for an
 * EP being released); calls for other EPs on other threads may be. Takes the registry lock and, one at a
 * time, each thread slot's lock. */
void epabi_threads_detach(struct epabi_thread_owner* owner);

/* Thread contexts alive now, over every thread and EP (for tests and diagnostics). */
size_t epabi_thread_live_contexts(void);

/* The calling thread's context for this EP, or NULL when the thread has none (nothing is created). No lock. */
struct epabi_thread_context* epabi_thread_find(const struct epabi_thread_owner* owner);
/* The calling thread's context, created (stream, and graph manager when capture is on) on first use.
 * Errors: ORT_FAIL when the EP is not attached or out of memory; the backend's stream errors. */
OrtStatus* epabi_thread_get(const struct epabi_thread_owner* owner, struct epabi_thread_context** out);

/* Where a Compute on this thread issues its work: tc's stream, and the capture pool while a capture window is
 * open (tc may be NULL: a plain run on no stream). */
void epabi_thread_run_env(const struct epabi_thread_owner* owner, const struct epabi_thread_context* tc,
                          struct epabi_run_env* env);
/* Waits for the calling thread's stream (OrtEp::Sync); nothing when the thread has no context, or while the owner of
 * a user's stream captures it (the work is only recorded). */
OrtStatus* epabi_thread_sync(const struct epabi_thread_owner* owner);

/* Run memory for one fused node's run recorded into the owner's capture of a user's stream (stream.h): the owner's
 * graph keeps using its blocks at every launch, and we cannot know when that graph goes, so the pool stays with
 * the context until the thread exits or the EP is released. NULL when out of memory. */
struct epabi_arena_pool* epabi_thread_keep_pool(struct epabi_thread_context* tc);

#endif
