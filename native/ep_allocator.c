/*
 * ep_allocator.c - see ep_allocator.h.
 */
#include "ep_allocator.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "ep_factory.h"

static const uint64_t kMagic = 0x4550414249414c43ull;   /* "EPABIALC" */

struct epabi_allocator {
    OrtAllocator base;                 /* first member: the host's OrtAllocator* is a struct epabi_allocator* */
    uint64_t magic;
    const struct epabi_api* api;       /* the factory's; outlives the allocator */
    const OrtMemoryInfo* info;
    const struct epabi_alloc_ops* ops;
    void* ctx;
};

static struct epabi_allocator* alloc_of(const OrtAllocator* p) {
    return (struct epabi_allocator*)p;
}

static void* AllocImpl(OrtAllocator* this_, size_t size) {
    struct epabi_allocator* a = alloc_of(this_);
    return a->ops->alloc(a->ctx, size);
}

static void FreeImpl(OrtAllocator* this_, void* p) {
    struct epabi_allocator* a = alloc_of(this_);
    if (p != NULL) a->ops->free(a->ctx, p);
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
                                  const struct epabi_alloc_ops* ops, void* ctx, OrtAllocator** out) {
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
    if (a->ops->close != NULL) a->ops->close(a->ctx);
    a->magic = 0;
    free(a);
}
