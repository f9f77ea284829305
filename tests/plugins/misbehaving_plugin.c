/*
 * misbehaving_plugin.c - a minimal plugin EP that breaks one rule of the plugin-EP contract per build flag,
 * so the tests can check that the epabi host notices. Built by tests/plugin_builder.py with one -D flag:
 *
 *   (none)                 well behaved: one factory, one EP device on the CPU, an EP that claims nothing (it has a
 *                          Compile, which fails if called, and ReleaseNodeComputeInfos)
 *   NO_RELEASE_EXPORT      does not export ReleaseEpFactory
 *   FACTORY_VERSION_ZERO   OrtEpFactory::ort_version_supported = 0
 *   NULL_GET_VERSION       OrtEpFactory::GetVersion = NULL
 *   NULL_DATA_TRANSFER     OrtEpFactory::CreateDataTransfer = NULL
 *   EP_VERSION_ZERO        OrtEp::ort_version_supported = 0
 *   EP_NULL_CAPABILITY     OrtEp::GetCapability = NULL
 *   LEAK_STATUS            creates an OrtStatus in GetSupportedDevices and never releases it
 *   FORGED_STATUS          GetSupportedDevices returns a pointer that CreateStatus never made
 *   CALL_NEWER_API         GetSupportedDevices calls OrtEpApi::GetOpSchema (API 25) on any host
 *   TOO_MANY_FACTORIES     reports more factories than max_factories
 *   ZERO_FACTORIES         CreateEpFactories succeeds with no factory (as onnxruntime-ggml 0.2.0 on 1.24)
 *   FACTORY_VERSION_21     OrtEpFactory::ort_version_supported = 21 (below the first EP API release)
 *   EP_VERSION_21          OrtEp::ort_version_supported = 21
 *   RELEASE_FACTORY_FAILS  ReleaseEpFactory frees the factory but returns an error status
 *   METADATA_VERSION       passes EP metadata naming "version" to CreateEpDevice (ORT adds that key itself)
 *   CLAIM_NON_CONVEX       GetCapability claims every node except Sigmoids as one group, so a Sigmoid between
 *                          two claimed nodes makes the group non-convex (Compile is a stub that fails)
 * For epabi check (tests/test_check.py):
 *   NO_COMPILE             neither Compile nor ReleaseNodeComputeInfos (nor a kernel registry)
 *   COMPILE_WITHOUT_RELEASE  Compile without ReleaseNodeComputeInfos
 *   EP_EMPTY_NAME          OrtEp::GetName returns ""
 *   EP_NAME_UNSTABLE       OrtEp::GetName returns a different name on every call
 *   BAD_LAYOUT             GetPreferredDataLayout answers 7
 *   BAD_CAPTURE_POLICY     the OrtEp declares 26; GetGraphCaptureNodeAssignmentPolicy answers 5
 *   CAPTURE_WITHOUT_REPLAY the OrtEp declares 26; IsGraphCaptureEnabled is true, IsGraphCaptured/ReplayGraph NULL
 *   STREAM_AWARE_NO_STREAM IsStreamAware is true, but no CreateSyncStreamForDevice is set
 *   RELEASED_STATUS        GetCapability returns a status it has already released
 *   LEAK_FD                every CreateEpFactories opens /dev/null and never closes it
 *   DATA_TRANSFER_FLIPS_BYTE  a data transfer for CPU -> CPU copies whose first byte comes out flipped
 *   ABORT_IN_CAPABILITY    GetCapability calls abort()
 *   HANG_IN_CAPABILITY     GetCapability sleeps for an hour
 *   NODELETE               (a link flag, not a define: plugin_builder links with -z nodelete) never unloaded
 */
#if defined(LEAK_FD) || defined(HANG_IN_CAPABILITY)
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <unistd.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "epabi/ort_abi.h"

#define EXPORT __attribute__((visibility("default")))
/* members only some flags set */
#define FLAG_DEPENDENT __attribute__((unused))

static const OrtApi* g_api;   /* test plugin only: one host per process is enough here */
static const OrtEpApi* g_ep_api;

struct test_factory {
    OrtEpFactory base;
};

static const char* FactoryName(const OrtEpFactory* f) { (void)f; return "MisbehavingEp"; }
static const char* FactoryVendor(const OrtEpFactory* f) { (void)f; return "tests"; }
static const char* FactoryVersion(const OrtEpFactory* f) { (void)f; return "0.0.1"; }

static OrtStatus* GetSupportedDevices(OrtEpFactory* f, const OrtHardwareDevice* const* devices, size_t n,
                                      OrtEpDevice** out, size_t max, size_t* num) {
    *num = 0;
#ifdef LEAK_STATUS
    (void)g_api->CreateStatus(ORT_FAIL, "this status is never released");
#endif
#ifdef FORGED_STATUS
    static char not_a_status[16];
    return (OrtStatus*)(void*)not_a_status;
#endif
#ifdef CALL_NEWER_API
    OrtOpSchema* schema = NULL;
    OrtStatus* st = g_ep_api->GetOpSchema("Add", 14, "", &schema);
    if (st != NULL) g_api->ReleaseStatus(st);
#endif
    for (size_t i = 0; i < n && *num < max; ++i) {
        if (g_api->HardwareDevice_Type(devices[i]) != OrtHardwareDeviceType_CPU) continue;
        OrtKeyValuePairs* meta = NULL;
#ifdef METADATA_VERSION
        g_api->CreateKeyValuePairs(&meta);
        g_api->AddKeyValuePair(meta, "version", "9.9.9");
#endif
        OrtStatus* s = g_ep_api->CreateEpDevice(f, devices[i], meta, NULL, &out[*num]);
        g_api->ReleaseKeyValuePairs(meta);
        if (s != NULL) return s;
        ++*num;
    }
    return NULL;
}

struct test_ep {
    OrtEp base;
};

static const char* EpName(const OrtEp* ep) {
    (void)ep;
#ifdef EP_EMPTY_NAME
    return "";
#elif defined(EP_NAME_UNSTABLE)
    static const char* const names[] = {"MisbehavingEp", "MisbehavingEp2"};
    static unsigned calls; /* test plugin only: a data race on it is harmless */
    return names[calls++ % 2];
#else
    return "MisbehavingEp";
#endif
}
static OrtStatus* EpGetCapability(OrtEp* ep, const OrtGraph* g, OrtEpGraphSupportInfo* info) {
    (void)ep; (void)g; (void)info;
#ifdef RELEASED_STATUS
    OrtStatus* released = g_api->CreateStatus(ORT_EP_FAIL, "this status was released before it was returned");
    g_api->ReleaseStatus(released);
    return released;
#endif
#ifdef ABORT_IN_CAPABILITY
    abort();
#endif
#ifdef HANG_IN_CAPABILITY
    sleep(3600);
#endif
#ifdef CLAIM_NON_CONVEX
    size_t n = 0, claimed = 0;
    OrtStatus* st = g_api->Graph_GetNumNodes(g, &n);
    if (st != NULL) return st;
    const OrtNode** nodes = calloc(n ? n : 1, sizeof *nodes);
    const OrtNode** chosen = calloc(n ? n : 1, sizeof *chosen);
    st = g_api->Graph_GetNodes(g, nodes, n);
    for (size_t i = 0; st == NULL && i < n; ++i) {
        const char* op = NULL;
        st = g_api->Node_GetOperatorType(nodes[i], &op);
        if (st == NULL && strcmp(op, "Sigmoid") != 0) chosen[claimed++] = nodes[i];
    }
    if (st == NULL && claimed) st = g_ep_api->EpGraphSupportInfo_AddNodesToFuse(info, chosen, claimed, NULL);
    free(nodes);
    free(chosen);
    return st;
#else
    return NULL;
#endif
}

/* The EP claims nothing (or, with CLAIM_NON_CONVEX, only what the host must refuse), so Compile is never due. */
FLAG_DEPENDENT static OrtStatus* EpCompile(OrtEp* ep, const OrtGraph** graphs, const OrtNode** fused, size_t count,
                                           OrtNodeComputeInfo** infos, OrtNode** ep_context) {
    (void)ep; (void)graphs; (void)fused; (void)count; (void)infos; (void)ep_context;
    return g_api->CreateStatus(ORT_EP_FAIL, "Compile must not be called: the EP claims no node");
}

FLAG_DEPENDENT static void EpReleaseInfos(OrtEp* ep, OrtNodeComputeInfo** infos, size_t n) { (void)ep; (void)infos; (void)n; }

static OrtStatus* EpLayout(OrtEp* ep, OrtEpDataLayout* layout) {
    (void)ep;
#ifdef BAD_LAYOUT
    *layout = (OrtEpDataLayout)7;
#else
    *layout = OrtEpDataLayout_NCHW;
#endif
    return NULL;
}

FLAG_DEPENDENT static OrtGraphCaptureNodeAssignmentPolicy EpCapturePolicy(const OrtEp* ep) {
    (void)ep;
#ifdef BAD_CAPTURE_POLICY
    return (OrtGraphCaptureNodeAssignmentPolicy)5;
#else
    return OrtGraphCaptureNodeAssignmentPolicy_ALL_NODES_ON_EP;
#endif
}

FLAG_DEPENDENT static bool EpCaptureEnabled(const OrtEp* ep) { (void)ep; return true; }

static OrtStatus* CreateEp(OrtEpFactory* f, const OrtHardwareDevice* const* d, const OrtKeyValuePairs* const* m,
                           size_t n, const OrtSessionOptions* so, const OrtLogger* l, OrtEp** out) {
    (void)f; (void)d; (void)m; (void)n; (void)so; (void)l;
    struct test_ep* ep = calloc(1, sizeof *ep);
    ep->base.ort_version_supported = 24;
    ep->base.GetName = EpName;
    ep->base.GetCapability = EpGetCapability;
    ep->base.GetPreferredDataLayout = EpLayout;
#ifndef NO_COMPILE
    ep->base.Compile = EpCompile;
#if !defined(COMPILE_WITHOUT_RELEASE)
    ep->base.ReleaseNodeComputeInfos = EpReleaseInfos;
#endif
#endif
#if defined(BAD_CAPTURE_POLICY) || defined(CAPTURE_WITHOUT_REPLAY)
    ep->base.ort_version_supported = 26;
    ep->base.GetGraphCaptureNodeAssignmentPolicy = EpCapturePolicy;
#endif
#ifdef CAPTURE_WITHOUT_REPLAY
    ep->base.IsGraphCaptureEnabled = EpCaptureEnabled;
#endif
#ifdef EP_VERSION_ZERO
    ep->base.ort_version_supported = 0;
#endif
#ifdef EP_VERSION_21
    ep->base.ort_version_supported = 21;
#endif
#ifdef EP_NULL_CAPABILITY
    ep->base.GetCapability = NULL;
#endif
    *out = &ep->base;
    return NULL;
}

static void ReleaseEp(OrtEpFactory* f, OrtEp* ep) { (void)f; free(ep); }

#ifdef DATA_TRANSFER_FLIPS_BYTE
static void TransferRelease(OrtDataTransferImpl* t) { (void)t; }

static bool TransferCanCopy(const OrtDataTransferImpl* t, const OrtMemoryDevice* src, const OrtMemoryDevice* dst) {
    (void)t;
    return g_ep_api->MemoryDevice_GetDeviceType(src) == OrtMemoryInfoDeviceType_CPU &&
           g_ep_api->MemoryDevice_GetDeviceType(dst) == OrtMemoryInfoDeviceType_CPU;
}

static OrtStatus* TransferCopy(OrtDataTransferImpl* t, const OrtValue** src, OrtValue** dst, OrtSyncStream** streams,
                               size_t n) {
    (void)t; (void)streams;
    for (size_t i = 0; i < n; ++i) {
        void* from = NULL;
        void* to = NULL;
        size_t bytes = 0;
        OrtStatus* st = g_api->GetTensorMutableData((OrtValue*)(uintptr_t)src[i], &from);
        if (st == NULL) st = g_api->GetTensorMutableData(dst[i], &to);
        if (st == NULL) st = g_api->GetTensorSizeInBytes(src[i], &bytes);
        if (st != NULL) return st;
        memcpy(to, from, bytes);
        if (bytes) ((unsigned char*)to)[0] ^= 1;
    }
    return NULL;
}

/* Test plugin only: one data transfer for the process's one factory. */
static OrtDataTransferImpl g_transfer = {24, TransferRelease, TransferCanCopy, TransferCopy};
#endif

static OrtStatus* CreateDataTransfer(OrtEpFactory* f, OrtDataTransferImpl** out) {
    (void)f;
#ifdef DATA_TRANSFER_FLIPS_BYTE
    *out = &g_transfer;
#else
    *out = NULL;
#endif
    return NULL;
}

static bool FactoryStreamAware(const OrtEpFactory* f) {
    (void)f;
#ifdef STREAM_AWARE_NO_STREAM
    return true;
#else
    return false;
#endif
}

EXPORT OrtStatus* CreateEpFactories(const char* name, const OrtApiBase* base, const OrtLogger* logger,
                                    OrtEpFactory** factories, size_t max, size_t* num) {
    (void)name; (void)logger;
    g_api = base->GetApi(24);
    if (g_api == NULL) return NULL;
    g_ep_api = g_api->GetEpApi();
    struct test_factory* f = calloc(1, sizeof *f);
    f->base.ort_version_supported = 24;
    f->base.GetName = FactoryName;
    f->base.GetVendor = FactoryVendor;
    f->base.GetVersion = FactoryVersion;
    f->base.GetSupportedDevices = GetSupportedDevices;
    f->base.CreateEp = CreateEp;
    f->base.ReleaseEp = ReleaseEp;
    f->base.CreateDataTransfer = CreateDataTransfer;
    f->base.IsStreamAware = FactoryStreamAware;
#ifdef LEAK_FD
    (void)open("/dev/null", O_RDONLY);
#endif
#ifdef FACTORY_VERSION_ZERO
    f->base.ort_version_supported = 0;
#endif
#ifdef FACTORY_VERSION_21
    f->base.ort_version_supported = 21;
#endif
#ifdef NULL_GET_VERSION
    f->base.GetVersion = NULL;
#endif
#ifdef NULL_DATA_TRANSFER
    f->base.CreateDataTransfer = NULL;
#endif
    factories[0] = &f->base;
    *num = 1;
#ifdef TOO_MANY_FACTORIES
    *num = max + 1;
#endif
#ifdef ZERO_FACTORIES
    free(f);
    factories[0] = NULL;
    *num = 0;
#endif
    (void)max;
    return NULL;
}

#ifndef NO_RELEASE_EXPORT
EXPORT OrtStatus* ReleaseEpFactory(OrtEpFactory* f) {
    free(f);
#ifdef RELEASE_FACTORY_FAILS
    return g_api->CreateStatus(ORT_FAIL, "ReleaseEpFactory failed on purpose");
#else
    return NULL;
#endif
}
#endif
