"""Builds the standalone kernel harnesses (kernel_harness.c, shape_harness.c) with the C compiler.

Both harnesses link the shared executor stub (exec_stub.c: epabi_exec_*, epabi_attr_*, the OrtStatus behind
native/api.c's epabi_error), native/api.c and every file in native/kernels/ (family files, tensor_util.c,
strided_copy.c, registry.c): a kernel may start using another helper file without a change here. registry.c
declares the families weak, and the kernel harness looks kernels up through it; the shape harness references
its families directly. Objects are compiled in parallel into BUILD_DIR/obj-<label>-<hash of the flags>/ and
reused while they are newer than their source and every header under native/ and tests/native/, so the
harnesses of one variant share them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "tests" / "native"
NATIVE = ROOT / "native"

COMMON = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-g",
          f"-I{NATIVE / 'include'}", f"-I{NATIVE}", f"-I{NATIVE / 'kernels'}"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
VARIANTS = {
    "plain": ["-O2"],
    "asan": ["-O1", *SANITIZE],
    "opt": ["-O3", "-march=native"],
}
# detect_stack_use_after_return: a launch whose args point into run()'s stack faults.
SANITIZER_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1",
    "UBSAN_OPTIONS": "print_stacktrace=1",
}

STUB = [HERE / "exec_stub.c", NATIVE / "api.c"]
HARNESSES = {
    # name: (main file, extra sources, libraries)
    "kernel_harness": (HERE / "kernel_harness.c", STUB, ["-lm", "-ldl", "-lpthread"]),
    "shape_harness": (HERE / "shape_harness.c", STUB, ["-lm", "-ldl", "-lpthread"]),
}


def compiler() -> str | None:
    """$CC, else gcc, else cc; None when there is none."""
    cc = os.environ.get("CC")
    if cc:
        return shutil.which(cc) or (cc if Path(cc).is_file() else None)
    return shutil.which("gcc") or shutil.which("cc")


def kernel_sources() -> list[Path]:
    return sorted((NATIVE / "kernels").glob("*.c"))


def sanitizer_problem(cc: str, build_dir: Path) -> str | None:
    """Why the ASan + UBSan variant cannot run here (None when it can): compiles, links and runs a stub."""
    build_dir.mkdir(parents=True, exist_ok=True)
    src, exe = build_dir / "sanitizer_probe.c", build_dir / "sanitizer_probe"
    src.write_text("#include <stdlib.h>\nint main(void) { char* p = malloc(4); p[0] = 0; free(p); return 0; }\n")
    p = subprocess.run([cc, *SANITIZE, str(src), "-o", str(exe)], capture_output=True, text=True)
    if p.returncode != 0:
        return f"{cc} cannot build with {' '.join(SANITIZE)}: {p.stderr.strip()[-500:]}"
    p = subprocess.run([str(exe)], capture_output=True, text=True, env=dict(os.environ, **SANITIZER_ENV))
    if p.returncode != 0:
        return f"a sanitized stub does not run here (exit {p.returncode}): {p.stderr.strip()[-500:]}"
    return None


def _newest_header() -> float:
    headers = [*NATIVE.rglob("*.h"), *HERE.glob("*.h")]
    return max((h.stat().st_mtime for h in headers), default=0.0)


def _compile(cc: str, flags: Sequence[str], src: Path, obj: Path, newest_header: float) -> tuple[Path, str | None]:
    if obj.exists() and obj.stat().st_mtime >= max(src.stat().st_mtime, newest_header):
        return obj, None
    tmp = obj.with_name(f"{obj.name}.{os.getpid()}.tmp")  # renamed into place: a concurrent build never links half
    p = subprocess.run([cc, *flags, "-c", str(src), "-o", str(tmp)], capture_output=True, text=True)
    if p.returncode != 0:
        tmp.unlink(missing_ok=True)
        return obj, p.stderr
    os.replace(tmp, obj)
    return obj, None


def build(harness: str, variant: str, build_dir: Path, cc: str | None = None, extra_flags: Sequence[str] = (),
          extra_libs: Sequence[str] = (), label: str | None = None) -> Path:
    """Builds tests/native/<harness>.c with a variant's flags (plus extra_flags) into build_dir and returns
    build_dir/<harness>_<label or variant>. Raises RuntimeError with the compiler's messages when a file does
    not compile or link."""
    cc = cc or compiler()
    if cc is None:
        raise RuntimeError("no C compiler (set CC, or install gcc)")
    main, extra, libs = HARNESSES[harness]
    flags = [*COMMON, *VARIANTS[variant], *extra_flags]
    tag = hashlib.sha1(" ".join([cc, *flags]).encode()).hexdigest()[:8]
    label = label or variant
    objdir = Path(build_dir) / f"obj-{label}-{tag}"
    objdir.mkdir(parents=True, exist_ok=True)
    sources = [main, *extra, *kernel_sources()]
    newest = _newest_header()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(
            lambda s: _compile(cc, flags, s, objdir / (s.relative_to(ROOT).as_posix().replace("/", "__") + ".o"),
                               newest), sources))
    errors = [err for _, err in results if err]
    if errors:
        raise RuntimeError(f"{harness} ({label}) does not compile:\n" + "\n".join(errors)[-6000:])
    exe = Path(build_dir) / f"{harness}_{label}"
    p = subprocess.run([cc, *flags, *(str(o) for o, _ in results), "-o", str(exe), *extra_libs, *libs],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{harness} ({label}) does not link:\n{p.stderr[-6000:]}")
    return exe


# The kernels' threaded paths (thread_pool.h) on their small cases: a process-wide pool of this many threads in the
# executor stub, and no size below which work stays on one thread.
THREADED_FLAGS = ["-DEPABI_PARALLEL_MIN_MACS=1", "-DEPABI_PARALLEL_MIN_ELEMS=1", "-DEPABI_CONV_MIN_TILE=1"]
THREADED_ENV = {"EPABI_HARNESS_THREADS": "3"}


def harness_env(variant: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ, **SANITIZER_ENV) if variant == "asan" else dict(os.environ)
    return dict(env, **(extra or {}))


def wheel_blas() -> str | None:
    """The scipy-openblas32 wheel's library (the plugin's default CBLAS, kernels/blas.h), None when not installed."""
    try:
        import scipy_openblas32
    except ImportError:
        return None
    lib = Path(scipy_openblas32.get_lib_dir()) / "libscipy_openblas.so"
    return str(lib) if lib.is_file() else None
