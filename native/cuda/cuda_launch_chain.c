/*
 * cuda_launch_chain.c - the launcher of elementwise chains (EPABI_LAUNCH_CHAIN, struct chain_args; kernels/chain.h):
 * one kernel over the output's elements: the chain's own, compiled from its op list (cuda_chain_jit.c), or chain_f32
 * (cuda_kernels.cu), which interprets the op list, where that one does not apply. The block
 * arrives with its dims merged by the chain step's run(), as the host launch takes it. Never allocates, never
 * synchronizes (capturable). Thread-safety: no state.
 */
#include <stdint.h>

#include "cuda_launch_internal.h"
#include "ep_factory.h"   /* EPABI_EP_NAME */

/* Whether the op list only names registers before each op, inputs and outputs the block has, and immediates as a
 * binary op's operands: the kernel indexes
 * its registers and pointers with these numbers. */
static bool ops_valid(const struct chain_args* a) {
    for (int k = 0; k < a->n_ops; ++k) {
        const struct chain_op* o = &a->ops[k];
        const int n_operands = o->kind == CHAIN_BINARY ? 2 : 1;
        for (int t = 0; t < n_operands; ++t) {
            const int32_t r = t == 0 ? o->a : o->b;
            if (r == EPABI_CHAIN_IMMEDIATE) {
                if (o->kind != CHAIN_BINARY) return false;
                continue;
            }
            if (r >= k || (r < 0 && -1 - r >= a->n_in)) return false;
        }
        if (o->kind != CHAIN_UNARY && o->kind != CHAIN_BINARY && o->kind != CHAIN_CLIP) return false;
        if (o->out >= a->n_out) return false;
    }
    return true;
}

OrtStatus* epabi_cuda_launch_chain(const struct epabi_cuda_launch_env* env, const struct chain_args* in) {
    const struct chain_args a = *in;
    if (a.rank < 1 || a.rank > EPABI_MAX_RANK || a.n_ops < 1 || a.n_ops > EPABI_CHAIN_MAX_OPS || a.n_in < 0 ||
        a.n_in > EPABI_CHAIN_MAX_INPUTS || a.n_out < 1 || a.n_out > EPABI_CHAIN_MAX_OUTPUTS || !ops_valid(&a))
        return epabi_error(env->api, ORT_EP_FAIL, EPABI_EP_NAME ": malformed elementwise chain (rank %d, %d ops, %d "
                           "inputs, %d outputs)", a.rank, a.n_ops, a.n_in, a.n_out);
    int64_t n = 1;
    for (int d = 0; d < a.rank; ++d) n *= a.dims[d];
    if (n <= 0) return NULL;
    void* params[] = {(void*)&a, &n};
    epabi_cu_function own = NULL;
    EPABI_RETURN_IF_ERROR(epabi_cuda_chain_kernel(env, &a, n, &own));
    if (own != NULL)
        return epabi_cuda_run_fn(env, "Chain", own, epabi_cuda_grid(n, EPABI_CUDA_BLOCK), 1, 1, EPABI_CUDA_BLOCK,
                                 params);
    return epabi_cuda_run(env, "Chain", EPABI_CK_chain_f32, epabi_cuda_grid(n, EPABI_CUDA_BLOCK), 1, 1,
                          EPABI_CUDA_BLOCK, params);
}
