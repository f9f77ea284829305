"""Real third-party plugin EPs from PyPI, for the host-fidelity tests: fetched once and cached like the ORT venvs.

``plugin_library(name)`` downloads the plugin's wheel (``pip download --no-deps``) into ``$EPABI_PLUGIN_DIR``
(default ``$EPABI_CACHE_DIR/plugins``, that is ``~/.cache/epabi/plugins``), unpacks it there with the wheel's own
layout (so the library's RPATH finds the libraries bundled beside it) and returns the plugin library's path.
Unpacking holds an exclusive lock and marks the folder incomplete until it is done, so concurrent pytest processes
neither fetch twice nor use a half-unpacked plugin. Without network: a skip locally, a failure in CI (``CI`` set).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from real_ort import cache_root, exclusive_lock

_INCOMPLETE = ".epabi-incomplete"


@dataclass(frozen=True)
class Plugin:
    requirement: str     # what pip downloads
    ep_name: str         # the EP name its factory reports
    library: str         # the plugin library, relative to the unpacked wheel


PLUGINS = {
    "webgpu": Plugin("onnxruntime-ep-webgpu==0.4.0", "WebGpuExecutionProvider",
                     "onnxruntime_ep_webgpu/libonnxruntime_providers_webgpu.so"),
    "openvino": Plugin("onnxruntime-ep-openvino==1.8.1", "OpenVINOExecutionProvider",
                       "onnxruntime_ep_openvino/libonnxruntime_providers_openvino_plugin.so"),
    "ggml": Plugin("onnxruntime-ggml==0.2.0", "ggml", "onnxruntime_ggml/lib/libonnxruntime_ggml.so"),
}


class PluginFetchError(RuntimeError):
    """The plugin's wheel could not be downloaded or unpacked (typically: no network)."""


def plugin_root() -> Path:
    return Path(os.environ.get("EPABI_PLUGIN_DIR", cache_root() / "plugins")).expanduser()


def _fetch(folder: Path, plugin: Plugin) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / _INCOMPLETE).write_text(f"being fetched by pid {os.getpid()}\n")
    wheels = folder / "wheel"
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--disable-pip-version-check",
           "--only-binary=:all:", "--retries", "2", "--timeout", "60", "-d", str(wheels), plugin.requirement]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    found = sorted(wheels.glob("*.whl")) if wheels.exists() else []
    if proc.returncode != 0 or len(found) != 1:
        raise PluginFetchError(f"pip download {plugin.requirement} failed ({proc.returncode}): "
                               f"{(proc.stdout + proc.stderr).strip()[-1500:]}")
    with zipfile.ZipFile(found[0]) as wheel:
        for info in wheel.infolist():
            path = wheel.extract(info, folder / "site")
            mode = info.external_attr >> 16
            if mode:
                os.chmod(path, mode)
    shutil.rmtree(wheels)
    (folder / _INCOMPLETE).unlink()


def plugin_library(name: str) -> Path:
    """Path of the plugin library of ``PLUGINS[name]``, fetched on first use.

    Raises:
        PluginFetchError: the wheel could not be fetched, or it holds no such library.
    """
    plugin = PLUGINS[name]
    folder = plugin_root() / plugin.requirement.replace("==", "-")
    library = folder / "site" / plugin.library
    if not library.is_file() or (folder / _INCOMPLETE).exists():
        with exclusive_lock(plugin_root() / f"{name}.lock"):
            if not library.is_file() or (folder / _INCOMPLETE).exists():
                _fetch(folder, plugin)
    if not library.is_file():
        raise PluginFetchError(f"{plugin.requirement} unpacked to {folder} holds no {plugin.library}")
    return library


#: Plugins that cannot run in a process with AddressSanitizer preloaded (CI's sanitizer pass), and why.
_NOT_UNDER_ASAN = {
    "openvino": "OpenVINO's TBB loads libtbbbind with RTLD_DEEPBIND, which AddressSanitizer refuses",
}


def require_plugin(name: str) -> Path:
    """:func:`plugin_library`, turning a failure into a test failure on CI and a skip elsewhere; skips a plugin that
    cannot run under the AddressSanitizer runtime when it is preloaded."""
    if name in _NOT_UNDER_ASAN and "libasan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip(f"{name} under AddressSanitizer: {_NOT_UNDER_ASAN[name]}")
    try:
        return plugin_library(name)
    except (PluginFetchError, OSError, subprocess.TimeoutExpired) as exc:
        message = f"cannot provide the {name} plugin EP under {plugin_root()}: {exc}"
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)
