"""``epabi bench``: the GPU graph-replay table of an epabi checkout's ``bench/graph_replay.py``, run with this
interpreter: per model (MLPs of 8 and 32 layers, magika, the YOLO and OCR detectors) eager and replayed runs through
epabi's host and real onnxruntime, kernels per replay, the unfused and fused CUDA-graph floors, PyTorch's eager and
replayed runs, their ratios and a summary table (``bench/README.md``).

The script is found as ``--script PATH``, else as ``bench/graph_replay.py`` in the working directory or one of its
parents, else next to this package's source folder (an editable install). Without an NVIDIA GPU (no driver, or no
device: ``epabi.hardware.cuda_gpu_count()`` is 0) the command says so and exits 1: the table measures GPU replays
(the software adapter's counterparts are ``bench/software_replay.py`` and ``bench/software_adapter.py``). Otherwise
its exit status is the script's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import hardware
from .cmd_common import CliError

SCRIPT = Path("bench") / "graph_replay.py"


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Adds the ``bench`` subcommand to the ``epabi`` parser (``common``'s host options do not apply to it)."""
    del common
    bench = sub.add_parser("bench", help="time CUDA-graph replays on the GPU against the floors and PyTorch",
                           description="Run bench/graph_replay.py of an epabi checkout (GPU only; exits 1 without "
                                       "an NVIDIA GPU).")
    bench.add_argument("--runs", type=int, default=1000, help="timed runs per measurement (default 1000)")
    bench.add_argument("--model-runs", type=int, default=200, help="timed runs of the detectors (default 200)")
    bench.add_argument("--fused-gemm", choices=("0", "1"), default="1",
                       help="EP option fused_gemm of epabi's sessions (default 1)")
    bench.add_argument("--json", action="store_true", help="print the rows as JSON")
    bench.add_argument("--keep-build", metavar="DIR", help="build the floor harnesses in DIR")
    bench.add_argument("--script", metavar="PATH", help="the graph_replay.py to run (default: found, see above)")
    bench.set_defaults(func=cmd_bench)


def find_script(explicit: str | None) -> Path:
    """The bench script to run; CliError when there is none."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise CliError(f"--script {explicit}: no such file")
        return path
    here = Path.cwd().resolve()
    for folder in (here, *here.parents, Path(__file__).resolve().parents[2]):
        if (folder / SCRIPT).is_file():
            return folder / SCRIPT
    raise CliError(f"{SCRIPT} was not found in {here} or its parents: run from an epabi checkout or pass "
                   "--script PATH")


def cmd_bench(args: argparse.Namespace) -> int:
    """Runs the table; returns the script's exit status."""
    if hardware.cuda_gpu_count() == 0:
        raise CliError("no NVIDIA GPU with a working driver (libcuda.so.1 and cuDeviceGetCount): the graph-replay "
                       "table runs on the GPU; on the CPU software adapter run bench/software_replay.py")
    script = find_script(args.script)
    cmd = [sys.executable, str(script), "--runs", str(args.runs), "--model-runs", str(args.model_runs),
           "--fused-gemm", args.fused_gemm]
    if args.json:
        cmd.append("--json")
    if args.keep_build:
        cmd += ["--keep-build", args.keep_build]
    return subprocess.run(cmd, check=False).returncode
