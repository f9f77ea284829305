/*
 * ep_profiler.h - OrtEpProfilerImpl (hosts >= 1.25): the EP's own events in the host's profile.
 *
 * How ONNX Runtime drives it (onnxruntime/core/session/plugin_ep/ep_event_profiling.cc and core/common/profiler.cc,
 * 1.25 on; the calls checked against the 1.32.0 wheel, tests/test_real_ort_profiling.py): OrtEp::CreateProfiler is
 * called once per session when the session registers the EP, whether or not profiling is on; with
 * SessionOptions.enable_profiling, StartProfiling(offset) follows, StartEvent(id)/StopEvent(id, event) wrap each of
 * the host's own events (model_run, <node>_kernel_time, ...) on the thread that records it, and EndProfiling hands
 * a container for our events when the profile is written (InferenceSession.end_profiling()); Release when the
 * session's profiler goes. Failures we return are logged by the host and never fail a run.
 *
 * Events, category KERNEL (the JSON's "cat" : "Kernel"), each with args "ep_name" and "duration_ns":
 *   epabi_compute  one fused node's Compute (OrtNodeComputeInfo::Compute); args node_name, node_count (ONNX nodes
 *                  of the fused node), and with graph capture on annotation_id and graph_phase ("regular" or
 *                  "capture": the Compute ran inside a capture window). On CUDA the Compute ends with a stream
 *                  synchronize outside captures, so its duration includes the GPU work; inside a capture it is the
 *                  recording time.
 *   epabi_capture  one graph capture that was kept, from OnRunStart opening the window to OnRunEnd storing the graph
 *                  (and, on CUDA, replaying it once: capture_policy.c); args annotation_id, node_count (ONNX nodes
 *                  recorded), fused_node_count, launches.
 *   epabi_replay   one OrtEp::ReplayGraph (the replay and its stream synchronize); args annotation_id, node_count,
 *                  replay (replays of that graph on its thread so far, CUDA's one right after capture included).
 *   parent_name    (any event) the name of the innermost host event that enclosed it on its thread, taken from
 *                  StopEvent: "<fused node>_kernel_time" for a Compute under ONNX Runtime.
 * pid is getpid(), tid the kernel thread id (gettid), as ONNX Runtime writes them for its own events.
 *
 * Clock: CLOCK_MONOTONIC. StartProfiling's offset places the host's profiling start on our clock (now - offset), so
 * an event's ts is microseconds since the host's start, as the host's own events; ts is rounded down and the
 * duration up to whole microseconds (at least 1: a replay of a small graph can take less), duration_ns is exact.
 * EndProfiling hands the events sorted by start time. At most EPABI_PROFILER_MAX_EVENTS are kept per profile (as
 * ONNX Runtime caps its own); more are dropped with a warning at EndProfiling.
 *
 * Ownership: a profiler has two references, the host's handle (dropped by OrtEpProfilerImpl::Release) and the EP's
 * (dropped by epabi_profiler_release when the EP is destroyed); either may go first. Thread-safety: recording and
 * every host callback take the profiler's mutex; epabi_profiler_active is one atomic load, so an EP whose session
 * does not profile pays nothing else.
 */
#ifndef EPABI_EP_PROFILER_H
#define EPABI_EP_PROFILER_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"

enum { EPABI_PROFILER_MAX_EVENTS = 1000 * 1000 };

struct epabi_profiler;

enum epabi_profile_kind { EPABI_PROFILE_COMPUTE = 0, EPABI_PROFILE_CAPTURE = 1, EPABI_PROFILE_REPLAY = 2 };

/* One event as the EP reports it; epabi_profiler_record copies what it keeps (node_name included). */
struct epabi_profile_event {
    enum epabi_profile_kind kind;
    const char* node_name;         /* compute: the fused node (copied); else NULL */
    bool has_annotation_id;        /* compute: graph capture is on */
    int annotation_id;
    bool capturing;                /* compute: inside a capture window */
    unsigned node_count;           /* ONNX nodes computed, recorded or replayed */
    unsigned fused_node_count;     /* capture */
    uint64_t launches;             /* capture */
    uint64_t replay;               /* replay */
    int64_t start_ns, end_ns;      /* epabi_profiler_now_ns() */
};

/* A new profiler; its OrtEpProfilerImpl handle, for the host, is *impl. Both references are taken (see above);
 * logger (the session's) is used at EndProfiling only. Errors: ORT_FAIL when out of memory. */
OrtStatus* epabi_profiler_create(const struct epabi_api* api, const OrtLogger* logger, struct epabi_profiler** out,
                                 OrtEpProfilerImpl** impl);
/* Drops the EP's reference; NULL is ignored. */
void epabi_profiler_release(struct epabi_profiler* p);

/* Whether the host is profiling now (between StartProfiling and EndProfiling); false for NULL. */
bool epabi_profiler_active(const struct epabi_profiler* p);
int64_t epabi_profiler_now_ns(void);
/* Keeps one event with the calling thread's id; ignored unless active. Out of memory drops the event. */
void epabi_profiler_record(struct epabi_profiler* p, const struct epabi_profile_event* ev);

#endif
