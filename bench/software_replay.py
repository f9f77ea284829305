"""Eager runs vs graph replays on the software adapter: per-run microseconds and the eager/replay ratio.

MLPs of 8 and 32 layers (width 64, batch 1, MatMul+Add+Relu), through real onnxruntime (when importable) and
through epabi's emulated host, with inputs and outputs bound once through IOBinding. On the emulated host also
the replay without its stale-replay check (``epabi.graph_capture.on_binding_change=replay``, as ORT replays) and
the ratio checked/unchecked: what comparing the bindings costs a replay. Informational, not a test:

    python bench/software_replay.py [--runs 500] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

os.environ.setdefault("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")

from bound_mlp import bound_run_us

import epabi
from epabi.models import mlp


def _ort(model: bytes, graph: bool, runs: int) -> float | None:
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    dev = next(d for d in ort.get_ep_devices() if d.ep_name == epabi.get_ep_name())
    so = ort.SessionOptions()
    so.add_provider_for_devices([dev], {"enable_cuda_graph": "1" if graph else "0"})
    session = ort.InferenceSession(model, so, enable_fallback=0)
    return bound_run_us(ort, session, runs)


def _emulated(host: epabi.Host, model: Any, graph: bool, runs: int, policy: str = "error") -> float:
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {"enable_cuda_graph": "1" if graph else "0"})
    with epabi.InferenceSession(model, so) as session:
        return bound_run_us(epabi, session, runs, **{"epabi.graph_capture.on_binding_change": policy})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    registered = False
    try:
        import onnxruntime as ort

        ort.register_execution_provider_library("epabi", epabi.get_library_path())
        registered = True
    except ImportError:
        pass
    with epabi.Host(hardware=[epabi.cpu_device()]) as host:
        host.register_execution_provider_library("epabi", epabi.get_library_path())
        for layers in (8, 32):
            model = mlp(layers=layers, width=64, batch=1)
            for label, run in (("onnxruntime", lambda g, m=model: _ort(m.SerializeToString(), g, args.runs)),
                               ("emulated", lambda g, m=model: _emulated(host, m, g, args.runs))):
                eager, replay = run(False), run(True)
                if eager is None or replay is None:
                    continue
                row = {"model": f"mlp {layers}x64 batch 1", "host": label, "eager_us": round(eager, 1),
                       "replay_us": round(replay, 1), "eager_over_replay": round(eager / replay, 2)}
                if label == "emulated":
                    unchecked = _emulated(host, model, True, args.runs, "replay")
                    row["replay_unchecked_us"] = round(unchecked, 1)
                    row["checked_over_unchecked"] = round(replay / unchecked, 3)
                rows.append(row)
    if registered:
        import gc

        gc.collect()
        ort.unregister_execution_provider_library("epabi")
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'model':<20}{'host':<13}{'eager us':>10}{'replay us':>11}{'eager/replay':>14}{'unchecked us':>14}"
          f"{'checked/unchecked':>19}")
    for r in rows:
        extra = "" if "replay_unchecked_us" not in r else \
            f"{r['replay_unchecked_us']:>14}{r['checked_over_unchecked']:>18}x"
        print(f"{r['model']:<20}{r['host']:<13}{r['eager_us']:>10}{r['replay_us']:>11}{r['eager_over_replay']:>13}x"
              f"{extra}")


if __name__ == "__main__":
    main()
