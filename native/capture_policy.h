/*
 * capture_policy.h - when to capture and what ORT's graph callbacks do: OrtEp::OnRunStart/OnRunEnd (warm-up
 * counting and the capture window), IsGraphCaptured, ReplayGraph and ReleaseCapturedGraph, on the calling
 * thread's context (thread_context.h) and its graph manager (graph_capture.h).
 *
 * How ONNX Runtime drives it (hosts >= 1.26, see ep.c): a run of id executes normally while
 * IsGraphCaptured(id) is false; epabi_capture_run_start (OrtEp::OnRunStart) opens a capture window when the
 * thread's manager allows it; fused nodes then run on the thread's stream with the window's capture pool
 * (epabi_thread_run_env); epabi_capture_run_end (OrtEp::OnRunEnd) closes the window, stores the graph, checks
 * the memory watermark and, on CUDA, replays once so the capturing run's outputs are real (the host stream
 * executed the launches while recording them, so it does not replay: a second execution would advance state
 * bound as both an input and an output twice), or counts a regular run.
 * From then on ORT only calls IsGraphCaptured/ReplayGraph for that id on that thread.
 *
 * Log phrases (stable; tests may rely on them):
 *   INFO    "capturing graph of annotation id <id> on this thread after <n> regular run(s)"
 *   INFO    "captured graph of annotation id <id>: <k> launch(es)"
 *   VERBOSE "replayed annotation id <id> once right after capture"   (CUDA streams only)
 *   VERBOSE "ReplayGraph replayed annotation id <id> (replay <n> of this graph on this thread)"
 *           (one line per OrtEp::ReplayGraph; n counts every replay of the graph, the one right after
 *           capture included, so the k-th ReplayGraph logs replay k+1 on CUDA and replay k on the host stream)
 *   WARNING "allocated memory during graph capture of annotation id <id> ...
 *            min_num_runs_before_cuda_graph_capture ..."
 *   WARNING "graph capture of annotation id <id> failed ... nothing was kept"
 *   INFO    "graph stream of this thread adopts the user's stream user_compute_stream=0x<hex> (... not destroyed
 *            by the EP)"   (once per thread and EP, when the context is created; thread_context.c)
 *
 * Profiling: while the owner's profiler is active, a kept capture (OnRunStart to OnRunEnd) and each ReplayGraph
 * become profile events (ep_profiler.h) with the annotation id and the ONNX node count the graph recorded.
 *
 * Every function is a no-op (or false) for an owner without graph capture. Thread-safety: each acts on the
 * calling thread's context only.
 */
#ifndef EPABI_CAPTURE_POLICY_H
#define EPABI_CAPTURE_POLICY_H

#include <stdbool.h>

#include "api.h"
#include "callback_timing.h"
#include "thread_context.h"

/* The run option gpu_graph_id, parsed as ORT core parses it: a whole-string decimal int (optional '-',
 * no blanks, no '+'); absent or unparsable = 0; -1 = never capture or replay. */
int epabi_capture_annotation_id(const struct epabi_api* api, const OrtRunOptions* run_options);

/* OrtEp::OnRunStart/OnRunEnd/IsGraphCaptured/ReplayGraph for an attached EP (see the top comment). */
OrtStatus* epabi_capture_run_start(const struct epabi_thread_owner* owner, const OrtRunOptions* run_options);
OrtStatus* epabi_capture_run_end(const struct epabi_thread_owner* owner, const OrtRunOptions* run_options,
                                 bool sync_stream);
bool epabi_capture_is_captured(const struct epabi_thread_owner* owner, int id);
OrtStatus* epabi_capture_replay(const struct epabi_thread_owner* owner, int id);
/* The same, with the time of each phase (callback_timing.h: launch, wait, error_check, profiler) added to
 * phase_ns[EPABI_REPLAY_PHASES] when phase_ns is not NULL. */
OrtStatus* epabi_capture_replay_timed(const struct epabi_thread_owner* owner, int id, int64_t* phase_ns);
/* Drops the calling thread's graph of id (and its warm-up count), so the next runs warm up and capture
 * again, e.g. after rebinding other buffers. ORT_INVALID_ARGUMENT when this thread has no such graph. */
OrtStatus* epabi_capture_release(const struct epabi_thread_owner* owner, int id);

/* After each fused-node Compute on this thread (tc may be NULL): a failed node fails the capture and is not
 * counted as a warm-up run; nodes (the fused node's ONNX nodes) add to what a capture records. */
void epabi_capture_note_compute(struct epabi_thread_context* tc, bool ok, unsigned nodes);
/* The annotation id of tc's run in progress and whether a capture window is open; false when tc has no graph
 * manager (graph capture off). For profile events. */
bool epabi_capture_run_annotation(const struct epabi_thread_context* tc, int* id, bool* capturing);

#endif
