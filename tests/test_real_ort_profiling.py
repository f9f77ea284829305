"""The plugin's profile events under REAL onnxruntime (``OrtEp::CreateProfiler``, hosts >= 1.25).

A script in the release's venv builds a session on the software adapter with ``enable_profiling`` (graph
optimizations off, so the fused node holds the model's 8 nodes), runs the MLP once per call of
``CALLS`` (each a ``gpu_graph_id``; with graphs, through IOBinding and inputs updated in place) and ends profiling;
the test parses ORT's JSON (tests/profile_checks.py): each fused node's Compute, each capture and each replay is an
EP event with the right name, annotation id and node count, a positive duration, in order, inside ORT's own
event that enclosed it. Every call's output is compared with onnx.reference.

1.24.4 (no ``CreateProfiler`` in its OrtEp) runs the same session and its profile has no EP event; graphs need
1.26+ (``enable_cuda_graph=1``); 1.26.0 and NEWEST are checked. A ``gpu`` variant runs this interpreter's onnxruntime on
the GPU EP device.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

from epabi.models import mlp
from profile_checks import EP_EVENTS, check_profile, expected_events
from real_ort import MIN, NEWEST, run_json, run_json_on_gpu
from test_real_ort_capture import memory_for

pytestmark = pytest.mark.real_ort

SOFTWARE = {"EPABI_ALLOW_SOFTWARE_ADAPTER": "1"}
#: gpu_graph_id per call: two ids captured and replayed, a never-captured run (-1) between them.
CALLS = [0, 0, 0, 1, 1, -1, 0]
MLP_NODES = 8

# argv: library, model, spec.json, folder. spec: {"graph": bool, "calls": [id...]}; inputs x<k>.npy per call.
# Writes y<k>.npy per call; emits the profile's path, the pid and thread id, the providers.
PROFILE_SCRIPT = """
import gc
import os
import threading

import numpy as np

lib, model_path, spec_path, folder = sys.argv[1:]
with open(spec_path) as f:
    spec = json.load(f)
gpu = spec.get("gpu", False)
ort.register_execution_provider_library("epabi", lib)
ours = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
if gpu:
    ours = [d for d in ours if dict(d.ep_metadata).get("device_kind") == "gpu"][:1]
    if not ours:
        emit(skip="onnxruntime lists no GPU EP device of ours", devices=[describe(d) for d in ort.get_ep_devices()])
        sys.exit(0)
place = ("cuda", 0) if gpu or spec.get("device_memory") else ()
so = ort.SessionOptions()
so.enable_profiling = True
so.profile_file_prefix = os.path.join(folder, "profile")
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
so.add_provider_for_devices(ours, {"enable_cuda_graph": "1"} if spec["graph"] else {})
sess = ort.InferenceSession(model_path, sess_options=so, enable_fallback=0)
providers = sess.get_providers()
x = ort.OrtValue.ortvalue_from_numpy(np.load(os.path.join(folder, "x0.npy")), *place)
y = ort.OrtValue.ortvalue_from_numpy(np.zeros((1, 64), np.float32), *place)
io = sess.io_binding()
io.bind_ortvalue_input("x", x)
io.bind_ortvalue_output("y", y)
for k, gid in enumerate(spec["calls"]):
    feed = np.load(os.path.join(folder, f"x{k}.npy"))
    if spec["graph"]:
        x.update_inplace(feed)
        ro = ort.RunOptions()
        ro.add_run_config_entry("gpu_graph_id", str(gid))
        sess.run_with_iobinding(io, ro)
        out = y.numpy()
    else:
        (out,) = sess.run(None, {"x": feed})
    np.save(os.path.join(folder, f"y{k}.npy"), out)
path = sess.end_profiling()
again = sess.end_profiling()
start_ns = sess.get_profiling_start_time_ns()
del sess, so, ours, io, x, y
gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(path=path, again=again, pid=os.getpid(), tid=threading.get_native_id(), providers=providers, start_ns=start_ns)
"""


def _run(version: str | None, graph: bool, folder: Path) -> tuple[list[dict], dict]:
    """The script under onnxruntime ``version`` on the software adapter, or (None) under this interpreter's
    onnxruntime on the GPU EP device."""
    model = mlp()
    (folder / "mlp.onnx").write_bytes(model.SerializeToString())
    rng = np.random.default_rng(3)
    feeds = [rng.standard_normal((1, 64)).astype(np.float32) for _ in CALLS]
    for k, feed in enumerate(feeds):
        np.save(folder / f"x{k}.npy", feed)
    # graph capture in host memory needs onnxruntime 1.30 (README "Graph capture"): older hosts bind the software
    # adapter's own memory
    device_memory = version is not None and graph and memory_for(version) == "device"
    (folder / "spec.json").write_text(json.dumps({"graph": graph, "calls": CALLS, "gpu": version is None,
                                                  "device_memory": device_memory}))
    args = [_library(), str(folder / "mlp.onnx"), str(folder / "spec.json"), str(folder)]
    if version is None:
        result, _ = run_json_on_gpu(PROFILE_SCRIPT, args)
    else:
        env = {**SOFTWARE, "EPABI_SOFTWARE_DEVICE_MEMORY": "device"} if device_memory else SOFTWARE
        result, _, _ = run_json(version, PROFILE_SCRIPT, env, args)
    assert result["providers"][0] == "EpAbiExecutionProvider", f"silent CPU fallback: {result['providers']}"
    reference = ReferenceEvaluator(model)
    for k, feed in enumerate(feeds):
        (want,) = reference.run(None, {"x": feed})
        np.testing.assert_allclose(np.load(folder / f"y{k}.npy"), want, rtol=1e-4, atol=1e-5, err_msg=f"call {k}")
    path = Path(result["path"])
    assert path.parent == folder and path.name.startswith("profile_") and path.suffix == ".json", path
    assert result["again"] == ""  # profiling ended: a second end_profiling writes nothing
    assert result["start_ns"] > 0
    return json.loads(path.read_text()), result


def _library() -> str:
    import epabi

    return epabi.get_library_path()


@pytest.mark.parametrize("version", [NEWEST])
def test_each_compute_is_an_ep_event_in_orts_profile(version: str, tmp_path: Path) -> None:
    profile, result = _run(version, False, tmp_path)
    check_profile(profile, expected_events(CALLS, graph=False), MLP_NODES, result["pid"], result["tid"])


@pytest.mark.parametrize("version", ["1.26.0", NEWEST])
def test_captures_and_replays_are_ep_events_in_orts_profile(version: str, tmp_path: Path) -> None:
    profile, result = _run(version, True, tmp_path)
    check_profile(profile, expected_events(CALLS, graph=True), MLP_NODES, result["pid"], result["tid"])


def test_a_host_before_1_25_profiles_without_ep_events(tmp_path: Path) -> None:
    """ORT 1.24.4's OrtEp ends before CreateProfiler: the plugin leaves it unset there and the session profiles
    (its own node events of our fused node) and computes as on newer hosts."""
    profile, _ = _run(MIN, False, tmp_path)
    assert [ev for ev in profile if ev["name"] in EP_EVENTS or ev["cat"] == "Kernel"] == []
    nodes = [ev for ev in profile if ev["cat"] == "Node" and ev["args"].get("provider") == "EpAbiExecutionProvider"]
    assert len(nodes) == len(CALLS)


@pytest.mark.gpu
@pytest.mark.parametrize("graph", [False, True])
def test_profile_on_the_gpu_under_onnxruntime(graph: bool, tmp_path: Path) -> None:
    """This interpreter's onnxruntime on the GPU EP device (bound values in its memory): the same events; a
    Compute's duration covers the GPU work (it ends with a stream synchronize outside captures)."""
    import epabi

    if epabi.hardware.cuda_gpu_count() == 0:
        pytest.skip("no NVIDIA GPU with a working driver")
    ort = pytest.importorskip("onnxruntime")
    release = tuple(int(p) for p in re.findall(r"\d+", ort.__version__)[:2])
    if release < ((1, 26) if graph else (1, 25)):
        pytest.skip(f"onnxruntime {ort.__version__}: EP profilers need 1.25+, graph capture for plugin EPs 1.26+")
    profile, result = _run(None, graph, tmp_path)
    check_profile(profile, expected_events(CALLS, graph=graph), MLP_NODES, result["pid"], result["tid"],
                  replayed_at_capture=True)
