/*
 * arena.h - memory arena: power-of-two size classes, each with a free list of chunks that are reused
 * across runs; chunks go back to the system only at Shrink or when the last reference is dropped.
 *
 * Backing. epabi_arena_create serves host memory (chunk header and block in one allocation). An arena made
 * with epabi_arena_create_backed takes its chunks from a backing (the CUDA backend: cuMemAlloc/cuMemFree),
 * whose memory the arena never touches: headers are kept apart and found through a hash of the block
 * address.
 *
 * Stream-aware reuse (for backings whose memory is used by asynchronous streams). A block freed with
 * epabi_arena_free_on(a, p, stream) stays linked to that stream: work queued there may still use it, so only
 * allocations on the same stream (epabi_arena_alloc_on) or with no stream reuse it, until
 * epabi_arena_stream_synced(a, stream) says the stream has drained and clears those links (the EP calls it
 * at run end after synchronizing). Without streams (NULL) the arena behaves as before.
 *
 * Ownership: refcounted. epabi_arena_create returns one reference; every holder (the factory, each
 * allocator handed to the host, each compiled plan) takes its own with epabi_arena_retain and drops it with
 * epabi_arena_release; the last release frees every chunk. Thread-safety: all entry points lock the
 * arena's mutex, so one arena serves concurrent runs and the host's allocator calls at once.
 */
#ifndef EPABI_ARENA_H
#define EPABI_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { EPABI_ARENA_ALIGNMENT = 64 };   /* every pointer handed out is 64-byte aligned */

struct epabi_arena;

struct epabi_arena_stats {
    uint64_t bytes_reserved;   /* bytes of all chunks obtained from the system and not yet returned */
    uint64_t bytes_in_use;     /* bytes of the chunks currently handed out (chunk sizes, not request sizes) */
    uint64_t max_bytes_in_use; /* high-water mark of bytes_in_use */
    uint64_t num_allocs;       /* successful epabi_arena_alloc calls */
    uint64_t num_reserves;     /* chunks obtained from the system */
    uint64_t num_shrinks;      /* epabi_arena_shrink calls that returned memory */
    uint64_t max_alloc_size;   /* largest request */
};

/* NULL on allocation failure. */
struct epabi_arena* epabi_arena_create(void);

/* Where a backed arena's chunks come from. reserve returns NULL when out of memory; release gets what
 * reserve returned. Called under the arena's lock. */
struct epabi_arena_backing {
    void* (*reserve)(void* ctx, size_t bytes);
    void (*release)(void* ctx, void* p);
    void* ctx;
};
/* NULL on allocation failure. The backing is copied. */
struct epabi_arena* epabi_arena_create_backed(const struct epabi_arena_backing* backing);

/* The stream-aware forms (see above); stream is an opaque key, NULL = none. */
void* epabi_arena_alloc_on(struct epabi_arena* a, size_t bytes, const void* stream);
void epabi_arena_free_on(struct epabi_arena* a, void* p, const void* stream);
void epabi_arena_stream_synced(struct epabi_arena* a, const void* stream);
void epabi_arena_retain(struct epabi_arena* a);
void epabi_arena_release(struct epabi_arena* a);

/* A 64-byte aligned block of at least `bytes` bytes (0 is allowed and yields a valid, unique block);
 * NULL when the system is out of memory or bytes is absurdly large. */
void* epabi_arena_alloc(struct epabi_arena* a, size_t bytes);
/* NULL is ignored; a pointer this arena did not hand out, or one freed twice, is ignored too, and so is a
 * block a capture pool holds (see below). */
void epabi_arena_free(struct epabi_arena* a, void* p);
/* True when [p, p + bytes) lies inside one block this arena handed out and has not taken back (interior
 * pointers included: hosts subdivide blocks, e.g. ORT's memory patterns). For checks, not hot paths: a
 * pointer that is not a block's start costs a walk over every chunk. */
bool epabi_arena_owns(struct epabi_arena* a, const void* p, size_t bytes);
/* Returns every free chunk to the system. */
void epabi_arena_shrink(struct epabi_arena* a);
void epabi_arena_get_stats(struct epabi_arena* a, struct epabi_arena_stats* out);

/*
 * Capture pools: private memory for one captured graph (like PyTorch's graph memory pool).
 *
 * A pool hands out blocks of its arena, but a block freed to the pool goes on the pool's own free lists,
 * where only later allocations from the same pool find it; nothing goes back to the arena until the pool is
 * destroyed. A capturing run therefore reuses memory inside itself exactly as a regular run reuses arena
 * memory (same size classes, same last-in-first-out order), so a warmed-up arena serves a capture without
 * reserving new chunks, while no other run can ever receive a block the captured launches still point at.
 *
 * Ownership: a pool holds one arena reference; epabi_arena_pool_destroy returns every block it ever took
 * (handed out or free) to the arena and drops the reference. Thread-safety: a pool belongs to one thread at
 * a time (the capturing thread, then whoever destroys its graph); the arena calls inside lock the arena.
 */
struct epabi_arena_pool;

struct epabi_arena_pool_stats {
    uint64_t blocks;           /* blocks the pool took from the arena (and still holds) */
    uint64_t bytes;            /* their chunk bytes */
};

/* NULL when out of memory. */
struct epabi_arena_pool* epabi_arena_pool_create(struct epabi_arena* a);
/* A block from the pool's free list of that size class, else from the arena. NULL like epabi_arena_alloc. */
void* epabi_arena_pool_alloc(struct epabi_arena_pool* pool, size_t bytes);
/* Back to the pool (not the arena). NULL, foreign pointers and double frees are ignored. */
void epabi_arena_pool_free(struct epabi_arena_pool* pool, void* p);
void epabi_arena_pool_get_stats(const struct epabi_arena_pool* pool, struct epabi_arena_pool_stats* out);
/* NULL is ignored. */
void epabi_arena_pool_destroy(struct epabi_arena_pool* pool);

#endif
