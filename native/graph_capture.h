/*
 * graph_capture.h - captured graphs by graph annotation id: the graph set and one stream's graph manager.
 *
 *   graph set      id -> captured graph. A captured graph (struct epabi_graph) is what one capture made:
 *                  the stream graph (recorded launches), the capture pool holding every block the
 *                  capturing run took (arena.h) and holds on the allocator blocks of the host's buffers it
 *                  reads and writes (alloc_registry.h), all let go when the graph is destroyed. The set owns its graphs; putting a second graph under an
 *                  id is an error naming the id; looking up a missing id is ORT_INVALID_ARGUMENT.
 *   graph manager  one stream's capture/replay state machine: capture_begin(id) .. capture_end(id),
 *                  replay(id), reset(), and per-id counts of regular (non-capturing, successful) runs.
 *                  Capture of an id is allowed once it has min_runs regular runs and no graph, and never
 *                  for id -1. Captures do not nest: capture_begin while capturing is an OrtStatus, not an
 *                  abort. A capture that fails (capture_end error, or the caller's capture_abort) leaves
 *                  nothing behind: the id stays uncaptured and the next run may try again.
 *
 * The host's buffers (what the executor, plan_exec.c, tells the manager during a run). A replay reads and writes
 * the addresses the capturing run saw, after the host may have freed them. So the capture
 *   - holds every fused-node input and output that lies in a block of our allocators (device memory, the
 *     software adapter's device-memory mode): the host's Free of it is deferred until the graph goes;
 *   - in host memory (the software adapter's default mode, where the host's buffers come from its own CPU
 *     allocator), computes each fused output the host allocated for the run, rather than the caller bound, into
 *     a block of the capture pool and copies it to the host's buffer once the capturing run is done (outside the
 *     recording); later fused nodes of the run read that block instead of the host's buffer. Which outputs the
 *     host allocated: OrtApi::KernelContext_GetPreallocatedOutput (API 30) says which are bound, and ONNX Runtime
 *     hands the executions after a call's first its first execution's outputs as pre-allocated, so every output
 *     buffer a regular run of the id got unbound counts as the host's too (note_host_output). A node all of whose
 *     outputs are the host's (a plain run()) also reads copies of its inputs in the pool, since its feeds are
 *     temporary too. The replays then compute into the graph's own memory, which ORT (run() returns nothing on
 *     a replay) and epabi's host never read.
 *
 * Each thread's context (thread_context.h) owns one manager per EP when graph capture is on; the OrtEp
 * callbacks that drive it are in capture_policy.h. Thread-safety: a manager belongs to one thread at a time.
 */
#ifndef EPABI_GRAPH_CAPTURE_H
#define EPABI_GRAPH_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "arena.h"
#include "callback_timing.h"
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
 * capture pools and one reference to blocks (the factory's allocator registry; NULL: nothing is held). NULL when
 * out of memory. */
struct epabi_alloc_registry;
struct epabi_graph_manager* epabi_graph_manager_create(const struct epabi_api* api, struct epabi_stream* stream,
                                                       struct epabi_arena* arena, struct epabi_alloc_registry* blocks,
                                                       int min_runs);
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

/* The host's buffers of the run in progress (see the top comment; plan_exec.c calls these).
 *   run_begins        the run's annotation id (OnRunStart; a capture window sets it too).
 *   hold              inside a capture window: holds the allocator block containing [p, p + bytes) for the graph;
 *                     false when none of ours contains it, or out of memory (the caller's own memory).
 *   note_host_output  a regular run of a capturable id: the host allocated output buffer p for it.
 *   was_host_output   whether p was such a buffer of the current id.
 *   keep_block        inside a capture window: a block of the capture pool that stays the graph's (never freed
 *                     by the run); NULL when out of memory. kept_blocks: how many the last closed capture took
 *                     (new memory by design, which the allocation-during-capture detector does not count).
 *   redirect          inside a capture window: the host's buffer `host` is computed at `block` (a kept block);
 *                     false when out of memory. redirected: that block, NULL when none. */
void epabi_graph_manager_run_begins(struct epabi_graph_manager* m, int id);
bool epabi_graph_manager_hold(struct epabi_graph_manager* m, const void* p, size_t bytes);
void epabi_graph_manager_note_host_output(struct epabi_graph_manager* m, const void* p);
bool epabi_graph_manager_was_host_output(const struct epabi_graph_manager* m, const void* p);
void* epabi_graph_manager_keep_block(struct epabi_graph_manager* m, size_t bytes);
size_t epabi_graph_manager_kept_blocks(const struct epabi_graph_manager* m);
bool epabi_graph_manager_redirect(struct epabi_graph_manager* m, const void* host, void* block);
void* epabi_graph_manager_redirected(const struct epabi_graph_manager* m, const void* host);

/* Re-executes the graph of id on the stream. Errors: ORT_INVALID_ARGUMENT naming the id when it has no
 * graph; stream errors. */
OrtStatus* epabi_graph_manager_replay(struct epabi_graph_manager* m, int id, bool sync);
/* A replay with its synchronize, adding the time of its launch, wait and error_check phases to phase_ns
 * (callback_timing.h) when phase_ns is not NULL. */
OrtStatus* epabi_graph_manager_replay_timed(struct epabi_graph_manager* m, int id, int64_t* phase_ns);
/* Replays of id's graph so far (0 when absent); launches it recorded; pool blocks/bytes it holds. */
uint64_t epabi_graph_manager_replays(const struct epabi_graph_manager* m, int id);
size_t epabi_graph_manager_launches(const struct epabi_graph_manager* m, int id);
void epabi_graph_manager_memory(const struct epabi_graph_manager* m, int id, struct epabi_arena_pool_stats* out);
/* The ONNX nodes id's graph recorded, as the capturer reported them (0 when absent or unreported). */
void epabi_graph_manager_set_nodes(struct epabi_graph_manager* m, int id, unsigned nodes);
unsigned epabi_graph_manager_nodes(const struct epabi_graph_manager* m, int id);
/* Destroys one id's graph and its count (false when it had none). */
bool epabi_graph_manager_release(struct epabi_graph_manager* m, int id);
/* Aborts an open capture, destroys every graph and forgets every count. */
void epabi_graph_manager_reset(struct epabi_graph_manager* m);

#endif
