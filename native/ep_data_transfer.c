#include "ep_data_transfer.h"

#include <string.h>

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

static bool CanCopyImpl(const OrtDataTransferImpl* this_ptr, const OrtMemoryDevice* src, const OrtMemoryDevice* dst) {
    const struct epabi_data_transfer* dt = dt_of(this_ptr);
    const OrtEpApi* ep = dt->api->ep;
    if (src == NULL || dst == NULL || dt->device == NULL) return false;
    bool src_ours = ep->MemoryDevice_AreEqual(src, dt->device);
    bool dst_ours = ep->MemoryDevice_AreEqual(dst, dt->device);
    if (src_ours && dst_ours) return true;
    if (src_ours) return is_host_memory(ep, dst);
    if (dst_ours) return is_host_memory(ep, src);
    return false;
}

static OrtStatus* CopyTensorsImpl(OrtDataTransferImpl* this_ptr, const OrtValue** src_tensors, OrtValue** dst_tensors,
                                  OrtSyncStream** streams, size_t num_tensors) {
    (void)streams;   /* host memory on both sides: every copy is synchronous */
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
        if (src != dst) memmove(dst, src, src_bytes);
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
