/*
 * misbehaving_plugin.c - a minimal plugin EP that breaks one rule of the plugin-EP contract per build flag,
 * so the tests can check that the epabi host notices. Built by tests/plugin_builder.py with one -D flag:
 *
 *   (none)                 well behaved: one factory, one EP device on the CPU, an EP that claims nothing
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
 */
#include <stdlib.h>
#include <string.h>

#include "epabi/ort_abi.h"

#define EXPORT __attribute__((visibility("default")))

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

static const char* EpName(const OrtEp* ep) { (void)ep; return "MisbehavingEp"; }
static OrtStatus* EpGetCapability(OrtEp* ep, const OrtGraph* g, OrtEpGraphSupportInfo* info) {
    (void)ep; (void)g; (void)info;
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

#ifdef CLAIM_NON_CONVEX
static OrtStatus* EpCompile(OrtEp* ep, const OrtGraph** graphs, const OrtNode** fused, size_t count,
                            OrtNodeComputeInfo** infos, OrtNode** ep_context) {
    (void)ep; (void)graphs; (void)fused; (void)count; (void)infos; (void)ep_context;
    return g_api->CreateStatus(ORT_EP_FAIL, "Compile must not be called for a non-convex claim");
}

static void EpReleaseInfos(OrtEp* ep, OrtNodeComputeInfo** infos, size_t n) { (void)ep; (void)infos; (void)n; }
#endif

static OrtStatus* CreateEp(OrtEpFactory* f, const OrtHardwareDevice* const* d, const OrtKeyValuePairs* const* m,
                           size_t n, const OrtSessionOptions* so, const OrtLogger* l, OrtEp** out) {
    (void)f; (void)d; (void)m; (void)n; (void)so; (void)l;
    struct test_ep* ep = calloc(1, sizeof *ep);
    ep->base.ort_version_supported = 24;
    ep->base.GetName = EpName;
    ep->base.GetCapability = EpGetCapability;
#ifdef CLAIM_NON_CONVEX
    ep->base.Compile = EpCompile;
    ep->base.ReleaseNodeComputeInfos = EpReleaseInfos;
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

static OrtStatus* CreateDataTransfer(OrtEpFactory* f, OrtDataTransferImpl** out) {
    (void)f;
    *out = NULL;
    return NULL;
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
