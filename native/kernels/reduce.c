/*
 * reduce.c - ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL2 on float32: axes as an attribute
 * (ReduceSum 1-12, the others 1-17) or as an optional int64 input (ReduceSum 13, ReduceMean/Prod/L2 18, ReduceMax
 * and ReduceMin 18-20, where noop_with_empty_axes also applies); keepdims; negative axes.
 *
 * Adjacent axes that are both reduced or both kept merge, and size-1 axes drop out, so any reduction is a
 * walk over the input in memory order whose innermost run is either kept (combined element-wise into a row of
 * the output) or reduced (combined into one output element). Sums, sums of squares (L2) and products accumulate
 * in double. Empty reductions give the spec's identities: 0 for ReduceSum and ReduceL2, 1 for ReduceProd, -inf
 * for ReduceMax, +inf for ReduceMin, and 0/0 = NaN for ReduceMean (whose spec leaves it undefined). ReduceMax and
 * ReduceMin propagate NaN as numpy does. An axis named twice reduces once, as in ORT's CPU EP.
 */
#include "math_common.h"
#include "cuda_coverage.h"
#include "reduce.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


/* Whether the op keeps a running double (sums, products) rather than a running float extreme. */
static bool reduce_accumulates(enum reduce_op op) {
    return op != REDUCE_MAX && op != REDUCE_MIN;
}

static void reduce_launch_fn(const void* p) {
    const struct reduce_launch* L = p;
    if (L->copy) {
        memcpy(L->y, L->x, sizeof(float) * (size_t)L->in_numel);
        return;
    }
    const enum reduce_op op = L->op;
    const bool acc = reduce_accumulates(op);
    for (int64_t i = 0; i < L->out_numel; ++i) {
        if (acc)
            L->acc[i] = op == REDUCE_PROD ? 1.0 : 0.0;
        else
            L->y[i] = op == REDUCE_MAX ? -INFINITY : INFINITY;
    }
    int last = L->rank - 1;
    int64_t inner = L->dims[last];
    /* Output strides of the merged axes: row-major over the kept ones, 0 for the reduced ones. */
    int64_t ostride[EPABI_MAX_RANK];
    int64_t s = 1;
    for (int d = last; d >= 0; --d) {
        ostride[d] = L->reduced[d] ? 0 : s;
        if (!L->reduced[d]) s *= L->dims[d];
    }
    int64_t outer = L->in_numel == 0 ? 0 : L->in_numel / inner;
    int64_t idx[EPABI_MAX_RANK] = {0};
    int64_t o = 0;
    /* a reduced innermost run combines into one output element (step 0), a kept one into a row (step 1) */
    const int64_t step = L->reduced[last] ? 0 : 1;
    for (int64_t t = 0; t < outer; ++t) {
        const float* x = L->x + t * inner;
        switch (op) {
        case REDUCE_SUM:
        case REDUCE_MEAN:
            if (step == 0) {
                double a = 0.0;
                for (int64_t j = 0; j < inner; ++j) a += x[j];
                L->acc[o] += a;
            } else {
                for (int64_t j = 0; j < inner; ++j) L->acc[o + j] += x[j];
            }
            break;
        case REDUCE_L2:
            for (int64_t j = 0; j < inner; ++j) L->acc[o + j * step] += (double)x[j] * (double)x[j];
            break;
        case REDUCE_PROD:
            for (int64_t j = 0; j < inner; ++j) L->acc[o + j * step] *= x[j];
            break;
        case REDUCE_MAX:
            for (int64_t j = 0; j < inner; ++j) {
                float* m = L->y + o + j * step;
                if (x[j] > *m || x[j] != x[j]) *m = x[j];   /* the second test makes a NaN stick */
            }
            break;
        case REDUCE_MIN:
            for (int64_t j = 0; j < inner; ++j) {
                float* m = L->y + o + j * step;
                if (x[j] < *m || x[j] != x[j]) *m = x[j];
            }
            break;
        }
        for (int d = last - 1; d >= 0; --d) {
            if (++idx[d] < L->dims[d]) {
                o += ostride[d];
                break;
            }
            o -= ostride[d] * (L->dims[d] - 1);
            idx[d] = 0;
        }
    }
    if (acc) {
        double scale = L->op == REDUCE_MEAN ? 1.0 / (double)L->count : 1.0;
        if (L->op == REDUCE_MEAN && L->count == 0) scale = NAN;
        for (int64_t i = 0; i < L->out_numel; ++i) {
            const double v = L->acc[i] * scale;
            L->y[i] = (float)(op == REDUCE_L2 ? sqrt(v) : v);
        }
    }
}

static enum reduce_op reduce_kind(const char* op_type) {
    if (strcmp(op_type, "ReduceSum") == 0) return REDUCE_SUM;
    if (strcmp(op_type, "ReduceMean") == 0) return REDUCE_MEAN;
    if (strcmp(op_type, "ReduceMin") == 0) return REDUCE_MIN;
    if (strcmp(op_type, "ReduceProd") == 0) return REDUCE_PROD;
    if (strcmp(op_type, "ReduceL2") == 0) return REDUCE_L2;
    return REDUCE_MAX;
}

/* The opset from which the op takes axes as an input instead of an attribute. */
static int reduce_axes_input_since(enum reduce_op op) { return op == REDUCE_SUM ? 13 : 18; }

/* Checks axes against rank (rank < 0: unknown, range not checked); writes the reason on failure. */
static bool reduce_check_axes(const char* op_type, const int64_t* axes, size_t n, int rank, bool* mask, char* why,
                              size_t why_len) {
    bool seen[EPABI_MAX_RANK] = {false};
    for (size_t i = 0; i < n; ++i) {
        if (rank < 0) continue;
        int a = 0;
        if (!epabi_norm_axis(axes[i], rank, &a)) {
            snprintf(why, why_len, "%s: axis %lld is out of range for rank %d", op_type, (long long)axes[i], rank);
            return false;
        }
        seen[a] = true;   /* an axis named twice ([-3, 0] on rank 3) reduces once, as ORT's CPU EP does */
    }
    if (mask != NULL) memcpy(mask, seen, sizeof seen);
    return true;
}

static bool reduce_supports(const struct epabi_node* node, char* why, size_t why_len) {
    enum reduce_op op = reduce_kind(node->op_type);
    bool axes_input = node->since_version >= reduce_axes_input_since(op);
    if (node->n_in < 1 || node->n_in > (axes_input ? 2 : 1) || node->n_out != 1) {
        snprintf(why, why_len, "%s: unexpected arity (%d inputs, %d outputs) for opset %d", node->op_type, node->n_in,
                 node->n_out, node->since_version);
        return false;
    }
    if (node->in[0].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        snprintf(why, why_len, "%s: data has dtype %s; only float is implemented", node->op_type,
                 epabi_dtype_name(node->in[0].dtype));
        return false;
    }
    if (axes_input) {
        if (epabi_attr_has(node, "axes")) {
            snprintf(why, why_len, "%s: opset %d takes axes as an input, not an attribute", node->op_type,
                     node->since_version);
            return false;
        }
        if (epabi_desc_present(node, 1) && node->in[1].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64) {
            snprintf(why, why_len, "%s: axes input has dtype %s; it must be int64", node->op_type,
                     epabi_dtype_name(node->in[1].dtype));
            return false;
        }
        return true;
    }
    int64_t axes[EPABI_MAX_RANK];
    size_t n = 0;
    if (!epabi_attr_ints(node, "axes", axes, EPABI_MAX_RANK, &n)) return true;
    if (n > EPABI_MAX_RANK) {
        snprintf(why, why_len, "%s: %zu axes exceed the maximum rank %d", node->op_type, n, EPABI_MAX_RANK);
        return false;
    }
    return reduce_check_axes(node->op_type, axes, n, node->in[0].rank, NULL, why, why_len);
}

static OrtStatus* reduce_init(const struct epabi_node* node, void** state) {
    struct epabi_reduce_spec* s = calloc(1, sizeof *s);
    if (s == NULL) return epabi_error(node->api, ORT_FAIL, "%s: out of memory", node->op_type);
    s->op = reduce_kind(node->op_type);
    s->axes_input = node->since_version >= reduce_axes_input_since(s->op);
    int64_t v = 1;
    s->keepdims = !epabi_attr_int(node, "keepdims", &v) || v != 0;
    v = 0;
    s->noop_empty = s->axes_input && epabi_attr_int(node, "noop_with_empty_axes", &v) && v != 0;
    s->n_axes = -1;
    size_t n = 0;
    if (!s->axes_input && epabi_attr_ints(node, "axes", s->axes, EPABI_MAX_RANK, &n)) {
        if (n > EPABI_MAX_RANK) {
            free(s);
            return epabi_error(node->api, ORT_INVALID_ARGUMENT, "%s: %zu axes exceed the maximum rank %d",
                               node->op_type, n, EPABI_MAX_RANK);
        }
        s->n_axes = (int)n;
    }
    *state = s;
    return NULL;
}

static const char* reduce_name(enum reduce_op op) {
    switch (op) {
    case REDUCE_SUM: return "ReduceSum";
    case REDUCE_MEAN: return "ReduceMean";
    case REDUCE_MIN: return "ReduceMin";
    case REDUCE_PROD: return "ReduceProd";
    case REDUCE_L2: return "ReduceL2";
    default: return "ReduceMax";
    }
}

bool epabi_reduce_spec_same(const struct epabi_reduce_spec* a, const struct epabi_reduce_spec* b) {
    if (a->axes_input != b->axes_input || a->keepdims != b->keepdims || a->noop_empty != b->noop_empty ||
        a->n_axes != b->n_axes)
        return false;
    for (int i = 0; i < a->n_axes; ++i)
        if (a->axes[i] != b->axes[i]) return false;
    return true;
}

OrtStatus* epabi_reduce_geometry(struct epabi_exec* ex, const struct epabi_reduce_spec* s, const struct epabi_tensor* X,
                                 const struct epabi_tensor* A, struct reduce_launch* L, int* out_rank,
                                 int64_t* out_dims) {
    const struct epabi_api* api = epabi_exec_api(ex);
    const char* name = reduce_name(s->op);
    char sx[160], why[200];
    /* The axes: from the state, or read from the (host-readable, shape-deciding) axes input. */
    int64_t axes[EPABI_MAX_RANK];
    size_t n_axes = 0;
    bool have_axes = false;
    if (s->axes_input) {
        if (A != NULL) {
            if (A->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 || A->rank > 1)
                return epabi_error(api, ORT_INVALID_ARGUMENT, "%s: axes must be a 1-D int64 tensor, got %s %s", name,
                                   epabi_dtype_name(A->dtype), epabi_shape_str(sx, sizeof sx, A->rank, A->dims));
            int64_t n = epabi_numel(A->rank, A->dims);
            if (n > X->rank || n > EPABI_MAX_RANK)
                return epabi_error(api, ORT_INVALID_ARGUMENT, "%s: %lld axes given for data of rank %d", name,
                                   (long long)n, X->rank);
            if (n > 0) {
                OrtStatus* read_status = NULL;
                const void* host = epabi_exec_host_data(ex, A, &read_status);
                if (read_status != NULL) return read_status;
                memcpy(axes, host, sizeof(int64_t) * (size_t)n);
            }
            n_axes = (size_t)n;
            have_axes = n > 0;
        }
    } else if (s->n_axes >= 0) {
        memcpy(axes, s->axes, sizeof(int64_t) * (size_t)s->n_axes);
        n_axes = (size_t)s->n_axes;
        have_axes = n_axes > 0;   /* an empty attribute list reduces everything, like an absent one */
    }

    L->op = s->op;
    L->in_numel = epabi_numel(X->rank, X->dims);
    bool mask[EPABI_MAX_RANK] = {false};
    /* ReduceL2 over no axis still maps each element to sqrt(x * x), as ORT's CPU EP gives: the general path with
     * nothing reduced; the other ops copy */
    const bool reduce_none = !have_axes && s->noop_empty && s->op == REDUCE_L2;
    if (!have_axes && s->noop_empty && !reduce_none) {
        L->copy = true;
        *out_rank = X->rank;
        memcpy(out_dims, X->dims, sizeof(int64_t) * (size_t)X->rank);
        return NULL;
    }
    if (reduce_none) {
        /* mask stays all false */
    } else if (have_axes) {
        if (!reduce_check_axes(name, axes, n_axes, X->rank, mask, why, sizeof why))
            return epabi_error(api, ORT_INVALID_ARGUMENT, "%s (data %s)", why,
                               epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    } else {
        for (int d = 0; d < X->rank; ++d) mask[d] = true;
    }

    int rank = 0;
    L->count = 1;
    for (int d = 0; d < X->rank; ++d) {
        if (mask[d]) {
            L->count *= X->dims[d];
            if (s->keepdims) out_dims[rank++] = 1;
        } else {
            out_dims[rank++] = X->dims[d];
        }
    }
    *out_rank = rank;
    L->out_numel = epabi_numel(rank, out_dims);

    /* Merge: size-1 axes vanish, neighbours with the same role fuse. */
    for (int d = 0; d < X->rank; ++d) {
        if (X->dims[d] == 1) continue;
        if (L->rank > 0 && L->reduced[L->rank - 1] == mask[d]) {
            L->dims[L->rank - 1] *= X->dims[d];
        } else {
            L->dims[L->rank] = X->dims[d];
            L->reduced[L->rank] = mask[d];
            ++L->rank;
        }
    }
    if (L->rank == 0) {   /* one element in, one out */
        L->dims[0] = 1;
        L->rank = 1;
    }
    return NULL;
}

static OrtStatus* reduce_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                             int n_out) {
    (void)n_out;
    const struct epabi_reduce_spec* s = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    const char* name = reduce_name(s->op);
    if (n_in < 1) return epabi_error(api, ORT_INVALID_ARGUMENT, "%s: expected the data input", name);
    const struct epabi_tensor* X = in[0];
    if (X->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "%s: data has dtype %s; only float is implemented", name,
                           epabi_dtype_name(X->dtype));
    struct reduce_launch L;
    memset(&L, 0, sizeof L);
    int64_t out_dims[EPABI_MAX_RANK];
    int out_rank = 0;
    OrtStatus* st = epabi_reduce_geometry(ex, s, X, s->axes_input ? epabi_opt_input(in, n_in, 1) : NULL, &L,
                                          &out_rank, out_dims);
    if (st != NULL) return st;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, out_rank, out_dims, &st);
    if (Y == NULL) return st;
    if (L.copy ? L.in_numel == 0 : L.out_numel == 0) return NULL;
    L.x = X->data;
    L.y = Y->data;
    if (!L.copy && reduce_accumulates(L.op)) {
        L.acc = epabi_exec_scratch(ex, sizeof(double) * (size_t)L.out_numel, &st);
        if (L.acc == NULL) return st;
    }
    return epabi_exec_launch(ex, EPABI_LAUNCH_REDUCE, reduce_launch_fn, &L, sizeof L);
}

static const struct epabi_reduce_spec* reduce_spec(const void* state) { return state; }

const struct epabi_kernel epabi_kernels_reduce[] = {
    {.op_type = "ReduceSum", .since_min = 1, .since_max = 12, .supports = reduce_supports, .init = reduce_init,
     .release = free, .run = reduce_run, .launch = EPABI_LAUNCH_REDUCE, .host_inputs = 1u << 1,
     .cuda = epabi_cuda_float32_math, .reduce_spec = reduce_spec},
    {.op_type = "ReduceSum", .since_min = 13, .since_max = 13, .supports = reduce_supports, .init = reduce_init,
     .release = free, .run = reduce_run, .launch = EPABI_LAUNCH_REDUCE, .host_inputs = 1u << 1,
     .cuda = epabi_cuda_float32_math, .reduce_spec = reduce_spec},
    {.op_type = "ReduceMean", .since_min = 1, .since_max = 17, .supports = reduce_supports, .init = reduce_init,
     .release = free, .run = reduce_run, .launch = EPABI_LAUNCH_REDUCE, .host_inputs = 1u << 1,
     .cuda = epabi_cuda_float32_math, .reduce_spec = reduce_spec},
    {.op_type = "ReduceMean", .since_min = 18, .since_max = 18, .supports = reduce_supports,
     .init = reduce_init, .release = free, .run = reduce_run, .launch = EPABI_LAUNCH_REDUCE, .host_inputs = 1u << 1,
     .cuda = epabi_cuda_float32_math, .reduce_spec = reduce_spec},
    {.op_type = "ReduceMax", .since_min = 1, .since_max = 17, .supports = reduce_supports, .init = reduce_init,
     .release = free, .run = reduce_run, .launch = EPABI_LAUNCH_REDUCE, .host_inputs = 1u << 1,
     .cuda = epabi_cuda_float32_math, .reduce_spec = reduce_spec},
    {.op_type = "ReduceMax", .since_min = 18, .since_max = 20, .supports = reduce_supports, .init = reduce_init,
     .release = free, .run = reduce_run, .launch = EPABI_LAUNCH_REDUCE, .host_inputs = 1u << 1,
     .cuda = epabi_cuda_float32_math, .reduce_spec = reduce_spec},
    {.op_type = "ReduceMin", .since_min = 1, .since_max = 17, .supports = reduce_supports, .init = reduce_init,
     .release = free, .run = reduce_run, .launch = EPABI_LAUNCH_REDUCE, .host_inputs = 1u << 1,
     .cuda = epabi_cuda_float32_math, .reduce_spec = reduce_spec},
    {.op_type = "ReduceMin", .since_min = 18, .since_max = 20, .supports = reduce_supports, .init = reduce_init,
     .release = free, .run = reduce_run, .launch = EPABI_LAUNCH_REDUCE, .host_inputs = 1u << 1,
     .cuda = epabi_cuda_float32_math, .reduce_spec = reduce_spec},
    {.op_type = "ReduceProd", .since_min = 1, .since_max = 17, .supports = reduce_supports, .init = reduce_init,
     .release = free, .run = reduce_run, .launch = EPABI_LAUNCH_REDUCE, .host_inputs = 1u << 1,
     .cuda = epabi_cuda_float32_math, .reduce_spec = reduce_spec},
    {.op_type = "ReduceProd", .since_min = 18, .since_max = 18, .supports = reduce_supports, .init = reduce_init,
     .release = free, .run = reduce_run, .launch = EPABI_LAUNCH_REDUCE, .host_inputs = 1u << 1,
     .cuda = epabi_cuda_float32_math, .reduce_spec = reduce_spec},
    {.op_type = "ReduceL2", .since_min = 1, .since_max = 17, .supports = reduce_supports, .init = reduce_init,
     .release = free, .run = reduce_run, .launch = EPABI_LAUNCH_REDUCE, .host_inputs = 1u << 1,
     .cuda = epabi_cuda_float32_math, .reduce_spec = reduce_spec},
    {.op_type = "ReduceL2", .since_min = 18, .since_max = 18, .supports = reduce_supports, .init = reduce_init,
     .release = free, .run = reduce_run, .launch = EPABI_LAUNCH_REDUCE, .host_inputs = 1u << 1,
     .cuda = epabi_cuda_float32_math, .reduce_spec = reduce_spec},
    {.op_type = NULL},
};
