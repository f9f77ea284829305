"""EPABI_CALLBACK_TIMING (native/callback_timing.h): the plugin times every callback the host makes and writes the
calls to a file when the EP is released; bench/replay_gap.py splits a replay through onnxruntime with it.

Through real onnxruntime (1.26.0, whose replays end without OrtEp::Sync, and NEWEST, where Sync follows each
ReplayGraph) and epabi's host, on the software adapter: the calls of each Python-side run lie inside that run's
window on the same clock, the first call executes (OnRunStart, Compute, OnRunEnd) and every later one is a
replay (IsGraphCaptured, one ReplayGraph with its phases, Sync where the host makes it), the outputs stay those of
onnx.reference, and an EP created without the variable writes nothing. The bench's split adds up to its wall time.
A ``gpu`` variant runs the bench on the GPU EP device.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import epabi
from epabi.models import mlp
from real_ort import NEWEST, run_json
from test_real_ort_capture import memory_for

CALLS = 6
PHASES = ("launch_ns", "wait_ns", "error_check_ns", "profiler_ns")

# argv: library, model, folder, memory ("host" or "device"). Inputs x<k>.npy; writes y<k>.npy and windows.npy
# (monotonic ns before and after each call); a second session, created after the variable is unset, runs once.
SCRIPT = """
import gc
import os
import time

import numpy as np

lib, model_path, folder, memory = sys.argv[1:]
ort.register_execution_provider_library("epabi", lib)
ours = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
place = ("cuda", 0) if memory == "device" else ()


def session():
    so = ort.SessionOptions()
    so.add_provider_for_devices(ours, {"enable_cuda_graph": "1"})
    return ort.InferenceSession(model_path, sess_options=so, enable_fallback=0)


sess = session()
x = ort.OrtValue.ortvalue_from_numpy(np.load(os.path.join(folder, "x0.npy")), *place)
y = ort.OrtValue.ortvalue_from_numpy(np.zeros((1, 64), np.float32), *place)
io = sess.io_binding()
io.bind_ortvalue_input("x", x)
io.bind_ortvalue_output("y", y)
windows = []
for k in range(int(os.environ["CALLS"])):
    x.update_inplace(np.load(os.path.join(folder, f"x{k}.npy")))
    a = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    sess.run_with_iobinding(io)
    windows.append((a, time.clock_gettime_ns(time.CLOCK_MONOTONIC)))
    np.save(os.path.join(folder, f"y{k}.npy"), y.numpy())
np.save(os.path.join(folder, "windows.npy"), np.array(windows, np.int64))
providers = sess.get_providers()
del sess, io, x, y
gc.collect()
lines_after_first = len(open(os.environ["EPABI_CALLBACK_TIMING"]).read().splitlines())
timing = os.environ.pop("EPABI_CALLBACK_TIMING")
untimed = session()
untimed.run(None, {"x": np.load(os.path.join(folder, "x0.npy"))})
del untimed
gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(providers=providers, lines_after_first=lines_after_first, lines_at_end=len(open(timing).read().splitlines()))
"""


def _check_calls(lines: list[dict[str, Any]], windows: np.ndarray, sync_after_replay: bool) -> None:
    """The recorded calls against the runs' windows: what each run called, in order, inside its window."""
    (released,) = [e for e in lines if e.get("released")]
    calls = [e for e in lines if "cb" in e]
    assert released["events"] == len(calls) and released["dropped"] == 0, released
    assert len({e["ep"] for e in lines}) == 1
    for e in calls:
        assert e["start_ns"] <= e["end_ns"], e
    # the callbacks of runs happen inside the runs; outside them only the session's setup asks IsGraphCaptureEnabled
    for e in calls:
        if not any(a <= e["start_ns"] and e["end_ns"] <= b for a, b in windows):
            assert e["cb"] == "IsGraphCaptureEnabled", e
    for k, (a, b) in enumerate(windows):
        inside = sorted((e for e in calls if a <= e["start_ns"] and e["end_ns"] <= b), key=lambda e: e["start_ns"])
        names = [e["cb"] for e in inside]
        if k == 0:  # two warm-up runs and the capture, in one call
            assert names.count("OnRunStart") == 3 and names.count("OnRunEnd") == 3, names
            assert names.count("Compute") == 3 and "ReplayGraph" not in names, names
            continue
        assert names.count("ReplayGraph") == 1 and "Compute" not in names and "OnRunStart" not in names, names
        assert names[0] == "IsGraphCaptured", names
        replay = next(e for e in inside if e["cb"] == "ReplayGraph")
        assert all(replay[p] >= 0 for p in PHASES) and replay["launch_ns"] > 0, replay
        assert sum(replay[p] for p in PHASES) <= replay["end_ns"] - replay["start_ns"], replay
        assert replay["profiler_ns"] == 0, replay  # the session does not profile
        later = names[names.index("ReplayGraph") + 1:]
        assert ("Sync" in later) == sync_after_replay, names
        for before, after in zip(inside, inside[1:]):
            assert before["end_ns"] <= after["start_ns"], (before, after)  # one thread, one call at a time


@pytest.mark.real_ort
@pytest.mark.parametrize("version", ["1.26.0", NEWEST])
def test_callbacks_of_captures_and_replays_under_onnxruntime(version: str, tmp_path: Path) -> None:
    model = mlp()
    (tmp_path / "mlp.onnx").write_bytes(model.SerializeToString())
    rng = np.random.default_rng(7)
    feeds = [rng.standard_normal((1, 64)).astype(np.float32) for _ in range(CALLS)]
    for k, feed in enumerate(feeds):
        np.save(tmp_path / f"x{k}.npy", feed)
    memory = memory_for(version)
    timing = tmp_path / "calls.jsonl"
    env = {"EPABI_ALLOW_SOFTWARE_ADAPTER": "1", "EPABI_CALLBACK_TIMING": str(timing), "CALLS": str(CALLS)}
    if memory == "device":
        env["EPABI_SOFTWARE_DEVICE_MEMORY"] = "device"
    result, _, _ = run_json(version, SCRIPT, env, [epabi.get_library_path(), str(tmp_path / "mlp.onnx"),
                                                    str(tmp_path), memory])
    assert result["providers"][0] == "EpAbiExecutionProvider", result
    reference = ReferenceEvaluator(model)
    for k, feed in enumerate(feeds):
        np.testing.assert_allclose(np.load(tmp_path / f"y{k}.npy"), reference.run(None, {"x": feed})[0], rtol=1e-4,
                                   atol=1e-5, err_msg=f"call {k}")
    # the session created without the variable appended nothing
    assert result["lines_at_end"] == result["lines_after_first"]
    lines = [json.loads(line) for line in timing.read_text().splitlines()]
    _check_calls(lines, np.load(tmp_path / "windows.npy"), sync_after_replay=version != "1.26.0")


def test_callbacks_of_captures_and_replays_under_epabis_host(host: epabi.Host, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    timing = tmp_path / "calls.jsonl"
    monkeypatch.setenv("EPABI_CALLBACK_TIMING", str(timing))
    model = mlp()
    reference = ReferenceEvaluator(model)
    rng = np.random.default_rng(8)
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {"enable_cuda_graph": "1"})
    windows = []
    with epabi.InferenceSession(model, so) as session:
        x = epabi.OrtValue.ortvalue_from_numpy(np.zeros((1, 64), np.float32))
        y = epabi.OrtValue.ortvalue_from_shape_and_type([1, 64], np.float32)
        binding = session.io_binding()
        binding.bind_ortvalue_input("x", x)
        binding.bind_ortvalue_output("y", y)
        for k in range(CALLS):
            feed = rng.standard_normal((1, 64)).astype(np.float32)
            x.update_inplace(feed)
            a = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            session.run_with_iobinding(binding)
            windows.append((a, time.clock_gettime_ns(time.CLOCK_MONOTONIC)))
            np.testing.assert_allclose(y.numpy(), reference.run(None, {"x": feed})[0], rtol=1e-4, atol=1e-5,
                                       err_msg=f"call {k}")
        assert session.graph_capture.replays == CALLS - 1
    lines = [json.loads(line) for line in timing.read_text().splitlines()]
    _check_calls(lines, np.array(windows), sync_after_replay=host.behaviour.syncs_after_replay)


def _bench() -> Any:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import replay_gap

    return replay_gap


def _check_split(result: dict[str, Any], runs: int) -> None:
    assert result["replays"] == runs, result
    parts = result["parts_us"]
    pieces = parts["before"] + parts["between"] + parts["after"] + sum(
        v for k, v in parts.items() if k[:1].isupper() and " " not in k)
    assert pieces == pytest.approx(result["wall_mean_us"], rel=1e-6), result
    assert parts["host"] + parts["graph"] + parts["ours"] == pytest.approx(result["wall_mean_us"], rel=1e-6)
    assert parts["ReplayGraph calls"] == 1 and parts["ReplayGraph launch"] > 0, parts


@pytest.mark.real_ort
def test_replay_gap_bench_adds_up_on_the_software_adapter() -> None:
    """bench/replay_gap.py under this interpreter's onnxruntime (1.30+: host memory), every timed run a replay."""
    ort = pytest.importorskip("onnxruntime")
    if tuple(int(p) for p in ort.__version__.split(".")[:2]) < (1, 30):
        pytest.skip(f"onnxruntime {ort.__version__}: replays in host memory need 1.30+")
    result = _bench().measure("mlp8", 40, "software", {}, warmup=5)
    assert result["device"] == "software", result
    _check_split(result, 40)


@pytest.mark.gpu
def test_replay_gap_bench_adds_up_on_the_gpu() -> None:
    if epabi.hardware.cuda_gpu_count() == 0:
        pytest.skip("no NVIDIA GPU with a working driver")
    pytest.importorskip("onnxruntime")
    result = _bench().measure("mlp8", 200, "gpu", {}, warmup=20)
    if "skip" in result:
        pytest.skip(result["skip"])
    _check_split(result, 200)
    assert result["graph_nodes"] >= 1 and result["graph_alone_us"] > 0, result
