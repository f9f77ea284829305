/*
 * options.h - EP options from the session options.
 *
 * Each option is looked up as "ep.epabiexecutionprovider.<key>" (how ONNX Runtime forwards provider
 * options given to add_provider_for_devices), then the legacy CUDA EP spelling "ep.cuda.<key>", then
 * the flat "<key>". A present but malformed value fails CreateEp with ORT_INVALID_ARGUMENT naming the
 * full key and the value; nothing is silently defaulted.
 */
#ifndef EPABI_OPTIONS_H
#define EPABI_OPTIONS_H

#include <stdbool.h>

#include "api.h"

struct epabi_options {
    bool enable_cuda_graph;                        /* default false */
    int min_num_runs_before_cuda_graph_capture;    /* >= 0, default 2 */
    int device_id;                                 /* >= 0, default: the EP device's own ordinal */
    bool device_id_given;
    bool compile_only;                             /* session.compile_only = "1" */
};

OrtStatus* epabi_options_read(const struct epabi_api* api, const OrtSessionOptions* session_options,
                              struct epabi_options* out);

#endif
