/*
 * graph_capture_unit.c - standalone checks of native/stream.c, graph_capture.c, thread_context.c, capture_policy.c
 * and the arena's capture pools against a fake OrtApi (statuses, run config entries, a logger): nesting, duplicate and missing ids,
 * aborted and failed captures leaving nothing behind, replay of recorded argument copies, annotation-id
 * parsing as ORT core does it, user-stream adoption, attach/detach, and (with threads) the release of an EP
 * freeing its contexts on every thread at once: an idle thread's graphs and capture-pool memory of a released
 * EP go at the release, while the thread keeps using a live EP; a thread looking contexts up and adding new
 * ones while another thread releases EPs it had used; a thread exiting while the last EP is released; the
 * allocator-block registry (holds, deferred frees, allocators released while graphs hold their blocks) and a
 * captured graph holding a block until it is released.
 * Build and run from native/ (add -fsanitize=thread instead of address,undefined for ThreadSanitizer):
 *
 *   gcc -std=c11 -D_GNU_SOURCE -g -fsanitize=address,undefined -Wall -Wextra -Iinclude -I. -Ikernels \
 *       ../tests/native/graph_capture_unit.c stream.c graph_capture.c thread_context.c capture_policy.c \
 *       ep_profiler.c arena.c alloc_registry.c api.c -lpthread -o /tmp/gc_unit
 *   /tmp/gc_unit     # exit status 0 and "all unit checks passed"
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_registry.h"
#include "capture_policy.h"
#include "graph_capture.h"
#include "thread_context.h"

struct OrtStatus { OrtErrorCode code; char msg[1024]; };
static OrtStatus* create_status(OrtErrorCode c, const char* m) {
    OrtStatus* s = calloc(1, sizeof *s); s->code = c; snprintf(s->msg, sizeof s->msg, "%s", m); return s;
}
static OrtErrorCode get_code(const OrtStatus* s) { return s->code; }
static const char* get_msg(const OrtStatus* s) { return s->msg; }
static void release_status(OrtStatus* s) { free(s); }
/* run options: (const OrtRunOptions*)1 reads g_gid; a pointer to a struct fake_ro carries its own id (threads) */
struct fake_ro { const char* gid; };
static const char* g_gid = NULL;
static const char* run_cfg(const OrtRunOptions* o, const char* k) {
    if (strcmp(k, "gpu_graph_id") != 0) return NULL;
    return o == (const OrtRunOptions*)1 ? g_gid : ((const struct fake_ro*)o)->gid;
}
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool g_quiet;   /* stress loops: count, do not print */
static int g_logs; static char g_last[2048];
static OrtStatus* log_msg(const OrtLogger* l, OrtLoggingLevel lv, const char* m, const ORTCHAR_T* f, int line, const char* fn) {
    (void)l; (void)f; (void)line; (void)fn;
    pthread_mutex_lock(&g_log_mu);
    g_logs++; snprintf(g_last, sizeof g_last, "[%d] %s", (int)lv, m);
    if (!atomic_load(&g_quiet)) printf("  log %s\n", g_last);
    pthread_mutex_unlock(&g_log_mu);
    return NULL;
}

static atomic_int failures;
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
/* a launch that checks its data as a kernel does: a negative input is reported through the stream's error word */
struct checked_args { const float* a; uint64_t* word; uint64_t site; };
static void check_sign(const void* p) { const struct checked_args* c = p; if (c->a[0] < 0) epabi_launch_report(c->word, c->site); }

/* ---- threads: a release frees the EP's contexts on every thread ------------------------------------------- */

static uint64_t in_use(struct epabi_arena* a) { struct epabi_arena_stats s; epabi_arena_get_stats(a, &s); return s.bytes_in_use; }

/* One capturing run of o on this thread, as ORT drives it (min_runs 0, one fused node): a block of `bytes`
 * from the capture pool, out = in + 1 launched on the thread's stream. True when the graph was stored. */
static bool capture_once(const struct epabi_thread_owner* o, const struct fake_ro* ro, size_t bytes, struct add_args* a) {
    const OrtRunOptions* opts = (const OrtRunOptions*)ro;
    OrtStatus* st = epabi_capture_run_start(o, opts);
    CHECK(st == NULL);
    if (st != NULL) { free(st); return false; }
    struct epabi_thread_context* tc = epabi_thread_find(o);
    struct epabi_run_env env; epabi_thread_run_env(o, tc, &env);
    CHECK(tc != NULL && env.stream != NULL && env.capture_pool != NULL);
    if (tc == NULL || env.capture_pool == NULL) return false;
    void* blk = epabi_arena_pool_alloc(env.capture_pool, bytes);
    CHECK(blk != NULL);
    CHECK(epabi_stream_launch(env.stream, EPABI_LAUNCH_COPY, add_one, a, sizeof *a) == NULL);
    epabi_capture_note_compute(tc, blk != NULL, 1);
    st = epabi_capture_run_end(o, opts, true);
    CHECK(st == NULL);
    if (st != NULL) { free(st); return false; }
    return epabi_capture_is_captured(o, atoi(ro->gid));
}

static bool replays_to(const struct epabi_thread_owner* o, int id, float* in, const float* out, float v) {
    in[0] = v;
    OrtStatus* st = epabi_capture_replay(o, id);
    if (st != NULL) { printf("  replay status: %s\n", st->msg); free(st); return false; }
    return out[0] == v + 1;
}

/* 1. an idle thread: captures for A (long-lived) and B, then waits while the main thread releases B */
struct idle_test {
    pthread_mutex_t mu; pthread_cond_t cv; int phase;   /* 1: worker captured; 2: B released; 3: worker done */
    struct epabi_thread_owner *a, *b, *c;
};
static void idle_set(struct idle_test* t, int phase) {
    pthread_mutex_lock(&t->mu); t->phase = phase; pthread_cond_broadcast(&t->cv); pthread_mutex_unlock(&t->mu);
}
static void idle_wait(struct idle_test* t, int phase) {
    pthread_mutex_lock(&t->mu); while (t->phase < phase) pthread_cond_wait(&t->cv, &t->mu); pthread_mutex_unlock(&t->mu);
}
static void* idle_worker(void* p) {
    struct idle_test* t = p;
    struct fake_ro r7 = {"7"}, r8 = {"8"};
    float ia[4] = {1}, oa[4] = {0}, ib[4] = {1}, ob[4] = {0}, ia8[4] = {1}, oa8[4] = {0}, ic[4] = {1}, oc[4] = {0};
    struct add_args aa = {ia, oa, 4}, ab = {ib, ob, 4}, aa8 = {ia8, oa8, 4}, ac = {ic, oc, 4};
    CHECK(capture_once(t->a, &r7, 3000, &aa));
    CHECK(capture_once(t->b, &r7, 5000, &ab));
    idle_set(t, 1);
    idle_wait(t, 2);   /* idle: B is released meanwhile, on the main thread */
    /* A goes on as before on this thread: its graph replays, a new id captures, and a new EP gets a context */
    CHECK(epabi_capture_is_captured(t->a, 7) && replays_to(t->a, 7, ia, oa, 41));
    CHECK(capture_once(t->a, &r8, 1000, &aa8) && replays_to(t->a, 8, ia8, oa8, 5));
    CHECK(epabi_capture_is_captured(t->a, 7) && replays_to(t->a, 7, ia, oa, 42));
    CHECK(capture_once(t->c, &r7, 2000, &ac) && replays_to(t->c, 7, ic, oc, 9));
    CHECK(epabi_thread_live_contexts() == 2);   /* this thread's A and C: nothing of B anywhere */
    idle_set(t, 3);
    return NULL;   /* thread exit: the key destructor frees A's and C's contexts here */
}

static void test_release_frees_idle_threads(struct epabi_api* api) {
    printf("release of an EP frees an idle thread's context for it\n");
    struct epabi_arena *ar_a = epabi_arena_create(), *ar_b = epabi_arena_create(), *ar_c = epabi_arena_create();
    struct epabi_thread_owner A = {.api = api, .logger = (const OrtLogger*)1, .arena = ar_a, .graph_capture = true, .min_runs = 0, .fused_nodes = 1};
    struct epabi_thread_owner B = A, C = A;
    B.arena = ar_b; C.arena = ar_c;
    CHECK(epabi_thread_live_contexts() == 0);
    CHECK(epabi_threads_attach(&A) == NULL && epabi_threads_attach(&B) == NULL);
    struct idle_test t = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .a = &A, .b = &B, .c = &C};
    pthread_t w;
    CHECK(pthread_create(&w, NULL, idle_worker, &t) == 0);
    idle_wait(&t, 1);
    /* the main thread runs B too, so the release also frees the releasing thread's own context */
    struct fake_ro r7 = {"7"};
    float im[4] = {1}, om[4] = {0};
    struct add_args am = {im, om, 4};
    CHECK(capture_once(&B, &r7, 700, &am));
    CHECK(epabi_thread_live_contexts() == 3);             /* worker: A, B; main: B */
    uint64_t b_before = in_use(ar_b), a_before = in_use(ar_a);
    printf("  B's arena: %llu bytes in use by capture pools before the release\n", (unsigned long long)b_before);
    CHECK(b_before >= 5000 + 700);                    /* the two graphs of B hold their pools' blocks */
    epabi_threads_detach(&B);                              /* the worker is idle, blocked on the condition */
    CHECK(B.serial == 0);
    CHECK(epabi_thread_live_contexts() == 1);             /* only the worker's A: its B went with the release */
    CHECK(in_use(ar_b) == 0);                         /* every block of B's capture pools is back */
    CHECK(in_use(ar_a) == a_before);                  /* A untouched */
    CHECK(epabi_threads_attach(&C) == NULL);               /* a new EP: the worker's freed entry gets reused */
    idle_set(&t, 2);
    idle_wait(&t, 3);
    CHECK(pthread_join(w, NULL) == 0);
    CHECK(epabi_thread_live_contexts() == 0);             /* the worker's exit freed A's and C's contexts */
    CHECK(in_use(ar_a) == 0 && in_use(ar_c) == 0);
    epabi_threads_detach(&A);
    epabi_threads_detach(&C);                              /* the last: the key goes */
    epabi_arena_release(ar_a); epabi_arena_release(ar_b); epabi_arena_release(ar_c);
}

/* 2. a thread replays A without pause and captures each new EP D[i] as it appears, while the main thread
 * releases D[i-1] (and attaches D[i+1]): lock-free lookups and context additions on the worker's slot race
 * with releases emptying entries of that same slot */
enum { STRESS_EPS = 300 };
struct stress_test {
    struct epabi_thread_owner* a;
    struct epabi_thread_owner* d;          /* STRESS_EPS of them */
    atomic_int published, acked;       /* index of the newest attached D / the newest the worker captured */
    atomic_bool stop;
    atomic_long replays;
};
static void* stress_worker(void* p) {
    struct stress_test* t = p;
    struct fake_ro r7 = {"7"};
    float ia[4] = {1}, oa[4] = {0}, id[4] = {1}, od[4] = {0};
    struct add_args aa = {ia, oa, 4}, ad = {id, od, 4};
    CHECK(capture_once(t->a, &r7, 3000, &aa));
    int done = -1;
    float v = 0;
    while (!atomic_load(&t->stop)) {
        if (!replays_to(t->a, 7, ia, oa, ++v)) { CHECK(!"replay of A"); break; }
        atomic_fetch_add(&t->replays, 1);
        int pub = atomic_load(&t->published);
        if (pub > done) {
            CHECK(capture_once(&t->d[pub], &r7, 256u << (pub % 5), &ad));
            done = pub;
            atomic_store(&t->acked, pub);
        }
    }
    return NULL;
}

static void test_release_while_thread_runs(struct epabi_api* api) {
    printf("releases of EPs while a thread that used them runs another EP (%d EPs)\n", STRESS_EPS);
    struct epabi_arena *ar_a = epabi_arena_create(), *ar_d = epabi_arena_create();
    struct epabi_thread_owner A = {.api = api, .logger = (const OrtLogger*)1, .arena = ar_a, .graph_capture = true, .min_runs = 0, .fused_nodes = 1};
    struct epabi_thread_owner* D = calloc(STRESS_EPS, sizeof *D);
    CHECK(epabi_threads_attach(&A) == NULL);
    struct stress_test t = {.a = &A, .d = D};
    atomic_init(&t.published, -1); atomic_init(&t.acked, -1); atomic_init(&t.stop, false); atomic_init(&t.replays, 0);
    atomic_store(&g_quiet, true);
    pthread_t w;
    CHECK(pthread_create(&w, NULL, stress_worker, &t) == 0);
    for (int i = 0; i < STRESS_EPS; ++i) {
        while (atomic_load(&t.acked) < i - 1) sched_yield();   /* the worker is done with D[i-1] */
        D[i] = A;
        D[i].arena = ar_d;
        CHECK(epabi_threads_attach(&D[i]) == NULL);
        atomic_store(&t.published, i);
        if (i > 0) epabi_threads_detach(&D[i - 1]);                 /* while the worker captures D[i], replays A */
    }
    while (atomic_load(&t.acked) < STRESS_EPS - 1) sched_yield();
    epabi_threads_detach(&D[STRESS_EPS - 1]);
    CHECK(epabi_thread_live_contexts() == 1);                      /* the worker's A */
    CHECK(in_use(ar_d) == 0);                                  /* every D's pool went with its release */
    atomic_store(&t.stop, true);
    CHECK(pthread_join(w, NULL) == 0);
    atomic_store(&g_quiet, false);
    printf("  the worker replayed A %ld times meanwhile\n", atomic_load(&t.replays));
    CHECK(atomic_load(&t.replays) >= STRESS_EPS);
    CHECK(epabi_thread_live_contexts() == 0);
    epabi_threads_detach(&A);
    free(D);
    epabi_arena_release(ar_a); epabi_arena_release(ar_d);
}

/* 3. a thread exits (its key destructor runs) while the main thread releases the last EP (which frees every
 * slot and deletes the key): each slot is freed once, by one of them */
struct exit_test { struct epabi_thread_owner* e; atomic_int captured; };
static void* exit_worker(void* p) {
    struct exit_test* t = p;
    struct fake_ro r7 = {"7"};
    float i[4] = {1}, o[4] = {0};
    struct add_args a = {i, o, 4};
    CHECK(capture_once(t->e, &r7, 512, &a));
    atomic_fetch_add(&t->captured, 1);
    return NULL;   /* exits at once: its key destructor may run while E is released */
}

static void test_thread_exit_races_last_release(struct epabi_api* api) {
    printf("thread exits racing the last release\n");
    struct epabi_arena* ar = epabi_arena_create();
    atomic_store(&g_quiet, true);
    for (int k = 0; k < 100; ++k) {
        struct epabi_thread_owner E = {.api = api, .logger = (const OrtLogger*)1, .arena = ar, .graph_capture = true, .min_runs = 0, .fused_nodes = 1};
        CHECK(epabi_threads_attach(&E) == NULL);
        struct exit_test t = {.e = &E};
        atomic_init(&t.captured, 0);
        pthread_t w[2];
        for (int j = 0; j < 2; ++j) CHECK(pthread_create(&w[j], NULL, exit_worker, &t) == 0);
        while (atomic_load(&t.captured) < 2) sched_yield();   /* no call of E is in flight any more */
        if (k % 2 == 0) for (int j = 0; j < 2; ++j) CHECK(pthread_join(w[j], NULL) == 0);
        epabi_threads_detach(&E);   /* last EP: with k odd, the workers may be exiting right now */
        if (k % 2 == 1) for (int j = 0; j < 2; ++j) CHECK(pthread_join(w[j], NULL) == 0);
        CHECK(epabi_thread_live_contexts() == 0);
        CHECK(in_use(ar) == 0);
    }
    atomic_store(&g_quiet, false);
    epabi_arena_release(ar);
}

/* ---- the allocator-block registry ------------------------------------------------------------------------ */

struct fake_owner { struct epabi_alloc_owner base; int released; void* last; int gone; struct epabi_alloc_registry* r; };
static void fake_release(struct epabi_alloc_owner* o, void* p) { struct fake_owner* f = (struct fake_owner*)o; f->released++; f->last = p; }
/* gone may call the registry (an allocator drops its reference there): it runs outside the registry's lock */
static void fake_gone(struct epabi_alloc_owner* o) {
    struct fake_owner* f = (struct fake_owner*)o;
    size_t live = 0;
    epabi_alloc_registry_counts(f->r, &live, NULL);
    f->gone++;
}

static void test_alloc_registry(struct epabi_api* api, struct epabi_arena* arena) {
    struct epabi_alloc_registry* r = epabi_alloc_registry_create();
    CHECK(r != NULL);
    if (r == NULL) return;
    struct fake_owner f = {{fake_release, fake_gone, 0}, 0, NULL, 0, r};
    static char mem[8][256];
    size_t live = 0, held = 0;
    /* an unheld block is freed at once; a foreign pointer is unknown */
    CHECK(epabi_alloc_registry_add(r, &f.base, mem[0], 100));
    CHECK(epabi_alloc_registry_free(r, mem[0]) == EPABI_FREE_NOW);
    CHECK(epabi_alloc_registry_free(r, mem[0]) == EPABI_FREE_UNKNOWN);
    CHECK(epabi_alloc_registry_hold(r, mem[0], 1) == NULL);
    /* a hold on an interior range names the block; a range past its end holds nothing */
    CHECK(epabi_alloc_registry_add(r, &f.base, mem[1], 100));
    CHECK(epabi_alloc_registry_hold(r, mem[1] + 10, 20) == mem[1]);
    CHECK(epabi_alloc_registry_hold(r, mem[1] + 90, 20) == NULL);
    epabi_alloc_registry_counts(r, &live, &held);
    CHECK(live == 1 && held == 1);
    /* the host's Free of a held block is deferred (twice: ignored) until the hold goes */
    CHECK(epabi_alloc_registry_free(r, mem[1]) == EPABI_FREE_DEFERRED);
    CHECK(epabi_alloc_registry_free(r, mem[1]) == EPABI_FREE_DEFERRED && f.released == 0);
    CHECK(epabi_alloc_registry_hold(r, mem[1], 8) == NULL);   /* freed: no new capture may take it */
    epabi_alloc_registry_drop(r, mem[1]);
    CHECK(f.released == 1 && f.last == mem[1] && f.gone == 0);
    epabi_alloc_registry_counts(r, &live, &held);
    CHECK(live == 0 && held == 0);
    /* two holds: the block goes with the second drop */
    CHECK(epabi_alloc_registry_add(r, &f.base, mem[2], 64));
    CHECK(epabi_alloc_registry_hold(r, mem[2], 64) == mem[2] && epabi_alloc_registry_hold(r, mem[2], 4) == mem[2]);
    CHECK(epabi_alloc_registry_free(r, mem[2]) == EPABI_FREE_DEFERRED);
    epabi_alloc_registry_drop(r, mem[2]);
    CHECK(f.released == 1);
    epabi_alloc_registry_drop(r, mem[2]);
    CHECK(f.released == 2 && f.last == mem[2]);
    /* an allocator released while a graph holds its blocks: unheld ones are forgotten, the owner stays until the
     * last held one goes (freed first when the host had freed it) */
    CHECK(epabi_alloc_registry_add(r, &f.base, mem[3], 64) && epabi_alloc_registry_add(r, &f.base, mem[4], 64) &&
          epabi_alloc_registry_add(r, &f.base, mem[5], 64));
    CHECK(epabi_alloc_registry_hold(r, mem[4], 64) == mem[4] && epabi_alloc_registry_hold(r, mem[5], 64) == mem[5]);
    CHECK(epabi_alloc_registry_free(r, mem[5]) == EPABI_FREE_DEFERRED);
    CHECK(epabi_alloc_registry_detach(r, &f.base) == 2);
    CHECK(epabi_alloc_registry_free(r, mem[3]) == EPABI_FREE_UNKNOWN);
    epabi_alloc_registry_drop(r, mem[5]);
    CHECK(f.released == 3 && f.last == mem[5] && f.gone == 0);
    epabi_alloc_registry_drop(r, mem[4]);
    CHECK(f.released == 3 && f.gone == 1);
    /* growth: many blocks in and out */
    struct fake_owner g = {{fake_release, fake_gone, 0}, 0, NULL, 0, r};
    static char many[3000];
    for (int i = 0; i < 3000; ++i) CHECK(epabi_alloc_registry_add(r, &g.base, many + i, 1));
    CHECK(epabi_alloc_registry_hold(r, many + 2999, 1) == many + 2999);
    for (int i = 0; i < 3000; ++i)
        CHECK(epabi_alloc_registry_free(r, many + i) == (i == 2999 ? EPABI_FREE_DEFERRED : EPABI_FREE_NOW));
    epabi_alloc_registry_drop(r, many + 2999);
    epabi_alloc_registry_counts(r, &live, &held);
    CHECK(live == 0 && held == 0 && g.released == 1);

    /* a captured graph holds the host's block for its life: freed while the graph lives, released with it */
    struct epabi_stream* s = epabi_stream_host_create(api, false, 0);
    struct epabi_graph_manager* m = epabi_graph_manager_create(api, s, arena, r, 0);
    CHECK(epabi_alloc_registry_add(r, &g.base, mem[6], 128) && epabi_alloc_registry_add(r, &g.base, mem[7], 128));
    CHECK(!epabi_graph_manager_hold(m, mem[6], 8));   /* outside a capture window nothing is held */
    CHECK(epabi_graph_manager_capture_begin(m, 1) == NULL);
    CHECK(epabi_graph_manager_hold(m, mem[6] + 16, 64) && !epabi_graph_manager_hold(m, many, 1));
    CHECK(epabi_graph_manager_hold(m, mem[7], 128));
    epabi_graph_manager_capture_abort(m);   /* an aborted capture lets go at once */
    epabi_alloc_registry_counts(r, &live, &held);
    CHECK(live == 2 && held == 0);
    CHECK(epabi_graph_manager_capture_begin(m, 1) == NULL && epabi_graph_manager_hold(m, mem[6], 128));
    CHECK(epabi_graph_manager_capture_end(m, 1) == NULL);
    CHECK(epabi_alloc_registry_free(r, mem[6]) == EPABI_FREE_DEFERRED && g.released == 1);
    CHECK(epabi_alloc_registry_free(r, mem[7]) == EPABI_FREE_NOW);
    CHECK(epabi_graph_manager_release(m, 1) && g.released == 2 && g.last == mem[6]);
    epabi_graph_manager_destroy(m);
    epabi_stream_destroy(s);
    epabi_alloc_registry_release(r);
}

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
    CHECK(epabi_stream_launch(s, EPABI_LAUNCH_COPY, add_one, &a, sizeof a) == NULL);
    CHECK(out[3] == 5);   /* executed while capturing */
    CHECK(epabi_stream_end_capture(s, &sg) == NULL && epabi_stream_graph_launches(sg) == 1);
    in[3] = 10; a.out = NULL;  /* the recorded copy of args is what replays */
    CHECK(epabi_stream_replay(s, sg, true) == NULL && out[3] == 11);
    expect(epabi_stream_replay(s2, sg, true), ORT_INVALID_ARGUMENT, "captured it");
    epabi_stream_graph_destroy(sg);

    /* errors found by a launch in a replay fail that replay's synchronize, naming the node; then the word is clear */
    static const struct epabi_error_site site = {"g1", "Gather", "fused"};
    float val[1] = {1};
    struct checked_args ca = {val, s->error_word, (uint64_t)(uintptr_t)&site | EPABI_LAUNCH_ERR_INDEX};
    CHECK(epabi_stream_begin_capture(s) == NULL);
    CHECK(epabi_stream_launch(s, EPABI_LAUNCH_GATHER, check_sign, &ca, sizeof ca) == NULL);
    CHECK(epabi_stream_end_capture(s, &sg) == NULL);
    CHECK(epabi_stream_replay(s, sg, true) == NULL);
    val[0] = -1;
    expect(epabi_stream_replay(s, sg, true), ORT_INVALID_ARGUMENT,
           "node 'g1' (Gather) in 'fused': an index is out of range (found by the kernel while replaying");
    CHECK(epabi_stream_synchronize(s) == NULL);   /* reported once */
    val[0] = 2;
    CHECK(epabi_stream_replay(s, sg, true) == NULL);
    epabi_stream_graph_destroy(sg);

    /* manager: counting, allowed, nested, duplicate, missing, abort leaves nothing */
    struct epabi_graph_manager* m = epabi_graph_manager_create(&api, s, arena, NULL, 2);
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
    CHECK(epabi_stream_launch(s, EPABI_LAUNCH_COPY, add_one, &a, sizeof a) == NULL);
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
    struct epabi_graph* g1 = calloc(1, 256), *g2 = calloc(1, 256);   /* opaque here; only stored */
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
        int v = epabi_capture_annotation_id(&api, (const OrtRunOptions*)1);
        if (v != atoi(ids[i][1])) { printf("FAIL id '%s' -> %d\n", ids[i][0], v); failures++; }
    }
    g_gid = NULL;
    CHECK(epabi_capture_annotation_id(&api, (const OrtRunOptions*)1) == 0 && epabi_capture_annotation_id(&api, NULL) == 0);

    /* owner level: nested OnRunStart, failed capture, attach/detach */
    struct epabi_thread_owner o = {.api = &api, .logger = (const OrtLogger*)1, .arena = arena, .user_stream_given = true, .user_stream = 0x1234,
                                    .graph_capture = true, .min_runs = 0, .fused_nodes = 1};
    CHECK(epabi_threads_attach(&o) == NULL && o.serial != 0);
    g_gid = "3";
    CHECK(epabi_capture_run_start(&o, (const OrtRunOptions*)1) == NULL);   /* min 0: captures */
    CHECK(strstr(g_last, "capturing graph of annotation id 3") != NULL);
    expect(epabi_capture_run_start(&o, (const OrtRunOptions*)1), ORT_FAIL, "do not nest");
    CHECK(!epabi_capture_is_captured(&o, 3));
    CHECK(epabi_capture_run_start(&o, (const OrtRunOptions*)1) == NULL);   /* clean again: captures */
    struct epabi_thread_context* tc = epabi_thread_find(&o);
    struct epabi_run_env env; epabi_thread_run_env(&o, tc, &env);
    CHECK(env.stream != NULL && env.capture_pool != NULL);
    epabi_capture_note_compute(tc, false, 1);                                 /* a fused node failed */
    CHECK(epabi_capture_run_end(&o, (const OrtRunOptions*)1, true) == NULL);
    CHECK(strstr(g_last, "failed") != NULL && !epabi_capture_is_captured(&o, 3));
    CHECK(epabi_capture_run_start(&o, (const OrtRunOptions*)1) == NULL);
    epabi_capture_note_compute(tc, true, 1);
    CHECK(epabi_capture_run_end(&o, (const OrtRunOptions*)1, true) == NULL && epabi_capture_is_captured(&o, 3));
    /* the host stream executed the launches while recording: no replay right after capture (state bound as an
     * input and an output would advance twice in one run) */
    CHECK(epabi_graph_manager_replays(tc->graphs, 3) == 0 && strstr(g_last, "right after capture") == NULL);
    /* a capture that recorded fewer fused nodes than the EP compiled (parallel execution) is refused */
    g_gid = "4";
    CHECK(epabi_capture_run_start(&o, (const OrtRunOptions*)1) == NULL);
    expect(epabi_capture_run_end(&o, (const OrtRunOptions*)1, true), ORT_FAIL, "sequential execution");
    CHECK(!epabi_capture_is_captured(&o, 4));
    g_gid = "3";
    CHECK(epabi_capture_replay(&o, 3) == NULL && strstr(g_last, "ReplayGraph replayed annotation id 3 (replay 1") != NULL);
    expect(epabi_capture_replay(&o, 4), ORT_INVALID_ARGUMENT, "annotation id 4");
    epabi_threads_detach(&o);
    CHECK(o.serial == 0 && epabi_thread_find(&o) == NULL);

    test_alloc_registry(&api, arena);
    test_release_frees_idle_threads(&api);
    test_release_while_thread_runs(&api);
    test_thread_exit_races_last_release(&api);

    epabi_stream_destroy(s); epabi_stream_destroy(s2);
    struct epabi_arena_stats st1; epabi_arena_get_stats(arena, &st1);
    CHECK(st1.bytes_in_use == 0);
    epabi_arena_release(arena);
    int failed = atomic_load(&failures);
    printf(failed ? "FAILURES: %d\n" : "all unit checks passed\n", failed);
    return failed != 0;
}
