/*
 * api.h - the negotiated ONNX Runtime API, version gates, status and logging helpers.
 *
 * Every other plugin file reaches the host only through a struct epabi_api, so "which host am I talking
 * to" is decided once, in entry.c, and never guessed again. Thread-safety: an epabi_api is written once
 * by CreateEpFactories and read-only afterwards.
 */
#ifndef EPABI_API_H
#define EPABI_API_H

#include <stdbool.h>

#include "epabi/ort_abi.h"

#include "abi_since.h"
#include "policy.h"

enum { EPABI_NVIDIA_VENDOR_ID = 0x10DE };

struct epabi_api {
    const OrtApi* ort;
    const OrtEpApi* ep;
    uint32_t version;          /* negotiated: min(host API, EPABI_ORT_API_VERSION) */
    char host_version[32];     /* the host's GetVersionString(), truncated */
};

static inline int epabi_has(const struct epabi_api* api, uint32_t since) {
    return api->version >= since;
}

/* printf-style OrtStatus; never returns NULL unless the host's CreateStatus does. */
OrtStatus* epabi_error(const struct epabi_api* api, OrtErrorCode code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Logs through the host's OrtLogger; a NULL logger or a failing host call is silently ignored
 * (logging must never turn into an error path). */
void epabi_log_at(const struct epabi_api* api, const OrtLogger* logger, OrtLoggingLevel level,
                  const char* file, int line, const char* func, const char* fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* Whether the logger would show a message of that level (one host call); false for a NULL logger. */
bool epabi_log_enabled(const struct epabi_api* api, const OrtLogger* logger, OrtLoggingLevel level);

#define EPABI_LOG(api, logger, level, ...) \
    epabi_log_at((api), (logger), (level), __FILE__, __LINE__, __func__, __VA_ARGS__)

#define EPABI_RETURN_IF_ERROR(expr)        \
    do {                                   \
        OrtStatus* epabi_st_ = (expr);     \
        if (epabi_st_ != NULL) return epabi_st_; \
    } while (0)

/* Reads one string entry of a key-value pair set; NULL when absent. */
const char* epabi_kv_get(const struct epabi_api* api, const OrtKeyValuePairs* kvp, const char* key);

#endif
