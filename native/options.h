/*
 * options.h - EP options from the session options.
 *
 * Each option is looked up in the session options as "ep.epabiexecutionprovider.<key>" (how ONNX Runtime
 * forwards provider options given to add_provider_for_devices), then the legacy CUDA EP spelling
 * "ep.cuda.<key>", then the flat "<key>"; then, as a process-wide default, in the environment's config
 * entries (OrtEpApi::GetEnvConfigEntries, hosts >= 1.24; set with OrtEnvCreationOptions::config_entries) as
 * "ep_factory.EpAbiExecutionProvider.<key>" (ORT's convention for environment-level EP options; the EP name
 * is case-sensitive there); then the built-in default. The first spelling found is the only one read: a
 * present but malformed value fails CreateEp with ORT_INVALID_ARGUMENT naming the full key and the value;
 * nothing is silently defaulted. The environment is read at each CreateEp (ORT copies its entries then).
 *
 * Keys: enable_cuda_graph (0/1/true/false), min_num_runs_before_cuda_graph_capture (int >= 0),
 * user_compute_stream (a stream handle as a decimal or 0x-hexadecimal integer, 0 included: the user's
 * stream, which forces one unified stream; presence is what counts, not a non-zero value),
 * device_id (int >= 0), force_cpu_nodes (comma-separated node names that the EP never claims; they stay
 * with the host's CPU EP), intra_op_num_threads (int from 0 to EPABI_POOL_MAX_THREADS: the software adapter's
 * thread count; 0 = one per physical core, ONNX Runtime's CPU EP default), fused_gemm (0/1/true/false, default the backend's:
 * each MatMul or Gemm with the bias Add and the activation after it is one plan step, kernels/linear.h; 0: one
 * step per node), cudnn (0/1/true/false, default 1: Conv on the GPU through cuDNN where it loads, cuda/cuda_cudnn.h;
 * 0: epabi's own Conv kernels), plus the host's own
 * session.compile_only (session options only).
 */
#ifndef EPABI_OPTIONS_H
#define EPABI_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"

struct epabi_options {
    bool enable_cuda_graph;                        /* default false */
    int min_num_runs_before_cuda_graph_capture;    /* >= 0, default 2 */
    bool user_compute_stream_given;                /* the key is present (even with the value 0) */
    uintptr_t user_compute_stream;                 /* the handle value; never dereferenced here */
    int device_id;                                 /* >= 0, default: the EP device's own ordinal */
    bool device_id_given;
    bool use_cuda_mempool;                         /* arena.use_cuda_mempool = 1: stream-ordered device memory */
    bool compile_only;                             /* session.compile_only = "1" (or ep.context_enable = "1" before API 27) */
    char* force_cpu_nodes;                         /* owned copy of "force_cpu_nodes", NULL when absent */
    int intra_op_num_threads;                      /* >= 1: given 0 or absent, the physical core count */
    bool fused_gemm;                               /* MatMul/Gemm + bias + activation as one step */
    bool fused_gemm_given;                         /* set by an option; else the backend's default */
    bool cudnn;                                    /* default true: Conv through cuDNN on the GPU where it loads */
};

/* On success *out owns heap memory: release it with epabi_options_release. On failure nothing is owned. */
OrtStatus* epabi_options_read(const struct epabi_api* api, const OrtSessionOptions* session_options,
                              struct epabi_options* out);

void epabi_options_release(struct epabi_options* opts);

/* True when node_name is one of the comma-separated names of force_cpu_nodes (blanks around names are
 * ignored; an empty name never matches). */
bool epabi_options_forces_cpu(const struct epabi_options* opts, const char* node_name);

#endif
