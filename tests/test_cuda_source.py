"""The CUDA kernels compile with NVRTC and their launch blocks have one layout on both sides (no GPU needed).

tools/check_nvrtc.py does the work: gcc's sizeof/offsetof of every block in native/kernels/launch_args.h must
equal the static_asserts NVRTC checks in native/cuda/cuda_kernels.cu; the source compiles for sm_90 (CUBIN) and
compute_90 (PTX) with the plugin's NVRTC options; every kernel the module looks up is defined. NVRTC comes from
the test extra (nvidia-cuda-nvrtc) or a CUDA toolkit; without one the test skips.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "check_nvrtc.py"


def _nvrtc() -> str | None:
    spec = importlib.util.spec_from_file_location("check_nvrtc", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = module.find_nvrtc(None)
    try:
        ctypes.CDLL(path)
    except OSError:
        return None
    return path


def test_cuda_kernels_compile_and_layouts_agree() -> None:
    nvrtc = _nvrtc()
    if nvrtc is None:
        pytest.skip("no NVRTC (pip install nvidia-cuda-nvrtc, or a CUDA toolkit)")
    # the tool loads NVRTC only: keep a sanitizer pass's preload away (libnvrtc then misses its builtins library)
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    proc = subprocess.run([sys.executable, str(TOOL), "--nvrtc", nvrtc], capture_output=True, text=True, timeout=600,
                          env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "check_nvrtc: PASS" in proc.stdout
    assert "names: OK" in proc.stdout
