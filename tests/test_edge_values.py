"""Nodes whose values or attributes are at the edges of what exporters emit, under real onnxruntime and our host.

Found under real onnxruntime 1.24.4 and 1.32.0: a claimed node with an empty constant initializer failed session
creation ("value ... has no producer": ORT gives an empty initializer no data pointer), duplicate reduce axes
([-3, 0] on rank 3) failed on our EP where ORT's CPU EP accepts them, and an INT attribute without a value got our
default where ORT's CPU EP reads 0. Each case must now run with every node on our EP and equal ORT's CPU EP (real
onnxruntime) or onnx.reference (our host).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import epabi
from real_ort import MIN, NEWEST, run_json

EP = epabi.get_ep_name()


def _model(name: str, node: onnx.NodeProto, x_shape: list[int], inits: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", T.FLOAT, x_shape)], [],
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    inferred = {vi.name: vi for vi in onnx.shape_inference.infer_shapes(model).graph.value_info}
    model.graph.output.append(inferred["y"])
    return model


def _valueless_int(node: onnx.NodeProto, name: str) -> onnx.NodeProto:
    attr = onnx.AttributeProto()
    attr.name, attr.type = name, onnx.AttributeProto.INT   # type set, no value: readers see the default, 0
    node.attribute.append(attr)
    return node


def _cases() -> dict[str, tuple[onnx.ModelProto, list[int]]]:
    empty_i64 = np.zeros((0,), np.int64)
    return {
        "reshape_to_scalar": (_model("reshape_to_scalar", helper.make_node("Reshape", ["x", "s"], ["y"]), [1],
                                     {"s": empty_i64}), [1]),
        "gather_empty_indices": (_model("gather_empty_indices", helper.make_node("Gather", ["x", "i"], ["y"], axis=0),
                                        [3, 4], {"i": empty_i64}), [3, 4]),
        "reducesum_empty_axes": (_model("reducesum_empty_axes",
                                        helper.make_node("ReduceSum", ["x", "a"], ["y"], keepdims=1), [2, 3, 4],
                                        {"a": empty_i64}), [2, 3, 4]),
        "concat_empty_constant": (_model("concat_empty_constant", helper.make_node("Concat", ["x", "e"], ["y"], axis=0),
                                         [2, 3], {"e": np.zeros((0, 3), np.float32)}), [2, 3]),
        "add_empty_constant": (_model("add_empty_constant", helper.make_node("Add", ["x", "e"], ["y"]), [0, 3],
                                      {"e": np.zeros((0, 3), np.float32)}), [0, 3]),
        "expand_empty_shape": (_model("expand_empty_shape", helper.make_node("Expand", ["x", "s"], ["y"]), [2, 3],
                                      {"s": empty_i64}), [2, 3]),
        "reduce_duplicate_axes": (_model("reduce_duplicate_axes",
                                         helper.make_node("ReduceSum", ["x", "a"], ["y"], keepdims=0), [2, 3, 4],
                                         {"a": np.array([-3, 0], np.int64)}), [2, 3, 4]),
        "softmax_valueless_axis": (_model("softmax_valueless_axis",
                                          _valueless_int(helper.make_node("Softmax", ["x"], ["y"]), "axis"),
                                          [2, 3, 4], {}), [2, 3, 4]),
    }


CASES = _cases()

# argv: library, folder with <case>.onnx, <case>.npy and cases.json. For each case: ORT's CPU EP and our EP (each with
# all optimizations off when ORT's own optimizer fails on the model, as 1.24.4's does on an Add of empty tensors with
# any EP).
SCRIPT = """
import os

import numpy as np

lib, folder = sys.argv[1:]
ort.register_execution_provider_library("epabi", lib)
ours = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
report = {}
for name in json.load(open(os.path.join(folder, "cases.json"))):
    model = os.path.join(folder, name + ".onnx")
    feeds = {"x": np.load(os.path.join(folder, name + ".npy"))}
    try:
        expected = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    except Exception:
        plain = ort.SessionOptions()
        plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        expected = ort.InferenceSession(model, plain, providers=["CPUExecutionProvider"]).run(None, feeds)
    def ours_session(level=None):
        so = ort.SessionOptions()
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        if level is not None:
            so.graph_optimization_level = level
        so.add_provider_for_devices(ours, {})
        return ort.InferenceSession(model, sess_options=so, enable_fallback=0)
    try:
        try:
            sess = ours_session()
        except Exception as exc:
            if "CanRemoveNodeAndMergeEdges" not in str(exc):   # ORT 1.24.4's own optimizer, with any EP
                raise
            sess = ours_session(ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
        got = sess.run(None, feeds)
    except Exception as exc:
        report[name] = {"error": str(exc)[-400:]}
        continue
    eps = sorted({sub.ep_name for sub in sess.get_provider_graph_assignment_info()})
    report[name] = {"eps": eps, "shapes": [list(a.shape) for a in got], "want": [list(a.shape) for a in expected],
                    "diff": [float(np.abs(a - b).max()) if a.size else 0.0 for a, b in zip(got, expected)]}
emit(report=report)
"""


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_edge_values_under_real_onnxruntime(version: str, library_path: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    for name, (model, shape) in CASES.items():
        onnx.save(model, tmp_path / f"{name}.onnx")
        np.save(tmp_path / f"{name}.npy", rng.standard_normal(shape).astype(np.float32))
    (tmp_path / "cases.json").write_text(json.dumps(list(CASES)))
    result, _, _ = run_json(version, SCRIPT, {"EPABI_ALLOW_SOFTWARE_ADAPTER": "1"}, [library_path, str(tmp_path)])
    for name in CASES:
        got = result["report"][name]
        assert "error" not in got, f"{name}: {got.get('error')}"
        assert got["eps"] == [EP], f"{name}: nodes off our EP: {got['eps']}"
        assert got["shapes"] == got["want"], name
        assert max(got["diff"], default=0.0) <= 1e-5, f"{name}: {got['diff']}"


@pytest.mark.parametrize("name", list(CASES))
def test_edge_values_under_our_host(name: str, host: epabi.Host) -> None:
    model, shape = CASES[name]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {})
    with epabi.InferenceSession(model, so) as session:
        assert set(session.node_assignment.values()) == {EP}
        (got,) = session.run(None, {"x": x})
    if name == "softmax_valueless_axis":
        expected = np.exp(x) / np.exp(x).sum(axis=0, keepdims=True)   # axis read as 0, as ORT's CPU EP does
    elif name == "reduce_duplicate_axes":
        expected = x.sum(axis=0)   # [-3, 0] names axis 0 twice: ORT's CPU EP reduces it once (numpy refuses)
    else:
        (expected,) = ReferenceEvaluator(model).run(None, {"x": x})
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
