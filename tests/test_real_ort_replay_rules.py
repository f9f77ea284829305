"""The replay rules README states for real onnxruntime, shown on the software adapter (issue 10, items 2 and 4).

ORT hands the plugin no bindings at a replay, so neither it nor the plugin can see that a run's buffers are
not the captured ones: a replay reads and writes the buffers of the run that captured its annotation id. The
remedy is one ``gpu_graph_id`` per shape or buffer set: each id captures its own set once and replays it
correctly (test 1, which also shows the stale replay ORT makes when a second set reuses an id).

State bound as both an input and an output (one OrtValue): ORT executes the first call of an id
min_num_runs_before_cuda_graph_capture + 1 times (warm-up runs, then the capture, inside the call), each
advancing the state; with ``min_num_runs_before_cuda_graph_capture=0`` ORT captures on the first execution,
the software adapter executes it once while recording (and does not replay it on top), and every call advances
the state once (test 2). epabi's host advances it once at any setting (tests/test_replay_bindings.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from real_ort import run_json
from test_real_ort_capture import (
    ATOL,
    CAPTURE,
    CAPTURE_HOSTS,
    SOFTWARE,
    Plan,
    assert_claimed_all,
    matmul_model,
    memory_for,
    rand,
)
from test_replay_bindings import state_model

pytestmark = pytest.mark.real_ort


@pytest.fixture(scope="module")
def model_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    files = {"matmul": folder / "matmul.onnx", "state": folder / "state.onnx"}
    onnx.save(matmul_model(), str(files["matmul"]))
    onnx.save(state_model(), str(files["state"]))
    return files


@pytest.mark.parametrize("version", CAPTURE_HOSTS)
def test_one_id_per_buffer_set_replays_correctly(version: str, library_path: str, model_files: dict[str, Path],
                                                 tmp_path: Path) -> None:
    """Buffer sets a and b ([2,3]@[3,4]) and c ([4,5]@[5,6]) under ids 1, 2 and 3, in turn, inputs updated in place:
    every output is right. Set d ([2,3]@[3,4], other buffers) run under id 1 afterwards replays a's graph: d's
    output buffer is never written (NaN) - the stale replay epabi's host refuses."""
    plan = Plan(CAPTURE, memory_for(version))
    shapes = {"a": ((2, 3), (3, 4)), "b": ((2, 3), (3, 4)), "c": ((4, 5), (5, 6)), "d": ((2, 3), (3, 4))}
    for name, (sa, sb) in shapes.items():
        plan.bind(name, {"A": rand(*sa), "B": rand(*sb)}, {"C": [sa[0], sb[1]]})
    ids = {"a": 1, "b": 2, "c": 3}
    for rnd in range(3):
        for name, gid in ids.items():
            sa, sb = shapes[name]
            plan.call(name, gid, **({} if rnd == 0 else {"A": rand(*sa), "B": rand(*sb)}))
    stale = plan.call("d", 1)
    out = plan.run(version, library_path, model_files["matmul"], tmp_path)
    assert_claimed_all(out.stderr)
    for k in range(stale):
        ins = plan.inputs_at(k)
        np.testing.assert_allclose(out.outputs[k]["C"], ins["A"] @ ins["B"], rtol=0, atol=ATOL, err_msg=f"call {k}")
    for gid in ids.values():  # each id captured once, in its first call
        assert sum(f"capturing graph of annotation id {gid} " in line for line in out.stderr.splitlines()) == 1
    assert "ReplayGraph replayed annotation id 1" in out.logs[stale]
    assert np.isnan(out.outputs[stale]["C"]).all(), out.outputs[stale]["C"]


# argv: library, state model, min_num_runs_before_cuda_graph_capture, calls, memory ("host", or "device": the
# software adapter's own memory, which capture needs before onnxruntime 1.30). One OrtValue bound as state and
# state_out; the state after each call.
ALIAS_SCRIPT = """
import gc

import numpy as np

lib, model_path, min_runs, calls, memory = sys.argv[1:]
place = ("cuda", 0) if memory == "device" else ()
ort.register_execution_provider_library("epabi", lib)
ours = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
so = ort.SessionOptions()
so.add_provider_for_devices(ours, {"enable_cuda_graph": "1", "min_num_runs_before_cuda_graph_capture": min_runs})
sess = ort.InferenceSession(model_path, sess_options=so, enable_fallback=0)
providers = sess.get_providers()
state = ort.OrtValue.ortvalue_from_numpy(np.zeros(4, np.float32), *place)
io = sess.io_binding()
io.bind_ortvalue_input("state", state)
io.bind_ortvalue_output("state_out", state)
ro = ort.RunOptions()
ro.add_run_config_entry("gpu_graph_id", "1")
after = []
for _ in range(int(calls)):
    sess.run_with_iobinding(io, ro)
    after.append(state.numpy().tolist())
del sess, so, ours, io, state
gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(ort_version=ort.__version__, providers=providers, after=after)
"""


@pytest.mark.parametrize("min_runs", [0, 2])
@pytest.mark.parametrize("version", CAPTURE_HOSTS)
def test_aliased_state_advances_once_per_call_with_min_runs_0(version: str, min_runs: int, library_path: str,
                                                              model_files: dict[str, Path]) -> None:
    """min 0: each call advances the state once (capture on the first execution, replays after). min 2 (the
    default): the first call advances it 3 times (2 warm-up executions and the capturing one), later calls once;
    README says to use 0 for such state under onnxruntime."""
    memory = memory_for(version)
    env = {**SOFTWARE, "EPABI_SOFTWARE_DEVICE_MEMORY": memory}
    result, _, _ = run_json(version, ALIAS_SCRIPT, env, [library_path, str(model_files["state"]), str(min_runs), "4",
                                                         memory], timeout=300)
    assert result["ort_version"] == version and result["providers"][0] == "EpAbiExecutionProvider"
    first = 1 + min_runs
    assert result["after"] == [[float(first + k)] * 4 for k in range(4)], result["after"]
