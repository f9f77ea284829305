"""Conv through cuDNN on the GPU (native/cuda/cuda_cudnn.c; skipped without an NVIDIA GPU and driver): each case
(groups, depthwise, dilation, stride, pads, 1x1, 1-D, bias or none, N > 1, ReLU fused into cuDNN's call, the other
epilogues as epabi's in-place pass) gives ONNX Runtime's CPU EP's values within 1e-4 with option cudnn on and off,
eager and under graph capture (warm-up runs set cuDNN up; with min_num_runs_before_cuda_graph_capture=0 the capture
meets the shape first and records epabi's kernel), through epabi's host and the interpreter's onnxruntime.

Which path ran is read from the plugin's log: the backend's INFO line names the cuDNN loaded (or why none), and each
conv shape's set-up on a stream logs one VERBOSE line, "... runs on cuDNN: algorithm ..." or "... runs on epabi's
kernel, not cuDNN: <why>" (asymmetric padding that changes the output extent, for one). When no cuDNN loads on the
machine (no nvidia-cudnn wheel, no system cuDNN), the cuDNN-specific checks skip with the loader's reason.
"""

from __future__ import annotations

import importlib.util
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import epabi
from linear_models import ort_cpu

pytestmark = pytest.mark.gpu

EP = "EpAbiExecutionProvider"
TOL = {"rtol": 1e-4, "atol": 1e-4}
BACKEND = "CUDA backend on GPU"
ON_CUDNN = re.compile(r"Conv X \[([\d,]+)\] W \[([\d,]+)\] group (\d+) runs on cuDNN: algorithm (\w+)")
ON_OURS = re.compile(r"Conv X \[([\d,]+)\] W \[([\d,]+)\] group (\d+) runs on epabi's kernel, not cuDNN: (.*)")

if epabi.hardware.cuda_gpu_count() == 0:
    pytest.skip("no NVIDIA GPU with a working driver", allow_module_level=True)

# activation chains after the Conv (the plan fuses each into the Conv's launch as its epilogue)
ACTS: dict[str, list[tuple[str, dict]]] = {
    "none": [],
    "relu": [("Relu", {})],
    "silu": [("Sigmoid", {}), ("Mul", {})],
    "leaky": [("LeakyRelu", {"alpha": 0.1})],
    "hard_swish": [("HardSwish", {})],
    "hard_sigmoid": [("HardSigmoid", {"alpha": 0.3, "beta": 0.4})],
    "sigmoid": [("Sigmoid", {})],
    "tanh": [("Tanh", {})],
}


@dataclass(frozen=True)
class ConvCase:
    id: str
    x: tuple[int, ...]
    w: tuple[int, ...]
    attrs: dict = field(default_factory=dict)
    bias: bool = True
    act: str = "none"
    cudnn: bool = True          # expected on cuDNN when it loads (False: it declines the shape)

    def build(self) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
        rng = np.random.default_rng(sum(map(ord, self.id)))
        x = rng.standard_normal(self.x).astype(np.float32)
        w = (rng.standard_normal(self.w) / np.sqrt(np.prod(self.w[1:]))).astype(np.float32)
        inits = [onnx.numpy_helper.from_array(w, "w")]
        inputs = ["x", "w"]
        if self.bias:
            inits.append(onnx.numpy_helper.from_array(rng.standard_normal(self.w[0]).astype(np.float32), "b"))
            inputs.append("b")
        nodes = [helper.make_node("Conv", inputs, ["c"], name="conv", **self.attrs)]
        last = "c"
        for i, (op, kw) in enumerate(ACTS[self.act]):
            nodes.append(helper.make_node(op, ["c", last] if op == "Mul" else [last], [f"a{i}"], **kw))
            last = f"a{i}"
        nodes.append(helper.make_node("Identity", [last], ["y"]))
        graph = helper.make_graph(nodes, self.id, [helper.make_tensor_value_info("x", TensorProto.FLOAT, self.x)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 9   # onnx's default may exceed what the interpreter's onnxruntime reads (1.30: 13)
        return model, {"x": x}


CASES = [
    ConvCase("3x3_pad1", (1, 8, 16, 16), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    ConvCase("3x3_no_bias", (1, 8, 16, 16), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}, bias=False),
    ConvCase("1x1", (1, 32, 10, 10), (24, 32, 1, 1)),
    ConvCase("1x1_no_bias_n3", (3, 16, 7, 9), (8, 16, 1, 1), bias=False),
    ConvCase("stride2", (1, 6, 17, 15), (12, 6, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ConvCase("dilation2", (1, 4, 20, 20), (8, 4, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ConvCase("groups2", (1, 8, 12, 12), (10, 4, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ConvCase("depthwise", (1, 16, 14, 14), (16, 1, 3, 3), {"group": 16, "pads": [1, 1, 1, 1]}),
    ConvCase("depthwise_x2_stride2", (2, 8, 13, 13), (16, 1, 5, 5), {"group": 8, "strides": [2, 2],
                                                                      "pads": [2, 2, 2, 2]}),
    ConvCase("n4_5x5", (4, 3, 24, 20), (7, 3, 5, 5), {"pads": [2, 1, 2, 1]}),
    ConvCase("1d", (2, 5, 40), (6, 5, 7), {"pads": [3, 3], "strides": [2]}),
    ConvCase("rect_kernel", (1, 4, 11, 19), (5, 4, 1, 5), {"pads": [0, 2, 0, 2]}),
    # end padding that does not change the extent: cuDNN's symmetric padding gives the same output
    ConvCase("asym_same_extent", (1, 4, 16, 16), (8, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 0, 0]}),
    # end padding that does: epabi's kernel
    ConvCase("asym_pads", (1, 4, 9, 9), (8, 4, 3, 3), {"pads": [0, 0, 1, 1]}, cudnn=False),
    ConvCase("same_upper_even", (1, 4, 10, 10), (6, 4, 2, 2), {"auto_pad": "SAME_UPPER"}, cudnn=False),
    ConvCase("relu", (1, 8, 16, 16), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}, act="relu"),
    ConvCase("relu_no_bias", (2, 8, 9, 9), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}, bias=False, act="relu"),
    ConvCase("relu_depthwise", (1, 12, 10, 10), (12, 1, 3, 3), {"group": 12, "pads": [1, 1, 1, 1]}, act="relu"),
    ConvCase("relu_1x1_n2", (2, 32, 8, 8), (64, 32, 1, 1), act="relu"),
    ConvCase("silu", (1, 8, 16, 16), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}, act="silu"),
    ConvCase("leaky", (1, 8, 12, 12), (8, 8, 3, 3), {"strides": [2, 2]}, act="leaky"),
    ConvCase("hard_swish", (1, 6, 12, 12), (6, 6, 3, 3), {"pads": [1, 1, 1, 1]}, act="hard_swish"),
    ConvCase("hard_sigmoid", (1, 6, 12, 12), (6, 6, 3, 3), {"pads": [1, 1, 1, 1]}, act="hard_sigmoid"),
    ConvCase("sigmoid_no_bias", (1, 6, 12, 12), (6, 6, 3, 3), bias=False, act="sigmoid"),
    ConvCase("tanh", (1, 6, 12, 12), (6, 6, 3, 3), {"pads": [1, 1, 1, 1]}, act="tanh"),
]


@pytest.fixture(autouse=True)
def _cudnn_form(monkeypatch: pytest.MonkeyPatch) -> None:
    """These cases check cuDNN's own path: where the GEMM form applies it could win the timing and serve the shape
    instead (tests/test_gpu_conv_form.py checks that choice)."""
    monkeypatch.setenv("EPABI_CONV_FORM", "cudnn")


@pytest.fixture
def gpu_host(library_path: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[epabi.Host]:
    monkeypatch.setenv("EPABI_CUDA_DISCOVERY", "1")
    monkeypatch.delenv("EPABI_ALLOW_SOFTWARE_ADAPTER", raising=False)
    with epabi.Host() as host:
        host.register_execution_provider_library("epabi", library_path)
        yield host


def _gpu(host: epabi.Host) -> epabi.EpDevice:
    devices = [d for d in host.get_ep_devices() if d.ep_name == EP and d.ep_metadata.get("device_kind") == "gpu"]
    assert devices, f"the plugin lists no GPU EP device: {host.get_ep_devices()}"
    return devices[0]


def _cudnn_line(messages: list[str]) -> str:
    lines = [m for m in messages if BACKEND in m]
    assert lines, "no CUDA backend line in the plugin's log"
    match = re.search(r"cuDNN (.*)\)(?:; run memory from the CUDA memory pool)?$", lines[0])
    assert match, lines[0]
    return match.group(1)


def _run(host: epabi.Host, case: ConvCase, cudnn: str | None, graphs: bool, min_runs: int = 2,
         calls: int = 3) -> tuple[list[np.ndarray], list[str]]:
    """`calls` runs through IOBinding in device memory (the output poisoned with NaN before each); outputs, log.
    ``cudnn`` None leaves the option at its default."""
    model, feeds = case.build()
    expected_shape = ort_cpu(model, feeds).shape
    so = epabi.SessionOptions()
    so.log_severity_level = 0
    options = {"enable_cuda_graph": "1" if graphs else "0", "min_num_runs_before_cuda_graph_capture": str(min_runs)}
    if cudnn is not None:
        options["cudnn"] = cudnn
    so.add_provider_for_devices([_gpu(host)], options)
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep(level=logging.DEBUG)
    log = logging.getLogger("epabi")
    old = log.level
    log.addHandler(keep)
    log.setLevel(logging.DEBUG)
    outs = []
    try:
        with epabi.InferenceSession(model, so) as session:
            assert set(session.node_assignment.values()) == {EP}, session.node_assignment
            binding = session.io_binding()
            x = epabi.OrtValue.ortvalue_from_numpy(feeds["x"], "cuda", 0, host=host)
            y = epabi.OrtValue.ortvalue_from_shape_and_type(list(expected_shape), np.float32, "cuda", 0, host=host)
            binding.bind_ortvalue_input("x", x)
            binding.bind_ortvalue_output("y", y)
            for _ in range(calls):
                y.update_inplace(np.full(expected_shape, np.nan, np.float32))  # a path writing nothing cannot pass
                session.run_with_iobinding(binding)
                outs.append(y.numpy())
            if graphs:
                assert session.graph_capture.replays >= 1
    finally:
        log.removeHandler(keep)
        log.setLevel(old)
    return outs, [r.getMessage() for r in records]


def _shape_text(case: ConvCase) -> tuple[str, str]:
    x = case.x if len(case.x) == 4 else (case.x[0], case.x[1], 1, case.x[2])
    w = case.w if len(case.w) == 4 else (case.w[0], case.w[1], 1, case.w[2])
    return ",".join(map(str, x)), ",".join(map(str, w))


@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("cudnn", ["1", "0"], ids=["cudnn", "ours"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_conv_matches_ort_cpu(gpu_host: epabi.Host, case: ConvCase, cudnn: str, graphs: bool) -> None:
    model, feeds = case.build()
    expected = ort_cpu(model, feeds)
    outs, messages = _run(gpu_host, case, cudnn, graphs)
    for call, got in enumerate(outs):
        np.testing.assert_allclose(got, expected, **TOL, err_msg=f"call {call}")
    loaded = _cudnn_line(messages)
    on = [m.groups() for m in map(ON_CUDNN.search, messages) if m]
    ours = [m.groups() for m in map(ON_OURS.search, messages) if m]
    if cudnn == "0":
        assert loaded.startswith("not loaded: cudnn=0"), loaded
        assert on == [] and ours == [], (on, ours)
        return
    if loaded.startswith("not loaded"):
        pytest.skip(f"the values are checked; no cuDNN on this machine: {loaded}")
    xs, ws = _shape_text(case)
    group = str(case.attrs.get("group", 1))
    # one set-up per shape and stream, at the first (eager or warm-up) run
    if case.cudnn:
        assert len(on) == 1 and on[0][:3] == (xs, ws, group), (on, ours)
        assert on[0][3] in ("IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT"), on
        assert ours == [], ours
    else:
        assert on == [] and len(ours) == 1 and ours[0][:3] == (xs, ws, group), (on, ours)
        assert ours[0][3].startswith("asymmetric padding"), ours
    fused = [m for m in messages if ON_CUDNN.search(m) and "bias + ReLU fused" in m]
    assert len(fused) == (1 if case.cudnn and case.bias and case.act == "relu" else 0), fused


def test_a_capture_meeting_the_shape_first_records_epabis_kernel(gpu_host: epabi.Host) -> None:
    """min_num_runs_before_cuda_graph_capture=0: the first run is the capture, where cuDNN is never set up; the
    replays give the CPU EP's values and no shape was set up on cuDNN."""
    case = next(c for c in CASES if c.id == "relu")
    model, feeds = case.build()
    outs, messages = _run(gpu_host, case, "1", graphs=True, min_runs=0)
    for call, got in enumerate(outs):
        np.testing.assert_allclose(got, ort_cpu(model, feeds), **TOL, err_msg=f"call {call}")
    assert not any(ON_CUDNN.search(m) or ON_OURS.search(m) for m in messages), messages[-10:]


@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "graphs"])
def test_cudnn_by_default_only_where_graphs_are_captured(gpu_host: epabi.Host, graphs: bool) -> None:
    """Without the option, cuDNN serves sessions with enable_cuda_graph=1 (its per-call host cost is paid at capture)
    and eager sessions run epabi's kernels; both give the CPU EP's output."""
    case = CASES[0]
    outs, messages = _run(gpu_host, case, None, graphs=graphs)
    loaded = _cudnn_line(messages)
    if graphs and loaded.startswith("not loaded"):
        pytest.skip(f"no cuDNN on this machine: {loaded}")
    assert loaded.startswith("not loaded: cudnn=0") != graphs, loaded
    assert any("runs on cuDNN" in m for m in messages) == graphs, [m for m in messages if "cuDNN" in m]
    model, feeds = case.build()
    for got in outs:
        np.testing.assert_allclose(got, ort_cpu(model, feeds), rtol=1e-4, atol=1e-4)


def test_the_backend_line_names_the_cudnn_loaded(gpu_host: epabi.Host) -> None:
    _, messages = _run(gpu_host, CASES[0], "1", graphs=False, calls=1)
    loaded = _cudnn_line(messages)
    if loaded.startswith("not loaded"):
        pytest.skip(f"no cuDNN on this machine: {loaded}")
    assert re.fullmatch(r"9\.\d+\.\d+ \(CUDA \d+\) from /\S*libcudnn\.so\.9", loaded), loaded


# -- real onnxruntime ---------------------------------------------------------------------------------------------

# argv: library, output folder, then MODEL.onnx:X.npy:SHAPE.npy triples. Each model runs with cudnn 1 and 0, graphs
# off and on (1.26+), 3 calls through IOBinding in the EP's device memory; outputs go to <folder>/<i>_<cudnn>_<graphs>_
# <call>.npy and the plugin's log (VERBOSE) between stderr markers.
REAL_ORT_SCRIPT = """
import gc
import os

import numpy as np

lib, out_dir, *triples = sys.argv[1:]
ort.set_default_logger_severity(0)
ort.register_execution_provider_library("epabi", lib)
gpus = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME and dict(d.ep_metadata).get("device_kind") == "gpu"]
if not gpus:
    emit(skip="onnxruntime lists no GPU EP device of ours", devices=[describe(d) for d in ort.get_ep_devices()])
    sys.exit(0)
graph_modes = ["0", "1"] if tuple(int(p) for p in ort.__version__.split(".")[:2]) >= (1, 26) else ["0"]
providers = []
for i, triple in enumerate(triples):
    model, x_path, shape_path = triple.split(":")
    x_host = np.load(x_path)
    out_shape = [int(d) for d in np.load(shape_path)]
    for cudnn in ("1", "0"):
        for graphs in graph_modes:
            so = ort.SessionOptions()
            so.log_severity_level = 0
            so.add_provider_for_devices(gpus[:1], {"enable_cuda_graph": graphs, "cudnn": cudnn})
            sys.stderr.write(f"\\nEPABI-MODEL {i} {cudnn} {graphs}\\n")
            sys.stderr.flush()
            sess = ort.InferenceSession(model, sess_options=so, enable_fallback=0)
            providers.append(sess.get_providers()[0])
            x = ort.OrtValue.ortvalue_from_numpy(x_host, "cuda", 0)
            y = ort.OrtValue.ortvalue_from_shape_and_type(out_shape, np.float32, "cuda", 0)
            io = sess.io_binding()
            io.bind_ortvalue_input("x", x)
            io.bind_ortvalue_output("y", y)
            ro = ort.RunOptions()
            ro.add_run_config_entry("gpu_graph_id", "1")
            for call in range(3):
                y.update_inplace(np.full(out_shape, np.nan, np.float32))
                sess.run_with_iobinding(io, ro)
                np.save(os.path.join(out_dir, f"{i}_{cudnn}_{graphs}_{call}.npy"), y.numpy())
            del sess, so, io, x, y
            gc.collect()
            sys.stderr.write(f"\\nEPABI-MODEL-END {i} {cudnn} {graphs}\\n")
            sys.stderr.flush()
ort.unregister_execution_provider_library("epabi")
emit(ort_version=ort.__version__, providers=providers, graph_modes=graph_modes)
"""

REAL_ORT_CASES = ["3x3_pad1", "relu", "depthwise_x2_stride2", "silu", "asym_pads", "1d"]


def test_real_onnxruntime_runs_conv_on_cudnn(library_path: str, tmp_path: Path) -> None:
    if importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("onnxruntime is not installed in this interpreter")
    from real_ort import run_json_on_gpu

    cases = [next(c for c in CASES if c.id == name) for name in REAL_ORT_CASES]
    args = [library_path, str(tmp_path)]
    expected = []
    for i, case in enumerate(cases):
        model, feeds = case.build()
        expected.append(ort_cpu(model, feeds))
        onnx.save(model, tmp_path / f"{i}.onnx")
        np.save(tmp_path / f"{i}_x.npy", feeds["x"])
        np.save(tmp_path / f"{i}_shape.npy", np.array(expected[-1].shape, np.int64))
        args.append(f"{tmp_path / f'{i}.onnx'}:{tmp_path / f'{i}_x.npy'}:{tmp_path / f'{i}_shape.npy'}")
    result, err = run_json_on_gpu(REAL_ORT_SCRIPT, args)
    assert set(result["providers"]) == {EP}, result["providers"]
    loaded = not re.search(r"cuDNN not loaded: (?!cudnn=0)", err)
    for i, case in enumerate(cases):
        for cudnn in ("1", "0"):
            for graphs in result["graph_modes"]:
                for call in range(3):
                    got = np.load(tmp_path / f"{i}_{cudnn}_{graphs}_{call}.npy")
                    np.testing.assert_allclose(got, expected[i], **TOL,
                                               err_msg=f"{case.id} cudnn={cudnn} graphs={graphs} call {call}")
                match = re.search(rf"^EPABI-MODEL {i} {cudnn} {graphs}$(.*?)^EPABI-MODEL-END {i} {cudnn} {graphs}$",
                                  err, re.S | re.M)
                assert match, f"no log markers for {case.id}:\n{err[-4000:]}"
                on = [m for m in match.group(1).splitlines() if ON_CUDNN.search(m)]
                want = 1 if cudnn == "1" and loaded and case.cudnn else 0
                assert len(on) == want, (case.id, cudnn, graphs, on)
