/*
 * shape_harness.c - a standalone driver for the data-movement kernels (transpose, reshape, expand, concat,
 * slice, gather, shape, split, pad, tile, range, constant-of-shape, argmax/argmin, nearest resize) without the
 * executor or ONNX Runtime; kernels are looked up through registry.c. Never linked into the plugin.
 *
 * The executor side of kernel.h (epabi_exec_*, epabi_attr_*) is exec_stub.c's, with every output and scratch
 * buffer ending at a PROT_NONE guard page and poisoned. On top of it this driver enforces the contract:
 *   - run() may read only inputs marked shape-deciding: every other input lives on pages that are
 *     PROT_NONE while run() executes, so a stray read faults;
 *   - run() may not write output data: outputs are poisoned before run() and checked after;
 *   - launches are deferred until run() has returned (args pointing into run()'s stack show up under ASan
 *     with detect_stack_use_after_return), then replayed a second time over re-poisoned outputs and the
 *     results compared (what a captured graph does);
 *   - inputs are read-only during launches, and every buffer ends at a PROT_NONE guard page, so an
 *     overrun faults instead of passing silently;
 *   - each output is requested once, and no scratch request is for zero bytes (recorded by the stub).
 *
 * Input (stdin), whitespace-separated tokens, one block per case:
 *   case NAME
 *   op OPTYPE SINCE_VERSION
 *   attr NAME i VALUE | attr NAME is COUNT V... | attr NAME f VALUE | attr NAME s WORD
 *   attr NAME t DTYPE V                (a one-element tensor attribute)
 *   in DTYPE RANK D... FLAGS V...      (FLAGS: '-' or letters: s = shape-deciding (readable in run()),
 *                                       c = constant initializer (const_data), u = rank unknown at compile)
 *   in none                            (an absent optional input)
 *   nout N
 *   end
 * Output (stdout), per case: "case NAME" then one of "nokernel", "refused REASON", "error MESSAGE", or one
 * "out DTYPE RANK D... : V..." line per output; then "endcase". Contract violations abort with a message.
 *
 * Built by harness_build.py (driven by shape_cases.py) from this file, exec_stub.c, native/api.c and every C file
 * in native/kernels/ (the family files and their helpers: tensor_util.c, strided_copy.c, ...). By hand, from the
 * repository root (add -fsanitize=address,undefined for the sanitizer run):
 *   gcc -std=c11 -Wall -Wextra -Werror -Inative -Inative/kernels -Inative/include tests/native/shape_harness.c \
 *       tests/native/exec_stub.c native/api.c native/kernels/[a-z]*.c -lm
 */
#define _DEFAULT_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec_stub.h"
#include "kernel.h"

enum { POISON = 0xAB };

/* ---- case parsing --------------------------------------------------------------------------------- */

struct input {
    bool absent;
    char flags[8];
    struct epabi_tensor t;
    struct exec_stub_buffer buf;
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
            if (c->attrs.n >= EXEC_STUB_MAX_ATTRS) exit(2);
            struct exec_stub_attr* a = &c->attrs.a[c->attrs.n++];
            snprintf(a->name, sizeof a->name, "%s", need_token(tk));
            const char* kind = need_token(tk);
            if (strcmp(kind, "i") == 0) {
                a->type = EXEC_STUB_INT;
                a->i = need_int(tk);
            } else if (strcmp(kind, "f") == 0) {
                a->type = EXEC_STUB_FLOAT;
                a->f = strtof(need_token(tk), NULL);
            } else if (strcmp(kind, "s") == 0) {
                a->type = EXEC_STUB_STRING;
                snprintf(a->s, sizeof a->s, "%s", need_token(tk));
            } else if (strcmp(kind, "t") == 0) {
                /* a one-element tensor: dtype, then the value as an input value would be written */
                a->type = EXEC_STUB_TENSOR;
                a->tdtype = (ONNXTensorElementDataType)need_int(tk);
                a->n = 1;
                if (epabi_dtype_size(a->tdtype) == 0 || epabi_dtype_size(a->tdtype) > sizeof a->tdata) exit(2);
                parse_value(need_token(tk), a->tdtype, a->tdata);
            } else {
                a->type = EXEC_STUB_INTS;
                a->n = (size_t)need_int(tk);
                for (size_t i = 0; i < a->n; ++i) {
                    const int64_t v = need_int(tk);
                    if (i < EXEC_STUB_MAX_LIST) a->ints[i] = v;
                }
                if (a->n > EXEC_STUB_MAX_LIST) a->n = EXEC_STUB_MAX_LIST;
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
            exec_stub_buffer_alloc(&in->buf, (size_t)n * (elsize ? elsize : 1), EXEC_STUB_GUARD_PAGE, 0);
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

    const struct epabi_kernel* k = epabi_kernel_find(c->op, c->version);
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

    const struct exec_stub_options opt = {.guard = EXEC_STUB_GUARD_PAGE, .poison = POISON, .out_dtypes = NULL};
    struct epabi_exec* ex = exec_stub_begin(api, c->n_out, &opt);
    const struct epabi_tensor* ins[EPABI_MAX_NODE_IO];
    for (int i = 0; i < c->n_in; ++i) {
        ins[i] = c->in[i].absent ? NULL : &c->in[i].t;
        if (!c->in[i].absent) exec_stub_buffer_protect(&c->in[i].buf, strchr(c->in[i].flags, 's') != NULL);
    }
    st = k->run(ex, state, ins, c->n_in, c->n_out);
    for (int i = 0; i < c->n_in; ++i)
        if (!c->in[i].absent) exec_stub_buffer_protect(&c->in[i].buf, true);
    if (ex->contract[0] != '\0') fail_contract(c, ex->contract);

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
        exec_stub_replay(ex, POISON);
        unsigned char* first[EPABI_MAX_NODE_IO] = {NULL};
        for (int o = 0; o < c->n_out; ++o) {
            first[o] = malloc(ex->out_buf[o].bytes + 1);
            if (first[o] == NULL) abort();
            memcpy(first[o], ex->out_buf[o].data, ex->out_buf[o].bytes);
        }
        /* Replay over re-poisoned outputs, as a captured graph would, and expect identical bytes. */
        exec_stub_replay(ex, POISON);
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

    exec_stub_end(ex);
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

    char* text = read_all(stdin);
    struct tokens tk = {NULL, text};
    struct harness_case* c = malloc(sizeof *c);
    if (c == NULL) abort();
    while (parse_case(&tk, c)) {
        run_case(exec_stub_api(), c);
        for (int i = 0; i < c->n_in; ++i) exec_stub_buffer_free(&c->in[i].buf);
        fflush(stdout);
    }
    free(c);
    free(text);
    return 0;
}
