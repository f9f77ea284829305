/*
 * launch_args.h - the argument blocks of every kernel launch, shared by the C kernels (the kernels/ C files), the
 * executor and the CUDA backend, which compiles this very header with NVRTC (cuda/cuda_kernels.cu), so a
 * block has one layout on both sides of the launch.
 *
 * A kernel's run() fills one block and hands it to epabi_exec_launch together with its kind and its host
 * function; the host stream calls the host function, the CUDA stream looks the kind up in its launcher
 * table (cuda/cuda_launch.c). Pointers inside a block are tensor data or scratch in the memory of the
 * stream's device: host memory on the software adapter, device memory on CUDA.
 *
 * Layout rules (both compilers must agree): fixed-width integers, size_t (64-bit on every platform we build
 * for), 32-bit enums, bool (1 byte), pointers (64-bit). No bit fields.
 */
#ifndef EPABI_LAUNCH_ARGS_H
#define EPABI_LAUNCH_ARGS_H

#if defined(__CUDACC_RTC__)
/* NVRTC has no C library headers: the few types the blocks use. */
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef int ONNXTensorElementDataType;
/* ONNXTensorElementDataType values for NVRTC, which cannot read ort_abi.h; tools/check_nvrtc.py (a test) checks
 * each against ort_abi.h */
enum {
    ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED = 0, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT = 1,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8 = 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 = 3,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16 = 4, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16 = 5,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 = 6, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 = 7,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL = 9, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 = 10,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE = 11, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32 = 12,
    ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64 = 13
};
#else
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
_Static_assert(sizeof(size_t) == 8 && sizeof(void*) == 8, "launch blocks assume a 64-bit target");
#endif

enum { EPABI_MAX_RANK = 8, EPABI_MAX_NODE_IO = 64 };

/* The software adapter's intra-op thread pool (kernels/thread_pool.h); opaque here, NULL on device backends. */
struct epabi_pool;

/* What a launch does and the block it takes: X(KIND, stem, block) for EPABI_LAUNCH_<KIND> with struct <block>.
 * One list generates the enum below and the CUDA backend's launcher table (cuda/cuda_launch.c), whose entry for a
 * kind is epabi_cuda_launch_<stem> taking a struct <block>: a kind without such a launcher does not compile. */
#define EPABI_LAUNCH_KINDS(X)                                  \
    X(ELEMENTWISE, elementwise, ew_args)                       \
    X(UNARY, unary, un_args)                                   \
    X(CAST, cast, cast_args)                                   \
    X(COPY, copy, copy_args)                                   \
    X(STRIDED_COPY, strided_copy, epabi_strided_copy)          \
    X(CONCAT, concat, concat_args)                             \
    X(GATHER, gather, gather_args)                             \
    X(SHAPE, shape, shape_args)                                \
    X(MATMUL, matmul, matmul_launch)                           \
    X(GEMM, gemm, gemm_launch)                                 \
    X(LINEAR, linear, linear_launch)                           \
    X(CONV, conv, conv_launch)                                 \
    X(LAYERNORM, layernorm, layernorm_launch)                  \
    X(GLOBAL_MAXPOOL, gmaxpool, gmaxpool_launch)               \
    X(REDUCE, reduce, reduce_launch)                           \
    X(MOMENTS, moments, moments_launch)                        \
    X(SOFTMAX, softmax, softmax_launch)                        \
    X(SOFTMAX_ROWS, softmax_rows, softmax_rows_launch)         \
    X(POOL, pool, pool_launch)                                 \
    X(GLOBAL_AVGPOOL, gavgpool, gavgpool_launch)              \
    X(BATCHNORM, batchnorm, batchnorm_launch)                  \
    X(INSTANCENORM, instancenorm, instancenorm_launch)        \
    X(CONV_TRANSPOSE, conv_transpose, convt_launch)            \
    X(LSTM, lstm, lstm_launch)                                 \
    X(PAD, pad, pad_args)                                      \
    X(FILL, fill, fill_args)                                   \
    X(RANGE, range, range_args)                                \
    X(ARGREDUCE, argreduce, argreduce_args)                    \
    X(RESIZE, resize, resize_args)                            \
    X(CHAIN, chain, chain_args)                                \
    X(ONEHOT, onehot, onehot_args)

enum epabi_launch_kind {
#define EPABI_LAUNCH_ENUM_(kind, stem, block) EPABI_LAUNCH_##kind,
    EPABI_LAUNCH_KINDS(EPABI_LAUNCH_ENUM_)
#undef EPABI_LAUNCH_ENUM_
    EPABI_LAUNCH_KIND_COUNT
};

/* OP_MOD: the remainder with the divisor's sign (Mod fmod=0: Python's % on integers, A - floor(A/B)*B on floats);
 * OP_FMOD: the remainder with the dividend's sign (Mod fmod=1, C's fmod and %). The comparisons and And/Or have a
 * bool output. */
enum ew_op { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_MAX, OP_MIN, OP_EQUAL, OP_WHERE, OP_COPY,
             OP_MOD, OP_FMOD, OP_LESS, OP_GREATER, OP_LESS_EQUAL, OP_GREATER_EQUAL, OP_AND, OP_OR };

/* Errors a launch finds in the data while it runs (a device, or a graph replay, where no host code looks at the
 * data first): it stores err_site | the kind into *err_word (stream.h), and the stream's next synchronize turns it
 * into an ORT_INVALID_ARGUMENT naming the node. err_site is the node's site (an 8-aligned address, so the low bits
 * carry the kind); err_word NULL: nothing is reported. */
enum epabi_launch_error { EPABI_LAUNCH_ERR_INDEX = 1, EPABI_LAUNCH_ERR_DIV_ZERO = 2, EPABI_LAUNCH_ERR_MASK = 7 };

/* What a launch applies to each result before storing it (a node the plan fused into its producer; epilogue.h has
 * the formulas). A kernel descriptor's `epilogues` mask has bit k set for the kinds k its launch applies. */
enum epabi_epilogue {
    EPABI_EPILOGUE_NONE = 0, EPABI_EPILOGUE_RELU = 1, EPABI_EPILOGUE_SIGMOID = 2, EPABI_EPILOGUE_SILU = 3,
    EPABI_EPILOGUE_TANH = 4, EPABI_EPILOGUE_LEAKY_RELU = 5, EPABI_EPILOGUE_HARD_SIGMOID = 6,
    EPABI_EPILOGUE_HARD_SWISH = 7, EPABI_EPILOGUE_KIND_COUNT
};

/* Operands in output index space: strides are in elements, 0 along broadcast dimensions. */
struct ew_args {
    enum ew_op op;
    ONNXTensorElementDataType dtype;    /* of operand 0 (of operand 1 for Where) */
    ONNXTensorElementDataType dtype1;   /* of operand 1 (Pow's exponent) */
    int rank;                           /* >= 1: a scalar runs as shape [1] */
    int64_t dims[EPABI_MAX_RANK];
    int n_ops;
    int64_t strides[3][EPABI_MAX_RANK];
    const void* in[3];
    size_t esize[3];
    void* out;
    size_t out_esize;
    int32_t epilogue;                   /* enum epabi_epilogue; float and double Add/Sub/Mul/Div/Max/Min only */
    int32_t pad_;
    uint64_t* err_word;                 /* integer Div/Mod by zero (enum epabi_launch_error) */
    uint64_t err_site;
    struct epabi_pool* pool;            /* the software adapter's pool for long runs (elementwise.c); NULL on devices */
};

/* UN_SILU (x * sigmoid(x)) is no ONNX op: the CUDA backend applies a Conv's fused SiLU epilogue with it. */
enum un_op { UN_SQRT, UN_RECIPROCAL, UN_EXP, UN_ERF, UN_TANH, UN_RELU, UN_SIGMOID, UN_ABS,
             UN_NEG, UN_FLOOR, UN_CEIL, UN_ROUND, UN_LOG, UN_SIN, UN_COS, UN_SIGN, UN_NOT, UN_CLIP,
             UN_HARD_SIGMOID, UN_HARD_SWISH, UN_LEAKY_RELU, UN_GELU, UN_GELU_TANH, UN_SILU };

struct un_args {
    enum un_op op;
    ONNXTensorElementDataType dtype;
    const void* in;
    void* out;
    int64_t n;
    /* Clip: its min and max tensors (one element of dtype); NULL: the bound is alpha (min) or beta (max) on
     * float and double, the dtype's limit on integers */
    const void* lo;
    const void* hi;
    double alpha, beta;   /* LeakyRelu alpha; HardSigmoid alpha, beta; Clip's bounds without a tensor */
    struct epabi_pool* pool;   /* the software adapter's pool for long runs (unary.c); NULL on devices */
};

struct cast_args {
    ONNXTensorElementDataType from, to;
    const void* in;
    void* out;
    int64_t n;
    struct epabi_pool* pool;   /* the software adapter's pool for long runs (cast.c); NULL on devices */
};

struct copy_args {
    const void* src;
    void* dst;
    size_t bytes;
    struct epabi_pool* pool;   /* the software adapter's pool for large copies; NULL on devices */
};

struct epabi_strided_copy {
    const unsigned char* src;   /* the first element of the view */
    unsigned char* dst;
    size_t elsize;
    int rank;
    int64_t dims[EPABI_MAX_RANK];
    int64_t strides[EPABI_MAX_RANK];
    struct epabi_pool* pool;    /* the software adapter's pool (rows spread over it); NULL on devices */
};

struct concat_args {
    unsigned char* dst;
    int64_t outer;
    int n;
    const unsigned char* src[EPABI_MAX_NODE_IO];
    size_t row_bytes[EPABI_MAX_NODE_IO];      /* one input's block per outer index */
    struct epabi_pool* pool;                  /* the software adapter's pool (blocks spread over it); NULL on devices */
};

struct gather_args {
    const unsigned char* src;
    const void* indices;
    bool indices64;
    unsigned char* dst;
    int64_t outer;
    int64_t n_indices;
    int64_t axis_dim;
    size_t block_bytes;             /* one index's slice: the inner dims */
    uint64_t* err_word;             /* an index outside [-axis_dim, axis_dim) (enum epabi_launch_error) */
    uint64_t err_site;
};

struct shape_args {
    int64_t* dst;
    int n;
    int64_t dims[EPABI_MAX_RANK];
};

struct matmul_launch {
    const float* a;
    const float* b;
    float* y;
    float* pack;
    int64_t m, n, k;
    int batch_rank;                         /* 0 when the batch is folded into m or absent */
    int64_t batch[EPABI_MAX_RANK];
    int64_t a_stride[EPABI_MAX_RANK];       /* elements between consecutive batch entries; 0 = broadcast */
    int64_t b_stride[EPABI_MAX_RANK];
    struct epabi_pool* pool;                /* NULL: one thread; pack then holds one thread's share */
};

struct gemm_launch {
    const float* a;
    const float* b;
    const float* c;        /* NULL: no C term */
    float* y;
    float* pack;
    bool trans_a, trans_b;
    int64_t m, n, k, lda, ldb;
    float alpha, beta;
    int64_t c_rows, c_cols;   /* C's extent after left-padding to rank 2: each 1 (broadcast) or M / N */
    struct epabi_pool* pool;  /* NULL: one thread; pack then holds one thread's share */
};

/* Which CUDA kernels a linear step (kernels/linear.h) runs, chosen when the plan is built from its static extents
 * (epabi_linear_path); the software adapter ignores it:
 *   BLAS    cuBLASLt with a bias/ReLU epilogue when it fits (one kernel), else a GEMM (cuBLAS, or epabi's sgemm_f32)
 *           and one bias + activation kernel;
 *   SMALL   epabi's small-GEMM kernel (linear_nn_R / linear_nt_R): the whole group in one launch-bound kernel;
 *   SMALL_IF_FEW_ROWS  M was unknown at build (a symbolic batch): SMALL when the run's m <= EPABI_LINEAR_SMALL_ROWS,
 *           else BLAS. */
enum linear_path { LINEAR_PATH_BLAS = 0, LINEAR_PATH_SMALL = 1, LINEAR_PATH_SMALL_IF_FEW_ROWS = 2 };

/* The small kernel's limits: rows of A per block (a register tile), and the weights it streams. Above them one
 * block per 32 (8 with transB) columns no longer fills the GPU or its registers, and a BLAS GEMM is faster. */
enum {
    EPABI_LINEAR_SMALL_ROWS = 16,
    EPABI_LINEAR_SMALL_K = 4096,
    EPABI_LINEAR_SMALL_N = 4096,
    EPABI_LINEAR_SMALL_WEIGHTS = 1 << 20,  /* K * N */
    /* its geometry (cuda_kernels.cu and its launcher): 256 threads in 8 warps; without transB a block takes 32
     * columns, one per lane, and the 8 warps split K; with transB a warp takes a column and its lanes split K;
     * A is staged through shared memory 256 of K at a time */
    EPABI_LINEAR_THREADS = 256,
    EPABI_LINEAR_NN_COLS = 32,
    EPABI_LINEAR_NT_COLS = 8,
    EPABI_LINEAR_KC = 256
};

/* A linear step: Y[i,j] = act(alpha * sum_p op(A)[i,p] op(B)[p,j] + beta * C[i or 0, j or 0]), row-major;
 * op(A) is A [m,k] (lda per row) or, with trans_a, A^T of A [k,m]; op(B) likewise of B [k,n] or [n,k]. */
struct linear_launch {
    const float* a;
    const float* b;
    const float* c;             /* NULL: no C term (no bias, no C, or beta == 0) */
    float* y;
    float* pack;                /* host: the GEMM's packing scratch */
    bool trans_a, trans_b;
    int32_t activation;         /* enum un_op (UN_RELU, UN_SIGMOID, UN_TANH, UN_GELU, UN_GELU_TANH), -1: none */
    int32_t path;               /* enum linear_path */
    int32_t weights_const;      /* 1: B and C are plan constants (written at Compile), so the CUDA kernel reads them
                                 * before it waits for the kernel before it (programmatic dependent launch) */
    int64_t m, n, k, lda, ldb;
    float alpha, beta;
    int64_t c_rows, c_cols;     /* C's extent after left-padding to rank 2: each 1 (broadcast) or m / n */
    struct epabi_pool* pool;    /* NULL: one thread; pack then holds one thread's share */
};

enum conv_path {
    CONV_GEMM_X,       /* 1x1, stride 1, no padding: X itself is the column matrix */
    CONV_GEMM_COLS,    /* im2col, a tile of output positions at a time, then one product per tile */
    CONV_PER_CHANNEL,  /* one input channel per group (depthwise): shifted multiply-adds, no product */
    CONV_PACKED        /* host, AVX-512: implicit GEMM over packed weights (kernels/conv_packed.h) */
};

struct conv_launch {
    const float* x;
    const float* w;
    const float* bias;             /* NULL: none */
    float* y;
    float* col;                    /* CONV_GEMM_COLS only */
    float* pack;                   /* CONV_GEMM_* only */
    enum conv_path path;
    int64_t n, c, h, wd, m, group, cg, mg;
    int64_t kh, kw, sh, sw, dh, dw, ph, pw, oh, ow;
    int64_t tile;                  /* output positions per column tile */
    struct epabi_pool* pool;       /* NULL: one thread (device backends); else col and pack hold one share per
                                    * pool thread, and the (image, group, tile) tasks spread over the pool */
    const float* wpack;            /* CONV_PACKED: W in panels (the kernel state's); NULL: packed into work */
    float* work;                   /* CONV_PACKED: epabi_convp_scratch_bytes of scratch */
    int32_t epilogue;              /* enum epabi_epilogue applied after the bias, on every path */
    float ep_alpha, ep_beta;       /* its parameters (epilogue.h) */
    int32_t pad_;
};

struct ln_operand {
    const float* data;                 /* NULL: absent (B only) */
    bool in_place;                     /* varies contiguously over all normalized dims: read a row in place */
    bool per_row;                      /* varies along some leading (pre-axis) dim */
    int64_t strides[EPABI_MAX_RANK];   /* aligned to X's dims, in elements; 0 where broadcast */
};

struct layernorm_launch {
    const float* x;
    float* y;
    float* mean;                       /* NULL: not requested */
    float* inv;
    float* rowbuf;                     /* 2 * norm floats for rebuilt Scale / B rows, or NULL */
    int rank, axis;
    int64_t dims[EPABI_MAX_RANK];
    int64_t rows, norm;
    float epsilon;
    struct ln_operand op[2];           /* Scale, B */
};

struct gmaxpool_launch {
    const float* x;
    float* y;
    int64_t planes;   /* N * C */
    int64_t size;     /* spatial positions per plane, >= 1 */
    struct epabi_pool* pool;   /* the software adapter's pool (planes spread over it); NULL on devices */
};

enum reduce_op { REDUCE_SUM, REDUCE_MEAN, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD, REDUCE_L2 };

struct reduce_launch {
    const float* x;
    float* y;
    double* acc;                     /* out_numel sums (SUM, MEAN, L2: of squares) or products (PROD) */
    enum reduce_op op;
    bool copy;                       /* noop_with_empty_axes with no axes: Y = X */
    int rank;                        /* merged axes, >= 1 */
    int64_t dims[EPABI_MAX_RANK];
    bool reduced[EPABI_MAX_RANK];
    int64_t in_numel, out_numel, count;   /* count: input elements per output element */
};

/* ReduceSum(X) and ReduceSum(X * X) over the same axes in one pass (kernels/moments.h): r is the ReduceSum's block
 * (op REDUCE_SUM, y receiving the sums; on the host acc holds 2 * out_numel doubles, the sums then the sums of
 * squares); sumsq receives the sums of (float)(x * x), out_numel floats (in_numel with r.copy, where it is x * x). */
struct moments_launch {
    struct reduce_launch r;
    float* sumsq;
};

struct softmax_launch {
    const float* x;
    float* y;
    float* max;       /* inner floats of scratch (inner > 1 only) */
    float* sum;
    int64_t outer, len, inner;
};

/* An expanded softmax over rows of len floats (kernels/softmax_rows.h), per row: m = the row's max (a NaN sticks, as
 * ReduceMax), m = Max(m, floor) when has_floor (NaN if either is), e = expf(x - m), s = the sum of e in double rounded
 * to float (ReduceSum), y = e / s. */
struct softmax_rows_launch {
    const float* x;
    float* y;
    int64_t rows, len;
    float floor;
    int32_t has_floor;
};

enum pool_op { POOL_MAX, POOL_AVERAGE };

/* MaxPool / AveragePool of `planes` (N * C) planes over up to three spatial dims. A 1-D or 2-D pool fills the
 * dims past `spatial` with extent 1, kernel 1, stride 1, dilation 1 and no padding, so every launch walks three.
 * Window k of dim i starts at out_k * stride - pad_begin and has `kernel` taps `dilation` apart; taps outside
 * [0, in) are padding. */
struct pool_launch {
    const void* x;
    void* y;
    int64_t* indices;                   /* MaxPool's Indices output (int64, Y's shape), or NULL */
    ONNXTensorElementDataType dtype;    /* X's and Y's: float, double, int8, uint8 (AveragePool: float) */
    enum pool_op op;
    bool count_include_pad;             /* AveragePool: divide by the taps inside [-pad_begin, in + pad_end) */
    bool col_major;                     /* MaxPool storage_order 1: Indices count the first dim fastest */
    int32_t spatial;                    /* 1..3: the dims of the node (the Indices formula counts these) */
    int64_t planes;
    int64_t in[3], out[3], kernel[3], stride[3], dilation[3], pad_begin[3], pad_end[3];
    struct epabi_pool* pool;            /* host: planes spread over it; NULL on devices */
    float* rows;                        /* host, float MaxPool of 1-2 dims without Indices: in[0] * out[1] floats
                                         * per pool thread for the separable max (pool.c); NULL: the window loop */
};

/* GlobalAveragePool: the mean of each of `planes` (N * C) runs of `size` >= 1 floats. */
struct gavgpool_launch {
    const float* x;
    float* y;
    int64_t planes;
    int64_t size;
};

/* BatchNormalization in inference mode: X viewed as [n, c, inner]; per channel s = scale * (1 / sqrt(var +
 * epsilon)), then Y = (X - mean) * s + bias, all in float. */
struct batchnorm_launch {
    const float* x;
    const float* scale;
    const float* bias;
    const float* mean;
    const float* var;
    float* y;
    int64_t n, c, inner;
    float epsilon;
    int32_t pad_;
};

/* InstanceNormalization: `planes` (N * C) runs of `size` >= 1 floats, plane p of channel p % c; each is
 * normalized by its own mean and variance (accumulated in double): s = scale / sqrt(var + epsilon) in float,
 * Y = (X - mean) * s + bias. */
struct instancenorm_launch {
    const float* x;
    const float* scale;
    const float* bias;
    float* y;
    int64_t planes, c, size;
    float epsilon;
    int32_t pad_;
};

/* ConvTranspose, NC + up to three spatial dims (the unused ones of extent 1, kernel 1, stride 1): X [n, c, in...],
 * W [c, mg, kernel...], Y [n, m = mg * group, out...]. Input position i of channel ci adds X * W[ci, mo, k] to
 * output position o = i * stride - pad + k * dilation of channel g * mg + mo, where o lies inside [0, out). */
struct convt_launch {
    const float* x;
    const float* w;
    const float* bias;             /* NULL: none */
    float* y;
    float* col;                    /* host: mg * prod(kernel) x tile floats of scratch */
    float* pack;                   /* host: the GEMM's packing scratch, or NULL */
    int64_t n, c, m, group, cg, mg;
    int64_t in[3], out[3], kernel[3], stride[3], dilation[3], pad[3];
    int64_t tile;                  /* input positions per column tile (host) */
};

/* LSTM (layout 0, default activations, no clip, no sequence_lens): X [seq, batch, input], W [dirs, 4 * hidden,
 * input], R [dirs, 4 * hidden, hidden], gates in the order i, o, f, c. Direction d of a bidirectional LSTM runs
 * backward when d is 1; a single direction runs backward when `reverse`. Per direction: xw = X W^T (one
 * product), then per step the product H R^T and the cell update. */
struct lstm_launch {
    const float* x;
    const float* w;
    const float* r;
    const float* b;                    /* [dirs, 8 * hidden]: Wb then Rb; NULL: none */
    const float* init_h;               /* [dirs, batch, hidden]; NULL: zeros */
    const float* init_c;
    const float* p;                    /* peepholes [dirs, 3 * hidden]: i, o, f; NULL: none */
    float* y;                          /* [seq, dirs, batch, hidden]; NULL: not wired */
    float* y_h;                        /* [dirs, batch, hidden]; NULL: not wired */
    float* y_c;
    float* xw;                         /* scratch: seq * batch * 4 * hidden floats */
    float* gates;                      /* scratch: batch * 4 * hidden floats */
    float* h;                          /* scratch: batch * hidden floats each, the running state */
    float* c;
    float* pack;                       /* host: the GEMM's packing scratch, or NULL */
    int64_t seq, batch, input, hidden;
    int32_t dirs;                      /* 1 or 2 */
    bool reverse;
};

/* Pad and Tile: output element (o_0..o_r-1) reads view element (m_0..m_r-1), m_k = o_k - begin[k] mapped into
 * [0, in_dims[k]) by the mode: CONSTANT leaves an index outside as "no element" (the output gets `value`), REFLECT
 * mirrors about the first and last element (without repeating them), EDGE clamps, WRAP takes it modulo in_dims[k].
 * Tile is WRAP with begin 0. The view is the input after negative pads cropped it. */
enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

struct pad_args {
    const unsigned char* src;             /* view element (0, ..., 0); unused when the view is empty */
    unsigned char* dst;
    size_t elsize;                        /* 1, 2, 4 or 8 */
    enum pad_mode mode;
    int rank;                             /* >= 1 */
    int64_t in_dims[EPABI_MAX_RANK];      /* the view; >= 1 wherever a mode other than CONSTANT maps */
    int64_t in_strides[EPABI_MAX_RANK];   /* elements */
    int64_t out_dims[EPABI_MAX_RANK];
    int64_t begin[EPABI_MAX_RANK];        /* >= 0 */
    const unsigned char* value_src;       /* CONSTANT's element (Pad's constant_value input); NULL: value */
    uint64_t value;                       /* else the element in its first elsize bytes (memory order) */
};

/* ConstantOfShape: n copies of one element. */
struct fill_args {
    unsigned char* dst;
    int64_t n;
    size_t elsize;                        /* 1, 2, 4 or 8 */
    uint64_t value;                       /* the element in its first elsize bytes (memory order) */
};

/* Range: n values from start by delta, of dtype float, double, int16, int32 or int64 (start/delta in the field of
 * the dtype's kind; a float's values are exact in double). */
struct range_args {
    void* dst;
    ONNXTensorElementDataType dtype;
    int32_t pad_;
    int64_t n;
    double start_f, delta_f;
    int64_t start_i, delta_i;
};

/* ArgMax / ArgMin over the middle dim of x viewed as [outer, len, inner] (len >= 1) into int64 y [outer, inner]:
 * the first (last: the last) index of the extreme value; a NaN is never taken unless it is the first element, as
 * ORT's CPU EP gives (every comparison with NaN is false). */
struct argreduce_args {
    const void* x;
    int64_t* y;
    ONNXTensorElementDataType dtype;
    bool is_min;
    bool last;                            /* select_last_index */
    int64_t outer, len, inner;
};

/* Resize (nearest and linear). Coordinate transformation and nearest rounding as ORT's CPU EP computes them, in
 * float. A dim whose scale is exactly 1 maps output index i to input index i. */
enum resize_coord {
    RESIZE_HALF_PIXEL, RESIZE_ASYMMETRIC, RESIZE_PYTORCH_HALF_PIXEL, RESIZE_ALIGN_CORNERS, RESIZE_HALF_PIXEL_SYMMETRIC,
    RESIZE_TF_HALF_PIXEL_FOR_NN
};
enum resize_nearest { RESIZE_ROUND_PREFER_FLOOR, RESIZE_ROUND_PREFER_CEIL, RESIZE_FLOOR, RESIZE_CEIL, RESIZE_SIMPLE };

struct resize_args {
    const unsigned char* x;
    unsigned char* y;
    unsigned char* table;                 /* host scratch: per-dim index and weight tables (resize.c); CUDA: unused */
    size_t elsize;                        /* nearest: 1 or 4; linear: 4 (float) */
    bool linear;
    bool copy;                            /* output dims equal input dims: Y = X, as ORT's CPU EP does */
    enum resize_coord coord;
    enum resize_nearest nearest;
    int rank;                             /* >= 1 */
    int64_t in_dims[EPABI_MAX_RANK];
    int64_t out_dims[EPABI_MAX_RANK];
    float scales[EPABI_MAX_RANK];         /* > 0 */
};

/* An elementwise chain (kernels/chain.h): float32 unary and binary nodes the plan fused into one launch. Op k computes
 * register k from operands that are earlier registers or the launch's inputs, at every element of the output shape;
 * ops whose result something outside the chain reads store it into an output. */
enum { EPABI_CHAIN_MAX_OPS = 16, EPABI_CHAIN_MAX_INPUTS = 6, EPABI_CHAIN_MAX_OUTPUTS = 4 };
enum chain_kind { CHAIN_UNARY = 0, CHAIN_BINARY = 1, CHAIN_CLIP = 2 };

/* Operand code of an immediate: a float32 constant of one element, carried in the op (a BINARY op's alpha for operand
 * a, beta for operand b) instead of taking an input slot: GELU-tanh's and LayerNorm's scalar factors. */
#define EPABI_CHAIN_IMMEDIATE (-2147483647 - 1)   /* INT32_MIN, spelled out for NVRTC */

/* One op. Operand encoding: r >= 0 is register r (< this op's index), EPABI_CHAIN_IMMEDIATE (BINARY only) is the
 * op's alpha (a) or beta (b), any other r < 0 is input -1 - r. */
struct chain_op {
    int32_t kind;         /* enum chain_kind */
    int32_t op;           /* UNARY: enum un_op (not UN_CLIP, UN_NOT); BINARY: OP_ADD, OP_SUB, OP_MUL or OP_DIV */
    int32_t a, b;         /* operands (b: BINARY only) */
    int32_t out;          /* output index written with this register, -1: none */
    float alpha, beta;    /* UNARY: the op's parameters (LeakyRelu alpha; HardSigmoid alpha, beta); CLIP: min, max;
                           * BINARY: the immediate operands' values */
    int32_t pad_;
};

struct chain_args {
    int32_t n_ops, n_in, n_out;
    int32_t rank;                                          /* >= 1: a scalar runs as shape [1] */
    int64_t dims[EPABI_MAX_RANK];                          /* the output shape, unit dims dropped and runs merged */
    int64_t strides[EPABI_CHAIN_MAX_INPUTS][EPABI_MAX_RANK];   /* elements, 0 along broadcast dims */
    const float* in[EPABI_CHAIN_MAX_INPUTS];
    float* out[EPABI_CHAIN_MAX_OUTPUTS];                   /* contiguous, of the output shape */
    struct chain_op ops[EPABI_CHAIN_MAX_OPS];
    struct epabi_pool* pool;                               /* the software adapter's pool (chain.c); NULL on devices */
};

/* A one-hot lookup (kernels/onehot.h): Equal(X, C) -> Cast(to float) -> MatMul(., W) [-> Add(., bias)] as one launch,
 * Y [rows, n] row-major. Lookup path (per_key 0: X holds one value per row): Y[r, :] = table[row(X[r]), :], where
 * row(v) is v - base when keys is NULL (C's values are base .. base + n_keys - 1) or v's index in the sorted keys, and
 * n_keys (the table's last row: the bias, or zeros) when v is none of C's values. General path (per_key 1: X's last dim
 * is C's K): Y[r, j] = sum over k with X[r * k_len + k] == C[k] of W[k, j], in k order, plus bias[j or 0]. */
struct onehot_args {
    const void* x;              /* int32 or int64 (x64) */
    const float* table;         /* [n_keys + 1, n]: the summed W rows of each distinct value (+ bias), then the miss row */
    const int64_t* keys;        /* [n_keys] ascending distinct values of C; NULL: consecutive from base */
    const void* c;              /* general path: C's K values (int32 or int64, as X) */
    const float* w;             /* general path: W [k_len, n] */
    const float* bias;          /* general path: [bias_cols], NULL: none */
    float* y;
    int64_t rows, n, n_keys, base, k_len, bias_cols;
    int32_t x64;                /* 1: X and C are int64, 0: int32 */
    int32_t per_key;            /* 1: the general path */
    struct epabi_pool* pool;    /* the software adapter's pool (rows spread over it); NULL on devices */
};

#endif
