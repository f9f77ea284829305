"""cuDNN's loader (native/cuda/cuda_cudnn_load.c) without a GPU: tests/native/cudnn_loader_unit.c loads cuDNN as the
plugin does, pointed by EPABI_CUDNN_LIB_DIR at folders of fake libcudnn.so.9 builds made here (each exports the
symbols the loader resolves, read from its source, as stubs): an empty folder, a library lacking one symbol, one
reporting cuDNN 8, a complete cuDNN 9 with two sub-libraries beside it, and EPABI_CUDNN=0. Each is reported with the
reason the plugin logs, or with the version and path. Needs a C compiler ($CC, gcc or cc); skipped without one.
The real cuDNN runs in tests/test_gpu_cudnn.py (-m gpu).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import epabi

sys.path.insert(0, str(Path(__file__).resolve().parent / "native"))
import harness_build

LOADER = harness_build.NATIVE / "cuda" / "cuda_cudnn_load.c"
UNIT = harness_build.HERE / "cudnn_loader_unit.c"
SYMBOLS = re.findall(r'LOAD\(\w+, "(cudnn\w+)"\)', LOADER.read_text())


@pytest.fixture(scope="module")
def cc() -> str:
    found = harness_build.compiler()
    if found is None:
        pytest.skip("no C compiler ($CC, gcc or cc) to build cudnn_loader_unit.c")
    return found


@pytest.fixture(scope="module")
def unit(cc: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    exe = tmp_path_factory.mktemp("unit") / "cudnn_loader_unit"
    cmd = [cc, *harness_build.COMMON, "-O1", "-D_GNU_SOURCE", f"-I{harness_build.NATIVE / 'cuda'}", str(UNIT),
           str(LOADER), "-ldl", "-lpthread", "-o", str(exe)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, f"$ {' '.join(cmd)}\n{p.stderr[-4000:]}"
    return exe


def _fake(cc: str, path: Path, version: int, omit: str | None = None) -> None:
    """A libcudnn.so.9 whose cudnnGetVersion answers `version`, cudnnCreate a handle of 0x5eed, the rest 0."""
    body = ["#include <stddef.h>"]
    for name in SYMBOLS:
        if name == omit:
            continue
        if name == "cudnnGetVersion":
            body.append(f"size_t {name}(void) {{ return {version}u; }}")
        elif name == "cudnnGetCudartVersion":
            body.append(f"size_t {name}(void) {{ return 12080u; }}")
        elif name == "cudnnGetErrorString":
            body.append(f"const char* {name}(int s) {{ (void)s; return \"fake\"; }}")
        elif name == "cudnnCreate":
            body.append(f"int {name}(void** h) {{ *h = (void*)0x5eed; return 0; }}")
        else:
            body.append(f"int {name}(void) {{ return 0; }}")
    _shared(cc, path, "\n".join(body) + "\n")


def _shared(cc: str, path: Path, source: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    src = path.with_name(path.name + ".c")
    src.write_text(source)
    p = subprocess.run([cc, "-shared", "-fPIC", "-o", str(path), str(src)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]


def _run(unit: Path, env: dict[str, str], *args: str) -> dict[str, str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("EPABI_CUDNN")}
    p = subprocess.run([str(unit), *args], capture_output=True, text=True, timeout=60, env={**full, **env})
    assert p.returncode == 0, p.stdout + p.stderr
    return dict(line.split("=", 1) for line in p.stdout.splitlines())


def test_the_loader_resolves_the_legacy_convolution_api() -> None:
    assert {"cudnnCreate", "cudnnSetStream", "cudnnGetConvolutionForwardAlgorithm_v7",
            "cudnnGetConvolutionForwardWorkspaceSize", "cudnnConvolutionForward",
            "cudnnConvolutionBiasActivationForward", "cudnnAddTensor"} <= set(SYMBOLS)


def test_an_empty_folder_reports_not_found(unit: Path, tmp_path: Path) -> None:
    out = _run(unit, {"EPABI_CUDNN_LIB_DIR": str(tmp_path)})
    assert out["loaded"] == "0"
    assert out["why"] == f"libcudnn.so.9 was not found in EPABI_CUDNN_LIB_DIR={tmp_path}"


def test_a_library_lacking_a_symbol_is_refused_naming_it(unit: Path, cc: str, tmp_path: Path) -> None:
    _fake(cc, tmp_path / "libcudnn.so.9", 90501, omit="cudnnConvolutionBiasActivationForward")
    out = _run(unit, {"EPABI_CUDNN_LIB_DIR": str(tmp_path)})
    assert out["loaded"] == "0"
    assert out["why"] == f"{tmp_path}/libcudnn.so.9 lacks the symbol cudnnConvolutionBiasActivationForward"


def test_a_cudnn_other_than_9_is_refused(unit: Path, cc: str, tmp_path: Path) -> None:
    _fake(cc, tmp_path / "libcudnn.so.9", 8906)
    out = _run(unit, {"EPABI_CUDNN_LIB_DIR": str(tmp_path)})
    assert out["loaded"] == "0"
    assert out["why"] == f"{tmp_path}/libcudnn.so.9 reports version 8906; epabi uses cuDNN 9"


def test_cudnn_9_loads_with_its_sublibraries(unit: Path, cc: str, tmp_path: Path) -> None:
    _fake(cc, tmp_path / "libcudnn.so.9", 90501)
    _shared(cc, tmp_path / "libcudnn_graph.so.9", "int cudnn_graph_marker(void) { return 1; }\n")
    _shared(cc, tmp_path / "libcudnn_cnn.so.9", "int cudnn_cnn_marker(void) { return 2; }\n")
    _shared(cc, tmp_path / "libcudnn_cnn.so.8", "int cudnn_cnn8_marker(void) { return 3; }\n")  # not cuDNN 9's
    subs = [str(tmp_path / n) for n in ("libcudnn_graph.so.9", "libcudnn_cnn.so.9", "libcudnn_cnn.so.8")]
    out = _run(unit, {"EPABI_CUDNN_LIB_DIR": str(tmp_path)}, *subs)
    assert out["loaded"] == "1", out
    assert (out["version"], out["cudart"], out["path"]) == ("90501", "12080", f"{tmp_path}/libcudnn.so.9")
    assert (out["create"], int(out["handle"], 16)) == ("0", 0x5EED)
    assert out["sublibraries"] == "2"
    assert [out[f"open {s}"] for s in subs] == ["1", "1", "0"]


@pytest.mark.parametrize("value", ["0", "1", "true", "FALSE"])
def test_the_cudnn_option_takes_a_bool(host: epabi.Host, value: str) -> None:
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {"cudnn": value})
    with host.create_ep(so) as ep:
        assert ep.name == epabi.get_ep_name()


def test_a_bad_cudnn_value_is_refused(host: epabi.Host) -> None:
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {"cudnn": "maybe"})
    with pytest.raises(epabi.OrtStatusError, match=r"'ep.epabiexecutionprovider.cudnn' has value 'maybe'") as info:
        host.create_ep(so)
    assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT


def test_epabi_cudnn_0_leaves_it_unloaded(unit: Path, cc: str, tmp_path: Path) -> None:
    _fake(cc, tmp_path / "libcudnn.so.9", 90501)
    out = _run(unit, {"EPABI_CUDNN_LIB_DIR": str(tmp_path), "EPABI_CUDNN": "0"})
    assert out == {"loaded": "0", "why": "EPABI_CUDNN=0"}
