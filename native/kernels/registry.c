/*
 * registry.c - the kernel table: every op family's array, searched by op type and opset version.
 *
 * Each family file native/kernels/<stem>.c defines `const struct epabi_kernel epabi_kernels_<stem>[]`,
 * terminated by an entry whose op_type is NULL. The declarations below are weak, so the library links
 * while a family file does not exist yet; a missing family has a NULL address and is skipped.
 * Adding a family: one file plus one line in each of the two lists below. Thread-safe: read-only data.
 */
#include <string.h>

#include "kernel.h"

#define EPABI_FAMILY(stem) extern const struct epabi_kernel epabi_kernels_##stem[] __attribute__((weak));
EPABI_FAMILY(elementwise)
EPABI_FAMILY(unary)
EPABI_FAMILY(cast)
EPABI_FAMILY(matmul)
EPABI_FAMILY(conv)
EPABI_FAMILY(pool)
EPABI_FAMILY(softmax)
EPABI_FAMILY(layernorm)
EPABI_FAMILY(reduce)
EPABI_FAMILY(transpose)
EPABI_FAMILY(reshape)
EPABI_FAMILY(expand)
EPABI_FAMILY(concat)
EPABI_FAMILY(slice)
EPABI_FAMILY(gather)
EPABI_FAMILY(shape)
#undef EPABI_FAMILY

const struct epabi_kernel* epabi_kernel_find(const char* op_type, int since_version) {
    const struct epabi_kernel* const families[] = {
        epabi_kernels_elementwise, epabi_kernels_unary,   epabi_kernels_cast,    epabi_kernels_matmul,
        epabi_kernels_conv,        epabi_kernels_pool,    epabi_kernels_softmax, epabi_kernels_layernorm,
        epabi_kernels_reduce,      epabi_kernels_transpose, epabi_kernels_reshape, epabi_kernels_expand,
        epabi_kernels_concat,      epabi_kernels_slice,   epabi_kernels_gather,  epabi_kernels_shape,
    };
    if (op_type == NULL) return NULL;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; ++f) {
        if (families[f] == NULL) continue;   /* family not linked into this build */
        for (const struct epabi_kernel* k = families[f]; k->op_type != NULL; ++k) {
            if (strcmp(k->op_type, op_type) == 0 && since_version >= k->since_min && since_version <= k->since_max)
                return k;
        }
    }
    return NULL;
}
