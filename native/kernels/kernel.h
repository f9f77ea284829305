/*
 * kernel.h - the contract between the executor (plan.c) and the software-adapter kernels.
 *
 * A kernel is one table entry (registry.c) implementing one ONNX op for an opset range:
 *   supports()  at GetCapability: may this kernel compute this node correctly? (dtypes, attributes,
 *               constant inputs). On "no" it writes a short reason, which the EP logs at INFO.
 *   init()      at Compile: parse attributes (and constant inputs) into a private state.
 *   run()       per run: derive output shapes from the input shapes (in[i] is NULL for an absent
 *               optional input), get output buffers with
 *               epabi_exec_output(), then hand the work to epabi_exec_launch(). run() itself never
 *               touches input or output *data* except through a launch, so that a captured run can be
 *               replayed from the recorded launches alone (graph capture on the host stream). The one
 *               exception: run() may read small inputs that decide output *shapes* (Reshape's
 *               shape, Expand's shape, Slice's starts/ends/axes/steps, axes inputs, Pad's pads, Tile's
 *               repeats, Split's split; also the floats of Resize's scales and Range's start/limit/delta,
 *               which fix the output's size), and validate
 *               integer inputs whose bad values are errors (Gather indices, integer divisors) so that
 *               bad input is an error, not wrong numbers (a device backend will need a device-side check);
 *               those must be host-readable, as ORT's ALLOW_CPU_FOR_SHAPES placement guarantees on devices.
 *   release()   frees the state.
 * Thread-safety: init/release run under the EP's compile; run() may run on several threads at once for
 * one state (concurrent runs), so run() must treat the state as read-only.
 */
#ifndef EPABI_KERNEL_H
#define EPABI_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"

#include "launch_args.h"

/* A dense, row-major tensor. dims[0..rank) are >= 0; rank 0 is a scalar (one element). */
struct epabi_tensor {
    ONNXTensorElementDataType dtype;
    int rank;
    int64_t dims[EPABI_MAX_RANK];
    void* data;          /* in the memory of the stream's device */
    const void* host;    /* the same values in host memory, or NULL when only the device has them */
};

/* What GetCapability and Compile know about a node, read once through the OrtApi graph accessors.
 * Absent optional inputs have dtype UNDEFINED. rank = -1 when the shape is unknown; a dim of -1 is
 * symbolic. const_data is non-NULL for constant initializers, empty ones included (valid until the node's
 * Compile returns; init() must copy what it keeps). */
struct epabi_value_desc {
    const char* name;
    ONNXTensorElementDataType dtype;
    int rank;
    int64_t dims[EPABI_MAX_RANK];
    /* each dim's symbol (dim_param) where dims[] is -1, borrowed like name; "" where static or unnamed, and NULL
     * in descriptions built without a host graph */
    const char* dim_names[EPABI_MAX_RANK];
    const void* const_data;
    size_t const_count;        /* elements in const_data */
};

struct epabi_node {
    const struct epabi_api* api;
    const OrtNode* ort;        /* for attribute reads (epabi_attr_*) */
    const char* name;
    const char* op_type;
    const char* domain;        /* "" for the default ONNX domain */
    int since_version;
    int n_in, n_out;
    struct epabi_value_desc in[EPABI_MAX_NODE_IO];
    struct epabi_value_desc out[EPABI_MAX_NODE_IO];
};

/* Attribute readers: return true when the attribute is present and of that type; one without a value reads as
 * 0 (the protobuf default), as in ORT's CPU kernels. */
bool epabi_attr_int(const struct epabi_node* node, const char* name, int64_t* out);
bool epabi_attr_float(const struct epabi_node* node, const char* name, float* out);
/* Copies up to cap values; *count receives the attribute's length (may exceed cap). */
bool epabi_attr_ints(const struct epabi_node* node, const char* name, int64_t* out, size_t cap, size_t* count);
bool epabi_attr_floats(const struct epabi_node* node, const char* name, float* out, size_t cap, size_t* count);
/* Copies into buf (NUL-terminated, truncated to cap). */
bool epabi_attr_string(const struct epabi_node* node, const char* name, char* buf, size_t cap);
/* True when the node has an attribute of that name (any type). */
bool epabi_attr_has(const struct epabi_node* node, const char* name);
/* A tensor attribute (ConstantOfShape's value): its dtype and element count, and up to cap bytes of its data
 * copied into out. False when absent, not a tensor, or unreadable. */
bool epabi_attr_tensor(const struct epabi_node* node, const char* name, ONNXTensorElementDataType* dtype, void* out,
                       size_t cap, size_t* count);

/* The run context the executor passes to run(). Opaque to kernels. */
struct epabi_exec;

/* The output tensor `index` with this dtype and shape, backed by a buffer of the right size (the
 * session's output OrtValue, or an arena buffer for values used only inside the fused node).
 * Returns NULL and sets *status on failure (allocation, index out of range). */
struct epabi_tensor* epabi_exec_output(struct epabi_exec* ex, int index, ONNXTensorElementDataType dtype, int rank,
                                       const int64_t* dims, OrtStatus** status);

/* Output `index` holding exactly the bytes of src, the tensor run() got as input 0, under the shape rank/dims (same
 * dtype, same byte count: a reshape, or an Expand or Slice that moves no element). When the plan let this step alias
 * (the kernel's views_input, and the conditions of plan_internal.h's epabi_plan_mark_views: output 0 no fused output,
 * its source on the step's side), the output's data and host pointer are src's, it takes no memory and nothing need
 * be launched: *is_view = true. Otherwise (a fused output, another input, index != 0) it is epabi_exec_output's buffer,
 * *is_view = false, and the caller copies the bytes. The view is read-only, like every input. Errors: those of
 * epabi_exec_output; ORT_EP_FAIL when the shape's bytes differ from src's. */
struct epabi_tensor* epabi_exec_output_view(struct epabi_exec* ex, int index, const struct epabi_tensor* src, int rank,
                                            const int64_t* dims, bool* is_view, OrtStatus** status);

/* Scratch memory valid until the end of the run (arena-backed). NULL + *status on failure. */
void* epabi_exec_scratch(struct epabi_exec* ex, size_t bytes, OrtStatus** status);

/* Runs fn(args) on the device stream. args is copied (args_size bytes), so callers may pass a stack
 * struct. Pointers inside it may point only at tensor data, scratch, the kernel state or the pool of
 * epabi_exec_pool, never at run()'s stack or at the epabi_tensor structs: a graph capture records the copy and
 * replays it after run() has returned, and the executor keeps exactly those buffers alive for the captured graph
 * (stream.h). A launch function may spread its work over that pool; it returns when all of it is done. */
typedef void (*epabi_launch_fn)(const void* args);
OrtStatus* epabi_exec_launch(struct epabi_exec* ex, enum epabi_launch_kind kind, epabi_launch_fn fn, const void* args,
                             size_t args_size);

/* Host-readable data of an input whose values decide shapes (Reshape's shape, Slice's starts..., Expand's
 * shape, axes inputs): the tensor's own data on the host backend, a host copy for constants and for values
 * computed on the host (plan.h, host steps), else (device memory) a copy read after waiting for the stream,
 * valid until the run ends. Errors: ORT_FAIL while capturing a graph, where no host synchronization may
 * happen (naming the node), or when the copy fails. */
const void* epabi_exec_host_data(struct epabi_exec* ex, const struct epabi_tensor* t, OrtStatus** status);

/* The epilogue (launch_args.h, epilogue.h) the plan fused into the running step, EPABI_EPILOGUE_NONE if none; a
 * kernel the plan fuses into (elementwise arithmetic, Conv) passes it to its launch, with its parameters
 * (LeakyRelu's alpha, HardSigmoid's alpha and beta; 0 for the others). */
int epabi_exec_epilogue(const struct epabi_exec* ex);
void epabi_exec_epilogue_params(const struct epabi_exec* ex, float* alpha, float* beta);

/* The EP's intra-op thread pool (thread_pool.h) for launches that spread their work, NULL when launches run on
 * one thread (device backends, host steps). It outlives the run and every graph the EP captures. */
struct epabi_pool* epabi_exec_pool(const struct epabi_exec* ex);

/* The API block, for error statuses: epabi_error(epabi_exec_api(ex), ...). */
const struct epabi_api* epabi_exec_api(const struct epabi_exec* ex);

/* Errors a launch finds in its data while it runs (launch_args.h: err_word, err_site): the word it reports to (the
 * run's stream's, or the executor's own when launches execute at once; read when the run's work is done) and the
 * running step's site with the error's kind. A kernel puts both into its launch block; its launch function calls
 * epabi_launch_report when the data is bad (any thread may; the last store wins). */
uint64_t* epabi_exec_error_word(struct epabi_exec* ex);
uint64_t epabi_exec_error_site(const struct epabi_exec* ex, enum epabi_launch_error kind);
static inline void epabi_launch_report(uint64_t* word, uint64_t site) {
    if (word != NULL) __atomic_store_n(word, site, __ATOMIC_RELAXED);
}

struct epabi_linear_lead;   /* linear.h */
struct epabi_reduce_spec;   /* reduce.h */

/* Everything the rest of the plugin knows about an op is on its descriptor; nothing outside native/kernels/
 * keys on op names. */
struct epabi_kernel {
    const char* op_type;       /* default ONNX domain only */
    int since_min, since_max;  /* opset versions of the op this kernel implements, inclusive */
    bool (*supports)(const struct epabi_node* node, char* why, size_t why_len);
    OrtStatus* (*init)(const struct epabi_node* node, void** state);      /* NULL: stateless */
    void (*release)(void* state);                                          /* NULL: nothing to free */
    OrtStatus* (*run)(struct epabi_exec* ex, const void* state, const struct epabi_tensor* const* in, int n_in,
                      int n_out);
    enum epabi_launch_kind launch;   /* the kind its run() hands to epabi_exec_launch */
    /* Bit i set: run() reads input i's values on the host (through epabi_exec_host_data) and never hands it
     * to a launch: shape inputs (Reshape's shape, Slice's starts/ends/axes/steps, axes inputs). The executor
     * keeps such values in host memory on devices. */
    uint32_t host_inputs;
    bool host_step;            /* a device plan may run it on the host when only host inputs read its outputs (plan.h) */
    /* Its output 0 may be its input 0's bytes under another shape: run() asks for it with epabi_exec_output_view when
     * the bytes are the same (always for Reshape and its kin; Expand and Slice when they move no element). */
    bool views_input;
    /* Bit k set (EPABI_EPILOGUE_BIT(k)): its launch applies epilogue k that the plan fused in (epabi_exec_epilogue),
     * on the host and in its CUDA kernels alike. */
    uint32_t epilogues;
    enum epabi_epilogue as_epilogue;   /* the epilogue it becomes when fused into its producer; NONE: never */
    /* The epilogue's parameters from this kernel's init() state (LeakyRelu's alpha...); NULL: it has none. */
    void (*epilogue_params)(const void* state, float* alpha, float* beta);
    /* The epilogue that "X times this activation of X" is (Sigmoid: SILU); NONE: none. */
    enum epabi_epilogue times_input;
    bool product;              /* its output is the elementwise product of its two inputs (Mul) */
    /* GetCapability on a GPU device, after supports() said yes: may the CUDA kernels of its launch kind compute
     * this node? (dtypes, attributes; cuda_coverage.h has the shared tests.) On "no" it writes a short reason.
     * NULL: the op has no CUDA kernel, and a GPU device does not claim it. */
    bool (*cuda)(const struct epabi_node* node, char* why, size_t why_len);
    /* Linear steps (linear.h: a MatMul or Gemm, a bias Add, an activation, fused by the plan into one launch).
     * linear_lead: MatMul and Gemm; fills *out from the node's state and says whether the node may lead one.
     * linear_bias: an Add the plan may fold into the linear step before it (its other operand a constant bias).
     * linear_activation: Relu, Sigmoid, Tanh, Gelu; the enum un_op the linear step applies for the node, from its
     * state, or -1. NULL / false: the op takes no part. */
    bool (*linear_lead)(const void* state, struct epabi_linear_lead* out);
    bool linear_bias;
    int32_t (*linear_activation)(const void* state);
    /* Elementwise chains (chain.h): on float32 data, the link this node is in a fused chain: kind, op, alpha and beta
     * of *out from its state and its constant inputs (in[j]: NULL when absent; host NULL when not a constant); the
     * plan fills the operands. Input 0 (and 1 of a binary link) are the operands; any others must be constants the
     * link consumed (Clip's bounds). NULL / false: the node is never one. */
    bool (*chain_link)(const void* state, const struct epabi_tensor* const* in, int n_in, struct chain_op* out);
    /* One-hot lookups (onehot.h: Equal, Cast to float, a MatMul by a constant and a bias Add, fused by the plan).
     * onehot_compare: its bool output is the elementwise equality of its two inputs, broadcast (Equal).
     * cast_to: the dtype its output holds its one input's values converted to, from its state (Cast's `to`).
     * NULL / false: the op takes no part. */
    bool onehot_compare;
    ONNXTensorElementDataType (*cast_to)(const void* state);
    /* Reduce* nodes: their attributes from the state (reduce.h), so the plan can pair ReduceSum(X) with
     * ReduceSum(X * X) over the same axes into one moments step (moments.h). NULL: the op is no reduction. */
    const struct epabi_reduce_spec* (*reduce_spec)(const void* state);
    /* Views whose output shape follows from input 0's shape and the n int values of input 1 alone (Reshape, Expand):
     * that shape into *out_rank, out_dims[EPABI_MAX_RANK], or the error the kernel's run() reports for them, so the
     * fused softmax step (softmax_rows.h) can replay the views it swallowed. NULL: not such a view. */
    OrtStatus* (*view_dims)(const struct epabi_api* api, const void* state, int rank, const int64_t* dims,
                            const int64_t* req, int n, int* out_rank, int64_t* out_dims);
};

#define EPABI_EPILOGUE_BIT(kind) (1u << (kind))
/* Every epilogue kind of launch_args.h. */
#define EPABI_EPILOGUES_ALL (EPABI_EPILOGUE_BIT(EPABI_EPILOGUE_KIND_COUNT) - 2u)

/* Lookup by op type and opset version; NULL when no kernel covers them. registry.c. */
const struct epabi_kernel* epabi_kernel_find(const char* op_type, int since_version);

/* ---- helpers shared by kernels (tensor_util.c) ------------------------------------------------- */

size_t epabi_dtype_size(ONNXTensorElementDataType dtype);       /* 0 for unsupported dtypes */
const char* epabi_dtype_name(ONNXTensorElementDataType dtype);
int64_t epabi_numel(int rank, const int64_t* dims);
/* Numpy-style broadcast of two shapes; false (and *out_rank untouched) when incompatible. */
bool epabi_broadcast_shape(int ra, const int64_t* a, int rb, const int64_t* b, int* out_rank, int64_t* out);
/* True for the dtypes of index and shape inputs (int32, int64). */
bool epabi_is_index_dtype(ONNXTensorElementDataType dtype);
/* Element i of an int32 or int64 buffer, widened to int64 (the caller checked epabi_is_index_dtype). */
int64_t epabi_index_at(ONNXTensorElementDataType dtype, const void* data, int64_t i);
/* Normalizes an axis in [-rank, rank) to [0, rank); false when out of range. */
bool epabi_norm_axis(int64_t axis, int rank, int* out);
/* True for float, double and the eight integer widths (int8 .. uint64): ONNX's numeric tensor types that the
 * comparison, Mod and Clip kernels take. */
bool epabi_is_numeric_dtype(ONNXTensorElementDataType dtype);

#endif
