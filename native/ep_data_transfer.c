#include "ep_data_transfer.h"

#include <stdint.h>
#include <string.h>

#include "cuda_device.h"
#include "ep_factory.h"

static const struct epabi_data_transfer* dt_of(const OrtDataTransferImpl* p) {
    return (const struct epabi_data_transfer*)p;
}

static void ReleaseImpl(OrtDataTransferImpl* this_ptr) {
    (void)this_ptr;   /* owned by the factory */
}

static bool is_host_memory(const OrtEpApi* ep, const OrtMemoryDevice* d) {
    return ep->MemoryDevice_GetDeviceType(d) == OrtMemoryInfoDeviceType_CPU ||
           ep->MemoryDevice_GetMemoryType(d) == OrtDeviceMemoryType_HOST_ACCESSIBLE;
}

bool epabi_data_transfer_is_gpu_device(const struct epabi_data_transfer* dt, const OrtMemoryDevice* d) {
    const OrtEpApi* ep = dt->api->ep;
    return dt->gpu && (dt->device == NULL || !ep->MemoryDevice_AreEqual(d, dt->device)) &&
           ep->MemoryDevice_GetDeviceType(d) == OrtMemoryInfoDeviceType_GPU &&
           ep->MemoryDevice_GetVendorId(d) == EPABI_NVIDIA_VENDOR_ID;
}

/* CUDA device memory (not the pinned host-accessible kind, which is host memory for a copy). */
static bool is_cuda_memory(const struct epabi_data_transfer* dt, const OrtMemoryDevice* d) {
    return epabi_data_transfer_is_gpu_device(dt, d) &&
           dt->api->ep->MemoryDevice_GetMemoryType(d) == OrtDeviceMemoryType_DEFAULT;
}

static bool CanCopyImpl(const OrtDataTransferImpl* this_ptr, const OrtMemoryDevice* src, const OrtMemoryDevice* dst) {
    const struct epabi_data_transfer* dt = dt_of(this_ptr);
    const OrtEpApi* ep = dt->api->ep;
    if (src == NULL || dst == NULL) return false;
    bool src_cuda = is_cuda_memory(dt, src), dst_cuda = is_cuda_memory(dt, dst);
    if (src_cuda || dst_cuda)
        return (src_cuda || is_host_memory(ep, src)) && (dst_cuda || is_host_memory(ep, dst)) &&
               epabi_cuda_libs()->cu != NULL;
    if (dt->device == NULL) return false;
    bool src_ours = ep->MemoryDevice_AreEqual(src, dt->device);
    bool dst_ours = ep->MemoryDevice_AreEqual(dst, dt->device);
    if (src_ours && dst_ours) return true;
    if (src_ours) return is_host_memory(ep, dst);
    if (dst_ours) return is_host_memory(ep, src);
    return false;
}

/* The CUDA ordinal whose memory one side of the copy is in, or -1 when neither side is CUDA memory. */
static OrtStatus* cuda_ordinal(const struct epabi_data_transfer* dt, const OrtValue* src, const OrtValue* dst,
                               int* ordinal) {
    *ordinal = -1;
    if (!dt->gpu) return NULL;
    const OrtValue* sides[2] = {src, dst};
    for (int k = 0; k < 2 && *ordinal < 0; ++k) {
        const OrtMemoryInfo* info = NULL;
        EPABI_RETURN_IF_ERROR(dt->api->ort->GetTensorMemoryInfo(sides[k], &info));
        if (info == NULL) continue;
        const OrtMemoryDevice* d = dt->api->ep->MemoryInfo_GetMemoryDevice(info);
        if (d != NULL && is_cuda_memory(dt, d)) *ordinal = (int)dt->api->ep->MemoryDevice_GetDeviceId(d);
    }
    return NULL;
}

/* cuMemcpy infers the direction from the addresses (unified addressing), on the GPU's context: synchronous,
 * or ordered on the host's sync stream when it gives one (cuda_sync_stream.h). */
static OrtStatus* cuda_copy(const struct epabi_api* api, int ordinal, void* dst, const void* src, size_t bytes,
                            void* stream) {
    const struct epabi_cuda_device* d = NULL;
    EPABI_RETURN_IF_ERROR(epabi_cuda_device_get(api, ordinal, &d));
    struct epabi_cuda_scope scope;
    if (!epabi_cuda_enter(d, &scope))
        return epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": CopyTensors cannot make GPU %d current", ordinal);
    epabi_cu_result r =
        stream != NULL
            ? d->libs->cu->MemcpyAsync((epabi_cu_ptr)(uintptr_t)dst, (epabi_cu_ptr)(uintptr_t)src, bytes, stream)
            : d->libs->cu->Memcpy((epabi_cu_ptr)(uintptr_t)dst, (epabi_cu_ptr)(uintptr_t)src, bytes);
    epabi_cuda_leave(&scope);
    return r == 0 ? NULL : epabi_cuda_status(api, r, "CopyTensors (cuMemcpy)");
}

static OrtStatus* CopyTensorsImpl(OrtDataTransferImpl* this_ptr, const OrtValue** src_tensors, OrtValue** dst_tensors,
                                  OrtSyncStream** streams, size_t num_tensors) {
    /* host memory on both sides: memmove; CUDA memory: cuMemcpy, async on the host's stream when it gives one */
    const struct epabi_data_transfer* dt = dt_of(this_ptr);
    const struct epabi_api* api = dt->api;
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
        int ordinal = -1;
        EPABI_RETURN_IF_ERROR(cuda_ordinal(dt, src_tensors[i], dst_tensors[i], &ordinal));
        if (ordinal >= 0) {
            void* stream = streams != NULL && streams[i] != NULL ? api->ort->SyncStream_GetHandle(streams[i]) : NULL;
            EPABI_RETURN_IF_ERROR(cuda_copy(api, ordinal, dst, src, src_bytes, stream));
        } else if (src != dst) {
            memmove(dst, src, src_bytes);
        }
    }
    return NULL;
}

void epabi_data_transfer_init(struct epabi_data_transfer* dt, const struct epabi_api* api,
                              const OrtMemoryDevice* device) {
    memset(dt, 0, sizeof *dt);
    dt->api = api;
    dt->device = device;
    dt->base.ort_version_supported = EPABI_ORT_API_VERSION;
    dt->base.Release = ReleaseImpl;
    dt->base.CanCopy = CanCopyImpl;
    dt->base.CopyTensors = CopyTensorsImpl;
    dt->initialized = true;
}

void epabi_data_transfer_enable_gpu(struct epabi_data_transfer* dt, const struct epabi_api* api) {
    if (!dt->initialized) epabi_data_transfer_init(dt, api, NULL);
    dt->gpu = true;
}
