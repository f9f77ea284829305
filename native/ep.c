#include "ep.h"

#include <stdlib.h>

static const struct epabi_ep* ep_of(const OrtEp* p) {
    return (const struct epabi_ep*)p;
}

static const char* GetNameImpl(const OrtEp* this_ptr) {
    (void)this_ptr;
    return EPABI_EP_NAME;
}

/* No kernels are registered in this build, so every node stays with the host's CPU fallback. */
static OrtStatus* GetCapabilityImpl(OrtEp* this_ptr, const OrtGraph* graph, OrtEpGraphSupportInfo* info) {
    (void)graph;
    (void)info;
    const struct epabi_ep* ep = ep_of(this_ptr);
    EPABI_LOG(&ep->factory->api, ep->logger, ORT_LOGGING_LEVEL_INFO,
              EPABI_EP_NAME ": no kernels are available in this build; all nodes stay on the CPU");
    return NULL;
}

static OrtStatus* IsConcurrentRunSupportedImpl(OrtEp* this_ptr, bool* is_supported) {
    (void)this_ptr;
    if (is_supported != NULL) *is_supported = true;   /* no per-run state is shared between runs */
    return NULL;
}

static OrtStatus* SyncImpl(OrtEp* this_ptr) {
    (void)this_ptr;
    return NULL;   /* nothing is queued asynchronously */
}

/* Graph capture: the members exist so hosts >= 1.26 see a consistent table; capture itself is not part of
 * this build, so the EP answers "not enabled" and a replay request names the missing id. */
static bool IsGraphCaptureEnabledImpl(const OrtEp* this_ptr) {
    (void)this_ptr;
    return false;
}

static bool IsGraphCapturedImpl(const OrtEp* this_ptr, int graph_annotation_id) {
    (void)this_ptr;
    (void)graph_annotation_id;
    return false;
}

static OrtStatus* ReplayGraphImpl(OrtEp* this_ptr, int graph_annotation_id) {
    const struct epabi_ep* ep = ep_of(this_ptr);
    return epabi_error(&ep->factory->api, ORT_INVALID_ARGUMENT,
                       EPABI_EP_NAME ": no graph was captured for annotation id %d", graph_annotation_id);
}

static OrtGraphCaptureNodeAssignmentPolicy GetGraphCaptureNodeAssignmentPolicyImpl(const OrtEp* this_ptr) {
    (void)this_ptr;
    return OrtGraphCaptureNodeAssignmentPolicy_ALLOW_CPU_FOR_SHAPES;
}

static void fill_table(struct epabi_ep* ep) {
    const struct epabi_api* api = &ep->factory->api;
    OrtEp* t = &ep->base;
    t->ort_version_supported = EPABI_ORT_API_VERSION;
    t->GetName = GetNameImpl;
    t->GetCapability = GetCapabilityImpl;
    t->Compile = NULL;                       /* GetCapability claims nothing, so nothing is compiled */
    t->ReleaseNodeComputeInfos = NULL;
    t->GetPreferredDataLayout = NULL;        /* host default: NCHW */
    t->ShouldConvertDataLayoutForOp = NULL;
    t->SetDynamicOptions = NULL;             /* no dynamic options */
    t->OnRunStart = NULL;                    /* no per-run work */
    t->OnRunEnd = NULL;
    t->CreateAllocator = NULL;               /* the factory's allocators are used */
    t->CreateSyncStreamForDevice = NULL;     /* not stream aware */
    t->GetCompiledModelCompatibilityInfo = NULL;
    t->GetKernelRegistry = NULL;             /* compile-based EP */
    t->IsConcurrentRunSupported = epabi_has(api, EPABI_SINCE_CONCURRENT_RUN) ? IsConcurrentRunSupportedImpl : NULL;
    t->Sync = epabi_has(api, EPABI_SINCE_SYNC) ? SyncImpl : NULL;
    t->CreateProfiler = NULL;                /* no EP profiler */
    if (epabi_has(api, EPABI_SINCE_GRAPH_CAPTURE)) {
        t->IsGraphCaptureEnabled = IsGraphCaptureEnabledImpl;
        t->IsGraphCaptured = IsGraphCapturedImpl;
        t->ReplayGraph = ReplayGraphImpl;
        t->GetGraphCaptureNodeAssignmentPolicy = GetGraphCaptureNodeAssignmentPolicyImpl;
    }
    t->GetAvailableResource = NULL;          /* no resource budget */
    t->OnSessionInitializationEnd = NULL;
    t->GetDefaultMemoryDevice = NULL;
    t->ReleaseCapturedGraph = NULL;
    t->GetWeightlessSupport = NULL;
}

OrtStatus* epabi_ep_create(struct epabi_factory* f, const struct epabi_device_record* device,
                           const OrtSessionOptions* session_options, const OrtLogger* logger, OrtEp** out) {
    const struct epabi_api* api = &f->api;
    struct epabi_options opts;
    EPABI_RETURN_IF_ERROR(epabi_options_read(api, session_options, &opts));
    if (device->kind == EPABI_DEVICE_VIRTUAL && !opts.compile_only) {
        return epabi_error(api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": the selected EP device is virtual (is_virtual=1): it has no hardware to run "
                           "on and serves only compile-only sessions (session.compile_only=1)");
    }
    if (opts.enable_cuda_graph) {
        EPABI_LOG(api, logger, ORT_LOGGING_LEVEL_WARNING,
                  EPABI_EP_NAME ": enable_cuda_graph=1 was requested but graph capture is not part of this build; "
                  "runs execute eagerly");
    }
    struct epabi_ep* ep = calloc(1, sizeof *ep);
    if (ep == NULL) return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory creating the EP");
    ep->factory = f;
    ep->logger = logger;
    ep->options = opts;
    ep->device = *device;
    fill_table(ep);
    *out = &ep->base;
    return NULL;
}

void epabi_ep_destroy(OrtEp* ep) {
    free((struct epabi_ep*)ep);
}
