/*
 * ep_allocator.h - the one OrtAllocator filler: every allocator the factory hands out (OrtEpFactory::
 * CreateAllocator) is this table over a small operations table of the memory's backend (SQLite's io_methods
 * are the model): the software adapter's arena, CUDA device memory, pinned host memory.
 *
 * Version claim: the negotiated API version, never above what the host speaks; Reserve (API 18), GetStats
 * (23) and Shrink (25) are filled when the version allows them and the operations offer them; AllocOnStream
 * stays NULL (the host then uses Alloc).
 *
 * Ownership: created by CreateAllocator, freed by ReleaseAllocator, which closes the operations' context.
 * The memory info is the factory's and outlives the allocator. Thread-safety: every member may be called
 * concurrently; the operations must allow that.
 */
#ifndef EPABI_EP_ALLOCATOR_H
#define EPABI_EP_ALLOCATOR_H

#include <stdbool.h>

#include "api.h"
#include "arena.h"

struct epabi_alloc_ops {
    void* (*alloc)(void* ctx, size_t bytes);                          /* NULL when out of memory */
    void (*free)(void* ctx, void* p);                                 /* NULL p is ignored */
    void (*stats)(void* ctx, struct epabi_arena_stats* out);          /* NULL: no GetStats */
    void (*shrink)(void* ctx);                                        /* NULL: no Shrink */
    void (*close)(void* ctx);                                         /* with the allocator; NULL: nothing */
};

/* ORT_FAIL when out of memory (ctx is then closed too). blocks (may be NULL: untracked): the registry every block
 * handed out is recorded in, so that captured graphs can hold them (alloc_registry.h); a Free of a held block is
 * deferred until the last graph holding it goes, and the allocator (with ctx) outlives ReleaseAllocator until
 * then. */
struct epabi_alloc_registry;
OrtStatus* epabi_allocator_create(const struct epabi_api* api, const OrtMemoryInfo* info,
                                  const struct epabi_alloc_ops* ops, void* ctx, struct epabi_alloc_registry* blocks,
                                  OrtAllocator** out);

/* True when allocator was made by epabi_allocator_create. */
bool epabi_allocator_is_ours(const OrtAllocator* allocator);

void epabi_allocator_destroy(OrtAllocator* allocator);

#endif
