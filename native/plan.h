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
 */
#ifndef EPABI_PLAN_H
#define EPABI_PLAN_H

#include "api.h"
#include "arena.h"
#include "stream.h"

struct epabi_plan;

/* Where one run issues its work. A NULL env, or one with both members NULL, is the plain case: launches
 * execute at once on the calling thread and memory comes from the plan's arena and goes back to it.
 *   stream        launches go through epabi_stream_launch (the thread's graph stream; it may be capturing).
 *   capture_pool  set inside a graph-capture window: every intermediate and scratch block of the run comes
 *                 from this pool and goes back to it, never to the arena, so the captured launches' buffers
 *                 stay alive and untouched until the captured graph (which owns the pool) is destroyed. */
struct epabi_run_env {
    struct epabi_stream* stream;
    struct epabi_arena_pool* capture_pool;
};

/* Builds the plan of `graph` (the fused subgraph Compile received) for `fused_node`. Errors:
 * ORT_EP_FAIL for a graph the plan cannot express (a node without a kernel, a value without producer),
 * host errors as returned. The arena is retained. */
OrtStatus* epabi_plan_build(const struct epabi_api* api, struct epabi_arena* arena, const OrtLogger* logger,
                            const OrtGraph* graph, const OrtNode* fused_node, struct epabi_plan** out);

void epabi_plan_destroy(struct epabi_plan* plan);

/* The fused node's name (for messages). */
const char* epabi_plan_name(const struct epabi_plan* plan);

/* One run: reads the inputs from ctx, runs every step, writes the outputs into ctx. Intermediates and
 * scratch come from the arena (or env's capture pool) and all go back to it before returning, on success
 * and on error; an intermediate goes back as soon as its last reader has run. Fused outputs are the
 * host's buffers (KernelContext_GetOutput). env: see struct epabi_run_env (NULL = plain run).
 * Errors: ORT_INVALID_ARGUMENT for an input whose dtype or rank differs from what was compiled (naming
 * it), kernel errors prefixed with the node, ORT_FAIL when out of memory. */
OrtStatus* epabi_plan_run(const struct epabi_plan* plan, OrtKernelContext* ctx, const struct epabi_run_env* env);

#endif
