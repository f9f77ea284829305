"""Unregistering our library from the interpreter's onnxruntime after a graph-captured session on the GPU EP device,
then letting the interpreter finalize and exit cleanly (skipped without an NVIDIA GPU).

Once seen on the H200 with onnxruntime 1.30.0 (bench/replay_gap.py's child, 2026-12-02, with EPABI_CALLBACK_TIMING
and EPABI_CUDA_GRAPH_TIMING set): SIGSEGV during interpreter finalization after
``unregister_execution_provider_library``. The next H200 run of this test (same variables, the MLP through io binding)
exited cleanly. The two cases here are that run and the bench child's own steps (``import epabi`` first, run options
with ``gpu_graph_id`` 1, a second model): each must print its result and exit 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

import epabi
from epabi.models import mlp
from real_ort import PRELUDE, host_env

pytestmark = pytest.mark.gpu

if epabi.hardware.cuda_gpu_count() == 0:
    pytest.skip("no NVIDIA GPU with a working driver", allow_module_level=True)

SCRIPT = """
import gc
import numpy as np
lib, models, like_bench = sys.argv[1], sys.argv[2].split(","), sys.argv[3] == "1"
if like_bench:
    import epabi
ort.register_execution_provider_library("epabi", lib)
gpus = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME and dict(d.ep_metadata).get("device_kind") == "gpu"]
if not gpus:
    emit(skip="onnxruntime lists no GPU EP device of ours")
    sys.exit(0)
ro = ort.RunOptions()
if like_bench:
    ro.add_run_config_entry("gpu_graph_id", "1")
for model in models:
    so = ort.SessionOptions()
    so.add_provider_for_devices(gpus[:1], {"enable_cuda_graph": "1"})
    session = ort.InferenceSession(model, so)
    x = ort.OrtValue.ortvalue_from_numpy(np.ones((1, 64), np.float32), "cuda", 0)
    y = ort.OrtValue.ortvalue_from_numpy(np.zeros((1, 64), np.float32), "cuda", 0)
    binding = session.io_binding()
    binding.bind_ortvalue_input("x", x)
    binding.bind_ortvalue_output("y", y)
    for _ in range(5):
        session.run_with_iobinding(binding, ro)
    del binding, x, y, session
gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(done=True)
"""


@pytest.mark.parametrize("like_bench", [False, True], ids=["io-binding", "as-replay-gap"])
def test_unregister_after_a_gpu_session_then_exit(library_path: str, tmp_path: Path, like_bench: bool) -> None:
    paths = []
    for layers in (8, 32) if like_bench else (8,):
        path = tmp_path / f"mlp{layers}.onnx"
        onnx.save(mlp(layers=layers, width=64, batch=1), str(path))
        paths.append(str(path))
    proc = subprocess.run([sys.executable, "-c", PRELUDE + SCRIPT, library_path, ",".join(paths),
                           "1" if like_bench else "0"], capture_output=True, text=True, timeout=300,
                          env=host_env({"EPABI_ALLOW_SOFTWARE_ADAPTER": "0", "EPABI_CUDA_DISCOVERY": "1",
                                        "EPABI_CALLBACK_TIMING": str(tmp_path / "calls.jsonl"),
                                        "EPABI_CUDA_GRAPH_TIMING": "5",
                                        # the bench's child imports epabi with the parent's path (its cffi)
                                        "PYTHONPATH": os.environ.get("PYTHONPATH") if like_bench else None}))
    if '"skip"' in proc.stdout:
        pytest.skip(proc.stdout.strip()[-300:])
    assert '"done": true' in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-3000:]}"
