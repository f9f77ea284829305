"""Latency of the epabi software adapter (the plugin's CPU device) against ONNX Runtime's own CPU EP.

    EPABI_ALLOW_SOFTWARE_ADAPTER=1 python bench/software_adapter.py [--runs N] [--warmup N] [--threads 1,2] [--json]

Models: epabi's built-in MLP at two sizes, magika's standard_v3_3 model (from the installed ``magika`` wheel) on
batches of 1 and 16 real files, a small CNN and a YOLOv8n-shaped detector (``tests/real_models.py``). Backends:

* ``epabi-emulated``: our EP through epabi's emulated host (``epabi.InferenceSession``);
* ``ort-epabi``: our EP through the onnxruntime installed in this interpreter (the plugin library registered
  with ``register_execution_provider_library``, the software device chosen with ``add_provider_for_devices``);
* ``ort-cpu``: onnxruntime's CPU EP (the baseline of the ratios).

Every workload runs at each thread count of ``--threads`` (default: 1 and the physical cores, ORT's default),
the same for both EPs: ``intra_op_num_threads`` in the CPU EP's session options and our EP's option of that name.
Each of our backends is timed interleaved with a CPU EP session of the same workload and thread count (blocks
of runs of each in turn, see ``time_pair``), so that load from other processes falls on both alike; the ratio is
of the two medians. The table gives median and p90 in ms over ``--runs`` timed runs after ``--warmup`` runs,
the ratio, and the largest absolute output difference from the CPU EP. The BLAS our EP multiplies with (its
software device's ``blas`` metadata) is printed first. Backends that are not available (no onnxruntime, no
magika, no software device) are reported and skipped. Informational only: nothing here is a test.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import epabi
from epabi.models import mlp, sample_inputs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the builders the tests use too
from real_models import small_cnn, yolo_detector  # noqa: E402

EP_NAME = epabi.get_ep_name()
REPO = Path(__file__).resolve().parent.parent
MLP_SIZES = [(3, 64, 1), (8, 256, 32)]  # (layers, width, batch)
MAGIKA_BATCHES = [1, 16]
BASELINE = "ort-cpu"
CPU_EP_OPTION = "intra_op_num_threads"
BLOCK = 4  # timed runs of one backend in a row (time_pair)
# Idle time before each block (time_pair): ONNX Runtime's intra-op workers keep polling for about 50-60 ms after a
# Run ends (measured on the 2-core machine: the CPU EP's worker thread used 15 ms of CPU 20-60 ms after its
# session's run, /proc/self/task/*/schedstat), so a block of ours started at once had one core fewer.
SETTLE_S = 0.1

Runner = Callable[[], Any]


# -- models and inputs -----------------------------------------------------------------------------------

def magika_model_path() -> Path | None:
    try:
        import magika
    except ImportError:
        return None
    path = Path(magika.__file__).parent / "models" / "standard_v3_3" / "model.onnx"
    return path if path.is_file() else None


def magika_features(data: bytes) -> np.ndarray:
    """magika's standard_v3_3 preprocessing, as in tests/magika_model.py: first/last 1024 bytes, pad 256."""
    beg = list(data[:4096].lstrip()[:1024])
    end = list(data[-4096:].rstrip()[-1024:]) if data else []
    return np.array(beg + [256] * (1024 - len(beg)) + [256] * (1024 - len(end)) + end, dtype=np.int32)


def real_files(count: int) -> list[Path]:
    """``count`` real files of several kinds: Python sources, shared libraries, C, TOML, Markdown, CMake."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    kinds = [sorted(stdlib.glob("json/*.py")), sorted(stdlib.glob("email/*.py")),
             sorted(stdlib.glob("lib-dynload/*.so")), sorted((REPO / "native").glob("*.c")),
             sorted(REPO.glob("*.toml")), sorted(REPO.glob("*.md")), sorted(REPO.glob("CMakeLists.txt")),
             sorted(stdlib.glob("*.py"))]
    picked: list[Path] = []
    while len(picked) < count and any(kinds):
        for files in kinds:  # round-robin over the kinds, so a batch mixes them
            if files and len(picked) < count:
                picked.append(files.pop(0))
    if len(picked) < count:
        raise RuntimeError(f"found only {len(picked)} files for a magika batch of {count}")
    return picked


def workloads() -> tuple[list[tuple[str, onnx.ModelProto, dict[str, np.ndarray]]], list[str]]:
    """(label, model, feeds) per workload, and notes on what was left out."""
    out, notes = [], []
    for layers, width, batch in MLP_SIZES:
        model = mlp(layers=layers, width=width, batch=batch)
        out.append((f"mlp {layers}x{width} batch {batch}", model, sample_inputs(model)))
    path = magika_model_path()
    if path is None:
        notes.append("magika is not installed: magika workloads skipped (pip install magika)")
    else:
        model = onnx.load(str(path))
        for batch in MAGIKA_BATCHES:
            feeds = {"bytes": np.stack([magika_features(p.read_bytes()) for p in real_files(batch)])}
            out.append((f"magika batch {batch}", model, feeds))
    for label, model in [("cnn 128x128 batch 1", small_cnn()), ("yolo-like 320 batch 1", yolo_detector())]:
        out.append((label, model, sample_inputs(model)))
    return out, notes


def physical_cores() -> int:
    """ORT's default intra-op thread count: one per physical core (distinct core ids of the CPUs we may use)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    cores = set()
    for cpu in cpus:
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add((topo.joinpath("physical_package_id").read_text().strip(),
                       topo.joinpath("core_id").read_text().strip()))
        except OSError:
            return len(cpus)
    return max(1, len(cores))


# -- backends --------------------------------------------------------------------------------------------

class Emulated:
    """Our EP through epabi's emulated host (CPU-only hardware, so the plugin offers its software device)."""

    name = "epabi-emulated"

    def __init__(self, library: str) -> None:
        self.host = epabi.Host(hardware=[epabi.cpu_device()])
        self.host.register_execution_provider_library("epabi", library)
        self.devices = [d for d in self.host.get_ep_devices()
                        if d.ep_name == EP_NAME and d.ep_metadata.get("device_kind") == "software"]
        if not self.devices:
            self.close()
            raise RuntimeError("the plugin offers no software device (set EPABI_ALLOW_SOFTWARE_ADAPTER=1)")
        self.sessions: list[Any] = []
        self.description = f"emulated ONNX Runtime {self.host.version_string}"
        self.blas = self.devices[0].ep_metadata.get("blas", "?")

    def session(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray], threads: int) -> Runner:
        so = epabi.SessionOptions()
        so.add_provider_for_devices(self.devices, {CPU_EP_OPTION: str(threads)})
        sess = epabi.InferenceSession(model, so)
        self.sessions.append(sess)
        off_ep = sorted(n for n, ep in sess.node_assignment.items() if ep != EP_NAME)
        if off_ep:
            print(f"note: {self.name}: {len(off_ep)} node(s) not on our EP: {off_ep[:5]}", file=sys.stderr)
        return lambda: sess.run(None, feeds)

    def close(self) -> None:
        for sess in getattr(self, "sessions", []):
            sess.close()
        self.sessions = []
        self.host.close()


class OrtBackend:
    """A session factory on the onnxruntime of this interpreter: our EP (``library`` given) or the CPU EP."""

    def __init__(self, ort: Any, library: str | None) -> None:
        self.ort = ort
        self.library = library
        self.sessions: list[Any] = []
        self.devices: list[Any] = []
        self.name = "ort-epabi" if library else BASELINE
        self.description = f"onnxruntime {ort.__version__}"
        self.blas = None
        if library:
            ort.register_execution_provider_library("epabi", library)
            self.devices = [d for d in ort.get_ep_devices()
                            if d.ep_name == EP_NAME and dict(d.ep_metadata).get("device_kind") == "software"]
            if not self.devices:
                self.close()
                raise RuntimeError("the plugin offers no software device (set EPABI_ALLOW_SOFTWARE_ADAPTER=1)")
            self.blas = dict(self.devices[0].ep_metadata).get("blas", "?")

    def session(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray], threads: int) -> Runner:
        so = self.ort.SessionOptions()
        if self.library:
            so.add_provider_for_devices(self.devices, {CPU_EP_OPTION: str(threads)})
            sess = self.ort.InferenceSession(model.SerializeToString(), sess_options=so, enable_fallback=0)
            if sess.get_providers()[0] != EP_NAME:
                raise RuntimeError(f"onnxruntime did not use our EP: {sess.get_providers()}")
        else:
            so.intra_op_num_threads = threads
            sess = self.ort.InferenceSession(model.SerializeToString(), sess_options=so,
                                             providers=["CPUExecutionProvider"])
        self.sessions.append(sess)
        return lambda: sess.run(None, feeds)

    def drop_sessions(self) -> None:
        self.sessions.clear()
        gc.collect()

    def close(self) -> None:
        # Sessions and device wrappers must be gone before the library is unregistered (REAL_HOST_NOTES trap 2).
        self.sessions.clear()
        self.devices = []
        gc.collect()
        if self.library:
            self.ort.unregister_execution_provider_library("epabi")


# -- timing and report -----------------------------------------------------------------------------------

def time_pair(ours: Runner, base: Runner, runs: int, warmup: int, block: int = BLOCK,
              settle_s: float = SETTLE_S) -> tuple[list[float], ...]:
    """Times ``ours`` and ``base`` in turn, ``block`` runs of one then of the other (which goes first alternating),
    each block after ``settle_s`` seconds idle and one untimed run: the pool of the backend timed before (the CPU
    EP's polls for tens of ms after its runs) is asleep again when the next block starts, and each block's pool is
    awake and its data in cache when its timed runs start. ms per run, then the last outputs of each."""
    out_ours = out_base = None
    for _ in range(warmup):
        out_ours, out_base = ours(), base()
    times: dict[int, list[float]] = {0: [], 1: []}
    outputs = {0: out_ours, 1: out_base}
    turn = 0
    while len(times[0]) < runs or len(times[1]) < runs:
        for which in ((0, 1) if turn % 2 == 0 else (1, 0)):
            run = (ours, base)[which]
            time.sleep(settle_s)
            outputs[which] = run()
            for _ in range(min(block, runs - len(times[which]))):
                start = time.perf_counter()
                outputs[which] = run()
                times[which].append((time.perf_counter() - start) * 1e3)
        turn += 1
    return times[0], times[1], [np.asarray(o) for o in outputs[0]], [np.asarray(o) for o in outputs[1]]


def max_diff(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) if x.size else 0.0
               for x, y in zip(a, b))


def stats(times: list[float]) -> dict[str, float]:
    return {"median_ms": float(np.median(times)), "p90_ms": float(np.percentile(times, 90))}


def bench(backend: Any, baseline: OrtBackend, work: list, thread_counts: list[int], runs: int,
          warmup: int) -> list[dict[str, Any]]:
    """One row for our backend and one for the CPU EP it was interleaved with, per workload and thread count."""
    rows = []
    for label, model, feeds in work:
        for threads in thread_counts:
            ours = backend.session(model, feeds, threads)
            base = baseline.session(model, feeds, threads)
            t_ours, t_base, o_ours, o_base = time_pair(ours, base, runs, warmup)
            mine, theirs = stats(t_ours), stats(t_base)
            common = {"workload": label, "threads": threads}
            rows.append({**common, "backend": backend.name, **mine,
                         "ratio_vs_cpu_ep": mine["median_ms"] / theirs["median_ms"],
                         "max_abs_diff_vs_cpu_ep": max_diff(o_ours, o_base)})
            rows.append({**common, "backend": f"{BASELINE} (vs {backend.name})", **theirs, "ratio_vs_cpu_ep": 1.0,
                         "max_abs_diff_vs_cpu_ep": 0.0})
            baseline.drop_sessions()
    return rows


def parse_threads(text: str) -> list[int]:
    try:
        counts = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"--threads wants comma-separated counts >= 1, got {text!r}")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="timed runs per workload and backend (default: 30)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs before timing (default: 5)")
    parser.add_argument("--threads", type=parse_threads, default=None, metavar="N,M",
                        help="thread counts for both EPs (default: 1 and the physical cores)")
    parser.add_argument("--only", default="", help="only workloads whose label contains this")
    parser.add_argument("--backend", choices=["ort-epabi", "epabi-emulated"], action="append",
                        help="our backends to time (default: both)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    parser.add_argument("--library", default=None, metavar="PATH", help="plugin library (default: epabi's own)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0:
        parser.error("--runs must be >= 1 and --warmup >= 0")
    library = args.library or epabi.get_library_path()
    if os.environ.get("EPABI_ALLOW_SOFTWARE_ADAPTER") != "1":
        print("note: EPABI_ALLOW_SOFTWARE_ADAPTER=1 is not set; the plugin will offer no software device",
              file=sys.stderr)
    cores = physical_cores()
    thread_counts = args.threads or sorted({1, cores})

    work, notes = workloads()
    work = [w for w in work if args.only in w[0]]
    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime is not importable here: there is no CPU EP to compare with", file=sys.stderr)
        return 0
    chosen = args.backend or ["ort-epabi", "epabi-emulated"]
    factories: list[tuple[str, Callable[[], Any]]] = [
        (name, f) for name, f in [("ort-epabi", lambda: OrtBackend(ort, library)),
                                  ("epabi-emulated", lambda: Emulated(library))] if name in chosen]
    baseline = OrtBackend(ort, None)
    rows: list[dict[str, Any]] = []
    hosts: dict[str, str] = {BASELINE: baseline.description}
    blas = None
    for name, factory in factories:  # one of ours at a time: each is torn down before the next loads the plugin
        try:
            backend = factory()
        except Exception as exc:  # a missing device or a refused registration: report it, bench the rest
            notes.append(f"{name} skipped: {type(exc).__name__}: {exc}")
            continue
        try:
            hosts[name] = backend.description
            blas = blas or backend.blas
            rows += bench(backend, baseline, work, thread_counts, args.runs, args.warmup)
        finally:
            backend.close()
    report = {"runs": args.runs, "warmup": args.warmup, "cpu_count": os.cpu_count(), "physical_cores": cores,
              "threads": thread_counts, "blas": blas, "hosts": hosts, "library": library, "rows": rows,
              "notes": notes}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"runs={args.runs} warmup={args.warmup} cpus={os.cpu_count()} physical cores={cores} "
          f"threads={','.join(map(str, thread_counts))} library={library}")
    print(f"  our BLAS: {blas}")
    for name, desc in hosts.items():
        print(f"  {name}: {desc}")
    print(f"{'workload':<23}{'thr':>4}  {'backend':<28}{'median ms':>11}{'p90 ms':>10}{'ours/CPU EP':>13}"
          f"{'max|diff|':>11}")
    for row in rows:
        print(f"{row['workload']:<23}{row['threads']:>4}  {row['backend']:<28}{row['median_ms']:>11.3f}"
              f"{row['p90_ms']:>10.3f}{row['ratio_vs_cpu_ep']:>12.2f}x{row['max_abs_diff_vs_cpu_ep']:>11.1e}")
    for note in notes:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
