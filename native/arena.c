/*
 * arena.c - see arena.h. Layout of a chunk: one 64-byte header, then the user block. Size class c holds
 * blocks of 2^c bytes (c >= EPABI_ARENA_MIN_CLASS). Every chunk is also on a doubly linked list of all
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
};
_Static_assert(sizeof(struct chunk) == EPABI_ARENA_ALIGNMENT, "chunk header must be one alignment unit");

struct epabi_arena {
    pthread_mutex_t lock;
    int refs;
    struct chunk* free_lists[NUM_CLASSES];
    struct chunk* all;
    struct epabi_arena_stats stats;
};

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
        EPABI_UNPOISON((unsigned char*)c + sizeof(struct chunk), (size_t)1 << c->size_class);
        c->magic = 0;
        free(c);
        c = next;
    }
    pthread_mutex_destroy(&a->lock);
    free(a);
}

void* epabi_arena_alloc(struct epabi_arena* a, size_t bytes) {
    unsigned cls = class_of(bytes);
    if (cls >= NUM_CLASSES) return NULL;
    uint64_t size = (uint64_t)1 << cls;
    pthread_mutex_lock(&a->lock);
    struct chunk* c = a->free_lists[cls];
    if (c != NULL) {
        a->free_lists[cls] = c->next_free;
        EPABI_UNPOISON((unsigned char*)c + sizeof(struct chunk), size);
    } else {
        /* The system allocation happens under the lock: simple, and rare once the arena is warm. */
        c = aligned_alloc(EPABI_ARENA_ALIGNMENT, sizeof(struct chunk) + size);
        if (c == NULL) {
            pthread_mutex_unlock(&a->lock);
            return NULL;
        }
        memset(c, 0, sizeof *c);
        c->owner = a;
        c->size_class = cls;
        c->next_all = a->all;
        if (a->all != NULL) a->all->prev_all = c;
        a->all = c;
        a->stats.num_reserves++;
        a->stats.bytes_reserved += size;
    }
    c->magic = kMagicInUse;
    c->next_free = NULL;
    a->stats.num_allocs++;
    a->stats.bytes_in_use += size;
    if (a->stats.bytes_in_use > a->stats.max_bytes_in_use) a->stats.max_bytes_in_use = a->stats.bytes_in_use;
    if (bytes > a->stats.max_alloc_size) a->stats.max_alloc_size = bytes;
    pthread_mutex_unlock(&a->lock);
    return (unsigned char*)c + sizeof(struct chunk);
}

void epabi_arena_free(struct epabi_arena* a, void* p) {
    if (p == NULL) return;
    struct chunk* c = (struct chunk*)((unsigned char*)p - sizeof(struct chunk));
    pthread_mutex_lock(&a->lock);
    /* a block a capture pool holds goes back only through the pool (its captured graph still uses it) */
    if (c->owner == a && c->magic == kMagicInUse && c->pool == NULL && c->size_class < NUM_CLASSES) {
        c->magic = kMagicFree;
        c->next_free = a->free_lists[c->size_class];
        a->free_lists[c->size_class] = c;
        a->stats.bytes_in_use -= (uint64_t)1 << c->size_class;
        EPABI_POISON(p, (size_t)1 << c->size_class);
    }
    pthread_mutex_unlock(&a->lock);
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
            EPABI_UNPOISON((unsigned char*)c + sizeof(struct chunk), (size_t)1 << cls);
            c->magic = 0;
            free(c);
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

static struct chunk* chunk_of(void* p) {
    return (struct chunk*)((unsigned char*)p - sizeof(struct chunk));
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
        return (unsigned char*)c + sizeof(struct chunk);
    }
    void* p = epabi_arena_alloc(pool->arena, bytes);
    if (p == NULL) return NULL;
    c = chunk_of(p);
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
    struct chunk* c = chunk_of(p);
    if (c->pool != pool || c->magic != kMagicInUse || c->size_class >= NUM_CLASSES) return;
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
        epabi_arena_free(pool->arena, (unsigned char*)c + sizeof(struct chunk));
        c = next;
    }
    epabi_arena_release(pool->arena);
    free(pool);
}
