#include "ep_allocator.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "ep_factory.h"

/* API versions at which OrtAllocator members appeared. */
enum { SINCE_RESERVE = 18, SINCE_STATS = 23, SINCE_SHRINK = 25 };

struct epabi_allocator {
    OrtAllocator base;                 /* first member: the host's OrtAllocator* is a struct epabi_allocator* */
    const struct epabi_api* api;       /* the factory's; outlives the allocator */
    struct epabi_arena* arena;         /* one reference */
    const OrtMemoryInfo* info;
};

static struct epabi_allocator* alloc_of(const OrtAllocator* p) {
    return (struct epabi_allocator*)p;
}

static void* AllocImpl(OrtAllocator* this_, size_t size) {
    return epabi_arena_alloc(alloc_of(this_)->arena, size);
}

static void FreeImpl(OrtAllocator* this_, void* p) {
    epabi_arena_free(alloc_of(this_)->arena, p);
}

static const OrtMemoryInfo* InfoImpl(const OrtAllocator* this_) {
    return alloc_of(this_)->info;
}

/* Reserve is ORT's "outside the arena" path (initializers); our chunks are exact enough to serve it too. */
static void* ReserveImpl(OrtAllocator* this_, size_t size) {
    return epabi_arena_alloc(alloc_of(this_)->arena, size);
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
    epabi_arena_get_stats(a->arena, &s);
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
    epabi_arena_shrink(alloc_of(this_)->arena);
    return NULL;
}

OrtStatus* epabi_allocator_create(const struct epabi_api* api, struct epabi_arena* arena, const OrtMemoryInfo* info,
                                  OrtAllocator** out) {
    *out = NULL;
    struct epabi_allocator* a = calloc(1, sizeof *a);
    if (a == NULL) return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory creating an allocator");
    a->api = api;
    a->arena = arena;
    a->info = info;
    epabi_arena_retain(arena);
    OrtAllocator* t = &a->base;
    t->version = api->version;   /* never above what the host speaks */
    t->Alloc = AllocImpl;
    t->Free = FreeImpl;
    t->Info = InfoImpl;
    t->Reserve = epabi_has(api, SINCE_RESERVE) ? ReserveImpl : NULL;
    t->GetStats = epabi_has(api, SINCE_STATS) ? GetStatsImpl : NULL;
    t->AllocOnStream = NULL;     /* not stream aware: the host then uses Alloc */
    t->Shrink = epabi_has(api, SINCE_SHRINK) ? ShrinkImpl : NULL;
    *out = t;
    return NULL;
}

bool epabi_allocator_is_ours(const OrtAllocator* allocator) {
    return allocator != NULL && allocator->Alloc == AllocImpl;
}

void epabi_allocator_destroy(OrtAllocator* allocator) {
    if (allocator == NULL) return;
    struct epabi_allocator* a = alloc_of(allocator);
    epabi_arena_release(a->arena);
    free(a);
}
