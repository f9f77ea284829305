"""Softmax fusion (native/plan_softmax.c, native/kernels/softmax_rows.h) against models that look like its pattern:
each model's outputs equal ORT's CPU EP's (1e-6) through our host and real onnxruntime (1.24.4, 1.32.0), the plan
fuses exactly the softmaxes it may, and one session runs over batches of several sizes.

Left unfused (0 softmaxes): Sub(m, x), Div(s, e), e read by a third node, a ReduceMax shared by two softmaxes, a
ReduceSum over another axis, two axes or all axes, a floor of more dims than the max, an Unsqueeze view (no view_dims),
int32 x, a row value of keepdims 0 reaching its Sub or Div without views while X may have several rows (a square
X: ORT broadcasts it across the rows, the fused step would refuse the run), and constant view shapes that put the row
values across the rows of a static X (the same). Fused: negative and positive last axes,
opset 18's axes input, floors of 0, 5 and NaN, a rank-1 X and a one-row X with keepdims 0, empty rows, X from a MatMul
or an elementwise chain, two softmaxes in a row.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import epabi
from real_ort import MIN, NEWEST, run_json

SUMMARY = re.compile(r"compiled '[^']*': \d+ steps \(.*\), (\d+) softmax\(es\)")
F = TensorProto.FLOAT
node = helper.make_node


def _ints(name: str, values: list) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _floats(name: str, values: object) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.float32), name)


def _model(nodes: list, shape: list, inits: list, opset: int = 15, dtype: int = F) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "edge", [helper.make_tensor_value_info("x", dtype, shape)],
                              [helper.make_tensor_value_info("y", F, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def _softmax(x: str = "x", y: str = "y", kd_max: int = 1, kd_sum: int = 1, tag: str = "") -> list:
    """ReduceMax(x, axes=[-1]) -> Sub(x, m) -> Exp -> ReduceSum(axes input 'ax' = [-1]) -> Div(e, s), no views."""
    return [node("ReduceMax", [x], [f"m{tag}"], axes=[-1], keepdims=kd_max), node("Sub", [x, f"m{tag}"], [f"d{tag}"]),
            node("Exp", [f"d{tag}"], [f"e{tag}"]), node("ReduceSum", [f"e{tag}", "ax"], [f"s{tag}"], keepdims=kd_sum),
            node("Div", [f"e{tag}", f"s{tag}"], [y])]


def _tail(sum_axes: str = "ax") -> list:
    return [node("Exp", ["d"], ["e"]), node("ReduceSum", ["e", sum_axes], ["s"]), node("Div", ["e", "s"], ["y"])]


AX = [_ints("ax", [-1])]


def _floor(c: object, left: bool = True) -> onnx.ModelProto:
    nodes = [node("ReduceMax", ["x"], ["m0"], axes=[-1]), node("Max", ["c", "m0"] if left else ["m0", "c"], ["m"]),
             node("Sub", ["x", "m"], ["d"]), *_tail()]
    return _model(nodes, [3, 5], [*AX, _floats("c", c)])


def _views(shape_const: list, x_shape: list, keepdims: int = 0) -> onnx.ModelProto:
    """The maxima through Reshape(constant shape) before the Sub."""
    nodes = [node("ReduceMax", ["x"], ["m0"], axes=[-1], keepdims=keepdims), node("Reshape", ["m0", "shp"], ["m"]),
             node("Sub", ["x", "m"], ["d"]), *_tail()]
    return _model(nodes, x_shape, [*AX, _ints("shp", shape_const)])


# name -> (model, x's shapes fed in turn, softmaxes fused; None: either, as long as the values are ORT's)
CASES: dict[str, tuple[Callable[[], onnx.ModelProto], list[list[int]], int | None]] = {
    "sub_swapped": (lambda: _model([node("ReduceMax", ["x"], ["m"], axes=[-1]), node("Sub", ["m", "x"], ["d"]),
                                    *_tail()], [3, 5], AX), [[3, 5]], 0),
    "div_swapped": (lambda: _model([node("ReduceMax", ["x"], ["m"], axes=[-1]), node("Sub", ["x", "m"], ["d"]),
                                    node("Exp", ["d"], ["e"]), node("ReduceSum", ["e", "ax"], ["s"]),
                                    node("Div", ["s", "e"], ["y"])], [3, 5], AX), [[3, 5]], 0),
    "negative_axes_rank3": (lambda: _model(_softmax(), [2, 3, 5], AX), [[2, 3, 5]], 1),
    "positive_last_axis": (lambda: _model([node("ReduceMax", ["x"], ["m"], axes=[2]), node("Sub", ["x", "m"], ["d"]),
                                           *_tail("a2")], [2, 3, 5], [_ints("a2", [2])]), [[2, 3, 5]], 1),
    "opset18_axes_input": (lambda: _model([node("ReduceMax", ["x", "ax"], ["m"]), node("Sub", ["x", "m"], ["d"]),
                                           *_tail()], [3, 5], AX, opset=18), [[3, 5]], 1),
    "max_over_all_axes": (lambda: _model([node("ReduceMax", ["x"], ["m"]), node("Sub", ["x", "m"], ["d"]), *_tail()],
                                         [3, 5], AX), [[3, 5]], 0),
    "max_over_all_axes_rank1": (lambda: _model([node("ReduceMax", ["x"], ["m"]), node("Sub", ["x", "m"], ["d"]),
                                                *_tail()], [5], AX), [[5]], None),
    "sum_other_axis": (lambda: _model([node("ReduceMax", ["x"], ["m"], axes=[-1]), node("Sub", ["x", "m"], ["d"]),
                                       *_tail("a0")], [3, 3], [_ints("a0", [0])]), [[3, 3]], 0),
    "sum_two_axes": (lambda: _model([node("ReduceMax", ["x"], ["m"], axes=[-1]), node("Sub", ["x", "m"], ["d"]),
                                     *_tail("a01")], [3, 3], [_ints("a01", [0, 1])]), [[3, 3]], 0),
    "sum_all_axes": (lambda: _model([node("ReduceMax", ["x"], ["m"], axes=[-1]), node("Sub", ["x", "m"], ["d"]),
                                     node("Exp", ["d"], ["e"]), node("ReduceSum", ["e"], ["s"]),
                                     node("Div", ["e", "s"], ["y"])], [3, 3], []), [[3, 3]], 0),
    "floor_0": (lambda: _floor(0.0, left=False), [[3, 5]], 1),
    "floor_5": (lambda: _floor([5.0]), [[3, 5]], 1),
    "floor_nan": (lambda: _floor(np.nan), [[3, 5]], 1),
    "floor_rank3": (lambda: _floor([[[-np.inf]]]), [[3, 5]], 0),
    "int32_x": (lambda: _model([node("ReduceMax", ["x"], ["m"], axes=[-1]), node("Sub", ["x", "m"], ["di"]),
                                node("Cast", ["di"], ["d"], to=F), *_tail()], [3, 5], AX, dtype=TensorProto.INT32),
                [[3, 5]], 0),
    "rank1_keepdims0": (lambda: _model(_softmax(kd_max=0, kd_sum=0), [5], AX), [[5]], 1),
    "rank1_keepdims1": (lambda: _model(_softmax(), [5], AX), [[5]], 1),
    "one_row_keepdims0": (lambda: _model(_softmax(kd_max=0, kd_sum=0), [1, 6], AX), [[1, 6]], 1),
    "symbolic_rows_keepdims0": (lambda: _model(_softmax(kd_max=0, kd_sum=0), ["N", 4], AX), [[1, 4], [4, 4]], 0),
    "square_keepdims0": (lambda: _model(_softmax(kd_max=0, kd_sum=0), [4, 4], AX), [[4, 4]], 0),
    "square_max_keepdims0": (lambda: _model(_softmax(kd_max=0), [4, 4], AX), [[4, 4]], 0),
    "square_sum_keepdims0": (lambda: _model(_softmax(kd_sum=0), [4, 4], AX), [[4, 4]], 0),
    "empty_rows": (lambda: _model(_softmax(), [0, 5], AX), [[0, 5]], 1),
    "empty_row_length": (lambda: _model(_softmax(), [5, 0], AX), [[5, 0]], 1),
    "batch_changes": (lambda: _model(_softmax(), ["N", "C"], AX), [[3, 5], [1, 5], [0, 5], [7, 2], [2, 1]], 1),
    "e_read_by_a_third_node": (lambda: _model([*_softmax(y="p"), node("Add", ["p", "e"], ["y"])], [3, 5], AX),
                               [[3, 5]], 0),
    "div_e_e": (lambda: _model([*_softmax(y="p")[:4], node("Div", ["e", "e"], ["q"]), node("Add", ["q", "s"], ["y"])],
                               [3, 5], AX), [[3, 5]], 0),
    "two_share_the_max": (lambda: _model([*_softmax(y="y1"), node("Sub", ["x", "m"], ["d2"]),
                                          node("Exp", ["d2"], ["e2"]), node("ReduceSum", ["e2", "ax"], ["s2"]),
                                          node("Div", ["e2", "s2"], ["y2"]), node("Add", ["y1", "y2"], ["y"])],
                                         [3, 5], AX), [[3, 5]], 0),
    "two_in_a_row": (lambda: _model([*_softmax(y="p"), *_softmax(x="p", tag="2")], [3, 5], AX), [[3, 5]], 2),
    "x_from_matmul": (lambda: _model([node("MatMul", ["x", "w"], ["xm"]), *_softmax(x="xm")], [3, 4],
                                     [*AX, _floats("w", np.random.default_rng(1).normal(size=[4, 5]))]),
                      [[3, 4]], 1),
    "x_from_a_chain": (lambda: _model([node("Mul", ["x", "x"], ["t"]), node("Add", ["t", "x"], ["xc"]),
                                       *_softmax(x="xc")], [3, 5], AX), [[3, 5]], 1),
    "chain_after": (lambda: _model([*_softmax(y="p"), node("Mul", ["p", "p"], ["q"]), node("Add", ["q", "x"], ["y"])],
                                   [3, 5], AX), [[3, 5]], 1),
    "unsqueeze_view": (lambda: _model([node("ReduceMax", ["x"], ["m0"], axes=[-1], keepdims=0),
                                       node("Unsqueeze", ["m0", "ax"], ["m"]), node("Sub", ["x", "m"], ["d"]),
                                       *_tail()], [3, 5], AX), [[3, 5]], 0),
    "reshape_view_to_a_column": (lambda: _views([3, 1], [3, 5]), [[3, 5]], 1),
    "reshape_view_to_a_row": (lambda: _views([1, 3], [3, 3]), [[3, 3]], 0),
    "expand_view_across_the_rows": (lambda: _model([node("ReduceMax", ["x"], ["m0"], axes=[-1], keepdims=0),
                                                    node("Expand", ["m0", "shp"], ["m"]),
                                                    node("Sub", ["x", "m"], ["d"]), *_tail()],
                                                   [4, 4], [*AX, _ints("shp", [4, 4])]), [[4, 4]], 0),
    "expand_view_to_columns": (lambda: _model([*_softmax(kd_sum=0)[:4], node("Reshape", ["s", "col"], ["sr"]),
                                               node("Expand", ["sr", "full"], ["sb"]), node("Div", ["e", "sb"], ["y"])],
                                              [4, 6], [*AX, _ints("col", [4, 1]), _ints("full", [4, 6])]),
                               [[4, 6]], 1),
}


def _feed(shape: list[int], dtype: type, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(0, 3, shape)
    return (np.round(x) if dtype is np.int32 else x).astype(dtype)


def _cases() -> list[tuple[str, onnx.ModelProto, list[dict[str, np.ndarray]], int | None]]:
    out = []
    for name, (make, shapes, fused) in CASES.items():
        model = make()
        int_x = model.graph.input[0].type.tensor_type.elem_type == TensorProto.INT32
        dtype = np.int32 if int_x else np.float32
        out.append((name, model, [{"x": _feed(s, dtype, k)} for k, s in enumerate(shapes)], fused))
    return out


def _cpu_ep(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape, what
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, equal_nan=True, err_msg=what)


@pytest.mark.parametrize("name", list(CASES))
def test_edge_through_our_host(host: epabi.Host, caplog: pytest.LogCaptureFixture, name: str) -> None:
    """One session per case, every batch run on it: ORT's CPU EP's values, and the softmaxes the plan fused."""
    (_, model, feeds, fused), = [c for c in _cases() if c[0] == name]
    so = epabi.SessionOptions()
    so.log_severity_level = 0
    so.add_provider_for_devices(host.get_ep_devices(), {})
    with caplog.at_level(logging.DEBUG, logger="epabi"):
        sess = epabi.InferenceSession(model, so)
    placed = set(sess.node_assignment.values())
    # int32 x: our ReduceMax declines int32, so it stays on ORT's CPU EP and the rest comes to us
    assert placed == ({epabi.get_ep_name(), "CPUExecutionProvider"} if name == "int32_x" else {epabi.get_ep_name()})
    counts = [int(m.group(1)) for m in (SUMMARY.search(r.getMessage()) for r in caplog.records) if m]
    assert len(counts) == 1, counts
    if fused is not None:
        assert counts[0] == fused, name
    for k, feed in enumerate(feeds):
        _close(sess.run(None, feed)[0], _cpu_ep(model, feed), f"{name} run {k}")


REAL_ORT_SCRIPT = """
import gc
import os

import numpy as np

lib, out_dir, *models = sys.argv[1:]
ort.set_default_logger_severity(0)
ort.register_execution_provider_library("epabi", lib)
ours = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
runs = []
for i, model in enumerate(models):
    so = ort.SessionOptions()
    so.log_severity_level = 0
    so.add_provider_for_devices(ours, {})
    sys.stderr.write(f"\\nEPABI-MODEL {i}\\n")
    sys.stderr.flush()
    sess = ort.InferenceSession(model, sess_options=so, enable_fallback=0)
    feeds = np.load(model + ".npz")
    errors = []
    for k in range(len(feeds.files)):
        try:
            np.save(os.path.join(out_dir, f"{i}_{k}.npy"), sess.run(None, {"x": feeds[f"f{k}"]})[0])
            errors.append(None)
        except Exception as ex:
            errors.append(str(ex))
    runs.append({"provider": sess.get_providers()[0], "errors": errors})
    del sess, so
    gc.collect()
    sys.stderr.write(f"\\nEPABI-MODEL-END {i}\\n")
    sys.stderr.flush()
del ours
gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(ort_version=ort.__version__, runs=runs)
"""


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_edges_through_real_onnxruntime(version: str, library_path: str, tmp_path: Path) -> None:
    """Every case under real onnxruntime, one session each over its batches: no run fails, ORT's CPU EP's values, and
    the softmaxes the plans count."""
    cases = _cases()
    paths = []
    for i, (_, model, feeds, _) in enumerate(cases):
        path = tmp_path / f"m{i}.onnx"
        onnx.save(model, str(path))
        np.savez(str(path) + ".npz", **{f"f{k}": f["x"] for k, f in enumerate(feeds)})
        paths.append(str(path))
    result, _, err = run_json(version, REAL_ORT_SCRIPT, {"EPABI_ALLOW_SOFTWARE_ADAPTER": "1"},
                              [library_path, str(tmp_path), *paths], timeout=300)
    assert result["ort_version"] == version
    for i, (name, model, feeds, fused) in enumerate(cases):
        run = result["runs"][i]
        assert run["provider"] == epabi.get_ep_name(), name
        assert run["errors"] == [None] * len(feeds), (name, run["errors"])
        log = re.search(rf"^EPABI-MODEL {i}$(.*?)^EPABI-MODEL-END {i}$", err, re.S | re.M)
        assert log, err[-3000:]
        counts = [int(m.group(1)) for m in SUMMARY.finditer(log.group(1))]
        assert len(counts) == 1, (name, counts)
        if fused is not None:
            assert counts[0] == fused, name
        for k, feed in enumerate(feeds):
            _close(np.load(tmp_path / f"{i}_{k}.npy"), _cpu_ep(model, feed), f"{name} run {k} under {version}")
