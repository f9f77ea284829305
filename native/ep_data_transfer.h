/*
 * ep_data_transfer.h - OrtDataTransferImpl for every memory our EP devices declare (memory_kinds.h): copies
 * between host memory (CPU, or host-accessible) and a device's memory, or within one device's memory. The
 * memory's backend copies (CUDA: cuMemcpy, async on the host's sync stream when it gives one); host-accessible
 * memory (the software adapter's) is copied with memmove.
 *
 * Ownership: embedded in the factory, handed out by OrtEpFactory::CreateDataTransfer once some memory info is
 * attached; Release is a no-op because the factory owns it. Thread-safety: the memory records are read under
 * the factory's lock; copies may run concurrently.
 */
#ifndef EPABI_EP_DATA_TRANSFER_H
#define EPABI_EP_DATA_TRANSFER_H

#include "api.h"

struct epabi_factory;

struct epabi_data_transfer {
    OrtDataTransferImpl base;          /* first member */
    struct epabi_factory* factory;     /* the owner, whose memory table says what is ours */
};

void epabi_data_transfer_init(struct epabi_data_transfer* dt, struct epabi_factory* factory);

#endif
