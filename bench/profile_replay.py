"""Which GPU kernels one CUDA-graph replay of our EP runs, and how long each takes (GPU machine only).

Runs the MLP (default 32 layers, width 64, batch 1), or magika's standard_v3_3 (``--model magika``), on the GPU
EP device through epabi's host with
``enable_cuda_graph=1``, then profiles a few replays with ``torch.profiler`` (CUPTI sees every kernel of the
process, graph nodes included) and prints, per kernel name, its count per replay and mean GPU microseconds,
plus the GPU busy time and the wall time per replay. Also prints the plugin's log lines naming the CUDA libraries
it loaded and the captured graph's node count. Informational; exits 0 with a reason when something is missing.

    python bench/profile_replay.py [--model mlp|magika] [--layers 32] [--replays 20] [--sequence]

``--sequence`` also prints the kernels of the last profiled replay in launch order, each with its GPU microseconds.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import defaultdict

import numpy as np
import onnx

import epabi
from epabi.models import mlp, sample_inputs


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["mlp", "magika"], default="mlp")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--sequence", action="store_true", help="print the last replay's kernels in order")
    args = parser.parse_args()
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        print("profile_replay: torch is not installed; nothing to do")
        return 0
    if not torch.cuda.is_available():
        print("profile_replay: no CUDA GPU; nothing to do")
        return 0
    lines = _Lines()
    logging.getLogger("epabi").addHandler(lines)
    logging.getLogger("epabi").setLevel(logging.DEBUG)
    if args.model == "magika":
        from graph_replay import magika_input, magika_model

        path = magika_model()
        if path is None:
            print("profile_replay: the magika package is not installed; nothing to do")
            return 0
        model = onnx.load(str(path))
        feeds = {"bytes": magika_input()}
    else:
        model = mlp(layers=args.layers, width=64, batch=1)
        feeds = sample_inputs(model, seed=1)
    with epabi.Host() as host:
        host.register_execution_provider_library("epabi", epabi.get_library_path())
        gpus = [d for d in host.get_ep_devices() if d.ep_metadata.get("device_kind") == "gpu"]
        if not gpus:
            print("profile_replay: no GPU EP device")
            return 0
        so = epabi.SessionOptions()
        so.add_provider_for_devices(gpus[:1], {"enable_cuda_graph": "1"})
        with epabi.InferenceSession(model, so) as session:
            binding = session.io_binding()
            ins = {k: epabi.OrtValue.ortvalue_from_numpy(v, "cuda", 0, host=host) for k, v in feeds.items()}
            for name, value in ins.items():
                binding.bind_ortvalue_input(name, value)
            # the outputs' shapes and dtypes from one plain run, then bound in device memory
            probe = epabi.RunOptions()
            probe.add_run_config_entry("gpu_graph_id", "-1")   # a plain run outside any graph
            plain = session.run(None, feeds, probe)
            outs = [epabi.OrtValue.ortvalue_from_shape_and_type(list(r.shape), r.dtype, "cuda", 0, host=host)
                    for r in plain]
            for meta, value in zip(session.get_outputs(), outs, strict=True):
                binding.bind_ortvalue_output(meta.name, value)
            for _ in range(10):
                session.run_with_iobinding(binding)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                t0 = time.perf_counter()
                for _ in range(args.replays):
                    session.run_with_iobinding(binding)
                wall = (time.perf_counter() - t0) / args.replays * 1e6
            torch.cuda.synchronize()
    for line in lines.lines:
        if "CUDA backend on GPU" in line or "captured graph" in line or "compiled '" in line:
            print("[plugin]", line)
    per: dict[str, list[float]] = defaultdict(list)
    starts: list[tuple[float, float]] = []
    ordered: list[tuple[float, str, float]] = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            us = e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
            per[e.name].append(us)
            starts.append((e.time_range.start, e.time_range.end))
            ordered.append((e.time_range.start, e.name, us))
    busy = sum(sum(v) for v in per.values()) / args.replays
    print(f"{'kernel':<70}{'per replay':>11}{'mean us':>9}")
    for name, v in sorted(per.items(), key=lambda kv: -sum(kv[1])):
        print(f"{name[:69]:<70}{len(v) / args.replays:>11.1f}{np.mean(v):>9.2f}")
    if starts:
        starts.sort()
        span = (starts[-1][1] - starts[0][0]) / args.replays
        print(f"GPU busy {busy:.1f} us per replay; first-to-last kernel span {span:.1f} us per replay (incl. gaps)")
    print(f"wall {wall:.1f} us per replay (host run + sync)")
    if args.sequence and ordered:
        ordered.sort()
        per_replay = len(ordered) // args.replays
        print(f"the last replay's {per_replay} kernels in launch order (GPU us):")
        for _, name, us in ordered[-per_replay:]:
            print(f"  {us:7.2f}  {name[:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
