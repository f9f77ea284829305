/*
 * stream.c - see stream.h: the backend-independent wrappers and the host backend.
 *
 * Host recording layout: one growable array of records {fn, offset, size} and one growable byte buffer
 * holding every argument block at an offset aligned for any object (max_align_t), so a copy is as well
 * aligned as the caller's struct was. Offsets stay valid when the buffer grows.
 */
#include "stream.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ep_factory.h"

/* ---- backend-independent wrappers --------------------------------------------------------------------- */

void epabi_stream_destroy(struct epabi_stream* s) {
    if (s == NULL) return;
    if (s->capturing) epabi_stream_abort_capture(s);
    s->ops->destroy(s);
}

OrtStatus* epabi_stream_launch(struct epabi_stream* s, enum epabi_launch_kind kind, epabi_launch_fn fn,
                               const void* args, size_t args_size) {
    if (fn == NULL)
        return epabi_error(s->api, ORT_EP_FAIL, EPABI_EP_NAME ": a NULL function was launched on the %s stream",
                           s->ops->name);
    OrtStatus* st = s->ops->launch(s, kind, fn, args, args_size);
    if (st == NULL) s->launches++;
    return st;
}

OrtStatus* epabi_stream_begin_capture(struct epabi_stream* s) {
    if (s->capturing)
        return epabi_error(s->api, ORT_FAIL,
                           EPABI_EP_NAME ": the %s stream is already capturing; graph captures do not nest",
                           s->ops->name);
    EPABI_RETURN_IF_ERROR(s->ops->begin_capture(s));
    s->capturing = true;
    return NULL;
}

OrtStatus* epabi_stream_end_capture(struct epabi_stream* s, struct epabi_stream_graph** out) {
    *out = NULL;
    if (!s->capturing)
        return epabi_error(s->api, ORT_FAIL, EPABI_EP_NAME ": end of a graph capture on the %s stream, which is "
                           "not capturing", s->ops->name);
    s->capturing = false;
    OrtStatus* st = s->ops->end_capture(s, out);
    if (st != NULL) *out = NULL;
    return st;
}

void epabi_stream_abort_capture(struct epabi_stream* s) {
    if (!s->capturing) return;
    s->ops->abort_capture(s);
    s->capturing = false;
}

OrtStatus* epabi_stream_replay(struct epabi_stream* s, const struct epabi_stream_graph* g, bool sync) {
    if (g == NULL || g->stream != s || g->ops != s->ops)
        return epabi_error(s->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": a graph can only be replayed on the %s stream that captured it",
                           s->ops->name);
    if (s->capturing)
        return epabi_error(s->api, ORT_INVALID_ARGUMENT,
                           EPABI_EP_NAME ": cannot replay a graph on the %s stream while it is capturing",
                           s->ops->name);
    EPABI_RETURN_IF_ERROR(s->ops->replay(s, g));
    s->replaying = true;
    return sync ? epabi_stream_synchronize(s) : NULL;
}

OrtStatus* epabi_stream_wait(struct epabi_stream* s) {
    OrtStatus* st = s->ops->synchronize(s);
    if (st == NULL) s->syncs++;
    return st;
}

OrtStatus* epabi_stream_synchronize(struct epabi_stream* s) {
    EPABI_RETURN_IF_ERROR(epabi_stream_wait(s));
    return epabi_stream_take_error(s);
}

OrtStatus* epabi_launch_error_status(const struct epabi_api* api, uint64_t word, bool replay) {
    const struct epabi_error_site* site = (const struct epabi_error_site*)(uintptr_t)(word & ~(uint64_t)EPABI_LAUNCH_ERR_MASK);
    const unsigned kind = (unsigned)(word & EPABI_LAUNCH_ERR_MASK);
    const char* what = kind == EPABI_LAUNCH_ERR_INDEX ? "an index is out of range"
                       : kind == EPABI_LAUNCH_ERR_DIV_ZERO ? "integer division by zero"
                                                           : "the kernel found invalid input data";
    const char* where = replay ? " (found by the kernel while replaying a captured graph)"
                               : " (found by the kernel while it ran)";
    if (site == NULL)
        return epabi_error(api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": %s%s", what, where);
    return epabi_error(api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": node '%s' (%s) in '%s': %s%s", site->node,
                       site->op, site->graph, what, where);
}

OrtStatus* epabi_stream_take_error(struct epabi_stream* s) {
    const bool replay = s->replaying;
    s->replaying = false;
    /* one load: the word is host memory on every backend (a kernel's store is visible once the work is done) */
    uint64_t word = __atomic_load_n(s->error_word, __ATOMIC_ACQUIRE);
    if (word == 0) return NULL;
    __atomic_store_n(s->error_word, 0, __ATOMIC_RELAXED);
    return epabi_launch_error_status(s->api, word, replay);
}

bool epabi_stream_check_external_capture(struct epabi_stream* s) {
    s->external_capture = s->user_owned && !s->capturing && s->ops->captured_now != NULL && s->ops->captured_now(s);
    return s->external_capture;
}

size_t epabi_stream_graph_launches(const struct epabi_stream_graph* g) {
    return g != NULL ? g->ops->graph_launches(g) : 0;
}

void epabi_stream_graph_destroy(struct epabi_stream_graph* g) {
    if (g != NULL) g->ops->graph_destroy(g);
}

/* ---- host backend ------------------------------------------------------------------------------------- */

struct host_record {
    epabi_launch_fn fn;
    size_t offset;      /* into the argument buffer */
    size_t size;
};

struct host_recording {
    struct host_record* records;
    size_t n, cap;
    unsigned char* args;   /* every record's argument block */
    size_t used, args_cap;
};

struct host_graph {
    struct epabi_stream_graph base;   /* first member */
    struct host_recording rec;
};

struct host_stream {
    struct epabi_stream base;         /* first member */
    struct host_recording rec;        /* the open capture */
    uint64_t error_word;              /* base.error_word points here */
};

static void recording_free(struct host_recording* r) {
    free(r->records);
    free(r->args);
    memset(r, 0, sizeof *r);
}

static bool recording_append(struct host_recording* r, epabi_launch_fn fn, const void* args, size_t size) {
    const size_t align = alignof(max_align_t);
    size_t offset = (r->used + align - 1) / align * align;
    if (offset < r->used || size > SIZE_MAX - offset) return false;
    if (offset + size > r->args_cap) {
        size_t cap = r->args_cap == 0 ? 4096 : r->args_cap;
        while (cap < offset + size) {
            if (cap > SIZE_MAX / 2) return false;
            cap *= 2;
        }
        unsigned char* grown = realloc(r->args, cap);
        if (grown == NULL) return false;
        r->args = grown;
        r->args_cap = cap;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap == 0 ? 64 : 2 * r->cap;
        struct host_record* grown = realloc(r->records, cap * sizeof *grown);
        if (grown == NULL) return false;
        r->records = grown;
        r->cap = cap;
    }
    if (size > 0) memcpy(r->args + offset, args, size);
    r->records[r->n++] = (struct host_record){fn, offset, size};
    r->used = offset + size;
    return true;
}

static OrtStatus* host_launch(struct epabi_stream* s, enum epabi_launch_kind kind, epabi_launch_fn fn,
                              const void* args, size_t args_size) {
    (void)kind;   /* the host function is the kernel */
    struct host_stream* h = (struct host_stream*)s;
    if (s->capturing && !recording_append(&h->rec, fn, args, args_size))
        return epabi_error(s->api, ORT_FAIL, EPABI_EP_NAME ": out of memory recording launch %zu (%zu argument "
                           "bytes) of a graph capture", h->rec.n, args_size);
    /* executed while capturing too: later run() calls of this run may read what this launch writes
     * (shape-deciding inputs, see stream.h) */
    fn(args);
    return NULL;
}

static OrtStatus* host_begin_capture(struct epabi_stream* s) {
    struct host_stream* h = (struct host_stream*)s;
    recording_free(&h->rec);
    return NULL;
}

static OrtStatus* host_end_capture(struct epabi_stream* s, struct epabi_stream_graph** out) {
    struct host_stream* h = (struct host_stream*)s;
    struct host_graph* g = calloc(1, sizeof *g);
    if (g == NULL) {
        recording_free(&h->rec);
        return epabi_error(s->api, ORT_FAIL, EPABI_EP_NAME ": out of memory ending a graph capture");
    }
    g->base.ops = s->ops;
    g->base.stream = s;
    g->rec = h->rec;                   /* the graph takes the recording */
    memset(&h->rec, 0, sizeof h->rec);
    *out = &g->base;
    return NULL;
}

static void host_abort_capture(struct epabi_stream* s) {
    recording_free(&((struct host_stream*)s)->rec);
}

static OrtStatus* host_replay(struct epabi_stream* s, const struct epabi_stream_graph* g) {
    const struct host_recording* r = &((const struct host_graph*)g)->rec;
    for (size_t i = 0; i < r->n; ++i) r->records[i].fn(r->args + r->records[i].offset);
    s->launches += r->n;
    return NULL;
}

static OrtStatus* host_synchronize(struct epabi_stream* s) {
    (void)s;   /* every launch has finished when it returns */
    return NULL;
}

static size_t host_graph_launches(const struct epabi_stream_graph* g) {
    return ((const struct host_graph*)g)->rec.n;
}

static void host_graph_destroy(struct epabi_stream_graph* g) {
    struct host_graph* hg = (struct host_graph*)g;
    recording_free(&hg->rec);
    free(hg);
}

static void host_destroy(struct epabi_stream* s) {
    struct host_stream* h = (struct host_stream*)s;
    recording_free(&h->rec);
    free(h);   /* a user's handle on the host backend is only a recorded value: nothing else to release */
}

static const struct epabi_stream_ops kHostOps = {
    .backend = EPABI_STREAM_HOST,
    .name = "host",
    .launch = host_launch,
    .begin_capture = host_begin_capture,
    .end_capture = host_end_capture,
    .abort_capture = host_abort_capture,
    .replay = host_replay,
    .synchronize = host_synchronize,
    .graph_launches = host_graph_launches,
    .graph_destroy = host_graph_destroy,
    .destroy = host_destroy,
};

struct epabi_stream* epabi_stream_host_create(const struct epabi_api* api, bool adopt_user, uintptr_t user_handle) {
    struct host_stream* h = calloc(1, sizeof *h);
    if (h == NULL) return NULL;
    h->base.ops = &kHostOps;
    h->base.api = api;
    h->base.error_word = &h->error_word;
    h->base.user_owned = adopt_user;
    h->base.handle = adopt_user ? user_handle : 0;
    return &h->base;
}
