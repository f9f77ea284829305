/*
 * backend_software.c - the CPU software adapter as a backend (backend.h): kernels run on the calling thread in
 * host memory, launches execute at once, nothing is asynchronous.
 *
 * Memory. By default the adapter computes in whatever host memory the host hands it (no memory info, no
 * copies). With EPABI_SOFTWARE_DEVICE_MEMORY=device it declares its own memory (EPABI_MEMORY_SOFTWARE), served by
 * the factory's arena and copied with memmove, and behaves like a discrete device: plans keep their constants
 * there, stage host-resident fused-node inputs and outputs into it, and refuse any kernel operand outside it
 * (plan.h), so a placement mistake that would fault on a GPU is an error here.
 */
#include "backend.h"

#include <string.h>

static bool available(const char** why) {
    if (why != NULL) *why = "";
    return true;
}

static int hardware_count(void) {
    return 0;
}

static bool hardware_describe(int index, struct epabi_backend_hardware* out) {
    (void)index;
    (void)out;
    return false;
}

static bool claims(const struct epabi_kernel* kernel, const struct epabi_node* node, char* why, size_t why_len) {
    (void)kernel;   /* every kernel's C implementation runs here; its supports() already decided */
    (void)node;
    (void)why;
    (void)why_len;
    return true;
}

static void* arena_upload(void* ctx, const void* host, size_t bytes) {
    void* p = epabi_arena_alloc(ctx, bytes);
    if (p != NULL && bytes > 0) memcpy(p, host, bytes);
    return p;
}

static void arena_release(void* ctx, void* p) {
    epabi_arena_free(ctx, p);
}

static bool arena_owns(void* ctx, const void* p, size_t bytes) {
    return epabi_arena_owns(ctx, p, bytes);
}

static OrtStatus* ep_open(const struct epabi_api* api, const struct epabi_backend_ep_config* config,
                          struct epabi_backend_ep* out) {
    (void)api;
    memset(out, 0, sizeof *out);
    out->backend = epabi_backend_software();
    out->arena = config->host_arena;
    epabi_arena_retain(out->arena);
    if (config->memory != NULL)
        out->plan = (struct epabi_plan_device){config->memory, true, arena_upload, arena_release, arena_owns,
                                               config->host_arena};
    return NULL;
}

static void ep_close(struct epabi_backend_ep* ep) {
    epabi_arena_release(ep->arena);
    ep->arena = NULL;
}

/* ---- the arena as an allocator -------------------------------------------------------------------------- */

static void* arena_alloc(void* ctx, size_t bytes) {
    return epabi_arena_alloc(ctx, bytes);
}

static void arena_free(void* ctx, void* p) {
    epabi_arena_free(ctx, p);
}

static void arena_stats(void* ctx, struct epabi_arena_stats* out) {
    epabi_arena_get_stats(ctx, out);
}

static void arena_shrink(void* ctx) {
    epabi_arena_shrink(ctx);
}

static void arena_close(void* ctx) {
    epabi_arena_release(ctx);
}

static const struct epabi_alloc_ops kArenaOps = {arena_alloc, arena_free, arena_stats, arena_shrink, arena_close};

static OrtStatus* allocator_open(const struct epabi_api* api, const OrtLogger* logger,
                                 const struct epabi_memory_record* memory, struct epabi_arena* host_arena,
                                 const struct epabi_alloc_ops** ops, void** ctx) {
    (void)api;
    (void)logger;
    (void)memory;   /* one kind: the arena */
    epabi_arena_retain(host_arena);
    *ops = &kArenaOps;
    *ctx = host_arena;
    return NULL;
}

static const struct epabi_backend kSoftware = {
    .name = "software",
    .fused_gemm_default = true,
    .available = available,
    .hardware_count = hardware_count,
    .hardware_describe = hardware_describe,
    .claims = claims,
    .ep_open = ep_open,
    .ep_close = ep_close,
    .thread_stream = NULL,     /* the host stream */
    .free_bytes = NULL,
    .compute_begin = NULL,     /* nothing to make current, nothing to wait for */
    .compute_end = NULL,
    .allocator_open = allocator_open,
    .copy = NULL,              /* host-accessible: memmove */
    .can_copy = NULL,
    .sync_stream = NULL,       /* not stream aware */
};

const struct epabi_backend* epabi_backend_software(void) {
    return &kSoftware;
}
