/*
 * graph_capture.c - see graph_capture.h.
 *
 * Registry. g_reg (under its mutex) holds the pthread key, the number of attached (live) EPs and the list of
 * every thread slot. A thread slot is the pthread-key value of one thread: an array of entries (serial,
 * context), one per EP the thread ran; serial 0 marks a free entry, which the owner reuses.
 *
 * Who touches a slot. Its owning thread looks contexts up without any lock (epabi_gc_find, the hot path of
 * every callback and fused-node Compute) and adds a context under the slot's lock (first use of an EP on
 * the thread: rare). epabi_gc_detach, on whatever thread releases an EP, walks every registered slot under
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
#include "graph_capture.h"

#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_factory.h"

#define MIN_RUNS_OPTION "min_num_runs_before_cuda_graph_capture"

/* ---- captured graphs and the graph set --------------------------------------------------------------- */

struct epabi_graph {
    int id;
    struct epabi_stream_graph* launches;   /* owned; points into pool */
    struct epabi_arena_pool* pool;         /* owned: every block the capturing run took */
    uint64_t replays;
};

static void graph_destroy(struct epabi_graph* g) {
    if (g == NULL) return;
    epabi_stream_graph_destroy(g->launches);   /* first: its launches point into the pool */
    epabi_arena_pool_destroy(g->pool);
    free(g);
}

static size_t set_index(const struct epabi_graph_set* set, int id) {
    for (size_t i = 0; i < set->n; ++i)
        if (set->graphs[i]->id == id) return i;
    return SIZE_MAX;
}

OrtStatus* epabi_graph_set_put(const struct epabi_api* api, struct epabi_graph_set* set, int id,
                               struct epabi_graph* graph) {
    if (set_index(set, id) != SIZE_MAX)
        return epabi_error(api, ORT_FAIL,
                           EPABI_EP_NAME ": a graph is already captured for annotation id %d; use another "
                           "gpu_graph_id or release that graph first", id);
    if (set->n == set->cap) {
        size_t cap = set->cap == 0 ? 4 : 2 * set->cap;
        struct epabi_graph** grown = realloc(set->graphs, cap * sizeof *grown);
        if (grown == NULL)
            return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory storing the graph of annotation id %d",
                               id);
        set->graphs = grown;
        set->cap = cap;
    }
    graph->id = id;
    set->graphs[set->n++] = graph;
    return NULL;
}

struct epabi_graph* epabi_graph_set_find(const struct epabi_graph_set* set, int id) {
    size_t i = set_index(set, id);
    return i != SIZE_MAX ? set->graphs[i] : NULL;
}

bool epabi_graph_set_remove(struct epabi_graph_set* set, int id) {
    size_t i = set_index(set, id);
    if (i == SIZE_MAX) return false;
    graph_destroy(set->graphs[i]);
    set->graphs[i] = set->graphs[--set->n];
    return true;
}

void epabi_graph_set_clear(struct epabi_graph_set* set) {
    for (size_t i = 0; i < set->n; ++i) graph_destroy(set->graphs[i]);
    free(set->graphs);
    memset(set, 0, sizeof *set);
}

/* ---- graph manager ------------------------------------------------------------------------------------ */

struct run_count {
    int id;
    int runs;
};

struct epabi_graph_manager {
    const struct epabi_api* api;
    struct epabi_stream* stream;           /* not owned */
    struct epabi_arena* arena;             /* one reference */
    int min_runs;
    struct epabi_graph_set set;
    struct run_count* counts;
    size_t n_counts, cap_counts;
    bool capturing;
    int capture_id;
    struct epabi_arena_pool* capture_pool; /* owned while capturing */
};

struct epabi_graph_manager* epabi_graph_manager_create(const struct epabi_api* api, struct epabi_stream* stream,
                                                       struct epabi_arena* arena, int min_runs) {
    struct epabi_graph_manager* m = calloc(1, sizeof *m);
    if (m == NULL) return NULL;
    m->api = api;
    m->stream = stream;
    m->arena = arena;
    m->min_runs = min_runs < 0 ? 0 : min_runs;
    epabi_arena_retain(arena);
    return m;
}

void epabi_graph_manager_destroy(struct epabi_graph_manager* m) {
    if (m == NULL) return;
    epabi_graph_manager_reset(m);
    epabi_arena_release(m->arena);
    free(m);
}

bool epabi_graph_manager_is_captured(const struct epabi_graph_manager* m, int id) {
    return epabi_graph_set_find(&m->set, id) != NULL;
}

int epabi_graph_manager_regular_runs(const struct epabi_graph_manager* m, int id) {
    for (size_t i = 0; i < m->n_counts; ++i)
        if (m->counts[i].id == id) return m->counts[i].runs;
    return 0;
}

bool epabi_graph_manager_capture_allowed(const struct epabi_graph_manager* m, int id) {
    return id != EPABI_GRAPH_ID_SKIP && !epabi_graph_manager_is_captured(m, id) &&
           epabi_graph_manager_regular_runs(m, id) >= m->min_runs;
}

bool epabi_graph_manager_is_capturing(const struct epabi_graph_manager* m, int* id) {
    if (id != NULL) *id = m->capturing ? m->capture_id : 0;
    return m->capturing;
}

void epabi_graph_manager_count_regular_run(struct epabi_graph_manager* m, int id) {
    if (id == EPABI_GRAPH_ID_SKIP || epabi_graph_manager_is_captured(m, id)) return;
    for (size_t i = 0; i < m->n_counts; ++i) {
        if (m->counts[i].id != id) continue;
        if (m->counts[i].runs < INT_MAX) m->counts[i].runs++;
        return;
    }
    if (m->n_counts == m->cap_counts) {
        size_t cap = m->cap_counts == 0 ? 4 : 2 * m->cap_counts;
        struct run_count* grown = realloc(m->counts, cap * sizeof *grown);
        if (grown == NULL) return;   /* the run is not counted: capture merely comes one run later */
        m->counts = grown;
        m->cap_counts = cap;
    }
    m->counts[m->n_counts++] = (struct run_count){id, 1};
}

OrtStatus* epabi_graph_manager_capture_begin(struct epabi_graph_manager* m, int id) {
    if (m->capturing)
        return epabi_error(m->api, ORT_FAIL,
                           EPABI_EP_NAME ": cannot begin a graph capture of annotation id %d: the capture of "
                           "annotation id %d is still open on this thread's stream; captures do not nest",
                           id, m->capture_id);
    if (id == EPABI_GRAPH_ID_SKIP)
        return epabi_error(m->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": annotation id -1 means 'never capture'; it cannot be captured");
    if (epabi_graph_manager_is_captured(m, id))
        return epabi_error(m->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": annotation id %d already has a captured graph on this thread", id);
    struct epabi_arena_pool* pool = epabi_arena_pool_create(m->arena);
    if (pool == NULL)
        return epabi_error(m->api, ORT_FAIL, EPABI_EP_NAME ": out of memory beginning the capture of annotation id %d",
                           id);
    OrtStatus* st = epabi_stream_begin_capture(m->stream);
    if (st != NULL) {
        epabi_arena_pool_destroy(pool);
        return st;
    }
    m->capturing = true;
    m->capture_id = id;
    m->capture_pool = pool;
    return NULL;
}

void epabi_graph_manager_capture_abort(struct epabi_graph_manager* m) {
    if (!m->capturing) return;
    epabi_stream_abort_capture(m->stream);
    epabi_arena_pool_destroy(m->capture_pool);
    m->capture_pool = NULL;
    m->capturing = false;
}

OrtStatus* epabi_graph_manager_capture_end(struct epabi_graph_manager* m, int id) {
    if (!m->capturing)
        return epabi_error(m->api, ORT_FAIL,
                           EPABI_EP_NAME ": end of the graph capture of annotation id %d, which was never begun", id);
    if (m->capture_id != id) {
        int open = m->capture_id;
        epabi_graph_manager_capture_abort(m);
        return epabi_error(m->api, ORT_FAIL,
                           EPABI_EP_NAME ": end of the graph capture of annotation id %d while annotation id %d was "
                           "being captured; that capture was dropped", id, open);
    }
    struct epabi_arena_pool* pool = m->capture_pool;
    m->capture_pool = NULL;
    m->capturing = false;
    struct epabi_stream_graph* launches = NULL;
    OrtStatus* st = epabi_stream_end_capture(m->stream, &launches);
    struct epabi_graph* g = NULL;
    if (st == NULL) {
        g = calloc(1, sizeof *g);
        if (g == NULL)
            st = epabi_error(m->api, ORT_FAIL,
                             EPABI_EP_NAME ": out of memory ending the capture of annotation id %d", id);
    }
    if (st == NULL) {
        g->launches = launches;
        g->pool = pool;
        st = epabi_graph_set_put(m->api, &m->set, id, g);
        if (st == NULL) return NULL;
        graph_destroy(g);   /* owns launches and pool now */
        return st;
    }
    free(g);
    epabi_stream_graph_destroy(launches);
    epabi_arena_pool_destroy(pool);
    return st;
}

struct epabi_arena_pool* epabi_graph_manager_capture_pool(const struct epabi_graph_manager* m) {
    return m->capturing ? m->capture_pool : NULL;
}

OrtStatus* epabi_graph_manager_replay(struct epabi_graph_manager* m, int id, bool sync) {
    struct epabi_graph* g = epabi_graph_set_find(&m->set, id);
    if (g == NULL)
        return epabi_error(m->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": no graph was captured for annotation id %d on this thread", id);
    EPABI_RETURN_IF_ERROR(epabi_stream_replay(m->stream, g->launches, sync));
    g->replays++;
    return NULL;
}

uint64_t epabi_graph_manager_replays(const struct epabi_graph_manager* m, int id) {
    const struct epabi_graph* g = epabi_graph_set_find(&m->set, id);
    return g != NULL ? g->replays : 0;
}

size_t epabi_graph_manager_launches(const struct epabi_graph_manager* m, int id) {
    const struct epabi_graph* g = epabi_graph_set_find(&m->set, id);
    return g != NULL ? epabi_stream_graph_launches(g->launches) : 0;
}

void epabi_graph_manager_memory(const struct epabi_graph_manager* m, int id, struct epabi_arena_pool_stats* out) {
    const struct epabi_graph* g = epabi_graph_set_find(&m->set, id);
    memset(out, 0, sizeof *out);
    if (g != NULL) epabi_arena_pool_get_stats(g->pool, out);
}

bool epabi_graph_manager_release(struct epabi_graph_manager* m, int id) {
    for (size_t i = 0; i < m->n_counts; ++i) {
        if (m->counts[i].id != id) continue;
        m->counts[i] = m->counts[--m->n_counts];
        break;
    }
    return epabi_graph_set_remove(&m->set, id);
}

void epabi_graph_manager_reset(struct epabi_graph_manager* m) {
    epabi_graph_manager_capture_abort(m);
    epabi_graph_set_clear(&m->set);
    free(m->counts);
    m->counts = NULL;
    m->n_counts = m->cap_counts = 0;
}

/* ---- per-thread contexts --------------------------------------------------------------------------------- */

struct epabi_thread_context {
    struct epabi_thread_context* next;     /* only on a detach's list of contexts to free */
    uint64_t serial;                       /* the EP it belongs to (weak) */
    struct epabi_stream* stream;           /* owned wrapper; a user's handle inside is never destroyed */
    struct epabi_graph_manager* manager;   /* owned; destroyed before the stream */
    struct epabi_arena* arena;             /* borrowed (the manager holds a reference) */
    struct epabi_arena_stats watermark;    /* arena stats right before the open capture began */
    size_t device_free;                    /* CUDA: the device's free bytes (cuMemGetInfo) at the same moment */
    /* the run in progress on this thread */
    bool run_failed;                       /* a fused node failed since OnRunStart */
    unsigned computes;                     /* fused-node runs since OnRunStart */
};

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

size_t epabi_gc_live_contexts(void) {
    return atomic_load(&g_live_contexts);
}

static void context_free(struct epabi_thread_context* tc) {
    epabi_graph_manager_destroy(tc->manager);   /* graphs first: they were captured on the stream */
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
struct epabi_thread_context* epabi_gc_find(const struct epabi_gc_owner* owner) {
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
            return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory for a thread's graph context");
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
static OrtStatus* context_get(const struct epabi_gc_owner* owner, struct epabi_thread_context** out) {
    const struct epabi_api* api = owner->api;
    *out = epabi_gc_find(owner);
    if (*out != NULL) return NULL;
    if (owner->serial == 0 || !g_reg.key_live)
        return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": graph capture was not set up for this EP");
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
        if (tc->stream != NULL)
            tc->manager = epabi_graph_manager_create(api, tc->stream, owner->arena, owner->min_runs);
    }
    if (tc == NULL || tc->stream == NULL || tc->manager == NULL || !slot_add(slot, tc)) {
        if (tc != NULL) context_free(tc);   /* NULL manager and stream are ignored */
        if (stream_status != NULL) return stream_status;
        return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory for a thread's graph context");
    }
    EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_VERBOSE,
              EPABI_EP_NAME ": created this thread's graph context (%s stream, " MIN_RUNS_OPTION "=%d)",
              epabi_stream_backend_name(tc->stream), owner->min_runs);
    if (epabi_stream_is_user_owned(tc->stream))
        EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_INFO,
                  EPABI_EP_NAME ": graph stream of this thread adopts the user's stream user_compute_stream=0x%" PRIxPTR
                  " (%s backend; user-owned, so it is not destroyed by the EP)",
                  epabi_stream_handle(tc->stream), epabi_stream_backend_name(tc->stream));
    *out = tc;
    return NULL;
}

OrtStatus* epabi_gc_attach(struct epabi_gc_owner* owner) {
    owner->serial = 0;
    pthread_mutex_lock(&g_reg.lock);
    OrtStatus* st = NULL;
    if (!g_reg.key_live) {
        if (pthread_key_create(&g_reg.key, slot_destructor) == 0) g_reg.key_live = true;
        else st = epabi_error(owner->api, ORT_FAIL, EPABI_EP_NAME ": no thread-local key for graph capture");
    }
    if (st == NULL) {
        owner->serial = atomic_fetch_add(&g_next_serial, 1);
        g_reg.attached++;
    }
    pthread_mutex_unlock(&g_reg.lock);
    return st;
}

void epabi_gc_detach(struct epabi_gc_owner* owner) {
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

/* ---- the OrtEp callbacks ------------------------------------------------------------------------------- */

int epabi_gc_annotation_id(const struct epabi_api* api, const OrtRunOptions* run_options) {
    if (run_options == NULL || api->ort->GetRunConfigEntry == NULL) return EPABI_GRAPH_ID_DEFAULT;
    const char* v = api->ort->GetRunConfigEntry(run_options, "gpu_graph_id");
    if (v == NULL) return EPABI_GRAPH_ID_DEFAULT;
    const char* p = v;
    bool negative = *p == '-';
    if (negative) ++p;
    if (*p < '0' || *p > '9') return EPABI_GRAPH_ID_DEFAULT;
    long long n = 0;
    for (; *p >= '0' && *p <= '9'; ++p) {
        n = n * 10 + (*p - '0');
        if (n > (long long)INT_MAX + 1) return EPABI_GRAPH_ID_DEFAULT;
    }
    if (*p != '\0') return EPABI_GRAPH_ID_DEFAULT;
    if (negative) n = -n;
    if (n > INT_MAX) return EPABI_GRAPH_ID_DEFAULT;
    return (int)n;
}

OrtStatus* epabi_gc_run_start(const struct epabi_gc_owner* owner, const OrtRunOptions* run_options) {
    const struct epabi_api* api = owner->api;
    int id = epabi_gc_annotation_id(api, run_options);
    struct epabi_thread_context* tc = NULL;
    EPABI_RETURN_IF_ERROR(context_get(owner, &tc));
    struct epabi_graph_manager* m = tc->manager;
    int open = 0;
    if (epabi_graph_manager_is_capturing(m, &open)) {
        /* a run inside a run on this thread, or a run whose OnRunEnd never came: either way the open
         * capture cannot be trusted; drop it so the next run starts clean */
        epabi_graph_manager_capture_abort(m);
        return epabi_error(api, ORT_FAIL,
                           EPABI_EP_NAME ": OnRunStart (annotation id %d) found the graph capture of annotation id "
                           "%d still open on this thread; captures do not nest, so that capture was dropped",
                           id, open);
    }
    tc->run_failed = false;
    tc->computes = 0;
    if (!epabi_graph_manager_capture_allowed(m, id)) return NULL;
    epabi_arena_get_stats(tc->arena, &tc->watermark);
    tc->device_free = 0;
    if (owner->device_free_bytes != NULL && !owner->device_free_bytes(owner, &tc->device_free)) tc->device_free = 0;
    EPABI_RETURN_IF_ERROR(epabi_graph_manager_capture_begin(m, id));
    EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_INFO,
              EPABI_EP_NAME ": capturing graph of annotation id %d on this thread after %d regular run(s)", id,
              epabi_graph_manager_regular_runs(m, id));
    return NULL;
}

/* Allocation-during-capture detector: chunks the arena had to reserve from the system while capturing mean
 * the warm-up runs had not reached the steady state (or another thread allocated meanwhile). */
static void check_watermark(const struct epabi_gc_owner* owner, const struct epabi_thread_context* tc, int id) {
    struct epabi_arena_stats now;
    size_t free_now = 0;
    if (tc->device_free > 0 && !owner->mempool && owner->device_free_bytes(owner, &free_now) &&
        free_now < tc->device_free) {
        /* the device-wide view: free bytes (cudaMemGetInfo) before and after the capture window, whoever
         * allocated (arena chunks, cuBLAS, the driver; another process counts too) */
        EPABI_LOG(owner->api, owner->logger, ORT_LOGGING_LEVEL_WARNING,
                  EPABI_EP_NAME ": allocated memory during graph capture of annotation id %d: the device's free "
                  "memory dropped by %zu bytes while capturing (cuMemGetInfo); raise " MIN_RUNS_OPTION " (now %d) if "
                  "this repeats", id, tc->device_free - free_now, owner->min_runs);
    }
    epabi_arena_get_stats(tc->arena, &now);
    if (now.num_reserves <= tc->watermark.num_reserves) return;
    uint64_t chunks = now.num_reserves - tc->watermark.num_reserves;
    uint64_t bytes = now.bytes_reserved > tc->watermark.bytes_reserved
                         ? now.bytes_reserved - tc->watermark.bytes_reserved : 0;
    EPABI_LOG(owner->api, owner->logger, ORT_LOGGING_LEVEL_WARNING,
              EPABI_EP_NAME ": allocated memory during graph capture of annotation id %d: the arena reserved %" PRIu64
              " new chunk(s) (%" PRIu64 " bytes) from the system while capturing, so the warm-up runs had not "
              "reached a steady state (another thread allocating at the same time counts too); raise "
              MIN_RUNS_OPTION " (now %d) if this repeats", id, chunks, bytes, owner->min_runs);
}

OrtStatus* epabi_gc_run_end(const struct epabi_gc_owner* owner, const OrtRunOptions* run_options, bool sync_stream) {
    const struct epabi_api* api = owner->api;
    struct epabi_thread_context* tc = epabi_gc_find(owner);
    if (tc == NULL) return NULL;   /* OnRunStart never set this thread up: nothing to end */
    struct epabi_graph_manager* m = tc->manager;
    int id = epabi_gc_annotation_id(api, run_options);
    bool replayed = false;
    OrtStatus* st = NULL;
    int open = 0;
    if (epabi_graph_manager_is_capturing(m, &open)) {
        if (!tc->run_failed && tc->computes != owner->fused_nodes) {
            /* fused nodes that ran on other threads (parallel execution) were not recorded: a replay
             * would leave their outputs stale, so this capture cannot be kept */
            epabi_graph_manager_capture_abort(m);
            st = epabi_error(api, ORT_FAIL,
                             EPABI_EP_NAME ": graph capture of annotation id %d recorded %u of the %u fused node(s) "
                             "on the thread that runs the session; graph capture needs sequential execution "
                             "(ExecutionMode ORT_SEQUENTIAL)", open, tc->computes, owner->fused_nodes);
        } else if (tc->run_failed) {
            epabi_graph_manager_capture_abort(m);
            EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_WARNING,
                      EPABI_EP_NAME ": graph capture of annotation id %d failed (a fused node failed during the "
                      "capturing run); nothing was kept, the next run captures again", open);
        } else {
            st = epabi_graph_manager_capture_end(m, open);
            if (st == NULL) {
                check_watermark(owner, tc, open);
                struct epabi_arena_pool_stats mem;
                epabi_graph_manager_memory(m, open, &mem);
                EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_INFO,
                          EPABI_EP_NAME ": captured graph of annotation id %d: %zu launch(es), %" PRIu64 " arena "
                          "block(s) (%" PRIu64 " bytes) kept for replays", open,
                          epabi_graph_manager_launches(m, open), mem.blocks, mem.bytes);
                /* the launches already executed while capturing; replaying once makes the capturing run's
                 * outputs come from the graph itself, as on CUDA, and proves the recording replays */
                st = epabi_graph_manager_replay(m, open, sync_stream);
                if (st == NULL) {
                    replayed = true;
                    EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_VERBOSE,
                              EPABI_EP_NAME ": replayed annotation id %d once right after capture", open);
                } else {
                    epabi_graph_manager_release(m, open);
                    EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_WARNING,
                              EPABI_EP_NAME ": graph capture of annotation id %d failed (its first replay failed); "
                              "nothing was kept, the next run captures again", open);
                }
            } else {
                EPABI_LOG(api, owner->logger, ORT_LOGGING_LEVEL_WARNING,
                          EPABI_EP_NAME ": graph capture of annotation id %d failed (%s); nothing was kept, the next "
                          "run captures again", open, api->ort->GetErrorMessage(st));
            }
        }
    } else if (!tc->run_failed) {
        epabi_graph_manager_count_regular_run(m, id);
    }
    tc->run_failed = false;
    tc->computes = 0;
    if (st == NULL && sync_stream && !replayed) st = epabi_stream_synchronize(tc->stream);
    return st;
}

bool epabi_gc_is_captured(const struct epabi_gc_owner* owner, int id) {
    const struct epabi_thread_context* tc = epabi_gc_find(owner);
    return tc != NULL && epabi_graph_manager_is_captured(tc->manager, id);
}

OrtStatus* epabi_gc_replay(const struct epabi_gc_owner* owner, int id) {
    struct epabi_thread_context* tc = epabi_gc_find(owner);
    if (tc == NULL || !epabi_graph_manager_is_captured(tc->manager, id))
        return epabi_error(owner->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": ReplayGraph: no graph was captured for annotation id %d on this thread",
                           id);
    EPABI_RETURN_IF_ERROR(epabi_graph_manager_replay(tc->manager, id, true));
    EPABI_LOG(owner->api, owner->logger, ORT_LOGGING_LEVEL_VERBOSE,
              EPABI_EP_NAME ": ReplayGraph replayed annotation id %d (replay %" PRIu64 " of this graph on this thread)",
              id, epabi_graph_manager_replays(tc->manager, id));
    return NULL;
}

OrtStatus* epabi_gc_release_graph(const struct epabi_gc_owner* owner, int id) {
    struct epabi_thread_context* tc = epabi_gc_find(owner);
    int open = 0;
    if (tc != NULL && epabi_graph_manager_is_capturing(tc->manager, &open) && open == id)
        return epabi_error(owner->api, ORT_FAIL,
                           EPABI_EP_NAME ": ReleaseCapturedGraph: annotation id %d is being captured right now", id);
    if (tc == NULL || !epabi_graph_manager_release(tc->manager, id))
        return epabi_error(owner->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": ReleaseCapturedGraph: no graph was captured for annotation id %d on this "
                           "thread", id);
    EPABI_LOG(owner->api, owner->logger, ORT_LOGGING_LEVEL_INFO,
              EPABI_EP_NAME ": released the graph of annotation id %d on this thread; it will be captured again", id);
    return NULL;
}

OrtStatus* epabi_gc_sync(const struct epabi_gc_owner* owner) {
    struct epabi_thread_context* tc = epabi_gc_find(owner);
    return tc != NULL ? epabi_stream_synchronize(tc->stream) : NULL;
}

void epabi_gc_run_env(const struct epabi_gc_owner* owner, struct epabi_thread_context* tc, struct epabi_run_env* env) {
    env->stream = tc != NULL ? tc->stream : NULL;
    env->capture_pool = tc != NULL ? epabi_graph_manager_capture_pool(tc->manager) : NULL;
    env->mempool = owner->mempool;
    /* stream-ordered allocations need no capture pool: inside a capture they become the graph's memory nodes */
    if (env->mempool) env->capture_pool = NULL;
}

OrtStatus* epabi_gc_get(const struct epabi_gc_owner* owner, struct epabi_thread_context** out) {
    return context_get(owner, out);
}

struct epabi_stream* epabi_gc_stream(struct epabi_thread_context* tc) {
    return tc != NULL ? tc->stream : NULL;
}

void epabi_gc_note_compute(struct epabi_thread_context* tc, bool ok) {
    if (tc == NULL) return;
    tc->computes++;
    if (!ok) tc->run_failed = true;
}
