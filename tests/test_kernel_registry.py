"""Kernel-registry EPs through epabi's host, with the test plugin KregEp (tests/plugins/kernel_plugin.c): kernel
lookup, kernel creation and kernel info, Compute with inputs and outputs placed as the kernel definitions say,
Memcpy kernels, NHWC layout conversion, pre-packing, sync streams; and the same runs under real onnxruntime
1.24.4 and 1.32.0, whose event logs (what the plugin saw, in order) and outputs must be identical to epabi's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import epabi
from epabi.graph_view import model_graph
from epabi.kernel_registry import INT_MAX, KernelDef, KernelRegistry
from plugin_builder import build_kernel_plugin
from real_ort import ORT_VERSIONS, run_json

MIN, NEWEST, _ = ORT_VERSIONS
_W = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)


@pytest.fixture(scope="module")
def kreg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_kernel_plugin(tmp_path_factory.mktemp("kreg"))


def _model(nodes: list[onnx.NodeProto], inputs: list, outputs: list, inits: list | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _boundary() -> onnx.ModelProto:
    """A chain crossing host and device memory: Sigmoid and Shape have no KregEp kernel (CPU), Reshape reads its
    shape in host memory, LeakyRelu with and without its attribute, MatMul with a constant weight."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["r"], ["s"], name="sig"),
             helper.make_node("Add", ["s", "r"], ["a"], name="add"),
             helper.make_node("Shape", ["a"], ["shp"], name="shape"),
             helper.make_node("Reshape", ["a", "shp"], ["y"], name="reshape"),
             helper.make_node("LeakyRelu", ["y"], ["z"], name="leaky", alpha=0.2),
             helper.make_node("LeakyRelu", ["z"], ["z2"], name="leaky_default"),
             helper.make_node("MatMul", ["z2", "w"], ["o"], name="mm")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                  [helper.make_tensor_value_info("o", TensorProto.FLOAT, [2, 3])], [numpy_helper.from_array(_W, "w")])


def _boundary_reference(x: np.ndarray) -> np.ndarray:
    r = np.maximum(x, 0)
    a = 1 / (1 + np.exp(-r)) + r
    z = np.where(a > 0, a, 0.2 * a)
    z2 = np.where(z > 0, z, 0.01 * z)
    return z2 @ _W


def _pool() -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("GlobalMaxPool", ["r"], ["p"], name="gmp"),
             helper.make_node("Relu", ["p"], ["y"], name="relu2")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 1, 1])])


MODELS = {"mlp": lambda: epabi.models.mlp(layers=3, width=16, batch=2), "boundary": _boundary, "pool": _pool}


def _feed(model: onnx.ModelProto) -> np.ndarray:
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return np.random.default_rng(0).standard_normal(dims).astype(np.float32)


def _run_epabi(lib: Path, model: onnx.ModelProto, log: Path, monkeypatch: pytest.MonkeyPatch,
               env: dict[str, str], api: int | None = None) -> tuple[list[np.ndarray], list[str], epabi.Host, dict]:
    """Two runs through epabi's host; returns (outputs of the second, the plugin's event log, the host, the
    node assignment)."""
    log.unlink(missing_ok=True)
    monkeypatch.setenv("KREG_LOG", str(log))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    host = epabi.Host(api_version=api, hardware=[epabi.cpu_device()])
    with host:
        host.register_execution_provider_library("kreg", lib)
        so = epabi.SessionOptions()
        so.add_provider_for_devices(host.get_ep_devices())
        with epabi.InferenceSession(model.SerializeToString(), so) as sess:
            feed = {sess.get_inputs()[0].name: _feed(model)}
            sess.run(None, feed)
            outputs = sess.run(None, feed)
            assignment = dict(sess.node_assignment)
    return outputs, log.read_text().splitlines(), host, assignment


_REAL_SCRIPT = '''
import gc, json, os, sys
import numpy as np
lib, jobs = sys.argv[1], json.loads(sys.argv[2])
results = []
for job in jobs:  # each with the plugin registered afresh, so it reads its environment again
    for key in [k for k in os.environ if k.startswith("KREG_")]:
        del os.environ[key]
    os.environ.update(job["env"])
    ort.register_execution_provider_library("kreg", lib)
    so = ort.SessionOptions()
    so.add_provider_for_devices([d for d in ort.get_ep_devices() if d.ep_name == "KregEp"], {})
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(job["model"], sess_options=so)
    feed = {sess.get_inputs()[0].name: np.load(job["feed"])}
    sess.run(None, feed)
    outputs = sess.run(None, feed)
    del sess, so
    gc.collect()
    ort.unregister_execution_provider_library("kreg")
    results.append({"outputs": [o.tolist() for o in outputs], "log": open(job["env"]["KREG_LOG"]).read().splitlines()})
emit(results=results)
'''


@pytest.fixture(scope="module")
def real_runs(kreg: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[int, tuple[list, list]]]:
    """Every scenario of :data:`SCENARIOS` and :data:`NHWC` under each real onnxruntime, one process per release:
    ``{version: {scenario index: (outputs, event log)}}``."""
    folder = tmp_path_factory.mktemp("kreg-real")
    jobs = []
    for i, (name, env) in enumerate([*SCENARIOS, NHWC]):
        model = MODELS[name]()
        onnx.save(model, folder / f"{i}.onnx")
        np.save(folder / f"{i}.npy", _feed(model))
        jobs.append({"model": str(folder / f"{i}.onnx"), "feed": str(folder / f"{i}.npy"),
                     "env": dict(env)})
    out: dict[str, dict[int, tuple[list, list]]] = {}
    for version in (MIN, NEWEST):
        for i, job in enumerate(jobs):
            job["env"]["KREG_LOG"] = str(folder / f"{version}-{i}.log")
            Path(job["env"]["KREG_LOG"]).write_text("")
        result, _, _ = run_json(version, _REAL_SCRIPT, None, [str(kreg), json.dumps(jobs)], timeout=600)
        out[version] = {i: (r["outputs"], r["log"]) for i, r in enumerate(result["results"])}
    return out


# -- the registry ---------------------------------------------------------------------------------------------

def _node(op: str, inputs: list, outputs: list, opset: int = 17, **attrs: object) -> epabi.graph_view.NodeView:
    model = helper.make_model(helper.make_graph([helper.make_node(op, [i.name for i in inputs],
                                                                  [o.name for o in outputs], **attrs)],
                                                "g", inputs, outputs), opset_imports=[helper.make_opsetid("", opset)])
    return model_graph(onnx.shape_inference.infer_shapes(model)).nodes[0]


def test_lookup_follows_orts_version_and_type_rules() -> None:
    f32 = helper.make_tensor_value_info
    relu = _node("Relu", [f32("x", TensorProto.FLOAT, [2])], [f32("y", TensorProto.FLOAT, [2])])  # since 14
    assert relu.since_version == 14

    def kdef(since: tuple[int, int], types: dict[str, list[int]] | None = None) -> KernelDef:
        return KernelDef("Relu", "", since, "Ep", {}, {}, types or {}, [], [])

    assert kdef((14, 14)).mismatch(relu) is None
    assert kdef((14, INT_MAX)).mismatch(relu) is None
    assert kdef((13, 14)).mismatch(relu) is None  # a bounded range covering the node
    assert kdef((6, INT_MAX)).mismatch(relu) is not None  # ORT requires the start version unless the end is bounded
    assert kdef((6, 13)).mismatch(relu) is not None
    assert kdef((15, 16)).mismatch(relu) is not None
    assert kdef((14, 14), {"T": [1]}).mismatch(relu) is None
    assert "type constraint 'T'" in kdef((14, 14), {"T": [10]}).mismatch(relu)
    reshape = _node("Reshape", [f32("d", TensorProto.FLOAT, [2]), f32("s", TensorProto.INT64, [1])],
                    [f32("o", TensorProto.FLOAT, [2])])
    by_param = KernelDef("Reshape", "", (14, 18), "Ep", {}, {}, {"shape": [7]}, [], [])
    assert by_param.mismatch(reshape) is None  # a fixed-type input is constrained by its parameter name
    assert KernelDef("Reshape", "", (14, 18), "Ep", {}, {}, {"shape": [6]}, [], []).mismatch(reshape) is not None
    registry = KernelRegistry()
    assert registry.add(kdef((14, 14), {"T": [1]}), None, None) is None
    assert registry.lookup(relu, "Ep") is not None
    assert registry.lookup(relu, "OtherEp") is None  # the EP name is part of the key


def test_conflicting_definitions_are_refused_as_ort_refuses_them() -> None:
    registry = KernelRegistry()
    assert registry.add(KernelDef("Relu", "", (14, 14), "Ep", {}, {}, {"T": [1]}, [], []), None, None) is None
    refusal = registry.add(KernelDef("Relu", "", (13, 14), "Ep", {}, {}, {"T": [1, 10]}, [], []), None, None)
    assert refusal == "Failed to add kernel for Relu  Ep: Conflicting with a registered kernel with op versions."
    assert registry.add(KernelDef("Relu", "", (14, 14), "Ep", {}, {}, {"T": [10]}, [], []), None, None) is None
    assert len(registry.entries) == 2


# -- KregEp through epabi's host ------------------------------------------------------------------------------

def test_mlp_runs_on_the_plugins_kernels_in_its_device_memory(kreg: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    model = MODELS["mlp"]()
    outputs, log, host, assignment = _run_epabi(kreg, model, tmp_path / "log", monkeypatch, {})
    expected = onnx.reference.ReferenceEvaluator(model).run(None, {"x": _feed(model)})[0]
    np.testing.assert_allclose(outputs[0], expected, rtol=1e-5, atol=1e-6)
    assert set(assignment.values()) == {"KregEp"} and len(assignment) == 8
    trace = host.trace
    assert trace.index("OrtEp::GetKernelRegistry") < trace.index("OrtEp::GetCapability")
    assert log[0] == "get kernel registry"
    assert "create MatMul name=matmul0 domain= op=MatMul since=13 inputs=2 outputs=1 const1=1 ep=KregEp" in log
    assert "prepack MatMul matmul0 input=1 tensor=KregDev allocator=KregDev cache=none" in log
    assert log.count("compute Relu relu0 stream=none in0=KregDev") == 2
    assert log.count("run end sync=1") == 2
    assert sum(line.startswith("release ") for line in log) == 8  # every kernel released when the session closed


def test_a_host_memory_ep_shares_prepacked_weights_through_the_cache(kreg: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    model = MODELS["mlp"]()
    outputs, log, _, _ = _run_epabi(kreg, model, tmp_path / "log", monkeypatch, {"KREG_DEVICE": "0",
                                                                                "KREG_PACK": "1"})
    expected = onnx.reference.ReferenceEvaluator(model).run(None, {"x": _feed(model)})[0]
    np.testing.assert_allclose(outputs[0], expected, rtol=1e-5, atol=1e-6)
    assert "prepack MatMul matmul0 input=1 tensor=Cpu allocator=Cpu cache=some" in log
    index = log.index("prepack MatMul matmul0 input=1 tensor=Cpu allocator=Cpu cache=some")
    assert log[index + 1] == "shared MatMul matmul0 input=1 buffers=1 bytes=1025"  # 16x16 floats + 1
    assert "compute MatMul matmul0 stream=none in0=Cpu" in log


def test_memcpy_kernels_run_where_ort_puts_memcpy_nodes(kreg: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    model = _boundary()
    outputs, log, _, assignment = _run_epabi(kreg, model, tmp_path / "log", monkeypatch, {"KREG_MEMCPY": "1"})
    np.testing.assert_allclose(outputs[0], _boundary_reference(_feed(model)), rtol=1e-5, atol=1e-6)
    assert assignment["sig"] == assignment["shape"] == "CPUExecutionProvider"
    assert [line for line in log if line.startswith("create Memcpy")] == [
        "create MemcpyFromHost name=Memcpy domain= op=MemcpyFromHost since=1 inputs=1 outputs=1 const1=0 ep=KregEp",
        "create MemcpyToHost name=Memcpy_token_0 domain= op=MemcpyToHost since=1 inputs=1 outputs=1 const1=0 "
        "ep=KregEp",
        "create MemcpyToHost name=Memcpy_token_1 domain= op=MemcpyToHost since=1 inputs=1 outputs=1 const1=0 "
        "ep=KregEp"]
    run = log[log.index("compute Relu relu stream=none in0=KregDev"):]
    assert run[1:4] == ["compute MemcpyToHost Memcpy_token_1 stream=none in0=KregDev",  # r for Sigmoid
                        "compute MemcpyFromHost Memcpy stream=none in0=Cpu",  # s for Add
                        "compute Add add stream=none in0=KregDev"]
    assert "reshape shape input in Cpu" in log  # Reshape's shape is an OrtMemTypeCPUInput
    assert not any("attribute alpha missing" in line for line in log)  # ORT fills in schema defaults


def test_without_memcpy_kernels_cpu_side_values_reach_the_kernel_in_host_memory(
        kreg: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _boundary()
    outputs, log, _, _ = _run_epabi(kreg, model, tmp_path / "log", monkeypatch, {})
    np.testing.assert_allclose(outputs[0], _boundary_reference(_feed(model)), rtol=1e-5, atol=1e-6)
    assert "compute Add add stream=none in0=Cpu" in log  # as ORT's CPU-EP fallback Memcpy leaves it


def test_an_nhwc_ep_gets_its_layout_sensitive_nodes_converted(kreg: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    model = _pool()
    expected = np.maximum(np.maximum(_feed(model), 0).max(axis=(2, 3), keepdims=True), 0)
    outputs, log, _, assignment = _run_epabi(kreg, model, tmp_path / "log", monkeypatch, {"KREG_NHWC": "1"})
    np.testing.assert_array_equal(outputs[0], expected)
    claims = [line for line in log if line.startswith("claim")]
    assert claims == ["claim :Relu relu", "claim :GlobalMaxPool gmp", "claim :Relu relu2",  # the model as it is
                      "claim :Relu relu", "claim :Transpose gmp_to_nhwc",  # the converted graph, asked again
                      "claim com.ms.internal.nhwc:GlobalMaxPool gmp", "claim :Transpose gmp_to_nchw",
                      "claim :Relu relu2"]
    assert "compute GlobalMaxPool gmp stream=none in0=KregDev" in log
    assert set(assignment.values()) == {"KregEp"} and "gmp_to_nhwc" in assignment
    outputs, log, _, assignment = _run_epabi(kreg, model, tmp_path / "log", monkeypatch, {"KREG_NHWC": "0"})
    np.testing.assert_array_equal(outputs[0], expected)
    assert [line for line in log if line.startswith("claim")] == ["claim :Relu relu", "claim :GlobalMaxPool gmp",
                                                                  "claim :Relu relu2"]


def test_a_stream_aware_factory_gives_its_kernels_its_stream(kreg: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _, log, _, _ = _run_epabi(kreg, MODELS["mlp"](), tmp_path / "log", monkeypatch, {"KREG_STREAM": "1"})
    assert log.count("stream create") == 1
    assert log.index("stream create") > max(i for i, line in enumerate(log) if line.startswith("prepack"))
    assert all("stream=kreg" in line for line in log if line.startswith("compute"))
    assert log.count("stream run end") == 2
    assert log.index("stream release") < log.index("release MatMul matmul0")


def test_kernel_registry_eps_run_on_the_oldest_kernel_host(kreg: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    model = MODELS["mlp"]()
    outputs, _, host, _ = _run_epabi(kreg, model, tmp_path / "log", monkeypatch, {}, api=24)
    expected = onnx.reference.ReferenceEvaluator(model).run(None, {"x": _feed(model)})[0]
    np.testing.assert_allclose(outputs[0], expected, rtol=1e-5, atol=1e-6)
    assert host.version_string == "1.24.4"


# -- the same runs under real onnxruntime -------------------------------------------------------------------

SCENARIOS = [("mlp", {}), ("mlp", {"KREG_DEVICE": "0"}), ("mlp", {"KREG_PACK": "1"}),
             ("mlp", {"KREG_PACK": "1", "KREG_DEVICE": "0"}), ("mlp", {"KREG_STREAM": "1"}),
             ("boundary", {}), ("boundary", {"KREG_MEMCPY": "1"}), ("boundary", {"KREG_MEMCPY": "1",
                                                                                 "KREG_STREAM": "1"}),
             ("pool", {})]


NHWC = ("pool", {"KREG_NHWC": "1", "KREG_MEMCPY": "1"})


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
@pytest.mark.parametrize("index", range(len(SCENARIOS)),
                         ids=[f"{n}-{'-'.join(e) or 'plain'}" for n, e in SCENARIOS])
def test_epabi_drives_the_plugin_as_real_onnxruntime_does(kreg: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          real_runs: dict, version: str, index: int) -> None:
    name, env = SCENARIOS[index]
    real_outputs, real_log = real_runs[version][index]
    outputs, log, _, _ = _run_epabi(kreg, MODELS[name](), tmp_path / "epabi.log", monkeypatch, env)
    assert log == real_log
    assert json.dumps([o.tolist() for o in outputs]) == json.dumps(real_outputs)


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_nhwc_conversion_computes_what_real_onnxruntime_computes(kreg: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch, real_runs: dict,
                                                                version: str) -> None:
    """ORT's transpose optimizer then moves and renames the Transposes (the README lists that difference), so the
    logs agree on what was converted and ran in NHWC, and the outputs agree exactly."""
    real_outputs, real_log = real_runs[version][len(SCENARIOS)]
    outputs, log, _, _ = _run_epabi(kreg, _pool(), tmp_path / "epabi.log", monkeypatch, NHWC[1])
    assert json.dumps([o.tolist() for o in outputs]) == json.dumps(real_outputs)
    for lines in (log, real_log):
        assert sum(line.startswith("claim com.ms.internal.nhwc:GlobalMaxPool ") for line in lines) == 1
        assert sum(line.startswith("compute GlobalMaxPool ") for line in lines) == 2
        assert not any(line.startswith("create Memcpy") for line in lines)


def test_sessions_leave_no_handles_behind(kreg: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels, infos, lent definitions and initializers, allocators, streams and converted graphs all go with
    their session."""
    for key, value in {"KREG_LOG": str(tmp_path / "log"), "KREG_NHWC": "1", "KREG_MEMCPY": "1", "KREG_STREAM": "1",
                       "KREG_PACK": "1"}.items():
        monkeypatch.setenv(key, value)
    with epabi.Host(hardware=[epabi.cpu_device()]) as host:
        host.register_execution_provider_library("kreg", kreg)
        so = epabi.SessionOptions()
        so.add_provider_for_devices(host.get_ep_devices())
        counts = []
        for _ in range(3):
            for model in (MODELS["mlp"](), _boundary(), _pool()):
                with epabi.InferenceSession(model.SerializeToString(), so) as sess:
                    sess.run(None, {sess.get_inputs()[0].name: _feed(model)})
            counts.append(len(host.handles.live(object)))
        assert counts[0] == counts[1] == counts[2]


def test_a_kernel_registry_ep_runs_in_hosts_at_once_and_in_sequence(kreg: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Registries, kernel definitions and OrtDataTypes the plugin made through one host stay valid in the
    process-wide tables: two hosts at once (API 24 and the newest), then a third after both are closed."""
    monkeypatch.setenv("KREG_LOG", str(tmp_path / "log"))
    model = _boundary()
    x = _feed(model)

    def run(host: epabi.Host) -> tuple[np.ndarray, dict[str, str]]:
        so = epabi.SessionOptions()
        so.add_provider_for_devices(host.get_ep_devices())
        with epabi.InferenceSession(model.SerializeToString(), so) as sess:
            return sess.run(None, {"x": x})[0], dict(sess.node_assignment)

    hosts = [epabi.Host(api_version=24, hardware=[epabi.cpu_device()]), epabi.Host(hardware=[epabi.cpu_device()])]
    for host in hosts:
        host.register_execution_provider_library("kreg", kreg)
    results = [run(hosts[0])]
    hosts[0].close()
    results.append(run(hosts[1]))
    hosts[1].close()
    hosts.append(epabi.Host(api_version=30, hardware=[epabi.cpu_device()]))
    hosts[2].register_execution_provider_library("kreg", kreg)
    results.append(run(hosts[2]))
    hosts[2].close()
    for y, assignment in results:
        np.testing.assert_allclose(y, _boundary_reference(x), rtol=1e-5, atol=1e-6)
        assert assignment["mm"] == assignment["relu"] == "KregEp" and assignment["sig"] == "CPUExecutionProvider"
    for host in hosts:
        assert [m for kind, m in host.conduct_report() if kind in ("violation", "internal")] == []
