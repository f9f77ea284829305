"""Where one graph replay through real onnxruntime spends its time: the host's share, each of our callbacks, the graph.

For each model a child process of this interpreter runs our EP through its onnxruntime (1.26+; the library
registered as bench/graph_replay.py registers it) with ``enable_cuda_graph=1`` and ``gpu_graph_id=1``, inputs and
outputs bound once through IOBinding (on the GPU in the EP's device memory, on the software adapter in host
memory), and times ``--runs`` replays, reading the monotonic clock around each ``run_with_iobinding``. The plugin,
with ``EPABI_CALLBACK_TIMING`` set (native/callback_timing.h), records the entry and exit of every callback ORT makes
(CLOCK_MONOTONIC, the same clock) and the phases of each ReplayGraph; on the GPU ``EPABI_CUDA_GRAPH_TIMING`` also
times the captured graph alone (launch + synchronize, back to back) and gives its node count. Each replay is then
split into:

* ``before``: from the Python call to our first callback (the binding, ORT's Run up to IsGraphCaptured);
* each callback (IsGraphCaptured, ReplayGraph, Sync, IsGraphCaptureEnabled, ... as this ORT calls them), and inside
  ReplayGraph its phases: ``launch`` (cuGraphLaunch; on the software adapter the graph's execution itself), ``wait``
  (the stream synchronize: the rest of the GPU's work), ``error_check`` (the stream's error word), ``profiler``
  (0 unless the session profiles) and ``other`` (the thread's context, the graph's lookup);
* ``between``: ORT's own work between our callbacks;
* ``after``: from our last callback back to Python.

Totals: ``host`` = before + between + after (python binding and ORT), ``graph`` = launch + wait (the graph's
execution as ReplayGraph sees it), ``ours`` = every callback's time but the graph's. Means are over the replays at
or under the 90th percentile of wall time (preempted runs dropped), so the parts add up to ``wall_mean_us``.
Informational, not a test; it measures whatever device the plugin offers first (``--device``), the software
adapter with ``EPABI_ALLOW_SOFTWARE_ADAPTER=1`` (set by default here):

    python bench/replay_gap.py [--runs 2000] [--device auto|gpu|software] [--models mlp8,mlp32,magika,yolo,ocr]
                               [--fused-gemm 1] [--json]

``bench/graph_replay.py`` (``python -m epabi bench``) adds the three totals of each model to its rows and summary.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
MODELS = ("mlp8", "mlp32", "magika", "yolo", "ocr")
KEEP_QUANTILE = 0.9
PHASES = ("launch", "wait", "error_check", "profiler")

# -- the child: one session of the interpreter's onnxruntime, N timed replays -----------------------------------

_CHILD = r"""
import gc, json, sys, time
import numpy as np
import onnxruntime as ort
import epabi
sys.path.insert(0, sys.argv[2])
from replay_gap import build_model

spec = json.loads(sys.argv[1])
model, feeds, out_shape = build_model(spec["model"])
ort.register_execution_provider_library("epabi", epabi.get_library_path())
ours = [d for d in ort.get_ep_devices() if d.ep_name == epabi.get_ep_name()]
kinds = [dict(d.ep_metadata).get("device_kind") for d in ours]
kind = spec["device"] if spec["device"] != "auto" else ("gpu" if "gpu" in kinds else "software")
if kind not in kinds:
    print(json.dumps({"skip": f"no {kind} EP device of ours (devices: {kinds})"}))
    sys.exit(0)
device = ours[kinds.index(kind)]
so = ort.SessionOptions()
so.add_provider_for_devices([device], {"enable_cuda_graph": "1", **spec["ep_options"]})
data = model.SerializeToString() if hasattr(model, "SerializeToString") else str(model)
session = ort.InferenceSession(data, so, enable_fallback=0)
where = ("cuda", 0) if kind == "gpu" else ()
binding = session.io_binding()
values = {k: ort.OrtValue.ortvalue_from_numpy(v, *where) for k, v in feeds.items()}
for k, v in values.items():
    binding.bind_ortvalue_input(k, v)
out = ort.OrtValue.ortvalue_from_numpy(np.zeros(out_shape, np.float32), *where)
binding.bind_ortvalue_output(session.get_outputs()[0].name, out)
ro = ort.RunOptions()
ro.add_run_config_entry("gpu_graph_id", "1")
run, clock, mono = session.run_with_iobinding, time.clock_gettime_ns, time.CLOCK_MONOTONIC
for _ in range(spec["warmup"]):
    run(binding, ro)
n = spec["runs"]
t0, t1 = np.empty(n, np.int64), np.empty(n, np.int64)
for i in range(n):
    a = clock(mono)
    run(binding, ro)
    b = clock(mono)
    t0[i], t1[i] = a, b
np.savez(spec["times"], start=t0, end=t1)
del run, binding, values, out, session
gc.collect()
ort.unregister_execution_provider_library("epabi")
print(json.dumps({"ort_version": ort.__version__, "device": kind}), flush=True)
# on the GPU the interpreter's finalization after the unregister ended in SIGSEGV under onnxruntime 1.30 (H200;
# tests/test_gpu_unregister.py keeps it in view): the measurement is complete here, so leave without finalizing
import os
os._exit(0)
"""


def build_model(name: str) -> tuple[Any, dict[str, np.ndarray], list[int]]:
    """(model or path, feeds, output shape) of one of MODELS."""
    rng = np.random.default_rng(0)
    if name.startswith("mlp"):
        from epabi.models import mlp

        return mlp(layers=int(name[3:]), width=64, batch=1), \
            {"x": rng.standard_normal((1, 64)).astype(np.float32)}, [1, 64]
    if name == "magika":
        import magika

        path = Path(magika.__file__).parent / "models" / "standard_v3_3" / "model.onnx"
        data = Path(__file__).read_bytes()
        beg, end = list(data[:1024]), list(data[-1024:])
        return path, {"bytes": np.array([beg + end], dtype=np.int32)}, [1, 214]
    if name in ("yolo", "ocr"):
        sys.path.insert(0, str(HERE.parent / "tests"))
        from real_models import ocr_detector, yolo_detector

        size = 640
        image = {"x": rng.uniform(0, 1, (1, 3, size, size)).astype(np.float32)}
        if name == "ocr":
            return ocr_detector(size=size), image, [1, 1, size, size]
        cells = sum((size // s) ** 2 for s in (8, 16, 32))
        return yolo_detector(size=size), image, [1, 84, cells]
    raise ValueError(f"unknown model {name!r} (one of {', '.join(MODELS)})")


# -- the parent: run the child, read its times and the plugin's, split each replay ------------------------------

def _events(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [e for e in map(json.loads, path.read_text().splitlines()) if "cb" in e]


def split_replays(start: np.ndarray, end: np.ndarray, events: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-replay parts (us), averaged over the replays at or under the KEEP_QUANTILE of wall time.

    A timed run counts as a replay when exactly one ReplayGraph and no Compute fell inside it."""
    events = sorted(events, key=lambda e: e["start_ns"])
    starts = np.array([e["start_ns"] for e in events], dtype=np.int64)
    rows: list[dict[str, float]] = []
    for a, b in zip(start, end):
        lo, hi = np.searchsorted(starts, a), np.searchsorted(starts, b)
        inside = [e for e in events[lo:hi] if e["end_ns"] <= b]
        cbs = [e["cb"] for e in inside]
        if cbs.count("ReplayGraph") != 1 or "Compute" in cbs:
            continue
        row: dict[str, float] = {"wall": (b - a) / 1e3, "before": (inside[0]["start_ns"] - a) / 1e3,
                                 "after": (b - inside[-1]["end_ns"]) / 1e3}
        spent = 0
        for e in inside:
            d = e["end_ns"] - e["start_ns"]
            spent += d
            row[e["cb"]] = row.get(e["cb"], 0.0) + d / 1e3
            row[f"{e['cb']} calls"] = row.get(f"{e['cb']} calls", 0.0) + 1
            if e["cb"] == "ReplayGraph":
                phases = 0
                for p in PHASES:
                    row[f"ReplayGraph {p}"] = e[f"{p}_ns"] / 1e3
                    phases += e[f"{p}_ns"]
                row["ReplayGraph other"] = (d - phases) / 1e3
        row["between"] = (inside[-1]["end_ns"] - inside[0]["start_ns"] - spent) / 1e3
        rows.append(row)
    if not rows:
        return {"replays": 0}
    walls = np.array([r["wall"] for r in rows])
    kept = [r for r in rows if r["wall"] <= np.quantile(walls, KEEP_QUANTILE)]
    keys = sorted({k for r in kept for k in r})
    parts = {k: float(np.mean([r.get(k, 0.0) for r in kept])) for k in keys}
    parts["host"] = parts["before"] + parts["between"] + parts["after"]
    parts["graph"] = parts.get("ReplayGraph launch", 0.0) + parts.get("ReplayGraph wait", 0.0)
    callbacks = sum(v for k, v in parts.items() if k[:1].isupper() and " " not in k)
    parts["ours"] = callbacks - parts["graph"]
    return {"replays": len(rows), "kept": len(kept), "wall_median_us": float(np.median(walls)),
            "wall_mean_us": parts.pop("wall"), "parts_us": parts}


def measure(name: str, runs: int, device: str, ep_options: dict[str, str], warmup: int = 50) -> dict[str, Any]:
    """Runs the child for one model; the split replays, the ORT version, the device and the graph alone."""
    with tempfile.TemporaryDirectory(prefix="epabi_replay_gap_") as tmp:
        calls, times = Path(tmp) / "calls.jsonl", Path(tmp) / "times.npz"
        spec = {"model": name, "device": device, "runs": runs, "warmup": warmup, "times": str(times),
                "ep_options": ep_options}
        env = {**os.environ, "EPABI_CALLBACK_TIMING": str(calls), "EPABI_CUDA_GRAPH_TIMING": str(runs)}
        env.setdefault("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")
        proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec), str(HERE)], capture_output=True,
                              text=True, timeout=900, env=env)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0 or not lines:
            return {"skip": f"exit {proc.returncode}: {proc.stderr.strip()[-600:]}"}
        info = json.loads(lines[-1])
        if "skip" in info:
            return info
        with np.load(times) as t:
            result = {**info, **split_replays(t["start"], t["end"], _events(calls))}
    match = re.search(r"CUDA graph of (\d+) nodes: ([0-9.]+) us per launch", proc.stderr)
    if match:
        result["graph_alone_us"], result["graph_nodes"] = float(match.group(2)), int(match.group(1))
    return result


ROWS = [("before", "before our first callback (python binding, ORT's Run)"),
        ("IsGraphCaptured", "IsGraphCaptured"),
        ("ReplayGraph", "ReplayGraph"),
        ("ReplayGraph launch", "  launch (cuGraphLaunch; software: the graph's execution)"),
        ("ReplayGraph wait", "  wait (stream synchronize)"),
        ("ReplayGraph error_check", "  error-word check"),
        ("ReplayGraph profiler", "  profiler event"),
        ("ReplayGraph other", "  other (thread context, graph lookup)"),
        ("Sync", "Sync"),
        ("IsGraphCaptureEnabled", "IsGraphCaptureEnabled"),
        ("OnRunStart", "OnRunStart"),
        ("OnRunEnd", "OnRunEnd"),
        ("between", "ORT between our callbacks"),
        ("after", "after our last callback (ORT's Run, python binding)")]


def print_result(name: str, r: dict[str, Any]) -> None:
    if "skip" in r:
        print(f"\n{name}: skipped ({r['skip']})")
        return
    if not r.get("replays"):
        print(f"\n{name}: no timed run was a replay (onnxruntime {r.get('ort_version')} < 1.26, or capture failed)")
        return
    p = r["parts_us"]
    print(f"\n{name} (onnxruntime {r['ort_version']}, {r['device']} device): {r['replays']} replays, wall median "
          f"{r['wall_median_us']:.2f} us; means of the {r['kept']} at or under the {KEEP_QUANTILE:.0%} quantile")
    print(f"  {'part':<58}{'us':>9}{'share':>8}{'calls':>7}")
    for key, label in ROWS:
        if key not in p:
            continue
        calls = p.get(f"{key} calls")
        print(f"  {label:<58}{p[key]:>9.3f}{p[key] / r['wall_mean_us']:>8.1%}"
              + (f"{calls:>7.1f}" if calls is not None else ""))
    print(f"  {'wall (mean of the kept replays)':<58}{r['wall_mean_us']:>9.3f}")
    print(f"  {'host: python binding + ORT (before + between + after)':<58}{p['host']:>9.3f}"
          f"{p['host'] / r['wall_mean_us']:>8.1%}")
    print(f"  {'graph: ReplayGraph launch + wait':<58}{p['graph']:>9.3f}{p['graph'] / r['wall_mean_us']:>8.1%}")
    print(f"  {'ours: every callback but the graph':<58}{p['ours']:>9.3f}{p['ours'] / r['wall_mean_us']:>8.1%}")
    if "graph_alone_us" in r:
        label = f"graph alone (EPABI_CUDA_GRAPH_TIMING, {r['graph_nodes']} nodes)"
        print(f"  {label:<58}{r['graph_alone_us']:>9.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="timed replays per model")
    parser.add_argument("--device", choices=("auto", "gpu", "software"), default="auto",
                        help="our EP device to measure (auto: the GPU when there is one)")
    parser.add_argument("--models", default=None,
                        help=f"comma-separated, of {','.join(MODELS)} (default: all on the GPU, mlp8,mlp32,magika on "
                             "the software adapter)")
    parser.add_argument("--fused-gemm", choices=("0", "1"), default="1", help="EP option fused_gemm")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        print("[skip] replay_gap: onnxruntime is not importable in this interpreter")
        return 0
    names = args.models.split(",") if args.models else None
    if names is None:
        import epabi

        gpu = args.device == "gpu" or (args.device == "auto" and epabi.hardware.cuda_gpu_count() > 0)
        names = list(MODELS) if gpu else ["mlp8", "mlp32", "magika"]
    try:
        import magika  # noqa: F401
    except ImportError:
        if "magika" in names:
            names.remove("magika")
            print("[skip] magika: the magika package is not installed")
    results = {name: measure(name, args.runs, args.device, {"fused_gemm": args.fused_gemm}) for name in names}
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for name, r in results.items():
        print_result(name, r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
