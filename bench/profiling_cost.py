"""What profiling costs a run on the software adapter: per-run microseconds with ``enable_profiling`` off and on,
and the ratio on/off, for eager runs and graph replays of an 8-layer MLP (width 64, batch 1; inputs and outputs
bound once through IOBinding), through real onnxruntime (when importable) and epabi's emulated host. With profiling
off the plugin's cost is one atomic load per Compute and per replay; on, it also times each one and keeps its event
(native/ep_profiler.h), and the host keeps its own. Informational, not a test:

    python bench/profiling_cost.py [--runs 500] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from typing import Any

os.environ.setdefault("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")

from bound_mlp import bound_run_us

import epabi
from epabi.models import mlp


def _measure(rt: Any, devices: list[Any], model: Any, graph: bool, profile: bool, runs: int, folder: str) -> float:
    """Median per-run microseconds of one session of ``rt`` (onnxruntime or epabi); profiles go to ``folder``."""
    so = rt.SessionOptions()
    so.enable_profiling = profile
    so.profile_file_prefix = os.path.join(folder, "profile")
    so.add_provider_for_devices(devices, {"enable_cuda_graph": "1" if graph else "0"})
    session = rt.InferenceSession(model, so) if rt is epabi else rt.InferenceSession(model, so, enable_fallback=0)
    us = bound_run_us(rt, session, runs)
    if profile:
        session.end_profiling()
    if rt is epabi:
        session.close()
    return us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    model = mlp(layers=8, width=64, batch=1)
    rows = []
    with tempfile.TemporaryDirectory() as folder, epabi.Host(hardware=[epabi.cpu_device()]) as host:
        host.register_execution_provider_library("epabi", epabi.get_library_path())
        hosts: list[tuple[str, Any, list[Any], Any]] = [("emulated", epabi, host.get_ep_devices(), model)]
        try:
            import onnxruntime as ort

            ort.register_execution_provider_library("epabi", epabi.get_library_path())
            ours = [d for d in ort.get_ep_devices() if d.ep_name == epabi.get_ep_name()]
            hosts.insert(0, ("onnxruntime", ort, ours, model.SerializeToString()))
        except ImportError:
            pass
        for label, rt, devices, m in hosts:
            for graph in (False, True):
                off = _measure(rt, devices, m, graph, False, args.runs, folder)
                on = _measure(rt, devices, m, graph, True, args.runs, folder)
                rows.append({"host": label, "run": "replay" if graph else "eager", "off_us": round(off, 1),
                             "on_us": round(on, 1), "on_over_off": round(on / off, 2)})
        if len(hosts) == 2:
            import gc

            gc.collect()
            ort.unregister_execution_provider_library("epabi")
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'host':<13}{'run':<8}{'off us':>9}{'on us':>9}{'on/off':>9}")
    for r in rows:
        print(f"{r['host']:<13}{r['run']:<8}{r['off_us']:>9}{r['on_us']:>9}{r['on_over_off']:>8}x")


if __name__ == "__main__":
    main()
