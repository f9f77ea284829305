/*
 * backend.h - the compute backend seam: everything device-specific that the files filling ONNX Runtime's
 * tables (ep.c: OrtEp, ep_factory.c and ep_devices.c: OrtEpFactory, ep_data_transfer.c: OrtDataTransferImpl)
 * need, behind one interface with two implementations: the CPU software adapter (backend_software.c) and CUDA
 * (cuda/cuda_backend.c). CUDA types and driver calls appear only under native/cuda/.
 *
 * A backend serves
 *   - devices: whether it can run kernels, and the GPUs it finds itself for hosts that list none;
 *   - claims: whether it runs a node its kernel supports (GetCapability);
 *   - the EP: setup on one device (its run memory, how plans upload constants), the per-thread stream, what
 *     happens around each fused node's Compute, the device's free memory;
 *   - memory: allocator operations for each memory kind it carries (memory_kinds.h), copies, sync streams.
 *
 * Thread-safety: a backend is immutable; its functions may be called from any thread unless noted.
 */
#ifndef EPABI_BACKEND_H
#define EPABI_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "arena.h"
#include "ep_allocator.h"
#include "kernel.h"
#include "memory_kinds.h"
#include "plan.h"
#include "stream.h"

/* A device the backend found on its own. */
struct epabi_backend_hardware {
    char name[128];
    char pci_bus_id[32];               /* "" when unknown */
};

/* What an EP asks of the backend for its one device. */
struct epabi_backend_ep_config {
    const OrtLogger* logger;           /* the session's */
    int ordinal;                       /* the GPU (device_id, else the EP device's); 0 for the software adapter */
    bool ordinal_given;                /* device_id was set: a GPU the driver does not know is an error */
    bool use_mempool;                  /* arena.use_cuda_mempool=1 */
    bool cudnn;                        /* option cudnn (CUDA): Conv through cuDNN where it loads */
    const OrtMemoryDevice* memory;     /* the EP device's DEFAULT memory; NULL: it computes in host memory */
    struct epabi_arena* host_arena;    /* the factory's arena (the software adapter's memory) */
};

/* What the backend set up for one EP. device NULL on a GPU EP device: CUDA is unavailable (one WARNING said
 * why) and the device claims no node. */
struct epabi_backend_ep {
    const struct epabi_backend* backend;
    const void* device;                /* the backend's device (CUDA: its struct epabi_cuda_device) */
    struct epabi_arena* arena;         /* run memory of plans and captures: one reference */
    struct epabi_plan_device plan;     /* upload NULL: plans compute in host memory (plan.h) */
    bool thread_streams;               /* fused nodes run on each thread's stream, with graph capture or without */
    bool mempool;                      /* run memory is stream-ordered */
    const void* cudnn;                 /* CUDA: the cuDNN its streams run Conv on (cuda_cudnn.h); NULL: our kernels */
    const OrtLogger* logger;           /* the session's: the streams' set-up lines */
};

/* Around one fused node's Compute. */
struct epabi_compute_scope {
    const void* device;
    bool entered;
};

struct epabi_backend {
    const char* name;                  /* "software", "cuda" */
    /* Linear steps (fused_gemm) when no option says otherwise: on for both backends (CUDA's verified on an H200). */
    bool fused_gemm_default;

    /* -- devices -- */
    bool (*available)(const char** why);             /* can run kernels; *why: what is missing */
    int (*hardware_count)(void);                     /* devices it finds itself; 0 when none or unavailable */
    bool (*hardware_describe)(int index, struct epabi_backend_hardware* out);

    /* -- GetCapability: does it run this node (beyond the kernel's own supports)? On "no", a short reason. -- */
    bool (*claims)(const struct epabi_kernel* kernel, const struct epabi_node* node, char* why, size_t why_len);

    /* -- the EP -- */
    OrtStatus* (*ep_open)(const struct epabi_api* api, const struct epabi_backend_ep_config* config,
                          struct epabi_backend_ep* out);
    void (*ep_close)(struct epabi_backend_ep* ep);   /* after every plan and thread context of the EP is gone */
    /* A thread's stream (adopting the user's when adopt_user). NULL: the host stream. */
    struct epabi_stream* (*thread_stream)(const struct epabi_api* api, const struct epabi_backend_ep* ep,
                                          bool adopt_user, uintptr_t user_stream, OrtStatus** status);
    /* The device's free bytes, for the capture-window detector; NULL: not known. */
    bool (*free_bytes)(const struct epabi_backend_ep* ep, size_t* free_bytes);
    /* Before and after a fused node's plan runs on `stream` (NULL: no stream). begin makes the device current
     * and orders the run after the host's stream; end (called when begin succeeded) waits for the work outside
     * a capture window and restores the thread's device, and returns st or its own error. NULL: nothing. */
    OrtStatus* (*compute_begin)(const struct epabi_api* api, const struct epabi_backend_ep* ep,
                                OrtKernelContext* context, struct epabi_stream* stream,
                                struct epabi_compute_scope* scope);
    OrtStatus* (*compute_end)(const struct epabi_api* api, const struct epabi_backend_ep* ep,
                              struct epabi_stream* stream, struct epabi_compute_scope* scope, OrtStatus* st);

    /* -- memory -- */
    /* Allocator operations and their context for one attached memory info of its kinds. */
    OrtStatus* (*allocator_open)(const struct epabi_api* api, const OrtLogger* logger,
                                 const struct epabi_memory_record* memory, struct epabi_arena* host_arena,
                                 const struct epabi_alloc_ops** ops, void** ctx);
    /* Copies bytes between host memory and memory of its kind (or within it); stream: the host's sync stream
     * handle or NULL (synchronous). NULL member: the memory is host-accessible, a copy is a memmove. */
    OrtStatus* (*copy)(const struct epabi_api* api, int ordinal, void* dst, const void* src, size_t bytes,
                       void* stream);
    bool (*can_copy)(void);                          /* copy works now (CUDA: the driver loaded) */
    /* OrtSyncStreamImpl for its memory of ordinal (-1: memory it does not know, a stream without a handle);
     * NULL member: not stream aware. */
    OrtStatus* (*sync_stream)(const struct epabi_api* api, int ordinal, OrtSyncStreamImpl** out);
};

const struct epabi_backend* epabi_backend_software(void);
const struct epabi_backend* epabi_backend_cuda(void);

/* The backend of an EP device kind; NULL for the virtual device, which runs nothing. */
const struct epabi_backend* epabi_backend_for(enum epabi_device_kind kind);

#endif
