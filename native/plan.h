/*
 * plan.h - the execution plan of one fused node, and the executor that runs it.
 *
 * A plan is built once at Compile from the fused OrtGraph: its nodes as steps in dependency order (kernel,
 * init() state, input/output value ids), and a value table. Values are the fused node's inputs (read from
 * the kernel context at run time, by index), constant initializers (copied into plan-owned memory at
 * Compile), and intermediates; an intermediate may also be a fused output (written straight into the
 * kernel context's output). Shapes are resolved at run time.
 *
 * Ownership: the plan owns its value names, constant copies, kernel states and one arena reference; the
 * EP's OrtNodeComputeInfo owns the plan. Thread-safety: a built plan is read-only, so any number of runs
 * may execute it concurrently; each run keeps its own state (struct epabi_exec) on the heap.
 *
 * Files: plan_build.c builds and destroys a plan, plan_passes.c holds the passes the build runs over it (with
 * plan_onehot.c's one-hot lookups and plan_chains.c's elementwise chains),
 * plan_exec.c is the executor (epabi_plan_run and kernel.h's epabi_exec_*); plan_internal.h holds the
 * structs the three share.
 */
#ifndef EPABI_PLAN_H
#define EPABI_PLAN_H

#include <stdbool.h>

#include "api.h"
#include "arena.h"
#include "stream.h"

struct epabi_plan;

/* Where one run issues its work. A NULL env, or one with its members NULL, is the plain case: launches
 * execute at once on the calling thread and memory comes from the plan's arena and goes back to it.
 *   stream        launches go through epabi_stream_launch (the thread's graph stream; it may be capturing).
 *   capture_pool  set inside a graph-capture window: every intermediate and scratch block of the run comes
 *                 from this pool and goes back to it, never to the arena, so the captured launches' buffers
 *                 stay alive and untouched until the captured graph (which owns the pool) is destroyed.
 *   graphs        the thread's graph manager when graph capture is on: the run tells it about the host's
 *                 buffers (graph_capture.h), so a captured graph never uses memory the host freed. */
struct epabi_graph_manager;
struct epabi_run_env {
    struct epabi_stream* stream;
    struct epabi_arena_pool* capture_pool;
    struct epabi_graph_manager* graphs;
    bool mempool;   /* intermediates and scratch from the stream's alloc_async/free_async (arena.use_cuda_mempool) */
    struct epabi_pool* threads;   /* the software adapter's intra-op pool (kernel.h, epabi_exec_pool); NULL: none */
};

/* The memory a plan computes in. NULL at build: the host's own memory, whatever it hands us (the software
 * adapter in its default mode: no copies, no checks). With a device:
 *   - every constant is uploaded once (upload) and its host copy kept for shape reads;
 *   - a fused-node input or output whose OrtValue is not in `memory` (OrtEpApi::Value_GetMemoryDevice) but in
 *     host-accessible memory is staged: copied into run memory before the first step and, for outputs, back
 *     after the last (ORT's CPU-EP fallback MemcpyFromHost kernel hands device EPs CPU tensors as device
 *     inputs); any other memory is an error naming the value;
 *   - owns, when set, is asked about every kernel operand in device memory: one outside it is an error naming
 *     the value and the node (the software adapter's device-memory mode, where reading host memory by mistake
 *     would not crash as it does on a GPU);
 *   - unless host_addressable: "host steps". A node whose kernel is a host_step and whose inputs are
 *     constants or host values (Shape, and Slice/Concat/Gather/Cast/Div/... over shapes and constants) runs
 *     its C kernel on the host at run time, when every reader of its outputs reads them on the host (kernels'
 *     host_inputs) or is a host step itself; so dynamic-shape chains like Shape -> Slice -> Concat -> Reshape,
 *     or Shape -> Gather -> Cast -> Div -> Range (float scalars), need neither a device round trip nor a host
 *     synchronization, and can be captured. */
struct epabi_plan_device {
    const OrtMemoryDevice* memory;                                /* the EP's DEFAULT device memory */
    bool host_addressable;                                        /* the host reads it directly (software) */
    void* (*upload)(void* ctx, const void* host, size_t bytes);   /* device copy; NULL when out of memory */
    void (*release)(void* ctx, void* device_ptr);
    bool (*owns)(void* ctx, const void* p, size_t bytes);         /* NULL: operands are not checked */
    void* ctx;   /* must outlive the plan */
};

/* Builds the plan of `graph` (the fused subgraph Compile received) for `fused_node`. fuse_linear (EP option
 * fused_gemm): one-hot embeddings become lookup steps (kernels/onehot.h), then MatMul/Gemm + bias Add + activation
 * groups become one linear step each (kernels/linear.h); off, every
 * node is its own step (an Add -> Relu pair still one launch). Errors: ORT_EP_FAIL for a graph the plan cannot
 * express (a node without a kernel, a value without producer), ORT_FAIL when out of memory, host errors as returned.
 * The arena is retained. */
OrtStatus* epabi_plan_build(const struct epabi_api* api, struct epabi_arena* arena,
                            const struct epabi_plan_device* device, bool fuse_linear, const OrtLogger* logger,
                            const OrtGraph* graph, const OrtNode* fused_node, struct epabi_plan** out);

void epabi_plan_destroy(struct epabi_plan* plan);

/* The fused node's name (for messages). */
const char* epabi_plan_name(const struct epabi_plan* plan);
/* The ONNX nodes of the fused node's graph, as Compile received it. */
unsigned epabi_plan_node_count(const struct epabi_plan* plan);

/* One run: reads the inputs from ctx, runs every step, writes the outputs into ctx. Intermediates and
 * scratch come from the arena (or env's capture pool) and all go back to it before returning, on success
 * and on error; an intermediate goes back as soon as its last reader has run. Fused outputs are the
 * host's buffers (KernelContext_GetOutput). env: see struct epabi_run_env (NULL = plain run).
 * Errors: ORT_INVALID_ARGUMENT for an input whose dtype or rank differs from what was compiled, or an input
 * or output in memory the device cannot use (naming it; see struct epabi_plan_device), ORT_EP_FAIL for a
 * kernel operand outside the device's memory (naming it and the node), kernel errors prefixed with the node,
 * ORT_FAIL when out of memory. */
OrtStatus* epabi_plan_run(const struct epabi_plan* plan, OrtKernelContext* ctx, const struct epabi_run_env* env);

#endif
