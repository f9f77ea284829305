/*
 * alloc_registry.c - see alloc_registry.h. One open-addressing table of entries keyed by block address
 * (tombstones for removed ones, rebuilt when half full). A hold on an address that is not a block's start walks
 * the table: holds are taken only when a graph is captured, never on a replay.
 */
#include "alloc_registry.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

enum entry_state { ENTRY_EMPTY = 0, ENTRY_LIVE = 1, ENTRY_TOMB = 2 };

struct entry {
    void* base;
    size_t bytes;
    struct epabi_alloc_owner* owner;
    uint32_t holds;
    uint8_t state;
    bool freed;       /* the host freed it while held: the free happens when the last hold goes */
    bool orphan;      /* its owner was detached while it was held */
};

struct epabi_alloc_registry {
    pthread_mutex_t lock;
    int refs;
    struct entry* table;
    size_t cap, used, live, held;   /* used: live + tombstones */
};

static size_t hash_ptr(const void* p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

struct epabi_alloc_registry* epabi_alloc_registry_create(void) {
    struct epabi_alloc_registry* r = calloc(1, sizeof *r);
    if (r == NULL) return NULL;
    if (pthread_mutex_init(&r->lock, NULL) != 0) {
        free(r);
        return NULL;
    }
    r->refs = 1;
    return r;
}

void epabi_alloc_registry_retain(struct epabi_alloc_registry* r) {
    pthread_mutex_lock(&r->lock);
    ++r->refs;
    pthread_mutex_unlock(&r->lock);
}

void epabi_alloc_registry_release(struct epabi_alloc_registry* r) {
    if (r == NULL) return;
    pthread_mutex_lock(&r->lock);
    bool last = --r->refs == 0;
    pthread_mutex_unlock(&r->lock);
    if (!last) return;
    pthread_mutex_destroy(&r->lock);
    free(r->table);
    free(r);
}

/* Under the lock. The slot of base, or NULL. */
static struct entry* find(const struct epabi_alloc_registry* r, const void* base) {
    if (r->cap == 0) return NULL;
    for (size_t j = hash_ptr(base, r->cap);; j = (j + 1) & (r->cap - 1)) {
        struct entry* e = &r->table[j];
        if (e->state == ENTRY_EMPTY) return NULL;
        if (e->state == ENTRY_LIVE && e->base == base) return e;
    }
}

/* Under the lock: a table of cap slots holding the live entries only. */
static bool rebuild(struct epabi_alloc_registry* r, size_t cap) {
    struct entry* t = calloc(cap, sizeof *t);
    if (t == NULL) return false;
    for (size_t i = 0; i < r->cap; ++i) {
        const struct entry* e = &r->table[i];
        if (e->state != ENTRY_LIVE) continue;
        size_t j = hash_ptr(e->base, cap);
        while (t[j].state != ENTRY_EMPTY) j = (j + 1) & (cap - 1);
        t[j] = *e;
    }
    free(r->table);
    r->table = t;
    r->cap = cap;
    r->used = r->live;
    return true;
}

static void remove_entry(struct epabi_alloc_registry* r, struct entry* e) {
    if (e->holds > 0) r->held--;
    e->state = ENTRY_TOMB;
    e->owner = NULL;
    r->live--;
}

bool epabi_alloc_registry_add(struct epabi_alloc_registry* r, struct epabi_alloc_owner* owner, void* p, size_t bytes) {
    if (p == NULL) return true;
    bool ok = true;
    pthread_mutex_lock(&r->lock);
    if (2 * (r->used + 1) > r->cap) {
        size_t cap = r->cap == 0 ? 64 : r->cap;
        while (4 * (r->live + 1) > cap) cap *= 2;   /* tombstones alone only need a rebuild */
        ok = rebuild(r, cap);
    }
    if (ok) {
        struct entry* e = find(r, p);
        if (e == NULL) {
            size_t j = hash_ptr(p, r->cap);
            while (r->table[j].state == ENTRY_LIVE) j = (j + 1) & (r->cap - 1);
            e = &r->table[j];
            if (e->state == ENTRY_EMPTY) r->used++;
            r->live++;
        } else if (e->holds > 0) {
            r->held--;   /* cannot happen for memory the owner handed out once; keep the counts right anyway */
        }
        *e = (struct entry){p, bytes, owner, 0, ENTRY_LIVE, false, false};
    }
    pthread_mutex_unlock(&r->lock);
    return ok;
}

enum epabi_alloc_free_result epabi_alloc_registry_free(struct epabi_alloc_registry* r, void* p) {
    enum epabi_alloc_free_result result = EPABI_FREE_UNKNOWN;
    pthread_mutex_lock(&r->lock);
    struct entry* e = find(r, p);
    if (e != NULL && e->freed) {
        result = EPABI_FREE_DEFERRED;
    } else if (e != NULL) {
        if (e->holds > 0) {
            e->freed = true;
            result = EPABI_FREE_DEFERRED;
        } else {
            remove_entry(r, e);
            result = EPABI_FREE_NOW;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return result;
}

size_t epabi_alloc_registry_detach(struct epabi_alloc_registry* r, struct epabi_alloc_owner* owner) {
    size_t held = 0;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->cap; ++i) {
        struct entry* e = &r->table[i];
        if (e->state != ENTRY_LIVE || e->owner != owner || e->orphan) continue;
        if (e->holds > 0) {
            e->orphan = true;
            owner->orphans++;
            ++held;
        } else {
            remove_entry(r, e);
        }
    }
    pthread_mutex_unlock(&r->lock);
    return held;
}

void* epabi_alloc_registry_hold(struct epabi_alloc_registry* r, const void* p, size_t bytes) {
    if (p == NULL) return NULL;
    uintptr_t a = (uintptr_t)p;
    void* base = NULL;
    pthread_mutex_lock(&r->lock);
    struct entry* e = find(r, p);
    for (size_t i = 0; e == NULL && i < r->cap; ++i) {
        struct entry* c = &r->table[i];
        uintptr_t start = (uintptr_t)c->base;
        if (c->state == ENTRY_LIVE && a >= start && a - start < c->bytes) e = c;
    }
    /* a freed block is gone for the host: its address may not be captured anew (the host hands out no pointer
     * into it, so only a stale pointer could name it) */
    if (e != NULL && !e->freed && bytes <= e->bytes - (a - (uintptr_t)e->base)) {
        if (e->holds++ == 0) r->held++;
        base = e->base;
    }
    pthread_mutex_unlock(&r->lock);
    return base;
}

void epabi_alloc_registry_drop(struct epabi_alloc_registry* r, void* base) {
    if (base == NULL) return;
    struct epabi_alloc_owner* gone = NULL;
    pthread_mutex_lock(&r->lock);
    struct entry* e = find(r, base);
    if (e != NULL && e->holds > 0 && --e->holds == 0) {
        r->held--;
        if (e->freed || e->orphan) {
            struct epabi_alloc_owner* owner = e->owner;
            bool freed = e->freed, orphan = e->orphan;
            remove_entry(r, e);
            if (freed) owner->release(owner, base);
            if (orphan && --owner->orphans == 0) gone = owner;
        }
    }
    pthread_mutex_unlock(&r->lock);
    /* outside the lock: the owner may drop its own registry reference; nothing can reach it any more */
    if (gone != NULL) gone->gone(gone);
}

void epabi_alloc_registry_counts(struct epabi_alloc_registry* r, size_t* live, size_t* held) {
    pthread_mutex_lock(&r->lock);
    if (live != NULL) *live = r->live;
    if (held != NULL) *held = r->held;
    pthread_mutex_unlock(&r->lock);
}
