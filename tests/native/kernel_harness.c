/*
 * kernel_harness.c - runs software-adapter kernels outside ONNX Runtime, for tests/native/kernel_cases.py.
 *
 * The executor and the host are exec_stub.c's (epabi_exec_*, epabi_attr_*, the OrtStatus behind native/api.c's
 * epabi_error), with outputs and scratch malloc'ed, followed by guard bytes and filled with 0xFF (NaN). Never
 * linked into the plugin. Built together with exec_stub.c, native/api.c, registry.c, tensor_util.c and the
 * kernel files (harness_build.py links every C file in native/kernels/); a family that is not linked is simply
 * absent (registry.c declares families weak).
 *
 * Beyond computing results, it checks the kernel contract (kernel.h):
 *   - launches are deferred until run() has returned, and the outputs are overwritten with NaN between
 *     run() and the launches, so a kernel that computes inside run() or leans on run()'s stack shows up;
 *   - the recorded launches are replayed onto outputs and scratch refilled with other garbage, and must
 *     reproduce the first results bit for bit (graph replay);
 *   - guard bytes after every output and scratch buffer must survive, inputs must stay unchanged, each
 *     output must be requested exactly once (and as its declared dtype), zero-byte scratch requests are
 *     flagged (the stub records those two).
 * Build with -fsanitize=address,undefined to also catch reads out of bounds and leaks.
 *
 * Input (the case file named by argv[1]), whitespace-separated tokens:
 *   case NAME OP_TYPE OPSET N_IN N_OUT
 *   attr NAME i INT | f FLOAT | ints N INT... | floats N FLOAT... | s WORD
 *   in DTYPE SHAPE_KNOWN IS_CONST RANK DIM... VALUE...   (DTYPE 0: absent, nothing follows; values for the
 *                                                        numeric dtypes and bool: floats in hex or decimal,
 *                                                        integers and bool (0/1) in decimal)
 *   out DTYPE NAME                                       (NAME "-": the optional output is not wired)
 *   end
 * Output on stdout, one "result NAME STATUS ..." line per case: "ok N" followed by N lines
 * "tensor INDEX DTYPE RANK DIM... VALUE..." (floats in %a, integers and bool in decimal), or
 * "refused|nokernel|error|initerror|contract TEXT".
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_stub.h"
#include "kernels/kernel.h"

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

static uint64_t h_uint(struct h_reader* r) {
    const char* t = h_need(r);
    char* end = NULL;
    unsigned long long v = strtoull(t, &end, 10);
    if (*end != '\0') h_die(t);
    return (uint64_t)v;
}

static double h_double(struct h_reader* r) {
    const char* t = h_need(r);
    char* end = NULL;
    double v = strtod(t, &end);
    if (*end != '\0') h_die(t);
    return v;
}

static float h_float(struct h_reader* r) {
    const char* t = h_need(r);
    char* end = NULL;
    float v = strtof(t, &end);
    if (*end != '\0') h_die(t);
    return v;
}

/* Element k of a tensor of dtype t, read from the case file (dtypes without values read nothing). */
static void h_read_value(struct h_reader* r, ONNXTensorElementDataType t, void* data, int64_t k) {
    switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: ((float*)data)[k] = h_float(r); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: ((double*)data)[k] = h_double(r); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: ((int8_t*)data)[k] = (int8_t)h_int(r); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: ((int16_t*)data)[k] = (int16_t)h_int(r); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: ((int32_t*)data)[k] = (int32_t)h_int(r); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: ((int64_t*)data)[k] = h_int(r); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: ((uint8_t*)data)[k] = (uint8_t)h_uint(r); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: ((uint16_t*)data)[k] = (uint16_t)h_uint(r); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: ((uint32_t*)data)[k] = (uint32_t)h_uint(r); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: ((uint64_t*)data)[k] = h_uint(r); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: ((uint8_t*)data)[k] = (uint8_t)h_int(r); break;
    default: break;
    }
}

/* Prints element i of t as h_read_value reads it. */
static void h_print_value(const struct epabi_tensor* t, int64_t i) {
    const void* d = t->data;
    switch (t->dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: printf(" %a", (double)((const float*)d)[i]); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: printf(" %a", ((const double*)d)[i]); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: printf(" %d", (int)((const int8_t*)d)[i]); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: printf(" %d", (int)((const int16_t*)d)[i]); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: printf(" %ld", (long)((const int32_t*)d)[i]); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: printf(" %lld", (long long)((const int64_t*)d)[i]); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: printf(" %u", (unsigned)((const uint8_t*)d)[i]); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: printf(" %u", (unsigned)((const uint16_t*)d)[i]); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: printf(" %lu", (unsigned long)((const uint32_t*)d)[i]); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: printf(" %llu", (unsigned long long)((const uint64_t*)d)[i]); break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: printf(" %d", (int)((const uint8_t*)d)[i]); break;
    default: break;
    }
}

struct h_case {
    char name[128];
    struct epabi_node node;
    struct OrtNode attrs;
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
    if (c->attrs.n == EXEC_STUB_MAX_ATTRS) h_die("too many attributes");
    struct exec_stub_attr* a = &c->attrs.a[c->attrs.n++];
    snprintf(a->name, sizeof a->name, "%s", h_need(r));
    const char* type = h_need(r);
    if (strcmp(type, "i") == 0) {
        a->type = EXEC_STUB_INT;
        a->i = h_int(r);
    } else if (strcmp(type, "f") == 0) {
        a->type = EXEC_STUB_FLOAT;
        a->f = h_float(r);
    } else if (strcmp(type, "ints") == 0 || strcmp(type, "floats") == 0) {
        a->type = type[0] == 'i' ? EXEC_STUB_INTS : EXEC_STUB_FLOATS;
        int64_t n = h_int(r);
        if (n < 0 || n > EXEC_STUB_MAX_LIST) h_die("list length");
        a->n = (size_t)n;
        for (size_t i = 0; i < a->n; ++i) {
            if (a->type == EXEC_STUB_INTS)
                a->ints[i] = h_int(r);
            else
                a->floats[i] = h_float(r);
        }
    } else if (strcmp(type, "s") == 0) {
        a->type = EXEC_STUB_STRING;
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
    for (int64_t k = 0; k < n; ++k) h_read_value(r, t->dtype, t->data, k);
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
    c->node.ort = &c->attrs;
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
    printf("tensor %d %d %d", index, (int)t->dtype, t->rank);
    for (int i = 0; i < t->rank; ++i) printf(" %lld", (long long)t->dims[i]);
    int64_t n = epabi_numel(t->rank, t->dims);
    for (int64_t i = 0; i < n; ++i) h_print_value(t, i);
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
    const struct exec_stub_options opt = {.guard = EXEC_STUB_GUARD_TAIL, .poison = 0xFF, .out_dtypes = c->out_dtypes};
    struct epabi_exec* ex = exec_stub_begin(c->node.api, c->node.n_out, &opt);

    OrtStatus* st = k->run(ex, state, c->in, c->node.n_in, c->node.n_out);
    if (st != NULL) {
        h_print_text("error", c->name, st->msg);
        free(st);
        goto done;
    }
    /* Anything run() wrote into outputs itself is wiped here: only launches may produce results. */
    exec_stub_replay(ex, 0xFF);
    void* first[EPABI_MAX_NODE_IO] = {NULL};
    for (int i = 0; i < ex->n_out; ++i) {
        if (!ex->out_set[i]) continue;
        first[i] = malloc(ex->out_buf[i].bytes + 1);
        if (first[i] == NULL) abort();
        memcpy(first[i], ex->out_buf[i].data, ex->out_buf[i].bytes);
    }
    exec_stub_replay(ex, 0x7F);
    for (int i = 0; i < ex->n_out; ++i) {
        if (!ex->out_set[i]) {
            if (c->out_names[i][0] != '\0') exec_stub_violation(ex, "declared output %d was never produced", i);
            continue;
        }
        if (memcmp(first[i], ex->out_buf[i].data, ex->out_buf[i].bytes) != 0)
            exec_stub_violation(ex, "output %d differs on replay (a launch depends on buffer contents it did not "
                                "write)", i);
        if (!exec_stub_guard_ok(&ex->out_buf[i])) exec_stub_violation(ex, "write past the end of output %d", i);
        free(first[i]);
    }
    for (int i = 0; i < ex->n_scratch; ++i)
        if (!exec_stub_guard_ok(&ex->scratch[i])) exec_stub_violation(ex, "write past the end of scratch buffer %d", i);
    for (int i = 0; i < c->node.n_in; ++i)
        if (c->in[i] != NULL && c->in_bytes[i] > 0 && memcmp(c->copies[i], c->in[i]->data, c->in_bytes[i]) != 0)
            exec_stub_violation(ex, "input %d was modified", i);
    if (ex->contract[0] != '\0') {
        h_print_text("contract", c->name, ex->contract);
        goto done;
    }
    int produced = 0;
    for (int i = 0; i < ex->n_out; ++i) produced += ex->out_set[i];
    printf("result %s ok %d\n", c->name, produced);
    for (int i = 0; i < ex->n_out; ++i)
        if (ex->out_set[i]) h_print_tensor(i, &ex->out[i]);
done:
    exec_stub_end(ex);
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
    struct h_reader r = {text};
    struct h_case* c = malloc(sizeof *c);
    if (c == NULL) abort();
    while (h_read_case(&r, c, exec_stub_api())) {
        h_run_case(c);
        h_case_free(c);
        fflush(stdout);
    }
    free(c);
    free(text);
    return 0;
}
