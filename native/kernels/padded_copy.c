/*
 * padded_copy.c - the PAD launch (padded_copy.h): row by row over the output, each row's source row found through
 * the outer dims' index maps; within a row the view's elements are one memcpy and the padding either the constant,
 * the edge element, mirrored elements or, for wrap (Tile), copies of what the row already holds.
 */
#include "padded_copy.h"

#include <stddef.h>
#include <string.h>

int64_t epabi_pad_map_index(enum pad_mode mode, int64_t i, int64_t n) {
    if (i >= 0 && i < n) return i;
    switch (mode) {
    case PAD_EDGE: return i < 0 ? 0 : n - 1;
    case PAD_WRAP: {
        const int64_t m = i % n;
        return m < 0 ? m + n : m;
    }
    case PAD_REFLECT: {
        if (n == 1) return 0;
        const int64_t period = 2 * (n - 1);
        int64_t m = i % period;
        if (m < 0) m += period;
        return m < n ? m : period - m;
    }
    default: return -1;
    }
}

/* count copies of the element at `elem` into dst: one, then doubling copies of what is written. */
static void fill_elems(unsigned char* dst, int64_t count, size_t es, const void* elem) {
    if (count <= 0) return;
    memcpy(dst, elem, es);
    size_t done = es, total = (size_t)count * es;
    while (done < total) {
        size_t n = done < total - done ? done : total - done;
        memcpy(dst + done, dst, n);
        done += n;
    }
}

/* One output row of the innermost dim from its source row `src` of the view. */
static void pad_row(const struct pad_args* a, unsigned char* dst, const unsigned char* src) {
    const int last = a->rank - 1;
    const size_t es = a->elsize;
    const int64_t out = a->out_dims[last], n = a->in_dims[last], b = a->begin[last];
    const ptrdiff_t step = (ptrdiff_t)a->in_strides[last] * (ptrdiff_t)es;
    /* the view's elements: positions [b, b + n) of the row (wholly inside it: out = b + n + trailing pad) */
    if (n > 0) {
        if (step == (ptrdiff_t)es) {
            memcpy(dst + (size_t)b * es, src, (size_t)n * es);
        } else {
            for (int64_t j = 0; j < n; ++j) memcpy(dst + (size_t)(b + j) * es, src + j * step, es);
        }
    }
    const int64_t tail = b + n;
    switch (a->mode) {
    case PAD_CONSTANT:
        fill_elems(dst, b, es, &a->value);
        fill_elems(dst + (size_t)tail * es, out - tail, es, &a->value);
        break;
    case PAD_EDGE:
        fill_elems(dst, b, es, src);
        fill_elems(dst + (size_t)tail * es, out - tail, es, src + (n - 1) * step);
        break;
    case PAD_WRAP:
        /* the row is periodic with period n: every padded stretch copies the one n elements nearer the view */
        for (int64_t j = tail; j < out; j += n) {
            const int64_t len = out - j < n ? out - j : n;
            memcpy(dst + (size_t)j * es, dst + (size_t)(j - n) * es, (size_t)len * es);
        }
        for (int64_t end = b; end > 0; end -= n) {
            const int64_t start = end - n > 0 ? end - n : 0;
            memcpy(dst + (size_t)start * es, dst + (size_t)(start + n) * es, (size_t)(end - start) * es);
        }
        break;
    case PAD_REFLECT:
        for (int64_t j = 0; j < b; ++j)
            memcpy(dst + (size_t)j * es, src + epabi_pad_map_index(PAD_REFLECT, j - b, n) * step, es);
        for (int64_t j = tail; j < out; ++j)
            memcpy(dst + (size_t)j * es, src + epabi_pad_map_index(PAD_REFLECT, j - b, n) * step, es);
        break;
    }
}

static void pad_fn(const void* p) {
    const struct pad_args* in = p;
    struct pad_args copy;
    const struct pad_args* a = in;
    if (in->value_src != NULL) {   /* the constant as the launch finds it, like any input */
        copy = *in;
        copy.value = 0;
        memcpy(&copy.value, in->value_src, in->elsize);
        a = &copy;
    }
    const int last = a->rank - 1;
    const size_t row_bytes = (size_t)a->out_dims[last] * a->elsize;
    int64_t outer = 1;
    for (int k = 0; k < last; ++k) outer *= a->out_dims[k];
    int64_t idx[EPABI_MAX_RANK] = {0};
    unsigned char* dst = a->dst;
    for (int64_t o = 0; o < outer; ++o, dst += row_bytes) {
        ptrdiff_t off = 0;
        bool hole = false;
        for (int k = 0; k < last && !hole; ++k) {
            const int64_t m = epabi_pad_map_index(a->mode, idx[k] - a->begin[k], a->in_dims[k]);
            if (m < 0) hole = true;
            off += (ptrdiff_t)(m * a->in_strides[k]);
        }
        if (hole)
            fill_elems(dst, a->out_dims[last], a->elsize, &a->value);
        else
            pad_row(a, dst, a->src + off * (ptrdiff_t)a->elsize);
        for (int k = last - 1; k >= 0; --k) {
            if (++idx[k] < a->out_dims[k]) break;
            idx[k] = 0;
        }
    }
}

static bool plain_dim(const struct pad_args* a, int k) {
    return a->begin[k] == 0 && a->in_dims[k] == a->out_dims[k];
}

OrtStatus* epabi_padded_copy_launch(struct epabi_exec* ex, struct pad_args* a) {
    int r = 0;
    for (int k = 0; k < a->rank; ++k) {
        if (a->out_dims[k] == 1 && plain_dim(a, k)) continue;
        if (r > 0 && plain_dim(a, k) && plain_dim(a, r - 1) && a->in_strides[r - 1] == a->in_strides[k] * a->in_dims[k]) {
            a->in_dims[r - 1] *= a->in_dims[k];
            a->out_dims[r - 1] = a->in_dims[r - 1];
            a->in_strides[r - 1] = a->in_strides[k];
            continue;
        }
        a->in_dims[r] = a->in_dims[k];
        a->out_dims[r] = a->out_dims[k];
        a->in_strides[r] = a->in_strides[k];
        a->begin[r] = a->begin[k];
        ++r;
    }
    if (r == 0) {
        a->in_dims[0] = a->out_dims[0] = 1;
        a->in_strides[0] = 1;
        a->begin[0] = 0;
        r = 1;
    }
    for (int k = r; k < EPABI_MAX_RANK; ++k) a->in_dims[k] = a->out_dims[k] = a->in_strides[k] = a->begin[k] = 0;
    a->rank = r;
    return epabi_exec_launch(ex, EPABI_LAUNCH_PAD, pad_fn, a, sizeof *a);
}
