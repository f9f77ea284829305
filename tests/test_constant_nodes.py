"""Constant nodes become initializers when epabi's host loads a model, as in ONNX Runtime (``epabi.constant_nodes``).

Found with models exported by PyTorch's TorchScript exporter (``torch.onnx.export(..., dynamo=False)``, torch
2.13), which writes pads, axes, shapes and scalars as Constant nodes: real onnxruntime (1.24.4, 1.32.0) put every
node of such models on our EP, epabi's host left each Constant node on the CPU, so the EP's groups were split
around them and graph capture was refused. ``tests/test_real_models.py`` runs such models on both hosts.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import epabi
from epabi.constant_nodes import constants_to_initializers

EP = "EpAbiExecutionProvider"
F = TensorProto.FLOAT


def _model(nodes: list[onnx.NodeProto], inputs: list, outputs: list, ir_version: int = 8) -> onnx.ModelProto:
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = ir_version
    return model


def _values(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def test_every_attribute_kind_becomes_its_tensor() -> None:
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([5.0, 7.0], np.float32), "v"),
                                       numpy_helper.from_array(np.array([1, 4], np.int64), "i"), [2, 3])
    kinds = {"t": {"value": numpy_helper.from_array(np.arange(6, dtype=np.int32).reshape(2, 3))},
             "f": {"value_float": 1.5}, "fs": {"value_floats": [1.0, 2.0]}, "i": {"value_int": -3},
             "is": {"value_ints": [4, 5, 6]}, "s": {"value_string": "ab"}, "ss": {"value_strings": ["c", "d"]},
             "sp": {"sparse_value": sparse}}
    nodes = [helper.make_node("Constant", [], [name], name=f"c_{name}", **attr) for name, attr in kinds.items()]
    nodes.append(helper.make_node("Identity", ["t"], ["y"], name="id"))
    model = _model(nodes, [], [helper.make_tensor_value_info("y", TensorProto.INT32, [2, 3])])
    assert constants_to_initializers(model) == len(kinds)
    assert [n.name for n in model.graph.node] == ["id"]
    got = _values(model)
    np.testing.assert_array_equal(got["t"], np.arange(6, dtype=np.int32).reshape(2, 3))
    assert got["f"].dtype == np.float32 and got["f"].shape == () and got["f"] == 1.5
    assert got["fs"].dtype == np.float32 and list(got["fs"]) == [1.0, 2.0]
    assert got["i"].dtype == np.int64 and got["i"].shape == () and got["i"] == -3
    assert got["is"].dtype == np.int64 and list(got["is"]) == [4, 5, 6]
    assert got["s"].shape == () and got["s"] == "ab"
    assert list(got["ss"]) == ["c", "d"]
    np.testing.assert_array_equal(got["sp"], np.array([[0, 5, 0], [0, 7, 0]], np.float32))
    assert list(model.graph.input) == []  # IR 8: initializers need not be graph inputs


def test_subgraphs_and_ir_3() -> None:
    then = helper.make_graph([helper.make_node("Constant", [], ["k"], value_float=2.0),
                              helper.make_node("Mul", ["x", "k"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", F, [1])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", F, [1])])
    nodes = [helper.make_node("Constant", [], ["c"], name="cond", value=numpy_helper.from_array(np.array(True))),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [1])], [helper.make_tensor_value_info("y", F, [1])],
                   ir_version=3)
    assert constants_to_initializers(model) == 2
    assert [n.op_type for n in model.graph.node] == ["If"]
    branch = next(a.g for a in model.graph.node[0].attribute if a.name == "then_branch")
    assert [n.op_type for n in branch.node] == ["Mul"] and [t.name for t in branch.initializer] == ["k"]
    assert [i.name for i in branch.input] == []  # a subgraph's inputs are its signature
    # IR < 4: an initializer of the main graph is a graph input too, as ORT makes it
    assert [i.name for i in model.graph.input] == ["x", "c"]
    assert model.graph.input[1].type.tensor_type.elem_type == TensorProto.BOOL


def test_a_constant_without_a_value_is_an_invalid_graph() -> None:
    model = _model([helper.make_node("Constant", [], ["k"], name="bad", value_float=1.0, value_int=2)], [],
                   [helper.make_tensor_value_info("k", F, [])])
    with pytest.raises(epabi.OrtStatusError, match="Constant node 'bad' needs exactly one value attribute") as info:
        constants_to_initializers(model)
    assert info.value.code == epabi.OrtErrorCode.INVALID_GRAPH


def _torchscript_style() -> onnx.ModelProto:
    """y = Clip(Reshape(x, shape) * 2, 0, 6) with shape, 2, 0 and 6 from Constant nodes."""
    nodes = [helper.make_node("Constant", [], ["shape"], name="/Constant",
                              value=numpy_helper.from_array(np.array([3, 2], np.int64))),
             helper.make_node("Constant", [], ["two"], name="/Constant_1", value_float=2.0),
             helper.make_node("Constant", [], ["lo"], name="/Constant_2",
                              value=numpy_helper.from_array(np.array(0, np.float32))),
             helper.make_node("Constant", [], ["hi"], name="/Constant_3",
                              value=numpy_helper.from_array(np.array(6, np.float32))),
             helper.make_node("Reshape", ["x", "shape"], ["r"], name="/Reshape"),
             helper.make_node("Mul", ["r", "two"], ["m"], name="/Mul"),
             helper.make_node("Clip", ["m", "lo", "hi"], ["y"], name="/Clip")]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [2, 3])],
                  [helper.make_tensor_value_info("y", F, [3, 2])])


def test_the_ep_sees_constant_initializers_and_takes_every_node(host: epabi.Host) -> None:
    model = _torchscript_style()
    before = model.SerializeToString()
    x = np.linspace(-2, 5, 6, dtype=np.float32).reshape(2, 3)
    want = np.clip(x.reshape(3, 2) * 2, 0, 6)
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {"enable_cuda_graph": "1"})
    with epabi.InferenceSession(model, so) as session:
        assert session.node_assignment == {"/Reshape": EP, "/Mul": EP, "/Clip": EP}
        assert all(session.graph.values[v].constant_initializer for v in ("shape", "two", "lo", "hi"))
        assert session.graph_capture.enabled  # every node on the EP: capture is allowed
        binding = session.io_binding()
        xv = epabi.OrtValue.ortvalue_from_numpy(x.copy())   # shares its buffer, as in onnxruntime: x stays
        y = epabi.OrtValue.ortvalue_from_shape_and_type([3, 2], np.float32)
        binding.bind_ortvalue_input("x", xv)
        binding.bind_ortvalue_output("y", y)
        session.run_with_iobinding(binding)
        np.testing.assert_array_equal(y.numpy(), want)
        xv.update_inplace(-x)
        session.run_with_iobinding(binding)
        np.testing.assert_array_equal(y.numpy(), np.clip(-x.reshape(3, 2) * 2, 0, 6))
        assert session.graph_capture.replays == 1
    assert model.SerializeToString() == before  # the caller's model is left as it was
