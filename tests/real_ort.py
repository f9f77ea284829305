"""Real onnxruntime wheels as hosts for the plugin: one cached venv per release, scripts run inside it.

Each release lives in its own venv, ``$EPABI_VENV_DIR/ort-<version>`` (default ``$EPABI_CACHE_DIR/venvs``, that
is ``~/.cache/epabi/venvs``),
created on first use with ``python -m venv`` and ``pip install onnxruntime==<version>``. Creation holds an
exclusive lock file next to the venv and marks the venv incomplete until pip has finished, so concurrent
pytest processes neither build it twice nor use a half-built one.

Scripts run in that venv with :func:`run_in_ort`; they report back one JSON object on stdout through the
``emit`` function of :data:`PRELUDE` (a marked line, so ORT's own prints on stdout do not get in the way).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

import epabi

#: The onnxruntime releases the real-host tests use: the plugin's minimum (MIN_ONNXRUNTIME_VERSION), the
#: newest release checked, and one release older than the minimum, which the plugin must refuse.
ORT_VERSIONS = (MIN, NEWEST, TOO_OLD) = (epabi.read_min_onnxruntime_version(), "1.32.0", "1.23.2")

#: Prefix of the line that carries a script's JSON result on stdout.
RESULT_MARKER = "EPABI-RESULT-JSON: "

#: Environment variables of the outer process that must not leak into a host process unasked.
_SCRUBBED_ENV = ("EPABI_ALLOW_SOFTWARE_ADAPTER", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")

#: ``EPABI_REAL_ORT_SANITIZER=address`` (the ASan job of .ci/run, with the plugin built with EPABI_SANITIZE=ON):
#: every host process preloads the AddressSanitizer runtime (and libstdc++, for ASan's exception interceptor), so
#: a plugin bug such as a write into memory onnxruntime freed fails the script with ASan's report.
SANITIZER_ENV = "EPABI_REAL_ORT_SANITIZER"
#: Checked first in a sanitized host process: the runtime really is there.
_SANITIZER_CHECK = """
if "libasan" not in open("/proc/self/maps").read():
    sys.exit("EPABI_REAL_ORT_SANITIZER=address, but the AddressSanitizer runtime is not loaded")
"""

_INCOMPLETE = ".epabi-incomplete"
_PIP_TIMEOUT_S = 900

#: Python code put in front of every script: imports, ``EP_NAME`` and ``emit(**result)``.
PRELUDE = f'''
import json
import sys

import onnxruntime as ort

EP_NAME = {epabi.get_ep_name()!r}


def emit(**result):
    """Reports the script's result (JSON-serialisable keyword arguments) to the test process."""
    sys.stdout.write("\\n{RESULT_MARKER}" + json.dumps(result) + "\\n")
    sys.stdout.flush()


def describe(dev):
    """One OrtEpDevice as plain data."""
    hw = dev.device
    return {{
        "ep_name": dev.ep_name,
        "ep_vendor": dev.ep_vendor,
        "ep_metadata": dict(dev.ep_metadata),
        "ep_options": dict(dev.ep_options),
        "type": hw.type.name,
        "vendor": hw.vendor,
        "vendor_id": hw.vendor_id,
        "device_id": hw.device_id,
        "hw_metadata": dict(hw.metadata),
    }}
'''


class OrtVenvError(RuntimeError):
    """The venv for an onnxruntime release could not be created (typically: no network for pip)."""


def cache_root() -> Path:
    """The test suite's download cache (``EPABI_CACHE_DIR``, default ``~/.cache/epabi``): the real-onnxruntime
    venvs (``venvs/``) and the third-party plugins (``plugins/``) live below it unless ``EPABI_VENV_DIR`` or
    ``EPABI_PLUGIN_DIR`` move one of them."""
    return Path(os.environ.get("EPABI_CACHE_DIR", Path.home() / ".cache" / "epabi")).expanduser()


def venv_root() -> Path:
    """Folder holding the per-release venvs (``EPABI_VENV_DIR``, default ``$EPABI_CACHE_DIR/venvs``)."""
    return Path(os.environ.get("EPABI_VENV_DIR", cache_root() / "venvs")).expanduser()


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _is_ready(venv: Path, version: str) -> bool:
    """The venv has a python, onnxruntime==version is installed, and no creation is unfinished."""
    if not _venv_python(venv).exists() or (venv / _INCOMPLETE).exists():
        return False
    patterns = (f"lib/python*/site-packages/onnxruntime-{version}.dist-info",
                f"Lib/site-packages/onnxruntime-{version}.dist-info")
    return any(any(venv.glob(p)) for p in patterns)


@contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Holds an exclusive OS lock on ``path`` (created if missing) for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        if os.name == "nt":  # pragma: no cover - the project builds and tests on POSIX
            import msvcrt

            handle.seek(0)
            while True:
                try:
                    msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:
                    continue
            try:
                yield
            finally:
                handle.seek(0)
                msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _run_step(what: str, cmd: Sequence[str], log: Path) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_PIP_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OrtVenvError(f"{what} failed: {exc}") from exc
    with open(log, "a") as handle:
        handle.write(f"$ {' '.join(cmd)}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}\n")
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise OrtVenvError(f"{what} failed with exit code {proc.returncode} (full log: {log}):\n{tail}")


def _create(venv: Path, version: str) -> None:
    """Builds the venv in place; the marker file stays until pip has installed everything."""
    if venv.exists():
        shutil.rmtree(venv)
    venv.mkdir(parents=True)
    (venv / _INCOMPLETE).write_text(f"being created by pid {os.getpid()}\n")
    log = venv.parent / f"ort-{version}.log"
    log.write_text("")
    _run_step(f"python -m venv {venv}", [sys.executable, "-m", "venv", str(venv)], log)
    _run_step(f"pip install onnxruntime=={version} into {venv}",
              [str(_venv_python(venv)), "-m", "pip", "install", "-q", "--disable-pip-version-check",
               "--retries", "2", "--timeout", "60", f"onnxruntime=={version}"], log)
    (venv / _INCOMPLETE).unlink()
    if not _is_ready(venv, version):
        raise OrtVenvError(f"pip reported success but {venv} holds no onnxruntime {version}")


@functools.cache
def ort_python(version: str) -> Path:
    """Python executable of the venv holding ``onnxruntime==version``; creates the venv on first use.

    Raises:
        OrtVenvError: the venv could not be created (no network, no such release, pip failure).
    """
    venv = venv_root() / f"ort-{version}"
    if not _is_ready(venv, version):
        with exclusive_lock(venv_root() / f"ort-{version}.lock"):
            if not _is_ready(venv, version):  # another process may have built it while we waited
                _create(venv, version)
    return _venv_python(venv)


def require_ort_python(version: str) -> Path:
    """:func:`ort_python`, turning a failure into a test failure on CI (``CI`` set) and a skip elsewhere."""
    try:
        return ort_python(version)
    except OrtVenvError as exc:
        message = f"cannot provide onnxruntime {version} in a venv under {venv_root()}: {exc}"
    # Outside the except block, so the report is not cluttered with "during handling ... another exception".
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def host_env(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The outer environment without epabi's switches and Python path settings, plus ``env``.

    A value of None in ``env`` removes that variable.
    """
    out = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
    for key, value in (env or {}).items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


@functools.cache
def sanitizer_env() -> dict[str, str]:
    """The environment a host process gets in the ASan job (``EPABI_REAL_ORT_SANITIZER=address``), else {}.

    LD_PRELOAD: the compiler's libasan and libstdc++ (``$CC -print-file-name``); ASAN_OPTIONS: leaks are not
    checked (the interpreter keeps memory until exit), the first error ends the process with exit code 1.
    Raises RuntimeError when the mode is set but the compiler has no libasan, or for an unknown mode."""
    mode = os.environ.get(SANITIZER_ENV, "")
    if not mode:
        return {}
    if mode != "address":
        raise RuntimeError(f"{SANITIZER_ENV}={mode!r}: only 'address' is supported")
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or "cc"
    libs = []
    for name in ("libasan.so", "libstdc++.so"):
        path = subprocess.run([cc, f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
        if not os.path.isabs(path) or not os.path.exists(path):
            raise RuntimeError(f"{SANITIZER_ENV}=address: {cc} knows no {name} (got {path!r})")
        libs.append(os.path.realpath(path))
    return {"LD_PRELOAD": " ".join(libs),
            "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:exitcode=1",
            "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}


def run_in_ort(version: str, script: str, env: Mapping[str, str | None] | None = None,
               args: Sequence[str] = (), timeout: float = 120) -> tuple[int, str, str]:
    """Runs ``PRELUDE + script`` with the python of onnxruntime ``version``; returns (returncode, stdout, stderr).

    ``args`` become ``sys.argv[1:]`` of the script; ``env`` is applied with :func:`host_env`, after the ASan
    job's preloads (:func:`sanitizer_env`). A run that exceeds ``timeout`` seconds is killed and reported with
    return code -9.
    """
    python = require_ort_python(version)
    sanitized = sanitizer_env()
    cmd = [str(python), "-c", PRELUDE + (_SANITIZER_CHECK if sanitized else "") + script, *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=host_env({**sanitized, **(env or {})}),
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        def text(b: bytes | str | None) -> str:
            return b.decode("utf-8", "replace") if isinstance(b, bytes) else (b or "")

        return -9, text(exc.stdout), text(exc.stderr) + f"\n[timed out after {timeout} s]"
    return proc.returncode, proc.stdout, proc.stderr


def result_of(stdout: str) -> dict | None:
    """The JSON object of the last result line on ``stdout``, or None when the script emitted none."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            return json.loads(line[len(RESULT_MARKER):])
    return None


def run_json(version: str, script: str, env: Mapping[str, str | None] | None = None,
             args: Sequence[str] = (), timeout: float = 120) -> tuple[dict, str, str]:
    """:func:`run_in_ort` for a script that must exit 0 and emit a result; returns (result, stdout, stderr).

    Fails the test with the script's output when it crashed, exited non-zero or emitted nothing.
    """
    code, out, err = run_in_ort(version, script, env, args, timeout)
    result = result_of(out)
    if code != 0 or result is None:
        report = err.find("ERROR: AddressSanitizer")
        if report < 0:
            report = err.find("runtime error:")   # UBSan
        shown = err[max(report - 200, 0):report + 8000] if report >= 0 else err[-4000:]
        pytest.fail(f"script under onnxruntime {version} exited with {code} "
                    f"({'no result' if result is None else 'result: ' + json.dumps(result)})\n"
                    f"--- stdout\n{out[-4000:]}\n--- stderr\n{shown}", pytrace=False)
    return result, out, err


def run_json_on_gpu(script: str, args: Sequence[str], timeout: float = 600) -> tuple[dict, str]:
    """``PRELUDE + script`` under this interpreter's own onnxruntime, on the GPUs (no software adapter, CUDA
    discovery on); returns (result, stderr). Fails the test when the script crashed or emitted nothing, skips it
    when the script emitted ``skip`` (no GPU EP device), with the devices it saw."""
    proc = subprocess.run([sys.executable, "-c", PRELUDE + script, *args], capture_output=True, text=True,
                          timeout=timeout,
                          env=host_env({"EPABI_ALLOW_SOFTWARE_ADAPTER": "0", "EPABI_CUDA_DISCOVERY": "1"}))
    result = result_of(proc.stdout)
    if proc.returncode != 0 or result is None:
        pytest.fail(f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}", pytrace=False)
    if "skip" in result:
        pytest.skip(f"{result['skip']}: {json.dumps(result.get('devices'))}")
    return result, proc.stderr
