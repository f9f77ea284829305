/*
 * capture_policy.c - see capture_policy.h.
 */
#include "capture_policy.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>

#include "ep_factory.h"

#define MIN_RUNS_OPTION "min_num_runs_before_cuda_graph_capture"

int epabi_capture_annotation_id(const struct epabi_api* api, const OrtRunOptions* run_options) {
    if (run_options == NULL || api->ort->GetRunConfigEntry == NULL) return EPABI_GRAPH_ID_DEFAULT;
    const char* v = api->ort->GetRunConfigEntry(run_options, "gpu_graph_id");
    if (v == NULL) return EPABI_GRAPH_ID_DEFAULT;
    const char* p = v;
    bool negative = *p == '-';
    if (negative) ++p;
    if (*p < '0' || *p > '9') return EPABI_GRAPH_ID_DEFAULT;
    long long n = 0;
    for (; *p >= '0' && *p <= '9'; ++p) {
        n = n * 10 + (*p - '0');
        if (n > (long long)INT_MAX + 1) return EPABI_GRAPH_ID_DEFAULT;
    }
    if (*p != '\0') return EPABI_GRAPH_ID_DEFAULT;
    if (negative) n = -n;
    if (n > INT_MAX) return EPABI_GRAPH_ID_DEFAULT;
    return (int)n;
}

/* The owner of user_compute_stream is capturing it around this run: our own capture or replay cannot happen inside
 * theirs (CUDA captures do not nest; a replay would synchronize inside their capture). */
static OrtStatus* owner_captures(const struct epabi_thread_owner* owner, const struct epabi_stream* s, int id,
                                 const char* what) {
    return epabi_error(owner->api, ORT_INVALID_ARGUMENT,
                       EPABI_EP_NAME ": %s annotation id %d: user_compute_stream=0x%" PRIxPTR " is being captured by "
                       "its owner (cuStreamIsCapturing), and with enable_cuda_graph=1 the EP captures and replays its "
                       "own graphs on that stream, which cannot happen inside another capture; set enable_cuda_graph=0 "
                       "to have the EP's kernels recorded into your capture, run with gpu_graph_id -1, or end your "
                       "capture before the run", what, id, epabi_stream_handle(s));
}

OrtStatus* epabi_capture_run_start(const struct epabi_thread_owner* owner, const OrtRunOptions* run_options) {
    const struct epabi_api* api = owner->api;
    if (!owner->graph_capture) return NULL;
    int id = epabi_capture_annotation_id(api, run_options);
    struct epabi_thread_context* tc = NULL;
    EPABI_RETURN_IF_ERROR(epabi_thread_get(owner, &tc));
    struct epabi_graph_manager* m = tc->graphs;
    int open = 0;
    if (epabi_graph_manager_is_capturing(m, &open)) {
        /* a run inside a run on this thread, or a run whose OnRunEnd never came: either way the open
         * capture cannot be trusted; drop it so the next run starts clean */
        epabi_graph_manager_capture_abort(m);
        return epabi_error(api, ORT_FAIL,
                           EPABI_EP_NAME ": OnRunStart (annotation id %d) found the graph capture of annotation id "
                           "%d still open on this thread; captures do not nest, so that capture was dropped",
                           id, open);
    }
    if (id != EPABI_GRAPH_ID_SKIP && epabi_stream_check_external_capture(tc->stream))
        return owner_captures(owner, tc->stream, id, "cannot run");
    tc->run.failed = false;
    tc->run.computes = 0;
    tc->run.nodes = 0;
    tc->run.annotation_id = id;
    epabi_graph_manager_run_begins(m, id);
    if (!epabi_graph_manager_capture_allowed(m, id)) return NULL;
    epabi_arena_get_stats(tc->arena, &tc->run.watermark);
    tc->run.device_free = 0;
    if (owner->device_free_bytes != NULL && !owner->device_free_bytes(owner, &tc->run.device_free)) tc->run.device_free = 0;
    EPABI_RETURN_IF_ERROR(epabi_graph_manager_capture_begin(m, id));
    tc->run.capture_start_ns = epabi_profiler_now_ns();
    EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_INFO,
              EPABI_EP_NAME ": capturing graph of annotation id %d on this thread after %d regular run(s)", id,
              epabi_graph_manager_regular_runs(m, id));
    return NULL;
}

/* The host stream executes each launch while it records it (stream.h); CUDA's capture only records. */
static bool executes_while_capturing(const struct epabi_stream* s) {
    return s->ops->backend == EPABI_STREAM_HOST;
}

/* Allocation-during-capture detector: chunks the arena had to reserve from the system while capturing mean
 * the warm-up runs had not reached the steady state (or another thread allocated meanwhile). */
static void check_watermark(const struct epabi_thread_owner* owner, const struct epabi_thread_context* tc, int id) {
    struct epabi_arena_stats now;
    size_t free_now = 0;
    if (tc->run.device_free > 0 && !owner->mempool && owner->device_free_bytes(owner, &free_now) &&
        free_now < tc->run.device_free) {
        /* the device-wide view: free bytes (cudaMemGetInfo) before and after the capture window, whoever
         * allocated (arena chunks, cuBLAS, the driver; another process counts too) */
        EPABI_LOG(owner->api, owner->logger, ORT_LOGGING_LEVEL_WARNING,
                  EPABI_EP_NAME ": allocated memory during graph capture of annotation id %d: the device's free "
                  "memory dropped by %zu bytes while capturing (cuMemGetInfo); raise " MIN_RUNS_OPTION " (now %d) if "
                  "this repeats", id, tc->run.device_free - free_now, owner->min_runs);
    }
    epabi_arena_get_stats(tc->arena, &now);
    /* the blocks a capture keeps for the host's own buffers (graph_capture.h) are new memory by design */
    uint64_t expected = tc->run.watermark.num_reserves + epabi_graph_manager_kept_blocks(tc->graphs);
    if (now.num_reserves <= expected) return;
    uint64_t chunks = now.num_reserves - tc->run.watermark.num_reserves;
    uint64_t bytes = now.bytes_reserved > tc->run.watermark.bytes_reserved
                         ? now.bytes_reserved - tc->run.watermark.bytes_reserved : 0;
    EPABI_LOG(owner->api, owner->logger, ORT_LOGGING_LEVEL_WARNING,
              EPABI_EP_NAME ": allocated memory during graph capture of annotation id %d: the arena reserved %" PRIu64
              " new chunk(s) (%" PRIu64 " bytes) from the system while capturing, so the warm-up runs had not "
              "reached a steady state (another thread allocating at the same time counts too); raise "
              MIN_RUNS_OPTION " (now %d) if this repeats", id, chunks, bytes, owner->min_runs);
}

OrtStatus* epabi_capture_run_end(const struct epabi_thread_owner* owner, const OrtRunOptions* run_options,
                                  bool sync_stream) {
    const struct epabi_api* api = owner->api;
    struct epabi_thread_context* tc = epabi_thread_find(owner);
    if (tc == NULL || tc->graphs == NULL) return NULL;   /* OnRunStart never set this thread up: nothing to end */
    struct epabi_graph_manager* m = tc->graphs;
    int id = epabi_capture_annotation_id(api, run_options);
    bool replayed = false;
    OrtStatus* st = NULL;
    int open = 0;
    if (epabi_graph_manager_is_capturing(m, &open)) {
        if (!tc->run.failed && tc->run.computes != owner->fused_nodes) {
            /* fused nodes that ran on other threads (parallel execution) were not recorded: a replay
             * would leave their outputs stale, so this capture cannot be kept */
            epabi_graph_manager_capture_abort(m);
            st = epabi_error(api, ORT_FAIL,
                             EPABI_EP_NAME ": graph capture of annotation id %d recorded %u of the %u fused node(s) "
                             "on the thread that runs the session; graph capture needs sequential execution "
                             "(ExecutionMode ORT_SEQUENTIAL)", open, tc->run.computes, owner->fused_nodes);
        } else if (tc->run.failed) {
            epabi_graph_manager_capture_abort(m);
            EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_WARNING,
                      EPABI_EP_NAME ": graph capture of annotation id %d failed (a fused node failed during the "
                      "capturing run); nothing was kept, the next run captures again", open);
        } else {
            st = epabi_graph_manager_capture_end(m, open);
            if (st == NULL) {
                check_watermark(owner, tc, open);
                struct epabi_arena_pool_stats mem;
                epabi_graph_manager_memory(m, open, &mem);
                EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_INFO,
                          EPABI_EP_NAME ": captured graph of annotation id %d: %zu launch(es), %" PRIu64 " arena "
                          "block(s) (%" PRIu64 " bytes) kept for replays", open,
                          epabi_graph_manager_launches(m, open), mem.blocks, mem.bytes);
                /* A CUDA capture only recorded: one replay gives the capturing run its outputs. The host
                 * stream already executed every launch while recording (stream.h), so a replay there would
                 * execute the run a second time: state bound as both an input and an output (one buffer)
                 * would advance twice in one call. */
                if (!executes_while_capturing(tc->stream)) {
                    st = epabi_graph_manager_replay(m, open, sync_stream);
                    replayed = st == NULL;
                }
                if (st == NULL) {   /* the graph is kept */
                    epabi_graph_manager_set_nodes(m, open, tc->run.nodes);
                    struct epabi_profile_event ev = {
                        .kind = EPABI_PROFILE_CAPTURE, .annotation_id = open, .node_count = tc->run.nodes,
                        .fused_node_count = tc->run.computes, .launches = epabi_graph_manager_launches(m, open),
                        .start_ns = tc->run.capture_start_ns, .end_ns = epabi_profiler_now_ns()};
                    epabi_profiler_record(owner->profiler, &ev);
                }
                if (replayed) {
                    EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_VERBOSE,
                              EPABI_EP_NAME ": replayed annotation id %d once right after capture", open);
                } else if (st != NULL) {
                    epabi_graph_manager_release(m, open);
                    EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_WARNING,
                              EPABI_EP_NAME ": graph capture of annotation id %d failed (its first replay failed); "
                              "nothing was kept, the next run captures again", open);
                }
            } else {
                EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_WARNING,
                          EPABI_EP_NAME ": graph capture of annotation id %d failed (%s); nothing was kept, the next "
                          "run captures again", open, api->ort->GetErrorMessage(st));
            }
        }
    } else if (!tc->run.failed) {
        epabi_graph_manager_count_regular_run(m, id);
    }
    tc->run.failed = false;
    tc->run.computes = 0;
    tc->run.nodes = 0;
    if (st == NULL && sync_stream && !replayed) st = epabi_stream_synchronize(tc->stream);
    return st;
}

bool epabi_capture_is_captured(const struct epabi_thread_owner* owner, int id) {
    const struct epabi_thread_context* tc = epabi_thread_find(owner);
    return tc != NULL && tc->graphs != NULL && epabi_graph_manager_is_captured(tc->graphs, id);
}

OrtStatus* epabi_capture_replay(const struct epabi_thread_owner* owner, int id) {
    return epabi_capture_replay_timed(owner, id, NULL);
}

OrtStatus* epabi_capture_replay_timed(const struct epabi_thread_owner* owner, int id, int64_t* phase_ns) {
    struct epabi_thread_context* tc = epabi_thread_find(owner);
    if (tc == NULL || tc->graphs == NULL || !epabi_graph_manager_is_captured(tc->graphs, id))
        return epabi_error(owner->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": ReplayGraph: no graph was captured for annotation id %d on this thread",
                           id);
    /* one flag test without a user's stream; with one, one driver query */
    if (epabi_stream_is_user_owned(tc->stream) && epabi_stream_check_external_capture(tc->stream))
        return owner_captures(owner, tc->stream, id, "ReplayGraph cannot replay");
    bool profiled = epabi_profiler_active(owner->profiler);   /* one load when the host does not profile */
    int64_t start_ns = profiled ? epabi_profiler_now_ns() : 0;
    EPABI_RETURN_IF_ERROR(epabi_graph_manager_replay_timed(tc->graphs, id, phase_ns));
    if (profiled) {
        struct epabi_profile_event ev = {
            .kind = EPABI_PROFILE_REPLAY, .annotation_id = id, .node_count = epabi_graph_manager_nodes(tc->graphs, id),
            .replay = epabi_graph_manager_replays(tc->graphs, id), .start_ns = start_ns,
            .end_ns = epabi_profiler_now_ns()};
        int64_t mark = phase_ns != NULL ? epabi_callback_now_ns() : 0;
        epabi_profiler_record(owner->profiler, &ev);
        epabi_callback_phase_done(phase_ns, EPABI_REPLAY_PROFILER, &mark);
    }
    if (owner->log_verbose)   /* the replay path: one flag test, no host call, when the log would drop the line */
        EPABI_LOG(owner->api, owner->logger, ORT_LOGGING_LEVEL_VERBOSE,
                  EPABI_EP_NAME ": ReplayGraph replayed annotation id %d (replay %" PRIu64 " of this graph on this "
                  "thread)", id, epabi_graph_manager_replays(tc->graphs, id));
    return NULL;
}

OrtStatus* epabi_capture_release(const struct epabi_thread_owner* owner, int id) {
    struct epabi_thread_context* tc = epabi_thread_find(owner);
    int open = 0;
    if (tc != NULL && tc->graphs == NULL) tc = NULL;
    if (tc != NULL && epabi_graph_manager_is_capturing(tc->graphs, &open) && open == id)
        return epabi_error(owner->api, ORT_FAIL,
                           EPABI_EP_NAME ": ReleaseCapturedGraph: annotation id %d is being captured right now", id);
    if (tc == NULL || !epabi_graph_manager_release(tc->graphs, id))
        return epabi_error(owner->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": ReleaseCapturedGraph: no graph was captured for annotation id %d on this "
                           "thread", id);
    EPABI_LOG(owner->api, owner->logger, ORT_LOGGING_LEVEL_INFO,
              EPABI_EP_NAME ": released the graph of annotation id %d on this thread; it will be captured again", id);
    return NULL;
}

void epabi_capture_note_compute(struct epabi_thread_context* tc, bool ok, unsigned nodes) {
    if (tc == NULL) return;
    tc->run.computes++;
    tc->run.nodes += nodes;
    if (!ok) tc->run.failed = true;
}

bool epabi_capture_run_annotation(const struct epabi_thread_context* tc, int* id, bool* capturing) {
    if (tc == NULL || tc->graphs == NULL) return false;
    *id = tc->run.annotation_id;
    *capturing = epabi_graph_manager_is_capturing(tc->graphs, NULL);
    return true;
}
