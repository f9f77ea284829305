/*
 * arena.c - see arena.h. Layout of a host chunk: one 64-byte header, then the user block; a backed arena's
 * header is a separate allocation pointing at its block, found through an open-addressing table. Size class c holds
 * blocks of 2^c bytes (c >= MIN_CLASS). Every chunk is also on a doubly linked list of all
 * chunks, so the last release can free chunks the host never returned. A chunk a capture pool holds is
 * "in use" for the arena; the pool links it through `pool`/`next_pooled` (and `next_free` while it is free
 * on the pool's own lists, magic kMagicPooled).
 */
#include "arena.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum {
    MIN_CLASS = 8,    /* 256 bytes */
    MAX_CLASS = 46,   /* 64 TiB: anything larger is refused */
    NUM_CLASSES = MAX_CLASS + 1
};

/* Under AddressSanitizer, blocks on the arena's free lists are poisoned, so a stale use (a replay of a
 * graph whose memory went back to the arena) is reported instead of silently reading reused memory. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define EPABI_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define EPABI_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define EPABI_POISON(p, n) ((void)(p), (void)(n))
#define EPABI_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static const uint64_t kMagicInUse = 0x45504142494e5553ull;  /* "EPABINUS" */
static const uint64_t kMagicFree = 0x4550414249465245ull;   /* "EPABIFRE" */
static const uint64_t kMagicPooled = 0x455041424950464cull; /* "EPABIPFL": free on a capture pool's list */

struct chunk {
    uint64_t magic;
    struct epabi_arena* owner;
    struct chunk* next_free;     /* free list of its class */
    struct chunk* prev_all;      /* list of all chunks */
    struct chunk* next_all;
    uint32_t size_class;
    uint32_t pad_;
    struct epabi_arena_pool* pool;   /* the capture pool holding it, or NULL */
    struct chunk* next_pooled;       /* list of all chunks that pool holds */
    void* block;                     /* the user block (right after the header in host arenas) */
    const void* stream;              /* backed arenas: the stream whose queued work may still use it */
    unsigned char pad2_[48];
};
_Static_assert(sizeof(struct chunk) % EPABI_ARENA_ALIGNMENT == 0, "chunk header must keep blocks aligned");

struct epabi_arena {
    pthread_mutex_t lock;
    int refs;
    bool backed;
    struct epabi_arena_backing backing;
    struct chunk** table;            /* backed: block address -> header, open addressing, NULL = empty */
    size_t table_cap, table_used;    /* table_used counts live entries and tombstones */
    struct chunk* free_lists[NUM_CLASSES];
    struct chunk* all;
    struct epabi_arena_stats stats;
};

static struct chunk kTombstone;   /* a removed table entry (never dereferenced for its fields) */

static size_t hash_ptr(const void* p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static bool table_put(struct epabi_arena* a, struct chunk* c) {
    if (2 * (a->table_used + 1) > a->table_cap) {
        size_t cap = a->table_cap == 0 ? 64 : 2 * a->table_cap;
        struct chunk** t = calloc(cap, sizeof *t);
        if (t == NULL) return false;
        size_t used = 0;
        for (size_t i = 0; i < a->table_cap; ++i) {
            struct chunk* e = a->table[i];
            if (e == NULL || e == &kTombstone) continue;
            size_t j = hash_ptr(e->block, cap);
            while (t[j] != NULL) j = (j + 1) & (cap - 1);
            t[j] = e;
            ++used;
        }
        free(a->table);
        a->table = t;
        a->table_cap = cap;
        a->table_used = used;
    }
    size_t j = hash_ptr(c->block, a->table_cap);
    while (a->table[j] != NULL && a->table[j] != &kTombstone) j = (j + 1) & (a->table_cap - 1);
    if (a->table[j] == NULL) ++a->table_used;
    a->table[j] = c;
    return true;
}

static struct chunk** table_slot(const struct epabi_arena* a, const void* p) {
    if (a->table_cap == 0) return NULL;
    for (size_t j = hash_ptr(p, a->table_cap);; j = (j + 1) & (a->table_cap - 1)) {
        struct chunk* e = a->table[j];
        if (e == NULL) return NULL;
        if (e != &kTombstone && e->block == p) return &a->table[j];
    }
}

/* The header of a block this arena handed out, or NULL (caller holds the lock for backed arenas). */
static struct chunk* find_chunk(const struct epabi_arena* a, void* p) {
    if (!a->backed) return (struct chunk*)((unsigned char*)p - sizeof(struct chunk));
    struct chunk** slot = table_slot(a, p);
    return slot != NULL ? *slot : NULL;
}

/* Gives a chunk (already unlinked from every list) back to the system. */
static void chunk_release(struct epabi_arena* a, struct chunk* c) {
    c->magic = 0;
    if (!a->backed) {
        EPABI_UNPOISON(c->block, (size_t)1 << c->size_class);
        free(c);
        return;
    }
    struct chunk** slot = table_slot(a, c->block);
    if (slot != NULL) *slot = &kTombstone;
    a->backing.release(a->backing.ctx, c->block);
    free(c);
}

static unsigned class_of(size_t bytes) {
    unsigned c = MIN_CLASS;
    while (c < NUM_CLASSES && ((uint64_t)1 << c) < bytes) ++c;
    return c;
}

struct epabi_arena* epabi_arena_create(void) {
    struct epabi_arena* a = calloc(1, sizeof *a);
    if (a == NULL) return NULL;
    if (pthread_mutex_init(&a->lock, NULL) != 0) {
        free(a);
        return NULL;
    }
    a->refs = 1;
    return a;
}

struct epabi_arena* epabi_arena_create_backed(const struct epabi_arena_backing* backing) {
    if (backing == NULL || backing->reserve == NULL || backing->release == NULL) return NULL;
    struct epabi_arena* a = epabi_arena_create();
    if (a == NULL) return NULL;
    a->backed = true;
    a->backing = *backing;
    return a;
}

void epabi_arena_retain(struct epabi_arena* a) {
    pthread_mutex_lock(&a->lock);
    ++a->refs;
    pthread_mutex_unlock(&a->lock);
}

void epabi_arena_release(struct epabi_arena* a) {
    if (a == NULL) return;
    pthread_mutex_lock(&a->lock);
    bool last = --a->refs == 0;
    pthread_mutex_unlock(&a->lock);
    if (!last) return;
    for (struct chunk* c = a->all; c != NULL;) {
        struct chunk* next = c->next_all;
        chunk_release(a, c);
        c = next;
    }
    pthread_mutex_destroy(&a->lock);
    free(a->table);
    free(a);
}

/* A new chunk of class cls, linked into the list of all chunks; NULL when out of memory. Under the lock. */
static struct chunk* reserve_chunk(struct epabi_arena* a, unsigned cls) {
    uint64_t size = (uint64_t)1 << cls;
    struct chunk* c;
    if (!a->backed) {
        /* The system allocation happens under the lock: simple, and rare once the arena is warm. */
        c = aligned_alloc(EPABI_ARENA_ALIGNMENT, sizeof(struct chunk) + size);
        if (c == NULL) return NULL;
        memset(c, 0, sizeof *c);
        c->block = (unsigned char*)c + sizeof(struct chunk);
    } else {
        c = calloc(1, sizeof *c);
        if (c == NULL) return NULL;
        c->block = a->backing.reserve(a->backing.ctx, (size_t)size);
        if (c->block == NULL || !table_put(a, c)) {
            if (c->block != NULL) a->backing.release(a->backing.ctx, c->block);
            free(c);
            return NULL;
        }
    }
    c->owner = a;
    c->size_class = cls;
    c->next_all = a->all;
    if (a->all != NULL) a->all->prev_all = c;
    a->all = c;
    a->stats.num_reserves++;
    a->stats.bytes_reserved += size;
    return c;
}

void* epabi_arena_alloc_on(struct epabi_arena* a, size_t bytes, const void* stream) {
    unsigned cls = class_of(bytes);
    if (cls >= NUM_CLASSES) return NULL;
    uint64_t size = (uint64_t)1 << cls;
    pthread_mutex_lock(&a->lock);
    /* the first free chunk that no other stream may still be using */
    struct chunk** link = &a->free_lists[cls];
    while (*link != NULL && (*link)->stream != NULL && (*link)->stream != stream) link = &(*link)->next_free;
    struct chunk* c = *link;
    if (c != NULL) {
        *link = c->next_free;
        if (!a->backed) EPABI_UNPOISON(c->block, size);
    } else {
        c = reserve_chunk(a, cls);
        if (c == NULL) {
            pthread_mutex_unlock(&a->lock);
            return NULL;
        }
    }
    c->magic = kMagicInUse;
    c->next_free = NULL;
    c->stream = NULL;
    a->stats.num_allocs++;
    a->stats.bytes_in_use += size;
    if (a->stats.bytes_in_use > a->stats.max_bytes_in_use) a->stats.max_bytes_in_use = a->stats.bytes_in_use;
    if (bytes > a->stats.max_alloc_size) a->stats.max_alloc_size = bytes;
    pthread_mutex_unlock(&a->lock);
    return c->block;
}

void* epabi_arena_alloc(struct epabi_arena* a, size_t bytes) {
    return epabi_arena_alloc_on(a, bytes, NULL);
}

void epabi_arena_free_on(struct epabi_arena* a, void* p, const void* stream) {
    if (p == NULL) return;
    pthread_mutex_lock(&a->lock);
    struct chunk* c = find_chunk(a, p);
    /* a block a capture pool holds goes back only through the pool (its captured graph still uses it) */
    if (c != NULL && c->owner == a && c->magic == kMagicInUse && c->pool == NULL && c->size_class < NUM_CLASSES) {
        c->magic = kMagicFree;
        c->stream = stream;
        c->next_free = a->free_lists[c->size_class];
        a->free_lists[c->size_class] = c;
        a->stats.bytes_in_use -= (uint64_t)1 << c->size_class;
        if (!a->backed) EPABI_POISON(p, (size_t)1 << c->size_class);
    }
    pthread_mutex_unlock(&a->lock);
}

void epabi_arena_free(struct epabi_arena* a, void* p) {
    epabi_arena_free_on(a, p, NULL);
}

void epabi_arena_stream_synced(struct epabi_arena* a, const void* stream) {
    if (stream == NULL) return;
    pthread_mutex_lock(&a->lock);
    for (unsigned cls = 0; cls < NUM_CLASSES; ++cls)
        for (struct chunk* c = a->free_lists[cls]; c != NULL; c = c->next_free)
            if (c->stream == stream) c->stream = NULL;
    pthread_mutex_unlock(&a->lock);
}

static bool chunk_covers(const struct chunk* c, uintptr_t p, size_t bytes) {
    uintptr_t start = (uintptr_t)c->block;
    uint64_t size = (uint64_t)1 << c->size_class;
    return c->magic == kMagicInUse && p >= start && p - start <= size && bytes <= size - (p - start);
}

bool epabi_arena_owns(struct epabi_arena* a, const void* p, size_t bytes) {
    if (p == NULL) return false;
    bool found = false;
    pthread_mutex_lock(&a->lock);
    if (a->backed) {
        struct chunk** slot = table_slot(a, p);
        found = slot != NULL && chunk_covers(*slot, (uintptr_t)p, bytes);
    }
    /* host chunks are not indexed (their header sits before the block); interior pointers are not either */
    for (const struct chunk* c = a->all; c != NULL && !found; c = c->next_all)
        found = chunk_covers(c, (uintptr_t)p, bytes);
    pthread_mutex_unlock(&a->lock);
    return found;
}

void epabi_arena_shrink(struct epabi_arena* a) {
    pthread_mutex_lock(&a->lock);
    bool returned = false;
    for (unsigned cls = 0; cls < NUM_CLASSES; ++cls) {
        for (struct chunk* c = a->free_lists[cls]; c != NULL;) {
            struct chunk* next = c->next_free;
            if (c->prev_all != NULL) c->prev_all->next_all = c->next_all;
            else a->all = c->next_all;
            if (c->next_all != NULL) c->next_all->prev_all = c->prev_all;
            a->stats.bytes_reserved -= (uint64_t)1 << cls;
            chunk_release(a, c);
            returned = true;
            c = next;
        }
        a->free_lists[cls] = NULL;
    }
    if (returned) a->stats.num_shrinks++;
    pthread_mutex_unlock(&a->lock);
}

void epabi_arena_get_stats(struct epabi_arena* a, struct epabi_arena_stats* out) {
    pthread_mutex_lock(&a->lock);
    *out = a->stats;
    pthread_mutex_unlock(&a->lock);
}

/* ---- capture pools ---------------------------------------------------------------------------------- */

struct epabi_arena_pool {
    struct epabi_arena* arena;       /* one reference */
    struct chunk* free_lists[NUM_CLASSES];
    struct chunk* held;              /* every chunk taken from the arena, through next_pooled */
    struct epabi_arena_pool_stats stats;
};

static struct chunk* chunk_of(struct epabi_arena* a, void* p) {
    if (!a->backed) return find_chunk(a, p);
    pthread_mutex_lock(&a->lock);
    struct chunk* c = find_chunk(a, p);
    pthread_mutex_unlock(&a->lock);
    return c;
}

struct epabi_arena_pool* epabi_arena_pool_create(struct epabi_arena* a) {
    struct epabi_arena_pool* pool = calloc(1, sizeof *pool);
    if (pool == NULL) return NULL;
    pool->arena = a;
    epabi_arena_retain(a);
    return pool;
}

void* epabi_arena_pool_alloc(struct epabi_arena_pool* pool, size_t bytes) {
    unsigned cls = class_of(bytes);
    if (cls >= NUM_CLASSES) return NULL;
    struct chunk* c = pool->free_lists[cls];
    if (c != NULL) {
        pool->free_lists[cls] = c->next_free;
        c->next_free = NULL;
        c->magic = kMagicInUse;
        return c->block;
    }
    void* p = epabi_arena_alloc(pool->arena, bytes);
    if (p == NULL) return NULL;
    c = chunk_of(pool->arena, p);
    /* the chunk is in use, so the arena touches none of these fields until the pool gives it back */
    c->pool = pool;
    c->next_pooled = pool->held;
    pool->held = c;
    pool->stats.blocks++;
    pool->stats.bytes += (uint64_t)1 << c->size_class;
    return p;
}

void epabi_arena_pool_free(struct epabi_arena_pool* pool, void* p) {
    if (p == NULL) return;
    struct chunk* c = chunk_of(pool->arena, p);
    if (c == NULL || c->pool != pool || c->magic != kMagicInUse || c->size_class >= NUM_CLASSES) return;
    c->magic = kMagicPooled;
    c->next_free = pool->free_lists[c->size_class];
    pool->free_lists[c->size_class] = c;
}

void epabi_arena_pool_get_stats(const struct epabi_arena_pool* pool, struct epabi_arena_pool_stats* out) {
    *out = pool->stats;
}

void epabi_arena_pool_destroy(struct epabi_arena_pool* pool) {
    if (pool == NULL) return;
    for (struct chunk* c = pool->held; c != NULL;) {
        struct chunk* next = c->next_pooled;
        c->pool = NULL;
        c->next_pooled = NULL;
        c->next_free = NULL;
        c->magic = kMagicInUse;   /* pooled-free or handed out: either way the arena sees it in use */
        epabi_arena_free(pool->arena, c->block);
        c = next;
    }
    epabi_arena_release(pool->arena);
    free(pool);
}
