/*
 * backend.c - which backend serves an EP device kind (backend.h).
 */
#include "backend.h"

const struct epabi_backend* epabi_backend_for(enum epabi_device_kind kind) {
    switch (kind) {
    case EPABI_DEVICE_GPU: return epabi_backend_cuda();
    case EPABI_DEVICE_SOFTWARE: return epabi_backend_software();
    case EPABI_DEVICE_VIRTUAL: break;
    }
    return NULL;
}
