"""Real-model structures (``real_models.py``) on our EP: a YOLOv8 detector, a DBNet text detector, a Silero-style VAD.

Each model runs on the software adapter
* through real onnxruntime (MIN and NEWEST, ``real_ort.py``) with ``enable_fallback=0``, at ORT's default graph
  optimizations and at ORT_DISABLE_ALL: every node of the graph ORT partitions is on our EP, in one fused group;
* through epabi's host (API MIN and the newest emulated): every node on our EP;
* with graph capture (``enable_cuda_graph=1``, IOBinding, ``gpu_graph_id``, inputs updated in place, outputs
  poisoned with NaN before each call): through real onnxruntime 1.26.0 and NEWEST (the first release with graph
  capture for plugin EPs, and the newest) and through epabi's host at API 26 and the newest; the first call
  warms up and captures, every later call is one replay;
and every output of every run equals what the in-process onnxruntime's CPU EP computes for the same inputs.
The ``-m gpu`` tests do the same on the GPU EP device (CUDA kernels) through the interpreter's own onnxruntime and
through epabi's host; they skip without an NVIDIA GPU.

Both hosts turn the models' Constant nodes (YOLO 64, VAD 26) into initializers when they load them, so no host
shows them to an EP. Observed with onnxruntime 1.24.4 and 1.32.0 at the default level (ORT's level-1 rewrites
run before partitioning, for every EP): constant folding removes YOLO's anchor chain
(Shape/Gather/Cast/Range/.../ConstantOfShape: the feature maps' shapes are static) and the OCR model's
Shape/Slice/Concat sizes; ConvBNFusion folds each BatchNormalization that follows a Conv into it (1.32.0 also the
one after a ConvTranspose; 1.24.4 leaves that one); PadFusion folds the VAD's constant Pads into the Convs after
them (the reflect Pad stays), and the VAD's dynamic batch keeps its Shape -> ConstantOfShape chain. Nothing else
changes.

Tolerances, against the CPU EP at its default level (which computes the Conv+BN-folded graph with MLAS): float32
results of another summation order (blocked GEMM and Conv, threaded) and of folded against unfolded
BatchNormalization, through 40-70 layers. Largest differences seen (2-core x86-64, seeds 1-4, epabi's host and
real onnxruntime at both levels): YOLO 9.2e-5 absolute on box coordinates up to 485 pixels, 3.4e-6 relative
(tolerance rtol=atol=5e-5: 15 times that); OCR 6.6e-7 on probabilities (atol 1e-5); VAD 2.1e-7 on probabilities
and states (atol 1e-5). The margin is for other CPUs' code paths (the AVX-512 or AVX2 clones, OpenBLAS or the
built-in GEMM loop, other thread counts); each tolerance is still far below a difference that would move a box, a
text-mask pixel or a speech decision.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

import epabi
from real_models import ocr_detector, op_counts, vad_model, yolo_detector
from real_ort import MIN, NEWEST, run_json_on_gpu
from test_real_ort_capture import (
    ALLOC_WARNING,
    ANOTHER_RUN,
    CAPTURE,
    Plan,
    assert_claimed_all,
    count,
    memory_for,
    replays,
)
from test_real_ort_models import assert_all_on_our_ep, placed, run_on_real_ort

EP = "EpAbiExecutionProvider"
HOSTS = [MIN, NEWEST]
LEVELS = ["default", "disable_all"]
CAPTURE_HOSTS = ["1.26.0", NEWEST]
#: epabi's host: API MIN for plain runs; graph capture needs API 26 (the OrtEp capture members), like ORT 1.26.
API_VERSIONS = [MIN, epabi.NEWEST_EMULATED]
CAPTURE_APIS = [26, epabi.NEWEST_EMULATED]


# -- the models ---------------------------------------------------------------------------------------------------

def _image(seed: int, size: int) -> dict[str, np.ndarray]:
    """A normalised RGB image in [0, 1], smooth gradients plus noise."""
    rng = np.random.default_rng(seed)
    ramp = np.linspace(0, 1, size, dtype=np.float32)
    base = np.stack([np.add.outer(ramp, ramp) / 2, np.outer(ramp, ramp), np.add.outer(ramp[::-1], ramp) / 2])
    noise = rng.uniform(0, 1, (1, 3, size, size)).astype(np.float32)
    return {"x": np.clip(0.6 * base[None] + 0.4 * noise, 0, 1).astype(np.float32)}


def _audio(seed: int, batch: int, samples: int = 1600, hidden: int = 16) -> dict[str, np.ndarray]:
    """Tones in noise at 16 kHz (amplitude < 1) and a small recurrent state."""
    rng = np.random.default_rng(seed)
    t = np.arange(samples) / 16000
    tones = np.sin(2 * np.pi * rng.uniform(100, 3000, (batch, 1)) * t) * rng.uniform(0, 0.5, (batch, 1))
    x = (tones + rng.normal(0, 0.05, (batch, samples))).astype(np.float32)
    return {"x": x, "state": (rng.standard_normal((2, batch, hidden)) * 0.1).astype(np.float32)}


@dataclass(frozen=True)
class RealModel:
    name: str
    model: onnx.ModelProto
    feeds: Callable[[int], dict[str, np.ndarray]]        # seed -> inputs
    rtol: float
    atol: float
    default_nodes: dict[str, int]                          # ORT version -> nodes partitioned at the default level
    ops: dict[str, int] = field(default_factory=dict)      # op types the model is built to exercise, with counts


MODELS = [
    RealModel("yolo", yolo_detector(batch=1, size=64, width=8, classes=4), lambda s: _image(s, 64), 5e-5, 5e-5,
              {"1.24.4": 232, "1.32.0": 232},
              {"Conv": 64, "Sigmoid": 58, "Split": 10, "MaxPool": 3, "Resize": 2, "Range": 6, "ConstantOfShape": 3,
               "Softmax": 1, "Reshape": 14, "Transpose": 3, "Constant": 64}),
    RealModel("ocr", ocr_detector(batch=1, size=64, scale=0.35, neck=16), lambda s: _image(s, 64), 0, 1e-5,
              {"1.24.4": 168, "1.32.0": 167},
              {"Conv": 72, "BatchNormalization": 49, "HardSwish": 18, "HardSigmoid": 8, "GlobalAveragePool": 8,
               "Clip": 2, "ConvTranspose": 2, "Resize": 6}),
    RealModel("vad", vad_model(), lambda s: _audio(s, 2), 0, 1e-5, {"1.24.4": 39, "1.32.0": 39},
              {"LSTM": 2, "Pad": 3, "ConstantOfShape": 1, "Conv": 4, "Sigmoid": 1, "Log": 1, "Sqrt": 1,
               "Constant": 26}),
]
BY_NAME = {m.name: m for m in MODELS}
IDS = [m.name for m in MODELS]
#: Nodes of each model as built, and without its Constant nodes, which ORT and epabi's host turn into initializers
#: when they load it: the graph ORT partitions at ORT_DISABLE_ALL, and the one epabi's host shows our EP.
BUILT = {"yolo": 373, "ocr": 231, "vad": 67}
NODES = {"yolo": 309, "ocr": 231, "vad": 41}


def partitioned(m: RealModel) -> collections.Counter:
    """(op_type, name) of the nodes a host shows an EP: the model's, less its Constant nodes."""
    return collections.Counter((n.op_type, n.name) for n in m.model.graph.node if n.op_type != "Constant")


@pytest.fixture(scope="module")
def model_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("real_models")
    paths = {}
    for m in MODELS:
        paths[m.name] = folder / f"{m.name}.onnx"
        onnx.save(m.model, str(paths[m.name]))
    return paths


@pytest.fixture(scope="module")
def cpu_ep() -> Callable[[RealModel, dict[str, np.ndarray]], list[np.ndarray]]:
    """Outputs of the in-process onnxruntime's CPU EP (default optimizations) for a model and inputs."""
    ort = pytest.importorskip("onnxruntime")
    sessions: dict[str, Any] = {}

    def run(m: RealModel, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        if m.name not in sessions:
            sessions[m.name] = ort.InferenceSession(m.model.SerializeToString(), providers=["CPUExecutionProvider"])
        return sessions[m.name].run(None, feeds)

    return run


def output_names(m: RealModel) -> list[str]:
    return [o.name for o in m.model.graph.output]


def output_shapes(m: RealModel, feeds: dict[str, np.ndarray], cpu: list[np.ndarray]) -> dict[str, list[int]]:
    return {name: list(v.shape) for name, v in zip(output_names(m), cpu)}


def assert_matches_cpu(m: RealModel, got: list[np.ndarray] | dict[str, np.ndarray], expected: list[np.ndarray],
                       what: str) -> None:
    values = [got[n] for n in output_names(m)] if isinstance(got, dict) else got
    assert len(values) == len(expected), what
    for name, g, e in zip(output_names(m), values, expected):
        assert g.shape == e.shape and g.dtype == e.dtype == np.float32, (what, name, g.shape, e.shape, g.dtype)
        assert np.isfinite(g).all(), f"{what}: {name} has NaN or inf"
        np.testing.assert_allclose(g, e, rtol=m.rtol, atol=m.atol, err_msg=f"{what}: output {name}")


# -- the models themselves ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("m", MODELS, ids=IDS)
def test_models_have_the_exporters_structure(m: RealModel) -> None:
    ops = op_counts(m.model)
    assert len(m.model.graph.node) == BUILT[m.name] and sum(partitioned(m).values()) == NODES[m.name]
    assert {op: ops[op] for op in m.ops} == m.ops, dict(ops)
    inferred = onnx.shape_inference.infer_shapes(m.model, strict_mode=True)
    assert len(inferred.graph.value_info) >= len(m.model.graph.node) - len(m.model.graph.output)


def test_model_details() -> None:
    """The attributes and inputs that make the structures real: those are what a kernel could get wrong."""
    nodes = {m.name: list(m.model.graph.node) for m in MODELS}
    inits = {m.name: {t.name for t in m.model.graph.initializer} for m in MODELS}
    attrs = {name: [{a.name: onnx.helper.get_attribute_value(a) for a in n.attribute} | {"op": n.op_type,
                                                                                            "inputs": list(n.input)}
                    for n in ns] for name, ns in nodes.items()}
    yolo_resize = [a for a in attrs["yolo"] if a["op"] == "Resize"]
    assert all(a["mode"] == b"nearest" and a["coordinate_transformation_mode"] == b"asymmetric"
               and a["inputs"][1] == "" for a in yolo_resize)
    assert [a["kernel_shape"] for a in attrs["yolo"] if a["op"] == "MaxPool"] == [[5, 5]] * 3
    assert [a["axis"] for a in attrs["yolo"] if a["op"] == "Softmax"] == [1]
    ocr_resize = [a for a in attrs["ocr"] if a["op"] == "Resize"]
    assert sorted((a["mode"], a["coordinate_transformation_mode"]) for a in ocr_resize) == \
        [(b"linear", b"pytorch_half_pixel")] * 3 + [(b"nearest", b"asymmetric")] * 3
    assert all(a["inputs"][1] in inits["ocr"] for a in ocr_resize if a["mode"] == b"nearest")  # the empty roi
    assert [(a["alpha"], a["beta"]) for a in attrs["ocr"] if a["op"] == "HardSigmoid"] == [(np.float32(0.2), 0.5)] * 8
    assert sum(1 for a in attrs["ocr"] if a["op"] == "Conv" and a.get("group", 1) > 1) == 15  # depthwise
    lstm = [a for a in attrs["vad"] if a["op"] == "LSTM"]
    assert [a.get("direction", b"forward") for a in lstm] == [b"bidirectional", b"forward"]
    assert [a["inputs"][4] for a in lstm] == ["", ""]   # no sequence_lens, as PyTorch exports it
    assert sorted(a["mode"] for a in attrs["vad"] if a["op"] == "Pad") == [b"constant", b"constant", b"reflect"]


# -- real onnxruntime ---------------------------------------------------------------------------------------------

@pytest.mark.real_ort
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("version", HOSTS)
@pytest.mark.parametrize("m", MODELS, ids=IDS)
def test_real_ort_runs_every_node_on_our_ep(m: RealModel, version: str, level: str, library_path: str,
                                           model_files: dict[str, Path], cpu_ep: Callable, tmp_path: Path) -> None:
    feeds = m.feeds(1)
    result, outputs, err = run_on_real_ort(version, library_path, model_files[m.name], feeds, level, tmp_path)
    placement = assert_all_on_our_ep(result, version, err)
    if level == "disable_all":
        assert placed(placement) == partitioned(m)
    else:
        assert len(placement) == m.default_nodes[version], collections.Counter(n["op_type"] for n in placement)
        # ORT's rewrites only remove nodes (folded into constants or into the Conv before them)
        assert not collections.Counter(n["op_type"] for n in placement) - op_counts(m.model)
    assert result["output_names"] == output_names(m)
    assert_matches_cpu(m, outputs, cpu_ep(m, feeds), f"onnxruntime {version}, {level}")


@pytest.mark.real_ort
@pytest.mark.parametrize("version", CAPTURE_HOSTS)
@pytest.mark.parametrize("m", MODELS, ids=IDS)
def test_real_ort_captures_and_replays(m: RealModel, version: str, library_path: str, model_files: dict[str, Path],
                                       cpu_ep: Callable, tmp_path: Path) -> None:
    """Call 0 warms up twice and captures; calls 1-3 are one ReplayGraph each on inputs updated in place, and
    every call's outputs equal the CPU EP's for that call's inputs. The VAD model's dynamic batch also gets a
    second annotation id at batch 3, captured and replayed beside the first."""
    first = m.feeds(1)
    plan = Plan(CAPTURE, memory_for(version))
    plan.bind("b", first, output_shapes(m, first, cpu_ep(m, first)))
    plan.call("b", 1)
    later = [plan.call("b", 1, **m.feeds(seed)) for seed in (2, 3, 4)]
    other: list[int] = []
    if m.name == "vad":
        third = _audio(5, 3)
        plan.bind("b3", third, output_shapes(m, third, cpu_ep(m, third)))
        other = [plan.call("b3", 2), plan.call("b3", 2, **_audio(6, 3))]
    out = plan.run(version, library_path, model_files[m.name], tmp_path)
    assert_claimed_all(out.stderr)
    for k in range(len(plan.calls)):
        assert_matches_cpu(m, out.outputs[k], cpu_ep(m, plan.inputs_at(k)), f"onnxruntime {version}, call {k}")
    name = output_names(m)[0]
    assert not np.allclose(out.outputs[0][name], out.outputs[1][name])  # the updates reached the replay
    assert count(out.logs[0], ANOTHER_RUN) == 2, out.logs[0][-3000:]
    assert count(out.logs[0], "capturing graph of annotation id 1 on this thread after 2 regular run(s)") == 1
    assert count(out.logs[0], "replayed annotation id 1 once right after capture") == 0  # executed while recording
    assert [replays(out.logs[k], 1) for k in later] == [[1], [2], [3]], out.stderr[-4000:]
    for k in later:
        assert count(out.logs[k], "capturing graph") == 0 and count(out.logs[k], ANOTHER_RUN) == 0
    if other:
        assert count(out.logs[other[0]], "capturing graph of annotation id 2 on this thread after 2 ") == 1
        assert replays(out.logs[other[1]], 2) == [1]
    assert count(out.stderr, ALLOC_WARNING) == 0


# -- epabi's host -------------------------------------------------------------------------------------------------

def _host(api: str | int, library_path: str) -> epabi.Host:
    host = epabi.Host(api_version=api, hardware=[epabi.cpu_device()])
    host.register_execution_provider_library("epabi", library_path)
    return host


def _our_session(host: epabi.Host, m: RealModel, devices: list[epabi.EpDevice] | None = None,
                 **options: str) -> epabi.InferenceSession:
    so = epabi.SessionOptions()
    so.add_provider_for_devices(devices or host.get_ep_devices(), options)
    session = epabi.InferenceSession(m.model, so)
    off = {n: ep for n, ep in session.node_assignment.items() if ep != EP}
    assert off == {}, f"nodes left to the CPU: {off}"
    assert collections.Counter((n.op_type, n.name) for n in session.graph.nodes) == partitioned(m)
    assert len(session.node_assignment) == NODES[m.name]
    return session


@pytest.mark.parametrize("api", API_VERSIONS)
@pytest.mark.parametrize("m", MODELS, ids=IDS)
def test_epabi_host_runs_every_node_on_our_ep(m: RealModel, api: str | int, library_path: str,
                                             software_adapter: None, cpu_ep: Callable) -> None:
    with _host(api, library_path) as host, _our_session(host, m) as session:
        for seed in (1, 2):
            feeds = m.feeds(seed)
            assert_matches_cpu(m, session.run(None, feeds), cpu_ep(m, feeds), f"epabi host API {api}, seed {seed}")


def _trace_count(host: epabi.Host, mark: int, name: str) -> int:
    return host.trace[mark:].count(name)


@pytest.mark.parametrize("api", CAPTURE_APIS)
@pytest.mark.parametrize("m", MODELS, ids=IDS)
def test_epabi_host_captures_and_replays(m: RealModel, api: int, library_path: str, software_adapter: None,
                                         cpu_ep: Callable, monkeypatch: pytest.MonkeyPatch) -> None:
    first = m.feeds(1)
    # host memory needs API 30 (KernelContext_GetPreallocatedOutput); API 26 captures in the adapter's own memory
    place: tuple = ()
    if api != epabi.NEWEST_EMULATED and int(api) < 30:
        monkeypatch.setenv("EPABI_SOFTWARE_DEVICE_MEMORY", "device")
        place = ("cuda", 0)
    with _host(api, library_path) as host, _our_session(host, m, enable_cuda_graph="1") as session:
        assert session.graph_capture.enabled
        binding = session.io_binding()
        ins = {k: epabi.OrtValue.ortvalue_from_numpy(v, *place, host=host) for k, v in first.items()}
        outs = {k: epabi.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, *place, host=host)
                for k, shape in output_shapes(m, first, cpu_ep(m, first)).items()}
        for k, v in ins.items():
            binding.bind_ortvalue_input(k, v)
        for k, v in outs.items():
            binding.bind_ortvalue_output(k, v)
        mark = len(host.trace)
        session.run_with_iobinding(binding)  # two warm-up runs and the capture, inside the first call
        assert _trace_count(host, mark, "OrtEp::OnRunStart") == 3
        assert_matches_cpu(m, {k: v.numpy() for k, v in outs.items()}, cpu_ep(m, first), "capturing call")
        for seed in (2, 3, 4):
            feeds = m.feeds(seed)
            for k, v in feeds.items():
                ins[k].update_inplace(v)
            for v in outs.values():
                v.update_inplace(np.full(v.shape(), np.nan, np.float32))
            mark = len(host.trace)
            session.run_with_iobinding(binding)
            assert _trace_count(host, mark, "OrtEp::ReplayGraph") == 1
            assert _trace_count(host, mark, "OrtNodeComputeInfo::Compute") == 0
            assert_matches_cpu(m, {k: v.numpy() for k, v in outs.items()}, cpu_ep(m, feeds), f"replay, seed {seed}")
        assert session.graph_capture.replays == 3
        del binding, ins, outs  # device values go before the session and the host


# -- the GPU EP device (-m gpu) ------------------------------------------------------------------------------------

# argv: library, model, spec.json, output folder. spec: {"outputs": {name: shape}, "calls": [{input: npy}]}. Our GPU
# EP device with enable_cuda_graph=1; inputs and outputs in its memory, bound once, updated in place per call
# (outputs poisoned with NaN first); gpu_graph_id 1; markers around each call on stderr (the VERBOSE session log).
GPU_CAPTURE_SCRIPT = """
import gc
import os

import numpy as np

lib, model, spec_path, out_dir = sys.argv[1:]
with open(spec_path) as f:
    spec = json.load(f)


def run(device):
    # everything of the session lives in this frame, so none of it outlives the library (values our allocator
    # made would be freed after unregistering it)
    so = ort.SessionOptions()
    so.log_severity_level = 0
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    so.add_provider_for_devices([device], {"enable_cuda_graph": "1"})
    sess = ort.InferenceSession(model, sess_options=so, enable_fallback=0)
    placement = [sub.ep_name for sub in sess.get_provider_graph_assignment_info() for node in sub.get_nodes()]
    first = {k: np.load(p) for k, p in spec["calls"][0].items()}
    ins = {k: ort.OrtValue.ortvalue_from_numpy(v, "cuda", 0) for k, v in first.items()}
    outs = {k: ort.OrtValue.ortvalue_from_shape_and_type(s, np.float32, "cuda", 0) for k, s in spec["outputs"].items()}
    io = sess.io_binding()
    for k, v in ins.items():
        io.bind_ortvalue_input(k, v)
    for k, v in outs.items():
        io.bind_ortvalue_output(k, v)
    ro = ort.RunOptions()
    ro.add_run_config_entry("gpu_graph_id", "1")
    for k, call in enumerate(spec["calls"]):
        for name, path in call.items():
            ins[name].update_inplace(np.load(path))
        for v in outs.values():
            v.update_inplace(np.full(v.shape(), np.nan, np.float32))
        sys.stderr.write(f"\\nEPABI-CALL {k}\\n")
        sys.stderr.flush()
        sess.run_with_iobinding(io, ro)
        sys.stderr.write(f"\\nEPABI-CALL-END {k}\\n")
        sys.stderr.flush()
        for name, v in outs.items():
            np.save(os.path.join(out_dir, f"call{k}_{name}.npy"), v.numpy())
    devices = sorted({v.device_name() for v in [*ins.values(), *outs.values()]})
    return dict(providers=sess.get_providers(), placement=placement, devices=devices)


ort.register_execution_provider_library("epabi", lib)
gpus = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME and dict(d.ep_metadata).get("device_kind") == "gpu"]
if not gpus:
    emit(skip="onnxruntime lists no GPU EP device of ours (it found no GPU hardware device)",
         devices=[describe(d) for d in ort.get_ep_devices()])
    sys.exit(0)
result = run(gpus[0])
del gpus
gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(ort_version=ort.__version__, **result)
"""

#: GPU tolerances: the CUDA kernels' own summation order and NVRTC's expf/tanhf/logf (a few ulps from glibc's).
GPU_TOL = {"rtol": 1e-4, "atol": 1e-3}


def _gpu_or_skip() -> None:
    if epabi.hardware.cuda_gpu_count() == 0:
        pytest.skip("no NVIDIA GPU with a working driver")


def _assert_gpu_matches(m: RealModel, got: dict[str, np.ndarray], expected: list[np.ndarray], what: str) -> None:
    for name, e in zip(output_names(m), expected):
        assert got[name].shape == e.shape and np.isfinite(got[name]).all(), (what, name)
        np.testing.assert_allclose(got[name], e, **GPU_TOL, err_msg=f"{what}: output {name}")


@pytest.mark.gpu
@pytest.mark.parametrize("m", MODELS, ids=IDS)
def test_gpu_real_ort_captures_and_replays(m: RealModel, library_path: str, model_files: dict[str, Path],
                                           cpu_ep: Callable, tmp_path: Path) -> None:
    """The interpreter's own onnxruntime (1.26+) on our GPU EP device: every node ours, the first call captures,
    the next three are one replay each on inputs updated in place, all equal to the CPU EP."""
    _gpu_or_skip()
    if importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("onnxruntime is not installed in this interpreter")
    import onnxruntime as ort

    if tuple(int(p) for p in re.findall(r"\d+", ort.__version__)[:2]) < (1, 26):
        pytest.skip(f"onnxruntime {ort.__version__} has no graph capture for plugin EPs (1.26+)")
    calls = [m.feeds(seed) for seed in (1, 2, 3, 4)]
    spec: dict[str, Any] = {"outputs": output_shapes(m, calls[0], cpu_ep(m, calls[0])), "calls": []}
    for k, feeds in enumerate(calls):
        spec["calls"].append({})
        for name, v in feeds.items():
            np.save(tmp_path / f"in{k}_{name}.npy", v)
            spec["calls"][-1][name] = str(tmp_path / f"in{k}_{name}.npy")
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    result, err = run_json_on_gpu(GPU_CAPTURE_SCRIPT, [library_path, str(model_files[m.name]),
                                                       str(tmp_path / "spec.json"), str(tmp_path)])
    assert result["providers"][0] == EP, f"silent CPU fallback: {result['providers']}"
    assert result["placement"] and set(result["placement"]) == {EP}, collections.Counter(result["placement"])
    assert result["devices"] == ["cuda"]
    logs = [re.search(rf"^EPABI-CALL {k}$(.*?)^EPABI-CALL-END {k}$", err, re.S | re.M) for k in range(len(calls))]
    assert all(logs), err[-4000:]
    for k, feeds in enumerate(calls):
        got = {n: np.load(tmp_path / f"call{k}_{n}.npy") for n in output_names(m)}
        _assert_gpu_matches(m, got, cpu_ep(m, feeds), f"onnxruntime {result['ort_version']} GPU, call {k}")
    assert count(logs[0].group(1), "capturing graph of annotation id 1 on this thread after 2 regular run(s)") == 1
    assert [replays(logs[k].group(1), 1) for k in (1, 2, 3)] == [[2], [3], [4]], err[-4000:]


@pytest.mark.gpu
@pytest.mark.parametrize("m", MODELS, ids=IDS)
def test_gpu_epabi_host_captures_and_replays(m: RealModel, library_path: str, cpu_ep: Callable,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _gpu_or_skip()
    monkeypatch.setenv("EPABI_CUDA_DISCOVERY", "1")
    monkeypatch.delenv("EPABI_ALLOW_SOFTWARE_ADAPTER", raising=False)
    with epabi.Host() as host:
        host.register_execution_provider_library("epabi", library_path)
        gpus = [d for d in host.get_ep_devices() if d.ep_name == EP and d.ep_metadata.get("device_kind") == "gpu"]
        assert gpus, f"the plugin lists no GPU EP device: {host.get_ep_devices()}"
        first = m.feeds(1)
        for graph in (False, True):
            with _our_session(host, m, gpus[:1], enable_cuda_graph="1" if graph else "0") as session:
                binding = session.io_binding()
                ins = {k: epabi.OrtValue.ortvalue_from_numpy(v, "cuda", 0, host=host) for k, v in first.items()}
                outs = {k: epabi.OrtValue.ortvalue_from_shape_and_type(s, np.float32, "cuda", 0, host=host)
                        for k, s in output_shapes(m, first, cpu_ep(m, first)).items()}
                for k, v in ins.items():
                    binding.bind_ortvalue_input(k, v)
                for k, v in outs.items():
                    binding.bind_ortvalue_output(k, v)
                for seed in (1, 2, 3, 4):
                    feeds = m.feeds(seed)
                    for k, v in feeds.items():
                        ins[k].update_inplace(v)
                    for v in outs.values():
                        v.update_inplace(np.full(v.shape(), np.nan, np.float32))
                    mark = len(host.trace)
                    session.run_with_iobinding(binding)
                    if graph and seed > 1:
                        assert _trace_count(host, mark, "OrtEp::ReplayGraph") == 1
                        assert _trace_count(host, mark, "OrtNodeComputeInfo::Compute") == 0
                    _assert_gpu_matches(m, {k: v.numpy() for k, v in outs.items()}, cpu_ep(m, feeds),
                                        f"epabi host GPU, graph={graph}, seed {seed}")
                assert session.graph_capture.enabled == graph
                if graph:
                    assert session.graph_capture.replays == 3
                del binding, ins, outs, v  # device memory goes back before the session and the library do
