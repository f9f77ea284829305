#include "api.h"

#include <stdarg.h>
#include <stdio.h>

OrtStatus* epabi_error(const struct epabi_api* api, OrtErrorCode code, const char* fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return api->ort->CreateStatus(code, msg);
}

bool epabi_log_enabled(const struct epabi_api* api, const OrtLogger* logger, OrtLoggingLevel level) {
    if (logger == NULL || api->ort->Logger_LogMessage == NULL) return false;
    if (api->ort->Logger_GetLoggingSeverityLevel == NULL) return true;
    OrtLoggingLevel min = ORT_LOGGING_LEVEL_VERBOSE;
    OrtStatus* q = api->ort->Logger_GetLoggingSeverityLevel(logger, &min);
    if (q != NULL) {
        api->ort->ReleaseStatus(q);
        return true;
    }
    return level >= min;
}

void epabi_log_at(const struct epabi_api* api, const OrtLogger* logger, OrtLoggingLevel level,
                  const char* file, int line, const char* func, const char* fmt, ...) {
    /* the host drops messages below the logger's severity anyway: skip the formatting */
    if (!epabi_log_enabled(api, logger, level)) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    OrtStatus* st = api->ort->Logger_LogMessage(logger, level, msg, file, line, func);
    if (st != NULL) api->ort->ReleaseStatus(st);
}

const char* epabi_kv_get(const struct epabi_api* api, const OrtKeyValuePairs* kvp, const char* key) {
    if (kvp == NULL) return NULL;
    return api->ort->GetKeyValue(kvp, key);
}
