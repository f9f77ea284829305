"""cuDNN or the GEMM form per conv on the GPU (native/cuda/cuda_cudnn.c, EPABI_CONV_FORM; skipped without a GPU).

Each case is a conv whose GEMM form applies (im2col + cuBLAS SGEMM, or GEMMs over X for the 1x1): magika's conv
(X [1,256,512,1], W [512,256,5,1], no pads, no bias), bias + Relu, stride 2, pads, 1x1 with bias. Under
EPABI_CONV_FORM=gemm, =cudnn and =timed it must give ONNX Runtime's CPU EP's values within 1e-4, eager and under graph
capture with new inputs written in place before every call (so the replays compute, not repeat), through epabi's host
and through the interpreter's onnxruntime. The option cudnn=1 is set in every session, so cuDNN is loaded where the
machine has it.

Which form ran is read from the plugin's log: the shape's VERBOSE set-up line ("runs on cuDNN: ..." or "runs on
epabi's kernel, not cuDNN: <why>") and, when timed, its INFO line "...: cuDNN <t> us, GEMM form <t> us: using ...".
Without a cuDNN on the machine only the values are checked (every form then is epabi's).
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
CALLS = 4
SHAPE = r"Conv X \[([\d,]+)\] W \[([\d,]+)\] group (\d+)"
ON_CUDNN = re.compile(SHAPE + r" runs on cuDNN: algorithm (\w+)")
ON_OURS = re.compile(SHAPE + r" runs on epabi's kernel, not cuDNN: (.*)")
TIMED = re.compile(SHAPE + r": cuDNN ([\d.]+) us, GEMM form ([\d.]+) us: using (cuDNN|the GEMM form)$")
NOT_LOADED = re.compile(r"CUDA backend on GPU.*cuDNN not loaded: (.*?)\)")

if epabi.hardware.cuda_gpu_count() == 0:
    pytest.skip("no NVIDIA GPU with a working driver", allow_module_level=True)


@dataclass(frozen=True)
class Case:
    id: str
    x: tuple[int, int, int, int]
    w: tuple[int, int, int, int]
    attrs: dict = field(default_factory=dict)
    bias: bool = False
    relu: bool = False

    def model(self) -> onnx.ModelProto:
        rng = np.random.default_rng(sum(map(ord, self.id)))
        w = (rng.standard_normal(self.w) / np.sqrt(np.prod(self.w[1:]))).astype(np.float32)
        inits = [onnx.numpy_helper.from_array(w, "w")]
        inputs = ["x", "w"]
        if self.bias:
            inits.append(onnx.numpy_helper.from_array(rng.standard_normal(self.w[0]).astype(np.float32), "b"))
            inputs.append("b")
        nodes = [helper.make_node("Conv", inputs, ["c"], name="conv", **self.attrs)]
        last = "c"
        if self.relu:
            nodes.append(helper.make_node("Relu", ["c"], ["r"]))
            last = "r"
        nodes.append(helper.make_node("Identity", [last], ["y"]))
        graph = helper.make_graph(nodes, self.id, [helper.make_tensor_value_info("x", TensorProto.FLOAT, self.x)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 9   # the interpreter's onnxruntime may read no newer IR (1.30: 13)
        return model

    def inputs(self) -> list[np.ndarray]:
        """One X per call: a replay that repeated the captured run's output would fail from the second call."""
        rng = np.random.default_rng(len(self.id))
        return [rng.standard_normal(self.x).astype(np.float32) for _ in range(CALLS)]

    def shape_text(self) -> tuple[str, str]:
        return ",".join(map(str, self.x)), ",".join(map(str, self.w))


CASES = [
    Case("magika", (1, 256, 512, 1), (512, 256, 5, 1)),
    Case("bias_relu", (1, 32, 20, 20), (64, 32, 3, 3), {"pads": [1, 1, 1, 1]}, bias=True, relu=True),
    Case("stride2", (1, 16, 33, 31), (32, 16, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, bias=True),
    Case("pads", (2, 8, 15, 17), (16, 8, 5, 3), {"pads": [2, 1, 2, 1]}),
    Case("1x1", (2, 64, 12, 12), (48, 64, 1, 1), bias=True),
]
FORMS = ["gemm", "cudnn", "timed"]


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


def _run(host: epabi.Host, case: Case, graphs: bool) -> tuple[list[np.ndarray], list[str]]:
    """CALLS runs through IOBinding in device memory, X rewritten in place and Y poisoned with NaN before each."""
    model = case.model()
    xs = case.inputs()
    out_shape = ort_cpu(model, {"x": xs[0]}).shape
    so = epabi.SessionOptions()
    so.log_severity_level = 0
    so.add_provider_for_devices([_gpu(host)], {"enable_cuda_graph": "1" if graphs else "0", "cudnn": "1",
                                               "min_num_runs_before_cuda_graph_capture": "2"})
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
            x = epabi.OrtValue.ortvalue_from_numpy(xs[0], "cuda", 0, host=host)
            y = epabi.OrtValue.ortvalue_from_shape_and_type(list(out_shape), np.float32, "cuda", 0, host=host)
            binding.bind_ortvalue_input("x", x)
            binding.bind_ortvalue_output("y", y)
            for call in range(CALLS):
                x.update_inplace(xs[call])
                y.update_inplace(np.full(out_shape, np.nan, np.float32))
                session.run_with_iobinding(binding)
                outs.append(y.numpy())
            if graphs:
                assert session.graph_capture.replays >= 1
    finally:
        log.removeHandler(keep)
        log.setLevel(old)
    return outs, [r.getMessage() for r in records]


def _check_values(case: Case, outs: list[np.ndarray], what: str) -> None:
    model = case.model()
    for call, (x, got) in enumerate(zip(case.inputs(), outs, strict=True)):
        np.testing.assert_allclose(got, ort_cpu(model, {"x": x}), **TOL, err_msg=f"{what}, call {call}")


def _check_form(case: Case, form: str, messages: list[str]) -> None:
    """The log's account of which form served the case's shape (one set-up per shape and stream)."""
    xs, ws = case.shape_text()
    on = [m.groups() for m in map(ON_CUDNN.search, messages) if m and m.groups()[:2] == (xs, ws)]
    ours = [m.groups() for m in map(ON_OURS.search, messages) if m and m.groups()[:2] == (xs, ws)]
    timed = [m.groups() for m in map(TIMED.search, messages) if m and m.groups()[:2] == (xs, ws)]
    if form == "gemm":
        assert on == [] and timed == [] and len(ours) == 1 and ours[0][3] == "EPABI_CONV_FORM=gemm", (on, ours, timed)
    elif form == "cudnn":
        assert len(on) == 1 and ours == [] and timed == [], (on, ours, timed)
    else:
        assert len(timed) == 1, (on, ours, timed, messages[-20:])
        us_cudnn, us_gemm, using = float(timed[0][3]), float(timed[0][4]), timed[0][5]
        assert us_cudnn > 0 and us_gemm > 0, timed
        # the faster one serves the shape (the line rounds both to 0.1 us)
        assert us_gemm <= us_cudnn if using == "the GEMM form" else us_cudnn <= us_gemm, timed
        if using == "cuDNN":
            assert len(on) == 1 and ours == [], (on, ours)
        else:
            assert on == [] and len(ours) == 1 and ours[0][3].startswith("the GEMM form (im2col + SGEMM) took"), ours


def _cudnn_missing(messages: list[str]) -> str | None:
    for m in messages:
        found = NOT_LOADED.search(m)
        if found:
            return found.group(1)
    return None


@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_each_form_matches_ort_cpu(gpu_host: epabi.Host, monkeypatch: pytest.MonkeyPatch, case: Case, form: str,
                                   graphs: bool) -> None:
    monkeypatch.setenv("EPABI_CONV_FORM", form)
    outs, messages = _run(gpu_host, case, graphs)
    _check_values(case, outs, f"EPABI_CONV_FORM={form} graphs={graphs}")
    missing = _cudnn_missing(messages)
    if missing is not None:
        pytest.skip(f"the values are checked; no cuDNN on this machine: {missing}")
    _check_form(case, form, messages)


def test_an_unknown_form_is_a_warning_and_means_timed(gpu_host: epabi.Host, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EPABI_CONV_FORM", "fastest")
    case = CASES[0]
    outs, messages = _run(gpu_host, case, graphs=False)
    _check_values(case, outs, "EPABI_CONV_FORM=fastest")
    missing = _cudnn_missing(messages)
    if missing is not None:
        pytest.skip(f"the value is read with cuDNN only; none on this machine: {missing}")
    assert any("EPABI_CONV_FORM='fastest' is none of 'cudnn', 'gemm', 'timed'; timing each conv" in m
               for m in messages), [m for m in messages if "EPABI_CONV_FORM" in m]
    _check_form(case, "timed", messages)


# -- real onnxruntime ---------------------------------------------------------------------------------------------

# argv: library, output folder, then MODEL.onnx:XS.npy:SHAPE.npy triples (XS: the CALLS inputs stacked). Each model
# runs with cudnn=1, graphs off and on (1.26+), CALLS calls through IOBinding in the EP's device memory with X rewritten
# in place before each; outputs go to <folder>/<i>_<graphs>_<call>.npy.
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
    model, xs_path, shape_path = triple.split(":")
    xs = np.load(xs_path)
    out_shape = [int(d) for d in np.load(shape_path)]
    for graphs in graph_modes:
        so = ort.SessionOptions()
        so.log_severity_level = 0
        so.add_provider_for_devices(gpus[:1], {"enable_cuda_graph": graphs, "cudnn": "1"})
        sess = ort.InferenceSession(model, sess_options=so, enable_fallback=0)
        providers.append(sess.get_providers()[0])
        x = ort.OrtValue.ortvalue_from_numpy(xs[0], "cuda", 0)
        y = ort.OrtValue.ortvalue_from_shape_and_type(out_shape, np.float32, "cuda", 0)
        io = sess.io_binding()
        io.bind_ortvalue_input("x", x)
        io.bind_ortvalue_output("y", y)
        ro = ort.RunOptions()
        ro.add_run_config_entry("gpu_graph_id", "1")
        for call in range(len(xs)):
            x.update_inplace(xs[call])
            y.update_inplace(np.full(out_shape, np.nan, np.float32))
            sess.run_with_iobinding(io, ro)
            np.save(os.path.join(out_dir, f"{i}_{graphs}_{call}.npy"), y.numpy())
        del sess, so, io, x, y
        gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(ort_version=ort.__version__, providers=providers, graph_modes=graph_modes)
"""


@pytest.mark.parametrize("form", FORMS)
def test_real_onnxruntime_each_form(library_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    form: str) -> None:
    if importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("onnxruntime is not installed in this interpreter")
    from real_ort import run_json_on_gpu

    monkeypatch.setenv("EPABI_CONV_FORM", form)   # host_env passes the outer environment on
    args = [library_path, str(tmp_path)]
    for i, case in enumerate(CASES):
        xs = np.stack(case.inputs())
        onnx.save(case.model(), tmp_path / f"{i}.onnx")
        np.save(tmp_path / f"{i}_xs.npy", xs)
        np.save(tmp_path / f"{i}_shape.npy", np.array(ort_cpu(case.model(), {"x": xs[0]}).shape, np.int64))
        args.append(f"{tmp_path / f'{i}.onnx'}:{tmp_path / f'{i}_xs.npy'}:{tmp_path / f'{i}_shape.npy'}")
    result, err = run_json_on_gpu(REAL_ORT_SCRIPT, args)
    assert set(result["providers"]) == {EP}, result["providers"]
    for i, case in enumerate(CASES):
        for graphs in result["graph_modes"]:
            outs = [np.load(tmp_path / f"{i}_{graphs}_{call}.npy") for call in range(CALLS)]
            _check_values(case, outs, f"onnxruntime {result['ort_version']} EPABI_CONV_FORM={form} graphs={graphs}")
    if re.search(r"cuDNN not loaded", err) is None:
        timed = [m for m in err.splitlines() if TIMED.search(m)]
        # one timing per shape and session (each session's thread gets its own stream and set-ups)
        want = len(CASES) * len(result["graph_modes"]) if form == "timed" else 0
        assert len(timed) == want, timed
