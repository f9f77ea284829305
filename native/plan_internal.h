/*
 * plan_internal.h - private to the plan files: the value and step model of a built plan (struct epabi_plan),
 * shared by the builder (plan_build.c), its passes (plan_passes.c, plan_chains.c, plan_moments.c,
 * plan_softmax.c) and the executor
 * (plan_exec.c). Nothing outside those files includes it; the rest of the plugin sees plan.h only.
 *
 * A built plan is read-only (plan.h), so the executor reads these structs without locks.
 */
#ifndef EPABI_PLAN_INTERNAL_H
#define EPABI_PLAN_INTERNAL_H

#include <stdbool.h>

#include "kernel.h"
#include "plan.h"

enum value_kind {
    VK_INPUT = 0,   /* fused-node input, read from the kernel context */
    VK_CONST = 1,   /* constant initializer, copied at Compile */
    VK_INNER = 2    /* produced by a step; output_index >= 0 when it is also a fused output */
};

struct plan_value {
    char* name;                        /* owned; "" for an unnamed (omitted optional) node output */
    enum value_kind kind;
    ONNXTensorElementDataType dtype;   /* as declared by the graph; UNDEFINED when unknown */
    int input_index;                   /* VK_INPUT: kernel-context input index */
    int output_index;                  /* VK_INNER: kernel-context output index, or -1 */
    int producer;                      /* VK_INNER: producing step, -1 until seen */
    bool on_host;                      /* VK_INNER of a host step: lives in host memory (device plans) */
    bool device_read;                  /* VK_INPUT: a device step hands it to a launch (not only a shape read) */
    struct epabi_tensor tensor;        /* VK_CONST: the plan-owned copy (data on the device, host kept) */
    int decl_rank;                     /* the shape the graph declares (-1: unknown; a dim of -1 is symbolic) */
    int64_t decl_dims[EPABI_MAX_RANK];
    int32_t decl_sym[EPABI_MAX_RANK];  /* per declared dim: its symbol (1 + its sym_names index); 0: static, unnamed */
};

struct plan_step {
    const struct epabi_kernel* kernel;
    void* state;
    char* node_name;                   /* owned */
    char* op_type;                     /* owned */
    int n_in, n_out;
    int in[EPABI_MAX_NODE_IO];         /* value ids; -1 for an absent optional input */
    int out[EPABI_MAX_NODE_IO];
    int* frees;                        /* intermediates whose last reader is this step (owned) */
    int n_frees;
    bool on_host;                      /* device plans: a host step (plan.h) */
    bool view;                         /* its output 0 may be its input 0's bytes (epabi_plan_mark_views) */
    int epilogue;                      /* enum epabi_epilogue: an activation fused into this step (fuse_epilogues) */
    float epilogue_alpha, epilogue_beta;   /* its parameters (kernel.h, epilogue_params) */
    struct epabi_error_site site;      /* what its launches report errors as (set once the build is done) */
};

struct epabi_plan {
    const struct epabi_api* api;
    struct epabi_arena* arena;         /* one reference */
    bool has_device;
    bool device_only;                  /* has_device and the host cannot read the device's memory (CUDA) */
    struct epabi_plan_device device;   /* has_device only */
    int n_host_steps;
    int n_fused;                       /* activation steps folded into their producer (a SiLU's two count two) */
    int n_linear;                      /* linear steps (kernels/linear.h) */
    int n_linear_folded;               /* bias Adds and activations folded into them */
    int n_chains;                      /* elementwise chain steps (kernels/chain.h) */
    int n_chain_nodes;                 /* the steps fused into them */
    int n_onehot;                      /* one-hot lookup steps (kernels/onehot.h) */
    int n_views;                       /* steps allowed to hand out a view (epabi_plan_mark_views) */
    int n_moments;                     /* moments steps (kernels/moments.h), each a ReduceSum pair and its Mul */
    int n_softmax;                     /* fused softmax steps (kernels/softmax_rows.h) */
    int n_nodes;                       /* ONNX nodes of the fused graph */
    char* name;                        /* owned */
    struct plan_value* values;
    int n_values, cap_values;
    struct plan_step* steps;
    int n_steps;
    int n_inputs;
    int* input_values;                 /* kernel-context input index -> value id */
    int n_outputs;
    int* output_values;                /* kernel-context output index -> value id */
    /* build-time name index: open addressing over value ids, -1 = empty */
    int* index;
    size_t index_cap;
    /* the declared dims' symbols (dim_param), interned at build time so that a value's decl_sym compares as ids:
     * two dims of one id are one symbol of the graph (owned strings) */
    char** sym_names;
    int n_syms, cap_syms;
};

/* ---- shared by the builder and its passes ------------------------------------------------------------ */

/* The ORT_FAIL status for running out of memory while building p; `what` names the structure. plan_build.c. */
OrtStatus* epabi_plan_oom(const struct epabi_plan* p, const char* what);

/* A new plan-owned constant (name, dtype, shape and data copied; uploaded on device plans), for a pass that derives
 * one at build; its value id in *id_out. Errors as for the graph's constants. plan_build.c. */
OrtStatus* epabi_plan_add_constant(struct epabi_plan* p, const char* name, ONNXTensorElementDataType dtype, int rank,
                                   const int64_t* dims, const void* data, int* id_out);
/* Erases step si (its state and names freed), keeping the producer indices of later steps' values right; values it
 * produced must have been given another producer first. plan_passes.c. */
void epabi_plan_erase_step(struct epabi_plan* p, int si);
/* Erases step ri, whose outputs step `into` now stands for (their producer); `into`'s index afterwards. plan_passes.c. */
int epabi_plan_drop_into(struct epabi_plan* p, int ri, int into);
/* How many input slots of all steps read value v. plan_passes.c. */
int epabi_plan_readers(const struct epabi_plan* p, int v);
/* The step reading value v when exactly one input slot of one step reads it and v may vanish into a fused step (an
 * intermediate, no fused output); -1 otherwise, *slot the input index. plan_passes.c. */
int epabi_plan_sole_reader(const struct epabi_plan* p, int v, int* slot);

/* The passes epabi_plan_build runs once every step and value is in, in this order: */
OrtStatus* epabi_plan_fuse_onehot(struct epabi_plan* p);   /* plan_onehot.c; when the build asks for fuse_linear */
OrtStatus* epabi_plan_fuse_linear(struct epabi_plan* p);   /* plan_passes.c from here; when it asks for fuse_linear */
void epabi_plan_fuse_epilogues(struct epabi_plan* p);
/* ReduceSum(X) + ReduceSum(Mul(X, X)) pairs into moments steps (plan_moments.c), before the schedule. */
OrtStatus* epabi_plan_fuse_moments(struct epabi_plan* p);
/* Expanded last-axis softmaxes into fused softmax steps (plan_softmax.c), before the schedule. */
OrtStatus* epabi_plan_fuse_softmax(struct epabi_plan* p);
OrtStatus* epabi_plan_schedule(struct epabi_plan* p);
void epabi_plan_place_steps(struct epabi_plan* p);       /* device plans the host cannot read (device_only) */
/* Elementwise chains (plan_chains.c), on the scheduled and placed plan; schedules and places again when it fused. */
OrtStatus* epabi_plan_fuse_chains(struct epabi_plan* p);
void epabi_plan_mark_device_reads(struct epabi_plan* p); /* device plans (has_device) */
/* Which steps may alias their output to their input (zero-copy views), and the frees that makes right. Last. */
OrtStatus* epabi_plan_mark_views(struct epabi_plan* p);

#endif
