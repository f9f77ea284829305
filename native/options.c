#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ep_factory.h"
#include "thread_pool.h"

/* "ep.<EP name, lower-cased>." is how add_provider_for_devices passes options (ORT lower-cases the EP name);
 * then the legacy CUDA EP spelling, then the bare key. */
static void ep_prefix(char* out, size_t len) {
    size_t n = 0;
    const char* name = EPABI_EP_NAME;
    n += (size_t)snprintf(out, len, "ep.");
    for (size_t i = 0; name[i] != '\0' && n + 2 < len; ++i) out[n++] = (char)tolower((unsigned char)name[i]);
    out[n++] = '.';
    out[n] = '\0';
}

/* Where options come from, highest precedence first: the session's config entries (provider options
 * included), then the environment's (process-wide defaults). Either may be NULL. */
struct option_sources {
    const OrtKeyValuePairs* session;
    const OrtKeyValuePairs* env;
};

/* Environment-level EP options are keyed "ep_factory.<EP name>.<key>", the EP name spelt exactly as the
 * factory reports it (ORT 1.24+ onnxruntime_env_config_keys.h: case-sensitive, unlike the session prefix). */
#define ENV_PREFIX "ep_factory." EPABI_EP_NAME "."

/* Finds key under the first prefix that has it: the session's three spellings, then the environment's;
 * *full_key receives the spelling that matched. */
static const char* lookup(const struct epabi_api* api, const struct option_sources* src, const char* key,
                          char* full_key, size_t full_key_len) {
    char ours[64];
    ep_prefix(ours, sizeof ours);
    const char* const prefixes[] = {ours, "ep.cuda.", ""};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; ++i) {
        snprintf(full_key, full_key_len, "%s%s", prefixes[i], key);
        const char* v = epabi_kv_get(api, src->session, full_key);
        if (v != NULL) return v;
    }
    snprintf(full_key, full_key_len, "%s%s", ENV_PREFIX, key);
    return epabi_kv_get(api, src->env, full_key);
}

static OrtStatus* read_bool(const struct epabi_api* api, const struct option_sources* cfg, const char* key,
                            bool* out) {
    char full[160];
    const char* v = lookup(api, cfg, key, full, sizeof full);
    if (v == NULL) return NULL;
    if (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0) {
        *out = true;
    } else if (strcmp(v, "0") == 0 || strcasecmp(v, "false") == 0) {
        *out = false;
    } else {
        return epabi_error(api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": option '%s' has value '%s'; expected 0, 1, true or false",
                           full, v);
    }
    return NULL;
}

static OrtStatus* read_nonneg_int(const struct epabi_api* api, const struct option_sources* cfg, const char* key,
                                  int* out, bool* given) {
    char full[160];
    const char* v = lookup(api, cfg, key, full, sizeof full);
    if (v == NULL) return NULL;
    char* end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    /* strict: digits only (strtoll alone would accept leading blanks and a sign) */
    if (!isdigit((unsigned char)v[0]) || *end != '\0' || errno == ERANGE || n < 0 || n > INT_MAX) {
        return epabi_error(api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": option '%s' has value '%s'; expected an integer from 0 to %d",
                           full, v, INT_MAX);
    }
    *out = (int)n;
    if (given != NULL) *given = true;
    return NULL;
}

/* A thread count from 0 to EPABI_POOL_MAX_THREADS; 0 or absent leaves *out (the default: one per physical
 * core, as ORT's CPU EP). */
static OrtStatus* read_thread_count(const struct epabi_api* api, const struct option_sources* cfg, const char* key,
                                    int* out) {
    char full[160];
    const char* v = lookup(api, cfg, key, full, sizeof full);
    int n = 0;
    if (v != NULL) {
        char* end = NULL;
        errno = 0;
        long long parsed = strtoll(v, &end, 10);
        if (!isdigit((unsigned char)v[0]) || *end != '\0' || errno == ERANGE || parsed < 0 ||
            parsed > EPABI_POOL_MAX_THREADS)
            return epabi_error(api, ORT_INVALID_ARGUMENT,
                               EPABI_EP_NAME ": option '%s' has value '%s'; expected a thread count from 0 (one per "
                               "physical core) to %d", full, v, (int)EPABI_POOL_MAX_THREADS);
        n = (int)parsed;
    }
    if (n > 0) *out = n;
    return NULL;
}

/* A handle value: decimal digits, or 0x/0X and hex digits; nothing else (no sign, no blanks). */
static OrtStatus* read_handle(const struct epabi_api* api, const struct option_sources* cfg, const char* key,
                              uintptr_t* out, bool* given) {
    char full[160];
    const char* v = lookup(api, cfg, key, full, sizeof full);
    if (v == NULL) return NULL;
    bool hex = v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
    const char* digits = hex ? v + 2 : v;
    char* end = NULL;
    errno = 0;
    unsigned long long n = strtoull(digits, &end, hex ? 16 : 10);
    bool ok = (hex ? isxdigit((unsigned char)digits[0]) : isdigit((unsigned char)digits[0])) && *end == '\0' &&
              errno != ERANGE && n <= UINTPTR_MAX;
    if (!ok)
        return epabi_error(api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": option '%s' has value '%s'; expected a stream handle as a "
                           "decimal or 0x-hexadecimal integer", full, v);
    *out = (uintptr_t)n;
    *given = true;
    return NULL;
}

/* The environment's config entries, or NULL on hosts before GetEnvConfigEntries (API 24). */
static OrtStatus* env_entries(const struct epabi_api* api, OrtKeyValuePairs** out) {
    *out = NULL;
    if (!epabi_has(api, EPABI_SINCE_OrtEpApi_GetEnvConfigEntries)) return NULL;
    return api->ep->GetEnvConfigEntries(out);
}

static OrtStatus* read_all(const struct epabi_api* api, const struct option_sources* src,
                           struct epabi_options* out) {
    EPABI_RETURN_IF_ERROR(read_bool(api, src, "enable_cuda_graph", &out->enable_cuda_graph));
    EPABI_RETURN_IF_ERROR(read_nonneg_int(api, src, "min_num_runs_before_cuda_graph_capture",
                                          &out->min_num_runs_before_cuda_graph_capture, NULL));
    EPABI_RETURN_IF_ERROR(
        read_handle(api, src, "user_compute_stream", &out->user_compute_stream, &out->user_compute_stream_given));
    EPABI_RETURN_IF_ERROR(read_nonneg_int(api, src, "device_id", &out->device_id, &out->device_id_given));
    EPABI_RETURN_IF_ERROR(read_bool(api, src, "arena.use_cuda_mempool", &out->use_cuda_mempool));
    EPABI_RETURN_IF_ERROR(read_thread_count(api, src, "intra_op_num_threads", &out->intra_op_num_threads));
    EPABI_RETURN_IF_ERROR(read_bool(api, src, "fused_gemm", &out->fused_gemm));
    EPABI_RETURN_IF_ERROR(read_bool(api, src, "cudnn", &out->cudnn));
    char fused_key[160];
    out->fused_gemm_given = lookup(api, src, "fused_gemm", fused_key, sizeof fused_key) != NULL;

    /* The host's own session keys: never environment defaults. */
    const char* co = epabi_kv_get(api, src->session, "session.compile_only");
    out->compile_only = co != NULL && strcmp(co, "1") == 0;
    /* Older hosts have no session.compile_only: their ModelCompiler marks a compile session only with
     * ep.context_enable=1 (observed on ORT 1.24.4). */
    const char* ctx = epabi_kv_get(api, src->session, "ep.context_enable");
    if (!epabi_has(api, EPABI_POLICY_COMPILE_ONLY_KEY) && ctx != NULL && strcmp(ctx, "1") == 0)
        out->compile_only = true;

    char full[160];
    const char* v = lookup(api, src, "force_cpu_nodes", full, sizeof full);
    if (v != NULL) {
        out->force_cpu_nodes = strdup(v);
        if (out->force_cpu_nodes == NULL)
            return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory copying option '%s'", full);
    }
    return NULL;
}

OrtStatus* epabi_options_read(const struct epabi_api* api, const OrtSessionOptions* session_options,
                              struct epabi_options* out) {
    memset(out, 0, sizeof *out);
    out->min_num_runs_before_cuda_graph_capture = 2;
    out->cudnn = true;
    out->intra_op_num_threads = epabi_pool_default_threads();

    OrtKeyValuePairs* session = NULL;
    OrtKeyValuePairs* env = NULL;
    OrtStatus* st = NULL;
    if (session_options != NULL) st = api->ort->GetSessionOptionsConfigEntries(session_options, &session);
    if (st == NULL) st = env_entries(api, &env);
    if (st == NULL) {
        struct option_sources src = {session, env};
        st = read_all(api, &src, out);
    }
    if (session != NULL) api->ort->ReleaseKeyValuePairs(session);
    if (env != NULL) api->ort->ReleaseKeyValuePairs(env);
    if (st != NULL) epabi_options_release(out);
    return st;
}

void epabi_options_release(struct epabi_options* opts) {
    if (opts == NULL) return;
    free(opts->force_cpu_nodes);
    opts->force_cpu_nodes = NULL;
}

bool epabi_options_forces_cpu(const struct epabi_options* opts, const char* node_name) {
    if (opts->force_cpu_nodes == NULL || node_name == NULL || node_name[0] == '\0') return false;
    size_t want = strlen(node_name);
    const char* p = opts->force_cpu_nodes;
    while (*p != '\0') {
        const char* end = strchr(p, ',');
        if (end == NULL) end = p + strlen(p);
        const char* a = p;
        const char* b = end;
        while (a < b && isspace((unsigned char)*a)) ++a;
        while (b > a && isspace((unsigned char)b[-1])) --b;
        if ((size_t)(b - a) == want && memcmp(a, node_name, want) == 0) return true;
        p = *end == ',' ? end + 1 : end;
    }
    return false;
}
