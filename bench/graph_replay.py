"""Eager runs vs CUDA-graph replays on the GPU EP device: per-run microseconds, against the raw CUDA-graph floor.

Models: MLPs of 8 and 32 layers (width 64, batch 1, MatMul+Add+Relu; ``epabi.models.mlp``), magika's
standard_v3_3 (batch 1, when the ``magika`` package is installed), and the real-model structures of
``tests/real_models.py`` at their deployed sizes: a YOLOv8n-shaped detector (640x640, 80 classes; 309 nodes and
64 Constant nodes: C2f, SPPF, Resize, DFL) and a DBNet text detector (PP-OCR's MobileNetV3 scale 0.5 with
unfolded BatchNormalization, squeeze-excite, ConvTranspose; 640x640, 231 nodes); those two are timed over
``--model-runs`` runs. For each model, per-run medians of:

* our EP, eager (``enable_cuda_graph=0``) and replay (``enable_cuda_graph=1``, ``gpu_graph_id=1``), through
  epabi's emulated host and through real onnxruntime (when importable); inputs and outputs are bound once in the
  EP's device memory (``ortvalue_from_numpy(x, "cuda", 0)``), so a replay copies nothing;
* our captured graph alone and its kernels per replay (the graph's node count, cuGraphGetNodes), timed by the
  plugin itself (``EPABI_CUDA_GRAPH_TIMING``) in a child process;
* the floor (MLPs): ``bench/cuda_floor/mlp_graph.cu``, built here with ``nvcc`` into a temp dir, runs the unfused
  kernel sequence (per layer a cuBLAS sgemm and a bias-add+ReLU kernel) captured once into a CUDA graph, timed over
  N graph launches with a stream synchronisation after each;
* the fused floor (MLPs): ``bench/cuda_floor/fused_graph.cu`` runs the plan's fused sequence, one launch per layer
  of our own linear kernel (``native/cuda/cuda_kernels.cu`` compiled by NVRTC as the plugin compiles it, with the
  plugin's launch geometry), captured and timed the same way;
* PyTorch CUDA graphs (MLPs): ``torch.cuda.CUDAGraph`` of the same layers, replay + synchronise per run (and
  PyTorch eager, for reference).

* the split of a replay through real onnxruntime (``bench/replay_gap.py``, a child process per model): the host's
  time (Python binding and ORT's Run), our callbacks' and the graph's, and the graph alone as captured there;

Ratios: eager/replay per host, replay/floor and replay/fused floor for every replay, and replay/PyTorch's replay
(below 1: faster than PyTorch). A summary table at the end gives, per model, kernels per replay, our replay through
real onnxruntime, PyTorch's replay, the fused floor and those ratios. Each timing is a run + synchronisation as a
caller sees it (our EP syncs its stream at the end of a run; replays are followed by ``OrtEp::Sync``).
``--fused-gemm 0`` runs our sessions with the EP option ``fused_gemm=0`` (one step per node, as before linear
steps). Informational, not a test. Pieces that cannot run are skipped with the reason printed (no GPU: nothing
runs; no nvcc: no floors; no torch: no PyTorch rows; no onnxruntime: no real-onnxruntime rows), and the exit status
stays 0. ``python -m epabi bench`` runs this script (and exits 1 without a GPU).

    python bench/graph_replay.py [--runs 1000] [--model-runs 200] [--fused-gemm 1] [--json] [--keep-build DIR]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import epabi
from epabi.models import mlp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the builders the tests use too
from real_models import ocr_detector, yolo_detector  # noqa: E402

sys.path.insert(0, str(HERE))
import replay_gap  # noqa: E402

FLOOR_SOURCE = HERE / "cuda_floor" / "mlp_graph.cu"
FUSED_FLOOR_SOURCE = HERE / "cuda_floor" / "fused_graph.cu"
KERNELS_CU = HERE.parent / "native" / "cuda" / "cuda_kernels.cu"
LAUNCH_ARGS_H = HERE.parent / "native" / "kernels" / "launch_args.h"
WIDTH, BATCH, LAYERS = 64, 1, (8, 32)
DETECTOR_SIZE = 640
SKIPPED: list[str] = []
EP_OPTIONS: dict[str, str] = {}  # added to every session of ours (--fused-gemm)


def skip(what: str, why: str) -> None:
    SKIPPED.append(f"{what}: {why}")
    print(f"[skip] {what}: {why}", flush=True)


def median_us(call: Callable[[], None], runs: int, warmup: int = 50) -> float:
    for _ in range(warmup):
        call()
    times = np.empty(runs)
    for i in range(runs):
        t0 = time.perf_counter()
        call()
        times[i] = time.perf_counter() - t0
    return float(np.median(times) * 1e6)


def magika_model() -> Path | None:
    try:
        import magika
    except ImportError:
        return None
    path = Path(magika.__file__).parent / "models" / "standard_v3_3" / "model.onnx"
    return path if path.is_file() else None


def magika_input() -> np.ndarray:
    """magika's features of this file (first and last 1024 bytes, padded with 256): int32 [1, 2048]."""
    data = Path(__file__).read_bytes()
    beg, end = list(data[:4096].lstrip()[:1024]), list(data[-4096:].rstrip()[-1024:])
    return np.array([beg + [256] * (1024 - len(beg)) + [256] * (1024 - len(end)) + end], dtype=np.int32)


# -- our EP through epabi's emulated host -------------------------------------------------------------------------

def emulated(host: epabi.Host, device: epabi.EpDevice, model: Any, feeds: dict[str, np.ndarray],
             out_shape: list[int], graph: bool, runs: int) -> float:
    so = epabi.SessionOptions()
    so.add_provider_for_devices([device], {"enable_cuda_graph": "1" if graph else "0", **EP_OPTIONS})
    with epabi.InferenceSession(model, so) as session:
        off = [n for n, ep in session.node_assignment.items() if ep != epabi.get_ep_name()]
        if off:
            raise RuntimeError(f"{len(off)} node(s) stay on the CPU: {off[:5]}")
        binding = session.io_binding()
        values = {name: epabi.OrtValue.ortvalue_from_numpy(a, "cuda", 0, host=host) for name, a in feeds.items()}
        for name, v in values.items():
            binding.bind_ortvalue_input(name, v)
        out = epabi.OrtValue.ortvalue_from_shape_and_type(out_shape, np.float32, "cuda", 0, host=host)
        binding.bind_ortvalue_output(session.get_outputs()[0].name, out)
        ro = epabi.RunOptions()
        ro.add_run_config_entry("gpu_graph_id", "1")
        result = median_us(lambda: session.run_with_iobinding(binding, ro), runs)
        if graph and session.graph_capture.replays == 0:
            raise RuntimeError("enable_cuda_graph=1 but no run was a replay")
        return result


# -- our EP through real onnxruntime ------------------------------------------------------------------------------

def real_ort(ort: Any, device: Any, model: Any, feeds: dict[str, np.ndarray], out_shape: list[int], graph: bool,
             runs: int) -> float:
    so = ort.SessionOptions()
    so.add_provider_for_devices([device], {"enable_cuda_graph": "1" if graph else "0", **EP_OPTIONS})
    data = model.SerializeToString() if hasattr(model, "SerializeToString") else str(model)
    session = ort.InferenceSession(data, so, enable_fallback=0)
    if session.get_providers()[0] != epabi.get_ep_name():
        raise RuntimeError(f"onnxruntime fell back to {session.get_providers()}")
    binding = session.io_binding()
    values = {name: ort.OrtValue.ortvalue_from_numpy(a, "cuda", 0) for name, a in feeds.items()}
    for name, v in values.items():
        binding.bind_ortvalue_input(name, v)
    out = ort.OrtValue.ortvalue_from_shape_and_type(out_shape, np.float32, "cuda", 0)
    binding.bind_ortvalue_output(session.get_outputs()[0].name, out)
    ro = ort.RunOptions()
    ro.add_run_config_entry("gpu_graph_id", "1")
    return median_us(lambda: session.run_with_iobinding(binding, ro), runs)  # its values go with this frame


# -- our captured graph alone -------------------------------------------------------------------------------------

_GRAPH_ONLY = r"""
import json, sys, numpy as np, onnx, epabi
model = onnx.load(sys.argv[1]); feeds = dict(np.load(sys.argv[2])); shape = [int(d) for d in sys.argv[3].split(",")]
with epabi.Host() as host:
    host.register_execution_provider_library("epabi", epabi.get_library_path())
    gpu = [d for d in host.get_ep_devices() if d.ep_metadata.get("device_kind") == "gpu"][0]
    so = epabi.SessionOptions()
    so.add_provider_for_devices([gpu], {"enable_cuda_graph": "1", **json.loads(sys.argv[4])})
    with epabi.InferenceSession(model, so) as s:
        b = s.io_binding()
        vals = {k: epabi.OrtValue.ortvalue_from_numpy(v, "cuda", 0, host=host) for k, v in feeds.items()}
        for k, v in vals.items():
            b.bind_ortvalue_input(k, v)
        out = epabi.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, "cuda", 0, host=host)
        b.bind_ortvalue_output(s.get_outputs()[0].name, out)
        for _ in range(5):
            s.run_with_iobinding(b)
"""


def graph_only(model: Any, feeds: dict[str, np.ndarray], out_shape: list[int], runs: int) -> tuple[float, int]:
    """(microseconds, kernels) of our captured graph without any host: EPABI_CUDA_GRAPH_TIMING makes the plugin time
    `runs` launches of it (cuGraphLaunch + stream synchronisation each) at its first replay, in a child process, and
    print its node count (cuGraphGetNodes: the kernels a replay runs)."""
    import onnx

    with tempfile.TemporaryDirectory(prefix="epabi_graph_only_") as tmp:
        onnx.save(onnx.load(str(model)) if isinstance(model, (str, Path)) else model, f"{tmp}/model.onnx")
        np.savez(f"{tmp}/feeds.npz", **feeds)
        proc = subprocess.run([sys.executable, "-c", _GRAPH_ONLY, f"{tmp}/model.onnx", f"{tmp}/feeds.npz",
                               ",".join(map(str, out_shape)), json.dumps(EP_OPTIONS)], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "EPABI_CUDA_GRAPH_TIMING": str(runs)})
    for line in proc.stderr.splitlines():
        match = re.search(r"CUDA graph of (\d+) nodes: ([0-9.]+) us per launch", line)
        if match:
            return float(match.group(2)), int(match.group(1))
    raise RuntimeError(f"no graph timing from the plugin (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")


def gap_model(name: str) -> str:
    """bench/replay_gap.py's name of one of our models ('mlp 8x64 b1' -> 'mlp8', 'yolo 640 b1' -> 'yolo')."""
    words = name.split(" ")
    return words[0] + words[1].split("x")[0] if words[0] == "mlp" else words[0]


# -- the raw CUDA-graph floor -------------------------------------------------------------------------------------

def build_floor(build_dir: Path) -> Path | None:
    """Compiles mlp_graph.cu with nvcc (cuBLAS, else the simple GEMM; -arch=native, else nvcc's default)."""
    nvcc = shutil.which("nvcc") or next((str(p) for p in (Path("/usr/local/cuda/bin/nvcc"),) if p.is_file()), None)
    if nvcc is None:
        skip("CUDA-graph floor", "nvcc not found (PATH, /usr/local/cuda/bin)")
        return None
    exe = build_dir / "mlp_graph"
    errors = []
    for extra in (["-lcublas"], ["-DEPABI_SIMPLE_GEMM"]):
        for arch in (["-arch=native"], []):
            cmd = [nvcc, "-O3", "-std=c++17", *arch, str(FLOOR_SOURCE), "-o", str(exe), *extra]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode == 0:
                print(f"[build] {' '.join(cmd)}", flush=True)
                return exe
            errors.append(f"$ {' '.join(cmd)}\n{proc.stderr.strip()[-800:]}")
    skip("CUDA-graph floor", "nvcc could not build mlp_graph.cu:\n" + "\n".join(errors))
    return None


def build_fused_floor(build_dir: Path) -> Path | None:
    """Compiles fused_graph.cu with nvcc (-arch=native, else nvcc's default; NVRTC and the driver come by dlopen)."""
    nvcc = shutil.which("nvcc") or next((str(p) for p in (Path("/usr/local/cuda/bin/nvcc"),) if p.is_file()), None)
    if nvcc is None:
        skip("fused floor", "nvcc not found (PATH, /usr/local/cuda/bin)")
        return None
    exe = build_dir / "fused_graph"
    errors = []
    for arch in (["-arch=native"], []):
        cmd = [nvcc, "-O3", "-std=c++17", *arch, str(FUSED_FLOOR_SOURCE), "-o", str(exe), "-ldl"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0:
            print(f"[build] {' '.join(cmd)}", flush=True)
            return exe
        errors.append(f"$ {' '.join(cmd)}\n{proc.stderr.strip()[-800:]}")
    skip("fused floor", "nvcc could not build fused_graph.cu:\n" + "\n".join(errors))
    return None


def nvrtc_library() -> str:
    """The libnvrtc tools/check_nvrtc.py finds (EPABI_CUDA_LIB_DIR, the nvidia-* wheels, CUDA_HOME, ...)."""
    spec = importlib.util.spec_from_file_location("check_nvrtc", HERE.parent / "tools" / "check_nvrtc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.find_nvrtc(None))


def fused_floor_us(exe: Path, layers: int, runs: int) -> dict[str, Any] | None:
    proc = subprocess.run([str(exe), nvrtc_library(), str(KERNELS_CU), str(LAUNCH_ARGS_H), str(layers), str(WIDTH),
                           str(BATCH), str(runs), "50"], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        skip(f"fused floor, mlp {layers}", f"fused_graph exited {proc.returncode}: {proc.stderr.strip()[-800:]}")
        return None
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if result["max_abs_err"] > 1e-3:
        skip(f"fused floor, mlp {layers}", f"wrong output (max abs error {result['max_abs_err']})")
        return None
    return result


def floor_us(exe: Path, layers: int, runs: int) -> dict[str, Any] | None:
    proc = subprocess.run([str(exe), str(layers), str(WIDTH), str(BATCH), str(runs), "50"], capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0:
        skip(f"CUDA-graph floor, mlp {layers}", f"mlp_graph exited {proc.returncode}: {proc.stderr.strip()[-800:]}")
        return None
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if result["max_abs_err"] > 1e-3:
        skip(f"CUDA-graph floor, mlp {layers}", f"wrong output (max abs error {result['max_abs_err']})")
        return None
    return result


# -- PyTorch ------------------------------------------------------------------------------------------------------

def torch_mlp(torch: Any, layers: int, runs: int) -> tuple[float, float]:
    """(eager, CUDA-graph replay) per-run microseconds of the same MLP in PyTorch, synchronising after each run."""
    linears = [torch.nn.Linear(WIDTH, WIDTH).cuda().eval() for _ in range(layers)]

    def forward(x: Any) -> Any:
        for i, layer in enumerate(linears):
            x = layer(x)
            if i + 1 < layers:
                x = torch.relu(x)
        return x

    static_x = torch.randn(BATCH, WIDTH, device="cuda")
    with torch.inference_mode():
        def eager() -> None:
            forward(static_x)
            torch.cuda.synchronize()

        eager_us = median_us(eager, runs)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up on a side stream before capture, as PyTorch's docs do
            for _ in range(3):
                forward(static_x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = forward(static_x)

        def replay() -> None:
            graph.replay()
            torch.cuda.synchronize()

        replay_us = median_us(replay, runs)
        torch.testing.assert_close(static_y, forward(static_x))
    return eager_us, replay_us


# -- driver -------------------------------------------------------------------------------------------------------

def add_ratios(rows: dict[str, dict[str, float]]) -> None:
    """Adds every ratio key (README's table) a row's timings allow."""
    for row in rows.values():
        for host_name in ("epabi", "ort", "torch"):
            eager, replay = row.get(f"{host_name}_eager_us"), row.get(f"{host_name}_replay_us")
            if eager and replay:
                row[f"{host_name}_eager_over_replay"] = eager / replay
            if replay and row.get("floor_us"):
                row[f"{host_name}_replay_over_floor"] = replay / row["floor_us"]
            if replay and row.get("fused_floor_us"):
                row[f"{host_name}_replay_over_fused_floor"] = replay / row["fused_floor_us"]
            if replay and host_name != "torch" and row.get("torch_replay_us"):
                row[f"{host_name}_replay_over_torch_replay"] = replay / row["torch_replay_us"]
        graph = row.get("epabi_graph_only_us")
        if graph and row.get("floor_us"):
            row["graph_only_over_floor"] = graph / row["floor_us"]
        if graph and row.get("fused_floor_us"):
            row["graph_only_over_fused_floor"] = graph / row["fused_floor_us"]
        if graph and row.get("torch_replay_us"):
            row["graph_only_over_torch_replay"] = graph / row["torch_replay_us"]
        if graph and row.get("ort_eager_us"):
            row["ort_eager_over_graph_only"] = row["ort_eager_us"] / graph


SUMMARY = [("kernels/replay", "epabi_kernels_per_replay", "{:.0f}"), ("ORT replay us", "ort_replay_us", "{:.1f}"),
           ("torch replay us", "torch_replay_us", "{:.1f}"), ("ORT/torch", "ort_replay_over_torch_replay", "{:.2f}x"),
           ("fused floor us", "fused_floor_us", "{:.1f}"),
           ("ORT/fused floor", "ort_replay_over_fused_floor", "{:.2f}x"),
           ("graph alone us", "epabi_graph_only_us", "{:.1f}"),
           ("ORT host us", "ort_gap_host_us", "{:.1f}"), ("our callbacks us", "ort_gap_ours_us", "{:.1f}"),
           ("replay graph us", "ort_gap_graph_us", "{:.1f}"), ("ORT eager us", "ort_eager_us", "{:.1f}"),
           ("torch eager us", "torch_eager_us", "{:.1f}")]


def print_summary(rows: dict[str, dict[str, float]], options: dict[str, str]) -> None:
    """One line per model: what issue 11's goals are read from (MLPs: kernels/replay = layers, ORT/torch <= 0.8,
    ORT/fused floor <= 1.2; magika: ORT replay against 214.6 us)."""
    print(f"\nsummary ({', '.join(f'{k}={v}' for k, v in options.items())}); '-' where a piece did not run")
    print(f"{'model':<18}" + "".join(f"{title:>17}" for title, _, _ in SUMMARY))
    for name, row in rows.items():
        cells = [fmt.format(row[key]) if key in row else "-" for _, key, fmt in SUMMARY]
        print(f"{name:<18}" + "".join(f"{cell:>17}" for cell in cells))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="timed runs per measurement (median reported)")
    parser.add_argument("--model-runs", type=int, default=200,
                        help="timed runs per measurement of the detectors (YOLO, OCR)")
    parser.add_argument("--fused-gemm", choices=("0", "1"), default="1",
                        help="EP option fused_gemm of our sessions (0: one step per node, as before linear steps)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--keep-build", type=Path, help="build the floor harness here instead of a temp dir")
    args = parser.parse_args()
    EP_OPTIONS["fused_gemm"] = args.fused_gemm

    if epabi.hardware.cuda_gpu_count() == 0:
        print("[skip] graph_replay: no NVIDIA GPU with a working driver (libcuda.so.1, cuDeviceGetCount)")
        return 0

    models: list[tuple[str, Any, dict[str, np.ndarray], list[int], int | None]] = []
    rng = np.random.default_rng(0)
    for layers in LAYERS:
        models.append((f"mlp {layers}x{WIDTH} b{BATCH}", mlp(layers=layers, width=WIDTH, batch=BATCH),
                       {"x": rng.standard_normal((BATCH, WIDTH)).astype(np.float32)}, [BATCH, WIDTH], layers))
    magika = magika_model()
    if magika is None:
        skip("magika", "the magika package (its standard_v3_3 model) is not installed")
    else:
        models.append(("magika b1", magika, {"bytes": magika_input()}, [1, 214], None))
    runs = {name: args.runs for name, *_ in models}
    image = rng.uniform(0, 1, (1, 3, DETECTOR_SIZE, DETECTOR_SIZE)).astype(np.float32)
    cells = sum((DETECTOR_SIZE // s) ** 2 for s in (8, 16, 32))
    for name, model, out_shape in [(f"yolo {DETECTOR_SIZE} b1", yolo_detector(size=DETECTOR_SIZE), [1, 84, cells]),
                                   (f"ocr {DETECTOR_SIZE} b1", ocr_detector(size=DETECTOR_SIZE),
                                    [1, 1, DETECTOR_SIZE, DETECTOR_SIZE])]:
        models.append((name, model, {"x": image}, out_shape, None))
        runs[name] = args.model_runs

    rows: dict[str, dict[str, float]] = {name: {} for name, *_ in models}

    def measure(name: str, key: str, fn: Callable[[], float]) -> None:
        try:
            rows[name][key] = fn()
        except Exception as exc:  # a failing piece is reported, the others still run
            skip(f"{name}, {key}", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")

    # our EP through epabi's emulated host
    with epabi.Host() as host:  # GPUs from sysfs, else the plugin lists those the CUDA driver sees
        host.register_execution_provider_library("epabi", epabi.get_library_path())
        gpus = [d for d in host.get_ep_devices() if d.ep_metadata.get("device_kind") == "gpu"]
        if not gpus:
            skip("epabi host", f"our plugin lists no GPU EP device ({host.get_ep_devices()})")
        else:
            for name, model, feeds, out_shape, _ in models:
                for graph, key in ((False, "epabi_eager_us"), (True, "epabi_replay_us")):
                    measure(name, key, lambda m=model, f=feeds, o=out_shape, g=graph, n=runs[name]:
                            emulated(host, gpus[0], m, f, o, g, n))

    # our captured graph alone (no host around it), and the kernels a replay runs
    for name, model, feeds, out_shape, _ in models:
        try:
            rows[name]["epabi_graph_only_us"], rows[name]["epabi_kernels_per_replay"] = graph_only(
                model, feeds, out_shape, runs[name])
        except Exception as exc:  # reported, the others still run
            first = str(exc).splitlines()[0] if str(exc) else ""
            skip(f"{name}, epabi_graph_only_us", f"{type(exc).__name__}: {first}")

    # our EP through real onnxruntime
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
        skip("onnxruntime", "not importable in this interpreter")
    if ort is not None:
        ort.register_execution_provider_library("epabi", epabi.get_library_path())
        try:
            gpus = [d for d in ort.get_ep_devices()
                    if d.ep_name == epabi.get_ep_name() and dict(d.ep_metadata).get("device_kind") == "gpu"]
            if not gpus:
                skip(f"onnxruntime {ort.__version__}", "it lists no GPU EP device of ours (no GPU hardware device "
                     "discovered)")
            for name, model, feeds, out_shape, _ in models if gpus else []:
                for graph, key in ((False, "ort_eager_us"), (True, "ort_replay_us")):
                    measure(name, key, lambda m=model, f=feeds, o=out_shape, g=graph, n=runs[name]:
                            real_ort(ort, gpus[0], m, f, o, g, n))
        finally:
            gc.collect()
            ort.unregister_execution_provider_library("epabi")
        # where a replay through real onnxruntime spends its time (bench/replay_gap.py, a child process per model)
        for name, *_ in models if gpus else []:
            gap = replay_gap.measure(gap_model(name), runs[name], "gpu", EP_OPTIONS)
            if not gap.get("replays"):
                skip(f"{name}, replay split", gap.get("skip", "no timed run was a replay"))
                continue
            parts = gap["parts_us"]
            rows[name].update({"ort_gap_wall_us": gap["wall_mean_us"], "ort_gap_host_us": parts["host"],
                               "ort_gap_ours_us": parts["ours"], "ort_gap_graph_us": parts["graph"]})
            if "graph_alone_us" in gap:
                rows[name]["ort_gap_graph_alone_us"] = gap["graph_alone_us"]
                rows[name]["ort_gap_graph_kernels"] = gap["graph_nodes"]

    # the floor
    with tempfile.TemporaryDirectory(prefix="epabi_cuda_floor_") as tmp:
        build_dir = args.keep_build or Path(tmp)
        build_dir.mkdir(parents=True, exist_ok=True)
        exe = build_floor(build_dir)
        fused_exe = build_fused_floor(build_dir)
        for name, _, _, _, layers in models:
            if exe is not None and layers is not None:
                result = floor_us(exe, layers, args.runs)
                if result is not None:
                    rows[name]["floor_us"] = result["median_us"]
                    rows[name]["floor_kernels"] = result["kernels_per_run"]
            if fused_exe is not None and layers is not None:
                try:
                    result = fused_floor_us(fused_exe, layers, args.runs)
                except (OSError, subprocess.SubprocessError, ValueError) as exc:  # a hung or garbled harness
                    skip(f"fused floor, mlp {layers}", f"{type(exc).__name__}: {exc}")
                    result = None
                if result is not None:
                    rows[name]["fused_floor_us"] = result["median_us"]
                    rows[name]["fused_floor_kernels"] = result["kernels_per_run"]

    # PyTorch
    try:
        import torch

        if not torch.cuda.is_available():
            raise ImportError("torch sees no CUDA device")
    except ImportError as exc:
        skip("PyTorch", str(exc) or "not importable")
        torch = None
    if torch is not None:
        for name, _, _, _, layers in models:
            if layers is not None:
                try:
                    rows[name]["torch_eager_us"], rows[name]["torch_replay_us"] = torch_mlp(torch, layers, args.runs)
                except Exception as exc:
                    skip(f"{name}, PyTorch", f"{type(exc).__name__}: {exc}")

    add_ratios(rows)

    if args.json:
        print(json.dumps({"rows": rows, "skipped": SKIPPED, "ep_options": EP_OPTIONS}, indent=2))
        return 0
    print(f"\nper-run microseconds (median of {args.runs}), run + synchronise; ratios eager/replay and replay/floor")
    for name, row in rows.items():
        print(f"\n{name}" + (f" (median of {runs[name]})" if runs[name] != args.runs else ""))
        for key, value in row.items():
            if key.endswith("_kernels") or key.endswith("_per_replay"):
                print(f"  {key:<32}{int(value):>10}")
            elif key.endswith("_us"):
                print(f"  {key:<32}{value:>10.1f}")
            else:
                print(f"  {key:<32}{value:>9.2f}x")
    print_summary(rows, EP_OPTIONS)
    if SKIPPED:
        print(f"\nskipped: {len(SKIPPED)} piece(s), reasons above")
    return 0


if __name__ == "__main__":
    sys.exit(main())
