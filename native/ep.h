/*
 * ep.h - epabi's OrtEp: one per session that uses the EP.
 *
 * GetCapability claims the nodes our kernels support on the device's backend (backend.h: the software adapter,
 * or CUDA on a GPU) and groups them into cycle-free fused nodes; Compile builds one execution plan (plan.h) per
 * fused node and hands it out in an OrtNodeComputeInfo; Compute runs the plan between the backend's
 * compute_begin and compute_end. A virtual device claims nothing.
 *
 * Per-thread contexts (thread_context.h): with graph capture, or on a backend whose plans run on per-thread
 * streams (CUDA), each thread has its own stream. Graph capture (enable_cuda_graph=1, hosts with API >= 26):
 * OnRunStart/OnRunEnd drive warm-up counting and capture, IsGraphCaptured/ReplayGraph serve ORT's replay loop
 * (capture_policy.h); inside a capture window Compute runs plans with the window's capture pool. Without
 * either, OnRunStart/OnRunEnd return at once and Compute runs plans with no stream (launches execute at once).
 *
 * Profiling (hosts >= 1.25): OrtEp::CreateProfiler hands the host an OrtEpProfilerImpl (ep_profiler.h); while the
 * host profiles, each Compute, capture and replay becomes an event of the host's profile.
 *
 * Ownership: created by OrtEpFactory::CreateEp, destroyed by OrtEpFactory::ReleaseEp; owns its options
 * (force_cpu_nodes), what its backend set up, and its thread registration (a serial; the per-thread contexts
 * belong to their threads and refer to the EP only by that serial). Each OrtNodeComputeInfo owns its plan and
 * is freed by ReleaseNodeComputeInfos. Thread-safety: the host may call the const members from any thread; they
 * read immutable state or the calling thread's own context. Compute may run concurrently for one fused node:
 * plans are read-only at run time and each thread has its own stream.
 */
#ifndef EPABI_EP_H
#define EPABI_EP_H

#include <stdatomic.h>

#include "backend.h"
#include "callback_timing.h"
#include "ep_factory.h"
#include "ep_profiler.h"
#include "options.h"
#include "plan.h"
#include "thread_context.h"

struct epabi_ep {
    OrtEp base;                        /* first member: the host's OrtEp* is a struct epabi_ep* */
    struct epabi_factory* factory;     /* outlives every EP it creates */
    const OrtLogger* logger;           /* the session logger */
    struct epabi_options options;
    struct epabi_device_record device;
    bool graph_capture;                /* enable_cuda_graph=1 and the host speaks API >= 26 */
    atomic_bool nodes_left_on_cpu;     /* the last GetCapability left some node to another EP */
    /* The device's backend (backend.h) as set up for this EP: run memory, how plans upload constants; backend
     * NULL for the virtual device, device NULL for a GPU whose backend is unavailable (it claims nothing). */
    struct epabi_backend_ep be;
    struct epabi_pool* pool;           /* the software adapter's intra-op threads (intra_op_num_threads); else NULL */
    bool threads_on;                   /* per-thread contexts: graph capture, or a backend with thread streams */
    struct epabi_thread_owner threads; /* attached when threads_on (thread_context.h) */
    /* Set by OrtEp::CreateProfiler (hosts >= 1.25, once, when the session registers the EP: before any Compute,
     * so runs read it without a lock); one reference, dropped by epabi_ep_destroy. NULL: no profiler. */
    struct epabi_profiler* profiler;
    /* EPABI_CALLBACK_TIMING (callback_timing.h): times every host callback; NULL when unset. Owned. */
    struct epabi_callback_timer* timer;
};

/* Validates options and the device, then fills the OrtEp table gated by the negotiated API version.
 * Errors: ORT_INVALID_ARGUMENT for a malformed option or a virtual device in a runnable session. */
OrtStatus* epabi_ep_create(struct epabi_factory* f, const struct epabi_device_record* device,
                           const OrtSessionOptions* session_options, const OrtLogger* logger, OrtEp** out);

void epabi_ep_destroy(OrtEp* ep);

#endif
