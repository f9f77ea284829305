/*
 * linear.c - the linear step (linear.h): its state, its run() and the software adapter's launch function.
 *
 * run() derives the output shape the lead derives (MatMul: A's dims but the last, then N; Gemm: [M, N]) and checks
 * what the unfused nodes would have checked: K of A and B, Gemm's C broadcast to [M, N], a folded bias that
 * broadcasts to the output without growing it. Errors are ORT_INVALID_ARGUMENT naming the shapes.
 */
#include "linear.h"

#include <stdlib.h>
#include <string.h>

#include "math_common.h"

int32_t epabi_linear_path(int64_t m, int64_t k, int64_t n) {
    bool weights_fit = k >= 0 && n >= 0 && k <= EPABI_LINEAR_SMALL_K && n <= EPABI_LINEAR_SMALL_N &&
                       k * n <= EPABI_LINEAR_SMALL_WEIGHTS;
    if (!weights_fit) return LINEAR_PATH_BLAS;
    if (m < 0) return LINEAR_PATH_SMALL_IF_FEW_ROWS;
    return m <= EPABI_LINEAR_SMALL_ROWS ? LINEAR_PATH_SMALL : LINEAR_PATH_BLAS;
}

struct epabi_linear_state* epabi_linear_state_new(const struct epabi_linear_lead* lead, bool bias, int32_t activation,
                                                  int32_t path, bool weights_const) {
    struct epabi_linear_state* s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->lead = *lead;
    s->bias = bias;
    s->activation = activation;
    s->path = path;
    s->weights_const = weights_const;
    return s;
}

/* As Gemm's host launch: C broadcast into Y, the product added with beta; then the activation. */
static void linear_launch_fn(const void* p) {
    const struct linear_launch* L = p;
    const struct gemm_launch g = {
        .a = L->a, .b = L->b, .c = L->c, .y = L->y, .pack = L->pack, .trans_a = L->trans_a, .trans_b = L->trans_b,
        .m = L->m, .n = L->n, .k = L->k, .lda = L->lda, .ldb = L->ldb, .alpha = L->alpha, .beta = L->beta,
        .c_rows = L->c_rows, .c_cols = L->c_cols, .pool = L->pool,
    };
    epabi_gemm_host(&g);
    if (L->activation >= 0) epabi_activate_f32(L->activation, L->y, L->m * L->n);
}

/* Never claimed at GetCapability: only the plan makes linear steps, from nodes their own kernels claimed. */
static bool linear_supports(const struct epabi_node* node, char* why, size_t why_len) {
    (void)node;
    snprintf(why, why_len, "the linear step is built by the plan, not claimed");
    return false;
}

/* The folded bias: every dim but the last is 1, the last is n or 1, and its rank does not exceed the output's (so
 * the Add it replaces kept the product's shape). */
static bool bias_fits(const struct epabi_tensor* c, int out_rank, int64_t n, int64_t* cols) {
    if (c->rank > out_rank) return false;
    for (int d = 0; d + 1 < c->rank; ++d)
        if (c->dims[d] != 1) return false;
    *cols = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
    return *cols == 1 || *cols == n;
}

static OrtStatus* linear_run(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                             int n_out) {
    (void)n_out;
    const struct epabi_linear_state* s = state;
    const struct epabi_api* api = epabi_exec_api(ex);
    const char* op = s->lead.matmul ? "MatMul" : "Gemm";
    if (n_in < 2) return epabi_error(api, ORT_INVALID_ARGUMENT, "%s: expected at least 2 inputs, got %d", op, n_in);
    const struct epabi_tensor* A = in[0];
    const struct epabi_tensor* B = in[1];
    const struct epabi_tensor* C = epabi_opt_input(in, n_in, 2);
    char sa[160], sb[160];
    if (A->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || B->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ||
        (C != NULL && C->dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT))
        return epabi_error(api, ORT_INVALID_ARGUMENT, "%s: only float inputs are implemented", op);

    struct linear_launch L;
    memset(&L, 0, sizeof L);
    int out_rank = 0;
    int64_t out_dims[EPABI_MAX_RANK];
    int64_t m, k, kb, n;
    if (s->lead.matmul) {
        if (A->rank < 1 || B->rank != 2)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "MatMul: A %s needs rank >= 1 and B %s rank 2 in a fused "
                               "MatMul", epabi_shape_str(sa, sizeof sa, A->rank, A->dims),
                               epabi_shape_str(sb, sizeof sb, B->rank, B->dims));
        k = A->dims[A->rank - 1];
        m = A->rank >= 2 ? epabi_numel(A->rank - 1, A->dims) : 1;   /* the batch folds into M */
        kb = B->dims[0];
        n = B->dims[1];
        for (int d = 0; d + 1 < A->rank; ++d) out_dims[out_rank++] = A->dims[d];
        out_dims[out_rank++] = n;
        L.lda = k;
        L.ldb = n;
    } else {
        if (A->rank != 2 || B->rank != 2)
            return epabi_error(api, ORT_INVALID_ARGUMENT, "Gemm: A %s and B %s must both have rank 2",
                               epabi_shape_str(sa, sizeof sa, A->rank, A->dims),
                               epabi_shape_str(sb, sizeof sb, B->rank, B->dims));
        m = s->lead.trans_a ? A->dims[1] : A->dims[0];
        k = s->lead.trans_a ? A->dims[0] : A->dims[1];
        kb = s->lead.trans_b ? B->dims[1] : B->dims[0];
        n = s->lead.trans_b ? B->dims[0] : B->dims[1];
        out_dims[0] = m;
        out_dims[1] = n;
        out_rank = 2;
        L.lda = A->dims[1];
        L.ldb = B->dims[1];
    }
    if (k != kb)
        return epabi_error(api, ORT_INVALID_ARGUMENT, "%s: A %s (transA=%d) has K=%lld but B %s (transB=%d) has K=%lld",
                           op, epabi_shape_str(sa, sizeof sa, A->rank, A->dims), (int)s->lead.trans_a, (long long)k,
                           epabi_shape_str(sb, sizeof sb, B->rank, B->dims), (int)s->lead.trans_b, (long long)kb);
    if (C != NULL && s->bias) {
        int64_t cols = 1;
        if (!bias_fits(C, out_rank, n, &cols))
            return epabi_error(api, ORT_INVALID_ARGUMENT, "%s: the bias %s of the Add fused after it does not "
                               "broadcast to the product's shape %s", op,
                               epabi_shape_str(sa, sizeof sa, C->rank, C->dims),
                               epabi_shape_str(sb, sizeof sb, out_rank, out_dims));
        L.c = C->data;
        L.c_rows = 1;
        L.c_cols = cols;
        L.beta = 1.0f;
    } else if (C != NULL && s->lead.beta != 0.0f) {
        EPABI_RETURN_IF_ERROR(epabi_gemm_c_extent(api, C, m, n, &L.c_rows, &L.c_cols));
        L.c = C->data;
        L.beta = s->lead.beta;
    }
    OrtStatus* st = NULL;
    struct epabi_tensor* Y = epabi_exec_output(ex, 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, out_rank, out_dims, &st);
    if (Y == NULL) return st;
    if (m == 0 || n == 0) return NULL;
    L.a = A->data;
    L.b = B->data;
    L.y = Y->data;
    L.trans_a = s->lead.trans_a;
    L.trans_b = s->lead.trans_b;
    L.activation = s->activation;
    L.path = s->path;
    L.weights_const = s->weights_const ? 1 : 0;
    L.m = m;
    L.n = n;
    L.k = k;
    L.alpha = s->lead.alpha;
    L.pool = epabi_exec_pool(ex);
    size_t pack_bytes = epabi_sgemm_pool_scratch_bytes(L.pool, m, n, k);
    if (pack_bytes > 0) {
        L.pack = epabi_exec_scratch(ex, pack_bytes, &st);
        if (L.pack == NULL) return st;
    }
    return epabi_exec_launch(ex, EPABI_LAUNCH_LINEAR, linear_launch_fn, &L, sizeof L);
}

const struct epabi_kernel epabi_kernel_linear = {
    .op_type = "Linear", .since_min = 0, .since_max = -1, .supports = linear_supports, .run = linear_run,
    .release = free, .launch = EPABI_LAUNCH_LINEAR,
};
