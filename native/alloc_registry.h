/*
 * alloc_registry.h - every block our OrtAllocators (ep_allocator.h) handed the host and has not taken back, and
 * the captured graphs that hold some of them.
 *
 * Why. A captured graph replays at the addresses its capturing run used, and a host may free those buffers
 * right after that run: ONNX Runtime allocates the outputs (and the device copies of the inputs) of a plain
 * run() from the EP device's allocator and frees them when the run returns, while IsGraphCaptured tells it
 * that later runs of the id are replays. Modelled on PyTorch's private graph memory pools, memory a live graph
 * reads or writes stays reserved for the graph's life: a capture holds every allocator block its fused nodes'
 * inputs and outputs lie in, and the host's Free of a held block is deferred until the last graph holding it is
 * destroyed (ReleaseCapturedGraph, the thread's exit or the EP's release). Until then no later Alloc can hand
 * that memory to another tensor, so a replay never writes into a buffer that was freed or reused.
 *
 * Blocks are keyed by the address Alloc returned; a hold may name any address inside a block (hosts subdivide
 * blocks). Owners are the allocators: a deferred Free ends in owner->release, and an allocator released while
 * graphs still hold some of its blocks stays alive (closing) until its last held block is let go.
 *
 * Ownership: refcounted; the factory holds one reference, each allocator and each graph manager one.
 * Thread-safety: every entry point takes the registry's mutex; owner callbacks run outside it.
 */
#ifndef EPABI_ALLOC_REGISTRY_H
#define EPABI_ALLOC_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

struct epabi_alloc_registry;

/* An allocator as the registry sees it. release: the last hold on a block the host had freed went; the owner frees
 * it now (under the registry's lock, so it must not call the registry). gone: the owner was detached while graphs
 * held some of its blocks, and the last of those went; the owner may be destroyed (called after the lock is
 * dropped: it may release its registry reference). */
struct epabi_alloc_owner {
    void (*release)(struct epabi_alloc_owner* owner, void* p);
    void (*gone)(struct epabi_alloc_owner* owner);
    size_t orphans;   /* the registry's: held blocks of a detached owner */
};

enum epabi_alloc_free_result {
    EPABI_FREE_NOW = 0,       /* the caller frees the block */
    EPABI_FREE_DEFERRED = 1,  /* a graph holds it: the registry calls owner->release(.., true, ..) later */
    EPABI_FREE_UNKNOWN = 2    /* not a block of ours (a foreign pointer, or a double free of an unheld block) */
};

/* NULL when out of memory. */
struct epabi_alloc_registry* epabi_alloc_registry_create(void);
void epabi_alloc_registry_retain(struct epabi_alloc_registry* r);
void epabi_alloc_registry_release(struct epabi_alloc_registry* r);   /* NULL is ignored */

/* The allocator side. add: false when out of memory (the caller frees p and fails the Alloc). free: a second Free
 * of a deferred block is ignored (EPABI_FREE_DEFERRED). */
bool epabi_alloc_registry_add(struct epabi_alloc_registry* r, struct epabi_alloc_owner* owner, void* p, size_t bytes);
enum epabi_alloc_free_result epabi_alloc_registry_free(struct epabi_alloc_registry* r, void* p);
/* The allocator is being released: forgets its unheld blocks and returns how many are still held. 0: the owner may
 * go now; else it must stay until gone() is called (its held blocks the host freed are released first). */
size_t epabi_alloc_registry_detach(struct epabi_alloc_registry* r, struct epabi_alloc_owner* owner);

/* The graph side. hold: the base of the live block containing [p, p + bytes), with its hold count raised; NULL
 * when no block of ours contains it. drop: lets go of one hold taken on base. */
void* epabi_alloc_registry_hold(struct epabi_alloc_registry* r, const void* p, size_t bytes);
void epabi_alloc_registry_drop(struct epabi_alloc_registry* r, void* base);

/* For tests and diagnostics: live blocks, and those with a hold. */
void epabi_alloc_registry_counts(struct epabi_alloc_registry* r, size_t* live, size_t* held);

#endif
