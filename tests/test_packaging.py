"""What an installed package offers C users and packagers: the ABI header, the CMake package config, the plugin
library, found from a wheel install and from an editable one alike."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import epabi

ROOT = Path(__file__).resolve().parents[1]


def test_get_include_holds_the_header_the_plugin_was_built_with() -> None:
    header = Path(epabi.get_include()) / "epabi" / "ort_abi.h"
    assert header.read_text() == (ROOT / "native" / "include" / "epabi" / "ort_abi.h").read_text()


def test_cmake_package_config_gives_the_targets_and_paths(tmp_path: Path) -> None:
    if shutil.which("cmake") is None:
        pytest.skip("no cmake")
    assert (Path(epabi.get_cmake_dir()) / "epabiConfigVersion.cmake").is_file()
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(probe NONE)\n"
        "find_package(epabi 0.1 CONFIG REQUIRED)\n"
        "get_target_property(inc epabi::headers INTERFACE_INCLUDE_DIRECTORIES)\n"
        "get_target_property(lib epabi::plugin IMPORTED_LOCATION)\n"
        'message(STATUS "probe|${epabi_VERSION}|${inc}|${lib}|${epabi_PLUGIN_LIBRARY}|${epabi_EP_NAME}|'
        '${epabi_MIN_ONNXRUNTIME_VERSION}")\n')
    proc = subprocess.run(["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "b"),
                           f"-Depabi_DIR={epabi.get_cmake_dir()}"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if "probe|" in x)
    version, inc, lib, lib_var, ep, minimum = line.split("probe|")[1].split("|")
    assert (version, inc, ep, minimum) == (epabi.__version__, epabi.get_include(), epabi.get_ep_name(),
                                           epabi.read_min_onnxruntime_version())
    assert Path(lib) == Path(lib_var) == Path(epabi.get_library_path())
    # a newer major version than installed is refused
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(probe NONE)\nfind_package(epabi 9.0 CONFIG REQUIRED)\n")
    proc = subprocess.run(["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "c"),
                           f"-Depabi_DIR={epabi.get_cmake_dir()}"], capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "9.0" in proc.stdout + proc.stderr


def test_relative_library_path_works_with_the_onnxruntime_host() -> None:
    # onnxruntime resolves a relative path against its own package folder; `run` hands it an absolute one
    pytest.importorskip("onnxruntime")
    library = Path(epabi.get_library_path())
    relative = Path(library.parent.name) / library.name
    proc = subprocess.run([sys.executable, "-m", "epabi", "run", "--host", "onnxruntime", "--library", str(relative),
                           "--json", "--cpu-only", "--runs", "1"], cwd=library.parent.parent, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["providers"][0] == epabi.get_ep_name()
    assert set(doc["placement"].values()) == {epabi.get_ep_name()}


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0] for r in requirements}


def test_cuda_extras_bring_every_library_the_cuda_backend_loads() -> None:
    extras = _pyproject()["project"]["optional-dependencies"]
    source = (ROOT / "native" / "cuda" / "cuda_libs.c").read_text()
    loaded = set(re.findall(r'"lib(nvrtc|cudart|cublas)\.so\.1[23]"', source))
    assert loaded == {"nvrtc", "cudart", "cublas"}
    wheel = {"nvrtc": "nvidia-cuda-nvrtc", "cudart": "nvidia-cuda-runtime", "cublas": "nvidia-cublas"}
    for extra, suffix, cupy in (("cuda12", "-cu12", "cupy-cuda12x"), ("cuda13", "", "cupy-cuda13x")):
        assert _names(extras[extra]) == {wheel[lib] + suffix for lib in loaded} | {cupy}, extra
    assert _names(extras["onnxruntime"]) == {"onnxruntime"}
    # what `inspect` needs is a dependency of its own, not of the test extra
    assert "pyelftools" in _names(_pyproject()["project"]["dependencies"])


_OFFLINE = ("No matching distribution", "Could not find a version", "Network is unreachable",
            "Temporary failure in name resolution", "ConnectionError", "Max retries exceeded")

# Run from a folder outside the checkout, so that nothing but the installed package is imported.
_CHECK = '''
import importlib.util, json, subprocess, sys, sysconfig
from pathlib import Path
import epabi
site = Path(sysconfig.get_paths()["purelib"]).resolve()
lib = Path(epabi.get_library_path())
assert lib.is_relative_to(site), (lib, site)
assert (Path(epabi.get_include()) / "epabi" / "ort_abi.h").is_file()
assert (Path(epabi.get_cmake_dir()) / "epabiConfig.cmake").is_file()
assert importlib.util.find_spec("onnxruntime") is None and importlib.util.find_spec("pytest") is None
inspect = subprocess.run([sys.executable, "-m", "epabi", "inspect", str(lib), "--json"], capture_output=True,
                         text=True, check=True)
run = subprocess.run([sys.executable, "-m", "epabi", "run", "--json", "--runs", "1"], capture_output=True,
                     text=True, check=True)
print(json.dumps({"package": str(Path(epabi.__file__).resolve().parent),
                  "exports": json.loads(inspect.stdout)["exports"], "providers": json.loads(run.stdout)["providers"]}))
'''


@pytest.mark.venv
def test_editable_and_plain_installs_work_in_a_fresh_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "EPABI_ALLOW_SOFTWARE_ADAPTER")}

    def pip_install(*args: str) -> None:
        proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
                              capture_output=True, text=True, timeout=1200, env=env, check=False)
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr)[-3000:]
            if any(marker in tail for marker in _OFFLINE) and not os.environ.get("CI"):
                pytest.skip(f"pip could not reach the package index: {tail[-500:]}")
            pytest.fail(f"pip install {' '.join(args)} failed:\n{tail}", pytrace=False)

    def check() -> dict:
        proc = subprocess.run([str(python), "-c", _CHECK], capture_output=True, text=True, timeout=300, env=env,
                              cwd=tmp_path, check=False)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result["exports"] == ["CreateEpFactories", "ReleaseEpFactory"]
        assert result["providers"][0] == epabi.get_ep_name()
        return result

    pip_install("-e", str(ROOT))   # the Python files stay in the checkout, the library goes to site-packages
    assert Path(check()["package"]) == ROOT / "python" / "epabi"
    pip_install(str(ROOT))         # a plain install replaces it: everything in site-packages
    assert Path(check()["package"]).parent.name == "site-packages"
