/*
 * entry.c - the library's only two exports: CreateEpFactories and ReleaseEpFactory.
 *
 * Negotiation (Vulkan-loader style): the host's release string says which API it speaks; we use
 * min(that, EPABI_ORT_API_VERSION) and refuse hosts older than MIN_ONNXRUNTIME_VERSION before touching
 * anything newer than API v1. No global state: each CreateEpFactories call makes an independent factory.
 */
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "ep_factory.h"
#include "version.h"

#ifndef EPABI_MIN_ORT_VERSION
#error "EPABI_MIN_ORT_VERSION must be defined by the build (CMakeLists.txt reads MIN_ONNXRUNTIME_VERSION)"
#endif

/* CreateStatus is slot 0 of every OrtApi since v1, so it is safe to use before negotiation. */
_Static_assert(offsetof(OrtApi, CreateStatus) == 0, "OrtApi::CreateStatus must be slot 0");
_Static_assert(offsetof(OrtApi, GetEpApi) == 317 * sizeof(void*), "OrtApi::GetEpApi must be slot 317");

__attribute__((visibility("default")))
OrtStatus* CreateEpFactories(const char* registration_name, const OrtApiBase* ort_api_base,
                             const OrtLogger* default_logger, OrtEpFactory** factories, size_t max_factories,
                             size_t* num_factories) {
    (void)registration_name;
    if (num_factories != NULL) *num_factories = 0;
    if (ort_api_base == NULL || ort_api_base->GetApi == NULL) return NULL;   /* no way to report anything */
    const OrtApi* v1 = ort_api_base->GetApi(1);
    if (v1 == NULL) return NULL;
    if (factories == NULL || num_factories == NULL)
        return v1->CreateStatus(ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": CreateEpFactories got a NULL output pointer");
    if (max_factories < 1)
        return v1->CreateStatus(ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": CreateEpFactories was allowed 0 factories");

    char msg[512];
    const char* host_text = ort_api_base->GetVersionString != NULL ? ort_api_base->GetVersionString() : NULL;
    struct epabi_release host, minimum;
    if (epabi_release_parse(EPABI_MIN_ORT_VERSION, &minimum) != 0)
        return v1->CreateStatus(ORT_FAIL, EPABI_EP_NAME ": built with a malformed minimum version " EPABI_MIN_ORT_VERSION);
    if (epabi_release_parse(host_text, &host) != 0) {
        snprintf(msg, sizeof msg, EPABI_EP_NAME ": cannot read the ONNX Runtime version \"%s\"; need \"%s\" or newer",
                 host_text != NULL ? host_text : "(null)", EPABI_MIN_ORT_VERSION);
        return v1->CreateStatus(ORT_FAIL, msg);
    }
    if (epabi_release_cmp(host, minimum) < 0) {
        snprintf(msg, sizeof msg, EPABI_EP_NAME ": ORT runtime version \"%s\" is below the minimum required version \"%s\".",
                 host_text, EPABI_MIN_ORT_VERSION);
        return v1->CreateStatus(ORT_FAIL, msg);
    }

    struct epabi_api api;
    memset(&api, 0, sizeof api);
    uint32_t host_api = epabi_release_api_version(host, EPABI_ORT_API_VERSION);
    api.version = host_api < EPABI_ORT_API_VERSION ? host_api : EPABI_ORT_API_VERSION;
    snprintf(api.host_version, sizeof api.host_version, "%s", host_text);
    api.ort = ort_api_base->GetApi(api.version);
    if (api.ort == NULL) {
        snprintf(msg, sizeof msg, EPABI_EP_NAME ": ONNX Runtime \"%s\" returned no OrtApi for version %u",
                 host_text, (unsigned)api.version);
        return v1->CreateStatus(ORT_FAIL, msg);
    }
    api.ep = api.ort->GetEpApi();
    if (api.ep == NULL)
        return v1->CreateStatus(ORT_FAIL, EPABI_EP_NAME ": the host returned no OrtEpApi");

    struct epabi_factory* f = epabi_factory_create(&api, default_logger);
    if (f == NULL) return v1->CreateStatus(ORT_FAIL, EPABI_EP_NAME ": out of memory creating the EP factory");
    EPABI_LOG(&api, default_logger, ORT_LOGGING_LEVEL_VERBOSE,
              EPABI_EP_NAME " %s: negotiated API %u with ONNX Runtime %s", EPABI_PLUGIN_VERSION,
              (unsigned)api.version, host_text);
    factories[0] = &f->base;
    *num_factories = 1;
    return NULL;
}

__attribute__((visibility("default")))
OrtStatus* ReleaseEpFactory(OrtEpFactory* factory) {
    epabi_factory_destroy((struct epabi_factory*)factory);
    return NULL;
}
