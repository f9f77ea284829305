/*
 * concat.c - Concat (opsets 1-13) of any number of inputs along one (possibly negative) axis.
 *
 * Row-major layout makes each input one block of axis_dim * inner elements per outer index, so the copy is
 * outer x n_inputs memcpys. Elements are opaque bytes, so every dtype with a whole-byte size
 * (epabi_dtype_size() != 0) is exact.
 */
#include "cuda_coverage.h"
#include "kernel.h"
#include "math_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct concat_state {
    int64_t axis;
};


/* Concat-1 defaults the axis to 1; from opset 4 the attribute is required. */
static bool concat_axis(const struct epabi_node* node, int64_t* axis) {
    if (epabi_attr_int(node, "axis", axis)) return true;
    *axis = 1;
    return node->since_version < 4;
}

static bool concat_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in < 1) {
        snprintf(why, why_len, "Concat: no inputs");
        return false;
    }
    const ONNXTensorElementDataType dt = node->in[0].dtype;
    if (epabi_dtype_size(dt) == 0) {
        snprintf(why, why_len, "Concat: dtype %s is not supported", epabi_dtype_name(dt));
        return false;
    }
    int64_t axis = 0;
    if (!concat_axis(node, &axis)) {
        snprintf(why, why_len, "Concat: the axis attribute is missing");
        return false;
    }
    for (int i = 0; i < node->n_in; ++i) {
        const struct epabi_value_desc* v = &node->in[i];
        if (v->dtype != dt) {
            snprintf(why, why_len, "Concat: input %d is %s, input 0 is %s", i, epabi_dtype_name(v->dtype),
                     epabi_dtype_name(dt));
            return false;
        }
        int k = 0;
        if (v->rank > EPABI_MAX_RANK || (v->rank >= 0 && !epabi_norm_axis(axis, v->rank, &k))) {
            snprintf(why, why_len, "Concat: axis %lld does not fit input %d of rank %d (max %d)", (long long)axis, i,
                     v->rank, EPABI_MAX_RANK);
            return false;
        }
    }
    return true;
}

static OrtStatus* concat_init(const struct epabi_node* node, void** state) {
    struct concat_state* st = malloc(sizeof *st);
    if (st == NULL) return epabi_error(node->api, ORT_FAIL, "Concat: out of memory");
    if (!concat_axis(node, &st->axis)) {
        free(st);
        return epabi_error(node->api, ORT_INVALID_ARGUMENT, "Concat: the axis attribute is missing");
    }
    *state = st;
    return NULL;
}

static void concat_release(void* state) {
    free(state);
}

/* Outer indices [o0, o1): each input's block after the others'. */
static void concat_rows(void* ctx, int64_t o0, int64_t o1) {
    const struct concat_args* a = ctx;
    size_t row = 0;
    for (int i = 0; i < a->n; ++i) row += a->row_bytes[i];
    unsigned char* dst = a->dst + (size_t)o0 * row;
    for (int64_t o = o0; o < o1; ++o) {
        for (int i = 0; i < a->n; ++i) {
            memcpy(dst, a->src[i] + (size_t)o * a->row_bytes[i], a->row_bytes[i]);
            dst += a->row_bytes[i];
        }
    }
}

/* One input's block of a single outer index, in byte chunks [b0, b1) (outer == 1: a concat along the first
 * non-unit axis, as a detector's channel concats are). */
struct concat_block {
    const struct concat_args* a;
    int i;
    size_t at;   /* its place in the output */
};

static void concat_bytes(void* ctx, int64_t b0, int64_t b1) {
    const struct concat_block* c = ctx;
    memcpy(c->a->dst + c->at + b0, c->a->src[c->i] + b0, (size_t)(b1 - b0));
}

/* Spread over the pool by outer indices, or for one outer index by byte chunks of each input's block. */
static void concat_launch(const void* p) {
    const struct concat_args* a = p;
    const int64_t grain = 64 * (int64_t)EPABI_PARALLEL_MIN_ELEMS;   /* bytes */
    if (a->outer > 1) {
        size_t row = 0;
        for (int i = 0; i < a->n; ++i) row += a->row_bytes[i];
        epabi_pool_for_range(a->pool, a->outer, (grain + (int64_t)row - 1) / (row > 0 ? (int64_t)row : 1),
                             concat_rows, (void*)a);
        return;
    }
    struct concat_block c = {a, 0, 0};
    for (int i = 0; i < a->n; ++i) {
        c.i = i;
        epabi_pool_for_range(a->pool, (int64_t)a->row_bytes[i], grain, concat_bytes, &c);
        c.at += a->row_bytes[i];
    }
}

static void format_dims(char* buf, size_t cap, int rank, const int64_t* dims) {
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < rank && used < cap; ++i)
        used += (size_t)snprintf(buf + used, cap - used, i ? ",%lld" : "%lld", (long long)dims[i]);
    if (used < cap) snprintf(buf + used, cap - used, ")");
}

static bool same_except(const struct epabi_tensor* a, const struct epabi_tensor* b, int axis) {
    if (a->rank != b->rank) return false;
    for (int k = 0; k < a->rank; ++k)
        if (k != axis && a->dims[k] != b->dims[k]) return false;
    return true;
}

static OrtStatus* concat_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                             int n_in, int n_out) {
    (void)n_out;
    const struct concat_state* st = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < 1 || n_in > EPABI_MAX_NODE_IO)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Concat: %d inputs; 1 to %d are supported", n_in,
                           EPABI_MAX_NODE_IO);
    /* Like ONNX Runtime's CPU kernel, shapes are checked against the first non-empty input, and empty inputs
     * that disagree are skipped: models built from zero-trip Loops feed such placeholders. */
    const struct epabi_tensor* ref = in[0];
    for (int i = 0; i < n_in; ++i) {
        if (epabi_numel(in[i]->rank, in[i]->dims) > 0) {
            ref = in[i];
            break;
        }
    }
    int axis = 0;
    if (!epabi_norm_axis(st->axis, ref->rank, &axis))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Concat: axis %lld is out of range for rank %d",
                           (long long)st->axis, ref->rank);

    const size_t elsize = epabi_dtype_size(ref->dtype);
    int64_t inner = 1, outer = 1;
    for (int k = 0; k < axis; ++k) outer *= ref->dims[k];
    for (int k = axis + 1; k < ref->rank; ++k) inner *= ref->dims[k];

    struct concat_args a = {0};
    a.outer = outer;
    a.pool = epabi_exec_pool(ex);
    int64_t dims[EPABI_MAX_RANK];
    memcpy(dims, ref->dims, sizeof(int64_t) * (size_t)ref->rank);
    dims[axis] = 0;
    for (int i = 0; i < n_in; ++i) {
        const struct epabi_tensor* t = in[i];
        if (t->dtype != ref->dtype)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Concat: input %d is %s, others are %s", i,
                               epabi_dtype_name(t->dtype), epabi_dtype_name(ref->dtype));
        if (!same_except(t, ref, axis)) {
            if (epabi_numel(t->rank, t->dims) == 0) continue;
            char ts[160], rs[160];
            format_dims(ts, sizeof ts, t->rank, t->dims);
            format_dims(rs, sizeof rs, ref->rank, ref->dims);
            return epabi_error(api, ORT_INVALID_ARGUMENT,
                               "Concat: input %d has shape %s but another input has %s; only axis %d may differ", i,
                               ts, rs, axis);
        }
        const int64_t d = t->dims[axis];
        if (dims[axis] > INT64_MAX - d)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Concat: the concatenated axis is too large");
        dims[axis] += d;
        /* With outer == 0 the output is empty, and d * inner need not even fit in an int64. */
        if (outer > 0 && d > 0 && inner > 0) {
            a.src[a.n] = t->data;
            a.row_bytes[a.n] = (size_t)(d * inner) * elsize;
            ++a.n;
        }
    }
    OrtStatus* status = NULL;
    struct epabi_tensor* y = epabi_exec_output(ex, 0, ref->dtype, ref->rank, dims, &status);
    if (y == NULL) return status;
    if (epabi_numel(ref->rank, dims) == 0) return NULL;
    a.dst = y->data;
    return epabi_exec_launch(ex, EPABI_LAUNCH_CONCAT, concat_launch, &a, sizeof a);
}

const struct epabi_kernel epabi_kernels_concat[] = {
    {.op_type = "Concat", .since_min = 1, .since_max = 13, .supports = concat_supports, .init = concat_init,
     .release = concat_release, .run = concat_run, .launch = EPABI_LAUNCH_CONCAT, .host_step = true,
     .cuda = epabi_cuda_byte_data},
    {.op_type = NULL},
};
