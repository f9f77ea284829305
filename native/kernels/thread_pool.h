/*
 * thread_pool.h - the intra-op thread pool of one EP (its intra_op_num_threads option, options.h): MatMul, Gemm
 * and Conv spread the work of one launch over it.
 *
 * A pool of T threads is the calling thread plus T - 1 workers, which start at the first parallel loop (an EP that
 * never runs such a loop never starts them). A pool runs one loop at a time: a loop that finds the pool busy (a
 * concurrent run of the same session, or a loop started from inside a task) runs all its tasks on the calling
 * thread, so work is neither lost nor deadlocked, only not spread.
 *
 * Ownership: epabi_pool_create's pool is the caller's, released with epabi_pool_destroy once no loop is in flight.
 * Thread-safety: epabi_pool_for and epabi_pool_threads may be called from any thread at any time.
 */
#ifndef EPABI_THREAD_POOL_H
#define EPABI_THREAD_POOL_H

#include <stdint.h>

enum { EPABI_POOL_MAX_THREADS = 256 };

struct epabi_pool;

/* The default thread count, as ONNX Runtime's CPU EP picks it: the physical cores this process may run on
 * (distinct core ids among the CPUs of its affinity mask; the mask's CPU count where the topology is unknown),
 * in [1, EPABI_POOL_MAX_THREADS]. */
int epabi_pool_default_threads(void);

/* A pool of `threads` threads in all (clamped to [1, EPABI_POOL_MAX_THREADS]); NULL when out of memory. */
struct epabi_pool* epabi_pool_create(int threads);

/* Stops and joins the workers and frees the pool. NULL is ignored. */
void epabi_pool_destroy(struct epabi_pool* pool);

/* The pool's thread count (1 for NULL): the number of distinct `slot` values a loop's tasks may see. */
int epabi_pool_threads(const struct epabi_pool* pool);

/* One task of a loop: `slot` in [0, epabi_pool_threads) names the thread running it, so a task can use
 * per-thread scratch; no two tasks of one loop run at once with the same slot. */
typedef void (*epabi_pool_task)(void* ctx, int64_t task, int slot);

/* Runs fn(ctx, i, slot) for every i in [0, n_tasks) and returns when all have finished, spread over the pool's
 * threads (the caller takes part as slot 0). Thread s takes the s-th contiguous share of the tasks first, in order,
 * then helps with the others' (so loops cutting the same data the same way hand each thread the same part, still
 * in its core's cache). Runs them in order on the caller (slot 0) for a NULL pool, a single task or a busy pool; a
 * worker that cannot be started or scheduled leaves its share to the others. */
void epabi_pool_for(struct epabi_pool* pool, int64_t n_tasks, epabi_pool_task fn, void* ctx);

/* A run's bounds (a fused node's Compute): between them the pool's idle workers keep polling for the next loop
 * (up to a few ms each time, then they sleep) instead of sleeping after ~50 us, and run_begin wakes sleeping
 * workers so that they are up by the run's first loop. Workers that were never started stay unstarted. Calls
 * pair up, may nest and may come from several threads at once (the pool counts open runs); NULL is ignored. */
void epabi_pool_run_begin(struct epabi_pool* pool);
void epabi_pool_run_end(struct epabi_pool* pool);

/* One chunk [begin, end) of a range loop. */
typedef void (*epabi_pool_range_fn)(void* ctx, int64_t begin, int64_t end);

/* Runs fn over [0, n) cut into consecutive chunks of at least `grain` items (chunks of 32 or more cut on multiples
 * of 16, so that vector loops over float chunks start aligned as the data is), as tasks of epabi_pool_for: up to four per thread,
 * so a thread that the machine delays leaves its share to the others. One chunk on the caller when n < 2 * grain
 * or the pool is NULL or single-threaded. grain < 1 counts as 1. */
void epabi_pool_for_range(struct epabi_pool* pool, int64_t n, int64_t grain, epabi_pool_range_fn fn, void* ctx);

#endif
