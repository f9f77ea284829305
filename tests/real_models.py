"""Real-model builders (``onnx.helper``, no files, no downloads), opset 17, float32, laid out as exporters emit them.

Shared by the tests (``test_real_models.py``) and the benches (``bench/software_adapter.py``,
``bench/graph_replay.py``). Weights are drawn with a fixed seed and scaled so that activations stay near unit size;
every builder returns a checked model (``onnx.checker`` with full shape inference) whose shapes are static except
the voice-activity model's batch axis. The detector and the voice-activity model hold their small constants
(shapes, axes, pads, scales, scalars: up to 16 elements) in ``Constant`` nodes, as PyTorch's TorchScript exporter
writes them, and their weights in initializers; the other models hold everything in initializers.

``small_cnn``: a classifier of the kind a tutorial trains: four 3x3 Conv+Relu stages (16, 32, 64, 128 channels,
stride 2 after the first), a 1x1 Conv, GlobalMaxPool, Reshape and Gemm to 10 classes; input ``x`` [batch, 3, 128,
128], output ``y`` [batch, 10].

``yolo_detector``: YOLOv8 as ultralytics exports it through ``torch.onnx.export`` (eval mode, so each Conv+BN is
folded into one Conv with a bias): Conv+SiLU (Sigmoid * Mul) stems with stride 2; C2f blocks (1x1 Conv, Split in
two, bottlenecks of two 3x3 Conv+SiLU with a residual Add, Concat, 1x1 Conv); SPPF (1x1 Conv, three MaxPool 5x5
stride 1, Concat, 1x1 Conv); the PAN neck (Resize nearest with scales 2 and an absent roi, Concat, C2f; strided
Conv, Concat, C2f); the Detect head on the stride-8/16/32 maps (two 3x3 Conv+SiLU then a 1x1 Conv, for 64 box
and ``classes`` class channels; Concat, Reshape to [batch, 64 + classes, cells], Concat over the levels, Split into
box and class channels); anchors made as a traced ``make_anchors`` is (Shape, Gather, Cast, Range, Add 0.5,
Reshape/Expand meshgrid, Unsqueeze/Concat stack, ConstantOfShape for the stride column, Concat, Transpose); DFL
(Reshape to [batch, 4, 16, cells], Transpose, Softmax over the 16 bins, a 1x1 Conv with weights 0..15, Reshape);
dist2bbox (Split, Sub, Add, Div, Concat, Mul by the strides) and Sigmoid on the classes, concatenated to ``y``
[batch, 4 + classes, cells]. Channels are ``width`` x (1, 2, 4, 8, 16): YOLOv8n is width 16 at 640x640 with
80 classes. Input ``x`` [batch, 3, size, size].

``ocr_detector``: a DBNet text detector (PP-OCR's det_mobilenet_v3 + DBFPN + DBHead) as paddle2onnx exports it:
every Conv (no bias) followed by an unfolded BatchNormalization; MobileNetV3-large residual units (1x1 expand,
depthwise kxk, squeeze-excite of GlobalAveragePool, 1x1 Conv+Relu, 1x1 Conv, HardSigmoid(0.2, 0.5), Mul; 1x1
project; residual Add) with Relu or HardSwish activations, one unit using the hand-written
``x * relu6(x + 3) / 6`` of PyTorch ports (Add, Clip(0, 6), Mul, Div); the FPN neck (1x1 Conv per stage, top-down
Resize nearest with scales and an empty roi initializer plus Add, 3x3 Conv, Resize linear
(pytorch_half_pixel) to the stride-4 map with sizes taken from its Shape, Concat); the DB head (3x3
Conv+BN+Relu, ConvTranspose 2x2 stride 2+BN+Relu, ConvTranspose 2x2 stride 2, Sigmoid). Channels scaled by
``scale`` (PP-OCR uses 0.5); input ``x`` [batch, 3, size, size], output ``y`` [batch, 1, size, size].

``vad_model``: a voice-activity detector in the style of Silero VAD as ``torch.onnx.export`` writes it with a
dynamic batch axis: audio ``x`` [batch, samples] and recurrent ``state`` [2, batch, hidden] in; Unsqueeze, Pad
reflect (a centred STFT), Conv1d with a fixed Hann-windowed cos/sin basis as the STFT (stride hop), Slice into
real and imaginary parts, magnitude (Pow, Add, Sqrt), Log; an encoder of causal Conv1d (Pad constant then Conv)
and strided Conv1d with Relu; Transpose to time-major; a bidirectional LSTM (no sequence_lens) whose zero initial
states come from Shape, Gather, Unsqueeze, Concat and ConstantOfShape, then Transpose and Reshape [0, 0, -1] of
its output; a forward LSTM whose initial state is the ``state`` input (Gather, Unsqueeze); Relu, MatMul + Add,
Sigmoid, Squeeze and Transpose to ``prob`` [batch, frames]; the new state (Concat of Y_h and Y_c) to
``new_state`` [2, batch, hidden].
"""

from __future__ import annotations

import collections

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


#: Constants of at most this many elements are Constant nodes in the models built with ``constant_nodes``.
SMALL_CONSTANT = 16


class _Builder:
    def __init__(self, seed: int, constant_nodes: bool = False) -> None:
        self.rng = np.random.default_rng(seed)
        self.constant_nodes = constant_nodes
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def const(self, stem: str, value: np.ndarray, param: bool = True) -> str:
        """An initializer; a Constant node instead for a small constant that is no parameter (``param=False``)
        of a model built with ``constant_nodes``."""
        n = self.name(stem)
        tensor = numpy_helper.from_array(np.asarray(value), n)
        if self.constant_nodes and not param and 0 < tensor_size(tensor) <= SMALL_CONSTANT:
            self.nodes.append(helper.make_node("Constant", [], [n], name=f"{n}/Constant", value=tensor))
        else:
            self.inits.append(tensor)
        return n

    def ints(self, *values: int) -> str:
        return self.const("i", np.array(values, np.int64), param=False)

    def index(self, value: int) -> str:
        return self.const("i", np.array(value, np.int64), param=False)

    def scalar(self, value: float) -> str:
        return self.const("f", np.array(value, np.float32), param=False)

    def node(self, op: str, inputs: list[str], **attrs: object) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def multi(self, op: str, inputs: list[str], outputs: int, **attrs: object) -> list[str]:
        """A node of several outputs; returns their names."""
        stem = self.name(op.lower())
        outs = [f"{stem}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=stem, **attrs))
        return outs

    def weight(self, shape: tuple[int, ...], fan_in: int, gain: float = 2.0) -> np.ndarray:
        return (self.rng.standard_normal(shape) * np.sqrt(gain / fan_in)).astype(np.float32)

    def conv(self, x: str, cin: int, cout: int, k: int = 3, stride: int = 1, act: str | None = "silu",
             bias: bool = True, group: int = 1, pad: int | None = None, gain: float = 2.0) -> str:
        """2-D Conv (square kernel, 'same' padding unless pad is given) and an activation."""
        p = k // 2 if pad is None else pad
        ins = [x, self.const("w", self.weight((cout, cin // group, k, k), cin // group * k * k, gain))]
        if bias:
            ins.append(self.const("b", (self.rng.standard_normal(cout) * 0.05).astype(np.float32)))
        y = self.node("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[p] * 4,
                      **({"group": group} if group != 1 else {}))
        return self.act(y, act)

    def act(self, y: str, act: str | None) -> str:
        if act is None:
            return y
        if act == "relu":
            return self.node("Relu", [y])
        if act == "silu":
            return self.node("Mul", [y, self.node("Sigmoid", [y])])
        if act == "hardswish":
            return self.node("HardSwish", [y])
        if act == "hswish_clip":  # x * relu6(x + 3) / 6, as PyTorch ports of MobileNetV3 write it
            six = self.node("Clip", [self.node("Add", [y, self.scalar(3.0)]), self.scalar(0.0), self.scalar(6.0)])
            return self.node("Div", [self.node("Mul", [y, six]), self.scalar(6.0)])
        raise ValueError(f"unknown activation {act!r}")

    def batchnorm(self, x: str, c: int) -> str:
        gamma = (1 + 0.1 * self.rng.standard_normal(c)).astype(np.float32)
        beta = (0.05 * self.rng.standard_normal(c)).astype(np.float32)
        mean = (0.05 * self.rng.standard_normal(c)).astype(np.float32)
        var = self.rng.uniform(0.5, 1.5, c).astype(np.float32)
        return self.node("BatchNormalization", [x, *(self.const(s, v) for s, v in
                                                     [("g", gamma), ("beta", beta), ("mean", mean), ("var", var)])],
                         epsilon=1e-5)

    def model(self, name: str, inputs: dict[str, list[int]], outputs: dict[str, list[int]],
              output_values: list[str]) -> onnx.ModelProto:
        """Renames the producers of ``output_values`` to the graph outputs' names and checks the model."""
        for value, out in zip(output_values, outputs):
            for node in self.nodes:
                node.input[:] = [out if i == value else i for i in node.input]
                node.output[:] = [out if o == value else o for o in node.output]
        graph = helper.make_graph(
            self.nodes, name, [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs.items()],
            [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in outputs.items()], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="epabi-tests")
        model.ir_version = 8
        onnx.checker.check_model(model, full_check=True)
        return model


def tensor_size(tensor: onnx.TensorProto) -> int:
    return int(np.prod(tensor.dims, dtype=np.int64))


def op_counts(model: onnx.ModelProto) -> collections.Counter:
    """Nodes per op type."""
    return collections.Counter(n.op_type for n in model.graph.node)


# -- small CNN ---------------------------------------------------------------------------------------------------

def small_cnn(batch: int = 1, seed: int = 0) -> onnx.ModelProto:
    """The classifier of the module docstring."""
    b = _Builder(seed)
    x = b.conv("x", 3, 16, act="relu")
    for cin, cout in [(16, 32), (32, 64), (64, 128)]:
        x = b.conv(b.conv(x, cin, cout, stride=2, act="relu"), cout, cout, act="relu")
    x = b.node("GlobalMaxPool", [b.conv(x, 128, 256, k=1, act="relu")])
    x = b.node("Reshape", [x, b.ints(batch, 256)])
    w = (b.rng.standard_normal((256, 10)) / 16).astype(np.float32)
    y = b.node("Gemm", [x, b.const("fc", w), b.const("fcb", np.zeros(10, np.float32))])
    return b.model("small_cnn", {"x": [batch, 3, 128, 128]}, {"y": [batch, 10]}, [y])


# -- YOLOv8 ------------------------------------------------------------------------------------------------------

REG_MAX = 16


def _c2f(b: _Builder, x: str, cin: int, cout: int, blocks: int, shortcut: bool) -> str:
    c = cout // 2
    parts = b.multi("Split", [b.conv(x, cin, 2 * c, k=1), b.ints(c, c)], 2, axis=1)
    for _ in range(blocks):
        h = b.conv(b.conv(parts[-1], c, c), c, c)
        parts.append(b.node("Add", [parts[-1], h]) if shortcut else h)
    return b.conv(b.node("Concat", parts, axis=1), c * len(parts), cout, k=1)


def _sppf(b: _Builder, x: str, cin: int, cout: int) -> str:
    y = [b.conv(x, cin, cin // 2, k=1)]
    for _ in range(3):
        y.append(b.node("MaxPool", [y[-1]], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2]))
    return b.conv(b.node("Concat", y, axis=1), cin // 2 * 4, cout, k=1)


def _upsample(b: _Builder, x: str) -> str:
    return b.node("Resize", [x, "", b.const("scales", np.array([1, 1, 2, 2], np.float32), param=False)],
                  coordinate_transformation_mode="asymmetric", mode="nearest", nearest_mode="floor",
                  cubic_coeff_a=-0.75)


def _anchors(b: _Builder, feats: list[str], strides: list[int]) -> tuple[str, str]:
    """make_anchors as traced: anchor points [2, cells] and strides [1, cells] from the maps' shapes."""
    points, stride_cols = [], []
    for feat, stride in zip(feats, strides):
        shape = b.node("Shape", [feat])
        h = b.node("Gather", [shape, b.index(2)], axis=0)
        w = b.node("Gather", [shape, b.index(3)], axis=0)
        zero, one = b.scalar(0.0), b.scalar(1.0)
        sx = b.node("Add", [b.node("Range", [zero, b.node("Cast", [w], to=TensorProto.FLOAT), one]), b.scalar(0.5)])
        sy = b.node("Add", [b.node("Range", [zero, b.node("Cast", [h], to=TensorProto.FLOAT), one]), b.scalar(0.5)])
        hw = b.node("Concat", [b.node("Unsqueeze", [h, b.ints(0)]), b.node("Unsqueeze", [w, b.ints(0)])], axis=0)
        gy = b.node("Expand", [b.node("Reshape", [sy, b.ints(-1, 1)]), hw])
        gx = b.node("Expand", [b.node("Reshape", [sx, b.ints(1, -1)]), hw])
        stacked = b.node("Concat", [b.node("Unsqueeze", [gx, b.ints(-1)]), b.node("Unsqueeze", [gy, b.ints(-1)])],
                         axis=-1)
        points.append(b.node("Reshape", [stacked, b.ints(-1, 2)]))
        cells = b.node("Unsqueeze", [b.node("Mul", [h, w]), b.ints(0)])
        full = helper.make_tensor("value", TensorProto.FLOAT, [1], [float(stride)])
        stride_cols.append(b.node("ConstantOfShape", [b.node("Concat", [cells, b.ints(1)], axis=0)], value=full))
    anchors = b.node("Transpose", [b.node("Concat", points, axis=0)], perm=[1, 0])
    return anchors, b.node("Transpose", [b.node("Concat", stride_cols, axis=0)], perm=[1, 0])


def yolo_detector(batch: int = 1, size: int = 320, width: int = 16, classes: int = 80,
                  seed: int = 0) -> onnx.ModelProto:
    """The detector of the module docstring; size must be a multiple of 32."""
    if size % 32 != 0:
        raise ValueError(f"yolo_detector: size={size} must be a multiple of 32")
    b = _Builder(seed, constant_nodes=True)
    c1, c2, c3, c4, c5 = (width * m for m in (1, 2, 4, 8, 16))
    x = b.conv(b.conv("x", 3, c1, stride=2), c1, c2, stride=2)          # /4
    x = _c2f(b, x, c2, c2, 1, True)
    p3 = _c2f(b, b.conv(x, c2, c3, stride=2), c3, c3, 2, True)           # /8
    p4 = _c2f(b, b.conv(p3, c3, c4, stride=2), c4, c4, 2, True)          # /16
    p5 = _sppf(b, _c2f(b, b.conv(p4, c4, c5, stride=2), c5, c5, 1, True), c5, c5)  # /32
    n4 = _c2f(b, b.node("Concat", [_upsample(b, p5), p4], axis=1), c5 + c4, c4, 1, False)
    o3 = _c2f(b, b.node("Concat", [_upsample(b, n4), p3], axis=1), c4 + c3, c3, 1, False)
    o4 = _c2f(b, b.node("Concat", [b.conv(o3, c3, c3, stride=2), n4], axis=1), c3 + c4, c4, 1, False)
    o5 = _c2f(b, b.node("Concat", [b.conv(o4, c4, c4, stride=2), p5], axis=1), c4 + c5, c5, 1, False)
    box_ch, cls_ch = max(16, c3 // 4, REG_MAX * 4), max(c3, min(classes, 100))
    no = REG_MAX * 4 + classes
    levels = []
    for feat, ch in [(o3, c3), (o4, c4), (o5, c5)]:
        box = b.conv(b.conv(b.conv(feat, ch, box_ch), box_ch, box_ch), box_ch, REG_MAX * 4, k=1, act=None)
        cls = b.conv(b.conv(b.conv(feat, ch, cls_ch), cls_ch, cls_ch), cls_ch, classes, k=1, act=None)
        levels.append(b.node("Concat", [box, cls], axis=1))
    cat = b.node("Concat", [b.node("Reshape", [lv, b.ints(batch, no, -1)]) for lv in levels], axis=2)
    anchors, strides = _anchors(b, levels, [8, 16, 32])
    box, cls = b.multi("Split", [cat, b.ints(REG_MAX * 4, classes)], 2, axis=1)
    # DFL: the expected value of each side's 16-bin distribution, as a 1x1 Conv with weights 0..15
    bins = b.node("Softmax", [b.node("Transpose", [b.node("Reshape", [box, b.ints(batch, 4, REG_MAX, -1)])],
                                     perm=[0, 2, 1, 3])], axis=1)
    dfl_w = b.const("dfl", np.arange(REG_MAX, dtype=np.float32).reshape(1, REG_MAX, 1, 1))
    dist = b.node("Reshape", [b.node("Conv", [bins, dfl_w], kernel_shape=[1, 1]), b.ints(batch, 4, -1)])
    lt, rb = b.multi("Split", [dist, b.ints(2, 2)], 2, axis=1)
    anchor = b.node("Unsqueeze", [anchors, b.ints(0)])
    x1y1, x2y2 = b.node("Sub", [anchor, lt]), b.node("Add", [anchor, rb])
    c_xy = b.node("Div", [b.node("Add", [x1y1, x2y2]), b.scalar(2.0)])
    wh = b.node("Sub", [x2y2, x1y1])
    dbox = b.node("Mul", [b.node("Concat", [c_xy, wh], axis=1), strides])
    y = b.node("Concat", [dbox, b.node("Sigmoid", [cls])], axis=1)
    cells = sum((size // s) ** 2 for s in (8, 16, 32))
    return b.model("yolo_detector", {"x": [batch, 3, size, size]}, {"y": [batch, 4 + classes, cells]}, [y])


# -- DBNet text detector (PP-OCR) --------------------------------------------------------------------------------

#: MobileNetV3-large residual units: (kernel, expanded, out, squeeze-excite, activation, stride).
_MBV3_LARGE = [
    (3, 16, 16, False, "relu", 1), (3, 64, 24, False, "relu", 2), (3, 72, 24, False, "relu", 1),
    (5, 72, 40, True, "relu", 2), (5, 120, 40, True, "relu", 1), (5, 120, 40, True, "relu", 1),
    (3, 240, 80, False, "hswish_clip", 2), (3, 200, 80, False, "hardswish", 1), (3, 184, 80, False, "hardswish", 1),
    (3, 184, 80, False, "hardswish", 1), (3, 480, 112, True, "hardswish", 1), (3, 672, 112, True, "hardswish", 1),
    (5, 672, 160, True, "hardswish", 2), (5, 960, 160, True, "hardswish", 1), (5, 960, 160, True, "hardswish", 1),
]


def _divisible(v: float, divisor: int = 8) -> int:
    out = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return out + divisor if out < 0.9 * v else out


def _conv_bn(b: _Builder, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1,
             act: str | None = None) -> str:
    # He gain before an activation, 1 before a linear output: the random BN statistics do not normalise as trained
    # ones would, so this keeps the activations near unit size through the residual units
    y = b.conv(x, cin, cout, k=k, stride=stride, act=None, bias=False, group=group, gain=2.0 if act else 1.0)
    return b.act(b.batchnorm(y, cout), act)


def _squeeze_excite(b: _Builder, x: str, c: int) -> str:
    s = b.conv(b.node("GlobalAveragePool", [x]), c, c // 4, k=1, act="relu")
    s = b.node("HardSigmoid", [b.conv(s, c // 4, c, k=1, act=None)], alpha=0.2, beta=0.5)
    return b.node("Mul", [x, s])


def _resize_nearest(b: _Builder, x: str, scale: int) -> str:
    roi = b.const("roi", np.zeros(0, np.float32), param=False)  # paddle2onnx writes an empty roi
    return b.node("Resize", [x, roi, b.const("scales", np.array([1, 1, scale, scale], np.float32), param=False)],
                  coordinate_transformation_mode="asymmetric", mode="nearest", nearest_mode="floor")


def _resize_like(b: _Builder, x: str, like: str) -> str:
    """F.interpolate(x, size=like.shape[2:], mode='bilinear'): the sizes from Shape of both."""
    nc = b.node("Slice", [b.node("Shape", [x]), b.ints(0), b.ints(2)])
    hw = b.node("Slice", [b.node("Shape", [like]), b.ints(2), b.ints(4)])
    return b.node("Resize", [x, "", "", b.node("Concat", [nc, hw], axis=0)],
                  coordinate_transformation_mode="pytorch_half_pixel", mode="linear", nearest_mode="floor")


def ocr_detector(batch: int = 1, size: int = 640, scale: float = 0.5, neck: int = 96,
                 seed: int = 0) -> onnx.ModelProto:
    """The text detector of the module docstring; size must be a multiple of 32."""
    if size % 32 != 0:
        raise ValueError(f"ocr_detector: size={size} must be a multiple of 32")
    b = _Builder(seed)
    cin = _divisible(16 * scale)
    x = _conv_bn(b, "x", 3, cin, 3, stride=2, act="hardswish")
    stages, channels = [], []
    for i, (k, exp, out, se, act, stride) in enumerate(_MBV3_LARGE):
        if stride == 2 and i > 2:  # a stage ends before each stride-2 unit after the first
            stages.append(x)
            channels.append(cin)
        mid, cout = _divisible(scale * exp), _divisible(scale * out)
        y = _conv_bn(b, x, cin, mid, 1, act=act)
        y = _conv_bn(b, y, mid, mid, k, stride=stride, group=mid, act=act)
        if se:
            y = _squeeze_excite(b, y, mid)
        y = _conv_bn(b, y, mid, cout, 1)
        x = b.node("Add", [x, y]) if stride == 1 and cin == cout else y
        cin = cout
    last = _divisible(scale * 960)
    stages.append(_conv_bn(b, x, cin, last, 1, act="hardswish"))
    channels.append(last)
    # DBFPN
    c2, c3, c4, c5 = (b.conv(s, c, neck, k=1, act=None, bias=False) for s, c in zip(stages, channels))
    out4 = b.node("Add", [c4, _resize_nearest(b, c5, 2)])
    out3 = b.node("Add", [c3, _resize_nearest(b, out4, 2)])
    out2 = b.node("Add", [c2, _resize_nearest(b, out3, 2)])
    p5, p4, p3, p2 = (b.conv(v, neck, neck // 4, k=3, act=None, bias=False) for v in (c5, out4, out3, out2))
    fuse = b.node("Concat", [_resize_like(b, p5, p2), _resize_like(b, p4, p2), _resize_like(b, p3, p2), p2], axis=1)
    # DB head
    q = neck // 4
    h = _conv_bn(b, fuse, neck, q, 3, act="relu")
    up_w = b.const("wt", b.weight((q, q, 2, 2), q))  # stride = kernel: each output sums one tap per channel
    h = b.act(b.batchnorm(b.node("ConvTranspose", [h, up_w, b.const("bt", np.zeros(q, np.float32))],
                                 kernel_shape=[2, 2], strides=[2, 2]), q), "relu")
    out_w = b.const("wt", b.weight((q, 1, 2, 2), q, gain=1.0))
    y = b.node("Sigmoid", [b.node("ConvTranspose", [h, out_w, b.const("bt", np.zeros(1, np.float32))],
                                  kernel_shape=[2, 2], strides=[2, 2])])
    return b.model("ocr_detector", {"x": [batch, 3, size, size]}, {"y": [batch, 1, size, size]}, [y])


# -- voice activity (Silero-style) -------------------------------------------------------------------------------

def _stft_basis(n_fft: int) -> np.ndarray:
    """Hann-windowed cos and sin rows of the real DFT: [2 * (n_fft // 2 + 1), 1, n_fft]."""
    bins = n_fft // 2 + 1
    t = np.arange(n_fft)
    window = 0.5 - 0.5 * np.cos(2 * np.pi * t / n_fft)
    angle = 2 * np.pi * np.outer(np.arange(bins), t) / n_fft
    return np.concatenate([np.cos(angle), -np.sin(angle)])[:, None, :].astype(np.float32) * window.astype(np.float32)


def _lstm_weights(b: _Builder, dirs: int, inputs: int, hidden: int) -> list[str]:
    bound = 1 / np.sqrt(hidden)  # PyTorch's uniform(-1/sqrt(H), 1/sqrt(H))
    w = b.rng.uniform(-bound, bound, (dirs, 4 * hidden, inputs)).astype(np.float32)
    r = b.rng.uniform(-bound, bound, (dirs, 4 * hidden, hidden)).astype(np.float32)
    bias = b.rng.uniform(-bound, bound, (dirs, 8 * hidden)).astype(np.float32)
    return [b.const("W", w), b.const("R", r), b.const("B", bias)]


def vad_model(samples: int = 1600, n_fft: int = 64, channels: int = 16, hidden: int = 16,
              seed: int = 0) -> onnx.ModelProto:
    """The voice-activity model of the module docstring; samples must be a multiple of n_fft // 2."""
    hop = n_fft // 2
    if samples % hop != 0:
        raise ValueError(f"vad_model: samples={samples} must be a multiple of the hop {hop}")
    b = _Builder(seed, constant_nodes=True)
    bins = n_fft // 2 + 1
    x = b.node("Unsqueeze", ["x", b.ints(1)])
    x = b.node("Pad", [x, b.ints(0, 0, hop, 0, 0, hop)], mode="reflect")
    spec = b.node("Conv", [x, b.const("stft", _stft_basis(n_fft))], kernel_shape=[n_fft], strides=[hop],
                  pads=[0, 0])
    re = b.node("Slice", [spec, b.ints(0), b.ints(bins), b.ints(1)])
    im = b.node("Slice", [spec, b.ints(bins), b.ints(2 * bins), b.ints(1)])
    two = b.scalar(2.0)
    mag = b.node("Sqrt", [b.node("Add", [b.node("Pow", [re, two]), b.node("Pow", [im, two])])])
    feat = b.node("Log", [b.node("Add", [mag, b.scalar(1e-3)])])
    frames = samples // hop + 1

    def conv1d(v: str, cin: int, cout: int, stride: int = 1, causal: bool = False) -> str:
        if causal:  # F.pad(v, (2, 0)) then an unpadded kernel-3 Conv
            v = b.node("Pad", [v, b.ints(0, 0, 2, 0, 0, 0), b.scalar(0.0)], mode="constant")
        w = b.const("w", b.weight((cout, cin, 3), cin * 3))
        bias = b.const("b", (b.rng.standard_normal(cout) * 0.05).astype(np.float32))
        return b.node("Relu", [b.node("Conv", [v, w, bias], kernel_shape=[3], strides=[stride],
                                      pads=[0, 0] if causal else [1, 1])])

    h = conv1d(conv1d(feat, bins, channels, causal=True), channels, channels, stride=2)
    h = conv1d(h, channels, channels, causal=True)
    frames = (frames - 1) // 2 + 1
    seq = b.node("Transpose", [h], perm=[2, 0, 1])                      # [frames, batch, channels]
    # torch.zeros(2, x.size(0), hidden) as traced
    n = b.node("Unsqueeze", [b.node("Gather", [b.node("Shape", ["x"]), b.index(0)],
                                    axis=0), b.ints(0)])
    zeros = b.node("ConstantOfShape", [b.node("Concat", [b.ints(2), n, b.ints(hidden)], axis=0)],
                   value=helper.make_tensor("value", TensorProto.FLOAT, [1], [0.0]))
    y, _, _ = b.multi("LSTM", [seq, *_lstm_weights(b, 2, channels, hidden), "", zeros, zeros], 3,
                      hidden_size=hidden, direction="bidirectional")
    y = b.node("Reshape", [b.node("Transpose", [y], perm=[0, 2, 1, 3]), b.ints(0, 0, -1)])
    h0 = b.node("Unsqueeze", [b.node("Gather", ["state", b.index(0)], axis=0), b.ints(0)])
    c0 = b.node("Unsqueeze", [b.node("Gather", ["state", b.index(1)], axis=0), b.ints(0)])
    y2, yh, yc = b.multi("LSTM", [y, *_lstm_weights(b, 1, 2 * hidden, hidden), "", h0, c0], 3, hidden_size=hidden)
    z = b.node("Relu", [b.node("Squeeze", [y2, b.ints(1)])])           # [frames, batch, hidden]
    head = b.const("head", b.weight((hidden, 1), hidden, gain=16.0))
    logit = b.node("Add", [b.node("MatMul", [z, head]), b.scalar(0.1)])
    prob = b.node("Transpose", [b.node("Squeeze", [b.node("Sigmoid", [logit]), b.ints(2)])], perm=[1, 0])
    state = b.node("Concat", [yh, yc], axis=0)
    return b.model("vad_model", {"x": ["batch", samples], "state": [2, "batch", hidden]},
                   {"prob": ["batch", frames], "new_state": [2, "batch", hidden]}, [prob, state])
