/*
 * graph_capture.h - captured graphs by graph annotation id: the graph set and one stream's graph manager.
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
/* The ONNX nodes id's graph recorded, as the capturer reported them (0 when absent or unreported). */
void epabi_graph_manager_set_nodes(struct epabi_graph_manager* m, int id, unsigned nodes);
unsigned epabi_graph_manager_nodes(const struct epabi_graph_manager* m, int id);
/* Destroys one id's graph and its count (false when it had none). */
bool epabi_graph_manager_release(struct epabi_graph_manager* m, int id);
/* Aborts an open capture, destroys every graph and forgets every count. */
void epabi_graph_manager_reset(struct epabi_graph_manager* m);

#endif
