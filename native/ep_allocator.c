/*
 * ep_allocator.c - see ep_allocator.h.
 */
#include "ep_allocator.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc_registry.h"
#include "ep_factory.h"

static const uint64_t kMagic = 0x4550414249414c43ull;   /* "EPABIALC" */

struct epabi_allocator {
    OrtAllocator base;                 /* first member: the host's OrtAllocator* is a struct epabi_allocator* */
    uint64_t magic;
    const struct epabi_api* api;       /* the factory's; outlives the allocator */
    const OrtMemoryInfo* info;
    const struct epabi_alloc_ops* ops;
    void* ctx;
    struct epabi_alloc_registry* blocks;   /* one reference; NULL: blocks are not tracked */
    struct epabi_alloc_owner owner;        /* how the registry releases deferred frees */
};

/* The operations' context goes, and the allocator with it: at ReleaseAllocator, or once the last block graphs held
 * is let go (alloc_registry.h). */
static void allocator_close(struct epabi_allocator* a) {
    if (a->ops->close != NULL) a->ops->close(a->ctx);
    epabi_alloc_registry_release(a->blocks);
    a->magic = 0;
    free(a);
}

static struct epabi_allocator* of_owner(struct epabi_alloc_owner* o) {
    return (struct epabi_allocator*)((unsigned char*)o - offsetof(struct epabi_allocator, owner));
}

static void owner_release(struct epabi_alloc_owner* o, void* p) {
    struct epabi_allocator* a = of_owner(o);
    a->ops->free(a->ctx, p);
}

static void owner_gone(struct epabi_alloc_owner* o) {
    allocator_close(of_owner(o));
}

static struct epabi_allocator* alloc_of(const OrtAllocator* p) {
    return (struct epabi_allocator*)p;
}

static void* AllocImpl(OrtAllocator* this_, size_t size) {
    struct epabi_allocator* a = alloc_of(this_);
    void* p = a->ops->alloc(a->ctx, size);
    if (p != NULL && a->blocks != NULL && !epabi_alloc_registry_add(a->blocks, &a->owner, p, size)) {
        a->ops->free(a->ctx, p);   /* untracked memory could be captured and then freed under a graph */
        return NULL;
    }
    return p;
}

/* A block a captured graph still uses is freed when the graph goes (alloc_registry.h). */
static void FreeImpl(OrtAllocator* this_, void* p) {
    struct epabi_allocator* a = alloc_of(this_);
    if (p == NULL) return;
    if (a->blocks == NULL || epabi_alloc_registry_free(a->blocks, p) != EPABI_FREE_DEFERRED) a->ops->free(a->ctx, p);
}

static const OrtMemoryInfo* InfoImpl(const OrtAllocator* this_) {
    return alloc_of(this_)->info;
}

/* Reserve is ORT's "outside the arena" path (initializers); every backend's blocks are exact enough for it. */
static void* ReserveImpl(OrtAllocator* this_, size_t size) {
    return AllocImpl(this_, size);
}

/* Keys follow ORT's own arena statistics: Limit is absent (no limit). InUse and TotalAllocated are bytes
 * of chunks (in use / reserved from the system), NumAllocs counts Alloc+Reserve calls, NumReserves the
 * chunks taken from the system (= NumArenaExtensions), MaxInUse the high-water mark, MaxAllocSize the
 * largest request, NumArenaShrinkages the Shrink calls that returned memory. */
static OrtStatus* GetStatsImpl(const OrtAllocator* this_, OrtKeyValuePairs** out) {
    const struct epabi_allocator* a = alloc_of(this_);
    const OrtApi* ort = a->api->ort;
    if (out == NULL) return epabi_error(a->api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": GetStats got a NULL output");
    *out = NULL;
    struct epabi_arena_stats s;
    a->ops->stats(a->ctx, &s);
    OrtKeyValuePairs* kvp = NULL;
    ort->CreateKeyValuePairs(&kvp);
    if (kvp == NULL) return epabi_error(a->api, ORT_FAIL, EPABI_EP_NAME ": out of memory for allocator stats");
    const struct { const char* key; uint64_t value; } rows[] = {
        {"InUse", s.bytes_in_use},           {"TotalAllocated", s.bytes_reserved},
        {"MaxInUse", s.max_bytes_in_use},    {"NumAllocs", s.num_allocs},
        {"NumReserves", s.num_reserves},     {"NumArenaExtensions", s.num_reserves},
        {"NumArenaShrinkages", s.num_shrinks}, {"MaxAllocSize", s.max_alloc_size},
    };
    char text[32];
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; ++i) {
        snprintf(text, sizeof text, "%" PRIu64, rows[i].value);
        ort->AddKeyValuePair(kvp, rows[i].key, text);
    }
    *out = kvp;
    return NULL;
}

static OrtStatus* ShrinkImpl(OrtAllocator* this_) {
    struct epabi_allocator* a = alloc_of(this_);
    a->ops->shrink(a->ctx);
    return NULL;
}

OrtStatus* epabi_allocator_create(const struct epabi_api* api, const OrtMemoryInfo* info,
                                  const struct epabi_alloc_ops* ops, void* ctx, struct epabi_alloc_registry* blocks,
                                  OrtAllocator** out) {
    *out = NULL;
    struct epabi_allocator* a = calloc(1, sizeof *a);
    if (a == NULL) {
        if (ops->close != NULL) ops->close(ctx);
        return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory creating an allocator");
    }
    a->magic = kMagic;
    a->api = api;
    a->info = info;
    a->ops = ops;
    a->ctx = ctx;
    a->blocks = blocks;
    if (blocks != NULL) epabi_alloc_registry_retain(blocks);
    a->owner = (struct epabi_alloc_owner){owner_release, owner_gone, 0};
    OrtAllocator* t = &a->base;
    t->version = api->version;   /* never above what the host speaks */
    t->Alloc = AllocImpl;
    t->Free = FreeImpl;
    t->Info = InfoImpl;
    t->Reserve = epabi_has(api, EPABI_SINCE_OrtAllocator_Reserve) ? ReserveImpl : NULL;
    t->GetStats = ops->stats != NULL && epabi_has(api, EPABI_SINCE_OrtAllocator_GetStats) ? GetStatsImpl : NULL;
    t->AllocOnStream = NULL;     /* the host then uses Alloc */
    t->Shrink = ops->shrink != NULL && epabi_has(api, EPABI_SINCE_OrtAllocator_Shrink) ? ShrinkImpl : NULL;
    *out = t;
    return NULL;
}

bool epabi_allocator_is_ours(const OrtAllocator* allocator) {
    return allocator != NULL && allocator->Alloc == AllocImpl && alloc_of(allocator)->magic == kMagic;
}

void epabi_allocator_destroy(OrtAllocator* allocator) {
    if (!epabi_allocator_is_ours(allocator)) return;
    struct epabi_allocator* a = alloc_of(allocator);
    a->magic = 0;   /* no longer the host's: only the registry may still release its held blocks */
    if (a->blocks == NULL || epabi_alloc_registry_detach(a->blocks, &a->owner) == 0) allocator_close(a);
}
