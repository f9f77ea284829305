"""The command line with any plugin EP: ``run --library PATH [--ep NAME]`` on that library's devices, hints that
name the plugin, and hardware injected with ``--hardware`` (as ``Host(hardware=[...])``).

Real third-party plugins (ggml, OpenVINO from PyPI, ``tests/third_party.py``) run in a subprocess each, one host
per process: plugins keep the first host's API tables for the life of the process (issue 9), so a second host
in one process can crash them until the host serves process-wide tables.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import epabi
from epabi import cli
from epabi.hardware import parse_hardware
from epabi.objects import OrtHardwareDeviceType
from plugin_builder import build_plugin
from third_party import require_plugin


def _epabi(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "epabi", *argv], capture_output=True, text=True, timeout=timeout)


def _json(proc: subprocess.CompletedProcess[str]) -> dict:
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-4000:])
    return json.loads(proc.stdout)


# -- --hardware syntax --------------------------------------------------------------------------------------------

def test_parse_hardware_named_vendors() -> None:
    intel = parse_hardware("cpu:intel")
    assert (intel.type, intel.vendor_id, intel.vendor, intel.device_id, intel.metadata) == \
        (OrtHardwareDeviceType.CPU, 0x8086, "Intel", 0, {})
    amd_cpu, amd_gpu = parse_hardware("cpu:amd"), parse_hardware("gpu:amd:0x744c")
    assert (amd_cpu.vendor_id, amd_gpu.vendor_id, amd_gpu.device_id) == (0x1022, 0x1002, 0x744C)
    gpu = parse_hardware("gpu:nvidia:0x2335,pci_bus_id=0000:01:00.0")
    assert (gpu.type, gpu.vendor, gpu.vendor_id, gpu.device_id) == (OrtHardwareDeviceType.GPU, "NVIDIA", 0x10DE, 0x2335)
    assert gpu.metadata == {"Discrete": "1", "pci_bus_id": "0000:01:00.0"}  # as discovered NVIDIA GPUs have
    npu = parse_hardware("npu:0x1234:7,name=x")
    assert (npu.type, npu.vendor, npu.vendor_id, npu.device_id, npu.metadata) == \
        (OrtHardwareDeviceType.NPU, "0x1234", 0x1234, 7, {"name": "x"})
    assert parse_hardware("cpu:4318").vendor == "NVIDIA"  # a known vendor id gets its name
    here = parse_hardware("cpu")
    assert (here.vendor_id, here.vendor) == (epabi.cpu_device().vendor_id, epabi.cpu_device().vendor)


@pytest.mark.parametrize("spec, why", [
    ("tpu", "TYPE cpu, gpu or npu"), ("gpu", "needs a vendor"), ("cpu:acme", "not a name or a number"),
    ("gpu:nvidia:zz", "device id 'zz'"), ("cpu,flag", "not KEY=VALUE"), ("cpu:intel:1:2", "TYPE[:VENDOR"),
])
def test_parse_hardware_errors_say_why(spec: str, why: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_hardware(spec)
    assert why in str(info.value) and spec in str(info.value)


def test_bad_hardware_is_a_usage_error(capsys) -> None:
    assert cli.main(["devices", "--hardware", "tpu:google"]) == 2
    assert "tpu:google" in capsys.readouterr().err


def test_hardware_and_cpu_only_exclude_each_other(capsys) -> None:
    assert cli.main(["devices", "--cpu-only", "--hardware", "cpu"]) == 1
    assert "--cpu-only and --hardware exclude each other" in capsys.readouterr().err


# -- our plugin with injected hardware ------------------------------------------------------------------------------

def test_devices_with_an_injected_gpu(no_software_adapter, capsys) -> None:
    # our plugin offers a GPU EP device for an NVIDIA GPU the host lists, whether or not this machine has one
    assert cli.main(["devices", "--json", "--hardware", "cpu:amd", "--hardware", "gpu:nvidia:0x2335"]) == 0
    (dev,) = json.loads(capsys.readouterr().out)["devices"]
    assert dev["ep_name"] == epabi.get_ep_name() and dev["ep_metadata"]["device_kind"] == "gpu"
    assert dev["device"]["vendor_id"] == "0x10de" and dev["device"]["device_id"] == 0x2335


def test_run_our_plugin_with_an_injected_cpu(software_adapter, capsys) -> None:
    assert cli.main(["run", "--json", "--runs", "1", "--hardware", "cpu:amd"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ep"] == epabi.get_ep_name() and doc["device_kind"] == "software"
    assert doc["device"] == "CPU AMD (0x1022) device_id 0x0"
    assert set(doc["placement"].values()) == {epabi.get_ep_name()}


def test_our_hint_stays_ours(no_software_adapter, capsys) -> None:
    assert cli.main(["devices", "--cpu-only"]) == 0
    out = capsys.readouterr().out
    assert "EPABI_ALLOW_SOFTWARE_ADAPTER=1" in out and "--hardware" not in out


# -- another plugin: the hint names it ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def test_plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/plugins/misbehaving_plugin.c, well behaved: one factory (MisbehavingEp), devices on CPUs only."""
    try:
        return build_plugin(tmp_path_factory.mktemp("plugin"), None)
    except RuntimeError as exc:
        pytest.skip(str(exc))


def test_devices_hint_names_the_plugin(test_plugin: Path, capsys) -> None:
    assert cli.main(["devices", "--library", str(test_plugin), "--hardware", "gpu:nvidia"]) == 0
    out = capsys.readouterr().out
    assert "no EP devices." in out
    assert "hint: the plugin's factory MisbehavingEp offers no EP device for the hardware this host offered " \
           "(GPU NVIDIA (0x10de))" in out
    assert "EPABI_ALLOW_SOFTWARE_ADAPTER" not in out
    assert cli.main(["devices", "--library", str(test_plugin), "--hardware", "cpu:arm", "--json"]) == 0
    (dev,) = json.loads(capsys.readouterr().out)["devices"]
    assert dev["ep_name"] == "MisbehavingEp" and dev["device"]["vendor"] == "ARM"


def test_inspect_hint_names_the_plugin(test_plugin: Path, capsys) -> None:
    assert cli.main(["inspect", str(test_plugin), "--hardware", "gpu:nvidia", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["hint"].startswith("hint: the plugin's factory MisbehavingEp offers no EP device")
    assert cli.main(["inspect", str(test_plugin), "--hardware", "gpu:nvidia"]) == 0
    assert "hint: the plugin's factory MisbehavingEp offers no EP device" in capsys.readouterr().out
    assert cli.main(["inspect", str(test_plugin), "--hardware", "cpu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hint"] is None


def test_run_hint_names_the_plugin(test_plugin: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")  # run would set it for the rest of the process
    assert cli.main(["run", "--library", str(test_plugin), "--hardware", "gpu:nvidia"]) == 1
    err = capsys.readouterr().err
    assert "the plugin library lists no EP device" in err and "MisbehavingEp" in err
    assert cli.main(["run", "--library", str(test_plugin), "--ep", "Nope", "--hardware", "cpu"]) == 1
    assert "--ep Nope: the library lists no device of that EP (EPs with devices: MisbehavingEp)" in \
        capsys.readouterr().err


# -- real third-party plugins, one host per subprocess -----------------------------------------------------------

def test_run_ggml_from_the_cli_equals_real_onnxruntime() -> None:
    lib = str(require_plugin("ggml"))
    pytest.importorskip("onnxruntime")
    ours = _json(_epabi("run", "--library", lib, "--ep", "ggml", "--json", "--runs", "1"))
    assert ours["host"] == f"emulated ONNX Runtime {epabi.RELEASES[epabi.NEWEST_EMULATED]}"
    assert ours["ep"] == "ggml" and ours["providers"][0] == "ggml"
    assert ours["device_kind"] == "cpu" and ours["device"].startswith("CPU ")
    assert set(ours["placement"].values()) == {"ggml"} and len(ours["placement"]) == 8
    real = _json(_epabi("run", "--host", "onnxruntime", "--library", lib, "--ep", "ggml", "--json", "--runs", "1"))
    assert real["ep"] == "ggml" and real["device_kind"] == "cpu"
    assert ours["outputs"] == real["outputs"]  # shapes, dtypes and checksums of the same outputs


def test_run_ggml_prints_its_device() -> None:
    lib = str(require_plugin("ggml"))
    proc = _epabi("run", "--library", lib, "--ep", "ggml", "--runs", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    cpu = epabi.cpu_device()
    assert f"device: cpu (CPU {cpu.vendor} ({cpu.vendor_id:#06x}) device_id 0x0)" in proc.stdout
    assert "EP: ggml; CPU fallback: " in proc.stdout
    assert "nodes on ggml: 8 of 8" in proc.stdout


def test_run_ggml_names_its_ep_after_the_registration() -> None:
    # ggml's EP takes the registration name: without --ep the library is registered as 'epabi', and the one EP
    # it lists devices of is used
    lib = str(require_plugin("ggml"))
    doc = _json(_epabi("run", "--library", lib, "--json", "--runs", "1"))
    assert doc["ep"] == "epabi" and set(doc["placement"].values()) == {"epabi"}
    doc = _json(_epabi("run", "--library", lib, "--name", "mine", "--json", "--runs", "1"))
    assert doc["ep"] == "mine"


def test_openvino_enumerates_on_an_injected_intel_cpu() -> None:
    lib = str(require_plugin("openvino"))
    doc = _json(_epabi("devices", "--library", lib, "--hardware", "cpu:intel", "--json"))
    names = [d["ep_name"] for d in doc["devices"]]
    assert "OpenVINOExecutionProvider" in names
    assert all(d["device"]["vendor_id"] == "0x8086" and d["device"]["type"] == "CPU" for d in doc["devices"])


def test_openvino_on_an_amd_cpu_lists_nothing_and_the_hint_says_why() -> None:
    lib = str(require_plugin("openvino"))
    proc = _epabi("devices", "--library", lib, "--hardware", "cpu:amd")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "no EP devices." in proc.stdout
    assert "hint: the plugin's factories OpenVINOExecutionProvider" in proc.stdout
    assert "(CPU AMD (0x1022))" in proc.stdout and "--hardware cpu:intel" in proc.stdout
    assert "EPABI_ALLOW_SOFTWARE_ADAPTER" not in proc.stdout


def test_run_openvino_asks_which_of_its_eps() -> None:
    lib = str(require_plugin("openvino"))
    proc = _epabi("run", "--library", lib, "--hardware", "cpu:intel")
    assert proc.returncode == 1
    assert "lists devices of 2 EPs (OpenVINOExecutionProvider, OpenVINOExecutionProvider.AUTO): choose one " \
           "with --ep NAME" in proc.stderr
