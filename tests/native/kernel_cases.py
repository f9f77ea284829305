#!/usr/bin/env python3
"""Checks the math kernels (float32 matmul, conv, pooling, softmax, layernorm, reduce, normalization,
conv-transpose, lstm, linear resize; the unary, activation, comparison and Mod kernels on their dtypes) through
kernel_harness.c.

Builds the harness (harness_build.py: -std=c11 -Wall -Wextra -Werror, every native/kernels/*.c), writes one
case file, runs it, and compares every result with onnx.reference.ReferenceEvaluator on a one-node model (numpy
where the reference lacks the semantics, i.e. Softmax before opset 13). Cases that must be refused by supports()
or fail at run time are checked for that outcome and for a message naming the problem.

Usage (from anywhere, in the project venv that has numpy and onnx):
    .venv/bin/python tests/native/kernel_cases.py [--variant asan|plain|blas|opt ...] [-k SUBSTRING] [-v]
        [--build-dir DIR]
Variants: asan = under AddressSanitizer + UBSan (default), plain = -O2, opt = -O3 -march=native, no sanitizers;
each multiplies with the built-in GEMM loop (EPABI_BLAS=none) unless EPABI_BLAS is set. blas = plain with the
scipy-openblas32 wheel's CBLAS loaded at run time (kernels/blas.h; skipped when the wheel is not installed).
--threads runs every variant on a pool of 3 threads with no minimum work size (harness_build.THREADED_*).
Exit status 0 when every case passes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness_build

RTOL, ATOL = 1e-4, 1e-5

DTYPES = {np.dtype(np.float32): 1, np.dtype(np.int64): 7, np.dtype(np.float64): 11, np.dtype(np.int32): 6,
          np.dtype(np.uint8): 2, np.dtype(np.int8): 3, np.dtype(np.uint16): 4, np.dtype(np.int16): 5,
          np.dtype(np.bool_): 9, np.dtype(np.uint32): 12, np.dtype(np.uint64): 13}
NP_DTYPE = {code: dt for dt, code in DTYPES.items()}


@dataclass
class Case:
    name: str
    op: str
    opset: int
    inputs: list                      # np.ndarray or None (absent optional input)
    attrs: dict = field(default_factory=dict)
    outputs: list = field(default_factory=lambda: ["Y"])   # "" = optional output not wired
    expect: str = "ok"                # ok | refused | error
    match: str = ""                   # substring the refusal / error message must contain
    const: tuple = ()                 # input indices that are constant initializers
    unknown: tuple = ()               # input indices whose shape the graph does not know
    oracle: Callable | None = None    # replaces ReferenceEvaluator: f(*inputs) -> list of arrays
    ort_differs: str = ""             # why ORT's CPU EP is no oracle for this case (ort_kernels.py skips it)
    out_dtype: type | None = None     # of every output; None: float32 here, input 0's dtype in ort_kernels.py
    out_dtypes: tuple = ()            # ONNX dtype of each output, overriding out_dtype (MaxPool's int64 Indices)


RNG = np.random.default_rng(1234)

# We follow numpy and the ONNX reference: a NaN anywhere in a max makes the max NaN. ORT's CPU EP does not
# (GlobalMaxPool ignores NaN; ReduceMax returns NaN only when the NaN comes first).
NAN_MAX = "NaN in a max: ORT's CPU EP does not propagate it"
# The remainder of the most negative int32/int64 by -1 is 0 (numpy, ORT 1.32); ORT 1.24's CPU EP dies of SIGFPE.
MIN_MOD_MINUS1 = "ORT 1.24's CPU EP dies of SIGFPE on the most negative value % -1"
# Integer Mod with fmod=1 is exact here (numpy, ORT 1.32); ORT 1.26's CPU EP goes through double, so 64-bit values
# beyond 2**53 lose digits.
FMOD_DOUBLE = "ORT 1.26's CPU EP computes integer fmod=1 through double"


def r(*shape, scale=1.0):
    return np.asarray(RNG.standard_normal(shape) * scale, dtype=np.float32)


def i64(*v):
    return np.array(v, dtype=np.int64)


# ---- the cases --------------------------------------------------------------------------------------------


def matmul_cases():
    c = []
    shapes = [
        ((3, 4), (4, 5)), ((1, 1), (1, 1)), ((7, 13), (13, 9)), ((4,), (4,)), ((4,), (4, 5)), ((3, 4), (4,)),
        ((2, 3, 4), (4,)), ((4,), (2, 4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)),
        ((2, 1, 3, 4), (5, 4, 6)), ((3, 4), (2, 4, 5)), ((1, 3, 4), (2, 4, 5)), ((2, 3, 4), (1, 4, 5)),
        ((2, 1, 3, 4), (1, 2, 4, 2)), ((3, 0), (0, 4)), ((0, 4), (4, 5)), ((2, 0, 4), (4, 3)),
        ((67, 300), (300, 130)), ((5, 70, 33), (33, 529)), ((3, 2, 5, 17), (3, 1, 17, 9)),
    ]
    for i, (sa, sb) in enumerate(shapes):
        for opset in ([13] if i % 3 else [1, 9, 13]):
            c.append(Case(f"matmul_{i}_{opset}", "MatMul", opset, [r(*sa), r(*sb)], const=(1,) if i % 2 else ()))
    c.append(Case("matmul_k0_batch", "MatMul", 13, [r(2, 3, 0), r(0, 4)]))
    c.append(Case("matmul_k0_1d", "MatMul", 13, [r(0), r(0)]))
    c.append(Case("matmul_unknown_shapes", "MatMul", 13, [r(2, 3, 4), r(4, 6)], unknown=(0, 1)))
    c.append(Case("matmul_k_mismatch", "MatMul", 13, [r(3, 4), r(5, 6)], expect="error", match="K=4"))
    c.append(Case("matmul_batch_mismatch", "MatMul", 13, [r(2, 3, 4), r(3, 4, 5)], expect="error",
                  match="do not broadcast"))
    c.append(Case("matmul_int64", "MatMul", 13, [i64(1, 2), i64(1, 2)], expect="refused", match="int64"))
    c.append(Case("matmul_double", "MatMul", 13, [r(2, 2).astype(np.float64), r(2, 2)], expect="refused",
                  match="double"))
    return c


def gemm_cases():
    c = []
    M, K, N = 3, 4, 5
    cs = {"vec": r(N), "scalar": r(), "one": r(1), "col": r(M, 1), "row": r(1, N), "full": r(M, N)}
    for cname, cval in cs.items():
        for ta in (0, 1):
            for tb in (0, 1):
                a = r(K, M) if ta else r(M, K)
                b = r(N, K) if tb else r(K, N)
                c.append(Case(f"gemm_{cname}_t{ta}{tb}", "Gemm", 13, [a, b, cval],
                              attrs={"transA": ta, "transB": tb, "alpha": 0.5, "beta": 2.0}))
    c.append(Case("gemm_noc_11", "Gemm", 11, [r(M, K), r(K, N)]))
    c.append(Case("gemm_absent_c_13", "Gemm", 13, [r(M, K), r(K, N), None]))
    c.append(Case("gemm_opset7", "Gemm", 7, [r(M, K), r(K, N), r(N)]))
    c.append(Case("gemm_opset9_default_attrs", "Gemm", 9, [r(M, K), r(K, N), r(M, N)]))
    c.append(Case("gemm_beta0", "Gemm", 13, [r(M, K), r(K, N), r(M, N)], attrs={"beta": 0.0}))
    c.append(Case("gemm_big_tb", "Gemm", 13, [r(100, 300), r(70, 300), r(70)], attrs={"transB": 1}, const=(1, 2)))
    c.append(Case("gemm_big_ta", "Gemm", 13, [r(300, 67), r(300, 520), r(67, 1)], attrs={"transA": 1}))
    c.append(Case("gemm_k0", "Gemm", 13, [r(3, 0), r(0, 2), r(2)]))
    c.append(Case("gemm_m0", "Gemm", 13, [r(0, 4), r(4, 2), r(2)]))
    c.append(Case("gemm_opset9_no_c", "Gemm", 9, [r(M, K), r(K, N)], expect="refused", match="C is required"))
    c.append(Case("gemm_k_mismatch", "Gemm", 13, [r(M, K), r(K + 1, N)], expect="error", match="K="))
    c.append(Case("gemm_bad_c", "Gemm", 13, [r(M, K), r(K, N), r(2, N)], expect="error", match="does not broadcast"))
    c.append(Case("gemm_rank3", "Gemm", 13, [r(1, M, K), r(K, N)], expect="refused", match="rank 3"))
    c.append(Case("gemm_rank3_unknown", "Gemm", 13, [r(1, M, K), r(K, N)], unknown=(0,), expect="error",
                  match="rank 2"))
    return c


def conv_cases():
    c = []

    def add(name, x, w, b=None, opset=11, **attrs):
        ins = [x, w] + ([b] if b is not None else [])
        c.append(Case(f"conv_{name}", "Conv", opset, ins, attrs=attrs, const=(1, 2)))

    add("basic", r(1, 1, 5, 5), r(1, 1, 3, 3))
    add("pads_strides", r(2, 3, 7, 8), r(4, 3, 3, 3), r(4), pads=[1, 1, 1, 1], strides=[2, 2])
    add("asym_pads", r(1, 2, 6, 5), r(3, 2, 3, 2), pads=[0, 1, 2, 1])
    add("dilations", r(1, 2, 9, 10), r(2, 2, 3, 3), r(2), dilations=[2, 2], pads=[2, 1, 2, 1])
    add("group2", r(2, 4, 6, 6), r(6, 2, 3, 3), r(6), group=2, pads=[1, 1, 1, 1])
    add("depthwise", r(1, 3, 8, 8), r(3, 1, 3, 3), r(3), group=3, strides=[2, 1])
    add("group3_m6", r(1, 3, 5, 5), r(6, 1, 2, 2), group=3)
    add("depthwise_s2_dil", r(2, 4, 9, 11), r(8, 1, 3, 3), r(8), group=4, strides=[1, 2], dilations=[2, 2],
        pads=[2, 1, 0, 3])
    add("depthwise_same_lower", r(1, 3, 7, 8), r(3, 1, 4, 3), group=3, strides=[2, 3], auto_pad="SAME_LOWER")
    add("im2col_s3_pads", r(1, 3, 10, 13), r(2, 3, 3, 5), strides=[2, 3], dilations=[1, 2], pads=[3, 4, 2, 5])
    add("same_upper_s2_odd", r(1, 2, 7, 9), r(3, 2, 3, 3), r(3), auto_pad="SAME_UPPER", strides=[2, 2])
    add("same_upper_s2_even", r(1, 2, 8, 6), r(3, 2, 4, 4), auto_pad="SAME_UPPER", strides=[2, 2])
    add("same_lower_s2", r(1, 2, 8, 7), r(3, 2, 4, 3), auto_pad="SAME_LOWER", strides=[2, 2])
    add("same_upper_dil", r(1, 1, 9, 9), r(2, 1, 3, 3), auto_pad="SAME_UPPER", dilations=[2, 2])
    add("valid", r(1, 2, 7, 9), r(3, 2, 3, 4), auto_pad="VALID", strides=[2, 3])
    add("kernel_shape", r(1, 2, 6, 6), r(2, 2, 3, 2), kernel_shape=[3, 2])
    add("1x1_direct", r(2, 5, 4, 6), r(7, 5, 1, 1), r(7))
    add("1x1_stride2", r(1, 5, 5, 6), r(3, 5, 1, 1), strides=[2, 2])
    add("1x1_pads", r(1, 5, 3, 3), r(3, 5, 1, 1), pads=[1, 0, 0, 1])
    add("nonsquare", r(1, 3, 11, 12), r(4, 3, 2, 3), strides=[1, 2], dilations=[2, 1], pads=[1, 0, 0, 2])
    add("opset1", r(1, 2, 5, 5), r(2, 2, 3, 3), r(2), opset=1)
    add("opset22", r(1, 2, 5, 5), r(2, 2, 3, 3), r(2), opset=22, pads=[1, 1, 1, 1])
    add("1d_basic", r(2, 3, 10), r(4, 3, 3), r(4))
    add("1d_pads_strides_dil", r(2, 3, 10), r(4, 3, 3), pads=[1, 2], strides=[2], dilations=[2])
    add("1d_group", r(1, 4, 9), r(6, 2, 2), r(6), group=2)
    add("1d_same_upper", r(1, 2, 10), r(2, 2, 4), auto_pad="SAME_UPPER", strides=[3])
    add("1d_same_lower", r(1, 2, 10), r(2, 2, 4), auto_pad="SAME_LOWER", strides=[3])
    add("1d_1x1", r(2, 3, 7), r(5, 3, 1), r(5))
    add("medium", r(2, 8, 17, 19), r(16, 8, 3, 3), r(16), pads=[1, 1, 1, 1])
    # one output column (magika's Conv over H with W = 1): im2col gathers down the column
    add("one_column", r(1, 6, 40, 1), r(8, 6, 5, 1), r(8))
    add("one_column_pads_s2_dil", r(2, 3, 23, 1), r(4, 3, 3, 1), pads=[4, 0, 1, 0], strides=[2, 1], dilations=[3, 1])
    add("one_column_w_padding", r(1, 2, 9, 1), r(3, 2, 3, 3), pads=[1, 1, 1, 1], strides=[1, 2])
    add("tiled", r(1, 64, 90, 90), r(4, 64, 3, 3), r(4), pads=[1, 1, 1, 1])   # > 4M-float column matrix
    c.append(Case("conv_empty_channels", "Conv", 11, [r(1, 0, 4, 4), r(3, 0, 3, 3), r(3)], const=(1, 2),
                  ort_differs="with no input channels ORT 1.24's CPU EP does not give Y = bias (1.32 does)"))
    c.append(Case("conv_unknown_x", "Conv", 11, [r(1, 2, 6, 6), r(3, 2, 3, 3)], unknown=(0,)))
    c.append(Case("conv_3d", "Conv", 11, [r(1, 1, 3, 3, 3), r(1, 1, 2, 2, 2)], expect="refused", match="rank 5"))
    c.append(Case("conv_pads_and_auto_pad", "Conv", 11, [r(1, 1, 5, 5), r(1, 1, 3, 3)],
                  attrs={"auto_pad": "SAME_UPPER", "pads": [1, 1, 1, 1]}, expect="refused", match="auto_pad"))
    c.append(Case("conv_bad_auto_pad", "Conv", 11, [r(1, 1, 5, 5), r(1, 1, 3, 3)], attrs={"auto_pad": "FULL"},
                  expect="refused", match="FULL"))
    c.append(Case("conv_bad_strides_len", "Conv", 11, [r(1, 1, 5, 5), r(1, 1, 3, 3)], attrs={"strides": [1]},
                  expect="refused", match="strides"))
    c.append(Case("conv_zero_stride", "Conv", 11, [r(1, 1, 5, 5), r(1, 1, 3, 3)], attrs={"strides": [1, 0]},
                  expect="refused", match="strides[1]=0 must be in [1,",
                  ort_differs="ORT 1.24's CPU EP dies of SIGFPE on this model (1.32 rejects it at load)"))
    c.append(Case("conv_double", "Conv", 11, [r(1, 1, 5, 5).astype(np.float64), r(1, 1, 3, 3)],
                  expect="refused", match="double"))
    c.append(Case("conv_group_mismatch", "Conv", 11, [r(1, 4, 5, 5), r(2, 3, 3, 3)], attrs={"group": 2},
                  expect="error", match="group=2"))
    c.append(Case("conv_too_small", "Conv", 11, [r(1, 1, 2, 5), r(1, 1, 3, 3)], expect="error",
                  match="smaller than the dilated kernel"))
    c.append(Case("conv_kernel_shape_mismatch", "Conv", 11, [r(1, 1, 5, 5), r(1, 1, 3, 3)],
                  attrs={"kernel_shape": [2, 2]}, expect="error", match="kernel_shape"))
    c.append(Case("conv_bad_bias", "Conv", 11, [r(1, 1, 5, 5), r(2, 1, 3, 3), r(3)], expect="error",
                  match="bias"))
    return c


def pool_cases():
    c = []
    x = r(2, 3, 4, 5)
    x[1, 2, 0, 3] = np.nan
    for i, (opset, xin) in enumerate([(1, r(2, 3, 4, 5)), (22, r(1, 2, 7)), (1, r(2, 2, 2, 3, 2)), (1, x),
                                      (1, r(3, 2, 1, 1)), (1, r(0, 3, 2, 2))]):
        # The reference reduces axes (ndim-2, ndim-1) whatever the rank, which is right only for 4-D inputs.
        c.append(Case(f"gmaxpool_{i}", "GlobalMaxPool", opset, [xin],
                      oracle=lambda x: [x.max(axis=tuple(range(2, x.ndim)), keepdims=True)],
                      ort_differs=NAN_MAX if xin is x else ""))
    c.append(Case("gmaxpool_rank2", "GlobalMaxPool", 1, [r(2, 3)], expect="refused", match="rank 2"))
    c.append(Case("gmaxpool_rank2_unknown", "GlobalMaxPool", 1, [r(2, 3)], unknown=(0,), expect="error",
                  match="rank >= 3"))
    c.append(Case("gmaxpool_no_spatial", "GlobalMaxPool", 1, [r(2, 3, 0)], expect="error",
                  match="no spatial"))
    return c


def softmax_coerced(axis):
    def f(x):
        a = axis + x.ndim if axis < 0 else axis
        rows = int(np.prod(x.shape[:a], dtype=np.int64))
        m = x.reshape(rows, -1).astype(np.float64)
        e = np.exp(m - m.max(axis=1, keepdims=True))
        return [(e / e.sum(axis=1, keepdims=True)).reshape(x.shape).astype(np.float32)]
    return f


def softmax_cases():
    c = []
    big = r(4, 7, scale=300.0)
    neg = r(3, 5)
    neg[1, :2] = -np.inf
    for name, x, axis in [("last", r(3, 5), None), ("axis0", r(3, 5), 0), ("mid", r(2, 3, 4), 1),
                          ("neg2", r(2, 3, 4, 5), -2), ("first3d", r(2, 3, 4), 0), ("big", big, -1),
                          ("neginf", neg, 1), ("rank1", r(9), 0), ("long", r(2, 3000), -1)]:
        attrs = {} if axis is None else {"axis": axis}
        c.append(Case(f"softmax13_{name}", "Softmax", 13, [x], attrs=attrs))
    for opset in (1, 11):
        for name, x, axis in [("default", r(2, 3, 4), None), ("axis0", r(2, 3, 4), 0), ("axis2", r(2, 3, 4), 2),
                              ("neg1", r(2, 3, 4), -1), ("2d", r(5, 6), 1)]:
            attrs = {} if axis is None else {"axis": axis}
            c.append(Case(f"softmax{opset}_{name}", "Softmax", opset, [x], attrs=attrs,
                          oracle=softmax_coerced(1 if axis is None else axis)))
    c.append(Case("softmax13_empty", "Softmax", 13, [r(0, 5)]))
    c.append(Case("softmax11_empty", "Softmax", 11, [r(3, 0)], oracle=lambda x: [x.copy()]))
    c.append(Case("softmax_axis_oob", "Softmax", 13, [r(2, 3)], attrs={"axis": 2}, expect="refused",
                  match="axis=2"))
    c.append(Case("softmax_axis_oob_run", "Softmax", 13, [r(2, 3)], attrs={"axis": -3}, unknown=(0,),
                  expect="error", match="axis=-3"))
    c.append(Case("softmax_double", "Softmax", 13, [r(2, 3).astype(np.float64)], expect="refused", match="double"))
    return c


def layernorm64(x, scale, b):
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    inv = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    return [((x - mean) * inv * scale + b).astype(np.float32)]


def layernorm_cases():
    c = []

    def add(name, x, scale, b=None, outputs=("Y",), **attrs):
        ins = [x, scale] + ([b] if b is not None else [])
        c.append(Case(f"layernorm_{name}", "LayerNormalization", 17, ins, attrs=attrs, outputs=list(outputs),
                      const=(1, 2)))

    add("last", r(2, 3, 4), r(4), r(4))
    add("axis1", r(2, 3, 4), r(3, 4), r(3, 4), axis=1)
    add("no_bias", r(5, 8), r(8))
    add("stats", r(2, 3, 4), r(4), r(4), outputs=("Y", "Mean", "InvStdDev"))
    add("stats_axis1", r(2, 3, 4), r(3, 4), r(3, 4), outputs=("Y", "Mean", "InvStdDev"), axis=-2)
    add("only_inv", r(2, 3, 4), r(4), r(4), outputs=("Y", "", "InvStdDev"))
    add("only_mean", r(2, 3, 4), r(4), outputs=("Y", "Mean"))
    add("bcast_scale", r(2, 3, 4), r(1, 4), r(1))
    add("bcast_inner", r(2, 3, 4), r(3, 1), r(4), axis=1)
    add("per_row_scale", r(2, 3, 4), r(2, 1, 4), r(3, 1))
    add("per_row_full", r(2, 3, 4), r(2, 3, 4), r(2, 3, 4))
    add("eps", r(4, 6, scale=1e-3), r(6), r(6), epsilon=0.1)
    add("axis0", r(3, 4), r(3, 4), r(3, 4), axis=0)
    add("rank1", r(7), r(7), r(7))
    # The reference subtracts the mean in float32, which loses ~1e-4 at |x| ~ 1000; compare with float64.
    c.append(Case("layernorm_offset", "LayerNormalization", 17, [r(3, 64) + 1000.0, r(64), r(64)],
                  oracle=layernorm64,
                  ort_differs="ORT 1.24's CPU EP is off by ~0.3 from float64 here (1.32: 5e-5)"))
    add("wide", r(4, 4096), r(4096), r(4096))
    add("no_rows", r(0, 4), r(4), r(4), outputs=("Y", "Mean", "InvStdDev"))
    add("empty_rows", r(2, 0), r(0), r(0), outputs=("Y", "Mean", "InvStdDev"))
    c.append(Case("layernorm_stash_double", "LayerNormalization", 17, [r(2, 3), r(3)], attrs={"stash_type": 11},
                  expect="refused", match="stash_type=11"))
    c.append(Case("layernorm_bad_scale", "LayerNormalization", 17, [r(2, 3, 4), r(3)], expect="error",
                  match="does not broadcast"))
    c.append(Case("layernorm_axis_oob", "LayerNormalization", 17, [r(2, 3), r(3)], attrs={"axis": 2},
                  expect="refused", match="axis=2"))
    return c


def reduce_cases():
    c = []
    x4 = r(2, 3, 4, 5)
    xn = r(3, 4)
    xn[1, 2] = np.nan
    axes_sets = [None, [1], [0, 2], [-1], [3, 1], [0, 1, 2, 3], [-4, 2]]
    ops = [("ReduceSum", 11, 13), ("ReduceMean", 13, 18), ("ReduceMax", 13, 18), ("ReduceMax", 1, 20),
           ("ReduceSum", 1, 13)]
    for op, attr_opset, input_opset in ops:
        tag = f"{op}{attr_opset}"
        for ai, axes in enumerate(axes_sets):
            for keep in (1, 0):
                base = f"{tag}_a{ai}_k{keep}"
                attrs = {"keepdims": keep}
                if axes is not None:
                    attrs_a = dict(attrs, axes=axes)
                else:
                    attrs_a = attrs
                c.append(Case(f"{base}_attr{attr_opset}", op, attr_opset, [x4], attrs=attrs_a))
                ins = [x4] + ([i64(*axes)] if axes is not None else [])
                c.append(Case(f"{base}_in{input_opset}", op, input_opset, ins, attrs=attrs,
                              const=(1,) if ai % 2 else ()))
        c.append(Case(f"{tag}_scalar_{input_opset}", op, input_opset, [np.array(2.5, dtype=np.float32)]))
        c.append(Case(f"{tag}_noop_{input_opset}", op, input_opset, [x4, i64()],
                      attrs={"noop_with_empty_axes": 1}))
        c.append(Case(f"{tag}_noop_absent_{input_opset}", op, input_opset, [x4], attrs={"noop_with_empty_axes": 1}))
        c.append(Case(f"{tag}_empty_axes_{input_opset}", op, input_opset, [x4, i64()]))
        c.append(Case(f"{tag}_ones_{input_opset}", op, input_opset, [r(1, 3, 1, 4), i64(0, 2)]))
        c.append(Case(f"{tag}_big_{input_opset}", op, input_opset, [r(64, 1000), i64(1)], attrs={"keepdims": 0}))
        c.append(Case(f"{tag}_big0_{input_opset}", op, input_opset, [r(1000, 64), i64(0)]))
        c.append(Case(f"{tag}_nan_{input_opset}", op, input_opset, [xn, i64(1)],
                      ort_differs=NAN_MAX if op == "ReduceMax" else ""))
        # axis 1 named twice (1 and -3 on rank 4): reduced once, as ORT's CPU EP does (numpy and the reference refuse)
        numpy_reduce = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max}[op]
        c.append(Case(f"{tag}_dup_{input_opset}", op, input_opset, [x4, i64(1, -3)],
                      oracle=lambda x, _axes, f=numpy_reduce: [f(x, axis=1, keepdims=True)]))
        c.append(Case(f"{tag}_oob_{input_opset}", op, input_opset, [x4, i64(4)], expect="error",
                      match="out of range"))
        c.append(Case(f"{tag}_attr_oob_{attr_opset}", op, attr_opset, [x4], attrs={"axes": [4]}, expect="refused",
                      match="out of range"))
        c.append(Case(f"{tag}_attr_on_new_{input_opset}", op, input_opset, [x4], attrs={"axes": [1]},
                      expect="refused", match="input"))
        c.append(Case(f"{tag}_int64_{input_opset}", op, input_opset, [i64(1, 2)], expect="refused", match="int64"))
    # Empty reductions: sum -> 0, max -> -inf (spec); mean's result is undefined by the spec (we give NaN).
    c.append(Case("ReduceSum_empty_dim", "ReduceSum", 13, [r(2, 0, 3), i64(1)]))
    c.append(Case("ReduceMax_empty_dim", "ReduceMax", 18, [r(2, 0, 3), i64(1)],
                  oracle=lambda x, a: [np.full((2, 1, 3), -np.inf, np.float32)]))
    c.append(Case("ReduceSum_empty_all", "ReduceSum", 13, [r(0, 3)], attrs={"keepdims": 0}))
    c.append(Case("ReduceSum_empty_kept", "ReduceSum", 13, [r(2, 0, 3), i64(0)], attrs={"keepdims": 0}))
    return c


def unary_cases():
    """Abs on float32 (the harness's outputs are float32; integer and double Abs: conformance.py's own cases)."""
    c = []
    rng = np.random.default_rng(15)   # its own stream: the other groups' inputs stay as they were

    def x(*shape):
        return np.asarray(rng.standard_normal(shape), dtype=np.float32)

    special = np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, -1e-40, 3.5, -2.25], dtype=np.float32)
    for opset in (6, 13):
        c.append(Case(f"abs{opset}_float", "Abs", opset, [x(3, 4, 5)]))
        c.append(Case(f"abs{opset}_special", "Abs", opset, [special]))
    c.append(Case("abs_scalar", "Abs", 13, [np.array(-2.5, dtype=np.float32)]))
    c.append(Case("abs_empty", "Abs", 13, [x(2, 0, 3)]))
    c.append(Case("abs_unknown_shape", "Abs", 13, [x(4, 3)], unknown=(0,)))
    return c


SPECIAL = [np.nan, -0.0, 0.0, -np.inf, np.inf, -1e-40, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.0, -7.25, 1e30, -1e30]


def math_cases():
    """Neg Floor Ceil Round Log Sin Cos Sign Not: float32 and float64 (random, specials: NaN, +-0, +-inf, halves),
    int32/int64 for Neg and Sign (the most negative value wraps), bool for Not; both ends of each opset range."""
    c = []
    rng = np.random.default_rng(16)   # its own stream: the other groups' inputs stay as they were

    def x(*shape, dtype=np.float32):
        return np.asarray(rng.standard_normal(shape) * 3, dtype=dtype)

    for op, opsets in (("Neg", (6, 13)), ("Floor", (6, 13)), ("Ceil", (6, 13)), ("Round", (11, 22)),
                       ("Log", (6, 13)), ("Sin", (7, 22)), ("Cos", (7, 22)), ("Sign", (9, 13))):
        tag = op.lower()
        for opset in opsets:
            xin = np.abs(x(3, 4, 5)) if op == "Log" else x(3, 4, 5)
            c.append(Case(f"{tag}{opset}_float", op, opset, [xin]))
        c.append(Case(f"{tag}_special", op, opsets[-1], [np.array(SPECIAL, dtype=np.float32)]))
        c.append(Case(f"{tag}_double", op, opsets[-1], [np.array(SPECIAL + [0.1, -1e300], dtype=np.float64)],
                      out_dtype=np.float64))
        c.append(Case(f"{tag}_scalar", op, opsets[-1], [np.array(2.5, dtype=np.float32)]))
        c.append(Case(f"{tag}_empty", op, opsets[-1], [x(2, 0, 3)]))
    c.append(Case("round_halves", "Round", 11, [np.arange(-4.5, 5.0, 0.5, dtype=np.float32)]))
    c.append(Case("floor_unknown_shape", "Floor", 13, [x(4, 3)], unknown=(0,)))
    for dtype in (np.int32, np.int64):
        info = np.iinfo(dtype)
        v = np.array([info.min, info.min + 1, -7, -1, 0, 1, 9, info.max], dtype=dtype)
        name = np.dtype(dtype).name
        c.append(Case(f"neg_{name}", "Neg", 13, [v], out_dtype=dtype,
                      oracle=lambda a: [(np.zeros_like(a) - a)]))   # numpy's wrap, without its overflow warning
        c.append(Case(f"sign_{name}", "Sign", 13, [v], out_dtype=dtype))
    b = rng.random((3, 4, 5)) < 0.5
    c.append(Case("not_bool", "Not", 1, [b], out_dtype=np.bool_))
    c.append(Case("not_scalar", "Not", 1, [np.array(True)], out_dtype=np.bool_))
    c.append(Case("floor_int32", "Floor", 13, [np.array([1, 2], dtype=np.int32)], out_dtype=np.int32,
                  expect="refused", match="int32"))
    c.append(Case("neg_uint8", "Neg", 13, [np.array([1, 2], dtype=np.uint8)], out_dtype=np.uint8,
                  expect="refused", match="uint8"))
    c.append(Case("not_float", "Not", 1, [x(3)], expect="refused", match="float"))
    return c


def activation_cases():
    """HardSigmoid HardSwish LeakyRelu Gelu (both forms) Clip: float32 and float64, default and explicit
    attributes, specials; Clip with attribute bounds (opset 6), input bounds (11-13: constant, graph input,
    absent, min above max) and on integer dtypes (12+)."""
    c = []
    rng = np.random.default_rng(17)

    def x(*shape, dtype=np.float32, scale=3.0):
        return np.asarray(rng.standard_normal(shape) * scale, dtype=dtype)

    sp = np.array(SPECIAL, dtype=np.float32)
    for opset in (6, 22):
        c.append(Case(f"hardsigmoid{opset}_default", "HardSigmoid", opset, [x(3, 4, 5)]))
        c.append(Case(f"hardsigmoid{opset}_attrs", "HardSigmoid", opset, [x(3, 4, 5)],
                      attrs={"alpha": 0.5, "beta": 0.25}))
    c.append(Case("hardsigmoid_special", "HardSigmoid", 22, [sp]))
    c.append(Case("hardsigmoid_double", "HardSigmoid", 22, [x(4, 5, dtype=np.float64)], attrs={"alpha": 0.3},
                  out_dtype=np.float64))
    for opset in (14, 22):
        c.append(Case(f"hardswish{opset}", "HardSwish", opset, [x(3, 4, 5)]))
    c.append(Case("hardswish_special", "HardSwish", 22, [sp]))
    c.append(Case("hardswish_double", "HardSwish", 22, [x(4, 5, dtype=np.float64)], out_dtype=np.float64))
    for opset in (6, 16):
        c.append(Case(f"leakyrelu{opset}_default", "LeakyRelu", opset, [x(3, 4, 5)]))
        c.append(Case(f"leakyrelu{opset}_alpha", "LeakyRelu", opset, [x(3, 4, 5)], attrs={"alpha": 0.1}))
    c.append(Case("leakyrelu_special", "LeakyRelu", 16, [sp], attrs={"alpha": 0.2}))
    c.append(Case("leakyrelu_double", "LeakyRelu", 16, [x(4, 5, dtype=np.float64)], out_dtype=np.float64))
    for mode in ("none", "tanh"):
        attrs = {} if mode == "none" else {"approximate": mode}
        c.append(Case(f"gelu_{mode}", "Gelu", 20, [x(3, 4, 5)], attrs=attrs))
        c.append(Case(f"gelu_{mode}_wide", "Gelu", 20, [np.linspace(-12, 12, 97, dtype=np.float32)], attrs=attrs))
        c.append(Case(f"gelu_{mode}_special", "Gelu", 20, [sp], attrs=attrs))
        c.append(Case(f"gelu_{mode}_double", "Gelu", 20, [x(4, 5, dtype=np.float64)], attrs=attrs,
                      out_dtype=np.float64))
    c.append(Case("gelu_empty", "Gelu", 20, [x(0, 3)]))
    c.append(Case("gelu_bad_mode", "Gelu", 20, [x(3)], attrs={"approximate": "fast"}, expect="refused",
                  match="approximate"))

    # Clip. An absent bound is the dtype's lowest/highest value (ORT's CPU EP): -inf/inf are clipped to them,
    # where the ONNX reference (np.clip with None) leaves them.
    def clip_ort(lo, hi, dtype):
        info = np.finfo(dtype) if np.dtype(dtype).kind == "f" else np.iinfo(dtype)
        return lambda v, *b: [np.minimum(np.maximum(v, info.min if lo is None else lo), info.max if hi is None else hi)]

    def f(v, dtype=np.float32):
        return np.array(v, dtype=dtype)

    xs = x(3, 4, 5)
    c.append(Case("clip6_both", "Clip", 6, [xs], attrs={"min": -1.0, "max": 2.0}))
    c.append(Case("clip6_min", "Clip", 6, [xs], attrs={"min": 0.5}))
    c.append(Case("clip6_none", "Clip", 6, [sp], oracle=clip_ort(None, None, np.float32)))
    c.append(Case("clip6_min_above_max", "Clip", 6, [xs], attrs={"min": 2.0, "max": -1.0}, expect="refused",
                  match="above max"))
    c.append(Case("clip11_inputs", "Clip", 11, [xs, f(-0.5), f(0.75)]))
    c.append(Case("clip11_const", "Clip", 11, [xs, f(-0.5), f(0.75)], const=(1, 2)))
    c.append(Case("clip13_no_min", "Clip", 13, [sp, None, f(1.0)], oracle=clip_ort(None, 1.0, np.float32)))
    c.append(Case("clip13_no_max", "Clip", 13, [sp, f(-1.0)], oracle=clip_ort(-1.0, None, np.float32)))
    c.append(Case("clip13_special", "Clip", 13, [sp, f(-2.0), f(2.0)], const=(1, 2)))
    c.append(Case("clip13_min_above_max", "Clip", 13, [xs, f(1.0), f(-1.0)]))
    c.append(Case("clip13_shape1_bound", "Clip", 13, [xs, f([0.0])], unknown=(1,)))
    c.append(Case("clip13_double", "Clip", 13, [x(4, 5, dtype=np.float64), f(-0.5, np.float64)],
                  out_dtype=np.float64, oracle=clip_ort(-0.5, None, np.float64)))
    c.append(Case("clip13_scalar", "Clip", 13, [f(5.0), f(-1.0), f(1.0)]))
    c.append(Case("clip13_empty", "Clip", 13, [x(2, 0), f(-1.0), f(1.0)]))
    for dtype in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
        info = np.iinfo(dtype)
        name = np.dtype(dtype).name
        v = np.concatenate([np.array([info.min, info.max, 0], dtype=dtype),
                            rng.integers(info.min, info.max, size=9, dtype=dtype, endpoint=True)])
        lo = np.array(info.min // 2 if info.min < 0 else 3, dtype=dtype)
        hi = np.array(info.max // 3, dtype=dtype)
        c.append(Case(f"clip13_{name}", "Clip", 13, [v, lo, hi], out_dtype=dtype))
        c.append(Case(f"clip13_{name}_no_min", "Clip", 13, [v, None, hi], out_dtype=dtype,
                      oracle=clip_ort(None, hi, dtype)))
    c.append(Case("clip12_int64_const", "Clip", 12, [np.arange(-5, 5, dtype=np.int64), np.array(-2, np.int64)],
                  const=(1,), out_dtype=np.int64, oracle=clip_ort(-2, None, np.int64)))
    c.append(Case("clip11_int32", "Clip", 11, [np.arange(4, dtype=np.int32)], out_dtype=np.int32,
                  expect="refused", match="int32"))
    c.append(Case("clip13_two_mins", "Clip", 13, [xs, f([0.0, 1.0])], expect="refused", match="min has shape [2]"))
    c.append(Case("clip13_max_1x1", "Clip", 13, [xs, f(0.0), f([[1.0]])], expect="refused",
                  match="max has shape [1,1]"))
    c.append(Case("clip13_two_mins_unknown", "Clip", 13, [xs, f([0.0, 1.0])], unknown=(1,), expect="error",
                  match="min must be a scalar"))
    return c


def compare_cases():
    """Less Greater LessOrEqual GreaterOrEqual on float32 (NaN compares false), float64 and every integer width;
    And and Or on bool; with broadcasting, scalars and empty tensors. Outputs are bool."""
    c = []
    rng = np.random.default_rng(18)
    fa = np.asarray(rng.integers(-3, 4, size=(3, 4, 5)), dtype=np.float32)
    fb = np.asarray(rng.integers(-3, 4, size=(3, 4, 5)), dtype=np.float32)
    fa[0, 0, :3] = [np.nan, 1.0, np.inf]
    fb[0, 0, :3] = [1.0, np.nan, np.inf]
    B = np.bool_
    for op, opsets in (("Less", (7, 13)), ("Greater", (7, 13)), ("LessOrEqual", (12, 16)),
                       ("GreaterOrEqual", (12, 16))):
        tag = {"Less": "lt", "Greater": "gt", "LessOrEqual": "le", "GreaterOrEqual": "ge"}[op]
        for opset in opsets:
            c.append(Case(f"{tag}{opset}_float", op, opset, [fa, fb], out_dtype=B))
        c.append(Case(f"{tag}_bcast", op, opsets[-1], [fa, fb[0, :, :1]], out_dtype=B))
        c.append(Case(f"{tag}_scalar", op, opsets[-1], [fa, np.array(0.0, np.float32)], out_dtype=B))
        c.append(Case(f"{tag}_empty", op, opsets[-1], [fa[:, :0], fb[:1, :0]], out_dtype=B))
        c.append(Case(f"{tag}_double", op, opsets[-1], [fa.astype(np.float64), fb.astype(np.float64)],
                      out_dtype=B))
        for dtype in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
            info = np.iinfo(dtype)
            a = rng.integers(info.min, info.max, size=(4, 6), dtype=dtype, endpoint=True)
            b = a.copy()
            b[:, ::2] = rng.integers(info.min, info.max, size=(4, 3), dtype=dtype, endpoint=True)
            a[0, :2] = [info.min, info.max]
            b[0, :2] = [info.max, info.min]
            c.append(Case(f"{tag}_{np.dtype(dtype).name}", op, opsets[-1], [a, b], out_dtype=B))
        c.append(Case(f"{tag}_bool", op, opsets[-1], [fa > 0, fb > 0], out_dtype=B, expect="refused",
                      match="bool"))
    ba, bb = rng.random((3, 4, 5)) < 0.5, rng.random((3, 4, 5)) < 0.5
    for op in ("And", "Or"):
        tag = op.lower()
        c.append(Case(f"{tag}_bool", op, 7, [ba, bb], out_dtype=B))
        c.append(Case(f"{tag}_bcast", op, 7, [ba, bb[0, :1, :]], out_dtype=B))
        c.append(Case(f"{tag}_scalar", op, 7, [np.array(True), bb], out_dtype=B))
        c.append(Case(f"{tag}_unknown_shape", op, 7, [ba, bb[:, :, :1]], unknown=(0, 1), out_dtype=B))
        c.append(Case(f"{tag}_float", op, 7, [fa, fb], out_dtype=B, expect="refused", match="float"))
    return c


def np_mod(x, y):
    with np.errstate(all="ignore"):
        return [np.mod(x, y)]


def mod_cases():
    """Mod: fmod=0 (the divisor's sign) and fmod=1 (the dividend's) on every integer width, with mixed signs
    and the most negative value over -1; fmod=1 on float32/float64 with specials; fmod=0 on floats from
    opset 28; broadcasting. An integer divisor of 0 is an error."""
    c = []
    rng = np.random.default_rng(19)
    for dtype in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
        info = np.iinfo(dtype)
        name = np.dtype(dtype).name
        a = rng.integers(info.min, info.max, size=12, dtype=dtype, endpoint=True)
        b = rng.integers(1, min(info.max, 1000), size=12, dtype=dtype, endpoint=True)
        if info.min < 0:
            b[::2] = -b[::2]
            a[:4] = [7, -7, info.min, info.min]
            b[:4] = [-3, 3, -2, 7]
        if info.bits == 64:   # values a double holds exactly; the whole range below
            wide, a = a.copy(), (a >> 24).astype(dtype)
            c.append(Case(f"mod_{name}_fmod1_wide", "Mod", 13, [wide, b], attrs={"fmod": 1}, out_dtype=dtype,
                          ort_differs=FMOD_DOUBLE))
        for fmod in (0, 1):
            c.append(Case(f"mod_{name}_fmod{fmod}", "Mod", 13, [a, b], attrs={"fmod": fmod}, out_dtype=dtype))
            if info.min < 0:
                c.append(Case(f"mod_{name}_fmod{fmod}_min_by_minus1", "Mod", 13,
                              [np.array([info.min, 5], dtype), np.array([-1, -1], dtype)], attrs={"fmod": fmod},
                              out_dtype=dtype, ort_differs=MIN_MOD_MINUS1))
    a = rng.integers(-50, 50, size=(3, 2, 5), dtype=np.int64)
    c.append(Case("mod10_int64_bcast", "Mod", 10, [a, np.array([7, -4, 3, 9, -11], np.int64)], out_dtype=np.int64))
    c.append(Case("mod28_int32", "Mod", 28, [a.astype(np.int32), np.array(-6, np.int32)], out_dtype=np.int32))
    fa = np.array(SPECIAL + [7.5, -7.5, 1e-30, 5.0], dtype=np.float32)
    fb = np.array([2.0, 3.0, -3.0, 2.0, 2.0, 5.0, -0.75, 0.75, 0.0, -2.0, np.inf, -np.inf, np.nan, 0.3, 2.0, 3.0,
                   -2.0, 2.0, -1.0, 2.5], dtype=np.float32)
    for dtype in (np.float32, np.float64):
        name = np.dtype(dtype).name
        c.append(Case(f"mod_{name}_fmod1", "Mod", 13, [fa.astype(dtype), fb.astype(dtype)], attrs={"fmod": 1},
                      out_dtype=dtype))
        c.append(Case(f"mod28_{name}_fmod0", "Mod", 28, [fa.astype(dtype), fb.astype(dtype)], out_dtype=dtype,
                      oracle=np_mod))
    c.append(Case("mod_float_fmod1_bcast", "Mod", 13, [np.asarray(rng.standard_normal((4, 5)) * 10, np.float32),
                                                        np.array([3.0], np.float32)], attrs={"fmod": 1}))
    c.append(Case("mod13_float_fmod0", "Mod", 13, [fa, fb], expect="refused", match="fmod=0"))
    c.append(Case("mod_fmod2", "Mod", 13, [a, a], attrs={"fmod": 2}, out_dtype=np.int64, expect="refused",
                  match="fmod=2"))
    c.append(Case("mod_int32_by_zero", "Mod", 13, [np.arange(4, dtype=np.int32), np.array([1, 2, 0, 3], np.int32)],
                  out_dtype=np.int32, expect="error", match="division by zero"))
    return c


def maxpool_oracle(kernel, pads, strides=None, dilations=None, col_major=False, y_only=False):
    """MaxPool with Indices by brute force, as ORT's CPU EP computes them: the reference's Indices leave out the
    (N, C) offset and crash on padded 3-D windows, and its SAME pads follow the spec where ORT pads for the
    undilated kernel; and it refuses spans (in + pads - kernel) in (-stride, 0), which give ORT one window.
    Explicit pads, no ceil_mode; NaN wins (np.argmax takes the first NaN)."""
    def f(x):
        sr = len(kernel)
        st = strides or [1] * sr
        dil = dilations or [1] * sr
        spatial = x.shape[2:]
        spans = [spatial[d] + pads[d] + pads[sr + d] - (kernel[d] - 1) * dil[d] - 1 for d in range(sr)]
        outs = [int(np.trunc(spans[d] / st[d])) + 1 for d in range(sr)]   # ORT divides as C does
        y = np.empty(x.shape[:2] + tuple(outs), np.float32)
        idx = np.empty(y.shape, np.int64)
        plane = int(np.prod(spatial))
        for n, ch in np.ndindex(*x.shape[:2]):
            for o in np.ndindex(*outs):
                taps = [[t for t in range(o[d] * st[d] - pads[d], o[d] * st[d] - pads[d] + kernel[d] * dil[d], dil[d])
                         if 0 <= t < spatial[d]] for d in range(sr)]
                w = x[n, ch][np.ix_(*taps)]
                at = np.unravel_index(int(np.argmax(w)), w.shape)
                pos = [taps[d][at[d]] for d in range(sr)]
                y[(n, ch) + o] = w[at]
                idx[(n, ch) + o] = (n * x.shape[1] + ch) * plane + np.ravel_multi_index(
                    pos, spatial, order="F" if col_major else "C")
        return [y] if y_only else [y, idx]
    return f


def window_pool_cases():
    """MaxPool, AveragePool and GlobalAveragePool (ORT's CPU EP semantics; the reference agrees on these)."""
    c = []
    rng = np.random.default_rng(16)   # its own stream: the other groups' inputs stay as they were

    def x(*shape):
        return np.asarray(rng.standard_normal(shape), dtype=np.float32)

    def mp(name, xin, opset=12, outputs=("Y",), **attrs):
        c.append(Case(f"maxpool_{name}", "MaxPool", opset, [xin], attrs=attrs, outputs=list(outputs),
                      out_dtypes=(1, 7)))

    def ap(name, xin, opset=19, **attrs):
        c.append(Case(f"avgpool_{name}", "AveragePool", opset, [xin], attrs=attrs))

    ks2 = {"kernel_shape": [2, 2]}
    ks3 = {"kernel_shape": [3, 3]}
    mp("default", x(2, 3, 6, 7), **ks2)
    mp("strides", x(1, 2, 9, 8), kernel_shape=[3, 2], strides=[2, 3])
    mp("pads", x(1, 2, 5, 6), pads=[1, 2, 2, 1], **ks3)
    mp("dilations", x(1, 2, 9, 9), dilations=[2, 3], strides=[1, 2], opset=10, **ks3)
    mp("ceil", x(1, 1, 6, 7), strides=[2, 2], ceil_mode=1, opset=10, **ks3)
    mp("ceil_pads", x(1, 1, 6, 6), strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, opset=11, **ks3)
    mp("ceil_drop_last", x(1, 1, 5, 5), strides=[2, 2], pads=[2, 2, 2, 2], ceil_mode=1, **ks3)
    mp("same_upper", x(1, 2, 7, 8), auto_pad="SAME_UPPER", strides=[2, 3], **ks3)
    mp("same_lower", x(1, 2, 7, 8), auto_pad="SAME_LOWER", strides=[2, 3], **ks3)
    c[-1].oracle = maxpool_oracle([3, 3], [1, 1, 1, 0], [2, 3])   # the reference's SAME_LOWER extents are off
    mp("same_upper_dil", x(1, 1, 9, 10), auto_pad="SAME_UPPER", dilations=[2, 2], opset=11, **ks3)
    c[-1].oracle = maxpool_oracle([3, 3], [1, 1, 1, 1], dilations=[2, 2])   # ORT pads for the undilated kernel
    mp("same_small_kernel", x(1, 2, 7, 9), auto_pad="SAME_UPPER", kernel_shape=[1, 2], strides=[3, 4])
    mp("valid", x(1, 2, 7, 9), auto_pad="VALID", strides=[2, 2], **ks3)
    mp("1d", x(2, 3, 11), kernel_shape=[3], strides=[2], pads=[1, 1])
    mp("1d_dil_ceil", x(1, 2, 12), kernel_shape=[2], dilations=[3], ceil_mode=1, strides=[2])
    mp("3d", x(1, 2, 5, 6, 7), kernel_shape=[2, 3, 2], strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 1])
    mp("3d_dil", x(1, 1, 7, 7, 7), kernel_shape=[2, 2, 2], dilations=[2, 3, 1], ceil_mode=1)
    mp("opset1", x(1, 2, 6, 6), opset=1, **ks2)
    mp("opset8", x(1, 2, 6, 6), opset=8, strides=[2, 2], **ks3)
    mp("opset22", x(1, 2, 6, 6), opset=22, pads=[1, 1, 1, 1], **ks3)
    mp("big", x(2, 16, 40, 40), strides=[2, 2], pads=[1, 1, 1, 1], **ks3)
    mp("idx", x(2, 3, 6, 7), outputs=("Y", "I"), pads=[1, 0, 0, 1], **ks3)
    c[-1].oracle = maxpool_oracle([3, 3], [1, 0, 0, 1])
    mp("idx_col", x(2, 3, 6, 7), outputs=("Y", "I"), storage_order=1, strides=[2, 2], **ks3)
    mp("idx_dil", x(1, 2, 9, 8), outputs=("Y", "I"), dilations=[2, 2], pads=[1, 2, 1, 2], **ks3)
    mp("idx_1d", x(2, 2, 9), outputs=("Y", "I"), kernel_shape=[3], strides=[2])
    mp("idx_3d", x(1, 2, 4, 5, 6), outputs=("Y", "I"), kernel_shape=[2, 2, 3], pads=[0, 1, 1, 1, 0, 1])
    c[-1].oracle = maxpool_oracle([2, 2, 3], [0, 1, 1, 1, 0, 1])
    mp("idx_3d_col", x(1, 2, 4, 5, 6), outputs=("Y", "I"), kernel_shape=[2, 3, 2], storage_order=1)
    c[-1].oracle = maxpool_oracle([2, 3, 2], [0] * 6, col_major=True)
    mp("idx_opset8", x(1, 1, 5, 5), opset=8, outputs=("Y", "I"), **ks2)
    c[-1].oracle = maxpool_oracle([2, 2], [0] * 4)
    mp("idx_unwired", x(1, 2, 6, 6), outputs=("Y", ""), **ks2)
    mp("ties", np.ones((1, 2, 5, 5), np.float32), outputs=("Y", "I"), pads=[1, 1, 1, 1], **ks3)
    c[-1].oracle = maxpool_oracle([3, 3], [1] * 4)
    mp("empty_n", x(0, 2, 5, 5), outputs=("Y", "I"), **ks2)
    # A span (in + pads - kernel) in (-stride, 0) still gives one window (ORT divides as C does).
    mp("span_negative", x(1, 2, 2, 5), kernel_shape=[3, 2], strides=[2, 1])
    c[-1].oracle = maxpool_oracle([3, 2], [0] * 4, [2, 1], y_only=True)
    mp("span_negative_ceil", x(1, 2, 3, 5), kernel_shape=[5, 2], strides=[3, 1], ceil_mode=1)
    c[-1].oracle = maxpool_oracle([5, 2], [0] * 4, [3, 1], y_only=True)
    mp("span_zero_windows", x(1, 2, 1, 5), kernel_shape=[4, 2], strides=[2, 1])
    c[-1].oracle = maxpool_oracle([4, 2], [0] * 4, [2, 1], y_only=True)
    # A window whose taps all fall in the padding: ORT gives the lowest float and an index from -1s.
    mp("no_tap", x(1, 1, 1, 3), outputs=("Y", "I"), kernel_shape=[2, 1], pads=[1, 0, 1, 0], dilations=[2, 1])
    c[-1].oracle = lambda xv: [np.full((1, 1, 1, 3), -np.finfo(np.float32).max, np.float32),
                               np.full((1, 1, 1, 3), -4, np.int64)]
    xn = x(1, 1, 4, 4)
    xn[0, 0, 1, 1] = np.nan
    mp("nan", xn, outputs=("Y", "I"), strides=[1, 1], **ks2)
    c[-1].ort_differs = NAN_MAX
    c[-1].oracle = maxpool_oracle([2, 2], [0] * 4)

    ap("default", x(2, 3, 6, 7), opset=7, **ks2)
    ap("strides", x(1, 2, 9, 8), kernel_shape=[3, 2], strides=[2, 3], opset=10)
    ap("pads", x(1, 2, 5, 6), pads=[1, 2, 2, 1], opset=11, **ks3)
    ap("pads_incl", x(1, 2, 5, 6), pads=[1, 2, 2, 1], count_include_pad=1, **ks3)
    ap("ceil", x(1, 1, 6, 7), strides=[2, 2], ceil_mode=1, **ks3)
    ap("ceil_incl", x(1, 1, 6, 7), strides=[2, 2], ceil_mode=1, count_include_pad=1, pads=[1, 1, 1, 1], **ks3)
    ap("ceil_incl_1d", x(1, 2, 6), kernel_shape=[3], strides=[2], ceil_mode=1, count_include_pad=1, pads=[2, 2])
    ap("dilations", x(1, 2, 9, 9), dilations=[2, 3], strides=[1, 2], **ks3)
    ap("dil_pads_incl", x(1, 2, 9, 9), dilations=[2, 2], pads=[2, 1, 1, 2], count_include_pad=1, **ks3)
    ap("dil_ceil_incl", x(1, 2, 10, 9), dilations=[2, 2], strides=[3, 2], pads=[1, 1, 2, 2], ceil_mode=1,
       count_include_pad=1, **ks3)
    ap("same_upper", x(1, 2, 7, 8), auto_pad="SAME_UPPER", strides=[2, 3], **ks3)
    ap("same_lower_incl", x(1, 2, 7, 8), auto_pad="SAME_LOWER", strides=[2, 3], count_include_pad=1, **ks3)
    ap("same_small_kernel", x(1, 2, 7, 9), auto_pad="SAME_UPPER", kernel_shape=[1, 2], strides=[3, 4],
       count_include_pad=1)
    ap("valid", x(1, 2, 7, 9), auto_pad="VALID", strides=[2, 2], **ks3)
    ap("1d", x(2, 3, 11), kernel_shape=[3], strides=[2], pads=[1, 1])
    ap("3d", x(1, 2, 5, 6, 7), kernel_shape=[2, 3, 2], strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 1])
    ap("3d_incl_ceil", x(1, 1, 7, 6, 5), kernel_shape=[3, 2, 2], strides=[2, 2, 2], pads=[1, 1, 1, 1, 1, 1],
       count_include_pad=1, ceil_mode=1)
    ap("opset22", x(1, 2, 6, 6), opset=22, pads=[1, 1, 1, 1], **ks3)
    ap("big", x(2, 16, 40, 40), strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1, **ks3)
    ap("empty_n", x(0, 2, 5, 5), **ks2)

    for i, xin in enumerate([x(2, 3, 4, 5), x(1, 2, 7), x(2, 2, 2, 3, 2), x(3, 2, 1, 1), x(0, 3, 2, 2),
                             x(1, 4, 33, 35)]):
        c.append(Case(f"gavgpool_{i}", "GlobalAveragePool", 1 if i % 2 else 22, [xin],
                      oracle=lambda v: [v.mean(axis=tuple(range(2, v.ndim)), keepdims=True, dtype=np.float64)
                                        .astype(np.float32)]))
    c.append(Case("gavgpool_rank2", "GlobalAveragePool", 1, [x(2, 3)], expect="refused", match="rank 2"))
    c.append(Case("gavgpool_no_spatial", "GlobalAveragePool", 1, [x(2, 3, 0)], expect="error", match="no spatial"))

    c.append(Case("maxpool_pad_ge_kernel", "MaxPool", 12, [x(1, 1, 5, 5)], attrs={**ks2, "pads": [2, 0, 0, 0]},
                  expect="refused", match="smaller than its kernel"))
    c.append(Case("maxpool_no_kernel", "MaxPool", 12, [x(1, 1, 5, 5)], expect="refused", match="kernel_shape"))
    c.append(Case("maxpool_4d", "MaxPool", 12, [x(1, 1, 3, 3, 3, 3)], attrs={"kernel_shape": [2, 2, 2, 2]},
                  expect="refused", match="kernel_shape"))
    c.append(Case("maxpool_rank_mismatch", "MaxPool", 12, [x(1, 1, 5, 5)], attrs={"kernel_shape": [2]},
                  expect="refused", match="rank 4"))
    c.append(Case("maxpool_int64", "MaxPool", 12, [i64(1, 2, 3).reshape(1, 1, 3)], attrs={"kernel_shape": [2]},
                  expect="refused", match="int64"))
    c.append(Case("maxpool_bad_auto_pad", "MaxPool", 12, [x(1, 1, 5, 5)], attrs={**ks2, "auto_pad": "FULL"},
                  expect="refused", match="FULL"))
    c.append(Case("maxpool_bad_strides", "MaxPool", 12, [x(1, 1, 5, 5)], attrs={**ks2, "strides": [1, 0]},
                  expect="refused", match="strides[1]=0",
                  ort_differs="ORT 1.24's CPU EP dies of SIGFPE on this model (1.32 rejects it at load)"))
    c.append(Case("maxpool_storage_order2", "MaxPool", 12, [x(1, 1, 5, 5)], attrs={**ks2, "storage_order": 2},
                  expect="refused", match="storage_order"))
    c.append(Case("maxpool_indices_opset7", "MaxPool", 7, [x(1, 1, 5, 5)], attrs=ks2, outputs=["Y", "I"],
                  out_dtypes=(1, 7), expect="refused", match="at most 1 output"))
    c.append(Case("avgpool_double", "AveragePool", 19, [x(1, 1, 5, 5).astype(np.float64)], attrs=ks2,
                  expect="refused", match="double"))
    c.append(Case("maxpool_too_small", "MaxPool", 12, [x(1, 1, 2, 5)], attrs={"kernel_shape": [4, 2]},
                  expect="error", match="smaller than the dilated kernel"))
    c.append(Case("maxpool_rank_unknown", "MaxPool", 12, [x(1, 1, 5, 5)], attrs={"kernel_shape": [2]},
                  unknown=(0,), expect="error", match="rank 3"))
    c.append(Case("avgpool_empty_c", "AveragePool", 19, [x(1, 0, 5, 5)], attrs=ks2, expect="error",
                  match="empty in a dim other than N"))
    return c


def bn_oracle(eps):
    def f(xv, scale, b, mean, var):
        shape = (1, -1) + (1,) * (xv.ndim - 2)
        y = (xv - mean.reshape(shape)) / np.sqrt(var.reshape(shape).astype(np.float64) + eps) * scale.reshape(shape)
        return [(y + b.reshape(shape)).astype(np.float32)]
    return f


def norm_cases():
    """BatchNormalization (inference) and InstanceNormalization."""
    c = []
    rng = np.random.default_rng(17)   # its own stream: the other groups' inputs stay as they were

    def x(*shape, scale=1.0):
        return np.asarray(rng.standard_normal(shape) * scale, dtype=np.float32)

    def stats(ch):
        return [x(ch), x(ch), x(ch), np.asarray(rng.uniform(0.1, 2.0, ch), dtype=np.float32)]

    def bn(name, xin, opset=15, const=(1, 2, 3, 4), **attrs):
        # Before opset 14 the reference errs: opsets 6-8 return a tuple, 9-13 apply the default momentum's
        # batch statistics.
        c.append(Case(f"batchnorm_{name}", "BatchNormalization", opset, [xin] + stats(xin.shape[1]), attrs=attrs,
                      const=const, oracle=bn_oracle(attrs.get("epsilon", 1e-5)) if opset < 14 else None))

    bn("4d", x(2, 3, 4, 5))
    bn("2d", x(5, 7), opset=9)
    bn("3d_mode0", x(2, 4, 6), opset=14, training_mode=0)
    bn("5d", x(1, 3, 2, 3, 4), opset=7, const=())
    bn("opset6", x(2, 3, 4, 4), opset=6, is_test=1, epsilon=1e-3, momentum=0.9)
    bn("opset6_spatial", x(2, 3, 4, 4), opset=6, is_test=1, spatial=1)
    bn("eps", x(2, 3, 4, 5), epsilon=0.1)
    bn("big", x(4, 32, 17, 19, scale=50.0), const=(1, 3))
    bn("empty_n", x(0, 3, 4, 5))
    bn("one_output_wired", x(2, 3, 4), opset=15)
    c[-1].outputs = ["Y", "", ""]
    c.append(Case("batchnorm_training", "BatchNormalization", 15, [x(2, 3, 4)] + stats(3),
                  attrs={"training_mode": 1}, outputs=["Y", "rm", "rv"], expect="refused", match="training"))
    c.append(Case("batchnorm_training_outputs_9", "BatchNormalization", 9, [x(2, 3, 4)] + stats(3),
                  outputs=["Y", "m", "v", "sm", "sv"], expect="refused", match="training statistic"))
    c.append(Case("batchnorm_opset6_train", "BatchNormalization", 6, [x(2, 3, 4)] + stats(3), expect="refused",
                  match="is_test=0"))
    c.append(Case("batchnorm_spatial0", "BatchNormalization", 7, [x(2, 3, 4)] + stats(3), attrs={"spatial": 0},
                  expect="refused", match="spatial=0"))
    c.append(Case("batchnorm_double", "BatchNormalization", 15, [x(2, 3).astype(np.float64)] + stats(3),
                  expect="refused", match="double"))
    c.append(Case("batchnorm_rank1", "BatchNormalization", 15, [x(3)] + stats(3), expect="refused", match="rank 1"))
    c.append(Case("batchnorm_bad_scale", "BatchNormalization", 15, [x(2, 3, 4), x(4)] + stats(3)[1:],
                  expect="error", match="scale [4] must be [3]"))

    def inorm(name, xin, opset=22, const=(1, 2), **attrs):
        ch = xin.shape[1]
        c.append(Case(f"instnorm_{name}", "InstanceNormalization", opset, [xin, x(ch), x(ch)], attrs=attrs,
                      const=const))

    inorm("4d", x(2, 3, 4, 5))
    inorm("opset6", x(2, 3, 4, 5), opset=6, const=())
    inorm("3d", x(3, 2, 17))
    inorm("5d", x(1, 2, 3, 4, 5), epsilon=1e-2)
    inorm("eps", x(2, 3, 4, 5, scale=1e-2), epsilon=0.5)
    inorm("one_position", x(2, 3, 1, 1))
    c[-1].ort_differs = "ORT's CPU EP folds the mean into the shift: a one-element plane gives B to ~1e-4 only"
    inorm("offset", x(2, 4, 64) + 1000.0)
    c[-1].ort_differs = "ORT's CPU EP takes the mean and variance in float; at |x| ~ 1000 it drifts by ~1e-3"
    inorm("wide", x(1, 4, 96, 96))
    inorm("empty_n", x(0, 3, 4, 5))
    inorm("empty_plane", x(2, 3, 0, 5))
    c[-1].oracle = lambda v, s, b: [v.copy()]
    c.append(Case("instnorm_double", "InstanceNormalization", 22, [x(2, 3, 4).astype(np.float64), x(3), x(3)],
                  expect="refused", match="double"))
    c.append(Case("instnorm_rank2", "InstanceNormalization", 22, [x(2, 3), x(3), x(3)], expect="refused",
                  match="rank 2"))
    c.append(Case("instnorm_bad_b", "InstanceNormalization", 22, [x(2, 3, 4), x(3), x(2)], expect="error",
                  match="B [2] must be [3]"))
    return c


def convt_oracle(strides=None, dilations=None, pads=None, output_padding=None, output_shape=None, auto_pad="NOTSET",
                 group=1, **_):
    """ConvTranspose in float64 with ORT's CPU EP's extents and pads (onnx.reference fails on groups, on
    output_shape beyond the natural extent and on empty batches, and splits odd SAME pads the other way)."""
    def f(xv, w, b=None):
        sr = xv.ndim - 2
        st, dil = strides or [1] * sr, dilations or [1] * sr
        adj, pd = output_padding or [0] * sr, pads or [0] * (2 * sr)
        heads, outs = [], []
        for d in range(sr):
            natural = (xv.shape[2 + d] - 1) * st[d] + adj[d] + (w.shape[2 + d] - 1) * dil[d] + 1
            if output_shape:
                want = output_shape[d if len(output_shape) == sr else d + 2]
                total = max(0, natural - want)
            elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                total = max(0, natural - xv.shape[2 + d] * st[d])
                want = natural - total
            else:
                heads.append(pd[d])
                outs.append(natural - pd[d] - pd[sr + d])
                continue
            heads.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
            outs.append(want)
        cg, mg = xv.shape[1] // group, w.shape[1]
        y = np.zeros((xv.shape[0], mg * group, *outs))
        for k in np.ndindex(*w.shape[2:]):
            idx_in, idx_out = [], []
            for d in range(sr):
                o = np.arange(xv.shape[2 + d]) * st[d] - heads[d] + k[d] * dil[d]
                ok = (o >= 0) & (o < outs[d])
                idx_in.append(np.nonzero(ok)[0])
                idx_out.append(o[ok])
            for g in range(group):
                xs = xv[:, g * cg:(g + 1) * cg][(slice(None), slice(None)) + np.ix_(*idx_in)].astype(np.float64)
                wk = w[(slice(g * cg, (g + 1) * cg), slice(None)) + k].astype(np.float64)
                part = np.einsum("nc...,cm->nm...", xs, wk)
                y[(slice(None), slice(g * mg, (g + 1) * mg)) + np.ix_(*idx_out)] += part
        if b is not None:
            y += b.reshape((1, -1) + (1,) * sr)
        return [y.astype(np.float32)]
    return f


def convtranspose_cases():
    c = []
    rng = np.random.default_rng(18)   # its own stream: the other groups' inputs stay as they were

    def x(*shape):
        return np.asarray(rng.standard_normal(shape), dtype=np.float32)

    def add(name, xin, w, b=None, opset=11, const=(1, 2), **attrs):
        ins = [xin, w] + ([b] if b is not None else [])
        c.append(Case(f"convt_{name}", "ConvTranspose", opset, ins, attrs=attrs, const=const,
                      oracle=convt_oracle(**attrs)))

    add("basic", x(1, 1, 3, 3), x(1, 2, 3, 3))
    add("bias", x(2, 3, 4, 5), x(3, 4, 3, 3), x(4), const=())
    add("strides", x(1, 2, 4, 5), x(2, 3, 3, 3), x(3), strides=[2, 3])
    add("pads", x(1, 2, 5, 5), x(2, 3, 3, 3), pads=[1, 2, 0, 1], strides=[2, 2])
    add("dilations", x(1, 2, 4, 4), x(2, 2, 3, 2), x(2), dilations=[2, 3])
    add("group2", x(2, 4, 3, 4), x(4, 3, 2, 2), x(6), group=2, strides=[2, 2])
    add("depthwise", x(1, 3, 5, 5), x(3, 1, 3, 3), x(3), group=3, strides=[2, 2], pads=[1, 1, 1, 1])
    add("output_padding", x(1, 2, 3, 3), x(2, 2, 3, 3), strides=[3, 2], output_padding=[1, 1])
    add("output_shape", x(1, 1, 3, 3), x(1, 2, 3, 3), strides=[3, 2], output_shape=[10, 8])
    add("output_shape_full", x(1, 1, 3, 3), x(1, 2, 3, 3), strides=[3, 2], output_shape=[1, 2, 9, 7])
    add("output_shape_upper", x(1, 1, 3, 3), x(1, 2, 3, 3), strides=[3, 2], output_shape=[8, 6],
        auto_pad="SAME_UPPER")
    add("output_shape_padding", x(1, 1, 3, 4), x(1, 2, 3, 3), strides=[2, 2], output_shape=[6, 8],
        output_padding=[1, 1])
    add("output_shape_stride_past", x(1, 1, 3, 3), x(1, 2, 3, 3), strides=[3, 3], output_shape=[11, 10],
        output_padding=[1, 0])
    add("same_upper", x(1, 2, 3, 4), x(2, 2, 3, 3), x(2), auto_pad="SAME_UPPER", strides=[2, 2])
    add("same_lower", x(1, 2, 3, 4), x(2, 2, 3, 3), auto_pad="SAME_LOWER", strides=[2, 2])
    add("same_upper_odd", x(1, 1, 4, 3), x(1, 1, 4, 2), auto_pad="SAME_UPPER", strides=[1, 1])
    add("same_small_kernel", x(1, 1, 3, 3), x(1, 1, 1, 2), auto_pad="SAME_UPPER", strides=[3, 3])
    add("valid", x(1, 2, 3, 3), x(2, 2, 3, 3), auto_pad="VALID", strides=[2, 2])
    add("kernel_shape", x(1, 2, 3, 3), x(2, 1, 2, 3), kernel_shape=[2, 3])
    add("1d", x(2, 3, 7), x(3, 2, 3), x(2), strides=[2], pads=[1, 0])
    add("1d_group", x(1, 4, 5), x(4, 1, 2), group=2, dilations=[2])
    add("3d", x(1, 2, 3, 4, 3), x(2, 2, 2, 3, 2), x(2), strides=[2, 1, 2], pads=[1, 0, 0, 0, 1, 1])
    add("opset1", x(1, 2, 3, 3), x(2, 2, 2, 2), x(2), opset=1)
    add("opset22", x(1, 2, 3, 3), x(2, 2, 2, 2), opset=22, strides=[2, 2])
    add("upsample", x(1, 16, 20, 20), x(16, 8, 2, 2), x(8), strides=[2, 2])
    add("tiled", x(1, 8, 100, 100), x(8, 64, 3, 3), strides=[1, 1], pads=[1, 1, 1, 1])   # > 4M-float columns
    add("empty_n", x(0, 2, 3, 3), x(2, 2, 2, 2), x(2))
    c.append(Case("convt_empty_channels", "ConvTranspose", 11, [x(1, 0, 3, 3), x(0, 2, 2, 2), x(2)], const=(1, 2),
                  oracle=lambda xv, w, b: [np.broadcast_to(b.reshape(1, 2, 1, 1), (1, 2, 4, 4)).copy()],
                  ort_differs="an empty constant W fails session creation under real ORT (issue 16, item 2)"))
    c.append(Case("convt_unknown_x", "ConvTranspose", 11, [x(1, 2, 3, 3), x(2, 3, 2, 2)], unknown=(0,),
                  attrs={"strides": [2, 2]}, oracle=convt_oracle(strides=[2, 2])))
    c.append(Case("convt_4d", "ConvTranspose", 11, [x(1, 1, 2, 2, 2, 2), x(1, 1, 1, 1, 1, 1)], expect="refused",
                  match="rank 6"))
    c.append(Case("convt_double", "ConvTranspose", 11, [x(1, 1, 3, 3).astype(np.float64), x(1, 1, 2, 2)],
                  expect="refused", match="double"))
    c.append(Case("convt_bad_auto_pad", "ConvTranspose", 11, [x(1, 1, 3, 3), x(1, 1, 2, 2)],
                  attrs={"auto_pad": "FULL"}, expect="refused", match="FULL"))
    c.append(Case("convt_bad_output_shape", "ConvTranspose", 11, [x(1, 1, 3, 3), x(1, 1, 2, 2)],
                  attrs={"output_shape": [1, 4, 4]}, expect="refused", match="output_shape has 3"))
    c.append(Case("convt_negative_output_padding", "ConvTranspose", 11, [x(1, 1, 3, 3), x(1, 1, 2, 2)],
                  attrs={"output_padding": [0, -1]}, expect="refused", match="output_padding[1]=-1"))
    c.append(Case("convt_group_mismatch", "ConvTranspose", 11, [x(1, 3, 3, 3), x(3, 1, 2, 2)], attrs={"group": 2},
                  expect="error", match="group=2"))
    c.append(Case("convt_w_mismatch", "ConvTranspose", 11, [x(1, 3, 3, 3), x(2, 1, 2, 2)], expect="error",
                  match="W.dims[0] = C"))
    c.append(Case("convt_kernel_shape_mismatch", "ConvTranspose", 11, [x(1, 1, 3, 3), x(1, 1, 2, 2)],
                  attrs={"kernel_shape": [3, 3]}, expect="error", match="kernel_shape"))
    c.append(Case("convt_bad_bias", "ConvTranspose", 11, [x(1, 1, 3, 3), x(1, 2, 2, 2), x(3)], expect="error",
                  match="bias"))
    c.append(Case("convt_no_output", "ConvTranspose", 11, [x(1, 1, 2, 2), x(1, 1, 2, 2)],
                  attrs={"pads": [2, 0, 2, 0]}, expect="error", match="must be > 0"))
    c.append(Case("convt_output_shape_too_big", "ConvTranspose", 11, [x(1, 2, 3, 3), x(2, 2, 2, 2)],
                  attrs={"output_shape": [6, 4]}, expect="error", match="output_shape asks axis 0 for 6"))
    c.append(Case("convt_output_shape_zero", "ConvTranspose", 11, [x(1, 2, 3, 3), x(2, 2, 2, 2)],
                  attrs={"output_shape": [3, 0]}, expect="error", match="output_shape asks axis 1 for 0"))
    c.append(Case("convt_output_padding_stride", "ConvTranspose", 11, [x(1, 2, 3, 3), x(2, 2, 2, 2)],
                  attrs={"output_padding": [1, 2], "strides": [2, 2]}, expect="error",
                  match="output_padding[1]=2 must be less than max(stride, dilation)=2"))
    return c


def lstm_oracle(hidden, direction="forward"):
    """LSTM in float64 (onnx.reference's LSTM runs one direction only)."""
    def f(xv, w, r, b=None, seq_lens=None, h0=None, c0=None, p=None):
        del seq_lens
        dirs, seq, batch = w.shape[0], xv.shape[0], xv.shape[1]
        sig = lambda v: 1.0 / (1.0 + np.exp(-v))   # noqa: E731
        y = np.zeros((seq, dirs, batch, hidden))
        yh, yc = np.zeros((dirs, batch, hidden)), np.zeros((dirs, batch, hidden))
        for d in range(dirs):
            wd, rd = w[d].astype(np.float64), r[d].astype(np.float64)
            bias = b[d, :4 * hidden] + b[d, 4 * hidden:] if b is not None else np.zeros(4 * hidden)
            pi, po, pf = (p[d, :hidden], p[d, hidden:2 * hidden], p[d, 2 * hidden:]) if p is not None else (0, 0, 0)
            h = h0[d].astype(np.float64) if h0 is not None else np.zeros((batch, hidden))
            c = c0[d].astype(np.float64) if c0 is not None else np.zeros((batch, hidden))
            steps = range(seq - 1, -1, -1) if d == 1 or direction == "reverse" else range(seq)
            for t in steps:
                g = xv[t] @ wd.T + h @ rd.T + bias
                gi, go, gf, gc = np.split(g, 4, axis=1)
                i, fg = sig(gi + pi * c), sig(gf + pf * c)
                c = fg * c + i * np.tanh(gc)
                h = sig(go + po * c) * np.tanh(c)
                y[t, d] = h
            yh[d], yc[d] = h, c
        return [a.astype(np.float32) for a in (y, yh, yc)]
    return f


def lstm_cases():
    c = []
    rng = np.random.default_rng(19)   # its own stream: the other groups' inputs stay as they were

    def x(*shape, scale=0.5):
        return np.asarray(rng.standard_normal(shape) * scale, dtype=np.float32)

    def add(name, seq, batch, inp, hidden, direction="forward", bias=False, init=False, peep=False, opset=14,
            outputs=("Y", "Y_h", "Y_c"), const=(1, 2, 3, 7)):
        dirs = 2 if direction == "bidirectional" else 1
        ins = [x(seq, batch, inp), x(dirs, 4 * hidden, inp), x(dirs, 4 * hidden, hidden)]
        ins.append(x(dirs, 8 * hidden) if bias else None)
        ins.append(None)
        ins += [x(dirs, batch, hidden), x(dirs, batch, hidden)] if init else [None, None]
        ins.append(x(dirs, 3 * hidden) if peep else None)
        while ins[-1] is None:
            ins.pop()
        attrs = {"hidden_size": hidden} | ({"direction": direction} if direction != "forward" else {})
        full = lstm_oracle(hidden, direction)
        want = [i for i, o in enumerate(outputs) if o]
        # the oracle takes the inputs by position, absent ones included (reference() drops those)
        c.append(Case(f"lstm_{name}", "LSTM", opset, ins, attrs=attrs, outputs=list(outputs), const=const,
                      oracle=lambda *_, ins=ins, full=full, want=want: [full(*ins)[i] for i in want]))

    add("forward", 5, 3, 4, 6)
    add("bias_init", 4, 2, 3, 5, bias=True, init=True)
    add("reverse", 5, 3, 4, 6, direction="reverse", bias=True)
    add("bidirectional", 6, 2, 5, 4, direction="bidirectional", bias=True, init=True)
    add("bidirectional_plain", 3, 1, 2, 3, direction="bidirectional")
    add("peepholes", 5, 2, 3, 4, bias=True, init=True, peep=True)
    add("peepholes_bidirectional", 4, 3, 3, 4, direction="bidirectional", peep=True)
    add("only_y_h", 4, 2, 3, 5, bias=True, outputs=("", "Y_h"))
    add("only_y", 4, 2, 3, 5, outputs=("Y",))
    add("only_y_c", 4, 2, 3, 5, direction="reverse", outputs=("", "", "Y_c"))
    add("one_step", 1, 1, 2, 3, bias=True)
    add("opset7", 3, 2, 3, 4, bias=True, opset=7)
    add("opset22", 3, 2, 3, 4, bias=True, init=True, opset=22, const=())
    add("long", 60, 2, 8, 16, bias=True)
    add("torch_like", 20, 2, 64, 64, direction="bidirectional", bias=True, init=True)
    add("no_batch", 3, 0, 2, 3, bias=True, init=True)
    c[-1].ort_differs = "ORT's CPU EP aborts the process (std::terminate) on an LSTM with batch_size 0"
    add("no_steps", 0, 2, 3, 4, bias=True, init=True)   # ORT: Y_h, Y_c are zeros, not the initial states
    c[-1].oracle = lambda *v: [np.zeros((0, 1, 2, 4), np.float32), np.zeros((1, 2, 4), np.float32),
                               np.zeros((1, 2, 4), np.float32)]
    c[-1].ort_differs = "with seq_length 0 ORT's CPU EP zeroes Y_h but leaves Y_c unwritten (NaN at times)"
    c.append(Case("lstm_unknown_x", "LSTM", 14, [x(3, 2, 4), x(1, 12, 4), x(1, 12, 3)], attrs={"hidden_size": 3},
                  outputs=["Y", "Y_h"], unknown=(0,), oracle=lambda *v: lstm_oracle(3)(*v)[:2]))
    three = [x(2, 1, 2), x(1, 12, 2), x(1, 12, 3)]
    c.append(Case("lstm_seq_lens", "LSTM", 14, three + [None, np.array([2], np.int32)], attrs={"hidden_size": 3},
                  expect="refused", match="sequence_lens"))
    c.append(Case("lstm_layout1", "LSTM", 14, three, attrs={"hidden_size": 3, "layout": 1}, expect="refused",
                  match="layout=1"))
    c.append(Case("lstm_input_forget", "LSTM", 14, three, attrs={"hidden_size": 3, "input_forget": 1},
                  expect="refused", match="input_forget=1"))
    c.append(Case("lstm_clip", "LSTM", 14, three, attrs={"hidden_size": 3, "clip": 5.0}, expect="refused",
                  match="clip"))
    c.append(Case("lstm_activations", "LSTM", 14, three, attrs={"hidden_size": 3, "activations": "Sigmoid"},
                  expect="refused", match="activations"))
    c.append(Case("lstm_bad_direction", "LSTM", 14, three, attrs={"hidden_size": 3, "direction": "sideways"},
                  expect="refused", match="sideways"))
    c.append(Case("lstm_no_hidden_size", "LSTM", 14, three, expect="refused", match="hidden_size"))
    c.append(Case("lstm_double", "LSTM", 14, [three[0].astype(np.float64)] + three[1:], attrs={"hidden_size": 3},
                  expect="refused", match="double"))
    c.append(Case("lstm_bad_r", "LSTM", 14, [x(2, 1, 2), x(1, 12, 2), x(1, 12, 4)], attrs={"hidden_size": 3},
                  expect="error", match="R [1,12,4] must be [1,12,3]"))
    c.append(Case("lstm_bad_init_h", "LSTM", 14, three + [None, None, x(1, 2, 3)], attrs={"hidden_size": 3},
                  expect="error", match="initial_h [1,2,3] must be [1,1,3]"))
    return c


def reduce_more_cases():
    """ReduceMin, ReduceProd, ReduceL2: axes as an attribute (opsets 1-17) and as an input (18), from a generator of
    their own so the other groups' inputs are unchanged."""
    c = []
    rng = np.random.default_rng(16)

    def x(*shape):
        return np.asarray(rng.standard_normal(shape), dtype=np.float32)

    x4 = x(2, 3, 4, 5)
    xn = x(3, 4)
    xn[1, 2] = np.nan
    numpy_of = {"ReduceMin": np.min, "ReduceProd": np.prod,
                "ReduceL2": lambda a, axis=None, keepdims=False: np.sqrt(np.sum(a.astype(np.float64) ** 2, axis=axis,
                                                                                 keepdims=keepdims))}
    axes_sets = [None, [1], [0, 2], [-1], [3, 1], [0, 1, 2, 3], [-4, 2]]
    for op, attr_opset in (("ReduceMin", 13), ("ReduceMin", 1), ("ReduceProd", 13), ("ReduceProd", 11),
                           ("ReduceL2", 13), ("ReduceL2", 1)):
        tag = f"{op}{attr_opset}"
        input_opset = 20 if op == "ReduceMin" and attr_opset == 13 else 18
        for ai, axes in enumerate(axes_sets):
            for keep in (1, 0):
                attrs = {"keepdims": keep}
                attrs_a = dict(attrs, axes=axes) if axes is not None else attrs
                c.append(Case(f"{tag}_a{ai}_k{keep}_attr", op, attr_opset, [x4], attrs=attrs_a))
                ins = [x4] + ([i64(*axes)] if axes is not None else [])
                c.append(Case(f"{tag}_a{ai}_k{keep}_in{input_opset}", op, input_opset, ins, attrs=attrs,
                              const=(1,) if ai % 2 else ()))
        if attr_opset != 13:
            continue
        c.append(Case(f"{op}_scalar", op, 18, [np.array(-2.5, dtype=np.float32)]))
        c.append(Case(f"{op}_noop", op, 18, [x4, i64()], attrs={"noop_with_empty_axes": 1}))
        c.append(Case(f"{op}_empty_axes", op, 18, [x4, i64()]))
        c.append(Case(f"{op}_big", op, 18, [x(64, 1000) * np.float32(0.01 if op == "ReduceProd" else 1) + (
            np.float32(1) if op == "ReduceProd" else 0), i64(1)], attrs={"keepdims": 0}))
        c.append(Case(f"{op}_big0", op, 18, [x(1000, 64), i64(0)]))
        c.append(Case(f"{op}_nan", op, 18, [xn, i64(1)], ort_differs=NAN_MAX if op == "ReduceMin" else ""))
        c.append(Case(f"{op}_dup", op, 18, [x4, i64(1, -3)],
                      oracle=lambda a, _axes, f=numpy_of[op]: [np.asarray(f(a, axis=1, keepdims=True), np.float32)]))
        c.append(Case(f"{op}_oob", op, 18, [x4, i64(4)], expect="error", match="out of range"))
        c.append(Case(f"{op}_attr_oob", op, 13, [x4], attrs={"axes": [-5]}, expect="refused", match="out of range"))
        c.append(Case(f"{op}_int64", op, 18, [i64(1, 2)], expect="refused", match="int64"))
        identity = {"ReduceMin": np.inf, "ReduceProd": 1.0, "ReduceL2": 0.0}[op]
        c.append(Case(f"{op}_empty_dim", op, 18, [x(2, 0, 3), i64(1)],
                      oracle=lambda a, _axes, v=identity: [np.full((2, 1, 3), v, np.float32)]))
    return c


def resize13_asymmetric(x, scales):
    """Resize-10 (linear) as the reference computes Resize-13 with asymmetric coordinates, which it is."""
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear", coordinate_transformation_mode="asymmetric")
    graph = helper.make_graph([node], "r10", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape)),
                                              helper.make_tensor_value_info("s", TensorProto.FLOAT, [len(scales)])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return ReferenceEvaluator(model).run(None, {"x": x, "s": scales})


def resize_linear_cases():
    """Linear Resize on float32 (nearest, and the other dtypes: shape_cases.py): the coordinate transformations,
    scales and sizes, the axis patterns ORT's CPU EP covers (2-D, 3-D, NCHW, NHWC, 5-D) and the ones it refuses."""
    c = []
    rng = np.random.default_rng(17)

    def x(*shape):
        return np.asarray(rng.standard_normal(shape), dtype=np.float32)

    def f32(*v):
        return np.array(v, dtype=np.float32)

    xr = x(1, 2, 4, 6)
    for co in ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"):
        at = {"mode": "linear", "coordinate_transformation_mode": co}
        c.append(Case(f"resize_lin_{co}_up", "Resize", 13, [xr, None, f32(1, 1, 2, 1.5)], attrs=at, const=(2,)))
        c.append(Case(f"resize_lin_{co}_sizes", "Resize", 13, [xr, None, None, i64(1, 2, 3, 13)], attrs=at))
        c.append(Case(f"resize_lin_{co}_sizes_down", "Resize", 19, [xr, None, None, i64(1, 2, 1, 4)], attrs=at))
        if co not in ("align_corners", "pytorch_half_pixel"):   # fractional output lengths: left to the CPU EP
            c.append(Case(f"resize_lin_{co}_down", "Resize", 13, [xr, None, f32(1, 1, 0.5, 0.7)], attrs=at))
    c.append(Case("resize_lin_v10", "Resize", 10, [xr, f32(1, 1, 2, 3)], attrs={"mode": "linear"},
                  oracle=resize13_asymmetric))   # the reference has no opset 10 Resize
    c.append(Case("resize_lin_v11", "Resize", 11, [xr, f32(), f32(1, 1, 1.5, 2)], attrs={"mode": "linear"}))
    c.append(Case("resize_lin_v19_half_pixel_symmetric", "Resize", 19, [xr, None, f32(1, 1, 1.5, 0.8)],
                  attrs={"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"}))
    c.append(Case("resize_lin_v18_axes", "Resize", 18, [xr, None, f32(2.5, 0.5)],
                  attrs={"mode": "linear", "axes": [2, 3]}))
    c.append(Case("resize_lin_2d", "Resize", 13, [x(5, 7), None, f32(1.5, 0.6)], attrs={"mode": "linear"}))
    c.append(Case("resize_lin_3d", "Resize", 13, [x(3, 4, 5), None, f32(2, 0.5, 1.3)], attrs={"mode": "linear"}))
    c.append(Case("resize_lin_nhwc", "Resize", 13, [x(1, 4, 5, 3), None, f32(1, 2, 1.5, 1)],
                  attrs={"mode": "linear"}))
    c.append(Case("resize_lin_5d", "Resize", 13, [x(1, 2, 3, 4, 2), None, f32(1, 1, 2, 0.5, 3)],
                  attrs={"mode": "linear"}))
    c.append(Case("resize_lin_one_pixel", "Resize", 13, [x(1, 1, 1, 1), None, f32(1, 1, 3, 2)],
                  attrs={"mode": "linear"}))
    c.append(Case("resize_lin_big", "Resize", 13, [x(2, 16, 30, 40), None, f32(1, 1, 2, 2)],
                  attrs={"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, const=(2,)))
    c.append(Case("resize_lin_same_size", "Resize", 13, [xr, None, None, i64(1, 2, 4, 6)], attrs={"mode": "linear"}))
    c.append(Case("resize_lin_unknown_shape", "Resize", 13, [xr, None, f32(1, 1, 2, 2)], attrs={"mode": "linear"},
                  unknown=(0,)))
    c.append(Case("resize_lin_err_pattern", "Resize", 13, [xr, None, f32(1, 2, 2, 2)], attrs={"mode": "linear"},
                  expect="error", match="linear mode"))
    c.append(Case("resize_lin_err_1d", "Resize", 13, [x(6), None, f32(2)], attrs={"mode": "linear"},
                  expect="error", match="linear mode"))
    c.append(Case("resize_lin_err_both", "Resize", 13, [xr, None, f32(1, 1, 2, 2), i64(1, 2, 8, 12)],
                  attrs={"mode": "linear"}, expect="error", match="exactly one"))
    c.append(Case("resize_lin_refuse_cubic", "Resize", 13, [xr, None, f32(1, 1, 2, 2)], attrs={"mode": "cubic"},
                  expect="refused", match="cubic"))
    c.append(Case("resize_lin_refuse_align_corners_runtime_scales", "Resize", 13, [xr, None, f32(1, 1, 2, 2)],
                  attrs={"mode": "linear", "coordinate_transformation_mode": "align_corners"}, expect="refused",
                  match="fractional"))
    c.append(Case("resize_lin_refuse_int64", "Resize", 13, [i64(1, 2, 3, 4).reshape(2, 2), None, f32(2, 2)],
                  attrs={"mode": "linear"}, expect="refused", match="int64"))
    return c


ALL = [matmul_cases, gemm_cases, conv_cases, pool_cases, softmax_cases, layernorm_cases, reduce_cases, unary_cases,
       math_cases, activation_cases, compare_cases, mod_cases, window_pool_cases, norm_cases,
       convtranspose_cases, lstm_cases, reduce_more_cases, resize_linear_cases]


# ---- serialisation, reference, comparison -----------------------------------------------------------------


def write_case(f, case: Case):
    present_out = [o for o in case.outputs]
    f.write(f"case {case.name} {case.op} {case.opset} {len(case.inputs)} {len(present_out)}\n")
    for k, v in case.attrs.items():
        if isinstance(v, str):
            f.write(f"attr {k} s {v}\n")
        elif isinstance(v, float):
            f.write(f"attr {k} f {v!r}\n")
        elif isinstance(v, int):
            f.write(f"attr {k} i {v}\n")
        elif all(isinstance(e, int) for e in v):
            f.write(f"attr {k} ints {len(v)} {' '.join(map(str, v))}\n")
        else:
            f.write(f"attr {k} floats {len(v)} {' '.join(repr(float(e)) for e in v)}\n")
    for i, x in enumerate(case.inputs):
        if x is None:
            f.write("in 0\n")
            continue
        dt = DTYPES[x.dtype]
        known = 0 if i in case.unknown else 1
        const = 1 if i in case.const else 0
        dims = " ".join(str(d) for d in x.shape)
        f.write(f"in {dt} {known} {const} {x.ndim} {dims}")
        flat = x.ravel().tolist()
        if x.dtype.kind == "f":
            f.write("".join(f" {float(v).hex()}" for v in flat))
        else:
            f.write("".join(f" {int(v)}" for v in flat))
        f.write("\n")
    default = DTYPES[np.dtype(case.out_dtype or np.float32)]
    for i, o in enumerate(present_out):
        dt = case.out_dtypes[i] if i < len(case.out_dtypes) else default
        f.write(f"out {dt if o else 0} {o if o else '-'}\n")
    f.write("end\n")


def reference(case: Case):
    if case.oracle is not None:
        return case.oracle(*[x for x in case.inputs if x is not None])
    names = [f"i{i}" if x is not None else "" for i, x in enumerate(case.inputs)]
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node(case.op, names, list(case.outputs), **case.attrs)
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))
           for n, x in zip(names, case.inputs) if n]
    out_elem = helper.np_dtype_to_tensor_dtype(np.dtype(case.out_dtype or np.float32))
    outs = [helper.make_tensor_value_info(o, out_elem, None) for o in case.outputs if o]
    graph = helper.make_graph([node], case.name, ins, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    feeds = {n: x for n, x in zip(names, case.inputs) if n}
    with np.errstate(all="ignore"):
        return ReferenceEvaluator(model).run(None, feeds)


def parse_results(text):
    results = {}
    cur = None
    for line in text.splitlines():
        parts = line.split(" ")
        if parts[0] == "result":
            cur = {"status": parts[2], "text": " ".join(parts[3:]), "tensors": {}}
            results[parts[1]] = cur
        elif parts[0] == "tensor":
            idx, dtype, rank = int(parts[1]), NP_DTYPE[int(parts[2])], int(parts[3])
            dims = tuple(int(d) for d in parts[4:4 + rank])
            tokens = parts[4 + rank:]
            if dtype.kind == "f":
                vals = np.array([float.fromhex(v) if "0x" in v else float(v) for v in tokens], dtype=np.float64)
            else:
                vals = np.array([int(v) for v in tokens], dtype=object)
            cur["tensors"][idx] = vals.astype(dtype).reshape(dims)
    return results


def compare(case: Case, res) -> str | None:
    if res is None:
        return "no result (the harness stopped)"
    if case.expect != "ok":
        if res["status"] != case.expect:
            return f"expected {case.expect}, got {res['status']}: {res['text']}"
        if case.match and case.match not in res["text"]:
            return f"message {res['text']!r} lacks {case.match!r}"
        return None
    if res["status"] != "ok":
        return f"{res['status']}: {res['text']}"
    ref = reference(case)
    present = [i for i, o in enumerate(case.outputs) if o]
    if sorted(res["tensors"]) != present:
        return f"produced outputs {sorted(res['tensors'])}, expected {present}"
    for want, i in zip(ref, present):
        got = res["tensors"][i]
        dtype = NP_DTYPE[case.out_dtypes[i]] if i < len(case.out_dtypes) else np.dtype(case.out_dtype or np.float32)
        if got.dtype != dtype:
            return f"output {i}: dtype {got.dtype}, expected {dtype}"
        want = np.asarray(want).astype(got.dtype)
        if got.shape != want.shape:
            return f"output {i}: shape {got.shape}, expected {want.shape}"
        if got.dtype.kind != "f":
            if not np.array_equal(got, want):
                j = int(np.flatnonzero(got.ravel() != want.ravel())[0])
                return f"output {i}: differs at flat {j}: got {got.ravel()[j]!r}, want {want.ravel()[j]!r}"
            continue
        # Long dot products cancel: the absolute error follows the size of the terms, not of the result, so
        # atol scales with the output's magnitude.
        finite = np.abs(want[np.isfinite(want)])
        atol = ATOL * max(1.0, float(finite.max()) if finite.size else 1.0)
        if not np.allclose(got, want, rtol=RTOL, atol=atol, equal_nan=True):
            err = np.abs(got.astype(np.float64) - want)
            j = int(np.nanargmax(np.where(np.isnan(err), np.inf, err)))
            return (f"output {i}: max |diff| {np.nanmax(err):.3g} at flat {j}: got {got.ravel()[j]!r}, "
                    f"want {want.ravel()[j]!r}")
    return None


# ---- building and running ---------------------------------------------------------------------------------


def build(variant, build_dir: Path, threaded: bool = False) -> Path:
    """Builds the harness for a variant (harness_build.py: every native/kernels/*.c); blas is plain's build."""
    base = "plain" if variant == "blas" else variant
    if not threaded:
        return harness_build.build("kernel_harness", base, build_dir)
    return harness_build.build("kernel_harness", base, build_dir, extra_flags=harness_build.THREADED_FLAGS,
                               label=f"{base}-threads")


def variant_env(variant: str, threaded: bool = False) -> dict[str, str] | None:
    """The environment a variant runs in (None: blas without the wheel), over harness_build.harness_env."""
    blas = harness_build.wheel_blas() if variant == "blas" else os.environ.get("EPABI_BLAS", "none")
    if blas is None:
        return None
    return harness_build.harness_env(variant, {"EPABI_BLAS": blas, **(harness_build.THREADED_ENV if threaded else {})})


def all_cases(k: str = "") -> list[Case]:
    cases = [c for f in ALL for c in f() if k in c.name]
    names = [c.name for c in cases]
    assert len(set(names)) == len(names), "duplicate case names"
    return cases


def run_cases(exe: Path, variant: str, cases: list[Case], workdir: Path, verbose: bool = False,
              env: dict[str, str] | None = None) -> list[str]:
    """Runs the cases through a built harness in env (default: variant_env(variant)); returns one line per failure
    ("NAME: why"), the harness's own failure (a non-zero exit, e.g. a sanitizer report) as "<harness>: ...".
    Prints each case when verbose."""
    case_file = Path(workdir) / "kernel_cases.txt"
    with open(case_file, "w") as f:
        for c in cases:
            write_case(f, c)
    proc = subprocess.run([str(exe), str(case_file)], capture_output=True, text=True,
                          env=env or variant_env(variant) or harness_build.harness_env(variant))
    failures = []
    results = parse_results(proc.stdout)
    if proc.returncode != 0:
        # The harness flushes after every case: the first case without a result is the one it died in.
        at = next((c.name for c in cases if c.name not in results), "?")
        failures.append(f"<harness>: exited {proc.returncode} in case {at}\n{proc.stderr[-4000:]}")
    for c in cases:
        msg = compare(c, results.get(c.name))
        if msg is not None:
            failures.append(f"{c.name}: {msg}")
        elif verbose:
            res = results[c.name]
            print(f"ok   [{variant}] {c.name}"
                  + (f" ({res['status']}: {res['text']})" if res["status"] != "ok" else ""))
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", action="append", choices=["asan", "plain", "blas", "opt"])
    ap.add_argument("-k", default="", help="only cases whose name contains this")
    ap.add_argument("-v", action="store_true", help="print every case")
    ap.add_argument("--threads", action="store_true", help="on a pool of 3 threads, no minimum work size")
    ap.add_argument("--build-dir", type=Path, help="build here (objects are reused) instead of a temp dir")
    args = ap.parse_args()
    cases = all_cases(args.k)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        build_dir = args.build_dir or Path(tmp)
        for variant in args.variant or ["asan"]:
            env = variant_env(variant, args.threads)
            if env is None:
                print(f"{variant}: the scipy-openblas32 wheel is not installed; skipped")
                continue
            exe = build(variant, build_dir, args.threads)
            failures = run_cases(exe, variant, cases, Path(tmp), args.v, env)
            for line in failures:
                print(f"FAIL [{variant}] {line}")
            bad = len([f for f in failures if not f.startswith("<harness>")])
            print(f"{variant}: {len(cases) - bad}/{len(cases)} cases passed")
            failed += len(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
