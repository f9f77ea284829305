"""The probe models ``model_matches_cpu`` offers an EP, and the reference it compares with.

Small float32 models with fixed shapes, opset 17, IR 8 (readable by every onnxruntime epabi emulates), each
covering one family of common ops; an EP is judged on the nodes it claims of them. Weights are drawn with a
fixed seed, so runs repeat.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..cpu_fallback import import_onnxruntime
from ..models import mlp

_F = TensorProto.FLOAT
_OPSET = [helper.make_opsetid("", 17)]


def _model(name: str, nodes: list[onnx.NodeProto], inputs: dict[str, list[int]], outputs: dict[str, list[int]],
           initializers: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, _F, s) for n, s in inputs.items()],
                              [helper.make_tensor_value_info(n, _F, s) for n, s in outputs.items()],
                              [numpy_helper.from_array(a, n) for n, a in initializers.items()])
    model = helper.make_model(graph, opset_imports=_OPSET, producer_name="epabi check")
    model.ir_version = 8
    return model


def _weights(shape: tuple[int, ...], seed: int, scale: float = 0.5) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def conv_net() -> onnx.ModelProto:
    """Conv (3x3, pads 1) -> Relu -> MaxPool 2x2 -> GlobalAveragePool -> Flatten -> Gemm: [1,3,8,8] -> [1,5]."""
    n = helper.make_node
    return _model("conv", [
        n("Conv", ["x", "cw", "cb"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        n("Relu", ["c"], ["r"], name="relu"),
        n("MaxPool", ["r"], ["p"], name="maxpool", kernel_shape=[2, 2], strides=[2, 2]),
        n("GlobalAveragePool", ["p"], ["g"], name="gap"),
        n("Flatten", ["g"], ["f"], name="flatten"),
        n("Gemm", ["f", "gw", "gb"], ["y"], name="gemm"),
    ], {"x": [1, 3, 8, 8]}, {"y": [1, 5]},
        {"cw": _weights((4, 3, 3, 3), 1), "cb": _weights((4,), 2), "gw": _weights((4, 5), 3), "gb": _weights((5,), 4)})


def elementwise() -> onnx.ModelProto:
    """Add, Mul, Sub, Div, Sigmoid, Tanh, Exp, Abs, Sqrt, Max, Min over [2,3,4] (broadcasting a [4] constant)."""
    n = helper.make_node
    return _model("elementwise", [
        n("Add", ["x", "y"], ["a"], name="add"),
        n("Mul", ["a", "x"], ["m"], name="mul"),
        n("Sub", ["m", "k"], ["s"], name="sub"),
        n("Div", ["s", "two"], ["d"], name="div"),
        n("Sigmoid", ["d"], ["sg"], name="sigmoid"),
        n("Tanh", ["a"], ["t"], name="tanh"),
        n("Exp", ["t"], ["e"], name="exp"),
        n("Abs", ["s"], ["ab"], name="abs"),
        n("Sqrt", ["ab"], ["sq"], name="sqrt"),
        n("Max", ["sg", "e"], ["mx"], name="max"),
        n("Min", ["mx", "sq"], ["z"], name="min"),
    ], {"x": [2, 3, 4], "y": [2, 3, 4]}, {"z": [2, 3, 4]},
        {"k": _weights((4,), 5), "two": np.array([2.0], np.float32)})


def normalization() -> onnx.ModelProto:
    """MatMul -> LayerNormalization -> Softmax over [2,8]."""
    n = helper.make_node
    return _model("normalization", [
        n("MatMul", ["x", "w"], ["h"], name="matmul"),
        n("LayerNormalization", ["h", "scale", "bias"], ["ln"], name="layernorm", axis=-1, epsilon=1e-5),
        n("Softmax", ["ln"], ["y"], name="softmax", axis=-1),
    ], {"x": [2, 8]}, {"y": [2, 8]},
        {"w": _weights((8, 8), 6), "scale": 1 + _weights((8,), 7, 0.1), "bias": _weights((8,), 8, 0.1)})


def data_movement() -> onnx.ModelProto:
    """Transpose -> Reshape -> Concat -> Slice -> Gather over [2,3,4] (the shape operands are initializers)."""
    n = helper.make_node
    return _model("data_movement", [
        n("Transpose", ["x"], ["t"], name="transpose", perm=[0, 2, 1]),
        n("Reshape", ["t", "shape"], ["r"], name="reshape"),
        n("Concat", ["r", "r"], ["c"], name="concat", axis=1),
        n("Slice", ["c", "starts", "ends", "axes"], ["s"], name="slice"),
        n("Gather", ["s", "rows"], ["y"], name="gather", axis=0),
    ], {"x": [2, 3, 4]}, {"y": [2, 20]},
        {"shape": np.array([2, 12], np.int64), "starts": np.array([2], np.int64), "ends": np.array([22], np.int64),
         "axes": np.array([1], np.int64), "rows": np.array([1, 0], np.int64)})


#: name -> builder, in the order they are offered (``quick`` offers the first three).
PROBE_MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "mlp": lambda: mlp(layers=2, width=16, batch=2, seed=9),
    "conv": conv_net,
    "elementwise": elementwise,
    "normalization": normalization,
    "data_movement": data_movement,
}
QUICK_MODELS = ("mlp", "conv", "elementwise")


def probe_models(quick: bool) -> list[tuple[str, onnx.ModelProto]]:
    return [(name, build()) for name, build in PROBE_MODELS.items() if not quick or name in QUICK_MODELS]


def reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray], str]:
    """The model's outputs on ORT's CPU EP (onnx.reference when onnxruntime is not installed), and which ran."""
    ort = import_onnxruntime()
    if ort is None:
        from onnx.reference import ReferenceEvaluator

        return list(ReferenceEvaluator(model).run(None, feeds)), "onnx.reference (onnxruntime is not installed)"
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return list(session.run(None, feeds)), f"ORT's CPU EP (onnxruntime {ort.__version__})"


def compare(what: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> tuple[str | None, float]:
    """``(why they differ or None, max |got - want|)``: same shape and dtype, and |got - want| <= atol +
    rtol * |want| elementwise (NaN where the reference has NaN). ``what`` names the output in the message."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{what} is {got.dtype}{list(got.shape)}, the reference {want.dtype}{list(want.shape)}", float("inf")
    if got.size == 0:
        return None, 0.0
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    diff = np.where(np.isnan(got) & np.isnan(want), 0.0, diff)
    worst = float(np.nanmax(np.where(np.isnan(diff), np.inf, diff)))
    bad = ~(diff <= atol + rtol * np.abs(want.astype(np.float64)))
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        return (f"{what} differs from the reference at {list(index)}: {got[index]!r} vs {want[index]!r} (max "
                f"|diff| {worst:.3g}; rtol {rtol:g}, atol {atol:g})"), worst
    return None, worst
