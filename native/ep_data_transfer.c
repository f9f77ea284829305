/*
 * ep_data_transfer.c - see ep_data_transfer.h.
 */
#include "ep_data_transfer.h"

#include <stdint.h>
#include <string.h>

#include "backend.h"
#include "ep_factory.h"

static const struct epabi_data_transfer* dt_of(const OrtDataTransferImpl* p) {
    return (const struct epabi_data_transfer*)p;
}

static void ReleaseImpl(OrtDataTransferImpl* this_ptr) {
    (void)this_ptr;   /* owned by the factory */
}

/* One side of a copy: memory of ours (whose backend copies it), or host memory, or neither. */
struct side {
    bool ours;
    bool host;
    struct epabi_memory_record record;
    const struct epabi_backend* backend;   /* ours and not host-accessible: the backend that copies it */
};

static void classify(struct epabi_factory* f, const OrtMemoryDevice* d, struct side* s) {
    memset(s, 0, sizeof *s);
    if (d == NULL) return;
    s->ours = epabi_factory_find_memory_device(f, d, &s->record);
    s->host = epabi_memory_is_host(&f->api, d);
    if (s->ours && !epabi_memory_kinds[s->record.kind].host_accessible)
        s->backend = epabi_backend_for(epabi_memory_kinds[s->record.kind].device);
}

static bool can_copy_with(const struct epabi_backend* b) {
    return b != NULL && b->copy != NULL && (b->can_copy == NULL || b->can_copy());
}

static bool CanCopyImpl(const OrtDataTransferImpl* this_ptr, const OrtMemoryDevice* src, const OrtMemoryDevice* dst) {
    struct epabi_factory* f = dt_of(this_ptr)->factory;
    struct side s, d;
    classify(f, src, &s);
    classify(f, dst, &d);
    if (!s.ours && !d.ours) return false;   /* neither side is ours: another EP's data transfer copies it */
    if ((!s.ours && !s.host) || (!d.ours && !d.host)) return false;   /* memory we cannot reach */
    if (s.backend != NULL && d.backend != NULL && s.backend != d.backend) return false;
    const struct epabi_backend* b = s.backend != NULL ? s.backend : d.backend;
    return b == NULL || can_copy_with(b);
}

/* The backend and ordinal that copy between src and dst, or NULL: both sides are host-accessible. */
static OrtStatus* copier(struct epabi_factory* f, const OrtValue* src, const OrtValue* dst,
                         const struct epabi_backend** backend, int* ordinal) {
    *backend = NULL;
    *ordinal = 0;
    const OrtValue* sides[2] = {src, dst};
    for (int k = 0; k < 2 && *backend == NULL; ++k) {
        const OrtMemoryInfo* info = NULL;
        EPABI_RETURN_IF_ERROR(f->api.ort->GetTensorMemoryInfo(sides[k], &info));
        if (info == NULL) continue;
        struct side s;
        classify(f, f->api.ep->MemoryInfo_GetMemoryDevice(info), &s);
        if (s.backend != NULL) {
            *backend = s.backend;
            *ordinal = s.record.ordinal;
        }
    }
    return NULL;
}

static OrtStatus* CopyTensorsImpl(OrtDataTransferImpl* this_ptr, const OrtValue** src_tensors, OrtValue** dst_tensors,
                                  OrtSyncStream** streams, size_t num_tensors) {
    struct epabi_factory* f = dt_of(this_ptr)->factory;
    const struct epabi_api* api = &f->api;
    if (num_tensors > 0 && (src_tensors == NULL || dst_tensors == NULL))
        return epabi_error(api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": CopyTensors got NULL tensor arrays");
    for (size_t i = 0; i < num_tensors; ++i) {
        if (src_tensors[i] == NULL || dst_tensors[i] == NULL)
            return epabi_error(api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": CopyTensors got a NULL tensor at %zu", i);
        size_t src_bytes = 0, dst_bytes = 0;
        const void* src = NULL;
        void* dst = NULL;
        EPABI_RETURN_IF_ERROR(api->ort->GetTensorSizeInBytes(src_tensors[i], &src_bytes));
        EPABI_RETURN_IF_ERROR(api->ort->GetTensorSizeInBytes(dst_tensors[i], &dst_bytes));
        if (src_bytes != dst_bytes)
            return epabi_error(api, ORT_INVALID_ARGUMENT,
                               EPABI_EP_NAME ": CopyTensors: tensor %zu has %zu source bytes but %zu destination bytes",
                               i, src_bytes, dst_bytes);
        if (src_bytes == 0) continue;
        EPABI_RETURN_IF_ERROR(api->ort->GetTensorData(src_tensors[i], &src));
        EPABI_RETURN_IF_ERROR(api->ort->GetTensorMutableData(dst_tensors[i], &dst));
        /* a host bug (a freed value) must not become a copy from or to address 0 */
        if (src == NULL || dst == NULL)
            return epabi_error(api, ORT_INVALID_ARGUMENT,
                               EPABI_EP_NAME ": CopyTensors: tensor %zu (%zu bytes) has no %s data", i, src_bytes,
                               src == NULL ? "source" : "destination");
        const struct epabi_backend* backend = NULL;
        int ordinal = 0;
        EPABI_RETURN_IF_ERROR(copier(f, src_tensors[i], dst_tensors[i], &backend, &ordinal));
        if (backend != NULL && backend->copy != NULL) {
            void* stream = streams != NULL && streams[i] != NULL ? api->ort->SyncStream_GetHandle(streams[i]) : NULL;
            EPABI_RETURN_IF_ERROR(backend->copy(api, ordinal, dst, src, src_bytes, stream));
        } else if (src != dst) {
            memmove(dst, src, src_bytes);
        }
    }
    return NULL;
}

void epabi_data_transfer_init(struct epabi_data_transfer* dt, struct epabi_factory* factory) {
    memset(dt, 0, sizeof *dt);
    dt->factory = factory;
    dt->base.ort_version_supported = EPABI_ORT_API_VERSION;
    dt->base.Release = ReleaseImpl;
    dt->base.CanCopy = CanCopyImpl;
    dt->base.CopyTensors = CopyTensorsImpl;
}
