/*
 * ep_allocator.h - the OrtAllocator the factory hands out for the software device's DEFAULT memory: a thin
 * table over the shared host-memory arena (arena.h).
 *
 * Ownership: created by OrtEpFactory::CreateAllocator, freed by OrtEpFactory::ReleaseAllocator; each
 * allocator holds one arena reference. The memory info is the factory's and outlives the allocator.
 * Thread-safety: all members may be called concurrently (the arena locks).
 */
#ifndef EPABI_EP_ALLOCATOR_H
#define EPABI_EP_ALLOCATOR_H

#include "api.h"
#include "arena.h"

/* Fills the members the negotiated API version allows (Reserve >= 18, GetStats >= 23, Shrink >= 25).
 * ORT_FAIL when out of memory. */
OrtStatus* epabi_allocator_create(const struct epabi_api* api, struct epabi_arena* arena, const OrtMemoryInfo* info,
                                  OrtAllocator** out);

/* True when allocator was made by epabi_allocator_create. */
bool epabi_allocator_is_ours(const OrtAllocator* allocator);

void epabi_allocator_destroy(OrtAllocator* allocator);

#endif
