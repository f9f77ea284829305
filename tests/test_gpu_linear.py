"""Linear steps on the GPU (skipped without an NVIDIA GPU and driver): each MatMul/Gemm + bias + activation group is
one kernel (native/cuda/cuda_launch_linear.c) with the values of ONNX Runtime's CPU EP, graphs off and on, through
epabi's host and through the interpreter's onnxruntime (1.26+ for graphs; 1.32.0 in the test extra).

Which kernel runs: the plan's path from the static extents (kernels/linear.h): the small kernel (linear_nn_R /
linear_nt_R) for M <= 16 and K x N <= 1M weights, else cuBLASLt with a bias/ReLU epilogue (one kernel) where its
epilogues fit, else a GEMM and linear_epilogue_f32 (two). :func:`expected_kernels` states those rules; a replay's
kernel count is the captured graph's node count (cuGraphGetNodes), from the plugin's INFO line "captured graph of
annotation id N: K launch(es)".
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import epabi
from epabi.models import mlp, sample_inputs
from gpu_devices import gpu_ep_device as _gpu
from linear_models import CAPTURED, COMPILED, Case, empty_case_list, mlp_case_list, ort_cpu

pytestmark = pytest.mark.gpu

EP = "EpAbiExecutionProvider"
TOL = {"rtol": 1e-4, "atol": 1e-4}
SMALL_ROWS, SMALL_K, SMALL_N, SMALL_WEIGHTS = 16, 4096, 4096, 1 << 20   # launch_args.h EPABI_LINEAR_SMALL_*

if epabi.hardware.cuda_gpu_count() == 0:
    pytest.skip("no NVIDIA GPU with a working driver", allow_module_level=True)


def _rows(case: Case) -> int:
    shape = case.a_shape if case.a_shape is not None else (case.m, case.k)
    return math.prod(shape[:-1]) if len(shape) >= 2 else 1


def expected_kernels(case: Case, cublaslt: bool) -> tuple[int, int]:
    """The fewest and most kernels one group runs on the GPU (cuda_launch_linear.c's rules): one for the small kernel
    and for cuBLASLt with an epilogue; past them cuBLAS's GEMM (one kernel, or two when it splits K) and the epilogue
    kernel when there is a C or an activation."""
    m, k, n = _rows(case), case.k, case.n
    weights_fit = k <= SMALL_K and n <= SMALL_N and k * n <= SMALL_WEIGHTS
    if weights_fit and m <= SMALL_ROWS:  # static M, or a symbolic one whose run has few rows
        return 1, 1
    if case.lead == "Gemm" and case.c is not None:
        c_rows, c_cols = {"vector": (1, n), "matrix": (m, n), "column": (m, 1)}[case.c]
        beta = case.beta
        has_c = beta != 0.0
    elif case.bias is not None:
        c_rows, c_cols, beta, has_c = 1, (1 if case.bias == "scalar" else n), 1.0, True
    else:
        c_rows, c_cols, beta, has_c = 0, 0, 0.0, False
    vector = has_c and c_rows == 1 and c_cols == n and beta == 1.0
    matrix = has_c and not vector and c_rows == m and c_cols == n
    if cublaslt and case.activation in (None, "Relu") and (not has_c or vector or matrix):
        return 1, 1
    epilogue = int(has_c or case.activation is not None)
    return 1 + epilogue, 2 + epilogue


def _cublaslt_loaded(records: list[logging.LogRecord]) -> bool:
    lines = [r.getMessage() for r in records if "CUDA backend on GPU" in r.getMessage()]
    assert lines, "no CUDA backend line in the plugin's log"
    return "cuBLASLt not loaded" not in lines[0]


def _launches(messages: list[str]) -> list[int]:
    return [int(m.group(2)) for m in (CAPTURED.search(t) for t in messages) if m]


@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("case", mlp_case_list(), ids=lambda c: c.id)
def test_group_on_the_gpu_matches_ort_cpu(gpu_host: epabi.Host, caplog: pytest.LogCaptureFixture, case: Case,
                                          graphs: bool) -> None:
    model, feeds, out_shape = case.build(seed=3)
    expected = ort_cpu(model, feeds)
    so = epabi.SessionOptions()
    so.add_provider_for_devices([_gpu(gpu_host)], {"enable_cuda_graph": "1" if graphs else "0", "fused_gemm": "1"})
    with caplog.at_level(logging.DEBUG, logger="epabi"), epabi.InferenceSession(model, so) as session:
        assert set(session.node_assignment.values()) == {EP}, session.node_assignment
        binding = session.io_binding()
        x = epabi.OrtValue.ortvalue_from_numpy(feeds["x"], "cuda", 0, host=gpu_host)
        y = epabi.OrtValue.ortvalue_from_shape_and_type(out_shape, np.float32, "cuda", 0, host=gpu_host)
        binding.bind_ortvalue_input("x", x)
        binding.bind_ortvalue_output("y", y)
        for call in range(3):
            y.update_inplace(np.full(out_shape, np.nan, np.float32))  # a replay that writes nothing cannot pass
            session.run_with_iobinding(binding)
            np.testing.assert_allclose(y.numpy(), expected, **TOL, err_msg=f"call {call}")
        if graphs:
            assert session.graph_capture.replays >= 2
    messages = [r.getMessage() for r in caplog.records]
    summaries = [(int(m.group(1)), int(m.group(2)), int(m.group(3))) for m in map(COMPILED.search, messages) if m]
    assert summaries == [(1, 1, case.folded)]
    if graphs:
        low, high = expected_kernels(case, _cublaslt_loaded(caplog.records))
        (launches,) = _launches(messages)
        assert low <= launches <= high, (launches, low, high)


@pytest.mark.parametrize("case", empty_case_list(), ids=lambda c: c.id)
def test_empty_operands_on_the_gpu(gpu_host: epabi.Host, case: Case) -> None:
    """K = 0 runs the epilogue kernel alone (BLAS reads neither A nor B), M = 0 nothing; session.run (host inputs,
    copied by the host) rather than bound device values, since these inputs have no bytes."""
    model, feeds, _ = case.build(seed=5)
    so = epabi.SessionOptions()
    so.add_provider_for_devices([_gpu(gpu_host)], {"enable_cuda_graph": "0", "fused_gemm": "1"})
    with epabi.InferenceSession(model, so) as session:
        assert set(session.node_assignment.values()) == {EP}, session.node_assignment
        (got,) = session.run(None, feeds)
    expected = ort_cpu(model, feeds)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, **TOL)


@pytest.mark.parametrize("layers", [8, 32])
def test_mlp_replays_one_kernel_per_layer(gpu_host: epabi.Host, caplog: pytest.LogCaptureFixture,
                                          layers: int) -> None:
    model = mlp(layers=layers, width=64, batch=1)
    feeds = sample_inputs(model, seed=6)
    expected = ort_cpu(model, feeds)
    counts = {}
    for fused in ("1", "0"):
        caplog.clear()
        so = epabi.SessionOptions()
        so.add_provider_for_devices([_gpu(gpu_host)], {"enable_cuda_graph": "1", "fused_gemm": fused})
        with caplog.at_level(logging.INFO, logger="epabi"), epabi.InferenceSession(model, so) as session:
            binding = session.io_binding()
            x = epabi.OrtValue.ortvalue_from_numpy(feeds["x"], "cuda", 0, host=gpu_host)
            y = epabi.OrtValue.ortvalue_from_shape_and_type([1, 64], np.float32, "cuda", 0, host=gpu_host)
            binding.bind_ortvalue_input("x", x)
            binding.bind_ortvalue_output("y", y)
            for _ in range(3):
                session.run_with_iobinding(binding)
                np.testing.assert_allclose(y.numpy(), expected, **TOL)
        (counts[fused],) = _launches([r.getMessage() for r in caplog.records])
    assert counts["1"] == layers, counts
    assert counts["0"] > layers, counts  # cuBLAS and the bias+ReLU kernel per layer


# A child process (the CUDA libraries load once per process): EPABI_CUBLASLT=0, the groups cuBLASLt would take run
# cuBLAS and the epilogue kernel. argv: tests folder, output folder, case indices into mlp_case_list().
NO_CUBLASLT_SCRIPT = """
import json, logging, os, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import epabi
from linear_models import CAPTURED, mlp_case_list
out_dir, indices = sys.argv[2], [int(i) for i in sys.argv[3:]]
lines = []
class Keep(logging.Handler):
    def emit(self, record):
        lines.append(record.getMessage())
logging.getLogger("epabi").addHandler(Keep())
logging.getLogger("epabi").setLevel(logging.INFO)
cases = mlp_case_list()
launches = {}
with epabi.Host() as host:
    host.register_execution_provider_library("epabi", epabi.get_library_path())
    gpu = [d for d in host.get_ep_devices() if d.ep_metadata.get("device_kind") == "gpu"][0]
    for i in indices:
        model, feeds, shape = cases[i].build(seed=3)
        so = epabi.SessionOptions()
        so.add_provider_for_devices([gpu], {"enable_cuda_graph": "1", "fused_gemm": "1"})
        mark = len(lines)
        with epabi.InferenceSession(model, so) as session:
            b = session.io_binding()
            x = epabi.OrtValue.ortvalue_from_numpy(feeds["x"], "cuda", 0, host=host)
            y = epabi.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, "cuda", 0, host=host)
            b.bind_ortvalue_input("x", x)
            b.bind_ortvalue_output("y", y)
            for call in range(2):
                session.run_with_iobinding(b)
                np.save(os.path.join(out_dir, f"{i}_{call}.npy"), y.numpy())
        launches[i] = [int(m.group(2)) for m in map(CAPTURED.search, lines[mark:]) if m]
backend = [t for t in lines if "CUDA backend on GPU" in t]
print("RESULT " + json.dumps({"launches": launches, "backend": backend[:1]}))
"""


def test_without_cublaslt_the_gemm_path_gives_the_same_values(tmp_path: Path) -> None:
    cases = mlp_case_list()
    picked = [i for i, c in enumerate(cases) if _rows(c) > SMALL_ROWS and c.activation in (None, "Relu")]
    assert picked, "no case past the small kernel with a cuBLASLt epilogue"
    proc = subprocess.run([sys.executable, "-c", NO_CUBLASLT_SCRIPT, str(Path(__file__).parent), str(tmp_path),
                           *map(str, picked)], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "EPABI_CUBLASLT": "0", "EPABI_CUDA_DISCOVERY": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(next(t for t in proc.stdout.splitlines() if t.startswith("RESULT "))[7:])
    assert result["backend"] and "cuBLASLt not loaded" in result["backend"][0], result["backend"]
    for i in picked:
        model, feeds, _ = cases[i].build(seed=3)
        expected = ort_cpu(model, feeds)
        for call in range(2):
            np.testing.assert_allclose(np.load(tmp_path / f"{i}_{call}.npy"), expected, **TOL,
                                       err_msg=f"{cases[i].id} call {call}")
        low, high = expected_kernels(cases[i], cublaslt=False)
        (launches,) = result["launches"][str(i)]
        assert low <= launches <= high, (cases[i].id, launches, low, high)


# -- real onnxruntime ---------------------------------------------------------------------------------------------

# argv: library, output folder, then MODEL.onnx:X.npy pairs. Each model runs on our GPU EP device with graphs off and
# on (3 calls each, IOBinding in the EP's device memory, gpu_graph_id 1), between stderr markers; outputs of every
# call go to <folder>/<i>_<graphs>_<call>.npy.
REAL_ORT_SCRIPT = """
import gc
import os

import numpy as np

lib, out_dir, *pairs = sys.argv[1:]
ort.set_default_logger_severity(0)
ort.register_execution_provider_library("epabi", lib)
gpus = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME and dict(d.ep_metadata).get("device_kind") == "gpu"]
if not gpus:
    emit(skip="onnxruntime lists no GPU EP device of ours (it found no GPU hardware device)",
         devices=[describe(d) for d in ort.get_ep_devices()])
    sys.exit(0)
graph_modes = ["0", "1"] if tuple(int(p) for p in ort.__version__.split(".")[:2]) >= (1, 26) else ["0"]
providers = []
for i, pair in enumerate(pairs):
    model, x_path = pair.split(":")
    x_host = np.load(x_path)
    for graphs in graph_modes:
        so = ort.SessionOptions()
        so.log_severity_level = 0
        so.add_provider_for_devices(gpus[:1], {"enable_cuda_graph": graphs, "fused_gemm": "1"})
        sys.stderr.write(f"\\nEPABI-MODEL {i} {graphs}\\n")
        sys.stderr.flush()
        sess = ort.InferenceSession(model, sess_options=so, enable_fallback=0)
        providers.append(sess.get_providers()[0])
        out_shape = [int(d) for d in np.load(os.path.join(out_dir, f"{i}_shape.npy"))]
        x = ort.OrtValue.ortvalue_from_numpy(x_host, "cuda", 0)
        y = ort.OrtValue.ortvalue_from_shape_and_type(out_shape, np.float32, "cuda", 0)
        io = sess.io_binding()
        io.bind_ortvalue_input("x", x)
        io.bind_ortvalue_output(sess.get_outputs()[0].name, y)
        ro = ort.RunOptions()
        ro.add_run_config_entry("gpu_graph_id", "1")
        for call in range(3):
            y.update_inplace(np.full(out_shape, np.nan, np.float32))
            sess.run_with_iobinding(io, ro)
            np.save(os.path.join(out_dir, f"{i}_{graphs}_{call}.npy"), y.numpy())
        del sess, so, io, x, y
        gc.collect()
        sys.stderr.write(f"\\nEPABI-MODEL-END {i} {graphs}\\n")
        sys.stderr.flush()
ort.unregister_execution_provider_library("epabi")
emit(ort_version=ort.__version__, providers=providers, graph_modes=graph_modes)
"""

REAL_ORT_CASES = [Case(16, 1024, 1024, "Relu"), Case(3, 17, 33, "Sigmoid"), Case(64, 512, 256, "Tanh"),
                  Case(5, 30, 20, "GeluTanh"), Case(1, 1, 1, "Gelu"),
                  Case(3, 17, 33, "Relu", lead="Gemm", bias=None, c="vector", trans_b=True, alpha=0.5, beta=2.0),
                  Case(64, 512, 256, None, lead="Gemm", bias=None, c="vector", trans_b=True)]


def test_real_onnxruntime_runs_the_groups_on_the_gpu(library_path: str, tmp_path: Path) -> None:
    """The interpreter's onnxruntime (its MatMulAddFusion makes MatMul + Add a Gemm) runs each group and an 8-layer
    MLP on our GPU EP device: the values of its CPU EP on every call, graphs off and on; a replay of the MLP runs one
    kernel per layer, one of a single-group model one kernel, or cuBLAS and the epilogue kernel (Sigmoid/Tanh/Gelu
    past the small kernel, where cuBLASLt has no epilogue)."""
    if importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("onnxruntime is not installed in this interpreter")
    from real_ort import run_json_on_gpu

    models: list[tuple[onnx.ModelProto, dict[str, np.ndarray], list[int]]] = [c.build(seed=4) for c in REAL_ORT_CASES]
    mlp_model = mlp(layers=8, width=64, batch=1)
    models.append((mlp_model, sample_inputs(mlp_model, seed=9), [1, 64]))
    args = [library_path, str(tmp_path)]
    for i, (model, feeds, shape) in enumerate(models):
        onnx.save(model, tmp_path / f"{i}.onnx")
        np.save(tmp_path / f"{i}_x.npy", feeds["x"])
        np.save(tmp_path / f"{i}_shape.npy", np.array(shape, np.int64))
        args.append(f"{tmp_path / f'{i}.onnx'}:{tmp_path / f'{i}_x.npy'}")
    result, err = run_json_on_gpu(REAL_ORT_SCRIPT, args)
    assert set(result["providers"]) == {EP}, result["providers"]
    for i, (model, feeds, _) in enumerate(models):
        expected = ort_cpu(model, feeds)
        for graphs in result["graph_modes"]:
            for call in range(3):
                got = np.load(tmp_path / f"{i}_{graphs}_{call}.npy")
                np.testing.assert_allclose(got, expected, **TOL, err_msg=f"model {i} graphs={graphs} call {call}")
            match = re.search(rf"^EPABI-MODEL {i} {graphs}$(.*?)^EPABI-MODEL-END {i} {graphs}$", err, re.S | re.M)
            assert match, f"no log markers for model {i}:\n{err[-4000:]}"
            if graphs == "1":
                launches = _launches(match.group(1).splitlines())
                if i == len(models) - 1:
                    assert launches == [8], launches
                else:  # one kernel, or cuBLAS (one or two) and the epilogue kernel where cuBLASLt has no epilogue
                    assert len(launches) == 1 and 1 <= launches[0] <= 3, (i, launches)
