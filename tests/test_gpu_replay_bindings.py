"""tests/test_replay_bindings.py and tests/test_real_ort_replay_rules.py on the GPU EP device (skipped without an
NVIDIA GPU): stale replays refused in device memory, ``recapture``, state bound as both input and output advancing
once per call (epabi's host at any min_num_runs_before_cuda_graph_capture; the interpreter's onnxruntime with 0),
and one annotation id per buffer set under onnxruntime.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import onnx
import pytest

import epabi

pytestmark = pytest.mark.gpu

if epabi.hardware.cuda_gpu_count() == 0:
    pytest.skip("no NVIDIA GPU with a working driver", allow_module_level=True)

from test_gpu_cuda import _bind, _device, _gpu_device, _poison, _session  # noqa: E402
from test_graph_capture import _add_model, _calls, _matmul_model, _run_opts  # noqa: E402
from test_replay_bindings import POLICY, _policy, state_model  # noqa: E402

X = np.arange(6, dtype=np.float32).reshape(3, 2)
Y = np.full((3, 2), 10, np.float32)


def test_gpu_new_device_input_is_refused_then_recaptured(gpu_host: epabi.Host) -> None:
    with _session(gpu_host, _add_model()) as session:
        binding, ins, outs = _bind(session, {"x": X, "y": Y}, {"z": [3, 2]})
        session.run_with_iobinding(binding)
        np.testing.assert_allclose(outs["z"].numpy(), X + Y)
        moved = _device(gpu_host, X * 4)
        binding.bind_ortvalue_input("x", moved)
        _poison(outs["z"])
        mark = len(gpu_host.trace)
        with pytest.raises(epabi.StaleReplayError) as info:
            session.run_with_iobinding(binding)
        assert info.value.changes == [("input 'x'", "address", hex(ins["x"].data_ptr()), hex(moved.data_ptr()))]
        assert _calls(gpu_host, mark, "OrtEp::ReplayGraph") == 0
        assert np.isnan(outs["z"].numpy()).all()
        session.run_with_iobinding(binding, _policy("recapture"))  # released, warmed up and captured on `moved`
        np.testing.assert_allclose(outs["z"].numpy(), X * 4 + Y)
        moved.update_inplace(X * 6)
        _poison(outs["z"])
        mark = len(gpu_host.trace)
        session.run_with_iobinding(binding)
        assert _calls(gpu_host, mark, "OrtEp::ReplayGraph") == 1
        np.testing.assert_allclose(outs["z"].numpy(), X * 6 + Y)


def test_gpu_new_shape_under_one_id_is_refused(gpu_host: epabi.Host) -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    with _session(gpu_host, _matmul_model()) as session:
        binding, _, outs = _bind(session, {"A": a, "B": b}, {"C": [2, 4]})
        session.run_with_iobinding(binding, _run_opts("3"))
        np.testing.assert_allclose(outs["C"].numpy(), a @ b, rtol=1e-4, atol=1e-4)
        big, _, big_outs = _bind(session, {"A": np.ones((6, 3), np.float32), "B": b}, {"C": [6, 4]})
        with pytest.raises(epabi.StaleReplayError, match=r"input 'A': address .*shape \[2, 3\] -> \[6, 3\]"):
            session.run_with_iobinding(big, _run_opts("3"))
        session.run_with_iobinding(big, _run_opts("4"))  # its own id: correct
        np.testing.assert_allclose(big_outs["C"].numpy(), np.ones((6, 3), np.float32) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("min_runs", [0, 2])
def test_gpu_state_bound_as_input_and_output_advances_once_per_call(gpu_host: epabi.Host, min_runs: int) -> None:
    start = np.array([0, 10, -5, 2.5], np.float32)
    with _session(gpu_host, state_model(), min_num_runs_before_cuda_graph_capture=str(min_runs)) as session:
        state = _device(gpu_host, start)
        binding = session.io_binding()
        binding.bind_ortvalue_input("state", state)
        binding.bind_ortvalue_output("state_out", state)
        for k in range(1, 5):
            session.run_with_iobinding(binding)
            np.testing.assert_allclose(state.numpy(), start + k, err_msg=f"call {k}")
        assert session.graph_capture.replays == 3


def test_gpu_recapture_policy_from_the_session_config(gpu_host: epabi.Host) -> None:
    so = epabi.SessionOptions()
    so.add_session_config_entry(POLICY, "recapture")
    so.add_provider_for_devices([_gpu_device(gpu_host)], {"enable_cuda_graph": "1"})
    with epabi.InferenceSession(_add_model(), so) as session:
        first, _, first_outs = _bind(session, {"x": X, "y": Y}, {"z": [3, 2]})
        second, _, second_outs = _bind(session, {"x": X * 3, "y": Y}, {"z": [3, 2]})
        for _ in range(2):
            session.run_with_iobinding(first)
            session.run_with_iobinding(second)
        np.testing.assert_allclose(first_outs["z"].numpy(), X + Y)
        np.testing.assert_allclose(second_outs["z"].numpy(), X * 3 + Y)


# -- the interpreter's onnxruntime --------------------------------------------------------------------------------

# argv: library, state model, min runs, matmul model. On our GPU EP device: one device OrtValue bound as state and
# state_out (the state after each of 4 calls), then two buffer sets under ids 1 and 2 and a third under id 1.
REAL_ORT_SCRIPT = """
import gc

import numpy as np

lib, state_path, min_runs, matmul_path = sys.argv[1:]
ort.register_execution_provider_library("epabi", lib)
gpus = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME and dict(d.ep_metadata).get("device_kind") == "gpu"]
if not gpus:
    emit(skip="onnxruntime lists no GPU EP device of ours (it found no GPU hardware device)",
         devices=[describe(d) for d in ort.get_ep_devices()])
    sys.exit(0)


def session(path):
    so = ort.SessionOptions()
    options = {"enable_cuda_graph": "1", "min_num_runs_before_cuda_graph_capture": min_runs}
    so.add_provider_for_devices(gpus[:1], options)
    return ort.InferenceSession(path, sess_options=so, enable_fallback=0)


def run(sess, io, gid):
    ro = ort.RunOptions()
    ro.add_run_config_entry("gpu_graph_id", str(gid))
    sess.run_with_iobinding(io, ro)


def main():
    sess = session(state_path)
    providers = sess.get_providers()
    state = ort.OrtValue.ortvalue_from_numpy(np.zeros(4, np.float32), "cuda", 0)
    io = sess.io_binding()
    io.bind_ortvalue_input("state", state)
    io.bind_ortvalue_output("state_out", state)
    after = []
    for _ in range(4):
        run(sess, io, 1)
        after.append(state.numpy().tolist())
    rng = np.random.default_rng(0)
    sess = session(matmul_path)
    sets = []
    for _ in range(3):
        a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
        va, vb = ort.OrtValue.ortvalue_from_numpy(a, "cuda", 0), ort.OrtValue.ortvalue_from_numpy(b, "cuda", 0)
        vc = ort.OrtValue.ortvalue_from_numpy(np.full((2, 4), np.nan, np.float32), "cuda", 0)
        io = sess.io_binding()
        io.bind_ortvalue_input("A", va)
        io.bind_ortvalue_input("B", vb)
        io.bind_ortvalue_output("C", vc)
        sets.append((a, b, va, vb, vc, io))
    errors = []
    for step in range(3):
        for gid, (a, b, va, vb, vc, io) in zip((1, 2), sets):
            a = a * (step + 1)
            va.update_inplace(a)
            run(sess, io, gid)
            errors.append(float(np.abs(vc.numpy() - a @ b).max()))
    run(sess, sets[2][5], 1)  # a third buffer set under id 1: ORT replays the first set's graph
    stale_nan = bool(np.isnan(sets[2][4].numpy()).all())
    del sess, io, state, sets
    return providers, after, errors, stale_nan


providers, after, errors, stale_nan = main()
gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(ort_version=ort.__version__, providers=providers, after=after, errors=errors, stale_nan=stale_nan)
"""


def test_gpu_real_onnxruntime_replay_rules(library_path: str, tmp_path: Path) -> None:
    """Under the interpreter's onnxruntime (>= 1.26) on our GPU EP device, with min_num_runs_before_cuda_graph_capture
    0: state bound as input and output advances once per call; two buffer sets under ids 1 and 2 replay correctly;
    a third set under id 1 is a stale replay (its output never written)."""
    if importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("onnxruntime is not installed in this interpreter")
    import onnxruntime as ort

    if tuple(int(p) for p in re.findall(r"\d+", ort.__version__)[:2]) < (1, 26):
        pytest.skip(f"onnxruntime {ort.__version__} has no graph capture for plugin EPs (1.26+)")
    from real_ort import run_json_on_gpu

    onnx.save(state_model(), str(tmp_path / "state.onnx"))
    onnx.save(_matmul_model(), str(tmp_path / "matmul.onnx"))
    result, err = run_json_on_gpu(REAL_ORT_SCRIPT, [library_path, str(tmp_path / "state.onnx"), "0",
                                                    str(tmp_path / "matmul.onnx")])
    assert result["providers"][0] == "EpAbiExecutionProvider", f"silent CPU fallback: {result['providers']}"
    assert result["after"] == [[float(k)] * 4 for k in range(1, 5)], result["after"]
    assert max(result["errors"]) < 1e-4, result["errors"]
    assert result["stale_nan"], err[-4000:]
