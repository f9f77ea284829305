"""Builds tests/plugins/misbehaving_plugin.c into one shared library per misbehaviour flag (cached per session)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from epabi._ffi import header_path

SOURCE = Path(__file__).parent / "plugins" / "misbehaving_plugin.c"


def build_plugin(out_dir: Path, flag: str | None) -> Path:
    """Compiles the test plugin with ``-D<flag>`` (None: well behaved); returns the .so path.

    Raises:
        RuntimeError: no C compiler, or the build failed (with the compiler's output).
    """
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise RuntimeError("no C compiler (cc/gcc/clang) on PATH to build the test plugins")
    lib = out_dir / f"libmisbehaving_{(flag or 'good').lower()}.so"
    include = header_path().parent.parent
    cmd = [cc, "-std=c11", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror",
           f"-I{include}", str(SOURCE), "-o", str(lib)]
    if flag:
        cmd.insert(1, f"-D{flag}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building the test plugin with {flag} failed:\n{proc.stderr}")
    return lib
