/*
 * cuda_launch.c - epabi_cuda_launch: one launcher per launch kind, which sizes the grid, picks the kernel
 * of the block's dtype and issues it on the launch's stream.
 *
 * This file holds the dispatch table, the shared helpers (cuda_launch_internal.h) and the dtype-generic kinds
 * (elementwise, unary, cast and data movement); cuda_launch_math.c holds the float32 math kinds (MatMul,
 * Gemm, Conv, LayerNorm, GlobalMaxPool, Reduce, Softmax) and the GEMM helper. Which nodes these launchers
 * cover is stated on the kernel descriptors (kernels/cuda_coverage.h), which pick dtypes by the same tests.
 *
 * Every launcher computes what the host launch function of its kind computes (native/kernels), issues
 * nothing for empty work, never allocates and never synchronizes, so it can run inside a stream capture.
 * The block is received by pointer and passed to the kernel by value (cuLaunchKernel copies it); a
 * launcher may adjust a local copy first (e.g. merge the dims of an elementwise block).
 * Thread-safety: no state; launches on distinct streams may run concurrently.
 */
#include <stdint.h>

#include "cuda_coverage.h"
#include "cuda_launch_internal.h"
#include "ep_factory.h"   /* EPABI_EP_NAME */

/* ---- shared helpers ------------------------------------------------------------------------------- */

unsigned epabi_cuda_grid(int64_t n, unsigned block) {
    const int64_t cap = (int64_t)1 << 20;   /* the kernels loop grid-stride past this */
    if (n <= 0 || block == 0) return 1;
    int64_t b = (n + (int64_t)block - 1) / (int64_t)block;
    return (unsigned)(b < cap ? b : cap);
}

unsigned epabi_cuda_row_block(int64_t n) {
    unsigned b = 32;
    while (b < 256 && (int64_t)b < n) b <<= 1;
    return b;
}

OrtStatus* epabi_cuda_fail(const struct epabi_cuda_launch_env* env, const char* what, epabi_cu_result r) {
    return epabi_error(env->api, ORT_EP_FAIL, EPABI_EP_NAME ": CUDA launch of %s failed: %s", what,
                       epabi_cuda_error_text(env->libs->cu, r));
}

OrtStatus* epabi_cuda_run_fn(const struct epabi_cuda_launch_env* env, const char* what, epabi_cu_function fn,
                             unsigned gx, unsigned gy, unsigned gz, unsigned block, void** params) {
    const struct epabi_cuda_driver* cu = env->libs->cu;
    epabi_cu_result r;
    if (env->pdl) {
        /* every kernel of ours waits for its predecessor first (EP_PDL_ENTER in cuda_math.cuh), so it may be launched
         * before that one ends: in a graph the launch latency between our kernels overlaps their work */
        static const struct epabi_cu_launch_attribute kPdl = {
            .id = EPABI_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, .value = {.value = 1}};
        const struct epabi_cu_launch_config config = {gx, gy, gz, block, 1, 1, 0, env->stream, &kPdl, 1};
        r = cu->LaunchKernelEx(&config, fn, params, NULL);
    } else {
        r = cu->LaunchKernel(fn, gx, gy, gz, block, 1, 1, 0, env->stream, params, NULL);
    }
    return r == 0 ? NULL : epabi_cuda_fail(env, what, r);
}

OrtStatus* epabi_cuda_run(const struct epabi_cuda_launch_env* env, const char* what, enum epabi_cuda_kernel_id id,
                          unsigned gx, unsigned gy, unsigned gz, unsigned block, void** params) {
    return epabi_cuda_run_fn(env, what, env->module->fn[id], gx, gy, gz, block, params);
}

static OrtStatus* not_implemented(const struct epabi_cuda_launch_env* env, const char* what, const char* detail,
                                  int value) {
    return epabi_error(env->api, ORT_NOT_IMPLEMENTED, EPABI_EP_NAME ": the CUDA kernels do not cover %s with %s %d",
                       what, detail, value);
}

static OrtStatus* copy_bytes(const struct epabi_cuda_launch_env* env, const char* what, void* dst, const void* src,
                             size_t bytes) {
    if (bytes == 0) return NULL;
    epabi_cu_result r = env->libs->cu->MemcpyAsync((epabi_cu_ptr)(uintptr_t)dst, (epabi_cu_ptr)(uintptr_t)src, bytes,
                                                   env->stream);
    return r == 0 ? NULL : epabi_cuda_fail(env, what, r);
}

static int64_t numel(int rank, const int64_t* dims) {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= dims[d];
    return n;
}

/* The largest of 16, 8, 4, 2, 1 bytes dividing v. */
static size_t unit_of(uint64_t v) {
    size_t u = 16;
    while (u > 1 && v % u != 0) u >>= 1;
    return u;
}

/* The per-dtype kernels are consecutive in EPABI_CUDA_KERNEL_LIST in epabi_cuda_numeric_index's order. */
_Static_assert(EPABI_CK_ew_arith_u64 - EPABI_CK_ew_arith_f32 == 9, "ew_arith kernels in dtype order");
_Static_assert(EPABI_CK_cast_from_u64 - EPABI_CK_cast_from_f32 == 9, "cast kernels in dtype order");
_Static_assert(EPABI_CK_cast_from_bool == EPABI_CK_cast_from_u64 + 1, "cast_from_bool follows the numeric ones");

/* ---- elementwise ------------------------------------------------------------------------------------ */

/* Drops unit dims and merges neighbours that every operand walks contiguously, as the host's strided copy
 * does, so the kernel's index arithmetic runs over as few dims as possible (usually one). */
static void ew_simplify(struct ew_args* a) {
    const int nops = a->n_ops;
    int r = 0;
    for (int d = 0; d < a->rank; ++d) {
        if (a->dims[d] == 1) continue;
        if (r > 0) {
            bool merge = true;
            for (int k = 0; k < nops; ++k)
                if (a->strides[k][r - 1] != a->strides[k][d] * a->dims[d]) merge = false;
            if (merge) {
                a->dims[r - 1] *= a->dims[d];
                for (int k = 0; k < nops; ++k) a->strides[k][r - 1] = a->strides[k][d];
                continue;
            }
        }
        a->dims[r] = a->dims[d];
        for (int k = 0; k < nops; ++k) a->strides[k][r] = a->strides[k][d];
        ++r;
    }
    if (r == 0) {
        a->dims[0] = 1;
        for (int k = 0; k < nops; ++k) a->strides[k][0] = 0;
        r = 1;
    }
    a->rank = r;
}

/* How operand k of a simplified block is indexed, for ew_fast_f32: 0 contiguous, 1 a row repeated over the outer
 * dim, 2 one value; -1 when none of these. */
static int fast_mode(const struct ew_args* a, int k) {
    const int64_t* s = a->strides[k];
    if (a->rank == 1) return s[0] == 1 ? 0 : s[0] == 0 ? 2 : -1;
    if (a->rank != 2) return -1;
    if (s[0] == a->dims[1] && s[1] == 1) return 0;
    if (s[0] == 0 && s[1] == 1) return 1;
    if (s[0] == 0 && s[1] == 0) return 2;
    return -1;
}

/* float Add/Sub/Mul/Div/Max/Min over contiguous, bias-like or scalar operands: the compact kernel; false when
 * the block needs the general one. */
static bool fast_elementwise(const struct epabi_cuda_launch_env* env, const struct ew_args* a, int64_t n,
                             OrtStatus** st) {
    if (a->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || a->dtype1 != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ||
        a->n_ops != 2 || n > INT32_MAX || a->op > OP_MIN || a->op == OP_POW)
        return false;
    int ma = fast_mode(a, 0), mb = fast_mode(a, 1);
    if (ma < 0 || mb < 0) return false;
    const void* pa = a->in[0];
    const void* pb = a->in[1];
    void* po = a->out;
    int ni = (int)n, inner = a->rank == 2 ? (int)a->dims[1] : ni, op = (int)a->op, modes = ma | mb << 2;
    int relu = a->epilogue == EPABI_EPILOGUE_RELU;
    void* params[] = {&pa, &pb, &po, &ni, &inner, &op, &modes, &relu};
    *st = epabi_cuda_run(env, "Elementwise", EPABI_CK_ew_fast_f32, epabi_cuda_grid(n, EPABI_CUDA_BLOCK), 1, 1,
                         EPABI_CUDA_BLOCK, params);
    return true;
}

OrtStatus* epabi_cuda_launch_elementwise(const struct epabi_cuda_launch_env* env, const struct ew_args* in) {
    const char* what = "Elementwise";
    struct ew_args a = *in;
    if (a.rank < 1 || a.rank > EPABI_MAX_RANK || a.n_ops < 1 || a.n_ops > 3)
        return not_implemented(env, what, "rank", a.rank);
    int64_t n = numel(a.rank, a.dims);
    if (n <= 0) return NULL;
    ew_simplify(&a);
    OrtStatus* fast = NULL;
    if (fast_elementwise(env, &a, n, &fast)) return fast;
    int id = -1;
    switch (a.op) {
    case OP_ADD:
    case OP_SUB:
    case OP_MUL:
    case OP_DIV:
    case OP_MAX:
    case OP_MIN:
    case OP_MOD:
    case OP_FMOD:
        if (!epabi_cuda_numeric(a.dtype)) return not_implemented(env, what, "dtype", (int)a.dtype);
        id = EPABI_CK_ew_arith_f32 + epabi_cuda_numeric_index(a.dtype);
        break;
    case OP_LESS:
    case OP_GREATER:
    case OP_LESS_EQUAL:
    case OP_GREATER_EQUAL:
        if (!epabi_cuda_numeric(a.dtype)) return not_implemented(env, "a comparison", "dtype", (int)a.dtype);
        id = EPABI_CK_ew_compare;
        break;
    case OP_AND:
    case OP_OR:
        if (a.dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL) return not_implemented(env, "And/Or", "dtype", (int)a.dtype);
        id = EPABI_CK_ew_compare;
        break;
    case OP_POW:
        if (!epabi_cuda_numeric(a.dtype1)) return not_implemented(env, "Pow", "exponent dtype", (int)a.dtype1);
        if (a.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
            id = EPABI_CK_ew_pow_f32;
        else if (a.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE)
            id = EPABI_CK_ew_pow_f64;
        else
            return not_implemented(env, "Pow", "base dtype", (int)a.dtype);
        break;
    case OP_EQUAL:
        if (!epabi_cuda_castable(a.dtype)) return not_implemented(env, "Equal", "dtype", (int)a.dtype);
        id = EPABI_CK_ew_equal;
        break;
    case OP_WHERE:
    case OP_COPY:
        switch (a.out_esize) {
        case 1: id = EPABI_CK_ew_select_1; break;
        case 2: id = EPABI_CK_ew_select_2; break;
        case 4: id = EPABI_CK_ew_select_4; break;
        case 8: id = EPABI_CK_ew_select_8; break;
        default: return not_implemented(env, "Where", "element size", (int)a.out_esize);
        }
        break;
    default:
        return not_implemented(env, what, "op", (int)a.op);
    }
    void* params[] = {&a, &n};
    return epabi_cuda_run(env, what, (enum epabi_cuda_kernel_id)id, epabi_cuda_grid(n, EPABI_CUDA_BLOCK), 1, 1,
                          EPABI_CUDA_BLOCK, params);
}

/* ---- unary, cast -------------------------------------------------------------------------------------- */

OrtStatus* epabi_cuda_launch_unary(const struct epabi_cuda_launch_env* env, const struct un_args* in) {
    struct un_args a = *in;
    if (a.n <= 0) return NULL;
    /* the integer kernels' ops */
    const bool int_op = a.op == UN_RELU || a.op == UN_ABS || a.op == UN_NEG || a.op == UN_SIGN;
    enum epabi_cuda_kernel_id id;
    if (a.op == UN_CLIP) {
        if (!epabi_cuda_numeric(a.dtype)) return not_implemented(env, "Clip", "dtype", (int)a.dtype);
        id = EPABI_CK_un_clip;
    } else if (a.op == UN_NOT) {
        if (a.dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL) return not_implemented(env, "Not", "dtype", (int)a.dtype);
        id = EPABI_CK_un_not;
    } else if (a.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        id = EPABI_CK_un_f32;
    else if (a.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE)
        id = EPABI_CK_un_f64;
    else if (int_op && a.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32)
        id = EPABI_CK_un_i32;
    else if (int_op && a.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64)
        id = EPABI_CK_un_i64;
    else
        return not_implemented(env, "Unary", "dtype", (int)a.dtype);
    void* params[] = {&a};
    return epabi_cuda_run(env, "Unary", id, epabi_cuda_grid(a.n, EPABI_CUDA_BLOCK), 1, 1, EPABI_CUDA_BLOCK, params);
}

OrtStatus* epabi_cuda_launch_cast(const struct epabi_cuda_launch_env* env, const struct cast_args* in) {
    struct cast_args a = *in;
    if (a.n <= 0) return NULL;
    if (!epabi_cuda_castable(a.to)) return not_implemented(env, "Cast", "target dtype", (int)a.to);
    int id;
    if (a.from == ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL)
        id = EPABI_CK_cast_from_bool;
    else if (epabi_cuda_numeric(a.from))
        id = EPABI_CK_cast_from_f32 + epabi_cuda_numeric_index(a.from);
    else
        return not_implemented(env, "Cast", "source dtype", (int)a.from);
    void* params[] = {&a};
    return epabi_cuda_run(env, "Cast", (enum epabi_cuda_kernel_id)id, epabi_cuda_grid(a.n, EPABI_CUDA_BLOCK), 1, 1,
                          EPABI_CUDA_BLOCK, params);
}

/* ---- data movement -------------------------------------------------------------------------------------- */

OrtStatus* epabi_cuda_launch_copy(const struct epabi_cuda_launch_env* env, const struct copy_args* a) {
    return copy_bytes(env, "Copy", a->dst, a->src, a->bytes);
}

OrtStatus* epabi_cuda_launch_strided_copy(const struct epabi_cuda_launch_env* env,
                                          const struct epabi_strided_copy* in) {
    const char* what = "StridedCopy";
    struct epabi_strided_copy a = *in;
    if (a.rank < 1 || a.rank > EPABI_MAX_RANK) return not_implemented(env, what, "rank", a.rank);
    const int64_t n = numel(a.rank, a.dims);
    if (n <= 0 || a.elsize == 0) return NULL;
    if (a.rank == 1 && a.strides[0] == 1) return copy_bytes(env, what, a.dst, a.src, (size_t)n * a.elsize);
    const uint64_t addr = (uint64_t)(uintptr_t)a.src | (uint64_t)(uintptr_t)a.dst;
    enum epabi_cuda_kernel_id id;
    int64_t items = n;
    if (a.elsize <= 8 && unit_of(a.elsize) == a.elsize && addr % a.elsize == 0) {
        id = a.elsize == 1 ? EPABI_CK_strided_copy_1
           : a.elsize == 2 ? EPABI_CK_strided_copy_2
           : a.elsize == 4 ? EPABI_CK_strided_copy_4
                           : EPABI_CK_strided_copy_8;
    } else {
        id = EPABI_CK_strided_copy_bytes;
        items = n * (int64_t)a.elsize;
    }
    void* params[] = {&a, &items};
    return epabi_cuda_run(env, what, id, epabi_cuda_grid(items, EPABI_CUDA_BLOCK), 1, 1, EPABI_CUDA_BLOCK, params);
}

OrtStatus* epabi_cuda_launch_concat(const struct epabi_cuda_launch_env* env, const struct concat_args* in) {
    const char* what = "Concat";
    struct concat_args a = *in;
    if (a.n < 0 || a.n > EPABI_MAX_NODE_IO) return not_implemented(env, what, "input count", a.n);
    if (a.n == 0 || a.outer <= 0) return NULL;
    int64_t total_row = 0;
    uint64_t align = (uint64_t)(uintptr_t)a.dst;
    size_t widest = 0;
    for (int i = 0; i < a.n; ++i) {
        total_row += (int64_t)a.row_bytes[i];
        align |= (uint64_t)(uintptr_t)a.src[i] | (uint64_t)a.row_bytes[i];
        if (a.row_bytes[i] > widest) widest = a.row_bytes[i];
    }
    if (total_row == 0) return NULL;
    if (a.n == 1 || a.outer == 1) {   /* one contiguous block per input: plain copies */
        if (a.n == 1) return copy_bytes(env, what, a.dst, a.src[0], (size_t)total_row * (size_t)a.outer);
        size_t off = 0;
        for (int i = 0; i < a.n; ++i) {
            EPABI_RETURN_IF_ERROR(copy_bytes(env, what, a.dst + off, a.src[i], a.row_bytes[i]));
            off += a.row_bytes[i];
        }
        return NULL;
    }
    const size_t unit = unit_of(align);
    enum epabi_cuda_kernel_id id = unit == 16 ? EPABI_CK_concat_16
                                 : unit == 8  ? EPABI_CK_concat_8
                                 : unit == 4  ? EPABI_CK_concat_4
                                 : unit == 2  ? EPABI_CK_concat_2
                                              : EPABI_CK_concat_1;
    unsigned gx = epabi_cuda_grid((int64_t)(widest / unit) * a.outer, EPABI_CUDA_BLOCK);
    if (gx > 8192) gx = 8192;   /* times a.n blocks along y */
    void* params[] = {&a, &total_row};
    return epabi_cuda_run(env, what, id, gx, (unsigned)a.n, 1, EPABI_CUDA_BLOCK, params);
}

OrtStatus* epabi_cuda_launch_gather(const struct epabi_cuda_launch_env* env, const struct gather_args* in) {
    const char* what = "Gather";
    struct gather_args a = *in;
    if (a.outer <= 0 || a.n_indices <= 0 || a.block_bytes == 0) return NULL;
    const size_t unit = unit_of((uint64_t)(uintptr_t)a.src | (uint64_t)(uintptr_t)a.dst | (uint64_t)a.block_bytes);
    int64_t units = (int64_t)(a.block_bytes / unit);
    int64_t n = a.outer * a.n_indices * units;
    enum epabi_cuda_kernel_id id = unit == 16 ? EPABI_CK_gather_16
                                 : unit == 8  ? EPABI_CK_gather_8
                                 : unit == 4  ? EPABI_CK_gather_4
                                 : unit == 2  ? EPABI_CK_gather_2
                                              : EPABI_CK_gather_1;
    void* params[] = {&a, &n, &units};
    return epabi_cuda_run(env, what, id, epabi_cuda_grid(n, EPABI_CUDA_BLOCK), 1, 1, EPABI_CUDA_BLOCK, params);
}

OrtStatus* epabi_cuda_launch_shape(const struct epabi_cuda_launch_env* env, const struct shape_args* in) {
    struct shape_args a = *in;
    if (a.n <= 0) return NULL;
    if (a.n > EPABI_MAX_RANK) return not_implemented(env, "Shape", "rank", a.n);
    void* params[] = {&a};
    return epabi_cuda_run(env, "Shape", EPABI_CK_shape_write, 1, 1, 1, 32, params);
}

/* ---- dispatch ----------------------------------------------------------------------------------------- */

typedef OrtStatus* (*launcher_fn)(const struct epabi_cuda_launch_env* env, const void* args);

/* The table is generated from EPABI_LAUNCH_KINDS, one slot per kind, each a shim handing the block to the kind's
 * launcher (cuda_launch_internal.h) under its own type. */
#define LAUNCHER_SHIM_(kind, stem, block)                                                                 \
    static OrtStatus* launch_kind_##stem(const struct epabi_cuda_launch_env* env, const void* args) {      \
        return epabi_cuda_launch_##stem(env, (const struct block*)args);                                  \
    }
EPABI_LAUNCH_KINDS(LAUNCHER_SHIM_)
#undef LAUNCHER_SHIM_

static const launcher_fn kLaunchers[] = {
#define LAUNCHER_SLOT_(kind, stem, block) [EPABI_LAUNCH_##kind] = launch_kind_##stem,
    EPABI_LAUNCH_KINDS(LAUNCHER_SLOT_)
#undef LAUNCHER_SLOT_
};
_Static_assert(sizeof kLaunchers / sizeof kLaunchers[0] == EPABI_LAUNCH_KIND_COUNT, "one launcher per launch kind");

OrtStatus* epabi_cuda_launch(const struct epabi_cuda_launch_env* env, enum epabi_launch_kind kind, const void* args) {
    /* env itself is the caller's (never NULL); its parts are checked */
    if (env->module == NULL || env->libs == NULL || env->libs->cu == NULL || args == NULL)
        return epabi_error(env->api, ORT_EP_FAIL, EPABI_EP_NAME ": CUDA launch without a module, driver or arguments");
    if ((int)kind < 0 || kind >= EPABI_LAUNCH_KIND_COUNT) return not_implemented(env, "a launch", "kind", (int)kind);
    return kLaunchers[kind](env, args);
}
