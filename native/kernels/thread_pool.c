/*
 * thread_pool.c - see thread_pool.h. A loop's tasks are cut into one contiguous share per thread, and each share is
 * claimed from its own atomic word holding the loop's generation and the share's next task index, so a thread
 * claims only tasks of the loop whose function it read. A thread takes its own share first (thread s the s-th), then
 * helps with the others': loops over the same data in the same order (a model's layers over one image) give each
 * thread the same part of it every time, which stays in that core's L2 (with one shared counter, a 3x3 conv over a
 * 128x128 image ran slower on two threads than on one, its tiles' inputs pulled from the other core). A loop is over
 * when its tasks are done, not when every worker has checked in: on a busy machine a worker that is not scheduled in
 * time just finds its share taken, and the caller does not wait for it. Workers (and the caller at the end of its loop)
 * spin briefly before they sleep, as ONNX Runtime's pool does by default, because one run issues its launches back
 * to back.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* sched_getaffinity, CPU_*, pthread_setname_np */
#endif
#include "thread_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Polling before a thread sleeps: SPIN_ROUNDS pauses (about 20-50 us; 0.2 ms where a pause takes 140 cycles) after a
 * loop, up to RUN_SPIN_ROUNDS while a run is open (epabi_pool_run_begin). A worker woken from sleep starts late: on
 * the 2-core VM measured, the first Conv of a small CNN (180 us) gained nothing from a second thread that slept
 * between runs, its tasks taken by the caller before the worker ran. ONNX Runtime's pool spins through a whole
 * Run for the same reason (ThreadPoolSpinningSwitch around InferenceSession::Run). */
enum { SPIN_ROUNDS = 4000, RUN_SPIN_ROUNDS = 50 * SPIN_ROUNDS };

struct epabi_pool {
    int threads;
    pthread_mutex_t busy;          /* held by the thread whose loop is running */
    pthread_mutex_t lock;          /* guards the fields below but the atomics */
    pthread_cond_t wake, finished;
    bool tried_start;              /* workers are started once, at the first parallel loop */
    int started;                   /* workers running */
    bool stop;
    epabi_pool_task fn;            /* the current loop */
    void* ctx;
    int64_t n_tasks;
    _Atomic uint32_t generation;       /* bumped per loop; workers wait for it to change */
    atomic_int open_runs;              /* runs between epabi_pool_run_begin and _end: workers spin longer */
    _Atomic uint32_t wakes;            /* bumped (under lock) by each run_begin that opens the first run */
    int sleepers;                      /* workers waiting on `wake` (under lock) */
    struct share *shares;              /* one per thread, each on its own cache line */
    atomic_int_fast64_t done;          /* tasks of the current loop finished */
    atomic_bool stopping;
    struct worker {
        struct epabi_pool* pool;
        int slot;
        pthread_t thread;
    } workers[];
};

/* Thread s's share of a loop of n tasks: [s * n / threads, (s + 1) * n / threads), bounds every thread computes from
 * the n of the loop it read (nothing shared but the claim word, so a thread still in the previous loop cannot read
 * the next loop's bounds). */
struct share {
    _Alignas(64) atomic_uint_fast64_t claim;   /* generation << 32 | next task index of the share */
    char pad_[64 - sizeof(atomic_uint_fast64_t)];
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Claims and runs tasks of loop `gen` (n tasks) until none is left, its own share first; returns how many it ran. */
static int64_t run_tasks(struct epabi_pool* p, uint32_t gen, epabi_pool_task fn, void* ctx, int64_t n, int slot) {
    int64_t ran = 0;
    for (int k = 0; k < p->threads; ++k) {
        const int r = (slot + k) % p->threads;
        struct share* sh = &p->shares[r];
        const int64_t end = (int64_t)(r + 1) * n / p->threads;
        uint_fast64_t c = atomic_load(&sh->claim);
        for (;;) {
            if ((uint32_t)(c >> 32) != gen || (int64_t)(c & 0xFFFFFFFFu) >= end) break;
            if (!atomic_compare_exchange_weak(&sh->claim, &c, c + 1)) continue;   /* c holds the current word */
            fn(ctx, (int64_t)(c & 0xFFFFFFFFu), slot);
            ++ran;
            if (atomic_fetch_add(&p->done, 1) + 1 == n) {   /* the loop's last task: wake its caller */
                pthread_mutex_lock(&p->lock);
                pthread_cond_signal(&p->finished);
                pthread_mutex_unlock(&p->lock);
            }
            c = atomic_load(&sh->claim);
        }
    }
    return ran;
}

static void* worker_main(void* arg) {
    struct worker* w = arg;
    struct epabi_pool* p = w->pool;
#ifdef __linux__
    pthread_setname_np(pthread_self(), "epabi-pool");   /* tells our workers from the host's in top and /proc */
#endif
    uint32_t seen = 0;   /* workers start before the first loop is published (generation 0) */
    for (;;) {
        /* a run_begin after this read keeps the worker from sleeping below: it spins again for that run */
        const uint32_t wakes = atomic_load(&p->wakes);
        for (int i = 0; atomic_load(&p->generation) == seen && !atomic_load(&p->stopping); ++i) {
            if (i >= SPIN_ROUNDS && (i >= RUN_SPIN_ROUNDS || atomic_load(&p->open_runs) == 0)) break;
            cpu_relax();
        }
        pthread_mutex_lock(&p->lock);
        while (atomic_load(&p->generation) == seen && !p->stop && atomic_load(&p->wakes) == wakes) {
            p->sleepers++;
            pthread_cond_wait(&p->wake, &p->lock);
            p->sleepers--;
        }
        if (p->stop) {
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        if (atomic_load(&p->generation) == seen) {   /* woken for a run, not a loop: spin through it */
            pthread_mutex_unlock(&p->lock);
            continue;
        }
        seen = atomic_load(&p->generation);
        epabi_pool_task fn = p->fn;
        void* ctx = p->ctx;
        int64_t n = p->n_tasks;
        pthread_mutex_unlock(&p->lock);
        run_tasks(p, seen, fn, ctx, n, w->slot);
    }
}

/* Caller holds p->lock. */
static void start_workers(struct epabi_pool* p) {
    p->tried_start = true;
    for (int i = 0; i < p->threads - 1; ++i) {
        struct worker* w = &p->workers[p->started];
        w->pool = p;
        w->slot = p->started + 1;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) break;   /* the others share its tasks */
        p->started++;
    }
}

int epabi_pool_default_threads(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int count = online > 0 ? (int)online : 1;
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) {
        count = CPU_COUNT(&set);
        /* one thread per physical core: CPUs sharing a (package, core) pair are hyperthreads of one core */
        enum { MAX_CPUS = 1024 };
        static const int kUnknown = -1;
        long seen[MAX_CPUS];
        int cores = 0;
        for (int cpu = 0; cpu < CPU_SETSIZE && cpu < MAX_CPUS && cores >= 0; ++cpu) {
            if (!CPU_ISSET(cpu, &set)) continue;
            long ids[2] = {kUnknown, kUnknown};
            static const char* const kFiles[] = {"physical_package_id", "core_id"};
            for (int f = 0; f < 2; ++f) {
                char path[96];
                snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, kFiles[f]);
                FILE* fp = fopen(path, "r");
                if (fp == NULL) continue;
                if (fscanf(fp, "%ld", &ids[f]) != 1) ids[f] = kUnknown;
                fclose(fp);
            }
            if (ids[0] < 0 || ids[1] < 0 || ids[0] > 0xFFFF || ids[1] > 0xFFFFFF) {
                cores = -1;   /* topology unknown: one thread per CPU of the mask */
                break;
            }
            long key = ids[0] << 24 | ids[1];
            bool dup = false;
            for (int i = 0; i < cores && !dup; ++i) dup = seen[i] == key;
            if (!dup) seen[cores++] = key;
        }
        if (cores > 0) count = cores;
    }
#endif
    return count < 1 ? 1 : count > EPABI_POOL_MAX_THREADS ? EPABI_POOL_MAX_THREADS : count;
}

struct epabi_pool* epabi_pool_create(int threads) {
    if (threads < 1) threads = 1;
    if (threads > EPABI_POOL_MAX_THREADS) threads = EPABI_POOL_MAX_THREADS;
    struct epabi_pool* p = calloc(1, sizeof *p + (size_t)(threads - 1) * sizeof p->workers[0]);
    if (p == NULL) return NULL;
    p->shares = aligned_alloc(64, (size_t)threads * sizeof *p->shares);
    if (p->shares == NULL) {
        free(p);
        return NULL;
    }
    for (int i = 0; i < threads; ++i) atomic_init(&p->shares[i].claim, 0);
    p->threads = threads;
    pthread_mutex_init(&p->busy, NULL);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->finished, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->stopping, false);
    atomic_init(&p->open_runs, 0);
    atomic_init(&p->wakes, 0);
    return p;
}

void epabi_pool_destroy(struct epabi_pool* p) {
    if (p == NULL) return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    atomic_store(&p->stopping, true);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->started; ++i) pthread_join(p->workers[i].thread, NULL);
    pthread_cond_destroy(&p->finished);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->busy);
    free(p->shares);
    free(p);
}

int epabi_pool_threads(const struct epabi_pool* p) {
    return p != NULL ? p->threads : 1;
}

void epabi_pool_for(struct epabi_pool* p, int64_t n_tasks, epabi_pool_task fn, void* ctx) {
    if (n_tasks <= 0) return;
    if (p == NULL || p->threads <= 1 || n_tasks == 1 || n_tasks > 0xFFFFFFFF ||
        pthread_mutex_trylock(&p->busy) != 0) {
        for (int64_t i = 0; i < n_tasks; ++i) fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->lock);
    if (!p->tried_start) start_workers(p);
    uint32_t gen = atomic_load(&p->generation) + 1;
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->done, 0);
    for (int i = 0; i < p->threads; ++i)
        atomic_store(&p->shares[i].claim, (uint_fast64_t)gen << 32 | (uint_fast64_t)((int64_t)i * n_tasks / p->threads));
    atomic_store(&p->generation, gen);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);

    run_tasks(p, gen, fn, ctx, n_tasks, 0);
    for (int i = 0; i < SPIN_ROUNDS && atomic_load(&p->done) < n_tasks; ++i) cpu_relax();
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->done) < n_tasks) pthread_cond_wait(&p->finished, &p->lock);
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_unlock(&p->busy);
}

void epabi_pool_run_begin(struct epabi_pool* p) {
    if (p == NULL || p->threads <= 1) return;
    if (atomic_fetch_add(&p->open_runs, 1) != 0) return;   /* the first open run wakes them; the others find them up */
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add(&p->wakes, 1);   /* also stops a worker on its way to sleep from sleeping */
    if (p->sleepers > 0) pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
}

void epabi_pool_run_end(struct epabi_pool* p) {
    if (p == NULL || p->threads <= 1) return;
    atomic_fetch_sub(&p->open_runs, 1);
}

struct range_loop {
    epabi_pool_range_fn fn;
    void* ctx;
    int64_t n, chunk;
};

static void range_task(void* ctx, int64_t task, int slot) {
    (void)slot;
    const struct range_loop* r = ctx;
    int64_t begin = task * r->chunk;
    int64_t end = begin + r->chunk < r->n ? begin + r->chunk : r->n;
    if (begin < end) r->fn(r->ctx, begin, end);
}

void epabi_pool_for_range(struct epabi_pool* pool, int64_t n, int64_t grain, epabi_pool_range_fn fn, void* ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t threads = epabi_pool_threads(pool);
    int64_t chunks = n / grain;
    if (chunks > 4 * threads) chunks = 4 * threads;
    if (threads <= 1 || chunks < 2) {
        fn(ctx, 0, n);
        return;
    }
    int64_t chunk = (n + chunks - 1) / chunks;
    if (chunk >= 32) chunk = (chunk + 15) / 16 * 16;
    struct range_loop r = {fn, ctx, n, chunk};
    epabi_pool_for(pool, (n + chunk - 1) / chunk, range_task, &r);
}
