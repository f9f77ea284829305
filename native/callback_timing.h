/*
 * callback_timing.h - diagnostics: how long each OrtEp callback the host makes takes, with the phases of a replay.
 *
 * Enabled by the environment variable EPABI_CALLBACK_TIMING=<path>, read at each CreateEp: the EP then records,
 * for every call of OnRunStart, OnRunEnd, IsGraphCaptureEnabled, IsGraphCaptured, ReplayGraph, Sync and each fused
 * node's Compute, its entry and exit times (CLOCK_MONOTONIC nanoseconds, the clock of Python's
 * time.clock_gettime_ns(time.CLOCK_MONOTONIC) and of ep_profiler.h), and for ReplayGraph the time spent in each
 * phase: launch (handing the graph to the stream: on CUDA cuGraphLaunch, on the software adapter the execution of
 * every recorded launch), wait (the stream synchronize: on CUDA the rest of the GPU's work), error_check (reading
 * the stream's error word, stream.h) and profiler (the profiler event, ep_profiler.h; 0 when the host does not
 * profile). When the EP is released the events are appended to <path>, one JSON object a line:
 *
 *   {"ep": 3, "cb": "ReplayGraph", "tid": 1234, "start_ns": ..., "end_ns": ..., "launch_ns": ..., "wait_ns": ...,
 *    "error_check_ns": ..., "profiler_ns": ...}
 *   {"ep": 3, "released": true, "events": 1042, "dropped": 0}
 *
 * "ep" numbers the EPs of the process (a session's EP), "tid" is the kernel thread id. At most
 * EPABI_CALLBACK_TIMING_MAX_EVENTS events are kept per EP; later ones are counted in "dropped". bench/replay_gap.py
 * reads the file to split a replay through onnxruntime into the host's time and ours (bench/README.md).
 *
 * Cost: unset, one pointer test per callback. Set, two clock_gettime calls and one atomic increment per callback
 * (about 50 ns), plus one clock_gettime per replay phase.
 *
 * Ownership: epabi_callback_timer_create (NULL when the variable is unset or empty, or out of memory) and
 * epabi_callback_timer_destroy (writes the file, then frees) belong to the EP. Thread-safety: recording is
 * lock-free (each event takes its own slot); destroy runs when no callback is in flight (ORT makes no call of an
 * EP while releasing it).
 */
#ifndef EPABI_CALLBACK_TIMING_H
#define EPABI_CALLBACK_TIMING_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

enum { EPABI_CALLBACK_TIMING_MAX_EVENTS = 1 << 16 };

enum epabi_callback {
    EPABI_CB_ON_RUN_START = 0,
    EPABI_CB_ON_RUN_END,
    EPABI_CB_IS_GRAPH_CAPTURE_ENABLED,
    EPABI_CB_IS_GRAPH_CAPTURED,
    EPABI_CB_REPLAY_GRAPH,
    EPABI_CB_SYNC,
    EPABI_CB_COMPUTE,
    EPABI_CB_COUNT
};

/* The phases of one ReplayGraph (capture_policy.h: epabi_capture_replay_timed fills them). */
enum epabi_replay_phase {
    EPABI_REPLAY_LAUNCH = 0,
    EPABI_REPLAY_WAIT,
    EPABI_REPLAY_ERROR_CHECK,
    EPABI_REPLAY_PROFILER,
    EPABI_REPLAY_PHASES
};

struct epabi_callback_timer;

/* One callback in progress: start_ns set by epabi_callback_begin, phase_ns filled by the callee (ReplayGraph). */
struct epabi_callback_span {
    int64_t start_ns;
    int64_t phase_ns[EPABI_REPLAY_PHASES];
};

/* NULL unless EPABI_CALLBACK_TIMING names a file. */
struct epabi_callback_timer* epabi_callback_timer_create(void);
/* Appends the events to the file (a line naming the error on stderr when it cannot be written) and frees; NULL is
 * ignored. */
void epabi_callback_timer_destroy(struct epabi_callback_timer* t);

/* CLOCK_MONOTONIC in nanoseconds (inline: the graph machinery's unit harness links without this file's .c). */
static inline int64_t epabi_callback_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The end of a timed phase: adds the time since *mark to phase_ns[phase] and moves the mark to now; nothing when
 * phase_ns is NULL (timing off). */
static inline void epabi_callback_phase_done(int64_t* phase_ns, enum epabi_replay_phase phase, int64_t* mark) {
    if (phase_ns == NULL) return;
    int64_t now = epabi_callback_now_ns();
    phase_ns[phase] += now - *mark;
    *mark = now;
}

/* Starts a span when t is not NULL (else does nothing). */
void epabi_callback_begin(const struct epabi_callback_timer* t, struct epabi_callback_span* span);
/* Records the span as one call of cb ending now; does nothing when t is NULL. */
void epabi_callback_end(struct epabi_callback_timer* t, enum epabi_callback cb, const struct epabi_callback_span* span);

#endif
