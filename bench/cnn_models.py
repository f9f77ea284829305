"""Convolutional bench models made with ``onnx.helper`` (no files, no downloads), opset 17, float32 NCHW.

``small_cnn``: a classifier of the kind a tutorial trains: four 3x3 Conv+Relu stages (16, 32, 64, 128 channels,
stride 2 after the first), a 1x1 Conv, GlobalMaxPool, Reshape and Gemm to 10 classes; input ``x`` [batch, 3, 128, 128].

``yolo_like``: a YOLOv8n-shaped detector at 320x320 (width 0.25): Conv+SiLU stems with stride 2, C2f blocks
(1x1 Conv, split in two by Slice, bottlenecks of two 3x3 Conv+SiLU with a residual Add, Concat, 1x1 Conv), and
detection heads on the stride-8/16/32 maps (two 3x3 Conv+SiLU then a 1x1 Conv to 64 box + 80 class channels,
Sigmoid on the classes), reshaped and concatenated to ``y`` [batch, 144, 2100]. What a real YOLOv8n has besides
(SPPF's MaxPool, the neck's Resize upsampling) is left out until the software adapter claims those ops, so that
the whole graph runs on our EP. Weights are drawn with a fixed seed, scaled to keep activations near unit size.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def const(self, stem: str, value: np.ndarray) -> str:
        n = self.name(stem)
        self.inits.append(numpy_helper.from_array(value, n))
        return n

    def node(self, op: str, inputs: list[str], **attrs: object) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int = 3, stride: int = 1, act: str | None = "silu") -> str:
        w = (self.rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        b = (self.rng.standard_normal(cout) * 0.05).astype(np.float32)
        y = self.node("Conv", [x, self.const("w", w), self.const("b", b)], kernel_shape=[k, k],
                      strides=[stride, stride], pads=[k // 2] * 4)
        if act == "relu":
            return self.node("Relu", [y])
        if act == "silu":
            return self.node("Mul", [y, self.node("Sigmoid", [y])])
        return y

    def slice_channels(self, x: str, begin: int, end: int) -> str:
        bounds = [self.const(stem, np.array([v], np.int64)) for stem, v in [("s", begin), ("e", end), ("a", 1)]]
        return self.node("Slice", [x, *bounds])

    def c2f(self, x: str, cin: int, cout: int, blocks: int, shortcut: bool = True) -> str:
        half = cout // 2
        y = self.conv(x, cin, cout, k=1)
        parts = [self.slice_channels(y, 0, half), self.slice_channels(y, half, cout)]
        for _ in range(blocks):
            h = self.conv(self.conv(parts[-1], half, half), half, half)
            parts.append(self.node("Add", [parts[-1], h]) if shortcut else h)
        return self.conv(self.node("Concat", parts, axis=1), half * len(parts), cout, k=1)

    def model(self, name: str, x_shape: list[int], y_shape: list[int]) -> onnx.ModelProto:
        self.nodes[-1].output[0] = "y"  # the last node is the graph's output
        graph = helper.make_graph(self.nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="epabi-bench")
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def small_cnn(batch: int = 1, seed: int = 0) -> onnx.ModelProto:
    """The classifier of the module docstring."""
    b = _Builder(seed)
    x = b.conv("x", 3, 16, act="relu")
    for cin, cout in [(16, 32), (32, 64), (64, 128)]:
        x = b.conv(b.conv(x, cin, cout, stride=2, act="relu"), cout, cout, act="relu")
    x = b.node("GlobalMaxPool", [b.conv(x, 128, 256, k=1, act="relu")])
    x = b.node("Reshape", [x, b.const("shape", np.array([batch, 256], np.int64))])
    w = (b.rng.standard_normal((256, 10)) / 16).astype(np.float32)
    b.node("Gemm", [x, b.const("fc", w), b.const("fcb", np.zeros(10, np.float32))])
    return b.model("small_cnn", [batch, 3, 128, 128], [batch, 10])


def yolo_like(batch: int = 1, size: int = 320, seed: int = 0) -> onnx.ModelProto:
    """The detector of the module docstring; size must be a multiple of 32."""
    if size % 32 != 0:
        raise ValueError(f"yolo_like: size={size} must be a multiple of 32")
    b = _Builder(seed)
    x = b.conv(b.conv("x", 3, 16, stride=2), 16, 32, stride=2)          # /4
    x = b.c2f(x, 32, 32, 1)
    p3 = b.c2f(b.conv(x, 32, 64, stride=2), 64, 64, 2)                  # /8
    p4 = b.c2f(b.conv(p3, 64, 128, stride=2), 128, 128, 2)              # /16
    p5 = b.c2f(b.conv(p4, 128, 256, stride=2), 256, 256, 1)             # /32
    outs = []
    for feat, ch, stride in [(p3, 64, 8), (p4, 128, 16), (p5, 256, 32)]:
        box = b.conv(b.conv(b.conv(feat, ch, 64), 64, 64), 64, 64, k=1, act=None)
        cls = b.node("Sigmoid", [b.conv(b.conv(b.conv(feat, ch, 80), 80, 80), 80, 80, k=1, act=None)])
        cells = (size // stride) ** 2
        head = b.node("Concat", [box, cls], axis=1)
        outs.append(b.node("Reshape", [head, b.const("shape", np.array([batch, 144, cells], np.int64))]))
    cells = sum((size // s) ** 2 for s in (8, 16, 32))
    b.node("Concat", outs, axis=2)
    return b.model("yolo_like", [batch, 3, size, size], [batch, 144, cells])
