/*
 * onehot.c - the one-hot lookup step (onehot.h): its build-time table, its run() and the software adapter's launch.
 *
 * run() derives what the unfused nodes would: Equal's broadcast of X and C (an ORT_INVALID_ARGUMENT naming both shapes
 * when they do not broadcast), the MatMul's output (Equal's dims but the last, then N), and checks the folded bias
 * against it. The launch spreads rows over the EP's pool.
 */
#include "onehot.h"

#include <stdlib.h>
#include <string.h>

#include "math_common.h"
#include "thread_pool.h"

struct keyed {
    int64_t value;
    int64_t k;
};

static int keyed_cmp(const void* a, const void* b) {
    const struct keyed* x = a;
    const struct keyed* y = b;
    if (x->value != y->value) return x->value < y->value ? -1 : 1;
    return x->k < y->k ? -1 : x->k > y->k;
}

bool epabi_onehot_table_build(ONNXTensorElementDataType c_dtype, const void* c, int64_t k, const float* w, int64_t n,
                              const float* bias, int64_t bias_cols, struct epabi_onehot_table* out) {
    memset(out, 0, sizeof *out);
    struct keyed* sorted = malloc((size_t)(k > 0 ? k : 1) * sizeof *sorted);
    if (sorted == NULL) return false;
    for (int64_t i = 0; i < k; ++i) sorted[i] = (struct keyed){epabi_index_at(c_dtype, c, i), i};
    qsort(sorted, (size_t)k, sizeof *sorted, keyed_cmp);   /* by value, then k: each value's rows in k order */
    int64_t distinct = 0;
    for (int64_t i = 0; i < k; ++i) distinct += i == 0 || sorted[i].value != sorted[i - 1].value;
    float* table = malloc((size_t)((distinct + 1) * (n > 0 ? n : 1)) * sizeof *table);
    int64_t* keys = malloc((size_t)(distinct > 0 ? distinct : 1) * sizeof *keys);
    if (table == NULL || keys == NULL) {
        free(sorted);
        free(table);
        free(keys);
        return false;
    }
    int64_t row = -1;
    for (int64_t i = 0; i < k; ++i) {
        float* t = table + (size_t)(row + 1) * (size_t)n;
        if (i == 0 || sorted[i].value != sorted[i - 1].value) {
            if (row >= 0 && bias != NULL)   /* the previous value's row is complete: the Add comes last */
                for (int64_t j = 0; j < n; ++j) table[row * n + j] += bias[bias_cols == 1 ? 0 : j];
            keys[++row] = sorted[i].value;
            for (int64_t j = 0; j < n; ++j) t[j] = 0.0f;
        }
        float* acc = table + (size_t)row * (size_t)n;
        const float* wr = w + (size_t)sorted[i].k * (size_t)n;
        for (int64_t j = 0; j < n; ++j) acc[j] += wr[j];
    }
    if (row >= 0 && bias != NULL)
        for (int64_t j = 0; j < n; ++j) table[row * n + j] += bias[bias_cols == 1 ? 0 : j];
    float* miss = table + (size_t)distinct * (size_t)n;
    for (int64_t j = 0; j < n; ++j) miss[j] = bias != NULL ? bias[bias_cols == 1 ? 0 : j] : 0.0f;
    free(sorted);
    out->table = table;
    out->n_keys = distinct;
    out->base = distinct > 0 ? keys[0] : 0;
    /* consecutive: the last key is base + distinct - 1 (in unsigned arithmetic, which cannot overflow here) */
    if (distinct > 0 && (uint64_t)keys[distinct - 1] - (uint64_t)keys[0] == (uint64_t)(distinct - 1)) {
        free(keys);
    } else {
        out->keys = keys;
    }
    return true;
}

struct epabi_onehot_state* epabi_onehot_state_new(int64_t base) {
    struct epabi_onehot_state* s = calloc(1, sizeof *s);
    if (s != NULL) s->base = base;
    return s;
}

/* The table row of value v: its index among the keys, n_keys when it is none of them. */
static int64_t table_row(const struct onehot_args* a, int64_t v) {
    if (a->keys == NULL) {
        const uint64_t d = (uint64_t)v - (uint64_t)a->base;
        return d < (uint64_t)a->n_keys ? (int64_t)d : a->n_keys;
    }
    int64_t lo = 0, hi = a->n_keys;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (a->keys[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo < a->n_keys && a->keys[lo] == v ? lo : a->n_keys;
}

static inline int64_t x_at(const struct onehot_args* a, const void* p, int64_t i) {
    return a->x64 ? ((const int64_t*)p)[i] : (int64_t)((const int32_t*)p)[i];
}

static void lookup_rows(void* ctx, int64_t begin, int64_t end) {
    const struct onehot_args* a = ctx;
    const size_t row_bytes = (size_t)a->n * sizeof(float);
    for (int64_t r = begin; r < end; ++r)
        memcpy(a->y + r * a->n, a->table + table_row(a, x_at(a, a->x, r)) * a->n, row_bytes);
}

/* The general path: X's last dim is K, each row compares K values. */
static void per_key_rows(void* ctx, int64_t begin, int64_t end) {
    const struct onehot_args* a = ctx;
    for (int64_t r = begin; r < end; ++r) {
        float* y = a->y + r * a->n;
        for (int64_t j = 0; j < a->n; ++j) y[j] = 0.0f;
        for (int64_t k = 0; k < a->k_len; ++k) {
            if (x_at(a, a->x, r * a->k_len + k) != x_at(a, a->c, k)) continue;
            const float* w = a->w + k * a->n;
            for (int64_t j = 0; j < a->n; ++j) y[j] += w[j];
        }
        if (a->bias != NULL)
            for (int64_t j = 0; j < a->n; ++j) y[j] += a->bias[a->bias_cols == 1 ? 0 : j];
    }
}

static void onehot_launch(const void* p) {
    const struct onehot_args* a = p;
    const int64_t per_row = a->per_key ? a->n * (a->k_len > 0 ? a->k_len : 1) : a->n;
    const int64_t grain = per_row >= EPABI_PARALLEL_MIN_ELEMS ? 1 : EPABI_PARALLEL_MIN_ELEMS / (per_row > 0 ? per_row : 1);
    epabi_pool_for_range(a->pool, a->rows, grain, a->per_key ? per_key_rows : lookup_rows, (void*)a);
}

/* Never claimed at GetCapability: only the plan makes one-hot steps, from nodes their own kernels claimed. */
static bool onehot_supports(const struct epabi_node* node, char* why, size_t why_len) {
    (void)node;
    snprintf(why, why_len, "the one-hot lookup step is built by the plan, not claimed");
    return false;
}

static OrtStatus* onehot_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                             int n_out) {
    (void)n_out;
    const struct epabi_onehot_state* s = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    if (n_in < ONEHOT_IN_KEYS || in[ONEHOT_IN_X] == NULL || in[ONEHOT_IN_C] == NULL || in[ONEHOT_IN_W] == NULL ||
        in[ONEHOT_IN_TABLE] == NULL)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "one-hot lookup: expected X, C, W and the table");
    const struct epabi_tensor* X = in[ONEHOT_IN_X];
    const struct epabi_tensor* C = in[ONEHOT_IN_C];
    const struct epabi_tensor* W = in[ONEHOT_IN_W];
    const struct epabi_tensor* table = in[ONEHOT_IN_TABLE];
    const struct epabi_tensor* keys = epabi_opt_input(in, n_in, ONEHOT_IN_KEYS);
    const struct epabi_tensor* bias = epabi_opt_input(in, n_in, ONEHOT_IN_BIAS);
    char sa[160], sb[160];
    if (X->dtype != C->dtype || !epabi_is_index_dtype(X->dtype))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Equal: X is %s but the constant it is compared with is %s",
                           epabi_dtype_name(X->dtype), epabi_dtype_name(C->dtype));
    int eq_rank = 0;
    int64_t eq_dims[EPABI_MAX_RANK];
    if (!epabi_broadcast_shape(X->rank, X->dims, C->rank, C->dims, &eq_rank, eq_dims))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "Equal: X %s and C %s do not broadcast",
                           epabi_shape_str(sa, sizeof sa, X->rank, X->dims),
                           epabi_shape_str(sb, sizeof sb, C->rank, C->dims));
    const int64_t k = C->rank >= 1 ? C->dims[C->rank - 1] : 1;
    const int64_t n = W->dims[1];
    if (eq_rank < 1 || eq_dims[eq_rank - 1] != k)   /* the build checked C: dims 1 but the last */
        return epabi_error(api, ORT_INVALID_ARGUMENT, "MatMul: the one-hot %s does not end in W's K=%lld",
                           epabi_shape_str(sa, sizeof sa, eq_rank, eq_dims), (long long)k);
    int out_rank = 0;
    int64_t out_dims[EPABI_MAX_RANK];
    for (int d = 0; d + 1 < eq_rank; ++d) out_dims[out_rank++] = eq_dims[d];
    out_dims[out_rank++] = n;
    int64_t bias_cols = 0;
    if (bias != NULL) {
        bool fits = bias->rank <= out_rank;
        for (int d = 0; d + 1 < bias->rank && fits; ++d) fits = bias->dims[d] == 1;
        bias_cols = bias->rank >= 1 ? bias->dims[bias->rank - 1] : 1;
        if (!fits || (bias_cols != 1 && bias_cols != n))
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Add: the bias %s does not broadcast to the product's "
                               "shape %s", epabi_shape_str(sa, sizeof sa, bias->rank, bias->dims),
                               epabi_shape_str(sb, sizeof sb, out_rank, out_dims));
    }
    OrtStatus* st = NULL;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, out_rank, out_dims, &st);
    if (Y == NULL) return st;
    struct onehot_args a;
    memset(&a, 0, sizeof a);
    a.rows = epabi_numel(eq_rank - 1, eq_dims);
    if (a.rows == 0 || n == 0) return NULL;
    a.x = X->data;
    a.table = table->data;
    a.keys = keys != NULL ? keys->data : NULL;
    a.c = C->data;
    a.w = W->data;
    a.bias = bias != NULL ? bias->data : NULL;
    a.y = Y->data;
    a.n = n;
    a.n_keys = table->dims[0] - 1;
    a.base = s->base;
    a.k_len = k;
    a.bias_cols = bias_cols;
    a.x64 = X->dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
    /* X's last dim is 1 (or X a scalar): one value per row; else it is K (Equal's broadcast) and K > 1 */
    a.per_key = X->rank >= 1 && X->dims[X->rank - 1] != 1;
    a.pool = epabi_exec_pool(ex);
    return epabi_exec_launch(ex, EPABI_LAUNCH_ONEHOT, onehot_launch, &a, sizeof a);
}

const struct epabi_kernel epabi_kernel_onehot = {
    .op_type = "OneHotLookup", .since_min = 0, .since_max = -1, .supports = onehot_supports, .run = onehot_run,
    .release = free, .launch = EPABI_LAUNCH_ONEHOT,
};
