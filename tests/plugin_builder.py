"""Builds the test plugins in tests/plugins/: misbehaving_plugin.c into one shared library per misbehaviour flag,
kernel_plugin.c (a kernel-registry EP, configured by environment variables) into one, and trace_shim.c (a plugin
library that loads another and records the calls between it and its host) into one."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from epabi._ffi import header_path

SOURCE = Path(__file__).parent / "plugins" / "misbehaving_plugin.c"
#: Flags that are link options rather than (only) defines.
_LINK_FLAGS = {"NODELETE": ["-Wl,-z,nodelete"]}
KERNEL_SOURCE = Path(__file__).parent / "plugins" / "kernel_plugin.c"
TRACE_SHIM_SOURCE = Path(__file__).parent / "plugins" / "trace_shim.c"


def build_plugin(out_dir: Path, flag: str | None) -> Path:
    """Compiles the misbehaving test plugin with ``-D<flag>`` (None: well behaved); returns the .so path.

    Raises:
        RuntimeError: no C compiler, or the build failed (with the compiler's output).
    """
    return _build(SOURCE, out_dir / f"libmisbehaving_{(flag or 'good').lower()}.so", flag)


def build_kernel_plugin(out_dir: Path) -> Path:
    """Compiles the kernel-registry test plugin ("KregEp"); returns the .so path. Raises as :func:`build_plugin`."""
    return _build(KERNEL_SOURCE, out_dir / "libkreg.so", None)


def build_trace_shim(out_dir: Path) -> Path:
    """Compiles the tracing shim (``EPABI_TRACE_PLUGIN``, ``EPABI_TRACE_FILE``); returns the .so path. Raises as
    :func:`build_plugin`. Load one copy (file) of it per host: it keeps one host's tables per loaded copy."""
    return _build(TRACE_SHIM_SOURCE, out_dir / "libtrace_shim.so", None, libs=("-ldl", "-pthread"))


def _build(source: Path, lib: Path, flag: str | None, libs: tuple[str, ...] = ()) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise RuntimeError("no C compiler (cc/gcc/clang) on PATH to build the test plugins")
    include = header_path().parent.parent
    cmd = [cc, "-std=c11", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror",
           f"-I{include}", str(source), "-o", str(lib), *libs]
    if flag:
        cmd.insert(1, f"-D{flag}")
        cmd += _LINK_FLAGS.get(flag, [])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building the test plugin with {flag} failed:\n{proc.stderr}")
    return lib
