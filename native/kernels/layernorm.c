/*
 * layernorm.c - LayerNormalization (opset 17) on float32 with stash_type 1: axis, epsilon, optional B, and
 * the optional Mean / InvStdDev outputs.
 *
 * X is viewed as rows x norm (norm = prod dims[axis:]). Each row's mean and variance are accumulated in
 * double (two passes, so a large mean does not cancel the variance away), then
 * Y = (X - mean) * InvStdDev * Scale + B. Scale and B are unidirectionally broadcast to all of X, as the spec
 * allows: when they only vary along the normalized axes (the usual case) one row of them serves every row
 * of X; when they also vary along the leading axes, the row is rebuilt whenever it changes. Other stash
 * types are refused.
 */
#include "math_common.h"
#include "cuda_coverage.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct layernorm_state {
    int64_t axis;
    float epsilon;
    bool want_mean, want_inv;   /* outputs 1 and 2 are wired */
};

/* Scale or B broadcast against X. */


/* Element offset of operand `o` at the start of row r. */
static int64_t ln_row_offset(const struct layernorm_launch* L, const struct ln_operand* o, int64_t r) {
    int64_t off = 0;
    for (int d = L->axis - 1; d >= 0; --d) {
        off += (r % L->dims[d]) * o->strides[d];
        r /= L->dims[d];
    }
    return off;
}

/* The operand's values over one row of X, starting at element offset base. */
static void ln_expand(const struct layernorm_launch* L, const struct ln_operand* o, int64_t base, float* out) {
    int64_t idx[EPABI_MAX_RANK] = {0};
    int64_t off = base;
    for (int64_t j = 0; j < L->norm; ++j) {
        out[j] = o->data[off];
        for (int d = L->rank - 1; d >= L->axis; --d) {
            if (++idx[d] < L->dims[d]) {
                off += o->strides[d];
                break;
            }
            off -= o->strides[d] * (L->dims[d] - 1);
            idx[d] = 0;
        }
    }
}

static void layernorm_launch_fn(const void* p) {
    const struct layernorm_launch* L = p;
    if (L->norm == 0) {   /* empty rows: X and Y have no data, the statistics are 0/0 */
        for (int64_t r = 0; r < L->rows; ++r) {
            if (L->mean != NULL) L->mean[r] = NAN;
            if (L->inv != NULL) L->inv[r] = NAN;
        }
        return;
    }
    const float* row[2] = {NULL, NULL};
    int64_t last[2] = {-1, -1};
    for (int64_t r = 0; r < L->rows; ++r) {
        for (int i = 0; i < 2; ++i) {
            const struct ln_operand* o = &L->op[i];
            if (o->data == NULL || (row[i] != NULL && !o->per_row)) continue;
            int64_t off = o->per_row ? ln_row_offset(L, o, r) : 0;
            if (o->in_place) {
                row[i] = o->data + off;
            } else if (off != last[i]) {
                ln_expand(L, o, off, L->rowbuf + i * L->norm);
                row[i] = L->rowbuf + i * L->norm;
                last[i] = off;
            }
        }
        const float* x = L->x + r * L->norm;
        float* y = L->y + r * L->norm;
        double s = 0.0;
        for (int64_t j = 0; j < L->norm; ++j) s += x[j];
        double mean = s / (double)L->norm;
        double ss = 0.0;
        for (int64_t j = 0; j < L->norm; ++j) ss += (x[j] - mean) * (x[j] - mean);
        double inv = 1.0 / sqrt(ss / (double)L->norm + (double)L->epsilon);
        const float* sc = row[0];
        const float* bi = row[1];
        for (int64_t j = 0; j < L->norm; ++j) {
            float v = (float)((x[j] - mean) * inv) * sc[j];
            y[j] = bi != NULL ? v + bi[j] : v;
        }
        if (L->mean != NULL) L->mean[r] = (float)mean;
        if (L->inv != NULL) L->inv[r] = (float)inv;
    }
}

static bool output_wired(const struct epabi_node* node, int i) {
    if (i >= node->n_out) return false;
    const struct epabi_value_desc* d = &node->out[i];
    return d->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED || (d->name != NULL && d->name[0] != '\0');
}

static bool layernorm_supports(const struct epabi_node* node, char* why, size_t why_len) {
    if (node->n_in < 2 || node->n_in > 3 || node->n_out < 1 || node->n_out > 3) {
        snprintf(why, why_len, "LayerNormalization: expected 2-3 inputs and 1-3 outputs, got %d and %d", node->n_in,
                 node->n_out);
        return false;
    }
    const char* names[] = {"X", "Scale", "B"};
    for (int i = 0; i < node->n_in; ++i) {
        if (i == 2 && !epabi_desc_present(node, 2)) break;
        if (node->in[i].dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
            snprintf(why, why_len, "LayerNormalization: %s has dtype %s; only float is implemented", names[i],
                     epabi_dtype_name(node->in[i].dtype));
            return false;
        }
    }
    for (int i = 1; i < node->n_out; ++i) {
        ONNXTensorElementDataType t = node->out[i].dtype;
        if (output_wired(node, i) && t != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT &&
            t != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) {
            snprintf(why, why_len, "LayerNormalization: output %d has dtype %s; only float is implemented", i,
                     epabi_dtype_name(t));
            return false;
        }
    }
    int64_t stash = 1;
    if (epabi_attr_int(node, "stash_type", &stash) && stash != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
        snprintf(why, why_len, "LayerNormalization: stash_type=%lld; only 1 (float) is implemented", (long long)stash);
        return false;
    }
    int64_t axis = -1;
    epabi_attr_int(node, "axis", &axis);
    int a = 0;
    if (node->in[0].rank >= 0 && !epabi_norm_axis(axis, node->in[0].rank, &a)) {
        snprintf(why, why_len, "LayerNormalization: axis=%lld is out of range for rank %d", (long long)axis,
                 node->in[0].rank);
        return false;
    }
    return true;
}

static OrtStatus* layernorm_init(const struct epabi_node* node, void** state) {
    struct layernorm_state* s = calloc(1, sizeof *s);
    if (s == NULL) return epabi_error(node->api, ORT_FAIL, "LayerNormalization: out of memory");
    s->axis = -1;
    s->epsilon = 1e-5f;
    epabi_attr_int(node, "axis", &s->axis);
    epabi_attr_float(node, "epsilon", &s->epsilon);
    s->want_mean = output_wired(node, 1);
    s->want_inv = output_wired(node, 2);
    *state = s;
    return NULL;
}

/* Fills o for tensor T broadcast to X; false when T is not unidirectionally broadcastable to X. */
static bool ln_operand_init(const struct epabi_tensor* T, const struct layernorm_launch* L, struct ln_operand* o) {
    memset(o, 0, sizeof *o);
    if (T == NULL) return true;
    if (T->rank > L->rank) return false;
    int64_t s = 1;
    o->in_place = true;
    int64_t contiguous = 1;
    for (int d = L->rank - 1; d >= 0; --d) {
        int t = d - (L->rank - T->rank);
        int64_t td = t >= 0 ? T->dims[t] : 1;
        if (td != 1 && td != L->dims[d]) return false;
        o->strides[d] = td == 1 ? 0 : s;
        s *= td;
        if (d >= L->axis) {
            /* in place needs the operand's normalized part to be exactly X's, laid out densely */
            if (L->dims[d] != 1 && o->strides[d] != contiguous) o->in_place = false;
            contiguous *= L->dims[d];
        } else if (o->strides[d] != 0) {
            o->per_row = true;
        }
    }
    o->data = T->data;
    return true;
}

static OrtStatus* layernorm_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in,
                                int n_in, int n_out) {
    const struct layernorm_state* s = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < 2) return epabi_error(api, ORT_INVALID_ARGUMENT, "LayerNormalization: expected 2-3 inputs, got %d", n_in);
    const struct epabi_tensor* X = in[0];
    const struct epabi_tensor* Sc = in[1];
    const struct epabi_tensor* B = epabi_opt_input(in, n_in, 2);
    char sx[160], so[160];
    if (X->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || Sc->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ||
        (B != NULL && B->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "LayerNormalization: only float inputs are implemented");
    struct layernorm_launch L;
    memset(&L, 0, sizeof L);
    if (!epabi_norm_axis(s->axis, X->rank, &L.axis))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "LayerNormalization: axis=%lld is out of range for X %s",
                           (long long)s->axis, epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    L.rank = X->rank;
    memcpy(L.dims, X->dims, sizeof(int64_t) * (size_t)X->rank);
    L.rows = epabi_numel(L.axis, X->dims);
    L.norm = epabi_numel(X->rank - L.axis, X->dims + L.axis);
    L.epsilon = s->epsilon;
    const struct epabi_tensor* ops[2] = {Sc, B};
    for (int i = 0; i < 2; ++i) {
        if (!ln_operand_init(ops[i], &L, &L.op[i]))
            return epabi_error(api, ORT_INVALID_ARGUMENT, "LayerNormalization: %s %s does not broadcast to X %s",
                               i == 0 ? "Scale" : "B", epabi_shape_str(so, sizeof so, ops[i]->rank, ops[i]->dims),
                               epabi_shape_str(sx, sizeof sx, X->rank, X->dims));
    }

    OrtStatus* st = NULL;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, X->rank, X->dims, &st);
    if (Y == NULL) return st;
    L.x = X->data;
    L.y = Y->data;
    /* Mean and InvStdDev keep X's rank with the normalized dims set to 1. */
    int64_t stat_dims[EPABI_MAX_RANK];
    for (int d = 0; d < X->rank; ++d) stat_dims[d] = d < L.axis ? X->dims[d] : 1;
    bool want[2] = {s->want_mean && n_out > 1, s->want_inv && n_out > 2};
    float** dst[2] = {&L.mean, &L.inv};
    for (int i = 0; i < 2; ++i) {
        if (!want[i]) continue;
        struct epabi_tensor* T = epabi_exec_output(ex, 1 + i, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, X->rank, stat_dims,
                                                   &st);
        if (T == NULL) return st;
        *dst[i] = T->data;
    }
    /* Empty rows still have statistics (0/0 = NaN, as the reference computes them). */
    if (L.rows == 0 || (L.norm == 0 && L.mean == NULL && L.inv == NULL)) return NULL;
    if (L.norm > 0 && (!L.op[0].in_place || (L.op[1].data != NULL && !L.op[1].in_place))) {
        L.rowbuf = epabi_exec_scratch(ex, 2 * (size_t)L.norm * sizeof(float), &st);
        if (L.rowbuf == NULL) return st;
    }
    return epabi_exec_launch(ex, EPABI_LAUNCH_LAYERNORM, layernorm_launch_fn, &L, sizeof L);
}

const struct epabi_kernel epabi_kernels_layernorm[] = {
    {.op_type = "LayerNormalization", .since_min = 17, .since_max = 17, .supports = layernorm_supports,
     .init = layernorm_init, .release = free, .run = layernorm_run, .launch = EPABI_LAUNCH_LAYERNORM,
     .cuda = epabi_cuda_float32_math},
    {.op_type = NULL},
};
