/*
 * cuda_launch_onehot.c - the launcher of one-hot lookup steps (EPABI_LAUNCH_ONEHOT, struct onehot_args;
 * kernels/onehot.h): one kernel that copies each row's table row into Y (four floats a thread when N is a multiple of
 * 4 and the table and Y are 16-byte aligned), or, when X's last dim is K, onehot_per_key_f32's sum per element.
 * Never allocates, never synchronizes (capturable). Thread-safety: no state.
 */
#include <stdint.h>

#include "cuda_launch_internal.h"
#include "ep_factory.h"   /* EPABI_EP_NAME */

OrtStatus* epabi_cuda_launch_onehot(const struct epabi_cuda_launch_env* env, const struct onehot_args* in) {
    struct onehot_args a = *in;
    if (a.rows < 0 || a.n < 0 || a.n_keys < 0 || a.table == NULL || a.y == NULL || (a.per_key && a.w == NULL))
        return epabi_error(env->api, ORT_EP_FAIL, EPABI_EP_NAME ": malformed one-hot lookup (%lld rows of %lld, "
                           "%lld keys)", (long long)a.rows, (long long)a.n, (long long)a.n_keys);
    int64_t items = a.rows * a.n;
    if (items == 0) return NULL;
    enum epabi_cuda_kernel_id id = EPABI_CK_onehot_lookup_f32;
    if (a.per_key) {
        id = EPABI_CK_onehot_per_key_f32;
    } else if (a.n % 4 == 0 && ((uintptr_t)a.table | (uintptr_t)a.y) % 16 == 0) {
        id = EPABI_CK_onehot_lookup_f32x4;
        items /= 4;
    }
    void* params[] = {&a, &items};
    return epabi_cuda_run(env, "one-hot lookup", id, epabi_cuda_grid(items, EPABI_CUDA_BLOCK), 1, 1, EPABI_CUDA_BLOCK,
                          params);
}
