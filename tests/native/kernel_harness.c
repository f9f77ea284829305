/*
 * kernel_harness.c - runs software-adapter kernels outside ONNX Runtime, for tests/native/kernel_cases.py.
 *
 * It stands in for the executor and the host: epabi_exec_* over malloc, epabi_attr_* over a small attribute
 * array (struct epabi_node.ort points at it), epabi_error over a private OrtStatus. Never linked into the
 * plugin. Built together with registry.c, tensor_util.c and the kernel files (harness_build.py links every C
 * file in native/kernels/); a family that is not linked is simply absent (registry.c declares families weak).
 *
 * Beyond computing results, it checks the kernel contract (kernel.h):
 *   - launches are deferred until run() has returned, and the outputs are overwritten with NaN between
 *     run() and the launches, so a kernel that computes inside run() or leans on run()'s stack shows up;
 *   - the recorded launches are replayed onto outputs and scratch refilled with other garbage, and must
 *     reproduce the first results bit for bit (graph replay);
 *   - guard bytes after every output and scratch buffer must survive, inputs must stay unchanged, each
 *     output must be requested exactly once, zero-byte scratch requests are flagged.
 * Build with -fsanitize=address,undefined to also catch reads out of bounds and leaks.
 *
 * Input (the case file named by argv[1]), whitespace-separated tokens:
 *   case NAME OP_TYPE OPSET N_IN N_OUT
 *   attr NAME i INT | f FLOAT | ints N INT... | floats N FLOAT... | s WORD
 *   in DTYPE SHAPE_KNOWN IS_CONST RANK DIM... VALUE...   (DTYPE 0: absent, nothing follows; values only
 *                                                        for float (hex or decimal) and int64 tensors)
 *   out DTYPE NAME                                       (NAME "-": the optional output is not wired)
 *   end
 * Output on stdout, one "result NAME STATUS ..." line per case: "ok N" followed by N lines
 * "tensor INDEX RANK DIM... VALUE..." (floats in %a), or "refused|nokernel|error|initerror|contract TEXT".
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel.h"

/* ---- host stand-ins --------------------------------------------------------------------------------- */

struct OrtStatus {
    OrtErrorCode code;
    char msg[1024];
};

OrtStatus* epabi_error(const struct epabi_api* api, OrtErrorCode code, const char* fmt, ...) {
    (void)api;
    OrtStatus* st = calloc(1, sizeof *st);
    if (st == NULL) abort();
    st->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
    return st;
}

enum { H_MAX_ATTRS = 16, H_MAX_LIST = 64, H_MAX_LAUNCH = 64, H_MAX_SCRATCH = 64, H_GUARD = 64 };

enum h_attr_type { H_INT, H_FLOAT, H_INTS, H_FLOATS, H_STRING };

struct h_attr {
    char name[64];
    enum h_attr_type type;
    int64_t i;
    float f;
    int64_t ints[H_MAX_LIST];
    float floats[H_MAX_LIST];
    size_t n;
    char s[64];
};

struct h_attrs {
    int n;
    struct h_attr a[H_MAX_ATTRS];
};

static const struct h_attr* h_find(const struct epabi_node* node, const char* name, enum h_attr_type type) {
    const struct h_attrs* as = (const struct h_attrs*)(const void*)node->ort;
    for (int i = 0; i < as->n; ++i)
        if (strcmp(as->a[i].name, name) == 0) return as->a[i].type == type ? &as->a[i] : NULL;
    return NULL;
}

bool epabi_attr_int(const struct epabi_node* node, const char* name, int64_t* out) {
    const struct h_attr* a = h_find(node, name, H_INT);
    if (a != NULL) *out = a->i;
    return a != NULL;
}

bool epabi_attr_float(const struct epabi_node* node, const char* name, float* out) {
    const struct h_attr* a = h_find(node, name, H_FLOAT);
    if (a != NULL) *out = a->f;
    return a != NULL;
}

bool epabi_attr_ints(const struct epabi_node* node, const char* name, int64_t* out, size_t cap, size_t* count) {
    const struct h_attr* a = h_find(node, name, H_INTS);
    if (a == NULL) return false;
    for (size_t i = 0; i < a->n && i < cap; ++i) out[i] = a->ints[i];
    *count = a->n;
    return true;
}

bool epabi_attr_floats(const struct epabi_node* node, const char* name, float* out, size_t cap, size_t* count) {
    const struct h_attr* a = h_find(node, name, H_FLOATS);
    if (a == NULL) return false;
    for (size_t i = 0; i < a->n && i < cap; ++i) out[i] = a->floats[i];
    *count = a->n;
    return true;
}

bool epabi_attr_string(const struct epabi_node* node, const char* name, char* buf, size_t cap) {
    const struct h_attr* a = h_find(node, name, H_STRING);
    if (a == NULL || cap == 0) return a != NULL;
    snprintf(buf, cap, "%s", a->s);
    return true;
}

bool epabi_attr_has(const struct epabi_node* node, const char* name) {
    const struct h_attrs* as = (const struct h_attrs*)(const void*)node->ort;
    for (int i = 0; i < as->n; ++i)
        if (strcmp(as->a[i].name, name) == 0) return true;
    return false;
}

/* ---- the executor stand-in ---------------------------------------------------------------------------- */

struct h_buffer {
    unsigned char* mem;   /* bytes + H_GUARD guard bytes */
    size_t bytes;
};

struct h_launch {
    epabi_launch_fn fn;
    void* args;
};

struct epabi_exec {
    const struct epabi_api* api;
    int n_out;
    const ONNXTensorElementDataType* out_dtypes;   /* declared output dtypes (UNDEFINED: unknown) */
    struct epabi_tensor outs[EPABI_MAX_NODE_IO];
    struct h_buffer out_buf[EPABI_MAX_NODE_IO];
    bool out_set[EPABI_MAX_NODE_IO];
    struct h_buffer scratch[H_MAX_SCRATCH];
    int n_scratch;
    struct h_launch launches[H_MAX_LAUNCH];
    int n_launch;
    char contract[256];   /* first contract violation seen, if any */
};

static void h_violation(struct epabi_exec* ex, const char* fmt, ...) {
    if (ex->contract[0] != '\0') return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ex->contract, sizeof ex->contract, fmt, ap);
    va_end(ap);
}

static bool h_alloc(struct h_buffer* b, size_t bytes, unsigned char fill) {
    b->mem = malloc(bytes + H_GUARD);
    if (b->mem == NULL) return false;
    b->bytes = bytes;
    memset(b->mem, fill, bytes);
    memset(b->mem + bytes, 0xA5, H_GUARD);
    return true;
}

static bool h_guard_ok(const struct h_buffer* b) {
    for (size_t i = 0; i < H_GUARD; ++i)
        if (b->mem[b->bytes + i] != 0xA5) return false;
    return true;
}

struct epabi_tensor* epabi_exec_output(struct epabi_exec* ex, int index, ONNXTensorElementDataType dtype, int rank,
                                       const int64_t* dims, OrtStatus** status) {
    *status = NULL;
    if (index < 0 || index >= ex->n_out) {
        *status = epabi_error(ex->api, ORT_INVALID_ARGUMENT, "harness: output index %d out of range", index);
        return NULL;
    }
    if (ex->out_set[index]) h_violation(ex, "output %d requested twice", index);
    if (ex->out_dtypes[index] != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED && ex->out_dtypes[index] != dtype)
        h_violation(ex, "output %d requested as dtype %d, declared %d", index, (int)dtype, (int)ex->out_dtypes[index]);
    if (rank < 0 || rank > EPABI_MAX_RANK) {
        *status = epabi_error(ex->api, ORT_INVALID_ARGUMENT, "harness: output rank %d", rank);
        return NULL;
    }
    for (int i = 0; i < rank; ++i) {
        if (dims[i] < 0) {
            *status = epabi_error(ex->api, ORT_INVALID_ARGUMENT, "harness: output dim %d is %lld", i,
                                  (long long)dims[i]);
            return NULL;
        }
    }
    size_t bytes = (size_t)epabi_numel(rank, dims) * epabi_dtype_size(dtype);
    free(ex->out_buf[index].mem);
    if (!h_alloc(&ex->out_buf[index], bytes, 0xFF)) {
        *status = epabi_error(ex->api, ORT_FAIL, "harness: out of memory");
        return NULL;
    }
    struct epabi_tensor* t = &ex->outs[index];
    t->dtype = dtype;
    t->rank = rank;
    memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
    /* An empty tensor gets no buffer, as a host may do: kernels must not touch (or offset) its data. */
    t->data = bytes > 0 ? ex->out_buf[index].mem : NULL;
    t->host = t->data;
    ex->out_set[index] = true;
    return t;
}

void* epabi_exec_scratch(struct epabi_exec* ex, size_t bytes, OrtStatus** status) {
    *status = NULL;
    if (bytes == 0) h_violation(ex, "zero-byte scratch request");
    if (ex->n_scratch == H_MAX_SCRATCH || !h_alloc(&ex->scratch[ex->n_scratch], bytes, 0xFF)) {
        *status = epabi_error(ex->api, ORT_FAIL, "harness: out of scratch");
        return NULL;
    }
    return ex->scratch[ex->n_scratch++].mem;
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
    if (ex->n_launch == H_MAX_LAUNCH) return epabi_error(ex->api, ORT_FAIL, "harness: too many launches");
    void* copy = malloc(args_size > 0 ? args_size : 1);
    if (copy == NULL) return epabi_error(ex->api, ORT_FAIL, "harness: out of memory");
    memcpy(copy, args, args_size);
    ex->launches[ex->n_launch].fn = fn;
    ex->launches[ex->n_launch].args = copy;
    ex->n_launch++;
    return NULL;
}

const struct epabi_api* epabi_exec_api(const struct epabi_exec* ex) { return ex->api; }

static void h_exec_free(struct epabi_exec* ex) {
    for (int i = 0; i < EPABI_MAX_NODE_IO; ++i) free(ex->out_buf[i].mem);
    for (int i = 0; i < ex->n_scratch; ++i) free(ex->scratch[i].mem);
    for (int i = 0; i < ex->n_launch; ++i) free(ex->launches[i].args);
}

/* Refills outputs and scratch with `fill`, then runs every recorded launch in order. */
static void h_replay(struct epabi_exec* ex, unsigned char fill) {
    for (int i = 0; i < ex->n_out; ++i)
        if (ex->out_set[i]) memset(ex->out_buf[i].mem, fill, ex->out_buf[i].bytes);
    for (int i = 0; i < ex->n_scratch; ++i) memset(ex->scratch[i].mem, fill, ex->scratch[i].bytes);
    for (int i = 0; i < ex->n_launch; ++i) ex->launches[i].fn(ex->launches[i].args);
}

/* ---- case file ---------------------------------------------------------------------------------------- */

struct h_reader {
    char* p;
};

static const char* h_tok(struct h_reader* r) {
    while (*r->p != '\0' && isspace((unsigned char)*r->p)) r->p++;
    if (*r->p == '\0') return NULL;
    char* start = r->p;
    while (*r->p != '\0' && !isspace((unsigned char)*r->p)) r->p++;
    if (*r->p != '\0') *r->p++ = '\0';
    return start;
}

static void h_die(const char* what) {
    fprintf(stderr, "kernel_harness: malformed case file near '%s'\n", what != NULL ? what : "<eof>");
    exit(2);
}

static const char* h_need(struct h_reader* r) {
    const char* t = h_tok(r);
    if (t == NULL) h_die(NULL);
    return t;
}

static int64_t h_int(struct h_reader* r) {
    const char* t = h_need(r);
    char* end = NULL;
    long long v = strtoll(t, &end, 10);
    if (*end != '\0') h_die(t);
    return (int64_t)v;
}

static float h_float(struct h_reader* r) {
    const char* t = h_need(r);
    char* end = NULL;
    float v = strtof(t, &end);
    if (*end != '\0') h_die(t);
    return v;
}

struct h_case {
    char name[128];
    struct epabi_node node;
    struct h_attrs attrs;
    struct epabi_tensor tensors[EPABI_MAX_NODE_IO];
    const struct epabi_tensor* in[EPABI_MAX_NODE_IO];
    void* copies[EPABI_MAX_NODE_IO];   /* pristine input bytes, to detect writes to inputs */
    size_t in_bytes[EPABI_MAX_NODE_IO];
    char out_names[EPABI_MAX_NODE_IO][64];
    ONNXTensorElementDataType out_dtypes[EPABI_MAX_NODE_IO];
    char op_type[64];
};

static void h_case_free(struct h_case* c) {
    for (int i = 0; i < EPABI_MAX_NODE_IO; ++i) {
        free(c->tensors[i].data);
        free(c->copies[i]);
    }
}

static void h_read_attr(struct h_reader* r, struct h_case* c) {
    if (c->attrs.n == H_MAX_ATTRS) h_die("too many attributes");
    struct h_attr* a = &c->attrs.a[c->attrs.n++];
    snprintf(a->name, sizeof a->name, "%s", h_need(r));
    const char* type = h_need(r);
    if (strcmp(type, "i") == 0) {
        a->type = H_INT;
        a->i = h_int(r);
    } else if (strcmp(type, "f") == 0) {
        a->type = H_FLOAT;
        a->f = h_float(r);
    } else if (strcmp(type, "ints") == 0 || strcmp(type, "floats") == 0) {
        a->type = type[0] == 'i' ? H_INTS : H_FLOATS;
        int64_t n = h_int(r);
        if (n < 0 || n > H_MAX_LIST) h_die("list length");
        a->n = (size_t)n;
        for (size_t i = 0; i < a->n; ++i) {
            if (a->type == H_INTS)
                a->ints[i] = h_int(r);
            else
                a->floats[i] = h_float(r);
        }
    } else if (strcmp(type, "s") == 0) {
        a->type = H_STRING;
        snprintf(a->s, sizeof a->s, "%s", h_need(r));
    } else {
        h_die(type);
    }
}

static void h_read_input(struct h_reader* r, struct h_case* c, int i) {
    struct epabi_value_desc* d = &c->node.in[i];
    struct epabi_tensor* t = &c->tensors[i];
    d->dtype = (ONNXTensorElementDataType)h_int(r);
    d->name = "in";
    if (d->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) {
        d->rank = -1;
        c->in[i] = NULL;
        return;
    }
    bool known = h_int(r) != 0;
    bool is_const = h_int(r) != 0;
    int64_t rank = h_int(r);
    if (rank < 0 || rank > EPABI_MAX_RANK) h_die("rank");
    t->dtype = d->dtype;
    t->rank = (int)rank;
    for (int k = 0; k < t->rank; ++k) t->dims[k] = h_int(r);
    int64_t n = epabi_numel(t->rank, t->dims);
    size_t es = epabi_dtype_size(t->dtype);
    if (es == 0) es = 1;
    c->in_bytes[i] = (size_t)n * es;
    t->data = calloc(c->in_bytes[i] > 0 ? c->in_bytes[i] : 1, 1);
    if (t->data == NULL) h_die("out of memory");
    for (int64_t k = 0; k < n; ++k) {
        if (t->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
            ((float*)t->data)[k] = h_float(r);
        else if (t->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64)
            ((int64_t*)t->data)[k] = h_int(r);
    }
    c->copies[i] = malloc(c->in_bytes[i] > 0 ? c->in_bytes[i] : 1);
    if (c->copies[i] == NULL) h_die("out of memory");
    memcpy(c->copies[i], t->data, c->in_bytes[i]);
    if (n == 0) {   /* empty inputs have no buffer either */
        free(t->data);
        t->data = NULL;
    }
    t->host = t->data;   /* a host-memory harness: the values are host-readable */
    d->rank = known ? t->rank : -1;
    if (known) memcpy(d->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    if (is_const) {
        d->const_data = t->data;
        d->const_count = (size_t)n;
    }
    c->in[i] = t;
}

/* Reads one case; false at the end of the file. */
static bool h_read_case(struct h_reader* r, struct h_case* c, const struct epabi_api* api) {
    const char* t = h_tok(r);
    if (t == NULL) return false;
    if (strcmp(t, "case") != 0) h_die(t);
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", h_need(r));
    snprintf(c->op_type, sizeof c->op_type, "%s", h_need(r));
    c->node.api = api;
    c->node.ort = (const OrtNode*)(const void*)&c->attrs;
    c->node.name = c->name;
    c->node.op_type = c->op_type;
    c->node.domain = "";
    c->node.since_version = (int)h_int(r);
    c->node.n_in = (int)h_int(r);
    c->node.n_out = (int)h_int(r);
    if (c->node.n_in < 0 || c->node.n_in > EPABI_MAX_NODE_IO || c->node.n_out < 1 ||
        c->node.n_out > EPABI_MAX_NODE_IO)
        h_die("arity");
    int n_in = 0, n_out = 0;
    for (;;) {
        t = h_need(r);
        if (strcmp(t, "end") == 0) break;
        if (strcmp(t, "attr") == 0) {
            h_read_attr(r, c);
        } else if (strcmp(t, "in") == 0) {
            if (n_in == c->node.n_in) h_die("too many inputs");
            h_read_input(r, c, n_in++);
        } else if (strcmp(t, "out") == 0) {
            if (n_out == c->node.n_out) h_die("too many outputs");
            c->out_dtypes[n_out] = (ONNXTensorElementDataType)h_int(r);
            const char* nm = h_need(r);
            snprintf(c->out_names[n_out], sizeof c->out_names[n_out], "%s", strcmp(nm, "-") == 0 ? "" : nm);
            c->node.out[n_out].name = c->out_names[n_out];
            c->node.out[n_out].dtype = c->out_dtypes[n_out];
            c->node.out[n_out].rank = -1;
            ++n_out;
        } else {
            h_die(t);
        }
    }
    if (n_in != c->node.n_in || n_out != c->node.n_out) h_die(c->name);
    return true;
}

/* ---- running one case ---------------------------------------------------------------------------------- */

static void h_print_text(const char* status, const char* name, const char* text) {
    printf("result %s %s ", name, status);
    for (const char* p = text; *p != '\0'; ++p) putchar(*p == '\n' ? ' ' : *p);
    putchar('\n');
}

static void h_print_tensor(int index, const struct epabi_tensor* t) {
    printf("tensor %d %d", index, t->rank);
    for (int i = 0; i < t->rank; ++i) printf(" %lld", (long long)t->dims[i]);
    int64_t n = epabi_numel(t->rank, t->dims);
    for (int64_t i = 0; i < n; ++i) {
        if (t->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
            printf(" %a", (double)((const float*)t->data)[i]);
        else if (t->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64)
            printf(" %lld", (long long)((const int64_t*)t->data)[i]);
    }
    putchar('\n');
}

static void h_run_case(struct h_case* c) {
    const struct epabi_kernel* k = epabi_kernel_find(c->node.op_type, c->node.since_version);
    if (k == NULL) {
        h_print_text("nokernel", c->name, c->node.op_type);
        return;
    }
    char why[256] = "";
    if (!k->supports(&c->node, why, sizeof why)) {
        h_print_text("refused", c->name, why[0] != '\0' ? why : "(no reason given)");
        return;
    }
    void* state = NULL;
    if (k->init != NULL) {
        OrtStatus* st = k->init(&c->node, &state);
        if (st != NULL) {
            h_print_text("initerror", c->name, st->msg);
            free(st);
            return;
        }
    }
    struct epabi_exec* ex = calloc(1, sizeof *ex);
    if (ex == NULL) abort();
    ex->api = c->node.api;
    ex->n_out = c->node.n_out;
    ex->out_dtypes = c->out_dtypes;

    OrtStatus* st = k->run(ex, state, c->in, c->node.n_in, c->node.n_out);
    if (st != NULL) {
        h_print_text("error", c->name, st->msg);
        free(st);
        goto done;
    }
    /* Anything run() wrote into outputs itself is wiped here: only launches may produce results. */
    h_replay(ex, 0xFF);
    void* first[EPABI_MAX_NODE_IO] = {NULL};
    for (int i = 0; i < ex->n_out; ++i) {
        if (!ex->out_set[i]) continue;
        first[i] = malloc(ex->out_buf[i].bytes + 1);
        if (first[i] == NULL) abort();
        memcpy(first[i], ex->out_buf[i].mem, ex->out_buf[i].bytes);
    }
    h_replay(ex, 0x7F);
    for (int i = 0; i < ex->n_out; ++i) {
        if (!ex->out_set[i]) {
            if (c->out_names[i][0] != '\0') h_violation(ex, "declared output %d was never produced", i);
            continue;
        }
        if (memcmp(first[i], ex->out_buf[i].mem, ex->out_buf[i].bytes) != 0)
            h_violation(ex, "output %d differs on replay (a launch depends on buffer contents it did not write)", i);
        if (!h_guard_ok(&ex->out_buf[i])) h_violation(ex, "write past the end of output %d", i);
        free(first[i]);
    }
    for (int i = 0; i < ex->n_scratch; ++i)
        if (!h_guard_ok(&ex->scratch[i])) h_violation(ex, "write past the end of scratch buffer %d", i);
    for (int i = 0; i < c->node.n_in; ++i)
        if (c->in[i] != NULL && c->in_bytes[i] > 0 && memcmp(c->copies[i], c->in[i]->data, c->in_bytes[i]) != 0)
            h_violation(ex, "input %d was modified", i);
    if (ex->contract[0] != '\0') {
        h_print_text("contract", c->name, ex->contract);
        goto done;
    }
    int produced = 0;
    for (int i = 0; i < ex->n_out; ++i) produced += ex->out_set[i];
    printf("result %s ok %d\n", c->name, produced);
    for (int i = 0; i < ex->n_out; ++i)
        if (ex->out_set[i]) h_print_tensor(i, &ex->outs[i]);
done:
    h_exec_free(ex);
    free(ex);
    if (k->release != NULL) k->release(state);
}

static char* h_slurp(const char* path) {
    FILE* f = fopen(path, "rb");
    if (f == NULL) return NULL;
    size_t cap = 1 << 16, len = 0;
    char* buf = malloc(cap);
    size_t got;
    while (buf != NULL && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len - 1 == 0) {
            char* bigger = realloc(buf, cap * 2);
            if (bigger == NULL) free(buf);
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf != NULL) buf[len] = '\0';
    return buf;
}

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASE_FILE\n", argv[0]);
        return 2;
    }
    char* text = h_slurp(argv[1]);
    if (text == NULL) {
        fprintf(stderr, "kernel_harness: cannot read %s\n", argv[1]);
        return 2;
    }
    struct epabi_api api;
    memset(&api, 0, sizeof api);
    struct h_reader r = {text};
    struct h_case* c = malloc(sizeof *c);
    if (c == NULL) abort();
    while (h_read_case(&r, c, &api)) {
        h_run_case(c);
        h_case_free(c);
        fflush(stdout);
    }
    free(c);
    free(text);
    return 0;
}
