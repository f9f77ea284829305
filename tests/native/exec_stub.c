/*
 * exec_stub.c - see exec_stub.h: the executor and host stand-ins the kernel harnesses share.
 */
#define _DEFAULT_SOURCE
#include "exec_stub.h"
#include "thread_pool.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- host stand-ins --------------------------------------------------------------------------------- */

static OrtStatus* stub_create_status(OrtErrorCode code, const char* msg) {
    OrtStatus* s = calloc(1, sizeof *s);
    if (s == NULL) abort();
    s->code = code;
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    return s;
}

static const OrtApi stub_ort = {.CreateStatus = stub_create_status};
static const struct epabi_api stub_api = {.ort = &stub_ort, .ep = NULL, .version = 0, .host_version = "harness"};

const struct epabi_api* exec_stub_api(void) {
    return &stub_api;
}

static const struct exec_stub_attr* find_attr(const struct epabi_node* node, const char* name,
                                              enum exec_stub_attr_type type) {
    const struct OrtNode* as = node->ort;
    for (int i = 0; i < as->n; ++i)
        if (strcmp(as->a[i].name, name) == 0) return as->a[i].type == type ? &as->a[i] : NULL;
    return NULL;
}

bool epabi_attr_int(const struct epabi_node* node, const char* name, int64_t* out) {
    const struct exec_stub_attr* a = find_attr(node, name, EXEC_STUB_INT);
    if (a != NULL) *out = a->i;
    return a != NULL;
}

bool epabi_attr_float(const struct epabi_node* node, const char* name, float* out) {
    const struct exec_stub_attr* a = find_attr(node, name, EXEC_STUB_FLOAT);
    if (a != NULL) *out = a->f;
    return a != NULL;
}

bool epabi_attr_ints(const struct epabi_node* node, const char* name, int64_t* out, size_t cap, size_t* count) {
    const struct exec_stub_attr* a = find_attr(node, name, EXEC_STUB_INTS);
    if (a == NULL) return false;
    for (size_t i = 0; i < a->n && i < cap; ++i) out[i] = a->ints[i];
    *count = a->n;
    return true;
}

bool epabi_attr_floats(const struct epabi_node* node, const char* name, float* out, size_t cap, size_t* count) {
    const struct exec_stub_attr* a = find_attr(node, name, EXEC_STUB_FLOATS);
    if (a == NULL) return false;
    for (size_t i = 0; i < a->n && i < cap; ++i) out[i] = a->floats[i];
    *count = a->n;
    return true;
}

bool epabi_attr_string(const struct epabi_node* node, const char* name, char* buf, size_t cap) {
    const struct exec_stub_attr* a = find_attr(node, name, EXEC_STUB_STRING);
    if (a == NULL || cap == 0) return a != NULL;
    snprintf(buf, cap, "%s", a->s);
    return true;
}

bool epabi_attr_tensor(const struct epabi_node* node, const char* name, ONNXTensorElementDataType* dtype, void* out,
                       size_t cap, size_t* count) {
    const struct exec_stub_attr* a = find_attr(node, name, EXEC_STUB_TENSOR);
    if (a == NULL) return false;
    const size_t bytes = a->n * epabi_dtype_size(a->tdtype);
    if (out != NULL) memcpy(out, a->tdata, bytes < cap ? bytes : cap);
    *dtype = a->tdtype;
    *count = a->n;
    return true;
}

bool epabi_attr_has(const struct epabi_node* node, const char* name) {
    const struct OrtNode* as = node->ort;
    for (int i = 0; i < as->n; ++i)
        if (strcmp(as->a[i].name, name) == 0) return true;
    return false;
}

/* ---- guarded buffers -------------------------------------------------------------------------------- */

static size_t page_size(void) {
    return (size_t)sysconf(_SC_PAGESIZE);
}

void exec_stub_buffer_alloc(struct exec_stub_buffer* b, size_t bytes, enum exec_stub_guard guard, unsigned char fill) {
    b->guard = guard;
    b->bytes = bytes;
    if (guard == EXEC_STUB_GUARD_TAIL) {
        b->map_len = bytes + EXEC_STUB_GUARD_BYTES;
        b->map = malloc(b->map_len);
        if (b->map == NULL) abort();
        b->data = b->map;
        memset(b->data, fill, bytes);
        memset(b->data + bytes, EXEC_STUB_GUARD_FILL, EXEC_STUB_GUARD_BYTES);
        return;
    }
    const size_t ps = page_size();
    const size_t data_pages = (bytes + ps - 1) / ps;
    b->map_len = (data_pages + 1) * ps;
    b->map = mmap(NULL, b->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b->map == MAP_FAILED) {
        perror("mmap");
        abort();
    }
    if (mprotect(b->map + data_pages * ps, ps, PROT_NONE) != 0) abort();
    b->data = b->map + data_pages * ps - bytes;
    if (fill != 0) memset(b->map, fill, data_pages * ps);   /* fresh anonymous pages are zero already */
}

void exec_stub_buffer_protect(const struct exec_stub_buffer* b, bool readable) {
    if (b->guard != EXEC_STUB_GUARD_PAGE) return;
    const size_t data_len = b->map_len - page_size();
    if (data_len > 0 && mprotect(b->map, data_len, readable ? PROT_READ : PROT_NONE) != 0) abort();
}

bool exec_stub_guard_ok(const struct exec_stub_buffer* b) {
    if (b->guard != EXEC_STUB_GUARD_TAIL) return true;
    for (size_t i = 0; i < EXEC_STUB_GUARD_BYTES; ++i)
        if (b->data[b->bytes + i] != EXEC_STUB_GUARD_FILL) return false;
    return true;
}

void exec_stub_buffer_free(struct exec_stub_buffer* b) {
    if (b->map != NULL) {
        if (b->guard == EXEC_STUB_GUARD_TAIL) free(b->map);
        else munmap(b->map, b->map_len);
    }
    memset(b, 0, sizeof *b);
}

/* ---- the executor stand-in -------------------------------------------------------------------------- */

struct epabi_exec* exec_stub_begin(const struct epabi_api* api, int n_out, const struct exec_stub_options* opt) {
    struct epabi_exec* ex = calloc(1, sizeof *ex);
    if (ex == NULL) abort();
    ex->api = api;
    ex->opt = *opt;
    ex->n_out = n_out;
    return ex;
}

void exec_stub_end(struct epabi_exec* ex) {
    for (int i = 0; i < EPABI_MAX_NODE_IO; ++i) exec_stub_buffer_free(&ex->out_buf[i]);
    for (int i = 0; i < ex->n_scratch; ++i) exec_stub_buffer_free(&ex->scratch[i]);
    for (int i = 0; i < ex->n_launch; ++i) free(ex->launch[i].args);
    free(ex);
}

void exec_stub_violation(struct epabi_exec* ex, const char* fmt, ...) {
    if (ex->contract[0] != '\0') return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ex->contract, sizeof ex->contract, fmt, ap);
    va_end(ap);
}

void exec_stub_replay(struct epabi_exec* ex, unsigned char fill) {
    for (int i = 0; i < ex->n_out; ++i)
        if (ex->out_set[i]) memset(ex->out_buf[i].data, fill, ex->out_buf[i].bytes);
    for (int i = 0; i < ex->n_scratch; ++i) memset(ex->scratch[i].data, fill, ex->scratch[i].bytes);
    for (int i = 0; i < ex->n_launch; ++i) ex->launch[i].fn(ex->launch[i].args);
}

struct epabi_tensor* epabi_exec_output(struct epabi_exec* ex, int index, ONNXTensorElementDataType dtype, int rank,
                                       const int64_t* dims, OrtStatus** status) {
    *status = NULL;
    if (index < 0 || index >= ex->n_out) {
        *status = epabi_error(ex->api, ORT_EP_FAIL, "harness: output index %d out of range", index);
        return NULL;
    }
    if (ex->out_set[index]) exec_stub_violation(ex, "output %d requested twice", index);
    const ONNXTensorElementDataType* declared = ex->opt.out_dtypes;
    if (declared != NULL && declared[index] != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED && declared[index] != dtype)
        exec_stub_violation(ex, "output %d requested as dtype %d, declared %d", index, (int)dtype,
                            (int)declared[index]);
    if (rank < 0 || rank > EPABI_MAX_RANK) {
        *status = epabi_error(ex->api, ORT_EP_FAIL, "harness: output rank %d", rank);
        return NULL;
    }
    for (int i = 0; i < rank; ++i) {
        if (dims[i] < 0) {
            *status = epabi_error(ex->api, ORT_EP_FAIL, "harness: output dim %d is %" PRId64, i, dims[i]);
            return NULL;
        }
    }
    const size_t elsize = epabi_dtype_size(dtype);
    if (elsize == 0) {
        *status = epabi_error(ex->api, ORT_EP_FAIL, "harness: output dtype %d", (int)dtype);
        return NULL;
    }
    const size_t bytes = (size_t)epabi_numel(rank, dims) * elsize;
    exec_stub_buffer_free(&ex->out_buf[index]);
    exec_stub_buffer_alloc(&ex->out_buf[index], bytes, ex->opt.guard, ex->opt.poison);
    struct epabi_tensor* t = &ex->out[index];
    t->dtype = dtype;
    t->rank = rank;
    if (rank > 0) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
    t->data = bytes > 0 || ex->opt.guard == EXEC_STUB_GUARD_PAGE ? ex->out_buf[index].data : NULL;
    t->host = t->data;   /* host memory */
    ex->out_set[index] = true;
    return t;
}

/* The harness runs a kernel alone, with no plan to allow a view: the output is always its own buffer, so the kernels'
 * copy path (the one a fused output takes) is what the cases check. */
struct epabi_tensor* epabi_exec_output_view(struct epabi_exec* ex, int index, const struct epabi_tensor* src, int rank,
                                            const int64_t* dims, bool* is_view, OrtStatus** status) {
    *is_view = false;
    return epabi_exec_output(ex, index, src->dtype, rank, dims, status);
}

void* epabi_exec_scratch(struct epabi_exec* ex, size_t bytes, OrtStatus** status) {
    *status = NULL;
    if (bytes == 0) exec_stub_violation(ex, "zero-byte scratch request");
    if (ex->n_scratch == EXEC_STUB_MAX_SCRATCH) {
        *status = epabi_error(ex->api, ORT_FAIL, "harness: out of scratch (%d buffers)", EXEC_STUB_MAX_SCRATCH);
        return NULL;
    }
    exec_stub_buffer_alloc(&ex->scratch[ex->n_scratch], bytes, ex->opt.guard, ex->opt.poison);
    return ex->scratch[ex->n_scratch++].data;
}

int epabi_exec_epilogue(const struct epabi_exec* ex) {
    (void)ex;
    return EPABI_EPILOGUE_NONE;
}

void epabi_exec_epilogue_params(const struct epabi_exec* ex, float* alpha, float* beta) {
    (void)ex;
    *alpha = 0.0f;
    *beta = 0.0f;
}

const void* epabi_exec_host_data(struct epabi_exec* ex, const struct epabi_tensor* t, OrtStatus** status) {
    (void)ex;
    *status = NULL;
    return t->host != NULL ? t->host : t->data;
}

OrtStatus* epabi_exec_launch(struct epabi_exec* ex, enum epabi_launch_kind kind, epabi_launch_fn fn, const void* args,
                             size_t args_size) {
    (void)kind;
    if (ex->n_launch == EXEC_STUB_MAX_LAUNCH) return epabi_error(ex->api, ORT_FAIL, "harness: too many launches");
    void* copy = malloc(args_size > 0 ? args_size : 1);
    if (copy == NULL) return epabi_error(ex->api, ORT_FAIL, "harness: out of memory");
    memcpy(copy, args, args_size);
    ex->launch[ex->n_launch].fn = fn;
    ex->launch[ex->n_launch].args = copy;
    ex->n_launch++;
    return NULL;
}

/* EPABI_HARNESS_THREADS=N (N >= 2): every run gets one process-wide pool of N threads, so the kernels' threaded
 * paths run; else NULL (one thread). Never destroyed: it lives as long as the harness. */
static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;
static struct epabi_pool* g_pool;

static void make_pool(void) {
    const char* v = getenv("EPABI_HARNESS_THREADS");
    int n = v != NULL ? atoi(v) : 0;
    if (n >= 2) g_pool = epabi_pool_create(n);
}

struct epabi_pool* epabi_exec_pool(const struct epabi_exec* ex) {
    (void)ex;
    pthread_once(&g_pool_once, make_pool);
    return g_pool;
}

const struct epabi_api* epabi_exec_api(const struct epabi_exec* ex) {
    return ex->api;
}

uint64_t* epabi_exec_error_word(struct epabi_exec* ex) {
    return &ex->error_word;
}

uint64_t epabi_exec_error_site(const struct epabi_exec* ex, enum epabi_launch_error kind) {
    (void)ex;
    return (uint64_t)kind;   /* no plan: the kind alone */
}
