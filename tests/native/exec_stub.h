/*
 * exec_stub.h - the executor and host stand-ins that both kernel harnesses link (kernel_harness.c,
 * shape_harness.c; tests/native/README.md). Never linked into the plugin.
 *
 * It provides what a kernel file needs from outside native/kernels/:
 *   - kernel.h's executor half (epabi_exec_output, _scratch, _launch, _host_data, _epilogue, _api) over buffers
 *     the harness can poison, guard and inspect. Launches are recorded (args copied), never run inside run():
 *     exec_stub_replay runs them, as a captured graph would, after run() has returned.
 *   - epabi_attr_* over a small attribute list (struct OrtNode below; struct epabi_node.ort points at one).
 *   - an API block whose CreateStatus makes the struct OrtStatus below, so native/api.c's epabi_error (linked
 *     as it is) formats kernels' errors.
 * How outputs and scratch are allocated and guarded is each harness's choice (struct exec_stub_options); the
 * stub records the contract breaches it sees (an output requested twice or as another dtype than declared, a
 * zero-byte scratch request) in ex->contract, and leaves every other check to the harness.
 *
 * Ownership: exec_stub_begin's context owns its buffers and argument copies until exec_stub_end. A status is
 * freed with free(). Thread-safety: none needed; a harness runs one case at a time on one thread.
 */
#ifndef EPABI_TESTS_EXEC_STUB_H
#define EPABI_TESTS_EXEC_STUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel.h"

enum {
    EXEC_STUB_MAX_ATTRS = 16,
    EXEC_STUB_MAX_LIST = 64,      /* values of an ints/floats attribute */
    EXEC_STUB_MAX_LAUNCH = 64,
    EXEC_STUB_MAX_SCRATCH = 64,
    EXEC_STUB_GUARD_BYTES = 64,   /* guard bytes after a EXEC_STUB_GUARD_TAIL buffer */
    EXEC_STUB_GUARD_FILL = 0xA5
};

/* ---- host stand-ins ----------------------------------------------------------------------------------- */

struct OrtStatus {
    OrtErrorCode code;
    char msg[1024];
};

/* The API block to put in struct epabi_node.api: its OrtApi serves CreateStatus only; ep is NULL. */
const struct epabi_api* exec_stub_api(void);

enum exec_stub_attr_type { EXEC_STUB_INT, EXEC_STUB_FLOAT, EXEC_STUB_INTS, EXEC_STUB_FLOATS, EXEC_STUB_STRING,
                           EXEC_STUB_TENSOR };

struct exec_stub_attr {
    char name[64];
    enum exec_stub_attr_type type;
    int64_t i;
    float f;
    int64_t ints[EXEC_STUB_MAX_LIST];
    float floats[EXEC_STUB_MAX_LIST];
    size_t n;                         /* values in ints or floats; elements of a tensor (0 or 1) */
    char s[64];
    ONNXTensorElementDataType tdtype;  /* a tensor's dtype and its element's bytes */
    unsigned char tdata[8];
};

/* A node's attributes, as the harness parsed them. epabi_attr_X finds the first attribute of that name and
 * answers only when it has type X. */
struct OrtNode {
    int n;
    struct exec_stub_attr a[EXEC_STUB_MAX_ATTRS];
};

/* ---- guarded buffers ---------------------------------------------------------------------------------- */

enum exec_stub_guard {
    /* malloc'ed, followed by EXEC_STUB_GUARD_BYTES bytes of EXEC_STUB_GUARD_FILL that exec_stub_guard_ok checks
     * afterwards (kernel_harness: cheap enough for a few hundred cases with large tensors) */
    EXEC_STUB_GUARD_TAIL,
    /* mmap'ed so that the data ends exactly at a PROT_NONE page: an overrun faults at once (shape_harness) */
    EXEC_STUB_GUARD_PAGE
};

struct exec_stub_buffer {
    unsigned char* data;
    size_t bytes;
    enum exec_stub_guard guard;
    unsigned char* map;   /* the allocation: data's page(s) and the guard page, or data and its guard bytes */
    size_t map_len;
};

/* Allocates `bytes` with that guard and fills them with `fill` (page guards: the whole data pages). Aborts when
 * out of memory. */
void exec_stub_buffer_alloc(struct exec_stub_buffer* b, size_t bytes, enum exec_stub_guard guard, unsigned char fill);
/* Page guards only: makes the data pages readable (read-only) or not accessible at all. */
void exec_stub_buffer_protect(const struct exec_stub_buffer* b, bool readable);
/* True when the guard bytes after a tail-guarded buffer are intact (always for page guards: a write past the
 * end would have faulted). */
bool exec_stub_guard_ok(const struct exec_stub_buffer* b);
/* Frees b (nothing when it was never allocated) and zeroes it. */
void exec_stub_buffer_free(struct exec_stub_buffer* b);

/* ---- the executor stand-in ---------------------------------------------------------------------------- */

struct exec_stub_options {
    enum exec_stub_guard guard;   /* for outputs and scratch */
    unsigned char poison;         /* fills every new output and scratch buffer */
    /* n_out declared output dtypes (UNDEFINED: unknown), checked against epabi_exec_output's; NULL: none */
    const ONNXTensorElementDataType* out_dtypes;
};

struct exec_stub_launch {
    epabi_launch_fn fn;
    void* args;                   /* owned copy */
};

/* One run of one kernel. The harness reads the fields; only the stub's functions write them. */
struct epabi_exec {
    const struct epabi_api* api;
    struct exec_stub_options opt;
    int n_out;
    bool out_set[EPABI_MAX_NODE_IO];
    /* An empty output's data is NULL with tail guards (a host may hand out no buffer), and points at the guard
     * page with page guards; either way a kernel touching it shows up. */
    struct epabi_tensor out[EPABI_MAX_NODE_IO];
    struct exec_stub_buffer out_buf[EPABI_MAX_NODE_IO];
    int n_scratch;
    struct exec_stub_buffer scratch[EXEC_STUB_MAX_SCRATCH];
    int n_launch;
    struct exec_stub_launch launch[EXEC_STUB_MAX_LAUNCH];
    char contract[256];           /* the first contract breach seen, "" if none */
    uint64_t error_word;          /* what launches report (epabi_exec_error_word): a site's kind bits only */
};

/* A context for a kernel with n_out outputs (1..EPABI_MAX_NODE_IO); opt is copied. Aborts when out of memory. */
struct epabi_exec* exec_stub_begin(const struct epabi_api* api, int n_out, const struct exec_stub_options* opt);
/* Frees the context, its buffers and its argument copies. */
void exec_stub_end(struct epabi_exec* ex);

/* Records a contract breach (printf-style) unless one was recorded already. */
void exec_stub_violation(struct epabi_exec* ex, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* Refills every output and scratch buffer with `fill`, then runs the recorded launches in order. */
void exec_stub_replay(struct epabi_exec* ex, unsigned char fill);

#endif
