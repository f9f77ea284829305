/*
 * graph_capture.h - graph capture and replay, per thread and per EP, by graph annotation id.
 *
 * Three layers, each usable on its own (the CUDA backend will reuse all three through stream.h):
 *
 *   graph set      id -> captured graph. A captured graph (struct epabi_graph) is what one capture made:
 *                  the stream graph (recorded launches) and the capture pool holding every block the
 *                  capturing run took (arena.h). The set owns its graphs; putting a second graph under an
 *                  id is an error naming the id; looking up a missing id is ORT_INVALID_ARGUMENT.
 *   graph manager  one stream's capture/replay state machine: capture_begin(id) .. capture_end(id),
 *                  replay(id), reset(), and per-id counts of regular (non-capturing, successful) runs.
 *                  Capture of an id is allowed once it has min_runs regular runs and no graph, and never
 *                  for id -1. Captures do not nest: capture_begin while capturing is an OrtStatus, not an
 *                  abort. A capture that fails (capture_end error, or the caller's capture_abort) leaves
 *                  nothing behind: the id stays uncaptured and the next run may try again.
 *   thread context the calling thread's graph stream, graph manager and pre-capture memory watermark for one
 *                  EP. Owned by the thread: created on first use, freed when the thread exits (pthread key
 *                  destructor), graphs before stream. The EP holds only a weak reference (a serial
 *                  number): when an EP is released, its context in EVERY thread's slot is freed at once by
 *                  the releasing thread (graphs, the arena blocks their capture pools hold, then the stream),
 *                  so an idle thread never keeps a released EP's memory; the release of the last capturing
 *                  EP also frees every thread's (now empty) slot and deletes the pthread key (so no
 *                  destructor of ours can outlive the library).
 *
 * How ONNX Runtime drives it (hosts >= 1.26, see ep.c): a run of id executes normally while
 * IsGraphCaptured(id) is false; epabi_gc_run_start (OrtEp::OnRunStart) opens a capture window when the
 * thread's manager allows it; fused nodes then run on the thread's stream with the window's capture pool
 * (epabi_gc_run_env); epabi_gc_run_end (OrtEp::OnRunEnd) closes the window, stores the graph, checks the
 * memory watermark and replays once so the capturing run's outputs are real, or counts a regular run.
 * From then on ORT only calls IsGraphCaptured/ReplayGraph for that id on that thread.
 *
 * Log phrases (stable; tests may rely on them):
 *   INFO    "capturing graph of annotation id <id> on this thread after <n> regular run(s)"
 *   INFO    "captured graph of annotation id <id>: <k> launch(es)"
 *   VERBOSE "replayed annotation id <id> once right after capture"
 *   VERBOSE "ReplayGraph replayed annotation id <id> (replay <n> of this graph on this thread)"
 *           (one line per OrtEp::ReplayGraph; n counts every replay of the graph, the one right after
 *           capture included, so the k-th ReplayGraph logs replay k+1)
 *   WARNING "allocated memory during graph capture of annotation id <id> ...
 *            min_num_runs_before_cuda_graph_capture ..."
 *   WARNING "graph capture of annotation id <id> failed ... nothing was kept"
 *   INFO    "graph stream of this thread adopts the user's stream user_compute_stream=0x<hex> (... not destroyed
 *            by the EP)"   (once per thread and EP, when the context is created)
 *
 * Global state: one pthread key, a registry (mutex-protected) of the attached-EP count and the thread slots,
 * and a counter of live contexts; nothing else. Thread-safety: a context is used only by its own thread; it
 * is freed by its thread (at exit) or by the release of its EP on any thread (ORT makes no call of an EP
 * while releasing it, so the context is not in use then). Each slot has a mutex that its thread takes only
 * to add a context (first use of an EP on the thread) and that a release takes to empty that EP's entries;
 * looking a context up, capture and replay take no lock (see graph_capture.c).
 */
#ifndef EPABI_GRAPH_CAPTURE_H
#define EPABI_GRAPH_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "arena.h"
#include "plan.h"
#include "stream.h"

enum { EPABI_GRAPH_ID_SKIP = -1, EPABI_GRAPH_ID_DEFAULT = 0 };

/* ---- graph set --------------------------------------------------------------------------------------- */

struct epabi_graph;   /* one captured graph: stream graph + capture pool + replay count */

struct epabi_graph_set {
    struct epabi_graph** graphs;   /* owned */
    size_t n, cap;
};

/* Takes ownership of graph on success (on error the caller still owns it). Errors: ORT_FAIL naming the id
 * when a graph is already stored under it, ORT_FAIL when out of memory. */
OrtStatus* epabi_graph_set_put(const struct epabi_api* api, struct epabi_graph_set* set, int id,
                               struct epabi_graph* graph);
/* NULL when absent. */
struct epabi_graph* epabi_graph_set_find(const struct epabi_graph_set* set, int id);
/* Destroys one graph (false when absent) or all of them. */
bool epabi_graph_set_remove(struct epabi_graph_set* set, int id);
void epabi_graph_set_clear(struct epabi_graph_set* set);

/* ---- graph manager ----------------------------------------------------------------------------------- */

struct epabi_graph_manager;

/* The manager uses `stream` (not owned; it must outlive the manager) and takes one arena reference for its
 * capture pools. NULL when out of memory. */
struct epabi_graph_manager* epabi_graph_manager_create(const struct epabi_api* api, struct epabi_stream* stream,
                                                       struct epabi_arena* arena, int min_runs);
/* Aborts an open capture and destroys every graph. NULL is ignored. */
void epabi_graph_manager_destroy(struct epabi_graph_manager* m);

bool epabi_graph_manager_is_captured(const struct epabi_graph_manager* m, int id);
/* id != -1, no graph yet, and at least min_runs regular runs of id counted. */
bool epabi_graph_manager_capture_allowed(const struct epabi_graph_manager* m, int id);
/* True while a capture is open; *id (may be NULL) receives its id. */
bool epabi_graph_manager_is_capturing(const struct epabi_graph_manager* m, int* id);
int epabi_graph_manager_regular_runs(const struct epabi_graph_manager* m, int id);
/* Counts one regular run of id (ignored for -1 and for captured ids). */
void epabi_graph_manager_count_regular_run(struct epabi_graph_manager* m, int id);

/* Opens a capture of id on the stream. Errors (state unchanged): ORT_FAIL when a capture is already open
 * (naming both ids), ORT_INVALID_ARGUMENT for id -1 or an id that already has a graph. */
OrtStatus* epabi_graph_manager_capture_begin(struct epabi_graph_manager* m, int id);
/* Closes the open capture of id and stores its graph. Errors: ORT_FAIL when no capture of id is open, when
 * the stream fails or out of memory; the capture is then dropped (nothing is stored). */
OrtStatus* epabi_graph_manager_capture_end(struct epabi_graph_manager* m, int id);
/* Drops the open capture, if any, with everything it recorded and allocated. */
void epabi_graph_manager_capture_abort(struct epabi_graph_manager* m);
/* The open capture's pool (for the executor), NULL when not capturing. */
struct epabi_arena_pool* epabi_graph_manager_capture_pool(const struct epabi_graph_manager* m);

/* Re-executes the graph of id on the stream. Errors: ORT_INVALID_ARGUMENT naming the id when it has no
 * graph; stream errors. */
OrtStatus* epabi_graph_manager_replay(struct epabi_graph_manager* m, int id, bool sync);
/* Replays of id's graph so far (0 when absent); launches it recorded; pool blocks/bytes it holds. */
uint64_t epabi_graph_manager_replays(const struct epabi_graph_manager* m, int id);
size_t epabi_graph_manager_launches(const struct epabi_graph_manager* m, int id);
void epabi_graph_manager_memory(const struct epabi_graph_manager* m, int id, struct epabi_arena_pool_stats* out);
/* Destroys one id's graph and its count (false when it had none). */
bool epabi_graph_manager_release(struct epabi_graph_manager* m, int id);
/* Aborts an open capture, destroys every graph and forgets every count. */
void epabi_graph_manager_reset(struct epabi_graph_manager* m);

/* ---- per-thread contexts and the OrtEp callbacks ----------------------------------------------------- */

/* What an EP tells the machinery about itself. Lives inside the EP; filled before epabi_gc_attach. */
struct epabi_gc_owner;
struct epabi_gc_owner {
    const struct epabi_api* api;
    const OrtLogger* logger;           /* the session logger */
    struct epabi_arena* arena;         /* where run memory comes from (the factory's) */
    int min_runs;                      /* min_num_runs_before_cuda_graph_capture */
    bool user_stream_given;            /* user_compute_stream was set: adopt it, never destroy it */
    uintptr_t user_stream;
    uint64_t serial;                   /* set by epabi_gc_attach; 0 = not attached */
    unsigned fused_nodes;              /* fused nodes the EP compiled: each run computes every one of them */
    /* Backend hooks (the CUDA backend, set by ep.c); NULL: host streams, no device memory check.
     * create_stream makes a thread's stream (adopting user_stream when user_stream_given);
     * device_free_bytes reads the device's free memory (cudaMemGetInfo) for the capture-window detector. */
    struct epabi_stream* (*create_stream)(const struct epabi_gc_owner* owner, OrtStatus** status);
    bool (*device_free_bytes)(const struct epabi_gc_owner* owner, size_t* free_bytes);
    const void* backend;               /* what the hooks need (the CUDA device) */
    bool mempool;                      /* arena.use_cuda_mempool=1: run memory is stream-ordered (CUDA only) */
};

struct epabi_thread_context;

/* Registers the EP (gives it a serial). Errors: ORT_FAIL when no pthread key is available. */
OrtStatus* epabi_gc_attach(struct epabi_gc_owner* owner);
/* Unregisters the EP and frees its context on every thread now (graphs, their capture pools' arena blocks,
 * streams), whichever thread calls it; when this was the last attached EP, also frees every thread's slot
 * and deletes the pthread key. No call for this EP may be in flight on any thread (ORT's guarantee for an
 * EP being released); calls for other EPs on other threads may be. Takes the registry lock and, one at a
 * time, each thread slot's lock. */
void epabi_gc_detach(struct epabi_gc_owner* owner);

/* Thread contexts alive now, over every thread and EP (for tests and diagnostics). */
size_t epabi_gc_live_contexts(void);

/* The calling thread's context for this EP, or NULL when the thread has none (nothing is created). */
struct epabi_thread_context* epabi_gc_find(const struct epabi_gc_owner* owner);

/* The run option gpu_graph_id, parsed as ORT core parses it: a whole-string decimal int (optional '-',
 * no blanks, no '+'); absent or unparsable = 0; -1 = never capture or replay. */
int epabi_gc_annotation_id(const struct epabi_api* api, const OrtRunOptions* run_options);

/* OrtEp::OnRunStart/OnRunEnd/IsGraphCaptured/ReplayGraph/Sync for an attached EP (see the top comment). */
OrtStatus* epabi_gc_run_start(const struct epabi_gc_owner* owner, const OrtRunOptions* run_options);
OrtStatus* epabi_gc_run_end(const struct epabi_gc_owner* owner, const OrtRunOptions* run_options, bool sync_stream);
bool epabi_gc_is_captured(const struct epabi_gc_owner* owner, int id);
OrtStatus* epabi_gc_replay(const struct epabi_gc_owner* owner, int id);
OrtStatus* epabi_gc_sync(const struct epabi_gc_owner* owner);
/* Drops the calling thread's graph of id (and its warm-up count), so the next runs warm up and capture
 * again, e.g. after rebinding other buffers. ORT_INVALID_ARGUMENT when this thread has no such graph. */
OrtStatus* epabi_gc_release_graph(const struct epabi_gc_owner* owner, int id);

/* For Compute on this thread: the stream, and the capture pool while a capture window is open (tc may be
 * NULL: a plain run). Then epabi_gc_note_compute records the outcome, so a failed fused node fails the
 * capture (and is not counted as a warm-up run). */
void epabi_gc_run_env(const struct epabi_gc_owner* owner, struct epabi_thread_context* tc, struct epabi_run_env* env);

/* The calling thread's context, created on first use (also for EPs that only need per-thread streams, the
 * CUDA device without graph capture). Errors as OnRunStart's context creation. */
OrtStatus* epabi_gc_get(const struct epabi_gc_owner* owner, struct epabi_thread_context** out);
struct epabi_stream* epabi_gc_stream(struct epabi_thread_context* tc);
void epabi_gc_note_compute(struct epabi_thread_context* tc, bool ok);

#endif
