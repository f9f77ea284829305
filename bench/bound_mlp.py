"""What bench/profiling_cost.py and bench/software_replay.py share: the median of timed calls, and the MLP's
runs with its input and output bound once through IOBinding under graph annotation id 1, on onnxruntime or on
epabi's emulated host (the same calls on either module)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np


def median_us(call: Callable[[], None], runs: int) -> float:
    """Median microseconds of ``runs`` calls, after 20 untimed ones (warm-up, and graph capture when on)."""
    for _ in range(20):
        call()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e6)


def bound_run_us(rt: Any, session: Any, runs: int, **run_config: str) -> float:
    """Median microseconds of ``session.run_with_iobinding`` on the MLP (input x and output y, float32 [1, 64],
    bound once; ``rt`` is onnxruntime or epabi) with run option ``gpu_graph_id=1`` and ``run_config``."""
    x = rt.OrtValue.ortvalue_from_numpy(np.random.default_rng(0).random((1, 64), np.float32))
    y = rt.OrtValue.ortvalue_from_numpy(np.zeros((1, 64), np.float32))
    binding = session.io_binding()
    binding.bind_ortvalue_input("x", x)
    binding.bind_ortvalue_output("y", y)
    ro = rt.RunOptions()
    ro.add_run_config_entry("gpu_graph_id", "1")
    for key, value in run_config.items():
        ro.add_run_config_entry(key, value)
    return median_us(lambda: session.run_with_iobinding(binding, ro), runs)
