#include "ep.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "capture_policy.h"
#include "kernel.h"
#include "node_desc.h"
#include "plan.h"
#include "blas.h"
#include "thread_pool.h"

struct ptr_index {
    uintptr_t ptr;
    int index;
};

static const struct epabi_ep* ep_of(const OrtEp* p) {
    return (const struct epabi_ep*)p;
}

static const char* GetNameImpl(const OrtEp* this_ptr) {
    (void)this_ptr;
    return EPABI_EP_NAME;
}

/* ---- GetCapability ------------------------------------------------------------------------------- */

/* Decides whether one node can be claimed; on "no", writes why. Host errors while reading the node also
 * mean "no" (with the error text as the reason): a node we cannot read is a node we might compute wrongly. */
static bool claimable(const struct epabi_ep* ep, const OrtNode* node, struct epabi_node* desc, char* why,
                      size_t why_len) {
    const struct epabi_api* api = &ep->factory->api;
    bool describable = true;
    OrtStatus* st = epabi_node_describe(api, node, desc, &describable, why, why_len);
    if (st != NULL) {
        snprintf(why, why_len, "cannot read the node: %s", api->ort->GetErrorMessage(st));
        api->ort->ReleaseStatus(st);
        return false;
    }
    if (!describable) return false;
    const char* assigned = NULL;
    st = api->ort->Node_GetEpName(node, &assigned);
    if (st != NULL) {
        api->ort->ReleaseStatus(st);
        assigned = NULL;
    }
    if (assigned != NULL && assigned[0] != '\0' && strcmp(assigned, EPABI_EP_NAME) != 0) {
        snprintf(why, why_len, "already assigned to %s", assigned);
        return false;
    }
    if (epabi_options_forces_cpu(&ep->options, desc->name)) {
        snprintf(why, why_len, "listed in force_cpu_nodes");
        return false;
    }
    if (desc->domain[0] != '\0') {
        snprintf(why, why_len, "domain '%s' is not supported", desc->domain);
        return false;
    }
    const struct epabi_kernel* k = epabi_kernel_find(desc->op_type, desc->since_version);
    if (k == NULL) {
        snprintf(why, why_len, "kernel not found for op %s (opset %d)", desc->op_type, desc->since_version);
        return false;
    }
    for (int pass = 0; pass < 2; ++pass) {
        const struct epabi_value_desc* vals = pass == 0 ? desc->in : desc->out;
        int n = pass == 0 ? desc->n_in : desc->n_out;
        for (int i = 0; i < n; ++i) {
            if (vals[i].name[0] == '\0') continue;   /* absent optional value */
            if (epabi_dtype_size(vals[i].dtype) == 0) {
                snprintf(why, why_len, "%s '%s' has dtype %s, which no kernel handles", pass == 0 ? "input" : "output",
                         vals[i].name, epabi_dtype_name(vals[i].dtype));
                return false;
            }
        }
    }
    char reason[192] = "";
    if (k->supports != NULL && !k->supports(desc, reason, sizeof reason)) {
        snprintf(why, why_len, "%s kernel declined: %s", desc->op_type, reason[0] != '\0' ? reason : "(no reason given)");
        return false;
    }
    reason[0] = '\0';
    if (!ep->be.backend->claims(k, desc, reason, sizeof reason)) {
        snprintf(why, why_len, "%s %s kernel declined: %s", desc->op_type, ep->be.backend->name,
                 reason[0] != '\0' ? reason : "(no reason given)");
        return false;
    }
    return true;
}

static int cmp_ptr_index(const void* a, const void* b) {
    uintptr_t x = ((const struct ptr_index*)a)->ptr, y = ((const struct ptr_index*)b)->ptr;
    return x < y ? -1 : x > y;
}

static int find_node(const struct ptr_index* sorted, size_t n, const OrtNode* node) {
    struct ptr_index key = {(uintptr_t)node, 0};
    const struct ptr_index* hit = bsearch(&key, sorted, n, sizeof *sorted, cmp_ptr_index);
    return hit != NULL ? hit->index : -1;
}

/* The graph as producer lists: preds[pred_start[i] .. pred_start[i+1]) are the nodes (indices) producing
 * node i's inputs and implicit inputs; values from outside the graph have no producer here. */
struct dep_graph {
    int* pred_start;
    int* preds;
};

static OrtStatus* collect_preds(const struct epabi_api* api, const OrtNode* const* nodes, size_t n,
                                struct dep_graph* g) {
    const OrtApi* ort = api->ort;
    struct ptr_index* sorted = malloc((n > 0 ? n : 1) * sizeof *sorted);
    g->pred_start = calloc(n + 1, sizeof *g->pred_start);
    size_t cap = 0, used = 0;
    const OrtValueInfo** vals = NULL;
    size_t vals_cap = 0;
    OrtStatus* st = NULL;
    if (sorted == NULL || g->pred_start == NULL) goto oom;
    for (size_t i = 0; i < n; ++i) sorted[i] = (struct ptr_index){(uintptr_t)nodes[i], (int)i};
    qsort(sorted, n, sizeof *sorted, cmp_ptr_index);
    for (size_t i = 0; i < n && st == NULL; ++i) {
        g->pred_start[i] = (int)used;
        size_t n_in = 0, n_impl = 0;
        st = ort->Node_GetNumInputs(nodes[i], &n_in);
        if (st == NULL) st = ort->Node_GetNumImplicitInputs(nodes[i], &n_impl);
        if (st != NULL) break;
        if (n_in + n_impl > vals_cap) {
            const OrtValueInfo** v = realloc(vals, (n_in + n_impl) * sizeof *v);
            if (v == NULL) goto oom;
            vals = v;
            vals_cap = n_in + n_impl;
        }
        if (n_in > 0) st = ort->Node_GetInputs(nodes[i], vals, n_in);
        if (st == NULL && n_impl > 0) st = ort->Node_GetImplicitInputs(nodes[i], vals + n_in, n_impl);
        for (size_t j = 0; j < n_in + n_impl && st == NULL; ++j) {
            if (vals[j] == NULL) continue;
            const OrtNode* producer = NULL;
            size_t out_index = 0;
            st = ort->ValueInfo_GetValueProducer(vals[j], &producer, &out_index);
            if (st != NULL || producer == NULL) continue;
            int p = find_node(sorted, n, producer);
            if (p < 0) continue;   /* produced outside this graph */
            if (used == cap) {
                size_t c = cap == 0 ? 64 : 2 * cap;
                int* grown = realloc(g->preds, c * sizeof *grown);
                if (grown == NULL) goto oom;
                g->preds = grown;
                cap = c;
            }
            g->preds[used++] = p;
        }
    }
    g->pred_start[n] = (int)used;
    free(sorted);
    free(vals);
    return st;
oom:
    free(sorted);
    free(vals);
    return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory in GetCapability");
}

/* Kahn's algorithm over the producer lists; false when the graph has a cycle. */
static bool topo_order(const struct dep_graph* g, size_t n, int* order) {
    int* indeg = calloc(n > 0 ? n : 1, sizeof *indeg);
    int* succ_start = calloc(n + 1, sizeof *succ_start);
    int total = g->pred_start[n];
    int* succ = malloc((total > 0 ? (size_t)total : 1) * sizeof *succ);
    int* fill = calloc(n > 0 ? n : 1, sizeof *fill);
    bool ok = indeg != NULL && succ_start != NULL && succ != NULL && fill != NULL;
    size_t head = 0, tail = 0;
    if (ok) {
        for (size_t i = 0; i < n; ++i) {
            indeg[i] = g->pred_start[i + 1] - g->pred_start[i];
            for (int k = g->pred_start[i]; k < g->pred_start[i + 1]; ++k) succ_start[g->preds[k] + 1]++;
        }
        for (size_t i = 0; i < n; ++i) succ_start[i + 1] += succ_start[i];
        for (size_t i = 0; i < n; ++i)
            for (int k = g->pred_start[i]; k < g->pred_start[i + 1]; ++k) {
                int p = g->preds[k];
                succ[succ_start[p] + fill[p]++] = (int)i;
            }
        for (size_t i = 0; i < n; ++i)
            if (indeg[i] == 0) order[tail++] = (int)i;
        while (head < tail) {
            int u = order[head++];
            for (int k = succ_start[u]; k < succ_start[u + 1]; ++k)
                if (--indeg[succ[k]] == 0) order[tail++] = succ[k];
        }
        ok = tail == n;
    }
    free(indeg);
    free(succ_start);
    free(succ);
    free(fill);
    return ok;
}

struct fuse_key {
    int level;   /* d(n) */
    int pos;     /* position in topological order */
    int node;
};

static int cmp_fuse_key(const void* a, const void* b) {
    const struct fuse_key* x = a;
    const struct fuse_key* y = b;
    if (x->level != y->level) return x->level < y->level ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Claims the supported nodes of a graph and groups them into fused nodes without creating cycles: with
 * d(n) = max over producers p of d(p) + (p unclaimed ? 1 : 0), taken in topological order, any path
 * that leaves the claimed set and comes back raises d, so claimed nodes of equal d never have an
 * unclaimed node between them and each such set can be one fused node. */
static OrtStatus* claim_nodes(struct epabi_ep* ep, const OrtGraph* graph, OrtEpGraphSupportInfo* info) {
    const struct epabi_api* api = &ep->factory->api;
    size_t n = 0;
    EPABI_RETURN_IF_ERROR(api->ort->Graph_GetNumNodes(graph, &n));
    if (n == 0) return NULL;
    const OrtNode** nodes = calloc(n, sizeof *nodes);
    bool* claimed = calloc(n, sizeof *claimed);
    int* order = calloc(n, sizeof *order);
    int* level = calloc(n, sizeof *level);
    struct fuse_key* keys = calloc(n, sizeof *keys);
    const OrtNode** group = calloc(n, sizeof *group);
    struct epabi_node* desc = malloc(sizeof *desc);
    struct dep_graph g = {NULL, NULL};
    OrtStatus* st = NULL;
    if (nodes == NULL || claimed == NULL || order == NULL || level == NULL || keys == NULL || group == NULL ||
        desc == NULL) {
        st = epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory in GetCapability");
        goto out;
    }
    st = api->ort->Graph_GetNodes(graph, nodes, n);
    if (st != NULL) goto out;

    size_t n_claimed = 0;
    for (size_t i = 0; i < n; ++i) {
        char why[320] = "";
        claimed[i] = claimable(ep, nodes[i], desc, why, sizeof why);
        if (claimed[i]) {
            ++n_claimed;
        } else {
            EPABI_LOG(api, ep->logger, ORT_LOGGING_LEVEL_INFO, EPABI_EP_NAME ": node '%s' (%s) stays on CPU: %s",
                      desc->name, desc->op_type, why);
        }
    }
    atomic_store(&ep->nodes_left_on_cpu, n_claimed < n);
    if (n_claimed == 0) goto out;

    st = collect_preds(api, nodes, n, &g);
    if (st != NULL) goto out;
    if (!topo_order(&g, n, order)) {
        EPABI_LOG(api, ep->logger, ORT_LOGGING_LEVEL_WARNING,
                  EPABI_EP_NAME ": the graph's dependencies could not be ordered; claiming nothing");
        goto out;
    }
    size_t nk = 0;
    for (size_t pos = 0; pos < n; ++pos) {
        int i = order[pos];
        int d = 0;
        for (int k = g.pred_start[i]; k < g.pred_start[i + 1]; ++k) {
            int p = g.preds[k];
            int via = level[p] + (claimed[p] ? 0 : 1);
            if (via > d) d = via;
        }
        level[i] = d;
        if (claimed[i]) keys[nk++] = (struct fuse_key){d, (int)pos, i};
    }
    qsort(keys, nk, sizeof *keys, cmp_fuse_key);
    /* constants are copied into the plan at Compile, so ORT need not keep them as fused-node inputs */
    OrtNodeFusionOptions fusion = {EPABI_ORT_API_VERSION, true};
    size_t groups = 0;
    for (size_t a = 0; a < nk && st == NULL;) {
        size_t b = a, m = 0;
        while (b < nk && keys[b].level == keys[a].level) group[m++] = nodes[keys[b++].node];
        st = api->ep->EpGraphSupportInfo_AddNodesToFuse(info, group, m, &fusion);
        ++groups;
        a = b;
    }
    if (st == NULL)
        EPABI_LOG(api, ep->logger, ORT_LOGGING_LEVEL_INFO,
                  EPABI_EP_NAME ": claimed %zu of %zu nodes in %zu fused group(s)", n_claimed, n, groups);
out:
    free(g.pred_start);
    free(g.preds);
    free(nodes);
    free(claimed);
    free(order);
    free(level);
    free(keys);
    free(group);
    free(desc);
    return st;
}

static OrtStatus* GetCapabilityImpl(OrtEp* this_ptr, const OrtGraph* graph, OrtEpGraphSupportInfo* info) {
    struct epabi_ep* ep = (struct epabi_ep*)this_ptr;
    const struct epabi_api* api = &ep->factory->api;
    if (graph == NULL || info == NULL)
        return epabi_error(api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": GetCapability got a NULL graph or support info");
    if (ep->be.backend == NULL) {
        EPABI_LOG(api, ep->logger, ORT_LOGGING_LEVEL_INFO,
                  EPABI_EP_NAME ": the virtual device compiles nothing in this build; all nodes stay on the CPU");
        return NULL;
    }
    if (ep->device.kind == EPABI_DEVICE_GPU && ep->be.device == NULL) {
        const char* why = "";
        ep->be.backend->available(&why);
        atomic_store(&ep->nodes_left_on_cpu, true);
        EPABI_LOG(api, ep->logger, ORT_LOGGING_LEVEL_WARNING,
                  EPABI_EP_NAME ": the %s backend is not available (%s); all nodes stay on the CPU",
                  ep->be.backend->name, why[0] != '\0' ? why : "its device is not usable");
        return NULL;
    }
    return claim_nodes(ep, graph, info);
}

/* ---- Compile and the per-fused-node compute functions -------------------------------------------- */

/* One per fused node; owns its plan. */
struct epabi_compute_info {
    OrtNodeComputeInfo base;           /* first member */
    const struct epabi_ep* ep;
    struct epabi_plan* plan;
};

/* The state is the plan itself: it is read-only, and every run keeps its own state inside epabi_plan_run. */
static OrtStatus* CreateStateImpl(OrtNodeComputeInfo* this_ptr, OrtNodeComputeContext* compute_context,
                                  void** compute_state) {
    (void)compute_context;
    struct epabi_compute_info* ci = (struct epabi_compute_info*)this_ptr;
    if (compute_state == NULL)
        return epabi_error(&ci->ep->factory->api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": CreateState got a NULL output");
    *compute_state = ci->plan;
    return NULL;
}

/* One Compute on the calling thread; *tc_out receives the thread's context (NULL: none). */
static OrtStatus* compute(const struct epabi_compute_info* ci, OrtKernelContext* kernel_context,
                          struct epabi_thread_context** tc_out) {
    const struct epabi_ep* ep = ci->ep;
    *tc_out = NULL;
    if (!ep->threads_on) {
        struct epabi_run_env plain = {.threads = ep->pool};
        return epabi_plan_run(ci->plan, kernel_context, &plain);
    }
    const struct epabi_api* api = &ep->factory->api;
    /* the calling thread's stream; inside its capture window also the window's pool */
    struct epabi_thread_context* tc = epabi_thread_find(&ep->threads);
    if (tc == NULL && ep->be.thread_streams) EPABI_RETURN_IF_ERROR(epabi_thread_get(&ep->threads, &tc));
    *tc_out = tc;
    struct epabi_run_env env;
    epabi_thread_run_env(&ep->threads, tc, &env);
    env.threads = ep->pool;
    const struct epabi_backend* b = ep->be.backend;
    struct epabi_compute_scope scope = {NULL, false};
    OrtStatus* st = b->compute_begin != NULL ? b->compute_begin(api, &ep->be, kernel_context, env.stream, &scope) : NULL;
    if (st == NULL) {
        if (env.stream != NULL && env.stream->external_capture && !env.mempool && env.capture_pool == NULL) {
            /* recorded into the owner's capture of its stream (compute_begin found it): run memory the owner's
             * graph keeps using (stream-ordered memory needs none: it becomes the owner's graph's memory nodes) */
            env.capture_pool = epabi_thread_keep_pool(tc);
            if (env.capture_pool == NULL)
                st = epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory recording '%s' into the capture of "
                                 "user_compute_stream", epabi_plan_name(ci->plan));
        }
        if (st == NULL) st = epabi_plan_run(ci->plan, kernel_context, &env);
        if (b->compute_end != NULL) st = b->compute_end(api, &ep->be, env.stream, &scope, st);
    }
    epabi_capture_note_compute(tc, st == NULL, epabi_plan_node_count(ci->plan));
    return st;
}

static OrtStatus* compute_profiled(struct epabi_compute_info* ci, void* compute_state,
                                   OrtKernelContext* kernel_context) {
    if (compute_state != ci->plan || kernel_context == NULL)
        return epabi_error(&ci->ep->factory->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": Compute of '%s' got a state or kernel context it did not create",
                           epabi_plan_name(ci->plan));
    struct epabi_thread_context* tc = NULL;
    struct epabi_profiler* prof = ci->ep->profiler;
    if (!epabi_profiler_active(prof)) return compute(ci, kernel_context, &tc);
    /* profiled: on CUDA, compute_end synchronizes outside captures, so the host clock covers the GPU work */
    struct epabi_profile_event ev = {.kind = EPABI_PROFILE_COMPUTE, .node_name = epabi_plan_name(ci->plan),
                                     .node_count = epabi_plan_node_count(ci->plan)};
    ev.start_ns = epabi_profiler_now_ns();
    OrtStatus* st = compute(ci, kernel_context, &tc);
    ev.end_ns = epabi_profiler_now_ns();
    if (ci->ep->graph_capture && tc != NULL)
        ev.has_annotation_id = epabi_capture_run_annotation(tc, &ev.annotation_id, &ev.capturing);
    if (st == NULL) epabi_profiler_record(prof, &ev);
    return st;
}

static OrtStatus* ComputeImpl(OrtNodeComputeInfo* this_ptr, void* compute_state, OrtKernelContext* kernel_context) {
    struct epabi_compute_info* ci = (struct epabi_compute_info*)this_ptr;
    struct epabi_callback_timer* timer = ci->ep->timer;
    if (timer == NULL) return compute_profiled(ci, compute_state, kernel_context);
    struct epabi_callback_span span;
    epabi_callback_begin(timer, &span);
    OrtStatus* st = compute_profiled(ci, compute_state, kernel_context);
    epabi_callback_end(timer, EPABI_CB_COMPUTE, &span);
    return st;
}

static void ReleaseStateImpl(OrtNodeComputeInfo* this_ptr, void* compute_state) {
    (void)this_ptr;
    (void)compute_state;   /* the plan belongs to the compute info */
}

static void destroy_compute_info(OrtNodeComputeInfo* info) {
    if (info == NULL) return;
    struct epabi_compute_info* ci = (struct epabi_compute_info*)info;
    epabi_plan_destroy(ci->plan);
    free(ci);
}

static OrtStatus* CompileImpl(OrtEp* this_ptr, const OrtGraph** graphs, const OrtNode** fused_nodes, size_t count,
                              OrtNodeComputeInfo** node_compute_infos, OrtNode** ep_context_nodes) {
    (void)ep_context_nodes;   /* no EPContext nodes are written */
    struct epabi_ep* ep = (struct epabi_ep*)this_ptr;
    const struct epabi_api* api = &ep->factory->api;
    if (count > 0 && (graphs == NULL || node_compute_infos == NULL))
        return epabi_error(api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": Compile got NULL arrays");
    for (size_t i = 0; i < count; ++i) node_compute_infos[i] = NULL;
    const bool fused_gemm = ep->options.fused_gemm_given ? ep->options.fused_gemm
                            : ep->be.backend != NULL && ep->be.backend->fused_gemm_default;
    OrtStatus* st = NULL;
    for (size_t i = 0; i < count && st == NULL; ++i) {
        struct epabi_compute_info* ci = calloc(1, sizeof *ci);
        if (ci == NULL) {
            st = epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory in Compile");
            break;
        }
        st = epabi_plan_build(api, ep->be.arena, ep->be.plan.upload != NULL ? &ep->be.plan : NULL,
                              fused_gemm, ep->logger, graphs[i], fused_nodes != NULL ? fused_nodes[i] : NULL,
                              &ci->plan);
        if (st != NULL) {
            free(ci);
            break;
        }
        ci->ep = ep;
        ci->base.ort_version_supported = EPABI_ORT_API_VERSION;
        ci->base.CreateState = CreateStateImpl;
        ci->base.Compute = ComputeImpl;
        ci->base.ReleaseState = ReleaseStateImpl;
        node_compute_infos[i] = &ci->base;
    }
    if (st == NULL) ep->threads.fused_nodes += (unsigned)count;
    if (st != NULL) {
        for (size_t i = 0; i < count; ++i) {
            destroy_compute_info(node_compute_infos[i]);
            node_compute_infos[i] = NULL;
        }
    }
    return st;
}

static void ReleaseNodeComputeInfosImpl(OrtEp* this_ptr, OrtNodeComputeInfo** node_compute_infos, size_t num) {
    (void)this_ptr;
    if (node_compute_infos == NULL) return;
    for (size_t i = 0; i < num; ++i) destroy_compute_info(node_compute_infos[i]);
}

/* Runs share no per-run state (each has its own executor state, each thread its own stream), so they may
 * run concurrently, unless the user gave one stream for everything (user_compute_stream). */
static OrtStatus* IsConcurrentRunSupportedImpl(OrtEp* this_ptr, bool* is_supported) {
    const struct epabi_ep* ep = ep_of(this_ptr);
    if (is_supported == NULL)
        return epabi_error(&ep->factory->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": IsConcurrentRunSupported got a NULL output pointer");
    *is_supported = !ep->options.user_compute_stream_given;
    return NULL;
}

/* Waits for the calling thread's stream; the host stream has nothing in flight. */
static OrtStatus* SyncImpl(OrtEp* this_ptr) {
    const struct epabi_ep* ep = ep_of(this_ptr);
    struct epabi_callback_span span;
    epabi_callback_begin(ep->timer, &span);
    OrtStatus* st = ep->threads_on ? epabi_thread_sync(&ep->threads) : NULL;
    epabi_callback_end(ep->timer, EPABI_CB_SYNC, &span);
    return st;
}

/* OnRunStart/OnRunEnd: warm-up counting and capture windows (graph_capture.h); free when capture is off. */
static OrtStatus* OnRunStartImpl(OrtEp* this_ptr, const OrtRunOptions* run_options) {
    const struct epabi_ep* ep = ep_of(this_ptr);
    struct epabi_callback_span span;
    epabi_callback_begin(ep->timer, &span);
    OrtStatus* st = ep->graph_capture ? epabi_capture_run_start(&ep->threads, run_options) : NULL;
    epabi_callback_end(ep->timer, EPABI_CB_ON_RUN_START, &span);
    return st;
}

static OrtStatus* OnRunEndImpl(OrtEp* this_ptr, const OrtRunOptions* run_options, bool sync_stream) {
    const struct epabi_ep* ep = ep_of(this_ptr);
    struct epabi_callback_span span;
    epabi_callback_begin(ep->timer, &span);
    OrtStatus* st = ep->graph_capture ? epabi_capture_run_end(&ep->threads, run_options, sync_stream) : NULL;
    epabi_callback_end(ep->timer, EPABI_CB_ON_RUN_END, &span);
    return st;
}

/* Called once per session by hosts >= 1.25, profiling on or off (ep_profiler.h). */
static OrtStatus* CreateProfilerImpl(OrtEp* this_ptr, OrtEpProfilerImpl** profiler) {
    struct epabi_ep* ep = (struct epabi_ep*)this_ptr;
    const struct epabi_api* api = &ep->factory->api;
    if (profiler == NULL)
        return epabi_error(api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": CreateProfiler got a NULL output pointer");
    *profiler = NULL;
    if (ep->profiler != NULL)
        return epabi_error(api, ORT_FAIL,
                           EPABI_EP_NAME ": CreateProfiler was called a second time for this EP; a host asks once per "
                           "session, and the EP's events go to the first profiler");
    struct epabi_profiler* p = NULL;
    EPABI_RETURN_IF_ERROR(epabi_profiler_create(api, ep->logger, &p, profiler));
    ep->profiler = p;
    ep->threads.profiler = p;
    return NULL;
}

static bool IsGraphCaptureEnabledImpl(const OrtEp* this_ptr) {
    const struct epabi_ep* ep = ep_of(this_ptr);
    if (ep->timer == NULL) return ep->graph_capture;
    struct epabi_callback_span span;
    epabi_callback_begin(ep->timer, &span);
    epabi_callback_end(ep->timer, EPABI_CB_IS_GRAPH_CAPTURE_ENABLED, &span);
    return ep->graph_capture;
}

/* The calling thread's graphs only: a graph captured on another thread is not visible here. */
static bool IsGraphCapturedImpl(const OrtEp* this_ptr, int graph_annotation_id) {
    const struct epabi_ep* ep = ep_of(this_ptr);
    struct epabi_callback_span span;
    epabi_callback_begin(ep->timer, &span);
    bool captured = ep->graph_capture && epabi_capture_is_captured(&ep->threads, graph_annotation_id);
    epabi_callback_end(ep->timer, EPABI_CB_IS_GRAPH_CAPTURED, &span);
    return captured;
}

static OrtStatus* ReplayGraphImpl(OrtEp* this_ptr, int graph_annotation_id) {
    const struct epabi_ep* ep = ep_of(this_ptr);
    if (!ep->graph_capture)
        return epabi_error(&ep->factory->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": no graph was captured for annotation id %d (graph capture is off: "
                           "enable_cuda_graph is not set)", graph_annotation_id);
    if (ep->timer == NULL) return epabi_capture_replay(&ep->threads, graph_annotation_id);
    struct epabi_callback_span span;
    epabi_callback_begin(ep->timer, &span);
    OrtStatus* st = epabi_capture_replay_timed(&ep->threads, graph_annotation_id, span.phase_ns);
    epabi_callback_end(ep->timer, EPABI_CB_REPLAY_GRAPH, &span);
    return st;
}

static OrtStatus* ReleaseCapturedGraphImpl(OrtEp* this_ptr, int graph_annotation_id) {
    const struct epabi_ep* ep = ep_of(this_ptr);
    if (!ep->graph_capture)
        return epabi_error(&ep->factory->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": no graph was captured for annotation id %d (graph capture is off: "
                           "enable_cuda_graph is not set)", graph_annotation_id);
    return epabi_capture_release(&ep->threads, graph_annotation_id);
}

/* A replay runs only our recorded launches: a node left to the CPU would not run and the buffers ORT gave
 * it during the capturing run would be stale or reused. So CPU nodes are tolerated only when there are
 * none; otherwise ORT refuses graph capture for the session with a clear message. */
static OrtGraphCaptureNodeAssignmentPolicy GetGraphCaptureNodeAssignmentPolicyImpl(const OrtEp* this_ptr) {
    const struct epabi_ep* ep = (const struct epabi_ep*)this_ptr;
    if (atomic_load(&ep->nodes_left_on_cpu)) {
        EPABI_LOG(&ep->factory->api, ep->logger, ORT_LOGGING_LEVEL_WARNING,
                  EPABI_EP_NAME ": graph capture needs every node on this EP, but some stay on the CPU "
                  "(see the INFO lines of GetCapability)");
        return OrtGraphCaptureNodeAssignmentPolicy_ALL_NODES_ON_EP;
    }
    return OrtGraphCaptureNodeAssignmentPolicy_ALLOW_CPU_FOR_SHAPES;
}

static void fill_table(struct epabi_ep* ep) {
    const struct epabi_api* api = &ep->factory->api;
    OrtEp* t = &ep->base;
    t->ort_version_supported = EPABI_ORT_API_VERSION;
    t->GetName = GetNameImpl;
    t->GetCapability = GetCapabilityImpl;
    t->Compile = CompileImpl;                /* set together: the host requires both */
    t->ReleaseNodeComputeInfos = ReleaseNodeComputeInfosImpl;
    t->GetPreferredDataLayout = NULL;        /* host default: NCHW */
    t->ShouldConvertDataLayoutForOp = NULL;
    t->SetDynamicOptions = NULL;             /* no dynamic options */
    t->OnRunStart = OnRunStartImpl;          /* 1.23 members, read by every host; free when capture is off */
    t->OnRunEnd = OnRunEndImpl;
    t->CreateAllocator = NULL;               /* the factory's allocators are used */
    t->CreateSyncStreamForDevice = NULL;     /* the factory's (stream aware with CUDA) is used */
    t->GetCompiledModelCompatibilityInfo = NULL;
    t->GetKernelRegistry = NULL;             /* compile-based EP */
    t->IsConcurrentRunSupported = epabi_has(api, EPABI_POLICY_CONCURRENT_RUN) ? IsConcurrentRunSupportedImpl : NULL;
    t->Sync = epabi_has(api, EPABI_SINCE_OrtEp_Sync) ? SyncImpl : NULL;
    t->CreateProfiler = epabi_has(api, EPABI_SINCE_OrtEp_CreateProfiler) ? CreateProfilerImpl : NULL;
    if (epabi_has(api, EPABI_SINCE_OrtEp_IsGraphCaptureEnabled)) {
        t->IsGraphCaptureEnabled = IsGraphCaptureEnabledImpl;
        t->IsGraphCaptured = IsGraphCapturedImpl;
        t->ReplayGraph = ReplayGraphImpl;
        t->GetGraphCaptureNodeAssignmentPolicy = GetGraphCaptureNodeAssignmentPolicyImpl;
    }
    t->GetAvailableResource = NULL;          /* no resource budget */
    t->OnSessionInitializationEnd = NULL;   /* nothing to finish: plans are built at Compile */
    t->GetDefaultMemoryDevice = NULL;       /* the EP device's DEFAULT memory info says it */
    t->ReleaseCapturedGraph = epabi_has(api, EPABI_SINCE_OrtEp_ReleaseCapturedGraph) ? ReleaseCapturedGraphImpl : NULL;
    t->GetWeightlessSupport = NULL;
}

/* thread_context.h's hooks, through the EP's backend */
static struct epabi_stream* thread_stream(const struct epabi_thread_owner* owner, OrtStatus** status) {
    const struct epabi_backend_ep* be = owner->backend;
    return be->backend->thread_stream(owner->api, be, owner->user_stream_given, owner->user_stream, status);
}

static bool device_free_bytes(const struct epabi_thread_owner* owner, size_t* free_bytes) {
    const struct epabi_backend_ep* be = owner->backend;
    return be->backend->free_bytes(be, free_bytes);
}

OrtStatus* epabi_ep_create(struct epabi_factory* f, const struct epabi_device_record* device,
                           const OrtSessionOptions* session_options, const OrtLogger* logger, OrtEp** out) {
    const struct epabi_api* api = &f->api;
    struct epabi_options opts;
    EPABI_RETURN_IF_ERROR(epabi_options_read(api, session_options, &opts));
    if (device->kind == EPABI_DEVICE_VIRTUAL && !opts.compile_only) {
        epabi_options_release(&opts);
        return epabi_error(api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": the selected EP device is virtual (is_virtual=1): it has no hardware to run "
                           "on and serves only compile-only sessions (session.compile_only=1)");
    }
    /* A replay reads and writes the buffers of the capturing run, which the host may free right after it. In
     * device memory (a GPU, the software adapter's device-memory mode) those are blocks of our allocators, which a
     * graph holds (alloc_registry.h). In host memory they come from the host's own allocator; a capture keeps the
     * ones the host allocated for the run in its own memory instead, and telling them from buffers the caller
     * bound needs OrtApi::KernelContext_GetPreallocatedOutput (graph_capture.h). Without it the capture could
     * only replay into freed memory, so it is refused. */
    if (opts.enable_cuda_graph && device->kind == EPABI_DEVICE_SOFTWARE && device->memory == NULL &&
        epabi_has(api, EPABI_SINCE_OrtEp_IsGraphCaptureEnabled) &&
        !epabi_has(api, EPABI_SINCE_OrtApi_KernelContext_GetPreallocatedOutput)) {
        epabi_options_release(&opts);
        return epabi_error(api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": enable_cuda_graph=1 on the software adapter in host memory needs ONNX "
                           "Runtime API %d (OrtApi::KernelContext_GetPreallocatedOutput) to tell the output buffers "
                           "the host allocates for a run and frees after it from the caller's, and ONNX Runtime %s "
                           "speaks API %u, so a replay could write into freed memory; set "
                           "EPABI_SOFTWARE_DEVICE_MEMORY=device and bind inputs and outputs in the EP's memory with "
                           "IOBinding (captured graphs then hold those buffers), or use ONNX Runtime 1.30 or newer",
                           (int)EPABI_SINCE_OrtApi_KernelContext_GetPreallocatedOutput, api->host_version,
                           (unsigned)api->version);
    }
    /* CUDA cannot capture the legacy default stream (0, or CU_STREAM_LEGACY = 0x1): cuStreamBeginCapture fails at
     * the first capture (error 900), and the legacy stream synchronizes with every blocking stream of the
     * context, which no capture may depend on. Refused here, where the message can say why. */
    if (opts.enable_cuda_graph && device->kind == EPABI_DEVICE_GPU && opts.user_compute_stream_given &&
        opts.user_compute_stream <= 1 && epabi_has(api, EPABI_SINCE_OrtEp_IsGraphCaptureEnabled)) {
        uintptr_t legacy = opts.user_compute_stream;
        epabi_options_release(&opts);
        return epabi_error(api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": user_compute_stream=0x%" PRIxPTR " is CUDA's legacy default stream, which "
                           "cannot be captured into a graph (enable_cuda_graph=1); pass a stream of your own "
                           "(cudaStreamCreateWithFlags(..., cudaStreamNonBlocking)), or leave user_compute_stream unset "
                           "so each thread gets a private non-blocking stream", legacy);
    }
    struct epabi_ep* ep = calloc(1, sizeof *ep);
    if (ep == NULL) {
        epabi_options_release(&opts);
        return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory creating the EP");
    }
    ep->factory = f;
    ep->logger = logger;
    ep->options = opts;
    ep->device = *device;
    if (opts.user_compute_stream_given)
        EPABI_LOG(api, logger, ORT_LOGGING_LEVEL_INFO,
                  EPABI_EP_NAME ": user_compute_stream=0x%" PRIxPTR " given: one unified stream, no concurrent runs%s",
                  opts.user_compute_stream, opts.enable_cuda_graph ? "; each thread's graph stream adopts it" : "");
    if (opts.enable_cuda_graph && !epabi_has(api, EPABI_SINCE_OrtEp_IsGraphCaptureEnabled)) {
        EPABI_LOG(api, logger, ORT_LOGGING_LEVEL_WARNING,
                  EPABI_EP_NAME ": enable_cuda_graph=1 needs ONNX Runtime API %d or newer, and ONNX Runtime %s speaks "
                  "API %u; runs execute without graph capture", (int)EPABI_SINCE_OrtEp_IsGraphCaptureEnabled, api->host_version,
                  (unsigned)api->version);
    } else if (opts.enable_cuda_graph) {
        ep->graph_capture = true;
    }
    const struct epabi_backend* backend = epabi_backend_for(device->kind);
    if (backend != NULL) {
        struct epabi_backend_ep_config config = {
            logger, opts.device_id_given ? opts.device_id : device->ordinal, opts.device_id_given,
            opts.use_cuda_mempool, opts.cudnn, device->memory, f->arena};
        OrtStatus* st = backend->ep_open(api, &config, &ep->be);
        if (st != NULL) {
            epabi_options_release(&ep->options);
            free(ep);
            return st;
        }
    }
    if (opts.use_cuda_mempool && !ep->be.mempool)
        EPABI_LOG(api, logger, ORT_LOGGING_LEVEL_WARNING,
                  EPABI_EP_NAME ": arena.use_cuda_mempool=1 applies to the CUDA backend only; ignored on this device");
    ep->threads_on = ep->graph_capture || ep->be.thread_streams;
    if (ep->threads_on) {
        struct epabi_thread_owner* t = &ep->threads;
        t->api = api;
        t->logger = logger;
        t->arena = ep->be.arena;
        t->blocks = ep->factory->blocks;
        if (ep->be.thread_streams) {
            t->create_stream = thread_stream;
            t->device_free_bytes = ep->be.backend->free_bytes != NULL ? device_free_bytes : NULL;
            t->backend = &ep->be;
        }
        t->mempool = ep->be.mempool;
        t->graph_capture = ep->graph_capture;
        t->min_runs = opts.min_num_runs_before_cuda_graph_capture;
        t->user_stream_given = opts.user_compute_stream_given;
        t->user_stream = opts.user_compute_stream;
        OrtStatus* st = epabi_threads_attach(t);
        if (st != NULL) {
            if (ep->be.backend != NULL) ep->be.backend->ep_close(&ep->be);
            epabi_options_release(&ep->options);
            free(ep);
            return st;
        }
    }
    if (ep->graph_capture) {
        if (opts.min_num_runs_before_cuda_graph_capture > 7)
            EPABI_LOG(api, logger, ORT_LOGGING_LEVEL_WARNING,
                      EPABI_EP_NAME ": min_num_runs_before_cuda_graph_capture=%d: ORT executes a run at most 8 times "
                      "in one call while waiting for a capture, so the first call(s) of each id will fail",
                      opts.min_num_runs_before_cuda_graph_capture);
        bool runs_kernels = device->kind == EPABI_DEVICE_SOFTWARE || ep->be.device != NULL;
        EPABI_LOG(api, logger, runs_kernels ? ORT_LOGGING_LEVEL_INFO : ORT_LOGGING_LEVEL_WARNING,
                  EPABI_EP_NAME ": enable_cuda_graph=1: each thread captures an annotation id (run option "
                  "gpu_graph_id) after %d regular run(s) of it (min_num_runs_before_cuda_graph_capture)%s",
                  opts.min_num_runs_before_cuda_graph_capture,
                  runs_kernels ? "" : "; this device runs no kernels (the CUDA backend is not available), so "
                                      "captured graphs are empty");
    }
    if (device->kind == EPABI_DEVICE_SOFTWARE) {
        /* threads start at the first parallel launch; out of memory here only costs the parallelism */
        ep->pool = epabi_pool_create(opts.intra_op_num_threads);
        EPABI_LOG(api, logger, ORT_LOGGING_LEVEL_INFO,
                  EPABI_EP_NAME ": software adapter: %d intra-op thread(s) (intra_op_num_threads); MatMul, Gemm and "
                  "Conv multiply through %s", epabi_pool_threads(ep->pool), epabi_blas_summary());
    }
    ep->timer = epabi_callback_timer_create();   /* EPABI_CALLBACK_TIMING; NULL (nothing timed) when unset */
    fill_table(ep);
    *out = &ep->base;
    return NULL;
}

void epabi_ep_destroy(OrtEp* ep) {
    if (ep == NULL) return;
    struct epabi_ep* e = (struct epabi_ep*)ep;
    if (e->threads_on) epabi_threads_detach(&e->threads);   /* this EP's graphs and streams, every thread */
    if (e->be.backend != NULL) e->be.backend->ep_close(&e->be);   /* after the graphs: their pools hold arena blocks */
    epabi_pool_destroy(e->pool);   /* after the graphs too: their launches point at it */
    epabi_profiler_release(e->profiler);   /* the host's reference may outlive the EP */
    epabi_callback_timer_destroy(e->timer);   /* writes EPABI_CALLBACK_TIMING's file */
    epabi_options_release(&e->options);
    free(e);
}
