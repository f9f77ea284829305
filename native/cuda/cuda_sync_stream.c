/*
 * cuda_sync_stream.c - see cuda_sync_stream.h.
 */
#include "cuda_sync_stream.h"

#include <stdlib.h>

#include "ep_factory.h"

struct sync_stream {
    OrtSyncStreamImpl base;   /* first member */
    const struct epabi_api* api;
    const struct epabi_cuda_device* dev;   /* NULL: a stream without a device handle */
    epabi_cu_stream cs;
};

struct sync_notification {
    OrtSyncNotificationImpl base;   /* first member */
    struct sync_stream* stream;
    epabi_cu_event event;           /* NULL for a device-less stream */
};

static OrtStatus* driver_status(const struct sync_stream* s, epabi_cu_result r, const char* what) {
    return r == 0 ? NULL : epabi_cuda_status(s->api, r, what);
}

static OrtStatus* NotificationWaitOnHost(OrtSyncNotificationImpl* this_ptr);

static void NotificationRelease(OrtSyncNotificationImpl* this_ptr) {
    struct sync_notification* n = (struct sync_notification*)this_ptr;
    if (n->event != NULL) {
        struct epabi_cuda_scope scope;
        epabi_cuda_enter(n->stream->dev, &scope);
        n->stream->dev->libs->cu->EventDestroy(n->event);
        epabi_cuda_leave(&scope);
    }
    free(n);
}

static OrtStatus* NotificationActivate(OrtSyncNotificationImpl* this_ptr) {
    struct sync_notification* n = (struct sync_notification*)this_ptr;
    if (n->event == NULL) return NULL;
    struct epabi_cuda_scope scope;
    epabi_cuda_enter(n->stream->dev, &scope);
    epabi_cu_result r = n->stream->dev->libs->cu->EventRecord(n->event, n->stream->cs);
    epabi_cuda_leave(&scope);
    return driver_status(n->stream, r, "cuEventRecord (notification)");
}

static OrtStatus* NotificationWaitOnDevice(OrtSyncNotificationImpl* this_ptr, OrtSyncStream* consumer_stream) {
    struct sync_notification* n = (struct sync_notification*)this_ptr;
    if (n->event == NULL || consumer_stream == NULL) return NULL;
    epabi_cu_stream consumer = n->stream->api->ort->SyncStream_GetHandle(consumer_stream);
    if (consumer == NULL) return NotificationWaitOnHost(this_ptr);   /* a host-side consumer: wait here */
    struct epabi_cuda_scope scope;
    epabi_cuda_enter(n->stream->dev, &scope);
    epabi_cu_result r = n->stream->dev->libs->cu->StreamWaitEvent(consumer, n->event, 0);
    epabi_cuda_leave(&scope);
    return driver_status(n->stream, r, "cuStreamWaitEvent (notification)");
}

static OrtStatus* NotificationWaitOnHost(OrtSyncNotificationImpl* this_ptr) {
    struct sync_notification* n = (struct sync_notification*)this_ptr;
    if (n->event == NULL) return NULL;
    struct epabi_cuda_scope scope;
    epabi_cuda_enter(n->stream->dev, &scope);
    epabi_cu_result r = n->stream->dev->libs->cu->EventSynchronize(n->event);
    epabi_cuda_leave(&scope);
    return driver_status(n->stream, r, "cuEventSynchronize (notification)");
}

static void StreamRelease(OrtSyncStreamImpl* this_ptr) {
    struct sync_stream* s = (struct sync_stream*)this_ptr;
    if (s->cs != NULL) {
        struct epabi_cuda_scope scope;
        epabi_cuda_enter(s->dev, &scope);
        s->dev->libs->cu->StreamSynchronize(s->cs);
        s->dev->libs->cu->StreamDestroy(s->cs);
        epabi_cuda_leave(&scope);
    }
    free(s);
}

static void* StreamGetHandle(OrtSyncStreamImpl* this_ptr) {
    return ((struct sync_stream*)this_ptr)->cs;
}

static OrtStatus* StreamCreateNotification(OrtSyncStreamImpl* this_ptr, OrtSyncNotificationImpl** notification) {
    struct sync_stream* s = (struct sync_stream*)this_ptr;
    if (notification == NULL)
        return epabi_error(s->api, ORT_INVALID_ARGUMENT, EPABI_EP_NAME ": CreateNotification got a NULL output");
    *notification = NULL;
    struct sync_notification* n = calloc(1, sizeof *n);
    if (n == NULL) return epabi_error(s->api, ORT_FAIL, EPABI_EP_NAME ": out of memory creating a notification");
    n->stream = s;
    if (s->cs != NULL) {
        struct epabi_cuda_scope scope;
        epabi_cuda_enter(s->dev, &scope);
        epabi_cu_result r = s->dev->libs->cu->EventCreate(&n->event, EPABI_CU_EVENT_DISABLE_TIMING);
        epabi_cuda_leave(&scope);
        if (r != 0) {
            free(n);
            return driver_status(s, r, "cuEventCreate (notification)");
        }
    }
    n->base.ort_version_supported = EPABI_ORT_API_VERSION;
    n->base.Release = NotificationRelease;
    n->base.Activate = NotificationActivate;
    n->base.WaitOnDevice = NotificationWaitOnDevice;
    n->base.WaitOnHost = NotificationWaitOnHost;
    *notification = &n->base;
    return NULL;
}

static OrtStatus* StreamFlush(OrtSyncStreamImpl* this_ptr) {
    (void)this_ptr;   /* work is submitted as it is issued */
    return NULL;
}

static OrtStatus* StreamOnSessionRunEnd(OrtSyncStreamImpl* this_ptr) {
    (void)this_ptr;   /* ORT waits through notifications; nothing is kept per run */
    return NULL;
}

OrtStatus* epabi_sync_stream_create(const struct epabi_api* api, const struct epabi_cuda_device* device,
                                    OrtSyncStreamImpl** out) {
    *out = NULL;
    struct sync_stream* s = calloc(1, sizeof *s);
    if (s == NULL) return epabi_error(api, ORT_FAIL, EPABI_EP_NAME ": out of memory creating a sync stream");
    s->api = api;
    s->dev = device;
    if (device != NULL) {
        struct epabi_cuda_scope scope;
        if (!epabi_cuda_enter(device, &scope)) {
            free(s);
            return epabi_error(api, ORT_EP_FAIL, EPABI_EP_NAME ": cannot make GPU %d current", device->ordinal);
        }
        epabi_cu_result r = device->libs->cu->StreamCreate(&s->cs, EPABI_CU_STREAM_NON_BLOCKING);
        epabi_cuda_leave(&scope);
        if (r != 0) {
            free(s);
            return epabi_cuda_status(api, r, "cuStreamCreate (sync stream)");
        }
    }
    s->base.ort_version_supported = EPABI_ORT_API_VERSION;
    s->base.Release = StreamRelease;
    s->base.GetHandle = StreamGetHandle;
    s->base.CreateNotification = StreamCreateNotification;
    s->base.Flush = StreamFlush;
    s->base.OnSessionRunEnd = StreamOnSessionRunEnd;
    *out = &s->base;
    return NULL;
}
