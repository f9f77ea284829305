/*
 * registry.c - the kernel table: every op family's array, searched by op type and opset version.
 *
 * Each family file native/kernels/<stem>.c defines `const struct epabi_kernel epabi_kernels_<stem>[]`,
 * terminated by an entry whose op_type is NULL. EPABI_FAMILIES is the one list of stems: it generates the
 * declarations and the search order. The declarations are weak, so the library links while a family file
 * does not exist yet; a missing family has a NULL address and is skipped.
 * Adding a family: one file plus one line in EPABI_FAMILIES. Thread-safe: read-only data.
 */
#include <string.h>

#include "kernel.h"

#define EPABI_FAMILIES(X)                                                                                    \
    X(elementwise) X(unary) X(cast) X(matmul) X(conv) X(pool) X(softmax) X(layernorm) X(reduce) X(transpose) \
    X(reshape) X(expand) X(concat) X(slice) X(gather) X(shape)                                               \
    X(batchnorm)                                                                                             \
    X(instancenorm)                                                                                          \
    X(convtranspose)                                                                                         \
    X(lstm)                                                                                                  \
    X(split) X(pad) X(tile) X(range) X(constant_of_shape) X(argreduce) X(resize)

#define EPABI_FAMILY_DECL_(stem) extern const struct epabi_kernel epabi_kernels_##stem[] __attribute__((weak));
EPABI_FAMILIES(EPABI_FAMILY_DECL_)
#undef EPABI_FAMILY_DECL_

const struct epabi_kernel* epabi_kernel_find(const char* op_type, int since_version) {
#define EPABI_FAMILY_ENTRY_(stem) epabi_kernels_##stem,
    const struct epabi_kernel* const families[] = {EPABI_FAMILIES(EPABI_FAMILY_ENTRY_)};
#undef EPABI_FAMILY_ENTRY_
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
