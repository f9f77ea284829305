/*
 * pool_stress.c - native/kernels/thread_pool.c alone, built by tests/test_kernel_harness.py under ThreadSanitizer
 * where it runs (plain otherwise): three threads each start 300 loops of 1 to 50 tasks on one pool of 4, so loops
 * meet a busy pool, late workers and back-to-back generations; runs (epabi_pool_run_begin/_end) open and close
 * around some loops on each thread, overlapping and nested, with pauses long enough for the workers to fall asleep
 * and be woken by a run. Every task must run exactly once, on a slot below the pool's thread count; exit status 0
 * and "ok" when they all did.
 */
#define _POSIX_C_SOURCE 200809L   /* nanosleep under -std=c11 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "thread_pool.h"

struct job {
    atomic_long sum;
    int* hits;        /* per task: a task run twice, or by two threads at once, shows here (and to TSan) */
    atomic_int bad_slot;
    int threads;
};

static void task(void* ctx, int64_t i, int slot) {
    struct job* j = ctx;
    j->hits[i]++;
    if (slot < 0 || slot >= j->threads) atomic_store(&j->bad_slot, 1);
    atomic_fetch_add(&j->sum, (long)i);
}

static struct epabi_pool* g_pool;

static void* caller(void* arg) {
    long id = (long)arg;
    for (int r = 0; r < 300; ++r) {
        int n = 1 + (r * 7 + (int)id) % 50;
        const int runs = (r + (int)id) % 4 == 0 ? 2 : (r + (int)id) % 4 == 1 ? 1 : 0;   /* nested, single, none */
        for (int k = 0; k < runs; ++k) epabi_pool_run_begin(g_pool);
        if (r % 60 == (int)id) {   /* idle past the workers' polling, so that a run or a loop must wake them */
            struct timespec pause = {0, 5 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
        struct job j = {.threads = epabi_pool_threads(g_pool)};
        j.hits = calloc((size_t)n, sizeof(int));
        if (j.hits == NULL) abort();
        epabi_pool_for(g_pool, n, task, &j);
        for (int i = 0; i < n; ++i) {
            if (j.hits[i] != 1) {
                printf("caller %ld loop %d: task %d ran %d times\n", id, r, i, j.hits[i]);
                exit(1);
            }
        }
        if (atomic_load(&j.sum) != (long)n * (n - 1) / 2 || atomic_load(&j.bad_slot)) {
            printf("caller %ld loop %d: wrong sum or slot\n", id, r);
            exit(1);
        }
        free(j.hits);
        for (int k = 0; k < runs; ++k) epabi_pool_run_end(g_pool);
    }
    return NULL;
}

int main(void) {
    g_pool = epabi_pool_create(4);
    if (g_pool == NULL) return 2;
    pthread_t t[3];
    for (long i = 0; i < 3; ++i) pthread_create(&t[i], NULL, caller, (void*)i);
    for (int i = 0; i < 3; ++i) pthread_join(t[i], NULL);
    epabi_pool_destroy(g_pool);
    int threads = epabi_pool_default_threads();
    printf("ok %d\n", threads);
    return threads >= 1 ? 0 : 3;
}
