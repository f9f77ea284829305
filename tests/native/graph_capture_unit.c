/*
 * graph_capture_unit.c - standalone checks of native/stream.c, native/graph_capture.c and the arena's capture
 * pools against a fake OrtApi (statuses, run config entries, a logger): nesting, duplicate and missing ids,
 * aborted and failed captures leaving nothing behind, replay of recorded argument copies, annotation-id
 * parsing as ORT core does it, user-stream adoption, attach/detach. Build and run from native/:
 *
 *   gcc -std=c11 -D_GNU_SOURCE -g -fsanitize=address,undefined -Wall -Wextra -Iinclude -I. -Ikernels \
 *       ../tests/native/graph_capture_unit.c stream.c graph_capture.c arena.c api.c -lpthread -o /tmp/gc_unit
 *   /tmp/gc_unit     # exit status 0 and "all unit checks passed"
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_capture.h"

struct OrtStatus { OrtErrorCode code; char msg[1024]; };
static OrtStatus* create_status(OrtErrorCode c, const char* m) {
    OrtStatus* s = calloc(1, sizeof *s); s->code = c; snprintf(s->msg, sizeof s->msg, "%s", m); return s;
}
static OrtErrorCode get_code(const OrtStatus* s) { return s->code; }
static const char* get_msg(const OrtStatus* s) { return s->msg; }
static void release_status(OrtStatus* s) { free(s); }
static const char* g_gid = NULL;
static const char* run_cfg(const OrtRunOptions* o, const char* k) { (void)o; return strcmp(k, "gpu_graph_id") == 0 ? g_gid : NULL; }
static int g_logs; static char g_last[2048];
static OrtStatus* log_msg(const OrtLogger* l, OrtLoggingLevel lv, const char* m, const ORTCHAR_T* f, int line, const char* fn) {
    (void)l; (void)f; (void)line; (void)fn; g_logs++; snprintf(g_last, sizeof g_last, "[%d] %s", (int)lv, m); printf("  log %s\n", g_last); return NULL;
}

static int failures;
#define CHECK(c) do { if (!(c)) { printf("FAIL %s:%d %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)
static void expect(OrtStatus* st, OrtErrorCode code, const char* needle) {
    CHECK(st != NULL);
    if (st == NULL) return;
    printf("  status %d: %s\n", st->code, st->msg);
    CHECK(st->code == code);
    CHECK(needle == NULL || strstr(st->msg, needle) != NULL);
    free(st);
}

struct add_args { const float* a; float* out; int n; };
static void add_one(const void* p) { const struct add_args* a = p; for (int i = 0; i < a->n; ++i) a->out[i] = a->a[i] + 1; }

int main(void) {
    OrtApi ort; memset(&ort, 0, sizeof ort);
    ort.CreateStatus = create_status; ort.GetErrorCode = get_code; ort.GetErrorMessage = get_msg;
    ort.ReleaseStatus = release_status; ort.GetRunConfigEntry = run_cfg; ort.Logger_LogMessage = log_msg;
    struct epabi_api api; memset(&api, 0, sizeof api); api.ort = &ort; api.version = 30;
    struct epabi_arena* arena = epabi_arena_create();

    /* stream: nested capture, end without begin, replay on a foreign stream */
    struct epabi_stream* s = epabi_stream_host_create(&api, false, 0);
    struct epabi_stream* s2 = epabi_stream_host_create(&api, true, 0);
    CHECK(!epabi_stream_is_user_owned(s) && epabi_stream_is_user_owned(s2) && epabi_stream_handle(s2) == 0);
    struct epabi_stream_graph* sg = NULL;
    expect(epabi_stream_end_capture(s, &sg), ORT_FAIL, "not capturing");
    CHECK(epabi_stream_begin_capture(s) == NULL);
    expect(epabi_stream_begin_capture(s), ORT_FAIL, "do not nest");
    float in[4] = {1, 2, 3, 4}, out[4] = {0};
    struct add_args a = {in, out, 4};
    CHECK(epabi_stream_launch(s, add_one, &a, sizeof a) == NULL);
    CHECK(out[3] == 5);   /* executed while capturing */
    CHECK(epabi_stream_end_capture(s, &sg) == NULL && epabi_stream_graph_launches(sg) == 1);
    in[3] = 10; a.out = NULL;  /* the recorded copy of args is what replays */
    CHECK(epabi_stream_replay(s, sg, true) == NULL && out[3] == 11);
    expect(epabi_stream_replay(s2, sg, true), ORT_INVALID_ARGUMENT, "captured it");
    epabi_stream_graph_destroy(sg);

    /* manager: counting, allowed, nested, duplicate, missing, abort leaves nothing */
    struct epabi_graph_manager* m = epabi_graph_manager_create(&api, s, arena, 2);
    CHECK(!epabi_graph_manager_capture_allowed(m, 1));
    epabi_graph_manager_count_regular_run(m, 1);
    CHECK(!epabi_graph_manager_capture_allowed(m, 1));
    epabi_graph_manager_count_regular_run(m, 1);
    CHECK(epabi_graph_manager_capture_allowed(m, 1) && !epabi_graph_manager_capture_allowed(m, -1));
    expect(epabi_graph_manager_capture_begin(m, -1), ORT_INVALID_ARGUMENT, "-1");
    CHECK(epabi_graph_manager_capture_begin(m, 1) == NULL);
    expect(epabi_graph_manager_capture_begin(m, 2), ORT_FAIL, "do not nest");
    void* blk = epabi_arena_pool_alloc(epabi_graph_manager_capture_pool(m), 1000);
    CHECK(blk != NULL);
    epabi_arena_free(arena, blk);   /* ignored: the pool holds it */
    epabi_graph_manager_capture_abort(m);
    CHECK(!epabi_graph_manager_is_captured(m, 1) && !epabi_graph_manager_is_capturing(m, NULL));
    struct epabi_arena_stats st0; epabi_arena_get_stats(arena, &st0);
    CHECK(st0.bytes_in_use == 0);   /* abort gave the pool's block back */
    CHECK(epabi_graph_manager_capture_begin(m, 1) == NULL);
    a.out = out;
    CHECK(epabi_stream_launch(s, add_one, &a, sizeof a) == NULL);
    CHECK(epabi_graph_manager_capture_end(m, 1) == NULL && epabi_graph_manager_is_captured(m, 1));
    expect(epabi_graph_manager_capture_begin(m, 1), ORT_INVALID_ARGUMENT, "already");
    expect(epabi_graph_manager_replay(m, 5, true), ORT_INVALID_ARGUMENT, "annotation id 5");
    CHECK(epabi_graph_manager_replay(m, 1, true) == NULL && epabi_graph_manager_replays(m, 1) == 1);
    expect(epabi_graph_manager_capture_end(m, 3), ORT_FAIL, "never begun");
    epabi_graph_manager_reset(m);
    CHECK(!epabi_graph_manager_is_captured(m, 1) && epabi_graph_manager_regular_runs(m, 1) == 0);
    epabi_graph_manager_destroy(m);
    /* graph set: a second graph under an id is an error naming the id */
    struct epabi_graph_set set = {0};
    struct epabi_graph* g1 = calloc(1, 64), *g2 = calloc(1, 64);   /* opaque here; only stored */
    CHECK(epabi_graph_set_put(&api, &set, 4, g1) == NULL);
    expect(epabi_graph_set_put(&api, &set, 4, g2), ORT_FAIL, "annotation id 4");
    free(g2);
    epabi_graph_set_clear(&set);   /* frees g1 through graph_destroy: launches/pool NULL are fine */

    /* annotation id parsing, as ORT core parses it */
    const char* ids[][2] = {{"1", "1"}, {"-1", "-1"}, {"007", "7"}, {"+3", "0"}, {" 3", "0"}, {"3 ", "0"},
                            {"1x", "0"}, {"", "0"}, {"2147483647", "2147483647"}, {"2147483648", "0"},
                            {"-2147483648", "-2147483648"}, {"-2147483649", "0"}, {"x", "0"}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; ++i) {
        g_gid = ids[i][0];
        int v = epabi_gc_annotation_id(&api, (const OrtRunOptions*)1);
        if (v != atoi(ids[i][1])) { printf("FAIL id '%s' -> %d\n", ids[i][0], v); failures++; }
    }
    g_gid = NULL;
    CHECK(epabi_gc_annotation_id(&api, (const OrtRunOptions*)1) == 0 && epabi_gc_annotation_id(&api, NULL) == 0);

    /* owner level: nested OnRunStart, failed capture, attach/detach */
    struct epabi_gc_owner o = {&api, (const OrtLogger*)1, arena, 0, true, 0x1234, 0, 1};
    CHECK(epabi_gc_attach(&o) == NULL && o.serial != 0);
    g_gid = "3";
    CHECK(epabi_gc_run_start(&o, (const OrtRunOptions*)1) == NULL);   /* min 0: captures */
    CHECK(strstr(g_last, "capturing graph of annotation id 3") != NULL);
    expect(epabi_gc_run_start(&o, (const OrtRunOptions*)1), ORT_FAIL, "do not nest");
    CHECK(!epabi_gc_is_captured(&o, 3));
    CHECK(epabi_gc_run_start(&o, (const OrtRunOptions*)1) == NULL);   /* clean again: captures */
    struct epabi_thread_context* tc = epabi_gc_find(&o);
    struct epabi_run_env env; epabi_gc_run_env(tc, &env);
    CHECK(env.stream != NULL && env.capture_pool != NULL);
    epabi_gc_note_compute(tc, false);                                  /* a fused node failed */
    CHECK(epabi_gc_run_end(&o, (const OrtRunOptions*)1, true) == NULL);
    CHECK(strstr(g_last, "failed") != NULL && !epabi_gc_is_captured(&o, 3));
    CHECK(epabi_gc_run_start(&o, (const OrtRunOptions*)1) == NULL);
    epabi_gc_note_compute(tc, true);
    CHECK(epabi_gc_run_end(&o, (const OrtRunOptions*)1, true) == NULL && epabi_gc_is_captured(&o, 3));
    /* a capture that recorded fewer fused nodes than the EP compiled (parallel execution) is refused */
    g_gid = "4";
    CHECK(epabi_gc_run_start(&o, (const OrtRunOptions*)1) == NULL);
    expect(epabi_gc_run_end(&o, (const OrtRunOptions*)1, true), ORT_FAIL, "sequential execution");
    CHECK(!epabi_gc_is_captured(&o, 4));
    g_gid = "3";
    CHECK(epabi_gc_replay(&o, 3) == NULL && strstr(g_last, "ReplayGraph replayed annotation id 3 (replay 2") != NULL);
    expect(epabi_gc_replay(&o, 4), ORT_INVALID_ARGUMENT, "annotation id 4");
    epabi_gc_detach(&o);
    CHECK(o.serial == 0 && epabi_gc_find(&o) == NULL);

    epabi_stream_destroy(s); epabi_stream_destroy(s2);
    struct epabi_arena_stats st1; epabi_arena_get_stats(arena, &st1);
    CHECK(st1.bytes_in_use == 0);
    epabi_arena_release(arena);
    printf(failures ? "FAILURES: %d\n" : "all unit checks passed\n", failures);
    return failures != 0;
}
