/*
 * graph_capture.c - see graph_capture.h.
 */
#include "graph_capture.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_registry.h"
#include "ep_factory.h"

/* ---- held allocator blocks ---------------------------------------------------------------------------- */

/* The allocator blocks (alloc_registry.h) one capture holds: the bases its holds were taken on. */
struct hold_list {
    void** bases;
    size_t n, cap;
};

static bool hold_list_push(struct hold_list* l, void* base) {
    if (l->n == l->cap) {
        size_t cap = l->cap == 0 ? 8 : 2 * l->cap;
        void** grown = realloc(l->bases, cap * sizeof *grown);
        if (grown == NULL) return false;
        l->bases = grown;
        l->cap = cap;
    }
    l->bases[l->n++] = base;
    return true;
}

/* Lets go of every hold (deferred frees of the host happen now) and empties the list. */
static void hold_list_drop(struct hold_list* l, struct epabi_alloc_registry* blocks) {
    for (size_t i = 0; i < l->n; ++i) epabi_alloc_registry_drop(blocks, l->bases[i]);
    free(l->bases);
    memset(l, 0, sizeof *l);
}

/* ---- captured graphs and the graph set --------------------------------------------------------------- */

struct epabi_graph {
    int id;
    struct epabi_stream_graph* launches;   /* owned; points into pool and into held blocks */
    struct epabi_arena_pool* pool;         /* owned: every block the capturing run took */
    struct epabi_alloc_registry* blocks;   /* the manager's (it destroys its graphs before letting it go) */
    struct hold_list holds;                /* the host's buffers the launches read or write */
    uint64_t replays;
    unsigned nodes;                        /* ONNX nodes recorded (epabi_graph_manager_set_nodes) */
};

static void graph_destroy(struct epabi_graph* g) {
    if (g == NULL) return;
    epabi_stream_graph_destroy(g->launches);   /* first: its launches point into the pool and the held blocks */
    hold_list_drop(&g->holds, g->blocks);
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

enum { HOST_OUTPUTS_KEPT = 64 };   /* host-allocated output addresses remembered per id (the newest) */

struct run_count {
    int id;
    int runs;
    const void* host_outputs[HOST_OUTPUTS_KEPT];   /* a ring: output buffers the host allocated for a run of id */
    unsigned n_host_outputs, next_host_output;
};

/* A fused output the open capture computes in its pool instead of the host's buffer (graph_capture.h). */
struct redirect {
    const void* host;
    void* block;
};

struct epabi_graph_manager {
    const struct epabi_api* api;
    struct epabi_stream* stream;           /* not owned */
    struct epabi_arena* arena;             /* one reference */
    struct epabi_alloc_registry* blocks;   /* one reference, or NULL */
    int min_runs;
    struct epabi_graph_set set;
    struct run_count* counts;
    size_t n_counts, cap_counts;
    int run_id;                            /* the annotation id of the run in progress */
    bool capturing;
    int capture_id;
    struct epabi_arena_pool* capture_pool; /* owned while capturing */
    struct hold_list capture_holds;        /* the open capture's holds */
    struct redirect* redirects;
    size_t n_redirects, cap_redirects;
    size_t kept, last_kept;                /* blocks keep_block gave the open (the last closed) capture */
};

struct epabi_graph_manager* epabi_graph_manager_create(const struct epabi_api* api, struct epabi_stream* stream,
                                                       struct epabi_arena* arena, struct epabi_alloc_registry* blocks,
                                                       int min_runs) {
    struct epabi_graph_manager* m = calloc(1, sizeof *m);
    if (m == NULL) return NULL;
    m->api = api;
    m->stream = stream;
    m->arena = arena;
    m->blocks = blocks;
    m->min_runs = min_runs < 0 ? 0 : min_runs;
    epabi_arena_retain(arena);
    if (blocks != NULL) epabi_alloc_registry_retain(blocks);
    return m;
}

void epabi_graph_manager_destroy(struct epabi_graph_manager* m) {
    if (m == NULL) return;
    epabi_graph_manager_reset(m);
    free(m->redirects);
    epabi_arena_release(m->arena);
    epabi_alloc_registry_release(m->blocks);
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
    m->counts[m->n_counts] = (struct run_count){.id = id, .runs = 1};
    m->n_counts++;
}

static struct run_count* count_of(struct epabi_graph_manager* m, int id, bool create) {
    for (size_t i = 0; i < m->n_counts; ++i)
        if (m->counts[i].id == id) return &m->counts[i];
    if (!create) return NULL;
    if (m->n_counts == m->cap_counts) {
        size_t cap = m->cap_counts == 0 ? 4 : 2 * m->cap_counts;
        struct run_count* grown = realloc(m->counts, cap * sizeof *grown);
        if (grown == NULL) return NULL;
        m->counts = grown;
        m->cap_counts = cap;
    }
    m->counts[m->n_counts] = (struct run_count){.id = id, .runs = 0};
    return &m->counts[m->n_counts++];
}

/* ---- the host's buffers of a run ----------------------------------------------------------------------- */

void epabi_graph_manager_run_begins(struct epabi_graph_manager* m, int id) {
    m->run_id = id;
}

bool epabi_graph_manager_hold(struct epabi_graph_manager* m, const void* p, size_t bytes) {
    if (!m->capturing || m->blocks == NULL) return false;
    void* base = epabi_alloc_registry_hold(m->blocks, p, bytes);
    if (base == NULL) return false;
    if (!hold_list_push(&m->capture_holds, base)) {
        epabi_alloc_registry_drop(m->blocks, base);
        return false;
    }
    return true;
}

void epabi_graph_manager_note_host_output(struct epabi_graph_manager* m, const void* p) {
    if (m->capturing || m->run_id == EPABI_GRAPH_ID_SKIP || p == NULL) return;
    struct run_count* c = count_of(m, m->run_id, true);
    if (c == NULL) return;   /* out of memory: a later capture of the id treats fewer buffers as the host's */
    for (unsigned i = 0; i < c->n_host_outputs; ++i)
        if (c->host_outputs[i] == p) return;
    c->host_outputs[c->next_host_output] = p;
    c->next_host_output = (c->next_host_output + 1) % HOST_OUTPUTS_KEPT;
    if (c->n_host_outputs < HOST_OUTPUTS_KEPT) c->n_host_outputs++;
}

bool epabi_graph_manager_was_host_output(const struct epabi_graph_manager* m, const void* p) {
    for (size_t i = 0; i < m->n_counts; ++i) {
        const struct run_count* c = &m->counts[i];
        if (c->id != m->run_id) continue;
        for (unsigned k = 0; k < c->n_host_outputs; ++k)
            if (c->host_outputs[k] == p) return true;
    }
    return false;
}

void* epabi_graph_manager_keep_block(struct epabi_graph_manager* m, size_t bytes) {
    if (!m->capturing) return NULL;
    void* block = epabi_arena_pool_alloc(m->capture_pool, bytes);
    if (block != NULL) m->kept++;
    return block;
}

size_t epabi_graph_manager_kept_blocks(const struct epabi_graph_manager* m) {
    return m->last_kept;
}

bool epabi_graph_manager_redirect(struct epabi_graph_manager* m, const void* host, void* block) {
    if (!m->capturing) return false;
    if (m->n_redirects == m->cap_redirects) {
        size_t cap = m->cap_redirects == 0 ? 8 : 2 * m->cap_redirects;
        struct redirect* grown = realloc(m->redirects, cap * sizeof *grown);
        if (grown == NULL) return false;
        m->redirects = grown;
        m->cap_redirects = cap;
    }
    m->redirects[m->n_redirects++] = (struct redirect){host, block};
    return true;
}

void* epabi_graph_manager_redirected(const struct epabi_graph_manager* m, const void* host) {
    if (!m->capturing) return NULL;
    for (size_t i = m->n_redirects; i-- > 0;)
        if (m->redirects[i].host == host) return m->redirects[i].block;
    return NULL;
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
    m->run_id = id;
    m->capture_pool = pool;
    m->n_redirects = 0;
    m->kept = 0;
    return NULL;
}

void epabi_graph_manager_capture_abort(struct epabi_graph_manager* m) {
    if (!m->capturing) return;
    epabi_stream_abort_capture(m->stream);
    hold_list_drop(&m->capture_holds, m->blocks);
    epabi_arena_pool_destroy(m->capture_pool);
    m->capture_pool = NULL;
    m->n_redirects = 0;
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
    struct hold_list holds = m->capture_holds;
    memset(&m->capture_holds, 0, sizeof m->capture_holds);
    m->capture_pool = NULL;
    m->n_redirects = 0;
    m->last_kept = m->kept;
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
        g->blocks = m->blocks;
        g->holds = holds;
        st = epabi_graph_set_put(m->api, &m->set, id, g);
        if (st == NULL) return NULL;
        graph_destroy(g);   /* owns launches, holds and pool now */
        return st;
    }
    free(g);
    epabi_stream_graph_destroy(launches);
    hold_list_drop(&holds, m->blocks);
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

OrtStatus* epabi_graph_manager_replay_timed(struct epabi_graph_manager* m, int id, int64_t* phase_ns) {
    struct epabi_graph* g = epabi_graph_set_find(&m->set, id);
    if (g == NULL)
        return epabi_error(m->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": no graph was captured for annotation id %d on this thread", id);
    int64_t mark = phase_ns != NULL ? epabi_callback_now_ns() : 0;
    EPABI_RETURN_IF_ERROR(epabi_stream_replay(m->stream, g->launches, false));
    epabi_callback_phase_done(phase_ns, EPABI_REPLAY_LAUNCH, &mark);
    EPABI_RETURN_IF_ERROR(epabi_stream_wait(m->stream));
    epabi_callback_phase_done(phase_ns, EPABI_REPLAY_WAIT, &mark);
    EPABI_RETURN_IF_ERROR(epabi_stream_take_error(m->stream));
    epabi_callback_phase_done(phase_ns, EPABI_REPLAY_ERROR_CHECK, &mark);
    g->replays++;
    return NULL;
}

uint64_t epabi_graph_manager_replays(const struct epabi_graph_manager* m, int id) {
    const struct epabi_graph* g = epabi_graph_set_find(&m->set, id);
    return g != NULL ? g->replays : 0;
}

void epabi_graph_manager_set_nodes(struct epabi_graph_manager* m, int id, unsigned nodes) {
    struct epabi_graph* g = epabi_graph_set_find(&m->set, id);
    if (g != NULL) g->nodes = nodes;
}

unsigned epabi_graph_manager_nodes(const struct epabi_graph_manager* m, int id) {
    const struct epabi_graph* g = epabi_graph_set_find(&m->set, id);
    return g != NULL ? g->nodes : 0;
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
