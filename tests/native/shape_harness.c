/*
 * shape_harness.c - a standalone driver for the data-movement kernels (transpose, reshape, expand, concat,
 * slice, gather, shape) without the executor or ONNX Runtime. Never linked into the plugin.
 *
 * It implements the executor side of kernel.h (epabi_exec_*, epabi_attr_*) and enforces the contract
 * while it does:
 *   - run() may read only inputs marked shape-deciding: every other input lives on pages that are
 *     PROT_NONE while run() executes, so a stray read faults;
 *   - run() may not write output data: outputs are poisoned before run() and checked after;
 *   - launches are deferred until run() has returned (args pointing into run()'s stack show up under ASan
 *     with detect_stack_use_after_return), then replayed a second time over re-poisoned outputs and the
 *     results compared (what a captured graph does);
 *   - inputs are read-only during launches, and every buffer ends at a PROT_NONE guard page, so an
 *     overrun faults instead of passing silently.
 *
 * Input (stdin), whitespace-separated tokens, one block per case:
 *   case NAME
 *   op OPTYPE SINCE_VERSION
 *   attr NAME i VALUE | attr NAME is COUNT V... | attr NAME f VALUE
 *   in DTYPE RANK D... FLAGS V...      (FLAGS: '-' or letters: s = shape-deciding (readable in run()),
 *                                       c = constant initializer (const_data), u = rank unknown at compile)
 *   in none                            (an absent optional input)
 *   nout N
 *   end
 * Output (stdout), per case: "case NAME" then one of "nokernel", "refused REASON", "error MESSAGE", or one
 * "out DTYPE RANK D... : V..." line per output; then "endcase". Contract violations abort with a message.
 *
 * Built by harness_build.py (driven by shape_cases.py) from this file, native/api.c and every C file in
 * native/kernels/ (the family files and their helpers: tensor_util.c, strided_copy.c, ...). By hand, from the
 * repository root (add -fsanitize=address,undefined for the sanitizer run):
 *   gcc -std=c11 -Wall -Wextra -Werror -Inative -Inative/kernels -Inative/include tests/native/shape_harness.c \
 *       native/api.c native/kernels/[a-z]*.c
 */
#define _DEFAULT_SOURCE
#include "kernel.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern const struct epabi_kernel epabi_kernels_transpose[], epabi_kernels_reshape[], epabi_kernels_expand[],
    epabi_kernels_concat[], epabi_kernels_slice[], epabi_kernels_gather[], epabi_kernels_shape[];

enum { MAX_ATTRS = 8, MAX_ATTR_INTS = 16, MAX_LAUNCHES = 16, MAX_SCRATCH = 16, POISON = 0xAB };

/* ---- host stand-ins ----------------------------------------------------------------------------- */

struct OrtStatus {
    OrtErrorCode code;
    char msg[1024];
};

static OrtStatus* fake_create_status(OrtErrorCode code, const char* msg) {
    OrtStatus* s = calloc(1, sizeof *s);
    if (s == NULL) abort();
    s->code = code;
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    return s;
}

struct harness_attr {
    char name[32];
    char kind;                       /* 'i', 'f', or 'I' (ints) */
    int64_t i;
    float f;
    size_t n;
    int64_t ints[MAX_ATTR_INTS];
};

struct OrtNode {
    int n;
    struct harness_attr a[MAX_ATTRS];
};

static const struct harness_attr* find_attr(const struct epabi_node* node, const char* name, char kind) {
    for (int i = 0; i < node->ort->n; ++i)
        if (strcmp(node->ort->a[i].name, name) == 0 && (kind == 0 || node->ort->a[i].kind == kind))
            return &node->ort->a[i];
    return NULL;
}

bool epabi_attr_int(const struct epabi_node* node, const char* name, int64_t* out) {
    const struct harness_attr* a = find_attr(node, name, 'i');
    if (a != NULL) *out = a->i;
    return a != NULL;
}

bool epabi_attr_float(const struct epabi_node* node, const char* name, float* out) {
    const struct harness_attr* a = find_attr(node, name, 'f');
    if (a != NULL) *out = a->f;
    return a != NULL;
}

bool epabi_attr_ints(const struct epabi_node* node, const char* name, int64_t* out, size_t cap, size_t* count) {
    const struct harness_attr* a = find_attr(node, name, 'I');
    if (a == NULL) return false;
    for (size_t i = 0; i < a->n && i < cap; ++i) out[i] = a->ints[i];
    *count = a->n;
    return true;
}

bool epabi_attr_floats(const struct epabi_node* node, const char* name, float* out, size_t cap, size_t* count) {
    (void)node, (void)name, (void)out, (void)cap, (void)count;
    return false;
}

bool epabi_attr_string(const struct epabi_node* node, const char* name, char* buf, size_t cap) {
    (void)node, (void)name, (void)buf, (void)cap;
    return false;
}

bool epabi_attr_has(const struct epabi_node* node, const char* name) {
    return find_attr(node, name, 0) != NULL;
}

/* ---- guarded buffers ---------------------------------------------------------------------------- */

/* The data ends exactly at a PROT_NONE guard page. */
struct guarded {
    unsigned char* map;
    size_t map_len;                  /* data pages + the guard page */
    unsigned char* data;
    size_t bytes;
};

static size_t page_size(void) {
    return (size_t)sysconf(_SC_PAGESIZE);
}

static void guarded_alloc(struct guarded* g, size_t bytes) {
    const size_t ps = page_size();
    const size_t data_pages = (bytes + ps - 1) / ps;
    g->map_len = (data_pages + 1) * ps;
    g->map = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g->map == MAP_FAILED) {
        perror("mmap");
        abort();
    }
    if (mprotect(g->map + data_pages * ps, ps, PROT_NONE) != 0) abort();
    g->data = g->map + data_pages * ps - bytes;
    g->bytes = bytes;
}

static void guarded_protect(const struct guarded* g, int prot) {
    const size_t data_len = g->map_len - page_size();
    if (data_len > 0 && mprotect(g->map, data_len, prot) != 0) abort();
}

static void guarded_free(struct guarded* g) {
    if (g->map != NULL) munmap(g->map, g->map_len);
    g->map = NULL;
}

/* ---- the run context ------------------------------------------------------------------------------ */

struct launch_rec {
    epabi_launch_fn fn;
    void* args;
};

struct epabi_exec {
    const struct epabi_api* api;
    int n_out;
    bool out_set[EPABI_MAX_NODE_IO];
    struct epabi_tensor out[EPABI_MAX_NODE_IO];
    struct guarded out_buf[EPABI_MAX_NODE_IO];
    int n_launch;
    struct launch_rec launch[MAX_LAUNCHES];
    int n_scratch;
    void* scratch[MAX_SCRATCH];
};

struct epabi_tensor* epabi_exec_output(struct epabi_exec* ex, int index, ONNXTensorElementDataType dtype, int rank,
                                       const int64_t* dims, OrtStatus** status) {
    if (index < 0 || index >= ex->n_out || ex->out_set[index] || rank < 0 || rank > EPABI_MAX_RANK) {
        *status = epabi_error(ex->api, ORT_FAIL, "harness: bad output request (index %d, rank %d)", index, rank);
        return NULL;
    }
    const size_t elsize = epabi_dtype_size(dtype);
    for (int k = 0; k < rank; ++k) {
        if (dims[k] < 0) {
            *status = epabi_error(ex->api, ORT_FAIL, "harness: output dim %d is %" PRId64, k, dims[k]);
            return NULL;
        }
    }
    if (elsize == 0) {
        *status = epabi_error(ex->api, ORT_FAIL, "harness: output dtype %d", (int)dtype);
        return NULL;
    }
    struct epabi_tensor* t = &ex->out[index];
    t->dtype = dtype;
    t->rank = rank;
    if (rank > 0) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
    const size_t bytes = (size_t)epabi_numel(rank, dims) * elsize;
    guarded_alloc(&ex->out_buf[index], bytes);
    memset(ex->out_buf[index].map, POISON, ex->out_buf[index].map_len - page_size());
    t->data = ex->out_buf[index].data;
    t->host = t->data;
    ex->out_set[index] = true;
    return t;
}

void* epabi_exec_scratch(struct epabi_exec* ex, size_t bytes, OrtStatus** status) {
    void* p = ex->n_scratch < MAX_SCRATCH ? malloc(bytes ? bytes : 1) : NULL;
    if (p == NULL) {
        *status = epabi_error(ex->api, ORT_FAIL, "harness: scratch of %zu bytes", bytes);
        return NULL;
    }
    ex->scratch[ex->n_scratch++] = p;
    return p;
}

int epabi_exec_epilogue(const struct epabi_exec* ex) {
    (void)ex;
    return EPABI_EPILOGUE_NONE;
}

const void* epabi_exec_host_data(struct epabi_exec* ex, const struct epabi_tensor* t, OrtStatus** status) {
    (void)ex;
    *status = NULL;
    return t->host != NULL ? t->host : t->data;
}

OrtStatus* epabi_exec_launch(struct epabi_exec* ex, enum epabi_launch_kind kind, epabi_launch_fn fn, const void* args,
                             size_t args_size) {
    (void)kind;
    if (ex->n_launch >= MAX_LAUNCHES) return epabi_error(ex->api, ORT_FAIL, "harness: too many launches");
    void* copy = malloc(args_size ? args_size : 1);
    if (copy == NULL) abort();
    memcpy(copy, args, args_size);
    ex->launch[ex->n_launch].fn = fn;
    ex->launch[ex->n_launch].args = copy;
    ex->n_launch++;
    return NULL;
}

const struct epabi_api* epabi_exec_api(const struct epabi_exec* ex) {
    return ex->api;
}

/* ---- case parsing --------------------------------------------------------------------------------- */

struct input {
    bool absent;
    char flags[8];
    struct epabi_tensor t;
    struct guarded buf;
};

struct harness_case {
    char name[128];
    char op[32];
    int version;
    struct OrtNode attrs;
    int n_in, n_out;
    struct input in[EPABI_MAX_NODE_IO];
};

struct tokens {
    char* save;
    char* text;
};

static const char* next_token(struct tokens* t) {
    char* s = strtok_r(t->text, " \t\r\n", &t->save);
    t->text = NULL;
    return s;
}

static const char* need_token(struct tokens* t) {
    const char* s = next_token(t);
    if (s == NULL) {
        fprintf(stderr, "harness: unexpected end of input\n");
        exit(2);
    }
    return s;
}

static int64_t need_int(struct tokens* t) {
    return strtoll(need_token(t), NULL, 10);
}

static void parse_value(const char* tok, ONNXTensorElementDataType dt, unsigned char* dst) {
    switch (dt) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: { float v = strtof(tok, NULL); memcpy(dst, &v, 4); break; }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: { double v = strtod(tok, NULL); memcpy(dst, &v, 8); break; }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: { uint64_t v = strtoull(tok, NULL, 10); memcpy(dst, &v, 8); break; }
    default: {
        /* Integers, bool, and 16-bit floats given as their raw bits: the low bytes of the value. */
        int64_t v = strtoll(tok, NULL, 10);
        switch (epabi_dtype_size(dt)) {
        case 1: { uint8_t b = (uint8_t)v; memcpy(dst, &b, 1); break; }
        case 2: { uint16_t b = (uint16_t)v; memcpy(dst, &b, 2); break; }
        case 4: { uint32_t b = (uint32_t)v; memcpy(dst, &b, 4); break; }
        default: memcpy(dst, &v, 8); break;
        }
    }
    }
}

static void print_value(const unsigned char* src, ONNXTensorElementDataType dt) {
    switch (dt) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: { float v; memcpy(&v, src, 4); printf(" %.9g", (double)v); break; }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: { double v; memcpy(&v, src, 8); printf(" %.17g", v); break; }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: { int8_t v; memcpy(&v, src, 1); printf(" %d", v); break; }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: { int16_t v; memcpy(&v, src, 2); printf(" %d", v); break; }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: { int32_t v; memcpy(&v, src, 4); printf(" %" PRId32, v); break; }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: { int64_t v; memcpy(&v, src, 8); printf(" %" PRId64, v); break; }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: { uint32_t v; memcpy(&v, src, 4); printf(" %" PRIu32, v); break; }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: { uint64_t v; memcpy(&v, src, 8); printf(" %" PRIu64, v); break; }
    default:
        switch (epabi_dtype_size(dt)) {
        case 1: printf(" %u", (unsigned)src[0]); break;
        default: { uint16_t v; memcpy(&v, src, 2); printf(" %u", (unsigned)v); break; }
        }
    }
}

/* Parses one case after its "case" token; false at a clean end of input. */
static bool parse_case(struct tokens* tk, struct harness_case* c) {
    const char* tok = next_token(tk);
    if (tok == NULL) return false;
    if (strcmp(tok, "case") != 0) {
        fprintf(stderr, "harness: expected 'case', got '%s'\n", tok);
        exit(2);
    }
    memset(c, 0, sizeof *c);
    c->n_out = 1;
    snprintf(c->name, sizeof c->name, "%s", need_token(tk));
    for (;;) {
        tok = need_token(tk);
        if (strcmp(tok, "end") == 0) return true;
        if (strcmp(tok, "op") == 0) {
            snprintf(c->op, sizeof c->op, "%s", need_token(tk));
            c->version = (int)need_int(tk);
        } else if (strcmp(tok, "nout") == 0) {
            c->n_out = (int)need_int(tk);
        } else if (strcmp(tok, "attr") == 0) {
            if (c->attrs.n >= MAX_ATTRS) exit(2);
            struct harness_attr* a = &c->attrs.a[c->attrs.n++];
            snprintf(a->name, sizeof a->name, "%s", need_token(tk));
            const char* kind = need_token(tk);
            if (strcmp(kind, "i") == 0) {
                a->kind = 'i';
                a->i = need_int(tk);
            } else if (strcmp(kind, "f") == 0) {
                a->kind = 'f';
                a->f = strtof(need_token(tk), NULL);
            } else {
                a->kind = 'I';
                a->n = (size_t)need_int(tk);
                for (size_t i = 0; i < a->n; ++i) {
                    const int64_t v = need_int(tk);
                    if (i < MAX_ATTR_INTS) a->ints[i] = v;
                }
                if (a->n > MAX_ATTR_INTS) a->n = MAX_ATTR_INTS;
            }
        } else if (strcmp(tok, "in") == 0) {
            if (c->n_in >= EPABI_MAX_NODE_IO) exit(2);
            struct input* in = &c->in[c->n_in++];
            tok = need_token(tk);
            if (strcmp(tok, "none") == 0) {
                in->absent = true;
                continue;
            }
            in->t.dtype = (ONNXTensorElementDataType)strtol(tok, NULL, 10);
            in->t.rank = (int)need_int(tk);
            if (in->t.rank < 0 || in->t.rank > EPABI_MAX_RANK) exit(2);
            for (int k = 0; k < in->t.rank; ++k) in->t.dims[k] = need_int(tk);
            snprintf(in->flags, sizeof in->flags, "%s", need_token(tk));
            const size_t elsize = epabi_dtype_size(in->t.dtype);
            const int64_t n = epabi_numel(in->t.rank, in->t.dims);
            guarded_alloc(&in->buf, (size_t)n * (elsize ? elsize : 1));
            for (int64_t i = 0; i < n; ++i) parse_value(need_token(tk), in->t.dtype, in->buf.data + (size_t)i * elsize);
            in->t.data = in->buf.data;
            in->t.host = in->t.data;   /* host memory: readable */
        } else {
            fprintf(stderr, "harness: unknown directive '%s'\n", tok);
            exit(2);
        }
    }
}

/* ---- running ---------------------------------------------------------------------------------------- */

static const struct epabi_kernel* find_kernel(const char* op, int version) {
    const struct epabi_kernel* const families[] = {
        epabi_kernels_transpose, epabi_kernels_reshape, epabi_kernels_expand, epabi_kernels_concat,
        epabi_kernels_slice,     epabi_kernels_gather,  epabi_kernels_shape,
    };
    for (size_t f = 0; f < sizeof families / sizeof families[0]; ++f)
        for (const struct epabi_kernel* k = families[f]; k->op_type != NULL; ++k)
            if (strcmp(k->op_type, op) == 0 && version >= k->since_min && version <= k->since_max) return k;
    return NULL;
}

static void fail_contract(const struct harness_case* c, const char* what) {
    fprintf(stderr, "harness: case %s: contract violation: %s\n", c->name, what);
    abort();
}

/* A fault is either run() reading protected input data or an access past a buffer's end. */
static void on_fault(int sig) {
    static const char msg[] = "harness: memory fault: run() read non-shape input data outside a launch, or a "
                              "kernel accessed memory out of bounds\n";
    (void)sig;
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) _exit(3);
    _exit(3);
}

static void replay(struct epabi_exec* ex) {
    for (int i = 0; i < ex->n_launch; ++i) ex->launch[i].fn(ex->launch[i].args);
}

static void run_case(const struct epabi_api* api, struct harness_case* c) {
    printf("case %s\n", c->name);
    struct epabi_node node;
    memset(&node, 0, sizeof node);
    node.api = api;
    node.ort = &c->attrs;
    node.name = c->name;
    node.op_type = c->op;
    node.domain = "";
    node.since_version = c->version;
    node.n_in = c->n_in;
    node.n_out = c->n_out;
    for (int i = 0; i < c->n_in; ++i) {
        struct epabi_value_desc* v = &node.in[i];
        v->name = "in";
        if (c->in[i].absent) continue;       /* dtype UNDEFINED */
        v->dtype = c->in[i].t.dtype;
        v->rank = strchr(c->in[i].flags, 'u') ? -1 : c->in[i].t.rank;
        memcpy(v->dims, c->in[i].t.dims, sizeof v->dims);
        if (strchr(c->in[i].flags, 'c')) {
            v->const_data = c->in[i].t.data;
            v->const_count = (size_t)epabi_numel(c->in[i].t.rank, c->in[i].t.dims);
        }
    }
    for (int i = 0; i < c->n_out; ++i) {
        node.out[i].name = "out";
        node.out[i].rank = -1;
    }

    const struct epabi_kernel* k = find_kernel(c->op, c->version);
    if (k == NULL) {
        printf("nokernel\nendcase\n");
        return;
    }
    char why[256] = "";
    if (!k->supports(&node, why, sizeof why)) {
        printf("refused %s\nendcase\n", why);
        return;
    }
    void* state = NULL;
    OrtStatus* st = k->init != NULL ? k->init(&node, &state) : NULL;
    if (st != NULL) {
        printf("error %s\nendcase\n", st->msg);
        free(st);
        return;
    }

    struct epabi_exec* ex = calloc(1, sizeof *ex);
    if (ex == NULL) abort();
    ex->api = api;
    ex->n_out = c->n_out;
    const struct epabi_tensor* ins[EPABI_MAX_NODE_IO];
    for (int i = 0; i < c->n_in; ++i) {
        ins[i] = c->in[i].absent ? NULL : &c->in[i].t;
        if (!c->in[i].absent) guarded_protect(&c->in[i].buf, strchr(c->in[i].flags, 's') ? PROT_READ : PROT_NONE);
    }
    st = k->run(ex, state, ins, c->n_in, c->n_out);
    for (int i = 0; i < c->n_in; ++i)
        if (!c->in[i].absent) guarded_protect(&c->in[i].buf, PROT_READ);

    for (int o = 0; o < c->n_out; ++o) {
        if (!ex->out_set[o]) continue;
        for (size_t b = 0; b < ex->out_buf[o].bytes; ++b)
            if (ex->out_buf[o].data[b] != POISON) fail_contract(c, "run() wrote output data outside a launch");
    }
    if (st != NULL) {
        printf("error %s\n", st->msg);
        free(st);
    } else {
        for (int o = 0; o < c->n_out; ++o)
            if (!ex->out_set[o]) fail_contract(c, "run() succeeded without producing every output");
        replay(ex);
        /* Replay over re-poisoned outputs, as a captured graph would, and expect identical bytes. */
        unsigned char* first[EPABI_MAX_NODE_IO] = {NULL};
        for (int o = 0; o < c->n_out; ++o) {
            first[o] = malloc(ex->out_buf[o].bytes + 1);
            if (first[o] == NULL) abort();
            memcpy(first[o], ex->out_buf[o].data, ex->out_buf[o].bytes);
            memset(ex->out_buf[o].data, POISON, ex->out_buf[o].bytes);
        }
        replay(ex);
        for (int o = 0; o < c->n_out; ++o) {
            if (memcmp(first[o], ex->out_buf[o].data, ex->out_buf[o].bytes) != 0)
                fail_contract(c, "a replay of the launches produced different output");
            free(first[o]);
            const struct epabi_tensor* t = &ex->out[o];
            printf("out %d %d", (int)t->dtype, t->rank);
            for (int d = 0; d < t->rank; ++d) printf(" %" PRId64, t->dims[d]);
            printf(" :");
            const size_t elsize = epabi_dtype_size(t->dtype);
            const int64_t n = epabi_numel(t->rank, t->dims);
            for (int64_t i = 0; i < n; ++i) print_value(ex->out_buf[o].data + (size_t)i * elsize, t->dtype);
            printf("\n");
        }
    }
    printf("endcase\n");

    for (int i = 0; i < ex->n_launch; ++i) free(ex->launch[i].args);
    for (int i = 0; i < ex->n_scratch; ++i) free(ex->scratch[i]);
    for (int o = 0; o < c->n_out; ++o) guarded_free(&ex->out_buf[o]);
    free(ex);
    if (k->release != NULL) k->release(state);
}

static char* read_all(FILE* f) {
    size_t cap = 1 << 16, len = 0;
    char* buf = malloc(cap);
    if (buf == NULL) abort();
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len < 2) {
            char* bigger = realloc(buf, cap * 2);
            if (bigger == NULL) abort();
            buf = bigger;
            cap *= 2;
        }
    }
    buf[len] = '\0';
    return buf;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fault;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);

    OrtApi ort;
    memset(&ort, 0, sizeof ort);
    ort.CreateStatus = fake_create_status;
    const struct epabi_api api = {.ort = &ort, .ep = NULL, .version = 0, .host_version = "harness"};

    char* text = read_all(stdin);
    struct tokens tk = {NULL, text};
    struct harness_case* c = malloc(sizeof *c);
    if (c == NULL) abort();
    while (parse_case(&tk, c)) {
        run_case(&api, c);
        for (int i = 0; i < c->n_in; ++i) guarded_free(&c->in[i].buf);
        fflush(stdout);
    }
    free(c);
    free(text);
    return 0;
}
