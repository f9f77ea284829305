"""Softmax fusion (native/plan_softmax.c, native/kernels/softmax_rows.h): ReduceMax over the last axis [-> Max with a
scalar floor] [-> Reshape/Expand views] -> Sub(x, .) -> Exp -> ReduceSum over the last axis [-> views] -> Div(e, .)
becomes one plan step.

Each case checks the plan (the VERBOSE summary's steps and "N softmax(es)"), that the output equals, bit for bit, the
same nodes run one session per node on our EP (the unfused kernels), and that it matches ORT's CPU EP within 1e-6:
with and without the floor (either operand order), keepdims 0 and 1, jax2tf's Reshape + Expand views with shapes
computed at run time, shapes [1, 214], [5, 214], [3, 7], a symbolic batch, rows of -inf, NaN and large values. Left
unfused: an intermediate read outside, another axis, a non-scalar floor, a Sub of another x. GPU twins (gpu marker)
compare to the CPU EP at 1e-6 and replay a captured graph.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import epabi
from gpu_devices import gpu_ep_device
from real_ort import MIN, NEWEST, run_json
from test_chain_fusion import node_by_node
from test_moments import REAL_ORT_SCRIPT

SUMMARY = re.compile(r"compiled '[^']*': (\d+) steps \(.*\), (\d+) softmax\(es\)")
F = TensorProto.FLOAT


def softmax_model(shape: list, floor: str | None = "left", keepdims: int = 0, views: bool = True, axis: int = -1,
                  floor_shape: list | None = None, leak: str | None = None, other_x: bool = False) -> onnx.ModelProto:
    """jax2tf's expanded softmax of x over its last axis, y the output. floor: 'left' Max(c, m0), 'right' Max(m0, c),
    None: no Max. views: Reshape to Concat(Shape(x)[:-1], [1]) and an Expand to the same shape after each reduction
    (computed at run time, as magika's). axis: both reductions' axis. floor_shape: c's shape ([] by default). leak:
    an intermediate also made a graph output ('e', 'm', 'd'). other_x: the Sub reads x2 instead of x."""
    rank = len(shape)
    inits = [numpy_helper.from_array(np.full(floor_shape or [], -np.inf, np.float32), "c"),
             numpy_helper.from_array(np.array([axis], np.int64), "axes"),
             numpy_helper.from_array(np.array([1], np.int64), "one")]
    nodes = [helper.make_node("ReduceMax", ["x"], ["m0"], axes=[axis], keepdims=keepdims)]
    m = "m0"
    if floor is not None:
        nodes.append(helper.make_node("Max", ["c", "m0"] if floor == "left" else ["m0", "c"], ["m"]))
        m = "m"
    if views:
        nodes += [helper.make_node("Shape", ["x"], ["xs"]),
                  helper.make_node("Slice", ["xs", "zero", "last"], ["lead"]),
                  helper.make_node("Concat", ["lead", "one"], ["colshape"], axis=0)]
        inits += [numpy_helper.from_array(np.array([0], np.int64), "zero"),
                  numpy_helper.from_array(np.array([rank - 1], np.int64), "last")]
        nodes += [helper.make_node("Reshape", [m, "colshape"], ["mr"]),
                  helper.make_node("Expand", ["mr", "colshape"], ["mb"])]
        m = "mb"
    nodes += [helper.make_node("Sub", ["x2" if other_x else "x", m], ["d"]), helper.make_node("Exp", ["d"], ["e"]),
              helper.make_node("ReduceSum", ["e", "axes"], ["s"], keepdims=keepdims, noop_with_empty_axes=1)]
    s = "s"
    if views:
        nodes += [helper.make_node("Reshape", ["s", "colshape"], ["sr"]),
                  helper.make_node("Expand", ["sr", "colshape"], ["sb"])]
        s = "sb"
    nodes.append(helper.make_node("Div", ["e", s], ["y"]))
    inputs = [helper.make_tensor_value_info("x", F, shape)]
    if other_x:
        inputs.append(helper.make_tensor_value_info("x2", F, shape))
    outputs = [helper.make_tensor_value_info("y", F, None)]
    if leak is not None:
        outputs.append(helper.make_tensor_value_info(leak, F, None))
    graph = helper.make_graph(nodes, "softmax", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def _feed(shape: list, seed: int = 0, special: bool = False) -> np.ndarray:
    rows = [d if isinstance(d, int) else 4 for d in shape]
    x = np.random.default_rng(seed).normal(0, 3, rows).astype(np.float32)
    if special and rows[0] >= 4:
        x[0, :] = -np.inf          # every e is NaN (inf - inf), as unfused
        x[1, 1] = np.nan           # the max is NaN: the whole row is
        x[2, :] = 80.0 + x[2, :]   # large values: expf would overflow without the max
        x[3, 0] = np.inf
    return x


def _cpu_ep(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


@pytest.fixture
def compile_log(caplog: pytest.LogCaptureFixture) -> Iterator:
    """compile_log(model, devices, options) -> (session, (steps, softmaxes)) on those EP devices."""
    made: list[epabi.InferenceSession] = []

    def make(model: onnx.ModelProto, devices: list, options: dict | None = None):
        so = epabi.SessionOptions()
        so.log_severity_level = 0
        so.add_provider_for_devices(devices, options or {})
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="epabi"):
            sess = epabi.InferenceSession(model, so)
        made.append(sess)
        assert set(sess.node_assignment.values()) == {epabi.get_ep_name()}, sess.node_assignment
        counts = [tuple(int(g) for g in m.groups()) for m in (SUMMARY.search(r.getMessage()) for r in caplog.records)
                  if m]
        assert len(counts) == 1, counts
        return sess, counts[0]

    yield make
    made.clear()


@pytest.fixture
def gpu_device(gpu_host: epabi.Host) -> epabi.EpDevice:
    if epabi.hardware.cuda_gpu_count() == 0:
        pytest.skip("no NVIDIA GPU with a working driver")
    return gpu_ep_device(gpu_host)


CASES = [
    ([1, 214], "left", 0, True), ([5, 214], "left", 0, True), ([3, 7], "right", 1, True), ([5, 214], None, 0, True),
    ([5, 214], "left", 1, False), ([3, 7], None, 1, False), (["N", 214], "left", 0, True), ([2, 3, 7], "left", 0, True),
]


@pytest.mark.parametrize(("shape", "floor", "keepdims", "views"), CASES)
def test_fused(host: epabi.Host, compile_log, shape: list, floor: str | None, keepdims: int, views: bool) -> None:
    model = softmax_model(shape, floor, keepdims, views)
    sess, (steps, fused) = compile_log(model, host.get_ep_devices())
    assert fused == 1
    host_steps = 3 if views else 0   # Shape, Slice, Concat of the views' shape
    assert steps == 1 + host_steps, steps
    for special in [False, True]:
        x = _feed(shape, 1, special)
        got = sess.run(None, {"x": x})[0]
        want = node_by_node(host, model, {"x": x})["y"]
        assert got.tobytes() == want.tobytes(), (shape, special)   # the unfused kernels' bits
        np.testing.assert_allclose(got, _cpu_ep(model, {"x": x})[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(("kwargs", "why"), [
    ({"leak": "e"}, "e read outside"), ({"leak": "m"}, "max read outside"), ({"leak": "d"}, "d read outside"),
    ({"axis": 0, "views": False, "keepdims": 1}, "not the last axis"),
    ({"floor_shape": [1, 1]}, "a floor of more dims than the max"),
    ({"other_x": True}, "Sub reads another x"),
])
def test_not_fused(host: epabi.Host, compile_log, kwargs: dict, why: str) -> None:
    model = softmax_model([5, 214], **kwargs)
    sess, (_, fused) = compile_log(model, host.get_ep_devices())
    assert fused == 0, why
    feeds = {"x": _feed([5, 214], 2)}
    if kwargs.get("other_x"):
        feeds["x2"] = _feed([5, 214], 3)
    for got, want in zip(sess.run(None, feeds), _cpu_ep(model, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=why)


@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "floor", "keepdims", "views"), CASES)
def test_gpu_fused(gpu_host: epabi.Host, gpu_device: epabi.EpDevice, compile_log, shape: list, floor: str | None,
                   keepdims: int, views: bool) -> None:
    model = softmax_model(shape, floor, keepdims, views)
    sess, (_, fused) = compile_log(model, [gpu_device])
    assert fused == 1
    for special in [False, True]:
        x = _feed(shape, 1, special)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], _cpu_ep(model, {"x": x})[0], rtol=1e-6, atol=1e-7)


def _replays(sess: epabi.InferenceSession, model: onnx.ModelProto, gpu_host: epabi.Host | None = None) -> None:
    """Four runs over x updated in place; gpu_host: x and y bound in GPU 0's memory (a CUDA graph records device
    addresses, and the host refuses to capture over host-memory bindings)."""
    where: dict = {} if gpu_host is None else {"device_type": "cuda", "device_id": 0, "host": gpu_host}
    x = epabi.OrtValue.ortvalue_from_numpy(_feed([5, 214], 0), **where)
    y = epabi.OrtValue.ortvalue_from_shape_and_type([5, 214], np.float32, **where)
    binding = sess.io_binding()
    binding.bind_ortvalue_input("x", x)
    binding.bind_ortvalue_output("y", y)
    for k in range(4):
        feed = _feed([5, 214], k + 1, special=k == 3)
        x.update_inplace(feed)
        sess.run_with_iobinding(binding)
        np.testing.assert_allclose(y.numpy(), _cpu_ep(model, {"x": feed})[0], rtol=1e-6, atol=1e-7,
                                   err_msg=f"run {k}")
    assert sess.graph_capture.replays >= 2


CAPTURE = {"enable_cuda_graph": "1", "min_num_runs_before_cuda_graph_capture": "1"}


def test_graph_capture(host: epabi.Host, compile_log) -> None:
    """The fused step captured and replayed over inputs updated in place (magika's [N, 214] softmax)."""
    model = softmax_model([5, 214])
    sess, (_, fused) = compile_log(model, host.get_ep_devices(), CAPTURE)
    assert fused == 1
    _replays(sess, model)


@pytest.mark.gpu
def test_gpu_graph_capture(gpu_host: epabi.Host, gpu_device: epabi.EpDevice, compile_log) -> None:
    """The same on the GPU: one CUDA graph replaying softmax_fused_f32."""
    model = softmax_model([5, 214])
    sess, (_, fused) = compile_log(model, [gpu_device], CAPTURE)
    assert fused == 1
    _replays(sess, model, gpu_host)


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_real_onnxruntime_softmax(version: str, library_path: str, tmp_path: Path) -> None:
    """Fused and unfused cases and magika (batches 6 and 1) under real onnxruntime: every node on our EP, the
    softmaxes its plans count, and the CPU EP's values."""
    from magika_model import batch, model_path
    models: list[tuple[onnx.ModelProto, dict[str, np.ndarray], int]] = []
    for i, (shape, floor, keepdims, views) in enumerate(CASES):
        model = softmax_model(shape, floor, keepdims, views)
        models.append((model, {"x": _feed(shape, 7 + i)}, 1))
    for kwargs in [{"leak": "e"}, {"axis": 0, "views": False, "keepdims": 1}]:
        models.append((softmax_model([5, 214], **kwargs), {"x": _feed([5, 214], 4)}, 0))
    magika = onnx.load(str(model_path()))
    x = batch()
    models += [(magika, {"bytes": x}, 1), (magika, {"bytes": x[:1]}, 1)]
    paths = []
    for i, (model, feeds, _) in enumerate(models):
        path = tmp_path / f"m{i}.onnx"
        onnx.save(model, str(path))
        np.savez(str(path) + ".npz", **feeds)
        paths.append(str(path))
    result, _, err = run_json(version, REAL_ORT_SCRIPT, {"EPABI_ALLOW_SOFTWARE_ADAPTER": "1"},
                              [library_path, str(tmp_path), *paths], timeout=300)
    assert result["ort_version"] == version
    assert result["providers"] == [epabi.get_ep_name()] * len(models), result["providers"]
    for i, (model, feeds, fused) in enumerate(models):
        log = re.search(rf"^EPABI-MODEL {i}$(.*?)^EPABI-MODEL-END {i}$", err, re.S | re.M)
        assert log, err[-3000:]
        assert [int(m.group(2)) for m in SUMMARY.finditer(log.group(1))] == [fused], (i, log.group(1)[-2000:])
        want = _cpu_ep(model, feeds)
        got = [np.load(tmp_path / f"{i}_{k}.npy") for k in range(len(want))]
        tol = 1e-5 if "bytes" in feeds else 1e-6
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"model {i}")


def test_misplaced_run_time_views_are_refused(host: epabi.Host, compile_log) -> None:
    """Views whose run-time shapes put the row maxima along the other axis ([N] -> [1, N] -> [N, N]): valid ONNX that
    ORT's CPU EP computes, but the fused step does not: the run fails with EP_FAIL naming the shapes (README lists this
    among the differences from ORT's CPU EP)."""
    c = numpy_helper.from_array(np.array(-np.inf, np.float32), "c")
    ints = [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in [("axes", 1), ("one", 1), ("b1", 1),
                                                                             ("b2", 2)]]
    nodes = [helper.make_node("ReduceMax", ["x"], ["m0"], axes=[1], keepdims=0),
             helper.make_node("Max", ["c", "m0"], ["m"]), helper.make_node("Shape", ["x"], ["xs"]),
             helper.make_node("Slice", ["xs", "b1", "b2"], ["tail"]),
             helper.make_node("Concat", ["one", "tail"], ["shp"], axis=0),
             helper.make_node("Reshape", ["m", "shp"], ["mr"]), helper.make_node("Expand", ["mr", "xs"], ["mb"]),
             helper.make_node("Sub", ["x", "mb"], ["d"]), helper.make_node("Exp", ["d"], ["e"]),
             helper.make_node("ReduceSum", ["e", "axes"], ["s"], keepdims=0),
             helper.make_node("Reshape", ["s", "shp"], ["sr"]), helper.make_node("Expand", ["sr", "xs"], ["sb"]),
             helper.make_node("Div", ["e", "sb"], ["y"])]
    graph = helper.make_graph(nodes, "misplaced", [helper.make_tensor_value_info("x", F, ["N", "N"])],
                              [helper.make_tensor_value_info("y", F, None)], [c, *ints])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    sess, (_, fused) = compile_log(model, host.get_ep_devices())
    assert fused == 1
    x = _feed([3, 3], 5)
    assert np.isfinite(_cpu_ep(model, {"x": x})[0]).all()   # ORT's CPU EP computes it
    with pytest.raises(epabi.OrtStatusError, match=r"EP_FAIL.*\[3\] to \[1,3\].*its row of \[3,3\]"):
        sess.run(None, {"x": x})
