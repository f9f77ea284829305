/*
 * stream.h - the device stream: the one place where the executor issues kernel launches, and where graphs
 * are captured and replayed.
 *
 * A stream is a small object behind a vtable (struct epabi_stream_ops), so the graph machinery
 * (graph_capture.h) is written once for every backend:
 *   host  the software adapter's stream (this file). A launch runs fn(args) at once on the calling thread;
 *         synchronize has nothing to wait for.
 *   cuda  a CUstream of one GPU (cuda/cuda_stream.h): a launch issues the CUDA kernels of its kind
 *         (cuda/cuda_kernels.h); capture is cuStreamBeginCapture (thread-local mode) .. cuStreamEndCapture +
 *         cuGraphInstantiate, replay is cuGraphLaunch.
 *
 * Capture on the host stream. Between begin_capture and end_capture every launch is recorded: the function,
 * a private copy of its argument block and therefore every buffer address inside it. Replay re-executes the
 * recorded list in order, without the executor: no shapes are derived and nothing is allocated, so data
 * updated in place at the captured addresses (the caller's bound inputs) changes the output, exactly like
 * a CUDA graph. Design decision: the host stream also EXECUTES each launch while capturing. Our kernels'
 * run() may read small shape-deciding input data that an earlier launch of the same run produced
 * (Reshape's shape, Slice's starts/ends, Expand's shape, axes inputs; see kernel.h); if capture only
 * recorded, those reads would see stale data and derive wrong shapes. The CUDA backend cannot execute
 * while capturing, so there those inputs must be host-resident and produced before the capture window (what
 * ORT's ALLOW_CPU_FOR_SHAPES placement arranges), and capture_policy.c replays once right after
 * end_capture there, so the capturing run's outputs are real on both.
 *
 * Memory the recorded launches point at is not the stream's business: the executor takes it from a
 * capture pool (arena.h) that the captured graph owns (graph_capture.h).
 *
 * Errors found while the work runs. Kernels check some data only when it is at hand, on the device or in a
 * replay (an out-of-range Gather index, an integer division by zero: launch_args.h): such a launch stores its
 * node's site and the error's kind into the stream's error word (host memory on every backend: CUDA's is pinned
 * and mapped, so kernels write it directly and the host reads it with one load). epabi_stream_synchronize reads
 * it once the work is done and turns it into an ORT_INVALID_ARGUMENT naming the node, so a run never returns
 * zero-filled output silently.
 *
 * User streams. A stream can be adopted from the user (the user_compute_stream option): the stream then
 * records that its handle is user-owned and epabi_stream_destroy frees only our wrapper, never the handle
 * (on CUDA it will not call cudaStreamDestroy). Its owner may be capturing it into a graph of their own around
 * a run (an external capture, epabi_stream_check_external_capture): then nothing may wait for the stream or read
 * back from it, kernels are only recorded, and the EP's own captures cannot nest inside. On the host backend the handle is just the value the user
 * gave (0 included): it is kept and reported by epabi_stream_handle, and never dereferenced.
 *
 * Ownership: epabi_stream_host_create returns a stream the caller destroys with epabi_stream_destroy.
 * A graph from epabi_stream_end_capture belongs to the caller (epabi_stream_graph_destroy) and must be
 * destroyed before the stream that captured it. Thread-safety: none; a stream belongs to one thread at a time
 * (graph_capture.h keeps one per thread).
 */
#ifndef EPABI_STREAM_H
#define EPABI_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "kernel.h"

enum epabi_stream_backend { EPABI_STREAM_HOST = 0, EPABI_STREAM_CUDA = 1 };

struct epabi_stream;

/* What one capture recorded; replayable only on the stream that captured it. Backends extend it (their
 * graph struct starts with this one). */
struct epabi_stream_graph {
    const struct epabi_stream_ops* ops;
    const struct epabi_stream* stream;   /* the stream that captured it */
};

/* One backend. Every member is set; a backend without capture returns ORT_NOT_IMPLEMENTED from
 * begin_capture. The stream-independent checks (nesting, capture state) are done by the wrappers below, so
 * backends only do the work. */
struct epabi_stream_ops {
    enum epabi_stream_backend backend;
    const char* name;                                       /* "host", "cuda" */
    OrtStatus* (*launch)(struct epabi_stream* s, enum epabi_launch_kind kind, epabi_launch_fn fn, const void* args,
                         size_t args_size);
    OrtStatus* (*begin_capture)(struct epabi_stream* s);
    OrtStatus* (*end_capture)(struct epabi_stream* s, struct epabi_stream_graph** out);
    void (*abort_capture)(struct epabi_stream* s);          /* drops what was recorded */
    OrtStatus* (*replay)(struct epabi_stream* s, const struct epabi_stream_graph* g);
    OrtStatus* (*synchronize)(struct epabi_stream* s);
    size_t (*graph_launches)(const struct epabi_stream_graph* g);
    void (*graph_destroy)(struct epabi_stream_graph* g);
    void (*destroy)(struct epabi_stream* s);                /* frees the wrapper; the handle only if ours */
    /* Stream-ordered device memory (arena.use_cuda_mempool=1); NULL on backends without it. */
    void* (*alloc_async)(struct epabi_stream* s, size_t bytes);
    void (*free_async)(struct epabi_stream* s, void* p);
    /* Host-visible copy of device data; waits for the stream first. NULL on the host backend. */
    OrtStatus* (*read_to_host)(struct epabi_stream* s, void* dst, const void* src, size_t bytes);
    /* Host data into device memory, ordered on the stream; src may be reused once it returns (a pageable
     * source is staged by the driver). NULL on the host backend. */
    OrtStatus* (*write_from_host)(struct epabi_stream* s, void* dst, const void* src, size_t bytes);
    /* Whether the stream is being captured right now, by anyone (cuStreamIsCapturing); NULL: never (host). */
    bool (*captured_now)(struct epabi_stream* s);
};

/* The node a launch belongs to, for errors its kernel finds (launch_args.h); owned by the plan, 8-aligned. */
struct epabi_error_site {
    const char* node;      /* node name */
    const char* op;        /* op type */
    const char* graph;     /* the fused node */
};

struct epabi_stream {
    const struct epabi_stream_ops* ops;
    const struct epabi_api* api;
    uint64_t* error_word;    /* set by the backend: what kernels report (see above); never NULL */
    bool replaying;          /* a replay was issued since the last synchronize (for the error message) */
    uintptr_t handle;        /* backend handle; host: the user's value when adopted, else 0 */
    bool user_owned;         /* adopted from user_compute_stream: the handle is never destroyed by us */
    bool capturing;          /* our own capture (begin_capture .. end_capture) */
    bool external_capture;   /* the user's stream is being captured by its owner (last check) */
    uint64_t launches;       /* launches issued (executed or recorded) since creation */
    uint64_t syncs;          /* synchronize calls since creation */
};

/* A host stream of our own (user_owned = false, handle 0), or, when adopt_user is true, a host stream that
 * adopts the user's stream handle `user_handle` (user_owned = true; the value is only recorded). NULL when
 * out of memory. */
struct epabi_stream* epabi_stream_host_create(const struct epabi_api* api, bool adopt_user, uintptr_t user_handle);

/* NULL is ignored. The stream must not be capturing (an open capture is aborted first). */
void epabi_stream_destroy(struct epabi_stream* s);

/* Issues fn(args): executes it (host), and while capturing also records it with a copy of args_size bytes
 * of args. Errors: ORT_FAIL when the record cannot be stored (the launch was not executed then either). */
OrtStatus* epabi_stream_launch(struct epabi_stream* s, enum epabi_launch_kind kind, epabi_launch_fn fn,
                               const void* args, size_t args_size);

/* Errors: ORT_FAIL naming the stream when it is already capturing (captures do not nest). */
OrtStatus* epabi_stream_begin_capture(struct epabi_stream* s);
/* Ends the capture and hands its graph to *out. Errors: ORT_FAIL when not capturing. On error nothing is
 * kept and the stream is no longer capturing. */
OrtStatus* epabi_stream_end_capture(struct epabi_stream* s, struct epabi_stream_graph** out);
/* Drops an open capture, if any. */
void epabi_stream_abort_capture(struct epabi_stream* s);

/* Re-executes g's launches in order. Errors: ORT_INVALID_ARGUMENT for a graph of another stream or while the
 * stream is capturing. With sync, waits for the work (no-op on the host stream) and reports what it found. */
OrtStatus* epabi_stream_replay(struct epabi_stream* s, const struct epabi_stream_graph* g, bool sync);
/* Waits for the stream's work, then reports an error a kernel found (epabi_stream_take_error). */
OrtStatus* epabi_stream_synchronize(struct epabi_stream* s);
/* The wait alone (epabi_stream_synchronize without reading the error word): for callers that time the two. */
OrtStatus* epabi_stream_wait(struct epabi_stream* s);
/* The error a kernel stored in the stream's error word since the last call, as ORT_INVALID_ARGUMENT naming the
 * node and what was wrong, and clears the word; NULL when there is none. Meaningful once the work that may
 * store it is done (the host stream: always). */
OrtStatus* epabi_stream_take_error(struct epabi_stream* s);
/* The message of an error word's value (epabi_stream_take_error's, and the executor's without a stream). */
OrtStatus* epabi_launch_error_status(const struct epabi_api* api, uint64_t word, bool replay);

size_t epabi_stream_graph_launches(const struct epabi_stream_graph* g);
void epabi_stream_graph_destroy(struct epabi_stream_graph* g);   /* NULL is ignored */

/* Queries: the backend name, the handle value and whether it is the user's. */
static inline const char* epabi_stream_backend_name(const struct epabi_stream* s) {
    return s->ops->name;
}
static inline uintptr_t epabi_stream_handle(const struct epabi_stream* s) {
    return s->handle;
}
static inline bool epabi_stream_is_user_owned(const struct epabi_stream* s) {
    return s->user_owned;
}
static inline bool epabi_stream_is_capturing(const struct epabi_stream* s) {
    return s->capturing;
}
/* Our capture or the owner's: work is recorded, not run, and nothing may wait for it. */
static inline bool epabi_stream_in_capture(const struct epabi_stream* s) {
    return s->capturing || s->external_capture;
}

/* Checks (for a user's stream only: no other stream has an owner who could capture it) whether its owner is
 * capturing it now, and records the answer in external_capture; returns it. One driver query. */
bool epabi_stream_check_external_capture(struct epabi_stream* s);

#endif
