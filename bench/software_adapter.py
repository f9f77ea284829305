"""Latency of the epabi software adapter (the plugin's CPU device) against ONNX Runtime's own CPU EP.

    EPABI_ALLOW_SOFTWARE_ADAPTER=1 python bench/software_adapter.py [--runs N] [--warmup N] [--json]

Models: epabi's built-in MLP at two sizes and magika's standard_v3_3 model (from the installed ``magika``
wheel) on batches of 1 and 16 real files. Backends:

* ``epabi-emulated``: our EP through epabi's emulated host (``epabi.InferenceSession``);
* ``ort-epabi``: our EP through the onnxruntime installed in this interpreter (the plugin library registered
  with ``register_execution_provider_library``, the software device chosen with ``add_provider_for_devices``);
* ``ort-cpu``: onnxruntime's CPU EP, default session options (the baseline of the ratios).

Each backend does ``--warmup`` runs, then ``--runs`` timed ``run`` calls; the table gives median and p90 in ms and
the ratio of each median to the CPU EP's. Backends that are not available (no onnxruntime, no magika, no
software device) are reported and skipped. Informational only: nothing here is a test.
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

EP_NAME = epabi.get_ep_name()
REPO = Path(__file__).resolve().parent.parent
MLP_SIZES = [(3, 64, 1), (8, 256, 32)]  # (layers, width, batch)
MAGIKA_BATCHES = [1, 16]
BASELINE = "ort-cpu"

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
    return out, notes


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

    def session(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> Runner:
        so = epabi.SessionOptions()
        so.add_provider_for_devices(self.devices)
        sess = epabi.InferenceSession(model, so)
        self.sessions.append(sess)
        off_ep = sorted(n for n, ep in sess.node_assignment.items() if ep != EP_NAME)
        if off_ep:
            print(f"note: {self.name}: {len(off_ep)} node(s) not on our EP: {off_ep[:5]}", file=sys.stderr)
        return lambda: sess.run(None, feeds)

    def close(self) -> None:
        for sess in getattr(self, "sessions", []):
            sess.close()
        self.host.close()


class OrtBackend:
    """A session factory on the onnxruntime of this interpreter: our EP (``ours``) or the CPU EP."""

    def __init__(self, ort: Any, library: str | None) -> None:
        self.ort = ort
        self.library = library
        self.sessions: list[Any] = []
        self.devices: list[Any] = []
        self.name = "ort-epabi" if library else BASELINE
        self.description = f"onnxruntime {ort.__version__}"
        if library:
            ort.register_execution_provider_library("epabi", library)
            self.devices = [d for d in ort.get_ep_devices()
                            if d.ep_name == EP_NAME and dict(d.ep_metadata).get("device_kind") == "software"]
            if not self.devices:
                self.close()
                raise RuntimeError("the plugin offers no software device (set EPABI_ALLOW_SOFTWARE_ADAPTER=1)")

    def session(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> Runner:
        so = self.ort.SessionOptions()
        if self.library:
            so.add_provider_for_devices(self.devices, {})
            sess = self.ort.InferenceSession(model.SerializeToString(), sess_options=so, enable_fallback=0)
            if sess.get_providers()[0] != EP_NAME:
                raise RuntimeError(f"onnxruntime did not use our EP: {sess.get_providers()}")
        else:
            sess = self.ort.InferenceSession(model.SerializeToString(), sess_options=so,
                                             providers=["CPUExecutionProvider"])
        self.sessions.append(sess)
        return lambda: sess.run(None, feeds)

    def close(self) -> None:
        # Sessions and device wrappers must be gone before the library is unregistered (REAL_HOST_NOTES trap 2).
        self.sessions.clear()
        self.devices = []
        gc.collect()
        if self.library:
            self.ort.unregister_execution_provider_library("epabi")


# -- timing and report -----------------------------------------------------------------------------------

def time_runs(run: Runner, runs: int, warmup: int) -> tuple[list[float], list[np.ndarray]]:
    outputs = None
    for _ in range(warmup):
        outputs = run()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        outputs = run()
        times.append((time.perf_counter() - start) * 1e3)
    return times, [np.asarray(o) for o in outputs]


def bench(backend: Any, work: list, runs: int, warmup: int) -> dict[str, dict]:
    """label -> {median_ms, p90_ms, outputs} for every workload on one backend."""
    out = {}
    for label, model, feeds in work:
        times, outputs = time_runs(backend.session(model, feeds), runs, warmup)
        out[label] = {"median_ms": float(np.median(times)), "p90_ms": float(np.percentile(times, 90)),
                      "outputs": outputs}
    return out


def max_diff(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) if x.size else 0.0
               for x, y in zip(a, b))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50, help="timed runs per workload and backend (default: 50)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs before timing (default: 5)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    parser.add_argument("--library", default=None, metavar="PATH", help="plugin library (default: epabi's own)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0:
        parser.error("--runs must be >= 1 and --warmup >= 0")
    library = args.library or epabi.get_library_path()
    if os.environ.get("EPABI_ALLOW_SOFTWARE_ADAPTER") != "1":
        print("note: EPABI_ALLOW_SOFTWARE_ADAPTER=1 is not set; the plugin will offer no software device",
              file=sys.stderr)

    work, notes = workloads()
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
        notes.append("onnxruntime is not importable here: ort-epabi and ort-cpu skipped (and no ratios)")

    factories: list[tuple[str, Callable[[], Any]]] = [("epabi-emulated", lambda: Emulated(library))]
    if ort is not None:
        factories += [("ort-epabi", lambda: OrtBackend(ort, library)), (BASELINE, lambda: OrtBackend(ort, None))]
    results: dict[str, dict[str, dict]] = {}
    hosts: dict[str, str] = {}
    for name, factory in factories:  # one backend at a time: each is torn down before the next loads us
        try:
            backend = factory()
        except Exception as exc:  # a missing device or a refused registration: report it, bench the rest
            notes.append(f"{name} skipped: {type(exc).__name__}: {exc}")
            continue
        try:
            hosts[name] = backend.description
            results[name] = bench(backend, work, args.runs, args.warmup)
        finally:
            backend.close()

    rows = []
    for label, _, _ in work:
        base = results.get(BASELINE, {}).get(label)
        for name, per_work in results.items():
            r = per_work[label]
            rows.append({"workload": label, "backend": name, "median_ms": r["median_ms"], "p90_ms": r["p90_ms"],
                         "ratio_vs_cpu_ep": r["median_ms"] / base["median_ms"] if base else None,
                         "max_abs_diff_vs_cpu_ep": max_diff(r["outputs"], base["outputs"]) if base else None})
    report = {"runs": args.runs, "warmup": args.warmup, "cpu_count": os.cpu_count(), "hosts": hosts,
              "library": library, "rows": rows, "notes": notes}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"runs={args.runs} warmup={args.warmup} cpus={os.cpu_count()} library={library}")
    for name, desc in hosts.items():
        print(f"  {name}: {desc}")
    print(f"{'workload':<22}{'backend':<16}{'median ms':>11}{'p90 ms':>10}{'ours/CPU EP':>13}{'max|diff|':>11}")
    for row in rows:
        ratio = f"{row['ratio_vs_cpu_ep']:.2f}x" if row["ratio_vs_cpu_ep"] is not None else "-"
        diff = f"{row['max_abs_diff_vs_cpu_ep']:.1e}" if row["max_abs_diff_vs_cpu_ep"] is not None else "-"
        print(f"{row['workload']:<22}{row['backend']:<16}{row['median_ms']:>11.3f}{row['p90_ms']:>10.3f}"
              f"{ratio:>13}{diff:>11}")
    for note in notes:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
