#!/usr/bin/env python3
"""Checks the data-movement kernels (transpose, reshape, squeeze/unsqueeze/identity, expand, concat, slice,
gather, shape; split, flatten, tile, pad, range, constant-of-shape, argmax/argmin, nearest resize) through
shape_harness.c.

Builds the harness (harness_build.py: every native/kernels/*.c plus native/api.c), feeds it every case on
stdin, and compares each result exactly with onnx.reference.ReferenceEvaluator on a one-node model, or with
an explicit expectation where ONNX Runtime (which the plugin follows) and the reference differ; a seeded Slice
fuzz is checked against spec_slice(). Cases that supports() must refuse, or that must fail at run time, are
checked for that outcome. The harness itself aborts on a contract violation (see shape_harness.c).

Usage (from anywhere, in the project venv that has numpy and onnx):
    .venv/bin/python tests/native/shape_cases.py [--variant asan|plain ...] [-k SUBSTRING] [-v]
        [--onnx-backend] [--build-dir DIR]
Variants: asan = AddressSanitizer + UBSan (default), plain = -O2. --onnx-backend adds the ONNX backend node
test cases of these ops (their stored outputs; slow to collect, and tests/test_conformance.py already runs
them through the plugin). Exit status 0 when every case passes.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness_build
from shape_check import DT, I32MAX, I64MAX, I64MIN, Case, run_cases

ALL_DT = [np.float32, np.int32, np.int64, np.bool_, np.uint8, np.int8, np.int16, np.uint16, np.float16, np.float64,
          np.uint32, np.uint64]
OPS = {"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Expand", "Concat", "Slice", "Gather", "Shape",
       "Split", "Flatten", "Tile", "Range", "ConstantOfShape", "Pad", "ArgMax", "ArgMin", "Resize"}


def spec_slice(x, starts, ends, axes=None, steps=None):
    """The spec's clamping plus ONNX Runtime's INT_MAX-end rule (what slice.c implements)."""
    sl = [slice(None)] * x.ndim
    if axes is None:
        axes = range(len(starts))
    if steps is None:
        steps = [1] * len(starts)
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = a + x.ndim if a < 0 else a
        d = x.shape[a]
        if d == 0:
            sl[a] = slice(0, 0)
            continue
        s = s + d if s < 0 else s
        if st < 0 and e in (I32MAX, I64MAX):
            e = -1
        else:
            e = e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
            idx = list(range(s, e, st))
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
            idx = list(range(s, e, st))
        sl[a] = np.array(idx, dtype=np.int64)
    # np.ix_-style indexing one axis at a time keeps it simple
    out = x
    for a, s in enumerate(sl):
        if isinstance(s, np.ndarray):
            out = np.take(out, s, axis=a)
        else:
            out = out[(slice(None),) * a + (s,)]
    return out


def all_cases(substring: str = "") -> list[Case]:
    """The hand-written cases (deterministic: seeded), those whose name contains substring."""
    rng = np.random.default_rng(1234)
    cases = []

    def add(*a, **k):
        cases.append(Case(*a, **k))

    def arr(shape, dtype=np.float32):
        n = int(np.prod(shape)) if len(shape) else 1
        if np.dtype(dtype) == np.bool_:
            return (rng.integers(0, 2, n) == 1).reshape(shape)
        if np.dtype(dtype).kind == "f":
            return rng.standard_normal(n).astype(dtype).reshape(shape)
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True).astype(dtype).reshape(shape)

    def i64(*v):
        return np.array(v, dtype=np.int64)

    def i32(*v):
        return np.array(v, dtype=np.int32)

    # ---- Transpose ------------------------------------------------------------------------------------
    for v in (1, 13, 21, 23, 24, 25):
        add(f"tr_default_v{v}", "Transpose", v, [(arr((2, 3, 4)), "")])
    for dt in ALL_DT:
        add(f"tr_dt_{np.dtype(dt).name}", "Transpose", 13, [(arr((3, 5, 2), dt), "")], {"perm": [2, 0, 1]})
    for perm in itertools.permutations(range(4)):
        add("tr_p4_" + "".join(map(str, perm)), "Transpose", 13, [(arr((2, 3, 4, 5)), "")], {"perm": list(perm)})
    add("tr_scalar", "Transpose", 13, [(np.array(3.5, np.float32), "")])
    add("tr_scalar_perm_empty", "Transpose", 13, [(np.array(7, np.int64), "")], {"perm": []},
        expect=[np.array(7, np.int64)])
    add("tr_1d", "Transpose", 13, [(arr((7,), np.int32), "")])
    add("tr_empty", "Transpose", 13, [(arr((3, 0, 2), np.bool_), "")], {"perm": [2, 1, 0]})
    add("tr_unit_dims", "Transpose", 13, [(arr((1, 5, 1, 3)), "")], {"perm": [3, 1, 0, 2]})
    add("tr_big", "Transpose", 13, [(arr((64, 33, 17)), "")], {"perm": [2, 0, 1]})
    add("tr_rank8", "Transpose", 13, [(arr((2, 1, 3, 2, 1, 2, 3, 2)), "")], {"perm": [7, 0, 6, 1, 5, 2, 4, 3]})
    add("tr_neg_perm", "Transpose", 13, [(arr((2, 3)), "")], {"perm": [-1, 0]}, expect="refused")
    add("tr_dup_perm", "Transpose", 13, [(arr((2, 3)), "")], {"perm": [0, 0]}, expect="refused")
    add("tr_perm_len", "Transpose", 13, [(arr((2, 3)), "")], {"perm": [0, 1, 2]}, expect="refused")
    add("tr_perm_len_runtime", "Transpose", 13, [(arr((2, 3)), "u")], {"perm": [1, 0, 2]}, expect="error")

    # ---- Reshape --------------------------------------------------------------------------------------
    x234 = arr((2, 3, 4))
    for v in (5, 13, 14, 19, 21, 23, 24, 25):
        add(f"rs_basic_v{v}", "Reshape", v, [(x234, ""), (i64(4, -1), "s")])
    for nm, shp in [("m1", (-1,)), ("zero_m1", (0, -1)), ("zeros", (0, 0, 4)), ("flat", (24,)), ("unit", (2, 3, 4, 1)),
                    ("zero_mid", (2, 0, 2, -1)), ("m1_first", (-1, 6))]:
        add(f"rs_{nm}", "Reshape", 13, [(x234, ""), (i64(*shp), "s")])
    add("rs_int32_shape", "Reshape", 13, [(x234, ""), (i32(6, -1), "s")], expect=[x234.reshape(6, -1)])
    add("rs_to_scalar", "Reshape", 13, [(arr((1, 1), np.int64), ""), (np.zeros((0,), np.int64), "s")])
    add("rs_from_scalar", "Reshape", 13, [(np.array(5, np.int32), ""), (i64(1, 1, -1), "s")])
    add("rs_empty_allowzero", "Reshape", 14, [(arr((0, 3)), ""), (i64(3, 0), "s")], {"allowzero": 1})
    add("rs_empty_copyzero", "Reshape", 14, [(arr((0, 3)), ""), (i64(0, 3, 1), "s")])
    add("rs_empty_m1", "Reshape", 14, [(arr((2, 0)), ""), (i64(-1, 5), "s")], expect=[np.zeros((0, 5), np.float32)])
    add("rs_bool", "Reshape", 13, [(arr((4, 6), np.bool_), ""), (i64(3, 8), "s")])
    add("rs_const_shape", "Reshape", 13, [(x234, ""), (i64(12, 2), "sc")])
    add("rs_err_count", "Reshape", 13, [(x234, ""), (i64(5, -1), "s")], expect="error")
    add("rs_err_count2", "Reshape", 13, [(x234, ""), (i64(5, 5), "s")], expect="error")
    add("rs_err_two_m1", "Reshape", 13, [(x234, ""), (i64(-1, -1), "s")], expect="error")
    add("rs_err_neg", "Reshape", 13, [(x234, ""), (i64(-2, 12), "s")], expect="error")
    add("rs_err_zero_oob", "Reshape", 13, [(arr((24,)), ""), (i64(0, 0), "s")], expect="error")
    add("rs_err_allowzero_m1", "Reshape", 14, [(arr((0, 3)), ""), (i64(0, -1), "s")], {"allowzero": 1}, expect="error")
    add("rs_err_2d_shape", "Reshape", 13, [(x234, ""), (np.array([[24]], np.int64), "s")], expect="error")
    add("rs_err_huge", "Reshape", 13, [(x234, ""), (i64(I64MAX, 4), "s")], expect="error")
    add("rs_err_rank9", "Reshape", 13, [(x234, ""), (i64(1, 1, 1, 1, 1, 1, 2, 3, 4), "s")], expect="error")
    add("rs_refuse_float_shape", "Reshape", 13, [(x234, ""), (np.array([24], np.float32), "s")], expect="refused")
    add("rs_refuse_v1", "Reshape", 1, [(x234, "")], {"shape": [24]}, expect="nokernel")

    # ---- Squeeze / Unsqueeze ------------------------------------------------------------------------------
    x1312 = arr((1, 3, 1, 2))
    add("sq_v1_attr", "Squeeze", 1, [(x1312, "")], {"axes": [0, 2]})
    add("sq_v1_none", "Squeeze", 1, [(x1312, "")])
    add("sq_v11_neg", "Squeeze", 11, [(x1312, "")], {"axes": [-2]})
    for v in (13, 21, 23, 24, 25):
        add(f"sq_v{v}_input", "Squeeze", v, [(x1312, ""), (i64(0, -2), "s")])
    add("sq_13_none", "Squeeze", 13, [(x1312, "")])
    add("sq_13_absent", "Squeeze", 13, [(x1312, ""), None])
    add("sq_13_int32", "Squeeze", 13, [(x1312, ""), (i32(2), "s")], expect=[x1312.reshape(1, 3, 2)])
    add("sq_13_empty_axes", "Squeeze", 13, [(x1312, ""), (np.zeros((0,), np.int64), "s")],
        expect=[x1312.reshape(3, 2)])  # ONNX Runtime: an empty axes list squeezes every 1
    add("sq_13_dup", "Squeeze", 13, [(x1312, ""), (i64(0, 0), "s")], expect=[x1312.reshape(3, 1, 2)])
    add("sq_scalar", "Squeeze", 13, [(np.array(2.0, np.float32), "")])
    add("sq_all_ones", "Squeeze", 13, [(arr((1, 1, 1), np.int64), "")])
    add("sq_empty_tensor", "Squeeze", 13, [(arr((1, 0, 1)), "")])
    add("sq_err_not1", "Squeeze", 13, [(x1312, ""), (i64(1), "s")], expect="error")
    add("sq_err_oob", "Squeeze", 13, [(x1312, ""), (i64(4), "s")], expect="error")
    add("sq_err_oob_attr", "Squeeze", 11, [(x1312, "")], {"axes": [-5]}, expect="error")

    x34 = arr((3, 4), np.int64)
    add("usq_v1", "Unsqueeze", 1, [(x34, "")], {"axes": [0]})
    add("usq_v11_neg", "Unsqueeze", 11, [(x34, "")], {"axes": [-1]})
    add("usq_v11_multi", "Unsqueeze", 11, [(x34, "")], {"axes": [0, 3]})
    add("usq_v11_multi2", "Unsqueeze", 11, [(x34, "")], {"axes": [1, -1]})
    for v in (13, 21, 23, 24, 25):
        add(f"usq_v{v}_input", "Unsqueeze", v, [(x34, ""), (i64(3, 0), "s")])
    add("usq_13_unsorted", "Unsqueeze", 13, [(x34, ""), (i64(-1, 1, 0), "s")])
    add("usq_13_int32", "Unsqueeze", 13, [(x34, ""), (i32(1), "s")], expect=[x34.reshape(3, 1, 4)])
    add("usq_13_scalar_axes", "Unsqueeze", 13, [(x34, ""), (np.array(1, np.int64), "s")], expect=[x34.reshape(3, 1, 4)])
    add("usq_scalar", "Unsqueeze", 13, [(np.array(9, np.int32), ""), (i64(0), "s")])
    add("usq_empty", "Unsqueeze", 13, [(arr((0, 2), np.bool_), ""), (i64(1), "s")])
    add("usq_err_dup", "Unsqueeze", 13, [(x34, ""), (i64(0, 0), "s")], expect="error")
    add("usq_err_dup_neg", "Unsqueeze", 13, [(x34, ""), (i64(3, -1), "s")], expect="error")
    add("usq_err_oob", "Unsqueeze", 13, [(x34, ""), (i64(3), "s")], expect="error")
    add("usq_err_rank9", "Unsqueeze", 13, [(arr((1, 1, 1, 1, 1, 1, 1, 1)), ""), (i64(0), "s")], expect="error")
    add("usq_refuse_missing_axes", "Unsqueeze", 13, [(x34, "")], expect="refused")
    add("usq_refuse_missing_attr", "Unsqueeze", 11, [(x34, "")], expect="refused")

    for v in (1, 13, 14, 16, 19, 21, 23, 24, 25):
        add(f"id_v{v}", "Identity", v, [(arr((2, 5)), "")])
    for dt in ALL_DT:
        add(f"id_{np.dtype(dt).name}", "Identity", 16, [(arr((3,), dt), "")])
    add("id_scalar", "Identity", 13, [(np.array(True), "")])
    add("id_empty", "Identity", 13, [(arr((0, 4)), "")])

    # ---- Expand ---------------------------------------------------------------------------------------
    for v in (8, 13):
        add(f"ex_v{v}", "Expand", v, [(arr((3, 1)), ""), (i64(2, 1, 6), "s")])
    for nm, shp, ishp in [("1to4", (4,), (1,)), ("scalar", (2, 3), ()), ("smaller", (1,), (2, 3)),
                          ("bidir", (3, 1), (1, 3)), ("zero_out", (1, 5), (0, 1)), ("to_zero", (0,), (1, 1)),
                          ("same", (2, 3), (2, 3)), ("mid", (2, 4, 3), (2, 1, 3)), ("lead1", (1, 1, 2, 3), (2, 3)),
                          ("big", (50, 300, 7), (1, 300, 1)), ("empty_shape", (), (2, 2)),
                          ("rank8", (2, 1, 2, 1, 2, 1, 2, 3), (1, 2, 1, 2, 1, 1, 3))]:
        for dt in (np.float32, np.int64, np.bool_, np.int32, np.float16, np.int8):
            add(f"ex_{nm}_{np.dtype(dt).name}", "Expand", 13, [(arr(ishp, dt), ""), (i64(*shp), "s")])
    add("ex_int32_shape", "Expand", 13, [(arr((3, 1)), ""), (i32(3, 4), "s")], expect=None)
    cases[-1].expect = [np.broadcast_to(cases[-1].inputs[0][0], (3, 4)).copy()]
    add("ex_err_clash", "Expand", 13, [(arr((2, 3)), ""), (i64(4,), "s")], expect="error")
    add("ex_err_clash0", "Expand", 13, [(arr((2, 3)), ""), (i64(0, 3, 2), "s")], expect="error")
    add("ex_err_neg", "Expand", 13, [(arr((2, 3)), ""), (i64(-1, 3), "s")], expect="error")
    add("ex_err_2d", "Expand", 13, [(arr((2, 3)), ""), (np.array([[2, 3]], np.int64), "s")], expect="error")

    # ---- Concat ---------------------------------------------------------------------------------------
    a23, a21 = arr((2, 3)), arr((2, 1))
    add("cc_v1_default_axis", "Concat", 1, [(a23, ""), (a21, "")], expect=[np.concatenate([a23, a21], 1)])
    add("cc_v4_no_axis", "Concat", 4, [(arr((2, 3)), ""), (arr((2, 1)), "")], expect="refused")
    for v in (4, 11, 13):
        add(f"cc_v{v}", "Concat", v, [(arr((2, 3)), ""), (arr((4, 3)), "")], {"axis": 0})
    for dt in ALL_DT:
        add(f"cc_{np.dtype(dt).name}", "Concat", 13, [(arr((2, 3, 2), dt), ""), (arr((2, 1, 2), dt), ""),
                                                       (arr((2, 4, 2), dt), "")], {"axis": 1})
    for ax in (-3, -2, -1, 0, 1, 2):
        sh = [2, 3, 4]
        ins = []
        for k in range(3):
            s = list(sh)
            s[ax] = k + 1
            ins.append((arr(tuple(s), np.int64), ""))
        add(f"cc_axis{ax}", "Concat", 13, ins, {"axis": ax})
    add("cc_single", "Concat", 13, [(arr((5,)), "")], {"axis": 0})
    add("cc_many", "Concat", 13, [(arr((1, 2), np.int32), "") for _ in range(40)], {"axis": 0})
    add("cc_1d_int64", "Concat", 13,
        [(i64(1, 2), ""), (i64(3), ""), (np.zeros((0,), np.int64), ""), (i64(4, 5, 6), "")], {"axis": 0})
    add("cc_empty_axis", "Concat", 13, [(arr((2, 0)), ""), (arr((2, 3)), ""), (arr((2, 0)), "")], {"axis": 1})
    add("cc_all_empty", "Concat", 13, [(arr((0, 3)), ""), (arr((0, 3)), "")], {"axis": 0})
    add("cc_empty_other", "Concat", 13, [(arr((0, 3)), ""), (arr((0, 3)), "")], {"axis": 1})
    a23 = arr((2, 3))
    add("cc_skip_empty_mismatch", "Concat", 13, [(a23, ""), (np.zeros((0,), np.float32), "")], {"axis": 0},
        expect=[a23])  # ONNX Runtime skips empty inputs that do not match
    add("cc_err_mismatch", "Concat", 13, [(arr((2, 3)), ""), (arr((3, 3)), "")], {"axis": 1}, expect="error")
    add("cc_err_rank", "Concat", 13, [(arr((2, 3)), ""), (arr((2, 3, 1)), "u")], {"axis": 0}, expect="error")
    add("cc_err_axis", "Concat", 13, [(arr((2, 3)), "u"), (arr((2, 3)), "u")], {"axis": 2}, expect="error")
    add("cc_refuse_axis", "Concat", 13, [(arr((2, 3)), ""), (arr((2, 3)), "")], {"axis": -3}, expect="refused")
    add("cc_refuse_dtype", "Concat", 13, [(arr((2, 3)), ""), (arr((2, 3), np.int32), "")], {"axis": 0},
        expect="refused")
    add("cc_big", "Concat", 13, [(arr((40, 70, 9)), ""), (arr((40, 5, 9)), "")], {"axis": 1})

    # ---- Slice ----------------------------------------------------------------------------------------
    x567 = arr((5, 6, 7))

    add("sl_v1", "Slice", 1, [(x567, "")], {"starts": [1, 0], "ends": [3, -1]})
    add("sl_v1_axes", "Slice", 1, [(x567, "")], {"starts": [-2], "ends": [1000], "axes": [2]})
    add("sl_v1_oob", "Slice", 1, [(x567, "")], {"starts": [-100, 4], "ends": [100, 2], "axes": [0, 1]})
    add("sl_v1_refuse_len", "Slice", 1, [(x567, "")], {"starts": [1, 2], "ends": [3]}, expect="refused")
    add("sl_v1_refuse_missing", "Slice", 1, [(x567, "")], {"starts": [1]}, expect="refused")
    for v in (10, 11, 13):
        add(f"sl_v{v}", "Slice", v,
            [(x567, ""), (i64(1, 0), "s"), (i64(4, 6), "s"), (i64(0, 2), "s"), (i64(2, 3), "s")])
    add("sl_neg_axes", "Slice", 13, [(x567, ""), (i64(1), "s"), (i64(-1), "s"), (i64(-2), "s")])
    add("sl_no_axes_steps", "Slice", 13, [(x567, ""), (i64(1, 2, 3), "s"), (i64(4, 5, 6), "s")])
    add("sl_absent_axes", "Slice", 13, [(x567, ""), (i64(0), "s"), (i64(3), "s"), None, (i64(2), "s")])
    add("sl_rev", "Slice", 13, [(x567, ""), (i64(-1), "s"), (i64(I64MIN), "s"), (i64(1), "s"), (i64(-1), "s")])
    add("sl_rev_all", "Slice", 13, [(x567, ""), (i64(-1, -1, -1), "s"), (i64(-I64MAX, -I64MAX, -I64MAX), "s"),
                                     (i64(0, 1, 2), "s"), (i64(-1, -2, -3), "s")])
    add("sl_int32", "Slice", 13, [(x567, ""), (i32(1, -3), "s"), (i32(I32MAX, -1), "s"), (i32(1, 2), "s"),
                                   (i32(2, 1), "s")],
        expect=[x567[:, 1::2, -3:-1]])
    add("sl_empty", "Slice", 13, [(x567, ""), (i64(3), "s"), (i64(1), "s"), (i64(0), "s")])
    add("sl_empty_input", "Slice", 13, [(arr((0, 4)), ""), (i64(0, 1), "s"), (i64(5, 3), "s")])
    add("sl_empty_input_neg", "Slice", 13, [(arr((0, 4)), ""), (i64(-1), "s"), (i64(I64MIN), "s"), (i64(0), "s"),
                                             (i64(-1), "s")])
    add("sl_1d_bool", "Slice", 13, [(arr((9,), np.bool_), ""), (i64(8), "s"), (i64(0), "s"), (i64(0), "s"),
                                     (i64(-3), "s")])
    add("sl_huge_step", "Slice", 13, [(x567, ""), (i64(1), "s"), (i64(I64MAX), "s"), (i64(1), "s"), (i64(I64MAX), "s")])
    add("sl_huge_neg_step", "Slice", 13, [(x567, ""), (i64(-1), "s"), (i64(I64MIN), "s"), (i64(1), "s"),
                                           (i64(I64MIN), "s")])
    add("sl_int64max_end_neg_step", "Slice", 13, [(x567, ""), (i64(4), "s"), (i64(I64MAX), "s"), (i64(0), "s"),
                                                   (i64(-1), "s")],
        expect=[x567[4::-1]])  # ONNX Runtime: INT64_MAX end with a negative step means "to the beginning"
    add("sl_start_below_neg_step", "Slice", 13, [(x567, ""), (i64(-100), "s"), (i64(-200), "s"), (i64(0), "s"),
                                                  (i64(-1), "s")],
        expect=[x567[0:1]])  # spec and ONNX Runtime clamp start to 0 (numpy would give nothing)
    add("sl_err_step0", "Slice", 13, [(x567, ""), (i64(0), "s"), (i64(1), "s"), (i64(0), "s"), (i64(0), "s")],
        expect="error")
    add("sl_err_dup_axes", "Slice", 13, [(x567, ""), (i64(0, 0), "s"), (i64(1, 1), "s"), (i64(0, -3), "s")],
        expect="error")
    add("sl_err_axis_oob", "Slice", 13, [(x567, ""), (i64(0), "s"), (i64(1), "s"), (i64(3), "s")], expect="error")
    add("sl_err_len", "Slice", 13, [(x567, ""), (i64(0, 1), "s"), (i64(1), "s")], expect="error")
    add("sl_refuse_float", "Slice", 13, [(x567, ""), (np.array([0.0], np.float32), "s"), (i64(1), "s")],
        expect="refused")
    # fuzz against the explicit spec model, and against onnx.reference where numpy and the spec agree
    vals = [-9, -7, -6, -5, -2, -1, 0, 1, 2, 4, 5, 6, 7, 9, I64MAX, I64MIN, -I64MAX, I32MAX]
    stepv = [1, 2, 3, 7, -1, -2, -3, -7, I64MAX, I64MIN]
    for i in range(600):
        dt = [np.float32, np.int64, np.int32, np.bool_][i % 4]
        shape = tuple(int(d) for d in rng.integers(0, 7, rng.integers(1, 4)))
        x = arr(shape, dt)
        n = int(rng.integers(1, len(shape) + 1))
        axes = [int(a) for a in rng.permutation(len(shape))[:n]]
        axes = [a - len(shape) if rng.random() < 0.3 else a for a in axes]
        st = [int(rng.choice(vals)) for _ in range(n)]
        en = [int(rng.choice(vals)) for _ in range(n)]
        sp = [int(rng.choice(stepv)) for _ in range(n)]
        exp = [spec_slice(x, st, en, axes, sp)]
        add(f"sl_fuzz{i}", "Slice", 13, [(x, ""), (i64(*st), "s"), (i64(*en), "s"), (i64(*axes), "s"), (i64(*sp), "s")],
            expect=exp)
    for i in range(100):
        shape = tuple(int(d) for d in rng.integers(1, 6, 3))
        x = arr(shape)
        st = [int(v) for v in rng.integers(-7, 7, 3)]
        en = [int(v) for v in rng.integers(-7, 7, 3)]
        sp = [int(v) for v in rng.choice([1, 2, 3, -1, -2], 3)]
        add(f"sl_ref{i}", "Slice", 13,
            [(x, ""), (i64(*st), "s"), (i64(*en), "s"), (i64(0, 1, 2), "s"), (i64(*sp), "s")],
            expect=[spec_slice(x, st, en, [0, 1, 2], sp)])
        ok_with_numpy = all(not (s < -d and p < 0) for s, d, p in zip(st, shape, sp))
        if ok_with_numpy:
            add(f"sl_ref{i}_onnxref", "Slice", 13, cases[-1].inputs)

    # ---- Gather ---------------------------------------------------------------------------------------
    xg = arr((5, 4, 3))
    for v in (1, 11, 13):
        add(f"ga_v{v}", "Gather", v, [(xg, ""), (i64(0, 4, 2), "s")])
    for ax in (-3, -2, -1, 0, 1, 2):
        add(f"ga_axis{ax}", "Gather", 13, [(xg, ""), (i64(1, -1, 0), "s")], {"axis": ax})
        add(f"ga_axis{ax}_i32_2d", "Gather", 13, [(xg, ""), (i32(-2, 1, 0, 2).reshape(2, 2), "s")], {"axis": ax})
        add(f"ga_axis{ax}_scalar_idx", "Gather", 13, [(xg, ""), (np.array(-1, np.int64), "s")], {"axis": ax})
    for dt in ALL_DT:
        add(f"ga_{np.dtype(dt).name}", "Gather", 13, [(arr((6, 2), dt), ""), (i64(5, 0, 5, -6), "s")])
    add("ga_empty_idx", "Gather", 13, [(xg, ""), (np.zeros((0,), np.int64), "s")], {"axis": 1})
    add("ga_empty_data", "Gather", 13, [(arr((3, 0)), ""), (i64(2, 0), "s")])
    add("ga_1d_scalar", "Gather", 13, [(i64(10, 20, 30), ""), (np.array(1, np.int64), "s")])
    add("ga_const_idx", "Gather", 13, [(xg, ""), (i64(3, -5), "cs")])
    add("ga_refuse_const_oob", "Gather", 13, [(xg, ""), (i64(3, 5), "cs")], expect="refused")
    add("ga_refuse_const_oob_neg", "Gather", 13, [(xg, ""), (i32(-6), "cs")], expect="refused")
    add("ga_refuse_idx_float", "Gather", 13, [(xg, ""), (np.array([1.0], np.float32), "s")], expect="refused")
    add("ga_refuse_axis", "Gather", 13, [(xg, ""), (i64(0), "s")], {"axis": 3}, expect="refused")
    add("ga_err_runtime_oob", "Gather", 13, [(xg, ""), (i64(1, 7, -9), "s")], expect="error",
        match="index 7 at position 1 is out of range")
    add("ga_err_runtime_oob_neg_i32", "Gather", 13, [(xg, ""), (i32(0, -6), "s")], {"axis": 0}, expect="error",
        match="index -6 at position 1")
    add("ga_err_scalar_data", "Gather", 13, [(np.array(1.0, np.float32), "u"), (i64(0), "s")], expect="error")
    add("ga_err_rank", "Gather", 13, [(arr((1, 1, 1, 1, 1)), ""), (np.zeros((1, 1, 1, 1, 1), np.int64), "s")],
        expect="error")
    add("ga_big", "Gather", 13, [(arr((1000, 64)), ""), (rng.integers(-1000, 1000, (30, 7)).astype(np.int64), "s")])

    # ---- Shape ----------------------------------------------------------------------------------------
    for v in (1, 13, 15, 19, 21, 23, 24, 25):
        add(f"sh_v{v}", "Shape", v, [(arr((2, 3, 4)), "")])
    add("sh_scalar", "Shape", 13, [(np.array(1, np.int32), "")])
    add("sh_empty", "Shape", 13, [(arr((0, 7), np.bool_), "")])
    for s, e in [(1, None), (None, -1), (-2, None), (-10, 10), (2, 1), (0, 0), (3, 3), (-1, -1), (1, 2)]:
        at = {}
        if s is not None:
            at["start"] = s
        if e is not None:
            at["end"] = e
        add(f"sh15_{s}_{e}", "Shape", 15, [(arr((2, 3, 4)), "")], at)
    add("sh_v13_ignores_start", "Shape", 13, [(arr((2, 3, 4)), "")], {"start": 1},
        expect=[np.array([2, 3, 4], np.int64)])

    cases += movement_cases()
    cases = [c for c in cases if substring in c.name]
    names = [c.name for c in cases]
    assert len(set(names)) == len(names), "duplicate case names"
    return cases


def ort_resize_nearest(x, out_dims, scales, coord="half_pixel", mode="round_prefer_floor"):
    """Nearest Resize as ONNX Runtime's CPU EP computes it: coordinates in float32 (the reference computes them in
    float64, which rounds some ties the other way), opset 10's "simple" rounding, tf_half_pixel_for_nn."""
    f = np.float32
    idx = []
    for d in range(x.ndim):
        n, m, sc = x.shape[d], out_dims[d], f(scales[d])
        o = np.arange(m, dtype=f)
        if sc == 1:
            idx.append(np.arange(m))
            continue
        if coord == "asymmetric":
            c = o / sc
        elif coord == "tf_half_pixel_for_nn":
            c = (o + f(0.5)) / sc
        elif coord == "align_corners":
            c = np.zeros(m, f) if m == 1 else o * f(n - 1) / f(m - 1)
        elif coord == "pytorch_half_pixel" and m <= 1:
            c = np.zeros(m, f)
        else:
            c = (o + f(0.5)) / sc - f(0.5)
        fl = np.floor(c)
        half_up = np.where(c >= 0, fl + (c - fl >= f(0.5)), -np.floor(-c) - ((-c) - np.floor(-c) >= f(0.5)))
        if mode == "simple":
            i = np.ceil(c) if sc < 1 else np.trunc(c)
        elif mode == "floor":
            i = fl
        elif mode == "ceil":
            i = np.ceil(c)
        elif mode == "round_prefer_ceil":
            i = half_up
        else:
            i = np.where(c == np.trunc(c).astype(f) + f(0.5), fl, half_up)
        idx.append(np.clip(i.astype(np.int64), 0, n - 1))
    return x[np.ix_(*idx)]


def movement_cases() -> list[Case]:
    """Split, Flatten, Tile, Pad, Range, ConstantOfShape, ArgMax/ArgMin and nearest Resize, from a generator of their
    own so the other ops' inputs stay as they were. Explicit expectations mark where ONNX Runtime's CPU EP, which
    the kernels follow, and the reference differ (or the reference lacks the case)."""
    rng = np.random.default_rng(16)
    cases = []

    def add(*a, **k):
        cases.append(Case(*a, **k))

    def arr(shape, dtype=np.float32):
        n = int(np.prod(shape)) if len(shape) else 1
        if np.dtype(dtype) == np.bool_:
            return (rng.integers(0, 2, n) == 1).reshape(shape)
        if np.dtype(dtype).kind == "f":
            return rng.standard_normal(n).astype(dtype).reshape(shape)
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), n, endpoint=True).astype(dtype).reshape(shape)

    def i64(*v):
        return np.array(v, dtype=np.int64)

    def i32(*v):
        return np.array(v, dtype=np.int32)

    def f32(*v):
        return np.array(v, dtype=np.float32)

    # ---- Split ----------------------------------------------------------------------------------------
    x64 = arr((6, 4))
    add("sp_v2_attr", "Split", 2, [(x64, "")], {"split": [2, 4]}, nout=2)
    add("sp_v11_neg_axis", "Split", 11, [(x64, "")], {"axis": -1, "split": [1, 3]}, nout=2)
    add("sp_v11_equal", "Split", 11, [(x64, "")], {"axis": 1}, nout=2)
    add("sp_v13_input", "Split", 13, [(x64, ""), (i64(2, 0, 4), "s")], nout=3)
    add("sp_v13_input_const", "Split", 13, [(x64, ""), (i64(1, 3), "sc")], {"axis": 1}, nout=2)
    add("sp_v13_input_i32", "Split", 13, [(x64, ""), (i32(5, 1), "s")], nout=2, expect=[x64[:5], x64[5:]])
    add("sp_v13_empty_input", "Split", 13, [(x64, ""), (np.zeros((0,), np.int64), "s")], nout=3,
        expect=[x64[:2], x64[2:4], x64[4:]])  # ONNX Runtime: an empty split means "not given"
    add("sp_v13_absent_input", "Split", 13, [(x64, ""), None], {"axis": 0}, nout=2)
    add("sp_v18_num_outputs", "Split", 18, [(arr((7, 2)), "")], {"num_outputs": 3}, nout=3)
    x4 = arr((4, 3), np.int32)
    add("sp_v18_num_outputs_empty_last", "Split", 18, [(x4, "")], {"num_outputs": 3}, nout=3,
        expect=[x4[:2], x4[2:4], x4[4:]])
    add("sp_v18_input", "Split", 18, [(x64, ""), (i64(3, 3), "s")], nout=2)
    for dt in ALL_DT:
        add(f"sp_dt_{np.dtype(dt).name}", "Split", 13, [(arr((4, 3, 2), dt), "")], {"axis": 1}, nout=3)
    add("sp_rank8", "Split", 13, [(arr((2, 1, 2, 1, 2, 3, 1, 2)), ""), (i64(1, 2), "s")], {"axis": 5}, nout=2)
    add("sp_empty_axis", "Split", 13, [(arr((0, 3)), "")], nout=2)
    add("sp_empty_outer", "Split", 13, [(arr((0, 4)), ""), (i64(1, 3), "s")], {"axis": 1}, nout=2)
    add("sp_one", "Split", 13, [(x64, "")], nout=1)
    add("sp_many", "Split", 13, [(arr((40, 2), np.int64), "")], nout=40)
    add("sp_big", "Split", 13, [(arr((30, 70, 9)), ""), (i64(20, 50), "s")], {"axis": 1}, nout=2)
    add("sp_err_sum", "Split", 13, [(arr((5,)), ""), (i64(2, 2), "s")], nout=2, expect="error", match="sum")
    add("sp_err_negative", "Split", 13, [(arr((5,)), ""), (i64(-1, 6), "s")], nout=2, expect="error")
    add("sp_err_count", "Split", 13, [(arr((5,)), ""), (i64(1, 1, 3), "s")], nout=2, expect="error")
    add("sp_err_uneven", "Split", 13, [(arr((5,)), "")], nout=2, expect="error", match="evenly")
    add("sp_err_attr_sum", "Split", 11, [(arr((5,)), "")], {"split": [2, 2]}, nout=2, expect="error")
    add("sp_err_num_outputs_negative", "Split", 18, [(arr((5,)), "")], {"num_outputs": 4}, nout=4, expect="error",
        match="negative")
    add("sp_refuse_num_outputs", "Split", 18, [(arr((6,)), "")], {"num_outputs": 2}, nout=3, expect="refused")
    add("sp_refuse_both", "Split", 18, [(arr((6,)), ""), (i64(3, 3), "s")], {"num_outputs": 2}, nout=2,
        expect="refused")
    add("sp_refuse_axis", "Split", 13, [(x64, "")], {"axis": 2}, nout=2, expect="refused")
    add("sp_refuse_attr_count", "Split", 11, [(x64, "")], {"split": [2, 2, 2]}, nout=2, expect="refused")
    add("sp_refuse_float_split", "Split", 13, [(x64, ""), (f32(3, 3), "s")], nout=2, expect="refused")

    # ---- Flatten --------------------------------------------------------------------------------------
    x234 = arr((2, 3, 4))
    for v in (1, 9, 11, 13, 21, 23, 24, 25):
        add(f"fl_v{v}", "Flatten", v, [(x234, "")])
    for ax in (-3, -2, -1, 0, 1, 2, 3):
        add(f"fl_axis{ax}", "Flatten", 13, [(x234, "")], {"axis": ax})
    for dt in ALL_DT:
        add(f"fl_dt_{np.dtype(dt).name}", "Flatten", 13, [(arr((2, 2, 3), dt), "")], {"axis": 2})
    add("fl_scalar", "Flatten", 13, [(np.array(2.5, np.float32), "")], {"axis": 0})
    add("fl_empty", "Flatten", 13, [(arr((0, 3, 2)), "")], {"axis": 2}, expect=[np.zeros((0, 2), np.float32)])
    add("fl_rank8", "Flatten", 13, [(arr((2, 1, 2, 1, 2, 1, 2, 1)), "")], {"axis": 5})
    add("fl_refuse_axis", "Flatten", 13, [(x234, "")], {"axis": 4}, expect="refused")
    add("fl_err_axis_unknown_rank", "Flatten", 13, [(x234, "u")], {"axis": -4}, expect="error")

    # ---- Tile -----------------------------------------------------------------------------------------
    x23 = arr((2, 3))
    for v in (6, 13):
        add(f"tl_v{v}", "Tile", v, [(x23, ""), (i64(2, 1), "s")])
    for dt in ALL_DT:
        add(f"tl_dt_{np.dtype(dt).name}", "Tile", 13, [(arr((2, 1, 2), dt), ""), (i64(1, 2, 3), "s")])
    add("tl_const", "Tile", 13, [(x23, ""), (i64(3, 2), "sc")])
    add("tl_int32_repeats", "Tile", 13, [(x23, ""), (i32(1, 3), "s")], expect=[np.tile(x23, (1, 3))])
    add("tl_zero", "Tile", 13, [(x23, ""), (i64(0, 2), "s")])
    add("tl_ones", "Tile", 13, [(arr((1, 5, 1)), ""), (i64(1, 1, 1), "s")])
    add("tl_scalar", "Tile", 13, [(np.array(7, np.int64), ""), (np.zeros((0,), np.int64), "s")],
        expect=[np.array(7, np.int64)])
    add("tl_empty", "Tile", 13, [(arr((0, 3)), ""), (i64(4, 2), "s")])
    add("tl_rank8", "Tile", 13, [(arr((1, 2, 1, 2, 1, 2, 1, 2)), ""), (i64(2, 1, 2, 1, 3, 1, 1, 2), "s")])
    add("tl_big", "Tile", 13, [(arr((30, 50)), ""), (i64(3, 4), "s")])
    add("tl_inner_one", "Tile", 13, [(arr((4, 1)), ""), (i64(2, 7), "s")])
    add("tl_err_negative", "Tile", 13, [(x23, ""), (i64(1, -1), "s")], expect="error", match="negative")
    add("tl_err_length", "Tile", 13, [(x23, ""), (i64(2), "s")], expect="error")
    add("tl_err_2d", "Tile", 13, [(x23, ""), (np.array([[1, 2]], np.int64), "s")], expect="error")
    add("tl_refuse_float_repeats", "Tile", 13, [(x23, ""), (f32(1, 2), "s")], expect="refused")

    # ---- Pad ------------------------------------------------------------------------------------------
    x34 = arr((3, 4))
    for mode in ("constant", "reflect", "edge"):
        add(f"pd_v2_{mode}", "Pad", 2, [(x34, "")], {"mode": mode, "pads": [1, 2, 2, 1], "value": 1.5})
        add(f"pd_v11_{mode}", "Pad", 11, [(x34, ""), (i64(1, 2, 2, 1), "s")], {"mode": mode})
        add(f"pd_v13_{mode}_const", "Pad", 13, [(x34, ""), (i64(0, 3, 1, 0), "sc")], {"mode": mode})
        add(f"pd_v18_{mode}_axes", "Pad", 18, [(x34, ""), (i64(2, 1), "s"), None, (i64(-1), "s")], {"mode": mode})
    add("pd_v11_value", "Pad", 11, [(x34, ""), (i64(1, 1, 1, 1), "s"), (f32(-7.5), "")])
    add("pd_v2_double", "Pad", 2, [(x34.astype(np.float64), "")], {"pads": [0, 1, 1, 0], "value": 2.0})
    add("pd_v19_wrap", "Pad", 19, [(x34, ""), (i64(1, 2, 2, 3), "s")], {"mode": "wrap"})
    add("pd_v19_wrap_large", "Pad", 19, [(x34, ""), (i64(0, 9, 0, 5), "s")], {"mode": "wrap"},
        expect=[np.pad(x34, ((0, 0), (9, 5)), mode="wrap")])
    add("pd_v21_constant", "Pad", 21, [(x34, ""), (i64(1, 0, 0, 1), "s")])
    for dt in ALL_DT:
        t = np.dtype(dt).name
        xd = arr((2, 3), dt)
        add(f"pd_dt_{t}_value", "Pad", 13, [(xd, ""), (i64(1, 0, 2, 2), "s"), (arr((), dt), "")])
        add(f"pd_dt_{t}_edge", "Pad", 13, [(xd, ""), (i64(0, 2, 1, 1), "s")], {"mode": "edge"})
        add(f"pd_dt_{t}_reflect", "Pad", 13, [(xd, ""), (i64(1, 2, 0, 1), "s")], {"mode": "reflect"})
    x56 = arr((5, 6))
    # negative pads crop, then the padding applies to what is left (ONNX Runtime; the reference pads first)
    add("pd_crop_constant", "Pad", 13, [(x56, ""), (i64(-1, 2, -2, -3), "s")],
        expect=[np.pad(x56[1:3, :3], ((0, 0), (2, 0)))])
    add("pd_crop_reflect", "Pad", 13, [(x56, ""), (i64(-1, -2, 2, 3), "s")], {"mode": "reflect"},
        expect=[np.pad(x56[1:, 2:], ((0, 2), (0, 3)), mode="reflect")])
    add("pd_crop_edge", "Pad", 13, [(x56, ""), (i64(2, -3, 0, 4), "s")], {"mode": "edge"},
        expect=[np.pad(x56[:, 3:], ((2, 0), (0, 4)), mode="edge")])
    add("pd_crop_wrap", "Pad", 19, [(x56, ""), (i64(0, -1, 0, 4), "s")], {"mode": "wrap"},
        expect=[np.pad(x56[:, 1:], ((0, 0), (0, 4)), mode="wrap")])
    add("pd_crop_all", "Pad", 13, [(x56, ""), (i64(0, -3, 0, -3), "s")], expect=[x56[:, 3:3]])
    # a crop past the end leaves only padding: output index o reads input index o - pre (ONNX Runtime)
    add("pd_crop_past_end", "Pad", 13, [(x56, ""), (i64(0, -8, 0, 4), "s"), (f32(2.0), "")],
        expect=[np.full((5, 2), 2.0, np.float32)])
    add("pd_pad_then_crop", "Pad", 13, [(x56, ""), (i64(0, 4, 0, -7), "s")],
        expect=[np.concatenate([np.zeros((5, 3), np.float32), x56[:, :0]], 1)])
    add("pd_pad_then_crop_edge", "Pad", 13, [(x56, ""), (i64(0, 3, 0, -5), "s")], {"mode": "edge"},
        expect=[np.repeat(x56[:, :1], 4, 1)])
    x4d = arr((1, 2, 5, 5))
    add("pd_nchw_constant", "Pad", 13, [(x4d, ""), (i64(0, 0, 1, 1, 0, 0, 1, 1), "s")])
    add("pd_nchw_reflect", "Pad", 13, [(x4d, ""), (i64(0, 0, 2, 2, 0, 0, 2, 2), "s")], {"mode": "reflect"})
    add("pd_nchw_edge", "Pad", 13, [(x4d, ""), (i64(0, 0, 3, 1, 0, 0, 0, 2), "s")], {"mode": "edge"})
    add("pd_1d", "Pad", 13, [(arr((4,), np.int64), ""), (i64(2, 3), "s")], {"mode": "reflect"})
    add("pd_rank8", "Pad", 13, [(arr((1, 2, 1, 2, 1, 2, 1, 2)), ""),
                                (i64(0, 1, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 0, 1, 0), "s")])
    add("pd_big", "Pad", 13, [(arr((3, 64, 65)), ""), (i64(0, 3, 4, 0, 5, 6), "s")], {"mode": "reflect"})
    add("pd_empty_input", "Pad", 13, [(arr((2, 0)), ""), (i64(0, 1, 0, 2), "s"), (f32(5.0), "")],
        expect=[np.full((2, 3), 5.0, np.float32)])
    add("pd_zero_pads", "Pad", 13, [(x34, ""), (i64(0, 0, 0, 0), "s")], {"mode": "reflect"})
    add("pd_dup_axes", "Pad", 18, [(x34, ""), (i64(1, 2, 1, 1), "s"), None, (i64(1, -1), "s")],
        expect=[np.pad(x34, ((0, 0), (2, 1)))])  # ONNX Runtime: an axis named twice takes the later pads
    add("pd_i32_pads", "Pad", 13, [(x34, ""), (i32(1, 0, 0, 1), "s")], expect=[np.pad(x34, ((1, 0), (0, 1)))])
    add("pd_err_reflect_big", "Pad", 13, [(x34, ""), (i64(0, 4, 0, 0), "s")], {"mode": "reflect"}, expect="error",
        match="reflect")
    add("pd_err_reflect_one", "Pad", 13, [(arr((2, 1)), ""), (i64(0, 1, 0, 0), "s")], {"mode": "reflect"},
        expect="error")
    add("pd_err_reflect_after_crop", "Pad", 13, [(x34, ""), (i64(0, -2, 0, 2), "s")], {"mode": "reflect"},
        expect="error")
    add("pd_err_edge_empty", "Pad", 13, [(arr((2, 0)), ""), (i64(0, 1, 0, 1), "s")], {"mode": "edge"},
        expect="error", match="empty")
    add("pd_err_wrap_empty", "Pad", 19, [(arr((2, 0)), ""), (i64(0, 1, 0, 1), "s")], {"mode": "wrap"},
        expect="error")
    add("pd_err_crop", "Pad", 13, [(x34, ""), (i64(0, -3, 0, -2), "s")], expect="error")
    add("pd_err_pads_length", "Pad", 13, [(x34, ""), (i64(0, 1, 0), "s")], expect="error")
    add("pd_err_pads_2d", "Pad", 13, [(x34, ""), (np.array([[0, 1], [0, 1]], np.int64), "s")], expect="error")
    add("pd_err_value_size", "Pad", 13, [(x34, ""), (i64(0, 1, 0, 1), "s"), (f32(1, 2), "")], expect="error")
    add("pd_err_axis", "Pad", 18, [(x34, ""), (i64(1, 1), "s"), None, (i64(2), "s")], expect="error")
    add("pd_refuse_scalar", "Pad", 13, [(np.array(1.0, np.float32), ""), (np.zeros((0,), np.int64), "s")],
        expect="refused")
    add("pd_refuse_wrap_v18", "Pad", 18, [(x34, ""), (i64(0, 1, 0, 1), "s")], {"mode": "wrap"}, expect="refused")
    add("pd_refuse_mode", "Pad", 13, [(x34, ""), (i64(0, 1, 0, 1), "s")], {"mode": "mirror"}, expect="refused")
    add("pd_refuse_float_pads", "Pad", 13, [(x34, ""), (f32(0, 1, 0, 1), "s")], expect="refused")
    add("pd_refuse_value_dtype", "Pad", 13, [(x34, ""), (i64(0, 1, 0, 1), "s"), (i64(3), "")], expect="refused")
    add("pd_refuse_v2_int", "Pad", 2, [(arr((2, 2), np.int32), "")], {"pads": [0, 1, 0, 1]}, expect="refused")

    # ---- Range ----------------------------------------------------------------------------------------
    for dt, (s0, lim, d) in [(np.float32, (0.5, 3.0, 0.5)), (np.float64, (-1.0, 2.0, 0.75)), (np.int16, (1, 9, 3)),
                             (np.int32, (10, 1, -3)), (np.int64, (-5, 5, 1))]:
        t = np.dtype(dt).name
        add(f"ra_{t}", "Range", 11, [(np.array(s0, dt), "s"), (np.array(lim, dt), "s"), (np.array(d, dt), "s")])
        add(f"ra_{t}_empty", "Range", 11, [(np.array(lim, dt), "s"), (np.array(s0, dt), "s"), (np.array(d, dt), "s")])
    # the CPU EP accumulates (value += delta) in float; the reference computes start + i * delta
    acc, v = [], np.float32(0.1)
    for _ in range(int(np.ceil((10.0 - float(np.float32(0.1))) / float(np.float32(0.1))))):   # 99, in double
        acc.append(v)
        v = np.float32(v + np.float32(0.1))
    add("ra_float_accumulates", "Range", 11, [(f32(0.1), "s"), (f32(10.0), "s"), (f32(0.1), "s")],
        expect=[np.array(acc, np.float32)])
    add("ra_const", "Range", 11, [(np.array(0, np.int64), "sc"), (np.array(7, np.int64), "sc"),
                                 (np.array(2, np.int64), "sc")])
    add("ra_v27", "Range", 27, [(np.array(3, np.int32), "s"), (np.array(-3, np.int32), "s"),
                               (np.array(-2, np.int32), "s")], expect=[i32(3, 1, -1)])
    add("ra_shape1", "Range", 11, [(i64(1), "s"), (np.array(4, np.int64), "s"), (np.array(1, np.int64), "s")],
        expect=[i64(1, 2, 3)])
    big = 2 ** 61
    add("ra_int64_big", "Range", 11, [(np.array(-2 * big, np.int64), "s"), (np.array(2 * big, np.int64), "s"),
                                     (np.array(big, np.int64), "s")], expect=[i64(-2 * big, -big, 0, big)])
    add("ra_err_delta0", "Range", 11, [(np.array(1, np.int64), "s"), (np.array(5, np.int64), "s"),
                                      (np.array(0, np.int64), "s")], expect="error", match="zero")
    add("ra_err_nan", "Range", 11, [(f32(0.0).reshape(()), "s"), (np.array(np.nan, np.float32), "s"),
                                   (np.array(1.0, np.float32), "s")], expect="error", match="finite")
    add("ra_err_vector", "Range", 11, [(i64(1, 2), "s"), (np.array(5, np.int64), "s"), (np.array(1, np.int64), "s")],
        expect="error")
    add("ra_refuse_uint8", "Range", 11, [(np.array(1, np.uint8), "s"), (np.array(5, np.uint8), "s"),
                                        (np.array(1, np.uint8), "s")], expect="refused")
    add("ra_refuse_mixed", "Range", 11, [(np.array(1, np.int32), "s"), (np.array(5, np.int64), "s"),
                                        (np.array(1, np.int32), "s")], expect="refused")

    # ---- ConstantOfShape ------------------------------------------------------------------------------
    for v in (9, 20, 21, 23, 24, 25):
        add(f"cos_v{v}", "ConstantOfShape", v, [(i64(2, 3), "s")])
    for dt, val in [(np.float32, -2.5), (np.float64, 1e300), (np.int64, -(2 ** 40)), (np.int32, 7), (np.int8, -3),
                    (np.uint8, 250), (np.int16, -300), (np.uint16, 60000), (np.uint32, 4000000000),
                    (np.uint64, 2 ** 63 + 5), (np.bool_, True), (np.float16, 0.333)]:
        value = onnx.numpy_helper.from_array(np.array([val], dt), "value")
        add(f"cos_{np.dtype(dt).name}", "ConstantOfShape", 20, [(i64(3, 1, 2), "s")], {"value": value})
    one = onnx.numpy_helper.from_array(np.array([4], np.int64), "value")
    add("cos_scalar", "ConstantOfShape", 9, [(np.zeros((0,), np.int64), "s")], {"value": one})
    add("cos_zero_dim", "ConstantOfShape", 9, [(i64(2, 0), "s")], {"value": one})
    add("cos_const_shape", "ConstantOfShape", 9, [(i64(4), "sc")], {"value": one})
    add("cos_int32_shape", "ConstantOfShape", 9, [(i32(2, 2), "s")], {"value": one},
        expect=[np.full((2, 2), 4, np.int64)])
    add("cos_big", "ConstantOfShape", 9, [(i64(300, 301), "s")], {"value": one})
    add("cos_err_negative", "ConstantOfShape", 9, [(i64(2, -1), "s")], expect="error", match="negative")
    add("cos_err_2d", "ConstantOfShape", 9, [(np.array([[2]], np.int64), "s")], expect="error")
    add("cos_refuse_float_shape", "ConstantOfShape", 9, [(f32(2.0), "s")], expect="refused")

    # ---- ArgMax / ArgMin ------------------------------------------------------------------------------
    xa = rng.integers(-3, 4, (3, 4, 5)).astype(np.float32)   # small integers: ties
    for op in ("ArgMax", "ArgMin"):
        p = op[3:].lower()
        for v in (1, 11, 12, 13):
            add(f"am_{p}_v{v}", op, v, [(xa, "")])
        for ax in (-3, -1, 0, 1, 2):
            for keep in (0, 1):
                add(f"am_{p}_ax{ax}_k{keep}", op, 13, [(xa, "")], {"axis": ax, "keepdims": keep})
                add(f"am_{p}_ax{ax}_k{keep}_last", op, 13, [(xa, "")],
                    {"axis": ax, "keepdims": keep, "select_last_index": 1})
        for dt in (np.float64, np.int8, np.uint8, np.int32, np.int64):
            xd = rng.integers(0, 5, (4, 6)).astype(dt)
            add(f"am_{p}_dt_{np.dtype(dt).name}", op, 13, [(xd, "")], {"axis": 1})
            add(f"am_{p}_dt_{np.dtype(dt).name}_last", op, 13, [(xd, "")], {"axis": 0, "select_last_index": 1})
        add(f"am_{p}_big", op, 13, [(arr((64, 300)), "")], {"axis": 1})
        add(f"am_{p}_big0", op, 13, [(arr((300, 64)), "")], {"axis": 0})
        add(f"am_{p}_1d", op, 13, [(arr((7,)), "")], {"keepdims": 0})
        add(f"am_{p}_empty_outer", op, 13, [(arr((0, 3)), "")], {"axis": 1})
        add(f"am_{p}_err_empty_axis", op, 13, [(arr((2, 0)), "")], {"axis": 1}, expect="error", match="empty")
        add(f"am_{p}_refuse_int16", op, 13, [(arr((2, 3), np.int16), "")], expect="refused")
        add(f"am_{p}_refuse_scalar", op, 13, [(np.array(1.0, np.float32), "")], expect="refused")
        add(f"am_{p}_refuse_axis", op, 13, [(xa, "")], {"axis": 3}, expect="refused")
    # NaN: ORT's CPU EP takes a NaN only when it comes first (numpy and the reference take the first NaN)
    xn = np.array([[1, np.nan, 3, 3], [np.nan, 2, 2, 0], [5, 5, 1, 1]], np.float32)
    add("am_max_nan", "ArgMax", 13, [(xn, "")], {"axis": 1}, expect=[i64(2, 0, 0).reshape(3, 1)])
    add("am_max_nan_last", "ArgMax", 13, [(xn, "")], {"axis": 1, "select_last_index": 1},
        expect=[i64(3, 0, 1).reshape(3, 1)])
    add("am_min_nan", "ArgMin", 13, [(xn, "")], {"axis": 1}, expect=[i64(0, 0, 2).reshape(3, 1)])
    add("am_min_nan_last", "ArgMin", 13, [(xn, "")], {"axis": 1, "select_last_index": 1},
        expect=[i64(0, 0, 3).reshape(3, 1)])

    # ---- Resize, nearest ------------------------------------------------------------------------------
    xr = arr((1, 2, 4, 6))
    up, down = f32(1, 1, 2, 1.5), f32(1, 1, 0.5, 0.7)
    for nm in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
        for co in ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "tf_half_pixel_for_nn"):
            at = {"mode": "nearest", "nearest_mode": nm, "coordinate_transformation_mode": co}
            ref = "ref" if co != "tf_half_pixel_for_nn" else None   # the reference lacks it
            add(f"rz_{nm}_{co}_up", "Resize", 13, [(xr, ""), None, (up, "sc")], at,
                expect=ref or [ort_resize_nearest(xr, (1, 2, 8, 9), up, co, nm)])
            add(f"rz_{nm}_{co}_sizes", "Resize", 13, [(xr, ""), None, None, (i64(1, 2, 3, 13), "s")], at,
                expect=ref or [ort_resize_nearest(xr, (1, 2, 3, 13), f32(1, 1, 3 / 4, 13 / 6), co, nm)])
            if co not in ("align_corners", "pytorch_half_pixel"):   # fractional lengths: left to the CPU EP
                add(f"rz_{nm}_{co}_down", "Resize", 13, [(xr, ""), None, (down, "sc")], at,
                    expect=[ort_resize_nearest(xr, (1, 2, 2, 4), down, co, nm)])
    add("rz_v19_half_pixel_symmetric", "Resize", 19, [(xr, ""), None, (f32(1, 1, 1.5, 0.8), "s")],
        {"coordinate_transformation_mode": "half_pixel_symmetric"})
    add("rz_v10_up", "Resize", 10, [(xr, ""), (f32(1, 1, 2, 3), "s")],
        expect=[ort_resize_nearest(xr, (1, 2, 8, 18), f32(1, 1, 2, 3), "asymmetric", "simple")])
    add("rz_v10_down", "Resize", 10, [(xr, ""), (f32(1, 1, 0.5, 0.7), "s")],
        expect=[ort_resize_nearest(xr, (1, 2, 2, 4), f32(1, 1, 0.5, 0.7), "asymmetric", "simple")])
    add("rz_v11_scales", "Resize", 11, [(xr, ""), (np.zeros((0,), np.float32), "s"), (up, "s")])
    add("rz_v11_sizes", "Resize", 11, [(xr, ""), (np.zeros((0,), np.float32), "s"),
                                       (np.zeros((0,), np.float32), "s"), (i64(2, 1, 7, 5), "s")])
    add("rz_v18_axes_scales", "Resize", 18, [(xr, ""), None, (f32(3, 0.5), "s")], {"axes": [2, 3]})
    add("rz_v18_axes_sizes", "Resize", 18, [(xr, ""), None, None, (i64(9, 2), "s")], {"axes": [3, -2]},
        expect=[ort_resize_nearest(xr, (1, 2, 2, 9), f32(1, 1, 2 / 4, 9 / 6))])   # the reference fails on axis -2
    for pol in ("not_larger", "not_smaller"):
        add(f"rz_v18_{pol}", "Resize", 18, [(xr, ""), None, None, (i64(1, 2, 7, 8), "s")],
            {"keep_aspect_ratio_policy": pol})
    for dt in (np.int32, np.int8, np.uint8):
        add(f"rz_dt_{np.dtype(dt).name}", "Resize", 13, [(arr((2, 3, 5), dt), ""), None, (f32(1, 2, 0.6), "s")])
    add("rz_1d", "Resize", 13, [(arr((5,)), ""), None, (f32(2.4), "s")])
    x57 = arr((5, 7))   # 1.4f * 5 is 7 in float (ONNX Runtime's output size), 6.99... in double (the reference)
    add("rz_float_product_size", "Resize", 13, [(x57, ""), None, (f32(1.4, 0.6), "s")],
        expect=[ort_resize_nearest(x57, (7, 4), f32(1.4, 0.6))])
    add("rz_2x_asymmetric_floor", "Resize", 13, [(arr((1, 3, 8, 8)), ""), None, (f32(1, 1, 2, 2), "sc")],
        {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"})
    add("rz_rank5", "Resize", 13, [(arr((1, 2, 3, 2, 4)), ""), None, (f32(1, 1, 2, 0.5, 1.5), "s")])
    add("rz_same_size", "Resize", 13, [(xr, ""), None, (f32(1, 1, 1.1, 1.1), "s")], expect=[xr])  # no-op copy
    add("rz_empty", "Resize", 13, [(arr((1, 0, 4, 4)), ""), None, (f32(1, 1, 2, 2), "s")])
    add("rz_big", "Resize", 13, [(arr((2, 8, 40, 30)), ""), None, (f32(1, 1, 2, 2), "s")])
    add("rz_err_both", "Resize", 13, [(xr, ""), None, (up, "s"), (i64(1, 2, 8, 9), "s")], expect="error")
    add("rz_err_neither", "Resize", 13, [(xr, ""), None, None, None], expect="error")
    add("rz_err_scales_count", "Resize", 13, [(xr, ""), None, (f32(2, 2), "s")], expect="error")
    add("rz_err_scale_zero", "Resize", 13, [(xr, ""), None, (f32(1, 1, 0, 2), "s")], expect="error")
    add("rz_err_size_from_empty", "Resize", 13, [(arr((1, 0, 4)), ""), None, None, (i64(1, 2, 4), "s")],
        expect="error")
    add("rz_refuse_cubic", "Resize", 13, [(xr, ""), None, (up, "s")], {"mode": "cubic"}, expect="refused")
    add("rz_refuse_crop", "Resize", 13, [(xr, ""), (f32(0, 0, 0, 0, 1, 1, 1, 1), "s"), (up, "s")],
        {"coordinate_transformation_mode": "tf_crop_and_resize"}, expect="refused")
    add("rz_refuse_int16", "Resize", 13, [(arr((2, 3), np.int16), ""), None, (f32(2, 2), "s")], expect="refused")
    add("rz_refuse_align_corners_runtime_scales", "Resize", 13, [(xr, ""), None, (up, "s")],
        {"coordinate_transformation_mode": "align_corners"}, expect="refused")
    add("rz_refuse_antialias", "Resize", 18, [(xr, ""), None, (down, "s")], {"antialias": 1}, expect="refused")
    return cases


# The ONNX backend node cases of our ops; the inputs run() may read (shapes, axes, Gather's indices) are marked "s".
SHAPE_IN = {"Reshape": {1}, "Expand": {1}, "Slice": {1, 2, 3, 4}, "Squeeze": {1}, "Unsqueeze": {1}, "Gather": {1},
            "Split": {1}, "Tile": {1}, "Range": {0, 1, 2}, "ConstantOfShape": {0}, "Pad": {1, 3},
            "Resize": {1, 2, 3}}


# Ops whose kernels leave some of the backend cases to others (Range: float16 and bfloat16).
MAY_REFUSE = {"Range"}


def onnx_backend_cases(substring: str = "") -> list[Case]:
    """ONNX backend node test cases with one node of our ops, against their stored outputs (name prefix onnx_)."""
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tcs = node.collect_testcases(None)
    cases = []
    for tc in tcs:
        if tc.model is None or not tc.data_sets or substring not in f"onnx_{tc.name}":
            continue
        g = tc.model.graph
        if len(g.node) != 1 or g.node[0].op_type not in OPS or g.node[0].domain not in ("", "ai.onnx"):
            continue
        n = g.node[0]
        opset = max(o.version for o in tc.model.opset_import if o.domain in ("", "ai.onnx"))
        since = onnx.defs.get_schema(n.op_type, opset).since_version
        feeds_in, outs = tc.data_sets[0]
        by_name = dict(zip([i.name for i in g.input], feeds_in))
        for init in g.initializer:
            by_name[init.name] = onnx.numpy_helper.to_array(init)
        ins = []
        for i, nm in enumerate(n.input):
            if nm == "":
                ins.append(None)
                continue
            ins.append((np.asarray(by_name[nm]), "s" if i in SHAPE_IN.get(n.op_type, ()) else ""))
        if any(x is not None and x[0].dtype not in DT for x in ins) or any(np.asarray(o).dtype not in DT
                                                                          for o in outs):
            continue  # a dtype the harness does not carry (strings, bfloat16, ...)
        attrs = {}
        for at in n.attribute:
            v = onnx.helper.get_attribute_value(at)
            attrs[at.name] = list(v) if isinstance(v, (list, tuple)) else v
        if n.op_type == "Resize" and attrs.get("mode", b"nearest") != b"nearest":
            continue  # interpolated values: compared within a tolerance by tests/test_conformance.py
        cases.append(Case(f"onnx_{tc.name}", n.op_type, since, ins, attrs, expect=[np.asarray(o) for o in outs],
                          nout=len(n.output), may_refuse=n.op_type in MAY_REFUSE))
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", action="append", choices=["asan", "plain", "opt"])
    ap.add_argument("-k", default="", help="only cases whose name contains this")
    ap.add_argument("-v", action="store_true", help="print refusals and errors")
    ap.add_argument("--onnx-backend", action="store_true", help="also run the ONNX backend node cases")
    ap.add_argument("--build-dir", type=Path, help="build here (objects are reused) instead of a temp dir")
    args = ap.parse_args()
    cases = all_cases(args.k) + (onnx_backend_cases(args.k) if args.onnx_backend else [])
    counts: dict[str, int] = {}
    for c in cases:
        counts[c.op] = counts.get(c.op, 0) + 1
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        build_dir = args.build_dir or Path(tmp)
        for variant in args.variant or ["asan"]:
            exe = harness_build.build("shape_harness", variant, build_dir)
            failures = run_cases(exe, cases, harness_build.harness_env(variant), args.v)
            for line in failures:
                print(f"FAIL [{variant}] {line}")
            bad = len([f for f in failures if not f.startswith("<harness>")])
            print(f"{variant}: {len(cases) - bad}/{len(cases)} cases passed; per op: {counts}")
            failed += len(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
