/*
 * arena.h - host-memory arena: power-of-two size classes, each with a free list of chunks that are reused
 * across runs; chunks go back to the system only at Shrink or when the last reference is dropped.
 *
 * Ownership: refcounted. epabi_arena_create returns one reference; every holder (the factory, each
 * allocator handed to the host, each compiled plan) takes its own with epabi_arena_retain and drops it with
 * epabi_arena_release; the last release frees every chunk. Thread-safety: all entry points lock the
 * arena's mutex, so one arena serves concurrent runs and the host's allocator calls at once.
 */
#ifndef EPABI_ARENA_H
#define EPABI_ARENA_H

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
void epabi_arena_retain(struct epabi_arena* a);
void epabi_arena_release(struct epabi_arena* a);

/* A 64-byte aligned block of at least `bytes` bytes (0 is allowed and yields a valid, unique block);
 * NULL when the system is out of memory or bytes is absurdly large. */
void* epabi_arena_alloc(struct epabi_arena* a, size_t bytes);
/* NULL is ignored; a pointer this arena did not hand out, or one freed twice, is ignored too. */
void epabi_arena_free(struct epabi_arena* a, void* p);
/* Returns every free chunk to the system. */
void epabi_arena_shrink(struct epabi_arena* a);
void epabi_arena_get_stats(struct epabi_arena* a, struct epabi_arena_stats* out);

#endif
