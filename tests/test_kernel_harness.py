"""The standalone kernel harnesses (tests/native/README.md): every case passes, plain and under ASan + UBSan.

kernel_harness.c runs kernel_cases.py's math cases (float32 matmul, gemm, conv, pooling, softmax, layernorm,
reduce, batch/instance normalization, conv-transpose, lstm, linear resize; the unary, activation, comparison and Mod
kernels on their dtypes), also on a pool of threads with the built-in GEMM loop and with the scipy-openblas32 wheel's
CBLAS; shape_harness.c runs shape_cases.py's data-movement cases (transpose, reshape, squeeze/unsqueeze, identity,
expand, concat, slice, gather, shape, split, flatten, tile, pad, range, constant-of-shape, argmax/argmin, nearest
resize). Each harness is built from every native/kernels/*.c with
-std=c11 -Wall -Wextra -Werror, at -O2 and with -fsanitize=address,undefined (skipped where the compiler or the
machine cannot run sanitized code). Needs a C compiler ($CC, gcc or cc); skipped without one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "native"))
import harness_build
import kernel_cases
import shape_cases
import shape_check

NAMED, SHOWN = 100, 20  # failing cases an assertion message names, and describes in full


@pytest.fixture(scope="module")
def cc() -> str:
    found = harness_build.compiler()
    if found is None:
        pytest.skip("no C compiler ($CC, gcc or cc) to build the kernel harnesses")
    return found


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("harness_build")


@pytest.fixture(scope="module", params=["plain", "asan"])
def variant(request: pytest.FixtureRequest, cc: str, build_dir: Path) -> str:
    if request.param == "asan":
        problem = harness_build.sanitizer_problem(cc, build_dir / "probe")
        if problem is not None:
            pytest.skip(f"ASan + UBSan variant: {problem}")
    return request.param


def build(harness: str, variant: str, cc: str, build_dir: Path) -> Path:
    try:
        return harness_build.build(harness, variant, build_dir, cc=cc)
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


def report(harness: str, variant: str, total: int, failures: list[str]) -> str:
    """Names the failing cases (the harness's own failure first, when it died) and describes the first few."""
    names = [f.split(":", 1)[0] for f in failures if not f.startswith("<harness>")]
    more = f" and {len(names) - NAMED} more" if len(names) > NAMED else ""
    return (f"{harness} ({variant}): {len(names)} of {total} cases failed: {', '.join(names[:NAMED])}{more}\n\n"
            + "\n".join(f[:1500] for f in failures[:SHOWN]))


def test_kernel_harness_cases(variant: str, cc: str, build_dir: Path, tmp_path: Path) -> None:
    exe = build("kernel_harness", variant, cc, build_dir)
    cases = kernel_cases.all_cases()
    failures = kernel_cases.run_cases(exe, variant, cases, tmp_path)
    assert not failures, report("kernel_harness", variant, len(cases), failures)


@pytest.mark.parametrize("blas", ["builtin", "wheel"])
def test_kernel_harness_threaded(variant: str, cc: str, build_dir: Path, tmp_path: Path, blas: str) -> None:
    """The same cases on a pool of 3 threads with no minimum work size, so that MatMul, Gemm and Conv split their
    small products across threads; with the built-in GEMM loop and with the scipy-openblas32 wheel's CBLAS."""
    env = kernel_cases.variant_env("blas" if blas == "wheel" else variant, threaded=True)
    if env is None:
        pytest.skip("the scipy-openblas32 wheel is not installed")
    if blas == "wheel" and variant == "asan":
        env = dict(env, **harness_build.SANITIZER_ENV)
    exe = kernel_cases.build(variant, build_dir, threaded=True)
    cases = kernel_cases.all_cases()
    failures = kernel_cases.run_cases(exe, variant, cases, tmp_path, env=env)
    assert not failures, report("kernel_harness", f"{variant}, threads, {blas}", len(cases), failures)


def test_thread_pool_stress(cc: str, build_dir: Path) -> None:
    """native/kernels/thread_pool.c under ThreadSanitizer (plain where TSan cannot run): tests/native/pool_stress.c."""
    src = Path(__file__).parent / "native" / "pool_stress.c"
    pool = harness_build.NATIVE / "kernels" / "thread_pool.c"
    flags = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-g", f"-I{harness_build.NATIVE / 'kernels'}"]
    # a preloaded sanitizer runtime (CI's ASan pass of the plugin) would clash with TSan's
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}

    def run(exe: Path, extra: list[str]) -> subprocess.CompletedProcess[str] | None:
        built = subprocess.run([cc, *flags, *extra, str(src), str(pool), "-o", str(exe), "-lpthread"],
                               capture_output=True, text=True)
        if built.returncode != 0:
            return None
        return subprocess.run([str(exe)], capture_output=True, text=True, timeout=300, env=env)

    p = run(build_dir / "pool_stress_tsan", ["-fsanitize=thread"])
    if p is not None:
        assert "WARNING: ThreadSanitizer" not in p.stderr, p.stderr[-4000:]
    if p is None or p.returncode != 0:  # TSan cannot build or run here (a functional failure shows in plain too)
        p = run(build_dir / "pool_stress", [])
        assert p is not None, "pool_stress.c does not compile"
    assert p.returncode == 0 and p.stdout.startswith("ok "), (p.returncode, p.stdout[-2000:], p.stderr[-4000:])


def test_shape_harness_cases(variant: str, cc: str, build_dir: Path) -> None:
    exe = build("shape_harness", variant, cc, build_dir)
    cases = shape_cases.all_cases()
    failures = shape_check.run_cases(exe, cases, harness_build.harness_env(variant))
    assert not failures, report("shape_harness", variant, len(cases), failures)


def test_shape_harness_faults_on_data_read_in_run(cc: str, build_dir: Path) -> None:
    """The contract check is live: Reshape's shape input not marked readable in run() makes run() fault."""
    exe = build("shape_harness", "plain", cc, build_dir)
    bad = shape_check.Case("rs_shape_protected", "Reshape", 13,
                           [(np.zeros((3, 2), np.float32), ""), (np.array([2, 3], np.int64), "")])
    p = subprocess.run([str(exe)], input=shape_check.serialize(bad) + "\n", capture_output=True, text=True)
    assert p.returncode == 3, (p.returncode, p.stdout[-500:], p.stderr[-500:])
    assert "run() read non-shape input data" in p.stderr
