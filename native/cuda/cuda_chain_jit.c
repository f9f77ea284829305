/*
 * cuda_chain_jit.c - one kernel of its own per elementwise chain (see cuda_launch_internal.h,
 * epabi_cuda_chain_kernel): the chain's op list written out as straight-line CUDA C and compiled by NVRTC.
 *
 * Why: chain_f32 (cuda_kernels.cu) interprets the op list per element: a switch per op, the registers in local memory
 * and every input offset from the general index walk. On the H200 that made magika's 10-op GELU chain over 260k floats
 * take 14 us, where its memory traffic takes about 1. The generated kernel keeps every value in registers, reads a
 * dense input at the element's own index, and walks the dims only for the inputs that broadcast (32-bit arithmetic).
 *
 * Bits: each op calls what the interpreter calls (cuda_math.cuh: chain_binary, un_apply, chain_clip, the unfused
 * kernels' arithmetic) with the same compile options, and chain_binary's __f*_rn intrinsics are never contracted into
 * a neighbouring op, so a chain's kernel gives the interpreter's results exactly (tests/test_chain_fusion.py compares
 * both with the unfused kernels on the GPU, EPABI_CHAIN_JIT=require and =0).
 *
 * The cache key is what the kernel is specialised on: the op list (immediates by their bits), the counts, the rank and
 * which inputs are dense; the dims and strides stay launch parameters, so a chain over symbolic dims compiles once for
 * every batch size. A launch that finds its kernel costs a key comparison, not the program's text. Programs are
 * compiled once per device and process and never unloaded (like cuda_module.c's module: the primary context lives as
 * long as the process).
 *
 * Thread-safety: one mutex guards the cache; compilation happens under it (tens of milliseconds per chain, once).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_launch_internal.h"
#include "ep_factory.h"   /* EPABI_EP_NAME */

enum {
    MAX_PROGRAMS = 1024,   /* beyond this many distinct chains a process runs the interpreter (bounded memory) */
    SOURCE_CHARS = 16384   /* EPABI_CHAIN_MAX_OPS ops of at most ~200 characters each, plus the frame */
};

struct jit_key {
    int32_t n_ops, n_in, n_out, rank;
    uint32_t dense;                           /* bit k: input k is dense (input_dense) */
    int32_t ordinal;                          /* the device */
    struct chain_op ops[EPABI_CHAIN_MAX_OPS]; /* n_ops of them, the rest and every pad_ zero */
};

struct program {
    uint64_t hash;
    struct jit_key key;
    epabi_cu_module module;
    epabi_cu_function fn;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct program g_programs[MAX_PROGRAMS];   /* under g_lock; never freed */
static int g_count;                               /* under g_lock */

/* EPABI_CHAIN_JIT: "0" runs every chain through chain_f32; "require" makes a chain that cannot have its own kernel an
 * error instead (tests use it to prove the own kernels ran); anything else, or unset: own kernels where they apply.
 * Read at every launch outside a graph (a getenv), so a test may switch it between sessions. */
enum jit_mode { JIT_ON, JIT_OFF, JIT_REQUIRE };

static enum jit_mode jit_mode(void) {
    const char* v = getenv("EPABI_CHAIN_JIT");
    if (v == NULL) return JIT_ON;
    if (strcmp(v, "0") == 0) return JIT_OFF;
    return strcmp(v, "require") == 0 ? JIT_REQUIRE : JIT_ON;
}

struct text {
    char* s;
    size_t len;
    bool overflow;
};

static void put(struct text* t, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text* t, const char* fmt, ...) {
    if (t->overflow) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->s + t->len, SOURCE_CHARS - t->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= SOURCE_CHARS - t->len) t->overflow = true;
    else t->len += (size_t)n;
}

/* A float as an exact literal of its bits. */
static void put_float(struct text* t, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    put(t, "__int_as_float((int)0x%08xu)", bits);
}

/* Operand r of op k: a register, an input's loaded value, or the op's immediate (alpha for a, beta for b). */
static void put_operand(struct text* t, const struct chain_op* o, int32_t r, bool first) {
    if (r == EPABI_CHAIN_IMMEDIATE) put_float(t, first ? o->alpha : o->beta);
    else if (r >= 0) put(t, "r%d", (int)r);
    else put(t, "x%d", (int)(-1 - r));
}

/* Whether input k walks the output's elements in order (its strides those of a dense array of the output's dims). */
static bool input_dense(const struct chain_args* a, int k) {
    int64_t s = 1;
    for (int d = a->rank - 1; d >= 0; --d) {
        if (a->dims[d] != 1 && a->strides[k][d] != s) return false;
        s *= a->dims[d];
    }
    return true;
}

/* The kernel "epabi_chain" of chain `a`: one thread per element (grid-stride), 32-bit indices (the caller checked
 * that every element and offset fits). */
static void generate(const struct chain_args* a, struct text* t) {
    bool dense[EPABI_CHAIN_MAX_INPUTS];
    bool any_walk = false;
    for (int k = 0; k < a->n_in; ++k) {
        dense[k] = input_dense(a, k);
        any_walk = any_walk || !dense[k];
    }
    put(t, "#include \"launch_args.h\"\n#include \"cuda_math.cuh\"\n");
    put(t, "EP_KERNEL epabi_chain(const EP_GC chain_args a, int64_t n) {\n    EP_PDL_ENTER();\n");
    put(t, "    const uint32_t count = (uint32_t)n, step = gridDim.x * blockDim.x;\n");
    put(t, "    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {\n");
    if (any_walk) {
        for (int k = 0; k < a->n_in; ++k)
            if (!dense[k]) put(t, "        uint32_t o%d = 0;\n", k);
        put(t, "        uint32_t q = i;\n");
        for (int d = a->rank - 1; d >= 0; --d) {
            if (d > 0) put(t, "        { const uint32_t dim = (uint32_t)a.dims[%d], c = q %% dim; q /= dim;\n", d);
            else put(t, "        { const uint32_t c = q;\n");
            for (int k = 0; k < a->n_in; ++k)
                if (!dense[k]) put(t, "          o%d += c * (uint32_t)a.strides[%d][%d];\n", k, k, d);
            put(t, "        }\n");
        }
    }
    for (int k = 0; k < a->n_in; ++k) {
        if (dense[k]) put(t, "        const float x%d = a.in[%d][i];\n", k, k);
        else put(t, "        const float x%d = a.in[%d][o%d];\n", k, k, k);
    }
    for (int k = 0; k < a->n_ops; ++k) {
        const struct chain_op* o = &a->ops[k];
        put(t, "        const float r%d = ", k);
        if (o->kind == CHAIN_BINARY) {
            put(t, "chain_binary(%d, ", (int)o->op);
            put_operand(t, o, o->a, true);
            put(t, ", ");
            put_operand(t, o, o->b, false);
            put(t, ");\n");
        } else {   /* Clip (un_clip's comparison pair) or a unary op, each with the op's alpha and beta */
            if (o->kind == CHAIN_CLIP) put(t, "chain_clip(");
            else put(t, "un_apply(%d, ", (int)o->op);
            put_operand(t, o, o->a, true);
            put(t, ", ");
            put_float(t, o->alpha);
            put(t, ", ");
            put_float(t, o->beta);
            put(t, ");\n");
        }
        if (o->out >= 0) put(t, "        a.out[%d][i] = r%d;\n", (int)o->out, k);
    }
    put(t, "    }\n}\n");
}

static uint64_t fnv1a(const void* p, size_t len) {
    const unsigned char* s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; ++i) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

static void make_key(const struct chain_args* a, int ordinal, struct jit_key* k) {
    memset(k, 0, sizeof *k);
    k->n_ops = a->n_ops;
    k->n_in = a->n_in;
    k->n_out = a->n_out;
    k->rank = a->rank;
    k->ordinal = ordinal;
    for (int i = 0; i < a->n_in; ++i)
        if (input_dense(a, i)) k->dense |= 1u << i;
    for (int i = 0; i < a->n_ops; ++i) {
        k->ops[i] = a->ops[i];
        k->ops[i].pad_ = 0;
    }
}

/* Whether every element index and every input offset of `a` fits the generated kernel's 32-bit arithmetic. */
static bool fits_32(const struct chain_args* a, int64_t n) {
    const int64_t limit = (int64_t)INT32_MAX;
    if (n > limit) return false;
    for (int k = 0; k < a->n_in; ++k) {
        int64_t last = 0;
        for (int d = 0; d < a->rank; ++d) {
            if (a->strides[k][d] < 0) return false;
            last += (a->dims[d] - 1) * a->strides[k][d];
        }
        if (last > limit) return false;
    }
    return true;
}

OrtStatus* epabi_cuda_chain_kernel(const struct epabi_cuda_launch_env* env, const struct chain_args* a, int64_t n,
                                   epabi_cu_function* fn) {
    *fn = NULL;
    const enum jit_mode mode = jit_mode();
    if (mode == JIT_OFF) return NULL;
    if (!fits_32(a, n)) {   /* the interpreter covers every chain */
        if (mode != JIT_REQUIRE) return NULL;
        return epabi_error(env->api, ORT_EP_FAIL, EPABI_EP_NAME ": EPABI_CHAIN_JIT=require, but a chain of %lld "
                           "elements has no kernel of its own (32-bit indices)", (long long)n);
    }
    struct jit_key key;
    make_key(a, env->module->ordinal, &key);
    const uint64_t hash = fnv1a(&key, sizeof key);
    OrtStatus* st = NULL;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_count; ++i) {
        const struct program* p = &g_programs[i];
        if (p->hash == hash && memcmp(&p->key, &key, sizeof key) == 0) {
            *fn = p->fn;
            pthread_mutex_unlock(&g_lock);
            return NULL;
        }
    }
    if (g_count < MAX_PROGRAMS) {
        struct program* p = &g_programs[g_count];
        char* source = malloc(SOURCE_CHARS);
        if (source == NULL) {
            pthread_mutex_unlock(&g_lock);
            return NULL;   /* out of host memory: the interpreter needs none */
        }
        struct text t = {source, 0, false};
        generate(a, &t);
        if (t.overflow) {   /* cannot happen within EPABI_CHAIN_MAX_OPS */
            free(source);
            pthread_mutex_unlock(&g_lock);
            return epabi_error(env->api, ORT_EP_FAIL, EPABI_EP_NAME ": an elementwise chain of %d ops outgrew its "
                               "program's %d characters", (int)a->n_ops, (int)SOURCE_CHARS);
        }
        /* a first run inside a capture (no warm-up) loads the module in relaxed mode, as the arena grows there */
        struct epabi_cuda_relaxed relaxed;
        epabi_cuda_relax(env->libs->cu, &relaxed);
        st = epabi_cuda_program_load(env->api, env->libs, env->module, source, "an elementwise chain's kernel",
                                     &p->module);
        free(source);
        epabi_cu_result r = 0;
        if (st == NULL && (r = env->libs->cu->ModuleGetFunction(&p->fn, p->module, "epabi_chain")) != 0)
            st = epabi_error(env->api, ORT_EP_FAIL, EPABI_EP_NAME ": an elementwise chain's kernel is missing from its "
                             "module: %s", epabi_cuda_error_text(env->libs->cu, r));
        epabi_cuda_unrelax(env->libs->cu, &relaxed);
        if (st == NULL) {
            p->hash = hash;
            p->key = key;
            *fn = p->fn;
            g_count++;
        } else {
            if (p->module != NULL) env->libs->cu->ModuleUnload(p->module);
            memset(p, 0, sizeof *p);
        }
    } else if (mode == JIT_REQUIRE) {
        st = epabi_error(env->api, ORT_EP_FAIL, EPABI_EP_NAME ": EPABI_CHAIN_JIT=require, but %d chains' kernels are "
                         "compiled already", (int)MAX_PROGRAMS);
    }
    pthread_mutex_unlock(&g_lock);
    return st;
}
