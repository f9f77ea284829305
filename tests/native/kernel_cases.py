#!/usr/bin/env python3
"""Checks the math kernels (float32 matmul, conv, pool, softmax, layernorm, reduce; Abs) through kernel_harness.c.

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

DTYPES = {np.dtype(np.float32): 1, np.dtype(np.int64): 7, np.dtype(np.float64): 11, np.dtype(np.int32): 6}


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


RNG = np.random.default_rng(1234)

# We follow numpy and the ONNX reference: a NaN anywhere in a max makes the max NaN. ORT's CPU EP does not
# (GlobalMaxPool ignores NaN; ReduceMax returns NaN only when the NaN comes first).
NAN_MAX = "NaN in a max: ORT's CPU EP does not propagate it"


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


ALL = [matmul_cases, gemm_cases, conv_cases, pool_cases, softmax_cases, layernorm_cases, reduce_cases, unary_cases]


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
        if x.dtype in (np.float32, np.int64):
            flat = x.ravel()
            if x.dtype == np.float32:
                f.write(" " + " ".join(float(v).hex() for v in flat.tolist()) if flat.size else "")
            else:
                f.write(" " + " ".join(str(v) for v in flat.tolist()) if flat.size else "")
        f.write("\n")
    for o in present_out:
        f.write(f"out {1 if o else 0} {o if o else '-'}\n")
    f.write("end\n")


def reference(case: Case):
    if case.oracle is not None:
        return case.oracle(*[x for x in case.inputs if x is not None])
    names = [f"i{i}" if x is not None else "" for i, x in enumerate(case.inputs)]
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node(case.op, names, list(case.outputs), **case.attrs)
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT if x.dtype == np.float32 else TensorProto.INT64,
                                         list(x.shape)) for n, x in zip(names, case.inputs) if n]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in case.outputs if o]
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
            idx, rank = int(parts[1]), int(parts[2])
            dims = tuple(int(d) for d in parts[3:3 + rank])
            vals = np.array([float.fromhex(v) if "0x" in v else float(v) for v in parts[3 + rank:]],
                            dtype=np.float64)
            cur["tensors"][idx] = vals.astype(np.float32).reshape(dims)
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
        want = np.asarray(want, dtype=np.float32)
        if got.shape != want.shape:
            return f"output {i}: shape {got.shape}, expected {want.shape}"
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
