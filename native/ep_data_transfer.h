/*
 * ep_data_transfer.h - OrtDataTransferImpl for the software device: copies between host CPU memory and the
 * software device's DEFAULT memory (which is host memory too), with memcpy.
 *
 * Ownership: embedded in the factory, handed out by OrtEpFactory::CreateDataTransfer; Release is a no-op
 * because the factory owns it. Thread-safety: immutable after init.
 */
#ifndef EPABI_EP_DATA_TRANSFER_H
#define EPABI_EP_DATA_TRANSFER_H

#include <stdbool.h>

#include "api.h"

struct epabi_data_transfer {
    OrtDataTransferImpl base;          /* first member */
    const struct epabi_api* api;
    const OrtMemoryDevice* device;     /* the software device's memory (owned by the host's memory info), or NULL */
    bool gpu;                          /* GPU EP devices were listed: copies to/from CUDA memory (cuMemcpy) */
    bool initialized;
};

void epabi_data_transfer_init(struct epabi_data_transfer* dt, const struct epabi_api* api,
                              const OrtMemoryDevice* device);
/* Also serve CUDA device memory (GPU-typed, NVIDIA vendor id, device id = CUDA ordinal): synchronous cuMemcpy
 * in that GPU's primary context; host memory on the other side may be pageable. Initializes dt if needed. */
void epabi_data_transfer_enable_gpu(struct epabi_data_transfer* dt, const struct epabi_api* api);
/* True for memory of a GPU EP device (GPU-typed, NVIDIA, not the software device's), any memory type: the
 * memory devices whose copies and sync streams are CUDA's. */
bool epabi_data_transfer_is_gpu_device(const struct epabi_data_transfer* dt, const OrtMemoryDevice* d);

#endif
