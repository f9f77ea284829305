"""The CPU fallback (``epabi.cpu_fallback``): nodes no EP claims run on onnxruntime's CPU EP, one ORT session per
CPU partition, when onnxruntime is installed, else on onnx.reference.

With onnxruntime, results equal ORT's CPU EP bit for bit: the whole model on the CPU against an in-process
onnxruntime session, and with our plugin claiming part of the model against real onnxruntime with the same
plugin (same placement, same outputs). Models: a Conv/MaxPool network, GlobalMaxPool on a 3-D input (where
onnx.reference returns the wrong shape), a Loop with scan outputs (which onnx.reference gets wrong), sequences
and a model-local function.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import epabi
from epabi.cpu_fallback import FALLBACK_ENV, ONNX_REFERENCE, ONNXRUNTIME, cpu_partitions
from epabi.graph_view import model_graph
from epabi.partition import build_groups, order_units
from real_ort import NEWEST, run_json

EP = epabi.get_ep_name()
OPSET = 18
F = TensorProto.FLOAT


def _rng() -> np.random.Generator:
    return np.random.default_rng(7)


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
           initializers: list[onnx.TensorProto] = (), **kwargs: object) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], **kwargs)
    onnx.checker.check_model(model)
    return model


def conv_pool_net() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Conv -> Relu -> MaxPool -> Conv -> Relu -> GlobalMaxPool -> Flatten -> Gemm; with our EP, MaxPool and
    Flatten stay on the CPU (force_cpu_nodes, see MIXED)."""
    rng = _rng()
    w1 = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.2, "w2")
    fc = numpy_helper.from_array(rng.standard_normal((16, 10)).astype(np.float32), "fc")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalMaxPool", ["r2"], ["g"], name="gmp"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc"], ["y"], name="fc"),
    ]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [2, 3, 16, 16])],
                   [helper.make_tensor_value_info("y", F, [2, 10])], [w1, w2, fc])
    return model, {"x": rng.standard_normal((2, 3, 16, 16)).astype(np.float32)}


def global_max_pool_3d() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """GlobalMaxPool of a (2, 3, 5) input: (2, 3, 1) (onnx.reference returns (2, 1), which broke magika)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("GlobalMaxPool", ["r"], ["y"], name="gmp")]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [2, 3, 5])],
                   [helper.make_tensor_value_info("y", F, [2, 3, 1])])
    return model, {"x": _rng().standard_normal((2, 3, 5)).astype(np.float32)}


def loop_with_scan_outputs() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """x = a - b; a Loop of 4 iterations carries acc += x * i (x from the outer scope) and scans Relu(acc)
    out; y = scans * b."""
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], name="body_cast", to=F),
         helper.make_node("Mul", ["x", "fi"], ["xi"], name="body_mul"),
         helper.make_node("Add", ["acc_in", "xi"], ["acc_out"], name="body_add"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
         helper.make_node("Relu", ["acc_out"], ["scan_out"], name="body_relu")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", F, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", F, [2, 3]),
         helper.make_tensor_value_info("scan_out", F, [2, 3])])
    nodes = [helper.make_node("Sub", ["a", "b"], ["x"], name="sub"),
             helper.make_node("Loop", ["n", "cond", "a"], ["acc", "scans"], name="loop", body=body),
             helper.make_node("Mul", ["scans", "b"], ["y"], name="mul")]
    inputs = [helper.make_tensor_value_info("a", F, [2, 3]), helper.make_tensor_value_info("b", F, [2, 3])]
    outputs = [helper.make_tensor_value_info("acc", F, [2, 3]), helper.make_tensor_value_info("y", F, [4, 2, 3])]
    constants = [numpy_helper.from_array(np.array(4, np.int64), "n"), numpy_helper.from_array(np.array(True), "cond")]
    model = _model(nodes, inputs, outputs, constants)
    rng = _rng()
    return model, {"a": rng.standard_normal((2, 3)).astype(np.float32),
                   "b": rng.standard_normal((2, 3)).astype(np.float32)}


def sequences() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Split into a sequence, read one element back, concatenate the whole sequence along a new axis."""
    nodes = [helper.make_node("SplitToSequence", ["x"], ["seq"], name="split", axis=1, keepdims=0),
             helper.make_node("SequenceAt", ["seq", "one"], ["second"], name="at"),
             helper.make_node("ConcatFromSequence", ["seq"], ["stacked"], name="concat", axis=0, new_axis=1),
             helper.make_node("Add", ["second", "second"], ["y"], name="add")]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [2, 3])],
                   [helper.make_tensor_value_info("stacked", F, [3, 2]), helper.make_tensor_value_info("y", F, [2])],
                   [numpy_helper.from_array(np.array(1, np.int64), "one")])
    return model, {"x": _rng().standard_normal((2, 3)).astype(np.float32)}


def local_function() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A model-local function (``local.SoftPlusish``) called from the main graph."""
    fn = helper.make_function("local", "SoftPlusish", ["t"], ["u"],
                              [helper.make_node("Exp", ["t"], ["e"]), helper.make_node("Add", ["e", "t"], ["u"])],
                              [helper.make_opsetid("", OPSET)])
    nodes = [helper.make_node("SoftPlusish", ["x"], ["s"], name="call", domain="local"),
             helper.make_node("Mul", ["s", "x"], ["y"], name="mul")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [4])],
                              [helper.make_tensor_value_info("y", F, [4])])
    model = helper.make_model(graph, functions=[fn],
                              opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)])
    return model, {"x": np.linspace(-1, 1, 4, dtype=np.float32)}


MODELS = {f.__name__: f for f in (conv_pool_net, global_max_pool_3d, loop_with_scan_outputs, sequences,
                                    local_function)}
#: Models run with our plugin claiming part of them: (model, nodes our EP must leave to the CPU).
MIXED = {"conv_pool_net": "pool1,flatten", "global_max_pool_3d": "gmp", "loop_with_scan_outputs": ""}


def _ort_cpu(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list:
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _assert_same(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        if isinstance(w, list):
            _assert_same(g, w)
            continue
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("name", list(MODELS))
def test_cpu_only_session_equals_ort_cpu_ep(name: str) -> None:
    model, feeds = MODELS[name]()
    want = _ort_cpu(model, feeds)
    with epabi.InferenceSession(model) as session:
        assert session.cpu_fallback == ONNXRUNTIME
        assert set(session.node_assignment.values()) == {"CPUExecutionProvider"}
        got = session.run(None, feeds)
        again = session.run(None, feeds)
    _assert_same(got, want)
    _assert_same(again, want)


def test_global_max_pool_keeps_the_channel_axis() -> None:
    pytest.importorskip("onnxruntime")
    model, feeds = global_max_pool_3d()
    with epabi.InferenceSession(model) as session:
        (y,) = session.run(None, feeds)
    assert y.shape == (2, 3, 1)
    np.testing.assert_array_equal(y[..., 0], np.maximum(feeds["x"], 0).max(axis=2))


def test_loop_scan_outputs_stack_every_iteration() -> None:
    pytest.importorskip("onnxruntime")
    model, feeds = loop_with_scan_outputs()
    with epabi.InferenceSession(model) as session:
        acc, y = session.run(None, feeds)
    a, b = feeds["a"], feeds["b"]
    x = a - b
    accs = [a + x * sum(range(i + 1)) for i in range(4)]  # acc after iterations 0..3
    np.testing.assert_allclose(acc, accs[-1], rtol=1e-6)
    np.testing.assert_allclose(y, np.maximum(np.stack(accs), 0) * b, rtol=1e-6)


# -- our plugin claims part of the model: equal to real onnxruntime with the same plugin ----------------------------

# argv: library, folder with cases.json, models and feeds. Per case: our EP device (software adapter) with
# force_cpu_nodes; saves the outputs as .npy and reports the placement.
MIXED_SCRIPT = """
import gc
import os

import numpy as np

lib, folder = sys.argv[1:]
cases = json.load(open(os.path.join(folder, "cases.json")))
ort.register_execution_provider_library("epabi", lib)
ours = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
report = {}
for name, case in cases.items():
    feeds = {k: np.load(os.path.join(folder, p)) for k, p in case["feeds"].items()}
    so = ort.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    so.add_provider_for_devices(ours[:1], {"force_cpu_nodes": case["cpu"]})
    sess = ort.InferenceSession(os.path.join(folder, name + ".onnx"), sess_options=so, enable_fallback=0)
    placement = {n.name: sub.ep_name for sub in sess.get_provider_graph_assignment_info() for n in sub.get_nodes()}
    for i, out in enumerate(sess.run(None, feeds)):
        np.save(os.path.join(folder, f"{name}_out{i}.npy"), out)
    report[name] = placement
    del sess, so
gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(ort_version=ort.__version__, report=report)
"""


@pytest.fixture(scope="module")
def real_ort_mixed(library_path: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    folder = tmp_path_factory.mktemp("mixed")
    listing = {}
    for name, cpu in MIXED.items():
        model, feeds = MODELS[name]()
        onnx.save(model, folder / f"{name}.onnx")
        for k, v in feeds.items():
            np.save(folder / f"{name}_{k}.npy", v)
        listing[name] = {"cpu": cpu, "feeds": {k: f"{name}_{k}.npy" for k in feeds}}
    (folder / "cases.json").write_text(json.dumps(listing))
    result, _, _ = run_json(NEWEST, MIXED_SCRIPT, {"EPABI_ALLOW_SOFTWARE_ADAPTER": "1"},
                            [library_path, str(folder)], timeout=300)
    assert result["ort_version"] == NEWEST
    return result["report"], folder


@pytest.mark.real_ort
@pytest.mark.parametrize("name", list(MIXED))
def test_mixed_placement_equals_real_onnxruntime(name: str, host: epabi.Host, real_ort_mixed: tuple) -> None:
    pytest.importorskip("onnxruntime")
    placements, folder = real_ort_mixed
    model, feeds = MODELS[name]()
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {"force_cpu_nodes": MIXED[name]})
    with epabi.InferenceSession(model, so) as session:
        assert session.cpu_fallback == ONNXRUNTIME
        got = session.run(None, feeds)
        placement = dict(session.node_assignment)
    # real ORT also offers a Loop's body to the EP (GetCapability per subgraph), our host runs the whole Loop
    # on the CPU: the main graph's placement is the same
    assert placement == {n: ep for n, ep in placements[name].items() if not n.startswith("body_")}
    assert {"CPUExecutionProvider", EP} <= set(placement.values()), placement
    _assert_same(got, [np.load(folder / f"{name}_out{i}.npy") for i in range(len(got))])


# -- partitions ---------------------------------------------------------------------------------------------------

def _units(model: onnx.ModelProto, claimed: list[list[str]]) -> tuple:
    graph = model_graph(epabi.session.load_model(model)[0])
    by_name = {n.name: n for n in graph.nodes}
    groups = build_groups(graph, [([by_name[n] for n in names], False) for names in claimed], EP)
    return graph, order_units(graph, groups)


def test_partitions_are_connected_cpu_runs_between_fused_nodes() -> None:
    # a -> cpu1 -> cpu2 -> [ep] -> cpu3 ; b -> cpu4 (independent of cpu1/cpu2, same run of CPU units)
    nodes = [helper.make_node("Relu", ["a"], ["r1"], name="cpu1"),
             helper.make_node("Neg", ["b"], ["r4"], name="cpu4"),
             helper.make_node("Abs", ["r1"], ["r2"], name="cpu2"),
             helper.make_node("Sigmoid", ["r2"], ["e"], name="ep"),
             helper.make_node("Add", ["e", "r4"], ["y"], name="cpu3")]
    vi = [helper.make_tensor_value_info(n, F, [3]) for n in ("a", "b")]
    model = _model(nodes, vi, [helper.make_tensor_value_info("y", F, [3]), helper.make_tensor_value_info("r2", F, [3])])
    graph, units = _units(model, [["ep"]])
    parts = cpu_partitions(graph, units)
    summary = [([n.name for n in p.nodes], p.inputs, p.outputs) for p in parts]
    # in ORT's execution order (cpu1, cpu2, the fused node, cpu4, cpu3) cpu4 and cpu3 run one after the other
    assert summary == [(["cpu1", "cpu2"], ["a"], ["r2"]), (["cpu4", "cpu3"], ["b", "e"], ["y"])]


def test_a_partition_reads_constants_as_part_of_its_model() -> None:
    # the Constant node is an initializer from the load on, as in ORT (epabi.constant_nodes); the partition
    # reading it and the other initializer gets both inside its model instead of as inputs
    nodes = [helper.make_node("Constant", [], ["k"], name="const", value_float=2.0),
             helper.make_node("Sigmoid", ["x"], ["e"], name="ep"),
             helper.make_node("Mul", ["e", "k"], ["m"], name="cpu_mul"),
             helper.make_node("Add", ["m", "w"], ["y"], name="cpu_add")]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [3])], [helper.make_tensor_value_info("y", F, [3])],
                   [numpy_helper.from_array(np.ones(3, np.float32), "w")])
    graph, units = _units(model, [["ep"]])
    parts = cpu_partitions(graph, units)
    assert [([n.name for n in p.nodes], p.inputs, p.constants) for p in parts] == \
        [(["cpu_mul", "cpu_add"], ["e"], ["k", "w"])]
    assert parts[0].constant_nodes == [] and graph.values["k"].constant_initializer


# -- errors -------------------------------------------------------------------------------------------------------

def test_node_without_a_cpu_kernel_is_refused_at_creation() -> None:
    pytest.importorskip("onnxruntime")
    nodes = [helper.make_node("Frobnicate", ["x"], ["y"], name="frob", domain="com.example")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [3])],
                              [helper.make_tensor_value_info("y", F, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                    helper.make_opsetid("com.example", 1)])
    with pytest.raises(epabi.OrtStatusError) as info:
        epabi.InferenceSession(model)
    assert info.value.code == epabi.OrtErrorCode.FAIL  # as onnxruntime refuses it
    assert "frob" in str(info.value) and "com.example:Frobnicate(-1) is not a registered function/op" in str(info.value)


def test_kernel_failure_keeps_onnxruntimes_error_code() -> None:
    ort = pytest.importorskip("onnxruntime")
    nodes = [helper.make_node("Gather", ["x", "i"], ["y"], name="gather")]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [3]),
                           helper.make_tensor_value_info("i", TensorProto.INT64, [1])],
                   [helper.make_tensor_value_info("y", F, [1])])
    feeds = {"x": np.zeros(3, np.float32), "i": np.array([7], np.int64)}
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidArgument) as real:
        _ort_cpu(model, feeds)
    with epabi.InferenceSession(model) as session, pytest.raises(epabi.OrtStatusError) as info:
        session.run(None, feeds)
    assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
    assert "out of data bounds" in str(real.value) and "out of data bounds" in str(info.value)


def test_concurrent_runs_share_the_partition_sessions() -> None:
    pytest.importorskip("onnxruntime")
    model, feeds = conv_pool_net()
    want = _ort_cpu(model, feeds)
    results: list = []
    with epabi.InferenceSession(model) as session:
        threads = [threading.Thread(target=lambda: results.append(session.run(None, feeds))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(results) == 4
    for got in results:
        _assert_same(got, want)


# -- without onnxruntime, or choosing ---------------------------------------------------------------------------

def test_without_onnxruntime_the_fallback_is_onnx_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime raises ImportError
    model, feeds = conv_pool_net()
    with epabi.InferenceSession(model) as session:
        assert session.cpu_fallback == ONNX_REFERENCE
        (y,) = session.run(None, feeds)
    r1 = np.maximum(_conv(feeds["x"], model, "w1"), 0)
    p1 = r1.reshape(2, 8, 8, 2, 8, 2).max(axis=(3, 5))
    g = np.maximum(_conv(p1, model, "w2"), 0).max(axis=(2, 3))
    fc = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "fc"))
    np.testing.assert_allclose(y, g @ fc, rtol=1e-4, atol=1e-4)


def _conv(x: np.ndarray, model: onnx.ModelProto, w_name: str) -> np.ndarray:
    """3x3 convolution, stride 1, padding 1 (float64)."""
    w = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == w_name)).astype(np.float64)
    n, _, h, wd = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd))
    for dy in range(3):
        for dx in range(3):
            out += np.einsum("nchw,oc->nohw", xp[:, :, dy:dy + h, dx:dx + wd], w[:, :, dy, dx])
    return out


def test_session_without_cpu_nodes_reports_the_fallback_it_would_use(host: epabi.Host,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [3])], [helper.make_tensor_value_info("y", F, [3])])
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices())
    monkeypatch.setenv(FALLBACK_ENV, ONNX_REFERENCE)
    with epabi.InferenceSession(model, so) as session:
        assert set(session.node_assignment.values()) == {EP}
        assert session.cpu_fallback == ONNX_REFERENCE


def test_the_environment_chooses_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    model, feeds = global_max_pool_3d()
    monkeypatch.setenv(FALLBACK_ENV, ONNX_REFERENCE)
    with epabi.InferenceSession(model) as session:
        assert session.cpu_fallback == ONNX_REFERENCE
    monkeypatch.setenv(FALLBACK_ENV, "tvm")
    with pytest.raises(epabi.OrtStatusError) as info:
        epabi.InferenceSession(model)
    assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT and FALLBACK_ENV in str(info.value)
    monkeypatch.setenv(FALLBACK_ENV, ONNXRUNTIME)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(epabi.OrtStatusError) as info:
        epabi.InferenceSession(model)
    assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT and "[onnxruntime] extra" in str(info.value)


def test_magika_on_the_cpu_fallback_equals_ort_cpu_ep() -> None:
    # onnx.reference fails on it (GlobalMaxPool of a 3-D input); the CPU partition is the whole model
    from magika_model import batch, model_path

    model = onnx.load(str(model_path()))
    feeds = {"bytes": batch()}
    want = _ort_cpu(model, feeds)
    with epabi.InferenceSession(str(model_path())) as session:
        assert session.cpu_fallback == ONNXRUNTIME
        got = session.run(None, feeds)
    _assert_same(got, want)
