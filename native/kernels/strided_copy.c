#include "strided_copy.h"

#include "math_common.h"

#include <string.h>

/* Fixed-size memcpy lets the compiler emit plain loads and stores without type-punning the data. */
static void copy_row(unsigned char* dst, const unsigned char* src, int64_t n, int64_t stride, size_t elsize) {
    if (stride == 1) {
        memcpy(dst, src, (size_t)n * elsize);
        return;
    }
    if (stride == 0 && elsize == 1) {
        memset(dst, *src, (size_t)n);
        return;
    }
    const ptrdiff_t step = (ptrdiff_t)stride * (ptrdiff_t)elsize;
    switch (elsize) {
    case 2: for (int64_t i = 0; i < n; ++i, src += step) memcpy(dst + i * 2, src, 2); break;
    case 4: for (int64_t i = 0; i < n; ++i, src += step) memcpy(dst + i * 4, src, 4); break;
    case 8: for (int64_t i = 0; i < n; ++i, src += step) memcpy(dst + i * 8, src, 8); break;
    default: for (int64_t i = 0; i < n; ++i, src += step) memcpy(dst + (size_t)i * elsize, src, elsize); break;
    }
}

/* Rows [o0, o1) of the output (each `inner` elements): the odometer over the outer dims starts at row o0. */
static void strided_rows(void* ctx, int64_t o0, int64_t o1) {
    const struct epabi_strided_copy* a = ctx;
    const int r = a->rank;
    const int64_t inner = a->dims[r - 1];
    int64_t idx[EPABI_MAX_RANK] = {0};
    ptrdiff_t off = 0;
    for (int64_t rest = o0, k = r - 2; k >= 0; --k) {
        idx[k] = rest % a->dims[k];
        rest /= a->dims[k];
        off += (ptrdiff_t)(idx[k] * a->strides[k]);
    }
    unsigned char* dst = a->dst + (size_t)o0 * (size_t)inner * a->elsize;
    for (int64_t o = o0; o < o1; ++o) {
        copy_row(dst, a->src + off * (ptrdiff_t)a->elsize, inner, a->strides[r - 1], a->elsize);
        dst += (size_t)inner * a->elsize;
        for (int k = r - 2; k >= 0; --k) {
            off += (ptrdiff_t)a->strides[k];
            if (++idx[k] < a->dims[k]) break;
            off -= (ptrdiff_t)(a->strides[k] * a->dims[k]);
            idx[k] = 0;
        }
    }
}

/* Rows spread over the pool once the copy passes a few hundred KiB. */
static void strided_copy_fn(const void* p) {
    const struct epabi_strided_copy* a = p;
    const int64_t inner = a->dims[a->rank - 1];
    int64_t outer = 1;
    for (int k = 0; k < a->rank - 1; ++k) outer *= a->dims[k];
    const int64_t row_bytes = inner * (int64_t)a->elsize > 0 ? inner * (int64_t)a->elsize : 1;
    const int64_t grain = (64 * (int64_t)EPABI_PARALLEL_MIN_ELEMS + row_bytes - 1) / row_bytes;
    epabi_pool_for_range(a->pool, outer, grain, strided_rows, (void*)a);
}

static void simplify(struct epabi_strided_copy* a) {
    int r = 0;
    for (int k = 0; k < a->rank; ++k) {
        if (a->dims[k] == 1) continue;
        if (r > 0 && a->strides[r - 1] == a->strides[k] * a->dims[k]) {
            a->dims[r - 1] *= a->dims[k];
            a->strides[r - 1] = a->strides[k];
            continue;
        }
        a->dims[r] = a->dims[k];
        a->strides[r] = a->strides[k];
        ++r;
    }
    if (r == 0) {
        a->dims[0] = 1;
        a->strides[0] = 1;
        r = 1;
    }
    a->rank = r;
}

OrtStatus* epabi_strided_copy_launch(struct epabi_exec* ex, struct epabi_strided_copy* a) {
    simplify(a);
    a->pool = epabi_exec_pool(ex);
    return epabi_exec_launch(ex, EPABI_LAUNCH_STRIDED_COPY, strided_copy_fn, a, sizeof *a);
}
