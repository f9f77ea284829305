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
import re
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


@pytest.mark.parametrize("arch", ["90", "75"])
def test_cuda_kernels_compile_and_layouts_agree(arch: str) -> None:
    """For Hopper (where programmatic dependent launch compiles in) and for Turing (where its macros are no-ops and
    the headers' other branches compile)."""
    nvrtc = _nvrtc()
    if nvrtc is None:
        pytest.skip("no NVRTC (pip install nvidia-cuda-nvrtc, or a CUDA toolkit)")
    # the tool loads NVRTC only: keep a sanitizer pass's preload away (libnvrtc then misses its builtins library)
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    proc = subprocess.run([sys.executable, str(TOOL), "--nvrtc", nvrtc, "--arch", arch], capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "check_nvrtc: PASS" in proc.stdout
    assert "names: OK" in proc.stdout


KERNELS = Path(__file__).resolve().parents[1] / "native" / "cuda" / "cuda_kernels.cu"


def _kernel_bodies(source: str) -> list[tuple[str, str]]:
    """(name, the body's first 400 characters) of every EP_KERNEL definition (macro-made ones included)."""
    out = []
    for m in re.finditer(r"\bEP_KERNEL\b(\s*__launch_bounds__\s*\([^)]*\))?\s*([\w#]+)\s*\(", source):
        line_start = source.rfind("\n", 0, m.start()) + 1
        if source[line_start:m.start()].lstrip().startswith("#define"):
            continue
        depth, k = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(source[k], 0)
            k += 1
        brace = source.index("{", k)
        assert source[k:brace].strip() == "", f"{m.group(2)}: unexpected text before its body"
        out.append((m.group(2), source[brace + 1:brace + 400]))
    return out


def test_every_kernel_waits_for_its_predecessor_first() -> None:
    """Our kernels are launched with programmatic stream serialization on Hopper (cuda_launch.c), so each may start
    while the kernel before it runs: each must begin with EP_PDL_ENTER() (wait, then let the next one launch), or,
    for the linear kernels that read constant weights early, call a linear template that starts with lin_begin."""
    bodies = _kernel_bodies(KERNELS.read_text())
    assert len(bodies) > 60, f"only {len(bodies)} kernels found: the parser missed the file's conventions"
    missing = []
    for name, body in bodies:
        first = body.replace("\\", " ").split(";")[0].strip()
        if first == "EP_PDL_ENTER()":
            continue
        if first in ("linear_nn<R>(L)", "linear_nt<R>(L)"):
            continue
        missing.append(f"{name}: begins with {first!r}")
    assert not missing, missing
    source = KERNELS.read_text()
    for template in ("linear_nn", "linear_nt"):
        start = source.index(f"template <int R> EP_DEV void {template}(")
        body = source[start:source.index("\n}\n", start)]
        last = body.rstrip().splitlines()[-1].strip()
        assert "lin_begin(" in body and last.startswith("lin_wait(early);"), template
