#include "strided_copy.h"

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

static void strided_copy_fn(const void* p) {
    const struct epabi_strided_copy* a = p;
    const int r = a->rank;
    const int64_t inner = a->dims[r - 1];
    int64_t outer = 1;
    for (int k = 0; k < r - 1; ++k) outer *= a->dims[k];
    int64_t idx[EPABI_MAX_RANK] = {0};
    ptrdiff_t off = 0;
    unsigned char* dst = a->dst;
    for (int64_t o = 0; o < outer; ++o) {
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
    return epabi_exec_launch(ex, EPABI_LAUNCH_STRIDED_COPY, strided_copy_fn, a, sizeof *a);
}
