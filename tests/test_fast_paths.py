"""The software adapter's fast CPU paths compute what they replace: checked against float64 numpy, onnx.reference and
ONNX Runtime's CPU EP, through epabi's host and through real onnxruntime (MIN and NEWEST).

* vmath.h (Exp, Sigmoid, Tanh, Gelu's tanh form): error bounds against float64 numpy over every range an input can
  take (dense sweeps of [-110, 110], magnitudes from 1e-40 to 100, the special values), on pools of 1, 2 and 3
  threads with sizes that leave ragged chunks.
* elementwise.c's float rows (both operands contiguous, or one a single value) and its dims coalescing and thread
  split: every broadcast pattern, bit for bit against numpy float32 (one rounding per element either way), with a
  fused Relu and with Max/Min accumulating in place.
* conv_packed.c (the implicit-GEMM Conv over weights packed at Compile) and the fused activation epilogues
  (plan_passes.c, epilogue.h): strides, dilations, asymmetric and SAME padding, groups, 1-D and W = 1 convs
  (magika's), batches, weights as a graph input, channel counts that leave partial panels and positions that leave
  partial tiles, padded stride-1 convs read in place through lane masks (rows narrower than a tile, dilations,
  groups) and those left to the padded copy (pads past the window either way, windows over 16 wide or 64 taps), column
  stride 2 (whose copy splits both column phases of a row at once) with wide pads, dilations and tiny images, on 1-3
  threads, within float32 rounding of the CPU EP and bit for bit equal to the same Conv with the activation run as
  its own node (a Conv output that is also a graph output is never fused).
* the data movement spread over the pool (Concat by outer rows or byte chunks, the strided copies of Split, Slice
  and Transpose by rows, Reshape's copy by byte chunks): exactly numpy's, with copies of several MiB on 2-3
  threads and ragged chunk counts.
* pool.c's separable float MaxPool (1-D and 2-D, no Indices) and the vectorised GlobalMaxPool: bit for bit against
  onnx.reference (max is exact), with -inf planes, NaN in windows and windows that reach only padding; its
  GlobalAveragePool (sixteen double lanes per plane) within one float32 rounding of float64 numpy, with plane sizes
  that leave ragged lanes.

Speed itself is measured by bench/software_adapter.py, never here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import epabi
from real_ort import MIN, NEWEST
from test_real_ort_models import assert_all_on_our_ep, run_on_real_ort

THREADS = "intra_op_num_threads"
FLT_TINY = np.float32(np.finfo(np.float32).tiny)


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, tuple[int, list | None]], outputs: list[str],
           inits: list[onnx.TensorProto] | None = None, opset: int = 20) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "fast_paths",
                              [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


@pytest.fixture
def session(host: epabi.Host) -> Iterator:
    """session(model, threads) -> epabi.InferenceSession with every node on our EP; all closed afterwards."""
    made: list[epabi.InferenceSession] = []

    def make(model: onnx.ModelProto, threads: int = 1) -> epabi.InferenceSession:
        so = epabi.SessionOptions()
        so.add_provider_for_devices(host.get_ep_devices(), {THREADS: str(threads)})
        sess = epabi.InferenceSession(model, so)
        made.append(sess)
        assert set(sess.node_assignment.values()) == {epabi.get_ep_name()}, sess.node_assignment
        return sess

    yield make
    for s in made:
        s.close()


def _cpu_ep(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


# -- vmath.h ------------------------------------------------------------------------------------------------------

ACTIVATIONS = ["exp", "sigmoid", "tanh", "gelu"]


def activation_model() -> onnx.ModelProto:
    nodes = [helper.make_node("Exp", ["x"], ["exp"]), helper.make_node("Sigmoid", ["x"], ["sigmoid"]),
             helper.make_node("Tanh", ["x"], ["tanh"]), helper.make_node("Gelu", ["x"], ["gelu"], approximate="tanh")]
    return _model(nodes, {"x": (TensorProto.FLOAT, None)}, ACTIVATIONS)


def activation_inputs(n_sweep: int = 2_000_001) -> np.ndarray:
    """Dense sweeps over [-110, 110] and [-1, 1], random magnitudes 1e-40 .. 100 of both signs, and the special
    values: zeros, infinities, NaN, denormals, exp's overflow and underflow edges, tanh's switch at 0.5."""
    rng = np.random.default_rng(5)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 88.72, 88.73, 89.5, -87.33, -103.9,
                        -104.1, -200.0, 0.5, -0.5, 0.49999997, 0.50000006, 9.1, -9.1, 44.5], np.float32)
    mags = (np.float32(10.0) ** rng.uniform(-40, 2, 300_001)).astype(np.float32)
    return np.concatenate([np.linspace(-110, 110, n_sweep, dtype=np.float32),
                           np.linspace(-1, 1, 200_001, dtype=np.float32), mags * rng.choice([-1, 1], mags.size),
                           special]).astype(np.float32)


def activation_reference(x: np.ndarray) -> dict[str, np.ndarray]:
    xd = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return {"exp": np.exp(xd), "sigmoid": 1 / (1 + np.exp(-xd)), "tanh": np.tanh(xd),
                "gelu": 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd ** 3)))}


def assert_activation_error(name: str, x: np.ndarray, got: np.ndarray, ref: np.ndarray) -> None:
    """NaN exactly where float32 of the reference is NaN, infinities exactly; exp within 2 ulp of every normal
    result, Sigmoid and Tanh within 3e-7 relative; below FLT_MIN within FLT_MIN absolute (vmath.h flushes denormal
    results); Gelu within 4e-7 of its magnitude or absolutely (its 1 + tanh cancels for negative x, in every float
    implementation)."""
    with np.errstate(over="ignore"):
        r32 = ref.astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(r32)), f"{name}: NaN at {x[np.isnan(got) != np.isnan(r32)][:5]}"
    inf = np.isinf(r32)
    assert np.array_equal(got[inf], r32[inf]), f"{name}: infinities at {x[inf][got[inf] != r32[inf]][:5]}"
    fin = np.isfinite(r32)
    err = np.abs(got[fin].astype(np.float64) - ref[fin])
    mag = np.abs(ref[fin])
    normal = mag >= FLT_TINY
    if name == "exp":
        ulp = err[normal] / np.spacing(np.abs(r32[fin][normal])).astype(np.float64)
        assert ulp.max() <= 2.0, f"exp: {ulp.max():.2f} ulp at x={x[fin][normal][np.argmax(ulp)]!r}"
    elif name == "gelu":
        bound = 4e-7 * np.maximum(mag, 1.0)
        assert (err <= bound).all(), f"gelu: error {err.max():.2e} at x={x[fin][np.argmax(err - bound)]!r}"
    else:
        rel = err[normal] / mag[normal]
        assert rel.max() <= 3e-7, f"{name}: relative error {rel.max():.2e} at x={x[fin][normal][np.argmax(rel)]!r}"
    assert (err[~normal] <= FLT_TINY).all(), f"{name}: error {err[~normal].max():.2e} below FLT_MIN"


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_vector_activations_are_accurate(session, threads: int) -> None:
    x = activation_inputs()
    x = x[: x.size - threads]  # sizes that leave ragged chunks on each pool
    outs = session(activation_model(), threads).run(None, {"x": x})
    ref = activation_reference(x)
    for name, got in zip(ACTIVATIONS, outs):
        assert_activation_error(name, x, got, ref[name])


def test_vector_activations_equal_the_cpu_ep(session) -> None:
    x = activation_inputs(200_001)
    model = activation_model()
    for name, got, want in zip(ACTIVATIONS, session(model, 2).run(None, {"x": x}), _cpu_ep(model, {"x": x})):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=name)


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_real_ort_vector_activations(version: str, library_path: str, tmp_path: Path) -> None:
    x = activation_inputs(200_001)
    x = x[np.isfinite(x)]  # the script checks two runs for equal outputs, which NaN (Gelu(-inf) too) never is
    model = activation_model()
    path = tmp_path / "acts.onnx"
    onnx.save(model, str(path))
    result, outs, err = run_on_real_ort(version, library_path, path, {"x": x}, "default", tmp_path / "run")
    assert_all_on_our_ep(result, version, err)
    ref = activation_reference(x)
    for name, got, want in zip(ACTIVATIONS, outs, _cpu_ep(model, {"x": x})):
        assert_activation_error(name, x, got, ref[name])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=name)


# -- elementwise.c ------------------------------------------------------------------------------------------------

#: (shape of A, shape of B): scalars on either side, rows and columns broadcast, middle dims broadcast, both
#: contiguous; odd extents so that rows and thread chunks are ragged.
BROADCASTS = [((3, 517, 61), ()), ((), (3, 517, 61)), ((3, 517, 61), (3, 517, 61)), ((3, 517, 61), (1, 517, 1)),
              ((3, 517, 61), (61,)), ((3, 1, 61), (3, 517, 1)), ((1,), (70001,)), ((70001,), (1,)),
              ((2, 3, 1, 129), (1, 3, 257, 1))]
BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Max": np.maximum,
          "Min": np.minimum}


def _operand(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    v = rng.standard_normal(shape).astype(np.float32)
    if v.size > 4:
        v.flat[:: max(1, v.size // 3)] = np.nan  # NaN propagates through every op, Max and Min included
    return v


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize(("sa", "sb"), BROADCASTS)
def test_binary_rows_equal_numpy(session, threads: int, sa: tuple, sb: tuple) -> None:
    rng = np.random.default_rng(len(sa) * 7 + len(sb))
    a, b = _operand(rng, sa), _operand(rng, sb)
    nodes = [helper.make_node(op, ["a", "b"], [op.lower()]) for op in BINARY]
    nodes += [helper.make_node("Add", ["a", "b"], ["sum"]), helper.make_node("Relu", ["sum"], ["relu"])]
    model = _model(nodes, {"a": (TensorProto.FLOAT, list(sa)), "b": (TensorProto.FLOAT, list(sb))},
                   [op.lower() for op in BINARY] + ["relu"], opset=13)
    outs = session(model, threads).run(None, {"a": a, "b": b})
    with np.errstate(all="ignore"):
        want = [f(a, b) for f in BINARY.values()] + [np.where(np.isnan(a + b), a + b, np.maximum(a + b, 0))]
    for name, got, exp in zip([*BINARY, "Add+Relu"], outs, want):
        assert got.shape == exp.shape and got.dtype == np.float32, name
        assert np.array_equal(got, exp, equal_nan=True), f"{name} {sa} {sb}: {np.sum(got != exp)} differ"


@pytest.mark.parametrize("threads", [1, 3])
def test_variadic_max_min_accumulate_in_place(session, threads: int) -> None:
    rng = np.random.default_rng(3)
    xs = [_operand(rng, s) for s in [(5, 1, 4099), (1, 7, 4099), (4099,)]]
    nodes = [helper.make_node("Max", ["x0", "x1", "x2"], ["max"]), helper.make_node("Min", ["x0", "x1", "x2"], ["min"])]
    model = _model(nodes, {f"x{i}": (TensorProto.FLOAT, list(x.shape)) for i, x in enumerate(xs)}, ["max", "min"],
                   opset=13)
    got_max, got_min = session(model, threads).run(None, {f"x{i}": x for i, x in enumerate(xs)})
    assert np.array_equal(got_max, np.maximum(np.maximum(xs[0], xs[1]), xs[2]), equal_nan=True)
    assert np.array_equal(got_min, np.minimum(np.minimum(xs[0], xs[1]), xs[2]), equal_nan=True)


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_real_ort_binary_rows(version: str, library_path: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((3, 517, 61)).astype(np.float32), rng.standard_normal((1, 517, 1)).astype(np.float32)
    s = rng.standard_normal(()).astype(np.float32)
    nodes = [helper.make_node("Mul", ["s", "a"], ["sa"]), helper.make_node("Add", ["sa", "b"], ["sab"]),
             helper.make_node("Relu", ["sab"], ["y"]), helper.make_node("Max", ["a", "b", "s"], ["m"])]
    model = _model(nodes, {"a": (TensorProto.FLOAT, [3, 517, 61]), "b": (TensorProto.FLOAT, [1, 517, 1]),
                           "s": (TensorProto.FLOAT, [])}, ["y", "m"], opset=13)
    path = tmp_path / "binary.onnx"
    onnx.save(model, str(path))
    feeds = {"a": a, "b": b, "s": s}
    result, outs, err = run_on_real_ort(version, library_path, path, feeds, "default", tmp_path / "run")
    assert_all_on_our_ep(result, version, err)
    for got, want in zip(outs, _cpu_ep(model, feeds)):
        assert np.array_equal(got, want)


# -- conv_packed.c and fused epilogues ----------------------------------------------------------------------------

#: name: (x shape, w shape, Conv attributes). Odd output channels (13, 21) leave partial 8-channel panels; odd
#: positions leave partial 32-position tiles.
CONVS = {
    "3x3_pad1": ((1, 16, 23, 29), (21, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    "3x3_stride2": ((2, 8, 31, 33), (16, 8, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "5x3_dil2_asym": ((1, 6, 19, 17), (13, 6, 5, 3), {"pads": [2, 0, 3, 1], "dilations": [2, 2]}),
    "same_upper_s3": ((1, 5, 20, 22), (9, 5, 4, 4), {"auto_pad": "SAME_UPPER", "strides": [3, 2]}),
    "1x1": ((3, 24, 9, 11), (40, 24, 1, 1), {}),
    "1x1_stride2": ((1, 24, 9, 11), (8, 24, 1, 1), {"strides": [2, 2]}),
    "valid_7x7": ((1, 3, 20, 20), (16, 3, 7, 7), {}),
    "group2": ((1, 12, 14, 15), (18, 6, 3, 3), {"pads": [1, 1, 1, 1], "group": 2}),
    "depthwise_mult8": ((1, 4, 17, 19), (32, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 4}),
    "conv1d": ((2, 10, 77), (12, 10, 5), {"pads": [2, 2]}),
    "magika_w1": ((2, 32, 70, 1), (24, 32, 5, 1), {}),
    "one_output": ((1, 9, 3, 3), (10, 9, 3, 3), {}),
    # stride 1 with padding reads X in place through per-tap lane masks; these reach its edges and limits
    "masked_narrow_rows": ((1, 7, 13, 5), (11, 7, 3, 3), {"pads": [1, 2, 1, 0]}),
    "masked_dil3_batch3": ((3, 4, 16, 18), (8, 4, 3, 3), {"pads": [3, 2, 3, 2], "dilations": [3, 2]}),
    "masked_group3_asym": ((1, 9, 11, 37), (12, 3, 2, 4), {"pads": [0, 3, 1, 0], "group": 3}),
    "pad_wider_than_window": ((1, 3, 6, 7), (5, 3, 3, 3), {"pads": [0, 3, 2, 3]}),
    "pad_taller_than_window": ((1, 3, 5, 9), (6, 3, 3, 3), {"pads": [3, 1, 2, 1]}),
    "conv1d_window17": ((1, 4, 50), (6, 4, 17), {"pads": [8, 8]}),
    "window9x9": ((1, 2, 20, 20), (8, 2, 9, 9), {"pads": [4, 4, 4, 4]}),
    # column stride 2 splits each staged input row into both column phases at once
    "s2_dil2_wide_pads": ((1, 5, 9, 41), (7, 5, 5, 5), {"strides": [2, 2], "pads": [2, 3, 1, 4], "dilations": [1, 2]}),
    "s2_tiny_group3": ((2, 9, 4, 3), (12, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "group": 3}),
    "s2_wide_odd": ((1, 4, 5, 77), (9, 4, 3, 3), {"strides": [1, 2], "pads": [0, 1, 2, 0]}),
    # column stride 2 with ow >= 8 reads X in place, deinterleaving each tap's lanes (ow < 8 keeps the copy)
    "s2_cnn_pad1_batch2": ((2, 16, 32, 32), (32, 16, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "s2_pad0_even": ((1, 6, 16, 20), (10, 6, 3, 3), {"strides": [2, 2]}),
    "s2_asym_odd": ((1, 5, 17, 35), (9, 5, 3, 3), {"strides": [2, 2], "pads": [0, 1, 1, 0]}),
    "s2_ow8_rows_per_tile": ((1, 3, 16, 16), (9, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "s2_ow9_split_vectors": ((3, 3, 13, 17), (10, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "s2_rowstride3_dil": ((1, 4, 23, 30), (6, 4, 3, 2), {"strides": [3, 2], "pads": [2, 1, 0, 2],
                                                         "dilations": [2, 3]}),
    "s2_group2_batch3": ((3, 8, 12, 26), (12, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "group": 2}),
    "s2_pad_past_window": ((1, 3, 7, 18), (8, 3, 3, 3), {"strides": [2, 2], "pads": [3, 4, 3, 5]}),
    "s2_1x1_wide": ((1, 8, 10, 40), (8, 8, 1, 1), {"strides": [2, 2]}),
    "s2_ow7_copy": ((1, 3, 8, 14), (4, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
}
#: activation node(s) after the Conv: (nodes, epilogue kind); SiLU is Sigmoid then Mul by the Conv's output.
ACTS = {
    "relu": [("Relu", {})], "sigmoid": [("Sigmoid", {})], "tanh": [("Tanh", {})],
    "leaky": [("LeakyRelu", {"alpha": 0.07})], "hard_sigmoid": [("HardSigmoid", {"alpha": 0.3, "beta": 0.4})],
    "hard_swish": [("HardSwish", {})], "silu": [("Sigmoid", {}), ("Mul", {})], "none": [],
}


def conv_model(name: str, act: str, bias: bool = True, weight_input: bool = False,
               keep_conv_output: bool = False) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Conv -> activation. keep_conv_output: the Conv's output is also a graph output, so the plan cannot fuse."""
    xs, ws, attrs = CONVS[name]
    rng = np.random.default_rng(sum(map(ord, name + act)))
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    inputs = ["x", "w"] + (["b"] if bias else [])
    nodes = [helper.make_node("Conv", inputs, ["c"], **attrs)]
    last = "c"
    for i, (op, kw) in enumerate(ACTS[act]):
        ins = [last] if op != "Mul" else ["c", last]
        nodes.append(helper.make_node(op, ins, [f"a{i}"], **kw))
        last = f"a{i}"
    if last == "c":
        nodes.append(helper.make_node("Identity", ["c"], ["y"]))
    else:
        nodes[-1].output[0] = "y"
    feeds = {"x": x}
    graph_inputs = {"x": (TensorProto.FLOAT, list(xs))}
    inits = []
    if weight_input:
        feeds["w"] = w
        graph_inputs["w"] = (TensorProto.FLOAT, list(ws))
    else:
        inits.append(onnx.numpy_helper.from_array(w, "w"))
    if bias:
        inits.append(onnx.numpy_helper.from_array(b, "b"))
    outputs = ["y", "c"] if keep_conv_output else ["y"]
    return _model(nodes, graph_inputs, outputs, inits, opset=17), feeds


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("name", list(CONVS))
def test_packed_conv_equals_the_cpu_ep(session, name: str, threads: int) -> None:
    model, feeds = conv_model(name, "none")
    (got,) = session(model, threads).run(None, feeds)
    (want,) = _cpu_ep(model, feeds)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("bias", "weight_input"), [(False, False), (True, True), (False, True)])
@pytest.mark.parametrize("name", ["3x3_stride2", "group2", "conv1d"])
def test_packed_conv_without_bias_or_with_runtime_weights(session, name: str, bias: bool,
                                                          weight_input: bool) -> None:
    model, feeds = conv_model(name, "relu", bias=bias, weight_input=weight_input)
    (got,) = session(model, 2).run(None, feeds)
    (want,) = _cpu_ep(model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("act", [a for a in ACTS if a != "none"])
@pytest.mark.parametrize("name", ["3x3_pad1", "1x1", "depthwise_mult8", "magika_w1"])
def test_fused_epilogue_equals_the_activation_node(session, name: str, act: str) -> None:
    fused, feeds = conv_model(name, act)
    unfused, _ = conv_model(name, act, keep_conv_output=True)
    (y_fused,) = session(fused, 2).run(None, feeds)
    y_unfused, c = session(unfused, 2).run(None, feeds)
    assert np.array_equal(y_fused, y_unfused), f"{np.sum(y_fused != y_unfused)} values differ"
    (want,) = _cpu_ep(fused, feeds)
    np.testing.assert_allclose(y_fused, want, rtol=1e-5, atol=1e-5)


def test_fusion_is_logged(host: epabi.Host, caplog: pytest.LogCaptureFixture) -> None:
    """Conv -> Sigmoid -> Mul (SiLU) is one step; with the Conv output also a graph output nothing is fused."""
    import logging

    for keep, fused in [(False, 2), (True, 0)]:
        model, _ = conv_model("3x3_pad1", "silu", keep_conv_output=keep)
        so = epabi.SessionOptions()
        so.log_severity_level = 0
        so.add_provider_for_devices(host.get_ep_devices(), {})
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="epabi"):
            epabi.InferenceSession(model, so).close()
        compiled = [r.getMessage() for r in caplog.records if "compiled '" in r.getMessage()]
        assert compiled and f"{fused} activation nodes fused" in compiled[0], compiled


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_real_ort_packed_conv_and_epilogues(version: str, library_path: str, tmp_path: Path) -> None:
    for name, act in [("3x3_stride2", "silu"), ("5x3_dil2_asym", "leaky"), ("magika_w1", "hard_swish"),
                      ("group2", "relu"), ("same_upper_s3", "tanh"), ("masked_narrow_rows", "none"),
                      ("masked_dil3_batch3", "relu"), ("masked_group3_asym", "sigmoid"),
                      ("s2_dil2_wide_pads", "none"), ("s2_tiny_group3", "relu"), ("s2_cnn_pad1_batch2", "relu"),
                      ("s2_asym_odd", "none"), ("s2_ow9_split_vectors", "silu"), ("s2_rowstride3_dil", "none"),
                      ("s2_group2_batch3", "leaky")]:
        model, feeds = conv_model(name, act)
        path = tmp_path / f"{name}_{act}.onnx"
        onnx.save(model, str(path))
        result, outs, err = run_on_real_ort(version, library_path, path, feeds, "default", tmp_path / name)
        assert_all_on_our_ep(result, version, err)
        np.testing.assert_allclose(outs[0], _cpu_ep(model, feeds)[0], rtol=1e-5, atol=1e-5, err_msg=f"{name} {act}")


# -- pool.c -------------------------------------------------------------------------------------------------------

#: (x shape, MaxPool attributes): YOLO's SPPF, strides, dilations with windows of padding only, ceil_mode, 1-D.
MAXPOOLS = [((1, 5, 10, 10), {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}),
            ((2, 3, 17, 23), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 1, 1]}),
            ((1, 4, 9, 13), {"kernel_shape": [2, 3], "dilations": [3, 2], "pads": [1, 1, 1, 1]}),
            ((1, 2, 11, 12), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
            ((3, 2, 40), {"kernel_shape": [4], "strides": [3], "pads": [2, 1]})]


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize(("shape", "attrs"), MAXPOOLS)
def test_separable_maxpool_equals_the_reference(session, shape: tuple, attrs: dict, threads: int) -> None:
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(len(shape) + sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, 0] = -np.inf                      # a plane of -inf: every window's max is -inf
    with_nan = x.copy()
    with_nan.flat[7::97] = np.nan          # NaN wins every window it is in (the reference skips some)
    # MaxPool with Indices wired runs the window loop: the separable path must give its bits, NaN included
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], **attrs), helper.make_node("GlobalMaxPool", ["x"], ["g"]),
             helper.make_node("MaxPool", ["x"], ["y_loop", "i_loop"], **attrs)]
    model = _model(nodes, {"x": (TensorProto.FLOAT, list(shape))}, ["y", "g", "y_loop"], opset=12)
    sess = session(model, threads)
    y, g, _ = sess.run(None, {"x": x})
    ref_y, _, _ = ReferenceEvaluator(model).run(None, {"x": x})
    assert np.array_equal(y, ref_y.astype(np.float32))
    y, g, y_loop = sess.run(None, {"x": with_nan})
    assert np.array_equal(y, y_loop, equal_nan=True), np.argwhere(~((y == y_loop) | (np.isnan(y) & np.isnan(y_loop))))
    assert np.array_equal(g.reshape(shape[:2]), np.max(with_nan.reshape(*shape[:2], -1), axis=2), equal_nan=True)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("shape", [(2, 67, 33, 31), (1, 300, 17), (3, 5, 7, 2, 3)])
def test_global_average_pool_equals_numpy(session, shape: tuple, threads: int) -> None:
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 10 + 3).astype(np.float32)
    x.flat[5::211] = np.inf                # an inf in a plane makes its mean inf, as the sequential sum did
    model = _model([helper.make_node("GlobalAveragePool", ["x"], ["y"])], {"x": (TensorProto.FLOAT, list(shape))},
                   ["y"], opset=12)
    (y,) = session(model, threads).run(None, {"x": x})
    want = x.reshape(*shape[:2], -1).astype(np.float64).mean(axis=2)
    assert y.shape == shape[:2] + (1,) * (len(shape) - 2)
    assert np.array_equal(np.isinf(y.reshape(shape[:2])), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(y.reshape(shape[:2])[finite], want[finite].astype(np.float32), rtol=1e-6, atol=1e-6)


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_real_ort_separable_maxpool(version: str, library_path: str, tmp_path: Path) -> None:
    x = np.random.default_rng(2).standard_normal((1, 16, 10, 10)).astype(np.float32)
    nodes = [helper.make_node("MaxPool", ["x"], ["p1"], kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
             helper.make_node("MaxPool", ["p1"], ["p2"], kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
             helper.make_node("Concat", ["x", "p1", "p2"], ["y"], axis=1),
             helper.make_node("GlobalMaxPool", ["y"], ["g"]), helper.make_node("GlobalAveragePool", ["y"], ["a"])]
    model = _model(nodes, {"x": (TensorProto.FLOAT, [1, 16, 10, 10])}, ["y", "g", "a"], opset=12)
    path = tmp_path / "sppf.onnx"
    onnx.save(model, str(path))
    result, outs, err = run_on_real_ort(version, library_path, path, {"x": x}, "default", tmp_path / "run")
    assert_all_on_our_ep(result, version, err)
    want = _cpu_ep(model, {"x": x})
    for got, ref in zip(outs[:2], want[:2]):
        assert np.array_equal(got, ref)
    np.testing.assert_allclose(outs[2], want[2], rtol=1e-6, atol=1e-6)   # the CPU EP sums in float


# -- data movement over the pool ----------------------------------------------------------------------------------

@pytest.mark.parametrize("threads", [2, 3])
def test_parallel_copies_equal_numpy(session, threads: int) -> None:
    rng = np.random.default_rng(9)
    a = rng.standard_normal((1, 67, 99, 101)).astype(np.float32)   # 2.7 MB, odd extents
    b = rng.standard_normal((1, 33, 99, 101)).astype(np.float32)
    c = rng.standard_normal((3, 17, 99, 101)).astype(np.float32)
    nodes = [helper.make_node("Concat", ["a", "b"], ["cat1"], axis=1),          # outer 1: byte chunks
             helper.make_node("Concat", ["c", "c"], ["cat3"], axis=2),          # outer 51: rows
             helper.make_node("Split", ["a"], ["s0", "s1"], axis=1, num_outputs=2),
             helper.make_node("Transpose", ["a"], ["t"], perm=[0, 2, 1, 3]),
             helper.make_node("Slice", ["a", "st", "en", "ax", "sp"], ["sl"]),
             helper.make_node("Reshape", ["a", "shape"], ["r"])]
    inits = [onnx.numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             [("st", [1, 3]), ("en", [66, 100]), ("ax", [1, 3]), ("sp", [2, 3]), ("shape", [67, -1])]]
    outs = ["cat1", "cat3", "s0", "s1", "t", "sl", "r"]
    model = _model(nodes, {"a": (TensorProto.FLOAT, list(a.shape)), "b": (TensorProto.FLOAT, list(b.shape)),
                           "c": (TensorProto.FLOAT, list(c.shape))}, outs, inits, opset=18)
    got = session(model, threads).run(None, {"a": a, "b": b, "c": c})
    want = [np.concatenate([a, b], 1), np.concatenate([c, c], 2), a[:, :34], a[:, 34:], a.transpose(0, 2, 1, 3),
            a[:, 1:66:2, :, 3:100:3], a.reshape(67, -1)]
    for name, g, w in zip(outs, got, want):
        assert g.shape == w.shape and np.array_equal(g, w), name


# -- the GPU EP device (CUDA; skipped without an NVIDIA GPU) ------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("act", ["relu", "silu", "leaky", "hard_sigmoid", "hard_swish", "tanh", "sigmoid"])
def test_gpu_conv_epilogues(library_path: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
                            act: str) -> None:
    """A Conv with each fused activation on the CUDA kernels (the conv, then the epilogue as an in-place unary
    pass) equals the CPU EP within the GPU tolerances, and the plan reports the fusion."""
    import logging

    if epabi.hardware.cuda_gpu_count() == 0:
        pytest.skip("no NVIDIA GPU with a working driver")
    monkeypatch.setenv("EPABI_CUDA_DISCOVERY", "1")
    monkeypatch.delenv("EPABI_ALLOW_SOFTWARE_ADAPTER", raising=False)
    model, feeds = conv_model("3x3_stride2", act)
    with epabi.Host() as host:
        host.register_execution_provider_library("epabi", library_path)
        gpus = [d for d in host.get_ep_devices()
                if d.ep_name == epabi.get_ep_name() and d.ep_metadata.get("device_kind") == "gpu"]
        assert gpus, host.get_ep_devices()
        so = epabi.SessionOptions()
        so.log_severity_level = 0
        so.add_provider_for_devices(gpus[:1], {})
        with caplog.at_level(logging.DEBUG, logger="epabi"), epabi.InferenceSession(model, so) as sess:
            (got,) = sess.run(None, feeds)
    records = [r.getMessage() for r in caplog.records]
    fused = 2 if act == "silu" else 1
    assert any(f"{fused} activation nodes fused" in r for r in records if "compiled '" in r), records[-5:]
    np.testing.assert_allclose(got, _cpu_ep(model, feeds)[0], rtol=1e-4, atol=1e-4)
