"""What the WebGPU plugin EP needs on a machine without a GPU: a Vulkan driver whose adapter Dawn accepts.

On CPU-only Linux that is Mesa's lavapipe. Debian 12's ``mesa-vulkan-drivers`` 22.3 (Vulkan 1.1) is not enough:
Dawn refuses its adapter ("Vulkan shaderUniform*ArrayDynamicIndexing required"), so the plugin lists its device
but ``CreateEp`` fails with "Failed to get a WebGPU adapter: No supported adapters". 25.x from
bookworm-backports works (``.ci/run`` installs it where it can). :func:`require_webgpu` skips a test, with the
reason, when that is missing, and fails it in CI when ``.ci/run`` reported lavapipe installed.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from real_ort import result_of

#: Environment the WebGPU plugin needs to offer its device on the CPU hardware device.
WEBGPU_ENV = {"ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER": "1"}
_ICD_DIRS = ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d",
             str(Path.home() / ".local/share/vulkan/icd.d"))
_INSTALL = ("install Mesa's lavapipe 25.x (Debian 12: add 'deb http://deb.debian.org/debian bookworm-backports main' "
            "and apt-get install -t bookworm-backports mesa-vulkan-drivers)")

_PROBE = '''
import json, sys
import numpy as np
import epabi
from epabi.models import mlp
try:
    with epabi.Host() as host:
        host.register_execution_provider_library("webgpu", sys.argv[1])
        so = epabi.SessionOptions()
        so.add_provider_for_devices(host.get_ep_devices())
        with epabi.InferenceSession(mlp(layers=1, width=4).SerializeToString(), so) as sess:
            sess.run(None, {"x": np.ones((1, 4), np.float32)})
    print("EPABI-RESULT-JSON: " + json.dumps({"ok": True}))
except Exception as exc:
    print("EPABI-RESULT-JSON: " + json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
'''


def vulkan_icds() -> list[Path]:
    """The Vulkan driver manifests the loader would use (``VK_DRIVER_FILES``/``VK_ICD_FILENAMES``, else the
    standard folders)."""
    listed = os.environ.get("VK_DRIVER_FILES") or os.environ.get("VK_ICD_FILENAMES")
    entries = [Path(p) for p in listed.split(os.pathsep) if p] if listed else [Path(d) for d in _ICD_DIRS]
    found: list[Path] = []
    for entry in entries:
        found += sorted(entry.glob("*.json")) if entry.is_dir() else [entry] if entry.is_file() else []
    return found


def _describe(icds: list[Path]) -> str:
    parts = []
    for icd in icds:
        try:
            api = json.loads(icd.read_text())["ICD"].get("api_version", "?")
        except (OSError, ValueError, KeyError, TypeError):
            api = "unreadable"
        parts.append(f"{icd} (Vulkan {api})")
    return ", ".join(parts)


@functools.cache
def _missing(plugin: str) -> str | None:
    """Why WebGPU cannot run here (None: it can). A probe failure other than a missing adapter is no reason to
    skip: the tests then run and report it."""
    try:
        ctypes.CDLL("libvulkan.so.1")
    except OSError:
        return f"no Vulkan loader (libvulkan.so.1): {_INSTALL}"
    icds = vulkan_icds()
    if not icds:
        return f"no Vulkan driver manifest in {', '.join(_ICD_DIRS)}: {_INSTALL}"
    proc = subprocess.run([sys.executable, "-c", _PROBE, plugin], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **WEBGPU_ENV})
    result = result_of(proc.stdout) or {}
    error = result.get("error", "")
    if "No supported adapters" in error or "Failed to get a WebGPU adapter" in error:
        return f"the Vulkan drivers here give WebGPU no adapter ({_describe(icds)}): {_INSTALL}"
    return None


def require_webgpu(plugin: Path) -> dict[str, str]:
    """The environment to run the WebGPU plugin with; skips (fails in CI) when this machine cannot run it."""
    reason = _missing(str(plugin))
    if reason is not None:
        # CI fails only when .ci/run installed lavapipe (EPABI_CI_LAVAPIPE=installed): then WebGPU must run
        lavapipe = os.environ.get("EPABI_CI_LAVAPIPE", "")
        if os.environ.get("CI") and lavapipe == "installed":
            pytest.fail(reason, pytrace=False)
        pytest.skip(f"{reason} (lavapipe in CI: {lavapipe})" if lavapipe else reason)
    return dict(WEBGPU_ENV)
