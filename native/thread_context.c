/*
 * thread_context.c - see thread_context.h.
 *
 * Registry. g_reg (under its mutex) holds the pthread key, the number of attached (live) EPs and the list of
 * every thread slot. A thread slot is the pthread-key value of one thread: an array of entries (serial,
 * context), one per EP the thread ran; serial 0 marks a free entry, which the owner reuses.
 *
 * Who touches a slot. Its owning thread looks contexts up without any lock (epabi_thread_find, the hot path of
 * every callback and fused-node Compute) and adds a context under the slot's lock (first use of an EP on
 * the thread: rare). epabi_threads_detach, on whatever thread releases an EP, walks every registered slot under
 * g_reg.lock and, under each slot's lock, takes that EP's entries out (serial stored as 0) and frees their
 * contexts after dropping the locks; ORT makes no call of an EP while releasing it, so none of those
 * contexts is in use, and the owner's lock-free lookups, which compare serials with a LIVE EP's, never
 * dereference an entry that is being emptied. Only the owner replaces the entry array or changes its
 * length (under the slot's lock), so its lock-free reads of them race with nothing. Lock order: g_reg.lock,
 * then a slot's lock; the owner never takes g_reg.lock while it holds its slot's lock.
 *
 * Slot lifetime. A slot is freed only under (or after unlinking under) g_reg.lock: by the key destructor at
 * thread exit (on the owning thread), or by the last detach (no EP is live, so no call into the graph
 * machinery can be in flight), which also deletes the key. The two can race only at thread exit during the
 * last EP release; the destructor frees a slot only if it is still registered (compared by address, never
 * dereferenced otherwise), so each slot is freed exactly once.
 */
#include "thread_context.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_factory.h"

/* One context of a slot. serial 0 = a free entry. serial is written under the slot's lock (by the owner
 * when it adds a context, by a detach when it takes one away) and read by the owner without the lock; tc is
 * read without the lock only by the owner, and only from an entry whose serial is its live EP's. */
struct slot_entry {
    _Atomic uint64_t serial;
    struct epabi_thread_context* tc;
};

struct thread_slot {
    pthread_mutex_t lock;                  /* entries/n/cap and every entry's contents change under it */
    struct slot_entry* entries;            /* replaced (grown) only by the owner, under lock */
    size_t n, cap;                         /* n written only by the owner, under lock; never shrinks */
    struct thread_slot* prev;              /* registry list, under g_reg.lock */
    struct thread_slot* next;
};

static struct {
    pthread_mutex_t lock;
    atomic_bool key_live;                  /* written under lock; read without it only by attached EPs */
    pthread_key_t key;
    size_t attached;                       /* attached EPs */
    struct thread_slot* slots;             /* every registered slot */
} g_reg = {.lock = PTHREAD_MUTEX_INITIALIZER, .key_live = false};

static atomic_uint_fast64_t g_next_serial = 1;
static atomic_size_t g_live_contexts = 0;

size_t epabi_thread_live_contexts(void) {
    return atomic_load(&g_live_contexts);
}

static void context_free(struct epabi_thread_context* tc) {
    epabi_graph_manager_destroy(tc->graphs);   /* graphs first: they were captured on the stream */
    for (size_t i = 0; i < tc->n_kept_pools; ++i) epabi_arena_pool_destroy(tc->kept_pools[i]);
    free(tc->kept_pools);
    epabi_stream_destroy(tc->stream);
    free(tc);
    atomic_fetch_sub(&g_live_contexts, 1);
}

/* Frees a slot nobody else can reach any more (unlinked from the registry, or the registry dropped). */
static void slot_free(struct thread_slot* slot) {
    for (size_t i = 0; i < slot->n; ++i)
        if (atomic_load_explicit(&slot->entries[i].serial, memory_order_relaxed) != 0)
            context_free(slot->entries[i].tc);
    free(slot->entries);
    pthread_mutex_destroy(&slot->lock);
    free(slot);
}

/* Caller holds g_reg.lock. */
static void registry_unlink(struct thread_slot* slot) {
    if (slot->prev != NULL) slot->prev->next = slot->next;
    else g_reg.slots = slot->next;
    if (slot->next != NULL) slot->next->prev = slot->prev;
    slot->prev = slot->next = NULL;
}

/* pthread key destructor: the thread is exiting; its contexts (graphs, then streams) go with it. Once the
 * slot is unlinked (under g_reg.lock) no detach can reach it, so it is freed without its own lock. */
static void slot_destructor(void* value) {
    struct thread_slot* slot = value;
    bool registered = false;
    pthread_mutex_lock(&g_reg.lock);
    for (struct thread_slot* s = g_reg.slots; s != NULL; s = s->next) {
        if (s != slot) continue;
        registry_unlink(slot);
        registered = true;
        break;
    }
    pthread_mutex_unlock(&g_reg.lock);
    if (registered) slot_free(slot);
}

static struct thread_slot* current_slot(void) {
    if (!g_reg.key_live) return NULL;   /* stable while any EP is attached, and callers are attached EPs */
    return pthread_getspecific(g_reg.key);
}

/* The hot path (every OrtEp callback and every fused-node Compute): no lock. Only the calling thread ever
 * replaces entries or changes n, so reading them here races with nothing; a concurrent detach of another EP
 * only stores 0 into that EP's entries' serials, which never equal this live EP's serial, so no entry whose
 * tc another thread may be freeing is ever dereferenced. */
struct epabi_thread_context* epabi_thread_find(const struct epabi_thread_owner* owner) {
    if (owner == NULL || owner->serial == 0) return NULL;
    struct thread_slot* slot = current_slot();
    if (slot == NULL) return NULL;
    for (size_t i = 0; i < slot->n; ++i)
        if (atomic_load_explicit(&slot->entries[i].serial, memory_order_acquire) == owner->serial)
            return slot->entries[i].tc;
    return NULL;
}

/* The calling thread's slot, created and registered on first use. */
static OrtStatus* slot_get(const struct epabi_api* api, struct thread_slot** out) {
    struct thread_slot* slot = current_slot();
    if (slot == NULL) {
        slot = calloc(1, sizeof *slot);
        if (slot == NULL)
            return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory for a thread's context");
        if (pthread_mutex_init(&slot->lock, NULL) != 0) {
            free(slot);
            return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": no mutex for a thread's graph contexts");
        }
        pthread_mutex_lock(&g_reg.lock);
        slot->next = g_reg.slots;
        if (g_reg.slots != NULL) g_reg.slots->prev = slot;
        g_reg.slots = slot;
        pthread_mutex_unlock(&g_reg.lock);
        if (pthread_setspecific(g_reg.key, slot) != 0) {
            pthread_mutex_lock(&g_reg.lock);
            registry_unlink(slot);
            pthread_mutex_unlock(&g_reg.lock);
            slot_free(slot);
            return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": cannot attach a graph context to this thread");
        }
    }
    *out = slot;
    return NULL;
}

/* Adds tc to the calling thread's slot (the owner only): reuses a free entry, else grows the array. Under the
 * slot's lock, so a detach walking the slot sees either the old or the new array, entirely. */
static bool slot_add(struct thread_slot* slot, struct epabi_thread_context* tc) {
    bool ok = true;
    pthread_mutex_lock(&slot->lock);
    size_t i = 0;
    while (i < slot->n && atomic_load_explicit(&slot->entries[i].serial, memory_order_relaxed) != 0) ++i;
    if (i == slot->n && slot->n == slot->cap) {
        size_t cap = slot->cap == 0 ? 4 : 2 * slot->cap;
        struct slot_entry* grown = malloc(cap * sizeof *grown);
        if (grown == NULL) {
            ok = false;
        } else {
            for (size_t k = 0; k < slot->n; ++k) {
                atomic_init(&grown[k].serial, atomic_load_explicit(&slot->entries[k].serial, memory_order_relaxed));
                grown[k].tc = slot->entries[k].tc;
            }
            free(slot->entries);   /* the owner is the only lock-free reader, and it is here */
            slot->entries = grown;
            slot->cap = cap;
        }
    }
    if (ok) {
        if (i == slot->n) {
            atomic_init(&slot->entries[i].serial, 0);
            slot->n++;
        }
        slot->entries[i].tc = tc;
        atomic_store_explicit(&slot->entries[i].serial, tc->serial, memory_order_release);
    }
    pthread_mutex_unlock(&slot->lock);
    return ok;
}

/* The calling thread's context for owner, created (with the thread's slot) on first use. */
OrtStatus* epabi_thread_get(const struct epabi_thread_owner* owner, struct epabi_thread_context** out) {
    const struct epabi_api* api = owner->api;
    *out = epabi_thread_find(owner);
    if (*out != NULL) return NULL;
    if (owner->serial == 0 || !g_reg.key_live)
        return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": per-thread contexts were not set up for this EP");
    struct thread_slot* slot = NULL;
    EPABI_RETURN_IF_ERROR(slot_get(api, &slot));
    struct epabi_thread_context* tc = calloc(1, sizeof *tc);
    OrtStatus* stream_status = NULL;
    if (tc != NULL) {
        atomic_fetch_add(&g_live_contexts, 1);
        tc->serial = owner->serial;
        tc->arena = owner->arena;
        if (owner->create_stream != NULL)
            tc->stream = owner->create_stream(owner, &stream_status);
        else
            tc->stream = epabi_stream_host_create(api, owner->user_stream_given, owner->user_stream);
        if (tc->stream != NULL && owner->graph_capture)
            tc->graphs = epabi_graph_manager_create(api, tc->stream, owner->arena, owner->blocks, owner->min_runs);
    }
    if (tc == NULL || tc->stream == NULL || (owner->graph_capture && tc->graphs == NULL) || !slot_add(slot, tc)) {
        if (tc != NULL) context_free(tc);   /* NULL manager and stream are ignored */
        if (stream_status != NULL) return stream_status;
        return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory for a thread's context");
    }
    if (owner->log_verbose)
        EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_VERBOSE,
                  EPABI_EP_NAME ": created this thread's context (%s stream, graph capture %s, "
                  "min_num_runs_before_cuda_graph_capture=%d)", epabi_stream_backend_name(tc->stream),
                  owner->graph_capture ? "on" : "off", owner->min_runs);
    if (epabi_stream_is_user_owned(tc->stream))
        EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_INFO,
                  EPABI_EP_NAME ": graph stream of this thread adopts the user's stream user_compute_stream=0x%" PRIxPTR
                  " (%s backend; user-owned, so it is not destroyed by the EP)",
                  epabi_stream_handle(tc->stream), epabi_stream_backend_name(tc->stream));
    *out = tc;
    return NULL;
}

OrtStatus* epabi_threads_attach(struct epabi_thread_owner* owner) {
    owner->serial = 0;
    pthread_mutex_lock(&g_reg.lock);
    OrtStatus* st = NULL;
    if (!g_reg.key_live) {
        if (pthread_key_create(&g_reg.key, slot_destructor) == 0) g_reg.key_live = true;
        else st = epabi_error(owner->api, ORT_FAIL, EPABI_EP_NAME ": no thread-local key for per-thread contexts");
    }
    if (st == NULL) {
        owner->serial = atomic_fetch_add(&g_next_serial, 1);
        g_reg.attached++;
    }
    pthread_mutex_unlock(&g_reg.lock);
    if (st == NULL) owner->log_verbose = epabi_log_enabled(owner->api, owner->logger, ORT_LOGGING_LEVEL_VERBOSE);
    return st;
}

void epabi_threads_detach(struct epabi_thread_owner* owner) {
    if (owner == NULL || owner->serial == 0) return;
    uint64_t serial = owner->serial;
    struct epabi_thread_context* dead = NULL;
    struct thread_slot* all = NULL;
    pthread_mutex_lock(&g_reg.lock);
    /* take this EP's context out of EVERY thread's slot now (the caller's included): no call of this EP is
     * in flight (ORT does not call an EP while releasing it), so none of these contexts is in use; the
     * slot's lock only keeps its array steady against its owner adding a context for another EP. A slot is
     * freed only under g_reg.lock (thread exit, last detach), so every slot on the list is alive here. */
    for (struct thread_slot* s = g_reg.slots; s != NULL; s = s->next) {
        pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < s->n; ++i) {
            if (atomic_load_explicit(&s->entries[i].serial, memory_order_relaxed) != serial) continue;
            struct epabi_thread_context* tc = s->entries[i].tc;
            s->entries[i].tc = NULL;
            atomic_store_explicit(&s->entries[i].serial, 0, memory_order_release);
            tc->next = dead;
            dead = tc;
        }
        pthread_mutex_unlock(&s->lock);
    }
    if (g_reg.attached > 0) g_reg.attached--;
    if (g_reg.attached == 0 && g_reg.key_live) {
        /* last capturing EP: no context is left (each belonged to a released EP); free the empty slots and
         * drop the key, so no destructor of this library runs at a later thread exit (the library may be
         * unloaded) */
        all = g_reg.slots;
        g_reg.slots = NULL;
        pthread_setspecific(g_reg.key, NULL);
        pthread_key_delete(g_reg.key);
        g_reg.key_live = false;
    }
    pthread_mutex_unlock(&g_reg.lock);
    /* outside the registry lock: graphs (and the arena blocks their capture pools hold), then streams */
    while (dead != NULL) {
        struct epabi_thread_context* next = dead->next;
        context_free(dead);
        dead = next;
    }
    while (all != NULL) {
        struct thread_slot* next = all->next;
        slot_free(all);
        all = next;
    }
    owner->serial = 0;
}

void epabi_thread_run_env(const struct epabi_thread_owner* owner, const struct epabi_thread_context* tc,
                          struct epabi_run_env* env) {
    env->stream = tc != NULL ? tc->stream : NULL;
    env->capture_pool = tc != NULL && tc->graphs != NULL ? epabi_graph_manager_capture_pool(tc->graphs) : NULL;
    env->mempool = owner->mempool;
    env->graphs = tc != NULL ? tc->graphs : NULL;
    /* stream-ordered allocations need no capture pool: inside a capture they become the graph's memory nodes */
    if (env->mempool) env->capture_pool = NULL;
}

struct epabi_arena_pool* epabi_thread_keep_pool(struct epabi_thread_context* tc) {
    if (tc->n_kept_pools == tc->cap_kept_pools) {
        size_t cap = tc->cap_kept_pools == 0 ? 4 : 2 * tc->cap_kept_pools;
        struct epabi_arena_pool** grown = realloc(tc->kept_pools, cap * sizeof *grown);
        if (grown == NULL) return NULL;
        tc->kept_pools = grown;
        tc->cap_kept_pools = cap;
    }
    struct epabi_arena_pool* pool = epabi_arena_pool_create(tc->arena);
    if (pool != NULL) tc->kept_pools[tc->n_kept_pools++] = pool;
    return pool;
}

OrtStatus* epabi_thread_sync(const struct epabi_thread_owner* owner) {
    struct epabi_thread_context* tc = epabi_thread_find(owner);
    if (tc == NULL || epabi_stream_check_external_capture(tc->stream)) return NULL;   /* recorded work: no wait */
    return epabi_stream_synchronize(tc->stream);
}
