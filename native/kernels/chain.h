/*
 * chain.h - the chain step: float32 elementwise nodes (unary ops, Clip with constant bounds, Add/Sub/Mul/Div of
 * same-shape or statically broadcast operands) that the plan fused into one launch of kind EPABI_LAUNCH_CHAIN
 * (struct chain_args, launch_args.h). Each element of the output shape goes through the whole op list at once, so
 * the chain reads its inputs once and writes only the values something outside it reads: no intermediate buffers.
 *
 * The plan builds one (plan_chains.c, epabi_plan_fuse_chains) from nodes whose kernels have a `chain_link`
 * (kernel.h) and whose declared shapes (symbols included) prove each written value of the chain's output shape; over
 * symbolic dims run() computes that shape as the broadcast of the inputs' and checks each output's.
 * The software adapter applies each op with the functions of the unfused kernels (unary.c's span, the same float
 * arithmetic as elementwise.c), so a chain gives the unfused nodes' bits; CUDA interprets the op list in one kernel
 * (cuda_kernels.cu, chain_f32) with the unfused kernels' un_apply and non-contracted arithmetic (__fadd_rn...).
 *
 * Thread-safety: a state is read-only after the plan is built.
 */
#ifndef EPABI_CHAIN_H
#define EPABI_CHAIN_H

#include <stdint.h>

#include "kernel.h"

/* A chain step's state: the op list (operands and outputs filled in), and the shapes it was compiled for. run()
 * refuses inputs of other shapes (ORT_INVALID_ARGUMENT naming the input): the plan proved the fusion on these. */
struct epabi_chain_state {
    int32_t n_ops, n_in, n_out;
    struct chain_op ops[EPABI_CHAIN_MAX_OPS];
    int rank;                                              /* the output's */
    int64_t dims[EPABI_MAX_RANK];                          /* -1: symbolic (then the inputs' broadcast, at run time) */
    bool symbolic;   /* the output's run-time shape is the broadcast of the inputs'; in_dims -1 where symbolic */
    int in_rank[EPABI_CHAIN_MAX_INPUTS];
    int64_t in_dims[EPABI_CHAIN_MAX_INPUTS][EPABI_MAX_RANK];
    /* per output: the inputs (bits) it depends on; its run-time shape, their broadcast, must be the chain's */
    unsigned out_cone[EPABI_CHAIN_MAX_OUTPUTS];
    char out_decl[96], in_decl[EPABI_CHAIN_MAX_INPUTS][96];   /* the declared shapes with symbols, for messages */
};

/* The kernel of every chain step; not in the registry (no ONNX op has it), only the plan installs it. Its state is
 * a malloc'ed struct epabi_chain_state, released with free(). */
extern const struct epabi_kernel epabi_kernel_chain;

/* Elements [begin, end) of a float32 unary launch (a's dtype float), computed as the Unary kernels compute them on
 * the calling thread (unary.c). */
void epabi_unary_span(const struct un_args* a, int64_t begin, int64_t end);

/* o[i] = a[i * sa] op b[i * sb] for i in [0, n), op OP_ADD, OP_SUB, OP_MUL or OP_DIV, as the float32 Add/Sub/Mul/Div
 * kernels compute a row (elementwise.c; o may be a or b). */
void epabi_arith_f32_span(int32_t op, const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n);

#endif
