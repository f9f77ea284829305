/*
 * ep.h - epabi's OrtEp: one per session that uses the EP.
 *
 * GetCapability claims, on the software adapter only, the nodes our kernels support and groups them into
 * cycle-free fused nodes; Compile builds one execution plan (plan.h) per fused node and hands it out in an
 * OrtNodeComputeInfo; Compute runs the plan. A GPU device claims nothing yet (no GPU kernels), nor does a
 * virtual device.
 *
 * Graph capture (enable_cuda_graph=1, hosts with API >= 26): OnRunStart/OnRunEnd drive warm-up counting
 * and capture, IsGraphCaptured/ReplayGraph/Sync serve ORT's replay loop, all on the calling thread's
 * context (graph_capture.h); Compute runs plans on that thread's stream, inside a capture window with the
 * window's capture pool. With capture off, OnRunStart/OnRunEnd return at once and Compute runs plans with
 * no stream (launches execute directly).
 *
 * Ownership: created by OrtEpFactory::CreateEp, destroyed by OrtEpFactory::ReleaseEp; owns its options
 * (force_cpu_nodes) and its graph-capture registration (a serial; the per-thread contexts belong to their
 * threads and refer to the EP only by that serial). Each OrtNodeComputeInfo owns its plan and is freed by
 * ReleaseNodeComputeInfos. Thread-safety: the host may call the const members from any thread; they read
 * immutable state or the calling thread's own context. Compute may run concurrently for one fused node:
 * plans are read-only at run time and each thread has its own stream.
 */
#ifndef EPABI_EP_H
#define EPABI_EP_H

#include <stdatomic.h>

#include "ep_factory.h"
#include "graph_capture.h"
#include "options.h"
#include "plan.h"

struct epabi_cuda_device;

struct epabi_ep {
    OrtEp base;                        /* first member: the host's OrtEp* is a struct epabi_ep* */
    struct epabi_factory* factory;     /* outlives every EP it creates */
    const OrtLogger* logger;           /* the session logger */
    struct epabi_options options;
    struct epabi_device_record device;
    bool graph_capture;                /* enable_cuda_graph=1 and the host speaks API >= 26 */
    atomic_bool nodes_left_on_cpu;     /* the last GetCapability left some node to another EP */
    struct epabi_gc_owner gc;          /* attached when graph_capture or cuda */
    /* The CUDA backend (GPU EP devices when CUDA loads): the device of device_id and the EP's device arena
     * (one reference). NULL otherwise. plan_device: the device memory plans compute in (plan.h), for CUDA
     * and for the software adapter's device-memory mode; unset (upload NULL) when plans use host memory. */
    const struct epabi_cuda_device* cuda;
    struct epabi_arena* device_arena;
    struct epabi_plan_device plan_device;
};

/* Validates options and the device, then fills the OrtEp table gated by the negotiated API version.
 * Errors: ORT_INVALID_ARGUMENT for a malformed option or a virtual device in a runnable session. */
OrtStatus* epabi_ep_create(struct epabi_factory* f, const struct epabi_device_record* device,
                           const OrtSessionOptions* session_options, const OrtLogger* logger, OrtEp** out);

void epabi_ep_destroy(OrtEp* ep);

#endif
