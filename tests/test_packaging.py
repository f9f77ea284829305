"""What an installed package offers C users and packagers: the ABI header, the CMake package config, the plugin
library, found from a wheel install and from an editable one alike."""

from __future__ import annotations

import shutil
import subprocess
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
