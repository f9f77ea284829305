"""tests/native/graph_capture_unit.c: native/stream.c, graph_capture.c and the arena's capture pools against a
fake OrtApi (nesting, duplicate and missing ids, aborted and failed captures, replay of recorded argument
copies, annotation-id parsing, user-stream adoption, attach/detach).

Built as its header says (graph_capture_unit.c + stream.c graph_capture.c arena.c api.c, -D_GNU_SOURCE,
-lpthread), with harness_build's -std=c11 -Wall -Wextra -Werror flags, at -O2, under ASan + UBSan and under
TSan (skipped where the compiler or the machine cannot run sanitized code). It must exit 0 and print "all unit checks
passed". Needs a C compiler ($CC, gcc or cc); skipped without one. Takes well under a second per variant.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "native"))
import harness_build

UNIT = harness_build.HERE / "graph_capture_unit.c"
#: The plugin files the unit links (its header's build command).
SOURCES = [UNIT, *(harness_build.NATIVE / name for name in ("stream.c", "graph_capture.c", "thread_context.c",
                                                         "capture_policy.c", "ep_profiler.c", "arena.c",
                                                         "alloc_registry.c", "api.c"))]


@pytest.fixture(scope="module")
def cc() -> str:
    found = harness_build.compiler()
    if found is None:
        pytest.skip("no C compiler ($CC, gcc or cc) to build graph_capture_unit.c")
    return found


TSAN = ["-O1", "-g", "-fsanitize=thread"]


def _tsan_problem(cc: str, tmp_path: Path) -> str | None:
    probe = tmp_path / "tsan_probe.c"
    probe.write_text("#include <pthread.h>\nstatic void* f(void* p) { return p; }\n"
                     "int main(void) { pthread_t t; pthread_create(&t, 0, f, 0); return pthread_join(t, 0); }\n")
    exe = tmp_path / "tsan_probe"
    p = subprocess.run([cc, *TSAN, str(probe), "-lpthread", "-o", str(exe)], capture_output=True, text=True)
    if p.returncode != 0:
        return "the compiler cannot build with -fsanitize=thread"
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    return None if p.returncode == 0 else f"ThreadSanitizer programs do not run here ({p.stderr.strip()[:120]})"


@pytest.mark.parametrize("variant", ["plain", "asan", "tsan"])
def test_graph_capture_unit(variant: str, cc: str, tmp_path: Path) -> None:
    if variant == "asan":
        problem = harness_build.sanitizer_problem(cc, tmp_path / "probe")
        if problem is not None:
            pytest.skip(f"ASan + UBSan variant: {problem}")
    if variant == "tsan":  # the per-thread contexts and their release from other threads
        problem = _tsan_problem(cc, tmp_path)
        if problem is not None:
            pytest.skip(f"ThreadSanitizer variant: {problem}")
    flags = TSAN if variant == "tsan" else harness_build.VARIANTS[variant]
    exe = tmp_path / f"graph_capture_unit_{variant}"
    cmd = [cc, *harness_build.COMMON, "-D_GNU_SOURCE", *flags,
           *(str(s) for s in SOURCES), "-lpthread", "-o", str(exe)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, f"graph_capture_unit.c ({variant}) does not build:\n$ {' '.join(cmd)}\n{p.stderr[-6000:]}"

    env = harness_build.harness_env("plain" if variant == "tsan" else variant)
    if variant == "tsan":
        env["TSAN_OPTIONS"] = "halt_on_error=1"
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, env=env)
    output = f"--- stdout\n{p.stdout[-6000:]}\n--- stderr\n{p.stderr[-6000:]}"
    assert p.returncode == 0, f"graph_capture_unit ({variant}) exited with {p.returncode}\n{output}"
    failures = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
    assert failures == [], output
    assert "all unit checks passed" in p.stdout, output
