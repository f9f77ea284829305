/*
 * cuda_cudnn.c - Conv through cuDNN on one stream (see cuda_cudnn.h): the stream's handle and workspace, and the
 * per-shape set-ups, kept in a small hash table.
 *
 * How a set-up runs (the first that applies):
 *   bias and a fused ReLU    cudnnConvolutionBiasActivationForward (RELU, alpha2 = 0: Z is not read): one call
 *   bias, algorithm IMPLICIT_PRECOMP_GEMM
 *                            the same call with the IDENTITY activation (cuDNN takes IDENTITY with that algorithm
 *                            only); another fused activation follows as epabi's in-place pass
 *   bias                     cudnnConvolutionForward, then cudnnAddTensor of the [1, M, 1, 1] bias
 *   no bias                  cudnnConvolutionForward
 * When the set-up's first run fails in a fused form, the conv + AddTensor form is tried; when that fails too, the
 * shape stays with epabi's kernel. Algorithms: cuDNN's heuristic order, keeping the implicit-GEMM, GEMM and direct
 * ones only: FFT and Winograd transform the data, and their rounding can exceed 1e-4 of ONNX Runtime's CPU EP.
 *
 * cuDNN or the GEMM form (EPABI_CONV_FORM, read at the stream's creation). Where epabi's kernels would run the conv as
 * GEMMs (im2col + cuBLAS SGEMM, epabi_cuda_conv_gemm_form), those can beat cuDNN's kernel: on the H200 magika's conv
 * (X [1,256,512,1], W [512,256,5,1]) took 40.0 us in cuDNN's implicit GEMM, and cuBLAS's split-K SGEMM of the same
 * product 19.4 us plus a 2.8 us reduction, to which im2col adds a few. So by default ("timed") the set-up, after
 * cuDNN's first run, times both forms as each would run (cuDNN's call, with epabi's activation pass unless cuDNN
 * fused it; bias fill, im2col, SGEMM and that pass) and keeps the faster:
 * TIMING_BATCHES batches of TIMING_CALLS calls of each, alternating, the best batch per form. Each batch is queued
 * behind conv_timing_hold, a one-thread kernel that holds the stream until the host has queued the whole batch, so
 * the events time the GPU's work alone (cuDNN's host cost per call, tens of microseconds, is paid once in a captured
 * graph), with its limit so that nothing can hang. Set-ups never run inside a capture, so neither does the timing.
 * Only shapes whose GEMM form issues at most TIMING_MAX_CALLS GEMMs are timed; the others take cuDNN. "cudnn" and
 * "gemm" force a form where the GEMM form applies (tests, benches); an unknown value is a WARNING and means "timed".
 */
#include "cuda_cudnn.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_kernels.h"
#include "cuda_launch_internal.h"   /* the GEMM form, the hold kernel */
#include "ep_factory.h"   /* EPABI_EP_NAME */
#include "launch_args.h"

enum { KEY_LEN = 19, BUCKETS = 64, MAX_SETUPS = 512 };

enum run_form { RUN_PLAIN, RUN_ADD_BIAS, RUN_BIAS_IDENTITY, RUN_BIAS_RELU };

enum conv_form_choice { FORM_TIMED, FORM_CUDNN, FORM_GEMM };   /* EPABI_CONV_FORM */
enum { TIMING_BATCHES = 3, TIMING_CALLS = 8, TIMING_MAX_CALLS = 8 };
static const unsigned long long kHoldLimitNs = 20000000ull;   /* 20 ms: far beyond queuing TIMING_CALLS calls */

struct conv_setup {
    struct conv_setup* next;
    int64_t key[KEY_LEN];
    bool usable;                    /* false: epabi's kernel runs this shape */
    enum run_form form;
    int algo;
    size_t workspace;
    void* x_desc;
    void* w_desc;
    void* y_desc;
    void* b_desc;                   /* NULL without bias */
    void* conv_desc;
    void* act_desc;                 /* NULL unless RUN_BIAS_* */
};

struct epabi_cudnn_stream {
    const struct epabi_cudnn* lib;
    const struct epabi_cuda_driver* cu;
    epabi_cu_stream stream;
    const struct epabi_api* api;
    const OrtLogger* logger;
    epabi_cudnn_handle handle;
    epabi_cu_ptr workspace;         /* EPABI_CUDNN_WORKSPACE_BYTES, owned */
    struct conv_setup* buckets[BUCKETS];
    int setups;
    enum conv_form_choice choice;
    unsigned* release;              /* conv_timing_hold's flag: page-locked host memory the GPU reads; owned, lazy */
};

static const char* algo_name(int algo) {
    static const char* const kNames[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                         "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
    return algo >= 0 && algo < (int)(sizeof kNames / sizeof kNames[0]) ? kNames[algo] : "?";
}

static const char* status_name(const struct epabi_cudnn* lib, int st) {
    const char* s = lib->GetErrorString(st);
    return s != NULL ? s : "?";
}

static void descriptors_free(const struct epabi_cudnn* lib, struct conv_setup* e) {
    if (e->x_desc != NULL) lib->DestroyTensorDescriptor(e->x_desc);
    if (e->y_desc != NULL) lib->DestroyTensorDescriptor(e->y_desc);
    if (e->b_desc != NULL) lib->DestroyTensorDescriptor(e->b_desc);
    if (e->w_desc != NULL) lib->DestroyFilterDescriptor(e->w_desc);
    if (e->conv_desc != NULL) lib->DestroyConvolutionDescriptor(e->conv_desc);
    if (e->act_desc != NULL) lib->DestroyActivationDescriptor(e->act_desc);
    e->x_desc = e->y_desc = e->b_desc = e->w_desc = e->conv_desc = e->act_desc = NULL;
}

static void setup_free(const struct epabi_cudnn* lib, struct conv_setup* e) {
    descriptors_free(lib, e);
    free(e);
}

/* Descriptors hold no device state: dropping every set-up is safe whatever the stream has queued. */
static void clear_setups(struct epabi_cudnn_stream* s) {
    for (int b = 0; b < BUCKETS; ++b) {
        for (struct conv_setup* e = s->buckets[b]; e != NULL;) {
            struct conv_setup* next = e->next;
            setup_free(s->lib, e);
            e = next;
        }
        s->buckets[b] = NULL;
    }
    s->setups = 0;
}

struct epabi_cudnn_stream* epabi_cudnn_stream_create(const struct epabi_cudnn* lib, const struct epabi_cuda_driver* cu,
                                                     epabi_cu_stream stream, const struct epabi_api* api,
                                                     const OrtLogger* logger, char* why, size_t why_len) {
    struct epabi_cudnn_stream* s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    s->lib = lib;
    s->cu = cu;
    s->stream = stream;
    s->api = api;
    s->logger = logger;
    const char* form = getenv("EPABI_CONV_FORM");
    s->choice = FORM_TIMED;
    if (form != NULL && strcmp(form, "cudnn") == 0) {
        s->choice = FORM_CUDNN;
    } else if (form != NULL && strcmp(form, "gemm") == 0) {
        s->choice = FORM_GEMM;
    } else if (form != NULL && form[0] != '\0' && strcmp(form, "timed") != 0) {
        EPABI_LOG(api, logger, ORT_LOGGING_LEVEL_WARNING,
                  EPABI_EP_NAME ": EPABI_CONV_FORM='%s' is none of 'cudnn', 'gemm', 'timed'; timing each conv", form);
    }
    int st = lib->Create(&s->handle);
    if (st != 0) {
        snprintf(why, why_len, "cudnnCreate returned %d (%s)", st, status_name(lib, st));
        free(s);
        return NULL;
    }
    if ((st = lib->SetStream(s->handle, stream)) != 0) {
        snprintf(why, why_len, "cudnnSetStream returned %d (%s)", st, status_name(lib, st));
    } else {
        epabi_cu_result r = cu->MemAlloc(&s->workspace, EPABI_CUDNN_WORKSPACE_BYTES);
        if (r == 0) return s;
        s->workspace = 0;
        snprintf(why, why_len, "cuMemAlloc of the %d-byte workspace returned %d", (int)EPABI_CUDNN_WORKSPACE_BYTES, r);
    }
    lib->Destroy(s->handle);
    free(s);
    return NULL;
}

void epabi_cudnn_stream_destroy(struct epabi_cudnn_stream* s) {
    if (s == NULL) return;
    clear_setups(s);
    if (s->release != NULL) s->cu->MemFreeHost(s->release);
    if (s->workspace != 0) s->cu->MemFree(s->workspace);
    s->lib->Destroy(s->handle);
    free(s);
}

/* ---- set-up ---------------------------------------------------------------------------------------------- */

static void make_key(const struct conv_launch* L, int64_t* key) {
    const int64_t k[KEY_LEN] = {L->n,  L->c,  L->h,  L->wd, L->m,  L->group, L->cg, L->kh, L->kw, L->sh,
                                L->sw, L->dh, L->dw, L->ph, L->pw, L->oh,    L->ow, L->bias != NULL,
                                L->epilogue};
    memcpy(key, k, sizeof k);
}

static unsigned key_hash(const int64_t* key) {
    uint64_t h = 1469598103934665603ull;   /* FNV-1a over the key's bytes */
    const unsigned char* p = (const unsigned char*)key;
    for (size_t i = 0; i < KEY_LEN * sizeof(int64_t); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return (unsigned)(h % BUCKETS);
}

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* The int dims cuDNN's 4-D descriptors take, and element counts it indexes with 32 bits. */
static const char* shape_refusal(const struct conv_launch* L) {
    const int64_t dims[] = {L->n, L->c, L->h, L->wd, L->m, L->group, L->cg, L->kh, L->kw,
                            L->sh, L->sw, L->dh, L->dw, L->ph, L->pw, L->oh, L->ow};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; ++i)
        if (!fits_int(dims[i])) return "an extent beyond int";
    if (L->c == 0 || L->cg == 0 || L->kh * L->kw == 0) return "no input channels";
    if (L->n * L->c * L->h * L->wd > INT_MAX || L->n * L->m * L->oh * L->ow > INT_MAX ||
        L->m * L->cg * L->kh * L->kw > INT_MAX)
        return "a tensor of more than 2^31 elements";
    return NULL;
}

/* Descriptors and algorithm of a new set-up; false with the reason in why (e keeps what was created). */
static bool describe(struct epabi_cudnn_stream* s, const struct conv_launch* L, struct conv_setup* e, char* why,
                     size_t why_len) {
    const struct epabi_cudnn* lib = s->lib;
    const char* refusal = shape_refusal(L);
    if (refusal != NULL) {
        snprintf(why, why_len, "%s", refusal);
        return false;
    }
    int st = 0;
    const char* call = NULL;
#define TRY(expr, name)            \
    do {                           \
        if ((st = (expr)) != 0) {  \
            call = (name);         \
            goto fail;             \
        }                          \
    } while (0)
    TRY(lib->CreateTensorDescriptor(&e->x_desc), "cudnnCreateTensorDescriptor");
    TRY(lib->SetTensor4dDescriptor(e->x_desc, EPABI_CUDNN_TENSOR_NCHW, EPABI_CUDNN_DATA_FLOAT, (int)L->n, (int)L->c,
                                   (int)L->h, (int)L->wd), "cudnnSetTensor4dDescriptor (X)");
    TRY(lib->CreateFilterDescriptor(&e->w_desc), "cudnnCreateFilterDescriptor");
    TRY(lib->SetFilter4dDescriptor(e->w_desc, EPABI_CUDNN_DATA_FLOAT, EPABI_CUDNN_TENSOR_NCHW, (int)L->m, (int)L->cg,
                                   (int)L->kh, (int)L->kw), "cudnnSetFilter4dDescriptor");
    TRY(lib->CreateConvolutionDescriptor(&e->conv_desc), "cudnnCreateConvolutionDescriptor");
    TRY(lib->SetConvolution2dDescriptor(e->conv_desc, (int)L->ph, (int)L->pw, (int)L->sh, (int)L->sw, (int)L->dh,
                                        (int)L->dw, EPABI_CUDNN_CROSS_CORRELATION, EPABI_CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor");
    TRY(lib->SetConvolutionGroupCount(e->conv_desc, (int)L->group), "cudnnSetConvolutionGroupCount");
    TRY(lib->SetConvolutionMathType(e->conv_desc, EPABI_CUDNN_FMA_MATH), "cudnnSetConvolutionMathType");
    int on = 0, oc = 0, oh = 0, ow = 0;
    TRY(lib->GetConvolution2dForwardOutputDim(e->conv_desc, e->x_desc, e->w_desc, &on, &oc, &oh, &ow),
        "cudnnGetConvolution2dForwardOutputDim");
    if (on != L->n || oc != L->m || oh != L->oh || ow != L->ow) {
        /* cuDNN pads both ends by the begin padding: an end padding that changes the extent is not its case */
        snprintf(why, why_len, "asymmetric padding (cuDNN's output would be [%d,%d,%d,%d], ONNX's [%lld,%lld,%lld,%lld])",
                 on, oc, oh, ow, (long long)L->n, (long long)L->m, (long long)L->oh, (long long)L->ow);
        return false;
    }
    TRY(lib->CreateTensorDescriptor(&e->y_desc), "cudnnCreateTensorDescriptor");
    TRY(lib->SetTensor4dDescriptor(e->y_desc, EPABI_CUDNN_TENSOR_NCHW, EPABI_CUDNN_DATA_FLOAT, (int)L->n, (int)L->m,
                                   (int)L->oh, (int)L->ow), "cudnnSetTensor4dDescriptor (Y)");
    if (L->bias != NULL) {
        TRY(lib->CreateTensorDescriptor(&e->b_desc), "cudnnCreateTensorDescriptor");
        TRY(lib->SetTensor4dDescriptor(e->b_desc, EPABI_CUDNN_TENSOR_NCHW, EPABI_CUDNN_DATA_FLOAT, 1, (int)L->m, 1, 1),
            "cudnnSetTensor4dDescriptor (B)");
    }
    struct epabi_cudnn_fwd_perf perf[EPABI_CUDNN_FWD_ALGO_COUNT];
    memset(perf, 0, sizeof perf);
    int count = 0;
    TRY(lib->GetConvolutionForwardAlgorithm_v7(s->handle, e->x_desc, e->w_desc, e->conv_desc, e->y_desc,
                                               EPABI_CUDNN_FWD_ALGO_COUNT, &count, perf),
        "cudnnGetConvolutionForwardAlgorithm_v7");
    if (count > EPABI_CUDNN_FWD_ALGO_COUNT) count = EPABI_CUDNN_FWD_ALGO_COUNT;
    for (int i = 0; i < count; ++i) {
        const struct epabi_cudnn_fwd_perf* p = &perf[i];
        if (p->status != 0 || p->algo < EPABI_CUDNN_FWD_ALGO_IMPLICIT_GEMM || p->algo > EPABI_CUDNN_FWD_ALGO_DIRECT ||
            p->math_type == EPABI_CUDNN_TENSOR_OP_MATH || p->math_type == EPABI_CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
            continue;
        size_t bytes = 0;
        if (lib->GetConvolutionForwardWorkspaceSize(s->handle, e->x_desc, e->w_desc, e->conv_desc, e->y_desc, p->algo,
                                                    &bytes) != 0 ||
            bytes > EPABI_CUDNN_WORKSPACE_BYTES)
            continue;
        e->algo = p->algo;
        e->workspace = bytes;
        return true;
    }
    snprintf(why, why_len, "no implicit-GEMM, GEMM or direct algorithm within the %d-byte workspace (of %d offered)",
             (int)EPABI_CUDNN_WORKSPACE_BYTES, count);
    return false;
fail:
    snprintf(why, why_len, "%s returned %d (%s)", call, st, status_name(lib, st));
    return false;
#undef TRY
}

/* Queues the set-up's form on the stream; the cuDNN status. */
static int execute(struct epabi_cudnn_stream* s, const struct conv_setup* e, const struct conv_launch* L) {
    const struct epabi_cudnn* lib = s->lib;
    const float one = 1.0f, zero = 0.0f;
    void* ws = (void*)(uintptr_t)s->workspace;
    const size_t wsb = EPABI_CUDNN_WORKSPACE_BYTES;
    int st = 0;
    switch (e->form) {
    case RUN_BIAS_IDENTITY:
    case RUN_BIAS_RELU:
        /* alpha2 = 0: Z (here Y, as ONNX Runtime's FusedConv passes it) is not read */
        return lib->ConvolutionBiasActivationForward(s->handle, &one, e->x_desc, L->x, e->w_desc, L->w, e->conv_desc,
                                                     e->algo, ws, wsb, &zero, e->y_desc, L->y, e->b_desc, L->bias,
                                                     e->act_desc, e->y_desc, L->y);
    case RUN_ADD_BIAS:
        st = lib->ConvolutionForward(s->handle, &one, e->x_desc, L->x, e->w_desc, L->w, e->conv_desc, e->algo, ws, wsb,
                                     &zero, e->y_desc, L->y);
        if (st != 0) return st;
        return lib->AddTensor(s->handle, &one, e->b_desc, L->bias, &one, e->y_desc, L->y);
    case RUN_PLAIN:
        break;
    }
    return lib->ConvolutionForward(s->handle, &one, e->x_desc, L->x, e->w_desc, L->w, e->conv_desc, e->algo, ws, wsb,
                                   &zero, e->y_desc, L->y);
}

static const char* form_text(enum run_form f) {
    switch (f) {
    case RUN_BIAS_RELU: return "bias + ReLU fused (cudnnConvolutionBiasActivationForward)";
    case RUN_BIAS_IDENTITY: return "bias fused (cudnnConvolutionBiasActivationForward, IDENTITY)";
    case RUN_ADD_BIAS: return "bias by cudnnAddTensor";
    case RUN_PLAIN: break;
    }
    return "no bias";
}

/* One batch of TIMING_CALLS calls of a form behind the hold kernel: *us the GPU's microseconds per call. false: a call
 * failed (why says which; the hold is released). */
static bool time_batch(struct epabi_cudnn_stream* s, const struct epabi_cuda_launch_env* env,
                       const struct conv_launch* L, const struct conv_setup* e, bool gemm, epabi_cu_event* ev,
                       double* us, char* why, size_t why_len) {
    const struct epabi_cuda_driver* cu = s->cu;
    __atomic_store_n(s->release, 0u, __ATOMIC_SEQ_CST);
    const volatile unsigned* flag = s->release;
    unsigned long long limit = kHoldLimitNs;
    void* params[] = {&flag, &limit};
    OrtStatus* st = epabi_cuda_run(env, "Conv timing", EPABI_CK_conv_timing_hold, 1, 1, 1, 32, params);
    epabi_cu_result r = st == NULL ? cu->EventRecord(ev[0], s->stream) : 0;
    int cst = 0;
    for (int i = 0; st == NULL && r == 0 && cst == 0 && i < TIMING_CALLS; ++i) {
        if (gemm) {
            st = epabi_cuda_conv_ours(env, L);
        } else if ((cst = execute(s, e, L)) == 0 && e->form != RUN_BIAS_RELU) {
            st = epabi_cuda_conv_epilogue(env, L);
        }
    }
    if (st == NULL && r == 0 && cst == 0) r = cu->EventRecord(ev[1], s->stream);
    __atomic_store_n(s->release, 1u, __ATOMIC_SEQ_CST);
    if (st == NULL && r == 0 && cst == 0) r = cu->EventSynchronize(ev[1]);
    float ms = 0.0f;
    if (st == NULL && r == 0 && cst == 0) r = cu->EventElapsedTime(&ms, ev[0], ev[1]);
    if (st != NULL) {
        snprintf(why, why_len, "%s", s->api->ort->GetErrorMessage(st));
        s->api->ort->ReleaseStatus(st);
        return false;
    }
    if (cst != 0) {
        snprintf(why, why_len, "cuDNN returned %d (%s)", cst, status_name(s->lib, cst));
        return false;
    }
    if (r != 0) {
        snprintf(why, why_len, "CUDA event call returned %d", r);
        return false;
    }
    *us = 1000.0 * (double)ms / TIMING_CALLS;
    return true;
}

/* Times cuDNN's set-up e (run once already) against the GEMM form of L (module comment); the best batch of each, in
 * microseconds per call. false with why when the timing cannot run; Y then holds either form's result. */
static bool time_forms(struct epabi_cudnn_stream* s, const struct epabi_cuda_launch_env* env,
                       const struct conv_launch* L, const struct conv_setup* e, double* us_cudnn, double* us_gemm,
                       char* why, size_t why_len) {
    const struct epabi_cuda_driver* cu = s->cu;
    if (cu->EventElapsedTime == NULL) {
        snprintf(why, why_len, "the driver has no cuEventElapsedTime");
        return false;
    }
    if (s->release == NULL) {
        void* p = NULL;
        if (cu->MemAllocHost(&p, sizeof(unsigned)) != 0) {
            snprintf(why, why_len, "cuMemAllocHost of the hold flag failed");
            return false;
        }
        s->release = p;
    }
    epabi_cu_event ev[2] = {NULL, NULL};
    bool ok = cu->EventCreate(&ev[0], 0) == 0 && cu->EventCreate(&ev[1], 0) == 0;
    if (!ok) snprintf(why, why_len, "cuEventCreate failed");
    /* the GEMM form's first calls: cuBLAS chooses and may load its kernel there */
    OrtStatus* st = ok ? epabi_cuda_conv_ours(env, L) : NULL;
    if (st != NULL) {
        snprintf(why, why_len, "%s", s->api->ort->GetErrorMessage(st));
        s->api->ort->ReleaseStatus(st);
        ok = false;
    }
    double best[2] = {0.0, 0.0};
    for (int b = 0; ok && b < 2 * TIMING_BATCHES; ++b) {
        const bool gemm = b % 2 == 1;
        double us = 0.0;
        ok = time_batch(s, env, L, e, gemm, ev, &us, why, why_len);
        if (ok && (b < 2 || us < best[gemm])) best[gemm] = us;
    }
    for (int i = 0; i < 2; ++i)
        if (ev[i] != NULL) cu->EventDestroy(ev[i]);
    *us_cudnn = best[0];
    *us_gemm = best[1];
    return ok;
}

/* EPABI_CONV_FORM's choice for set-up e, whose cuDNN form has run once on L: true keeps cuDNN (and runs it once more
 * when the timing ran the GEMM form last, so that Y holds what the caller expects: cuDNN's result, activation not
 * applied unless fused); false leaves L to the GEMM form, with why saying so. */
static bool keep_cudnn(struct epabi_cudnn_stream* s, const struct epabi_cuda_launch_env* env,
                       const struct conv_launch* L, struct conv_setup* e, char* why, size_t why_len) {
    int64_t calls = 0;
    if (s->choice == FORM_CUDNN || !epabi_cuda_conv_gemm_form(L, &calls) || calls > TIMING_MAX_CALLS) return true;
    double us_cudnn = 0.0, us_gemm = 0.0;
    char failed[256] = "";
    const bool timed = time_forms(s, env, L, e, &us_cudnn, &us_gemm, failed, sizeof failed);
    const bool gemm = timed && us_gemm < us_cudnn;
    char shape[192];
    snprintf(shape, sizeof shape, "Conv X [%lld,%lld,%lld,%lld] W [%lld,%lld,%lld,%lld] group %lld", (long long)L->n,
             (long long)L->c, (long long)L->h, (long long)L->wd, (long long)L->m, (long long)L->cg, (long long)L->kh,
             (long long)L->kw, (long long)L->group);
    if (timed)
        EPABI_LOG(s->api, s->logger, ORT_LOGGING_LEVEL_INFO,
                  EPABI_EP_NAME ": %s: cuDNN %.1f us, GEMM form %.1f us: using %s", shape, us_cudnn, us_gemm,
                  gemm ? "the GEMM form" : "cuDNN");
    else
        EPABI_LOG(s->api, s->logger, ORT_LOGGING_LEVEL_INFO, EPABI_EP_NAME ": %s: not timed (%s): using cuDNN", shape,
                  failed);
    if (gemm) {
        snprintf(why, why_len, "the GEMM form (im2col + SGEMM) took %.1f us, cuDNN %.1f us", us_gemm, us_cudnn);
        return false;
    }
    const int st = execute(s, e, L);
    if (st == 0) return true;
    snprintf(why, why_len, "its run after the timing returned %d (%s)", st, status_name(s->lib, st));
    return false;
}

/* A new shape's set-up, run once for real on L. On return e->usable says whether cuDNN computed L. */
static void first_run(struct epabi_cudnn_stream* s, const struct epabi_cuda_launch_env* env,
                      const struct conv_launch* L, struct conv_setup* e) {
    char why[320] = "";
    int64_t calls = 0;
    if (s->choice == FORM_GEMM && epabi_cuda_conv_gemm_form(L, &calls)) {
        snprintf(why, sizeof why, "EPABI_CONV_FORM=gemm");
        e->usable = false;
    } else {
        e->usable = describe(s, L, e, why, sizeof why);
    }
    if (e->usable && L->bias != NULL) {
        const bool relu = L->epilogue == EPABI_EPILOGUE_RELU;
        if (relu || e->algo == EPABI_CUDNN_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) {
            int st = s->lib->CreateActivationDescriptor(&e->act_desc);
            if (st != 0) e->act_desc = NULL;
            if (st == 0)
                st = s->lib->SetActivationDescriptor(e->act_desc, relu ? EPABI_CUDNN_ACTIVATION_RELU
                                                                       : EPABI_CUDNN_ACTIVATION_IDENTITY,
                                                     EPABI_CUDNN_PROPAGATE_NAN, 0.0);
            e->form = st == 0 ? (relu ? RUN_BIAS_RELU : RUN_BIAS_IDENTITY) : RUN_ADD_BIAS;
        } else {
            e->form = RUN_ADD_BIAS;
        }
    } else {
        e->form = RUN_PLAIN;
    }
    if (e->usable) {
        int st = execute(s, e, L);
        if (st != 0 && (e->form == RUN_BIAS_RELU || e->form == RUN_BIAS_IDENTITY)) {
            e->form = RUN_ADD_BIAS;
            st = execute(s, e, L);
        }
        if (st != 0) {
            snprintf(why, sizeof why, "its first run with algorithm %s returned %d (%s)", algo_name(e->algo), st,
                     status_name(s->lib, st));
            e->usable = false;
        }
    }
    if (e->usable) e->usable = keep_cudnn(s, env, L, e, why, sizeof why);
    if (e->usable)
        EPABI_LOG(s->api, s->logger, ORT_LOGGING_LEVEL_VERBOSE,
                  EPABI_EP_NAME ": Conv X [%lld,%lld,%lld,%lld] W [%lld,%lld,%lld,%lld] group %lld runs on cuDNN: "
                  "algorithm %s, workspace %zu bytes, %s", (long long)L->n, (long long)L->c, (long long)L->h,
                  (long long)L->wd, (long long)L->m, (long long)L->cg, (long long)L->kh, (long long)L->kw,
                  (long long)L->group, algo_name(e->algo), e->workspace, form_text(e->form));
    if (e->usable) return;
    EPABI_LOG(s->api, s->logger, ORT_LOGGING_LEVEL_VERBOSE,
              EPABI_EP_NAME ": Conv X [%lld,%lld,%lld,%lld] W [%lld,%lld,%lld,%lld] group %lld runs on epabi's "
              "kernel, not cuDNN: %s", (long long)L->n, (long long)L->c, (long long)L->h, (long long)L->wd,
              (long long)L->m, (long long)L->cg, (long long)L->kh, (long long)L->kw, (long long)L->group, why);
    descriptors_free(s->lib, e);   /* the entry only remembers the refusal */
}

/* ---- run ------------------------------------------------------------------------------------------------- */

OrtStatus* epabi_cudnn_conv(struct epabi_cudnn_stream* s, const struct epabi_cuda_launch_env* env,
                            const struct conv_launch* L, bool* done, bool* fused) {
    *done = false;
    *fused = false;
    if (L->n * L->m * L->oh * L->ow <= 0) return NULL;   /* nothing to compute: epabi's launcher returns at once */
    int64_t key[KEY_LEN];
    make_key(L, key);
    const unsigned b = key_hash(key);
    struct conv_setup* e = s->buckets[b];
    while (e != NULL && memcmp(e->key, key, sizeof key) != 0) e = e->next;
    if (e == NULL) {
        /* a first run is never recorded into a capture (cuda_cudnn.h); without the query, never risk it */
        int capturing = 1;
        if (s->cu->StreamIsCapturing == NULL || s->cu->StreamIsCapturing(s->stream, &capturing) != 0 ||
            capturing != EPABI_CU_STREAM_CAPTURE_STATUS_NONE)
            return NULL;
        if (s->setups >= MAX_SETUPS) clear_setups(s);   /* shapes keep changing: start over */
        e = calloc(1, sizeof *e);
        if (e == NULL) return NULL;                     /* out of memory: epabi's kernel */
        memcpy(e->key, key, sizeof key);
        first_run(s, env, L, e);
        e->next = s->buckets[b];
        s->buckets[b] = e;
        s->setups++;
        *done = e->usable;
        *fused = e->usable && e->form == RUN_BIAS_RELU;
        return NULL;
    }
    if (!e->usable) return NULL;
    int st = execute(s, e, L);
    if (st != 0)
        return epabi_error(env->api, ORT_EP_FAIL,
                           EPABI_EP_NAME ": CUDA launch of Conv failed: cuDNN (algorithm %s, %s) returned %d (%s)",
                           algo_name(e->algo), form_text(e->form), st, status_name(s->lib, st));
    *done = true;
    *fused = e->form == RUN_BIAS_RELU;
    return NULL;
}
