"""Models whose values cross between our EP and the CPU EP, for the boundary tests (``test_boundaries.py``).

Nodes named in a case's ``cpu`` list stay on the CPU (our ``force_cpu_nodes`` option; Split has no kernel of
ours yet and would stay there anyway), so every kind of crossing can be built from ops we claim:

* ``ep_cpu_ep``: Conv (EP) -> Split (CPU) -> Conv (EP), the three-node reproduction of the GPU crash under real
  onnxruntime, plus Split's second half as a graph output computed on the CPU;
* ``cpu_ep_cpu``: Relu (CPU) -> Conv (EP) -> Sigmoid (CPU): graph input and output on the CPU side;
* ``fan_out``: one EP value read by a CPU node, by an EP node and as a graph output; an EP node reading a CPU
  value and an EP value (fan-in);
* ``shared_input``: a graph input read by CPU and EP nodes; a CPU node reading an EP value and a CPU value;
* ``shared_initializer``: one constant read by an EP Add and a CPU Mul (ORT duplicates it per device), the Mul's
  output read by an EP Add; the graph input is read on both sides too.

All tensors are float32; the expected outputs come from onnx.reference or ORT's CPU EP.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 18


@dataclass
class Case:
    name: str
    model: onnx.ModelProto
    cpu: list[str]                 # node names forced onto the CPU
    feeds: dict[str, np.ndarray]

    @property
    def force_cpu_nodes(self) -> str:
        return ",".join(self.cpu)


def _model(name: str, nodes: list[onnx.NodeProto], inputs: dict[str, list[int]], outputs: list[str],
           initializers: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()], [],
        [numpy_helper.from_array(a, n) for n, a in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 9
    inferred = {vi.name: vi for vi in onnx.shape_inference.infer_shapes(model, strict_mode=True).graph.value_info}
    model.graph.output.extend(inferred[n] for n in outputs)
    onnx.checker.check_model(model, full_check=True)
    return model


def _conv(name: str, x: str, w: str, y: str) -> onnx.NodeProto:
    return helper.make_node("Conv", [x, w], [y], pads=[1, 1, 1, 1], name=name)


def cases(seed: int = 0) -> list[Case]:
    rng = np.random.default_rng(seed)

    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    out: list[Case] = []
    out.append(Case("ep_cpu_ep", _model(
        "ep_cpu_ep",
        [_conv("conv1", "x", "w1", "c1"),
         helper.make_node("Split", ["c1"], ["s0", "s1"], axis=1, num_outputs=2, name="split"),
         _conv("conv2", "s0", "w2", "y")],
        {"x": [1, 8, 16, 16]}, ["y", "s1"], {"w1": normal(8, 8, 3, 3), "w2": normal(4, 4, 3, 3)}),
        ["split"], {"x": normal(1, 8, 16, 16)}))
    out.append(Case("cpu_ep_cpu", _model(
        "cpu_ep_cpu",
        [helper.make_node("Relu", ["x"], ["a"], name="relu_cpu"), _conv("conv", "a", "w", "b"),
         helper.make_node("Sigmoid", ["b"], ["y"], name="sigmoid_cpu")],
        {"x": [1, 4, 8, 8]}, ["y"], {"w": normal(4, 4, 3, 3)}),
        ["relu_cpu", "sigmoid_cpu"], {"x": normal(1, 4, 8, 8)}))
    out.append(Case("fan_out", _model(
        "fan_out",
        [_conv("conv", "x", "w", "c"), helper.make_node("Relu", ["c"], ["r"], name="relu_cpu"),
         helper.make_node("Tanh", ["c"], ["t"], name="tanh"), helper.make_node("Add", ["r", "t"], ["y"], name="add")],
        {"x": [1, 4, 8, 8]}, ["y", "c"], {"w": normal(4, 4, 3, 3)}),
        ["relu_cpu"], {"x": normal(1, 4, 8, 8)}))
    out.append(Case("shared_input", _model(
        "shared_input",
        [helper.make_node("Sigmoid", ["x"], ["a"], name="sigmoid"),
         helper.make_node("Relu", ["x"], ["b"], name="relu_cpu"),
         helper.make_node("Mul", ["a", "b"], ["m"], name="mul_cpu"),
         helper.make_node("Add", ["m", "x"], ["y"], name="add")],
        {"x": [2, 3, 5]}, ["y", "a"], {}),
        ["relu_cpu", "mul_cpu"], {"x": normal(2, 3, 5)}))
    out.append(Case("shared_initializer", _model(
        "shared_initializer",
        [helper.make_node("Add", ["x", "b"], ["a"], name="add"),
         helper.make_node("Mul", ["x", "b"], ["m"], name="mul_cpu"),
         helper.make_node("MatMul", ["a", "w"], ["c"], name="matmul"),
         helper.make_node("Add", ["c", "m"], ["y"], name="add2")],
        {"x": [3, 8]}, ["y"], {"b": normal(8), "w": normal(8, 8)}),
        ["mul_cpu"], {"x": normal(3, 8)}))
    return out
