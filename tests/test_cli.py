"""The ``epabi`` command line: ``devices`` and ``inspect`` against the real plugin library."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import epabi
from epabi import cli, cmd_common
from epabi.hardware import pci_gpus
from epabi.versions import EMULATED, parse_api_version

#: Emulated hosts older than the plugin's minimum release: it refuses them.
MIN_API = parse_api_version(epabi.read_min_onnxruntime_version())
REFUSED = [api for api in EMULATED if api < MIN_API]

GRAPH_MEMBERS = ("IsGraphCaptureEnabled", "IsGraphCaptured", "ReplayGraph", "GetGraphCaptureNodeAssignmentPolicy")


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    rc = cli.main(list(argv))
    out = capsys.readouterr().out
    assert rc == 0, out
    return json.loads(out)


# -- devices -----------------------------------------------------------------------------------------------


def test_devices_software_adapter_json(software_adapter, capsys, library_path):
    doc = run_json(capsys, "devices", "--cpu-only", "--json")
    assert doc["host"] == {"api_version": epabi.NEWEST_EMULATED, "release": epabi.RELEASES[epabi.NEWEST_EMULATED]}
    assert doc["registration_name"] == "epabi"
    assert doc["library"] == str(Path(library_path).resolve())
    assert len(doc["devices"]) == 1
    dev = doc["devices"][0]
    assert dev["ep_name"] == "EpAbiExecutionProvider"
    assert dev["ep_vendor"] == "epabi"
    assert dev["ep_metadata"]["device_kind"] == "software"
    assert dev["ep_metadata"]["version"] == "0.1.0"
    assert dev["ep_metadata"]["library_path"] == str(Path(library_path).resolve())
    assert dev["ep_options"] == {}
    cpu = epabi.cpu_device()
    assert dev["device"] == {"type": "CPU", "vendor": cpu.vendor, "vendor_id": f"{cpu.vendor_id:#06x}",
                             "device_id": 0, "metadata": {}}
    # by default the software adapter computes in host memory: no memory info
    assert dev["memory_infos"] == []


def test_devices_software_adapter_device_memory(software_adapter, capsys, monkeypatch):
    # EPABI_SOFTWARE_DEVICE_MEMORY=device: host memory presented as device memory (GPU-typed, 0x10DE),
    # served by the plugin's arena and data transfer
    monkeypatch.setenv("EPABI_SOFTWARE_DEVICE_MEMORY", "device")
    doc = run_json(capsys, "devices", "--cpu-only", "--json")
    (mem,) = doc["devices"][0]["memory_infos"]
    assert mem["name"] == "EpAbi_Software"
    assert mem["device_type"] == "GPU" and mem["memory_type"] == "DEFAULT" and mem["allocator_type"] == "DEVICE"
    assert cli.main(["devices", "--cpu-only"]) == 0
    assert "memory infos:  EpAbi_Software: GPU memory DEFAULT, DEVICE allocator, vendor 0x10de" in \
        capsys.readouterr().out


def test_devices_software_adapter_human(software_adapter, capsys):
    assert cli.main(["devices", "--cpu-only"]) == 0
    captured = capsys.readouterr()
    assert "1 EP device:" in captured.out
    assert "[0] EpAbiExecutionProvider (vendor epabi)" in captured.out
    assert re.search(r"device:\s+CPU\s+vendor", captured.out)
    assert "device_kind=software" in captured.out
    assert "memory infos:  (none)" in captured.out
    # the plugin's warning about the software adapter reaches stderr through logging
    assert "offering the CPU software adapter" in captured.err


def test_devices_none_without_software_adapter(no_software_adapter, capsys):
    assert cli.main(["devices", "--cpu-only"]) == 0
    out = capsys.readouterr().out
    assert "no EP devices." in out
    assert "EPABI_ALLOW_SOFTWARE_ADAPTER=1" in out
    assert ".virtual" in out
    doc = run_json(capsys, "devices", "--cpu-only", "--json")
    assert doc["devices"] == []


def test_devices_virtual_name(no_software_adapter, capsys):
    doc = run_json(capsys, "devices", "--cpu-only", "--name", "epabi.virtual", "--json")
    assert doc["registration_name"] == "epabi.virtual"
    assert len(doc["devices"]) == 1
    dev = doc["devices"][0]
    assert dev["ep_metadata"]["device_kind"] == "virtual"
    assert dev["device"]["type"] == "GPU"
    assert dev["device"]["metadata"]["is_virtual"] == "1"
    assert dev["memory_infos"] == []


def test_devices_injected_gpu_lists_memory_infos(no_software_adapter, capsys, monkeypatch):
    gpu = epabi.nvidia_gpu_device(0x2335, "0000:01:00.0")
    monkeypatch.setattr(cmd_common, "discover_hardware", lambda: [epabi.cpu_device(), gpu])
    doc = run_json(capsys, "devices", "--json")
    assert len(doc["devices"]) == 1
    dev = doc["devices"][0]
    assert dev["ep_metadata"]["device_kind"] == "gpu"
    assert dev["device"] == {"type": "GPU", "vendor": "NVIDIA", "vendor_id": "0x10de", "device_id": 0x2335,
                             "metadata": {"Discrete": "1", "pci_bus_id": "0000:01:00.0"}}
    assert dev["memory_infos"] == [
        {"name": "EpAbi_GPU", "device_type": "GPU", "memory_type": "DEFAULT", "allocator_type": "DEVICE",
         "vendor_id": "0x10de", "device_id": 0},
        {"name": "EpAbi_GPU_readonly", "device_type": "GPU", "memory_type": "DEFAULT",
         "allocator_type": "READ_ONLY", "vendor_id": "0x10de", "device_id": 0},
        {"name": "EpAbi_GPU_pinned", "device_type": "GPU", "memory_type": "HOST_ACCESSIBLE",
         "allocator_type": "DEVICE", "vendor_id": "0x10de", "device_id": 0},
    ]
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "EpAbi_GPU: GPU memory DEFAULT, DEVICE allocator" in out
    assert "EpAbi_GPU_readonly: GPU memory DEFAULT, READ_ONLY allocator" in out
    # --cpu-only hides the injected GPU again
    assert run_json(capsys, "devices", "--cpu-only", "--json")["devices"] == []


def test_devices_host_1_23_refused(software_adapter, capsys):
    rc = cli.main(["devices", "--cpu-only", "--host-version", "1.23"])
    captured = capsys.readouterr()
    assert rc == 1
    assert captured.out == ""
    error_lines = [line for line in captured.err.splitlines() if "error" in line]
    assert len(error_lines) == 1
    assert error_lines[0].startswith("epabi devices: error: ")
    assert "OrtStatusError" in error_lines[0]
    assert '"1.23.2"' in error_lines[0]
    assert '"1.24.4"' in error_lines[0]


def test_devices_host_1_24_works(software_adapter, capsys):
    doc = run_json(capsys, "devices", "--cpu-only", "--host-version", "1.24", "--json")
    assert doc["host"] == {"api_version": 24, "release": "1.24.4"}
    assert [d["ep_name"] for d in doc["devices"]] == ["EpAbiExecutionProvider"]
    assert doc["devices"][0]["ep_metadata"]["device_kind"] == "software"


def test_devices_missing_library(capsys, tmp_path):
    rc = cli.main(["devices", "--library", str(tmp_path / "missing.so")])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.strip() == f"epabi devices: error: library not found: {tmp_path / 'missing.so'}"


def test_devices_bad_host_version_is_usage_error(capsys):
    assert cli.main(["devices", "--host-version", "1.99"]) == 2
    assert "emulates API" in capsys.readouterr().err
    assert cli.main([]) == 2  # a subcommand is required
    capsys.readouterr()
    assert cli.main(["--version"]) == 0
    assert f"epabi {epabi.__version__}" in capsys.readouterr().out


def test_run_emulates_the_host_version_it_is_given(capsys, software_adapter):
    doc = run_json(capsys, "run", "--cpu-only", "--runs", "1", "--host-version", "1.24", "--json")
    assert doc["host"] == "emulated ONNX Runtime 1.24.4"
    assert set(doc["placement"].values()) == {"EpAbiExecutionProvider"}
    assert run_json(capsys, "run", "--cpu-only", "--runs", "1", "--json")["host"] == \
        f"emulated ONNX Runtime {epabi.RELEASES[epabi.NEWEST_EMULATED]}"
    for command in ("run", "devices"):
        assert cli.main([command, "--host-version", "1.24.9"]) == 2
        err = capsys.readouterr().err
        assert "'1.24.9'" in err and "known releases" in err and "1.24.4" in err
    assert cli.main(["run", "--host", "onnxruntime", "--host-version", "1.24"]) == 1
    assert "--host-version picks the release the emulated host emulates" in capsys.readouterr().err


def test_npu_requests_name_what_is_missing(capsys, software_adapter):
    # an NPU without a vendor: the usage error shows the spelling that works
    assert cli.main(["devices", "--hardware", "npu"]) == 2
    err = capsys.readouterr().err
    assert "an injected NPU needs a vendor" in err and "npu:intel" in err
    # only an NPU offered: the software adapter's switch alone cannot help (it sits on the CPU device)
    assert cli.main(["devices", "--hardware", "npu:intel"]) == 0
    out = capsys.readouterr().out
    assert "no EP devices." in out
    assert "this host offered neither (NPU Intel (0x8086)): add --hardware cpu" in out
    assert cli.main(["run", "--hardware", "npu:intel"]) == 1
    assert "this host offered none (NPU Intel (0x8086)); add --hardware cpu" in capsys.readouterr().err
    # --device npu: the plugin has no NPU devices, and the message says whether the host has an NPU at all
    assert cli.main(["run", "--cpu-only", "--device", "npu"]) == 1
    err = capsys.readouterr().err
    assert "never offers an EP device on an NPU" in err and "(and this host offered no NPU)" in err
    assert cli.main(["run", "--hardware", "cpu", "--hardware", "npu:intel", "--device", "npu"]) == 1
    err = capsys.readouterr().err
    assert "never offers an EP device on an NPU" in err and "offered no NPU" not in err
    assert "this host offered: CPU" in err and "NPU Intel (0x8086)" in err


def test_python_m_epabi_devices_json_subprocess():
    env = dict(os.environ, EPABI_ALLOW_SOFTWARE_ADAPTER="1")
    proc = subprocess.run([sys.executable, "-m", "epabi", "devices", "--json"], env=env, capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).parent)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["host"]["api_version"] == epabi.NEWEST_EMULATED
    gpus = pci_gpus()
    kinds = [d["ep_metadata"]["device_kind"] for d in doc["devices"]]
    assert {d["ep_name"] for d in doc["devices"]} == {"EpAbiExecutionProvider"}
    if gpus:  # the software adapter is offered only when no GPU is listed
        assert kinds == ["gpu"] * len(gpus)
        assert [d["device"]["device_id"] for d in doc["devices"]] == [g.device_id for g in gpus]
        assert all(len(d["memory_infos"]) == 3 for d in doc["devices"])
    else:
        assert kinds == ["software"]
        assert doc["devices"][0]["device"]["type"] == "CPU"


# -- inspect -----------------------------------------------------------------------------------------------


@pytest.fixture
def report(software_adapter, capsys, library_path) -> dict:
    return run_json(capsys, "inspect", library_path, "--cpu-only", "--json")


def ep_members(report: dict, api: int) -> set[str]:
    (version,) = [v for v in report["versions"] if v["api_version"] == api]
    (factory,) = version["factories"]
    assert factory["ep"]["created"], factory["ep"]
    return set(factory["ep"]["members"])


def test_inspect_exports(report, library_path):
    assert report["library"] == str(Path(library_path).resolve())
    assert set(report["exports"]) == {"CreateEpFactories", "ReleaseEpFactory"}
    assert report["exports_note"] is None
    assert report["missing_required_exports"] == []


def test_inspect_covers_every_emulated_version(report):
    apis = [v["api_version"] for v in report["versions"]]
    assert apis == list(range(epabi.OLDEST_EMULATED, epabi.NEWEST_EMULATED + 1))
    assert [v["release"] for v in report["versions"]] == [epabi.RELEASES[a] for a in apis]


def test_inspect_api_23_refused(report):
    by_api = {v["api_version"]: v for v in report["versions"]}
    for api in REFUSED:
        v = by_api[api]
        assert v["registered"] is False
        assert v["error"].startswith("OrtStatusError: ")
        assert f'"{epabi.RELEASES[api]}"' in v["error"]
        assert '"1.24.4"' in v["error"]
        assert v["factories"] == [] and v["devices"] == []
        assert v["close_error"] is None


def test_inspect_factory_identity(report):
    for v in report["versions"]:
        if v["api_version"] < MIN_API:
            continue
        assert v["registered"] is True and v["error"] is None and v["close_error"] is None
        (factory,) = v["factories"]
        assert factory["name"] == "EpAbiExecutionProvider"
        assert factory["vendor"] == "epabi"
        assert factory["version"] == "0.1.0"
        assert factory["vendor_id"] == "0x10de"
        assert factory["ort_version_supported"] == epabi._ffi.NEWEST_API  # what the plugin declares
        assert factory["num_ep_devices"] == 1
        assert {"GetName", "GetVendor", "GetSupportedDevices", "CreateEp", "ReleaseEp", "GetVersion",
                "CreateDataTransfer"} <= set(factory["members"])
        (device,) = v["devices"]
        assert device["ep_metadata"]["device_kind"] == "software"
        assert device["device"]["type"] == "CPU"
        assert v["api_requested"][-1] == min(v["api_version"], epabi._ffi.NEWEST_API)
        assert any("software adapter" in line for line in v["log"])


def test_inspect_ep_members_api_24(report):
    members = ep_members(report, 24)
    assert {"GetName", "GetCapability"} <= members
    assert "IsGraphCaptureEnabled" not in members
    assert "IsConcurrentRunSupported" not in members
    assert "Sync" not in members


def test_inspect_ep_members_api_25(report):
    members = ep_members(report, 25)
    assert "Sync" in members
    assert not members & set(GRAPH_MEMBERS)
    assert "IsConcurrentRunSupported" not in members


@pytest.mark.parametrize("api", [26, 27])
def test_inspect_ep_members_api_26_27(report, api):
    members = ep_members(report, api)
    assert set(GRAPH_MEMBERS) <= members
    assert "Sync" in members
    assert "IsConcurrentRunSupported" not in members


def test_inspect_ep_members_api_28_and_newer(report):
    for api in range(28, epabi.NEWEST_EMULATED + 1):
        members = ep_members(report, api)
        assert "IsConcurrentRunSupported" in members
        assert {"Sync", *GRAPH_MEMBERS} <= members
        (version,) = [v for v in report["versions"] if v["api_version"] == api]
        assert version["factories"][0]["ep"]["concurrent_run_supported"] is True


def test_inspect_member_matrix_json(report):
    assert report["member_since"]["OrtEp"]["Sync"] == 25
    assert report["member_since"]["OrtEp"]["IsConcurrentRunSupported"] == 24
    assert report["member_since"]["OrtEpFactory"]["GetVendorId"] == 23
    row = report["members"]["OrtEp"]["IsConcurrentRunSupported"]
    assert row["since"] == 24
    assert row["set"] == {"22": None, "23": None, "24": False, "25": False, "26": False, "27": False,
                          **{str(a): True for a in range(28, epabi.NEWEST_EMULATED + 1)}}
    # the host reads it from API 24 on; the plugin leaves it NULL below 28
    assert row["read"]["24"] is True and row["read"]["23"] is None
    assert report["members"]["OrtEp"]["Sync"]["read"]["24"] is False  # the 1.24 host does not know Sync


def test_inspect_human_output(software_adapter, capsys, library_path):
    assert cli.main(["inspect", library_path, "--cpu-only"]) == 0
    out = capsys.readouterr().out
    assert "exports: CreateEpFactories, ReleaseEpFactory" in out
    assert re.search(r"^API 23 \(1\.23\.2\): registration failed: OrtStatusError: .*1\.24\.4", out, re.M)
    assert re.search(r"^API 24 \(1\.24\.4\): registered; 1 factory; 1 device\(s\); .*EP EpAbiExecutionProvider: "
                     r"6 members$", out, re.M)
    lines = out.splitlines()

    def row(label: str) -> str:
        (line,) = [line for line in lines if line.startswith(label + " ")]
        return line

    newest = epabi.NEWEST_EMULATED
    # columns 22 and 23 are blank (registration failed), then one cell per version from 24 on
    concurrent = " ".join(" ." if a < 28 else " x" for a in range(24, newest + 1))
    assert row("OrtEp::IsConcurrentRunSupported (1.24)").endswith("      " + concurrent)
    sync = " ".join(" ." if a < 25 else " x" for a in range(24, newest + 1))
    assert row("OrtEp::Sync (1.25)").endswith("      " + sync)
    graph = " ".join(" ." if a < 26 else " x" for a in range(24, newest + 1))
    assert row("OrtEp::IsGraphCaptureEnabled (1.26)").endswith("      " + graph)
    assert row("OrtEpFactory::GetName (1.22)").endswith(" ".join([" x"] * (newest - 23)))
    header = [line for line in out.splitlines() if line.startswith("member (since)")][0]
    assert header.split()[2:] == [str(a) for a in range(epabi.OLDEST_EMULATED, newest + 1)]


def test_inspect_without_device_reports_no_ep(no_software_adapter, capsys, library_path):
    doc = run_json(capsys, "inspect", library_path, "--cpu-only", "--json")
    v24 = [v for v in doc["versions"] if v["api_version"] == 24][0]
    assert v24["registered"] is True and v24["devices"] == []
    assert v24["factories"][0]["ep"] is None
    assert doc["members"]["OrtEp"]["GetName"]["set"]["24"] is None
    assert doc["members"]["OrtEpFactory"]["GetName"]["set"]["24"] is True
    assert cli.main(["inspect", library_path, "--cpu-only"]) == 0
    assert "no device, EP not created" in capsys.readouterr().out


def test_inspect_nonexistent_file(capsys):
    rc = cli.main(["inspect", "/nonexistent.so"])
    captured = capsys.readouterr()
    assert rc == 1
    assert captured.out == ""
    assert captured.err.strip() == "epabi inspect: error: no such file: /nonexistent.so"


def test_inspect_not_a_library(capsys, tmp_path):
    bogus = tmp_path / "bogus.so"
    bogus.write_text("not an ELF file\n")
    rc = cli.main(["inspect", str(bogus), "--json"])
    captured = capsys.readouterr()
    assert rc == 1
    doc = json.loads(captured.out)
    assert doc["exports"] is None
    assert doc["exports_note"].startswith("unavailable: not a readable ELF file")
    assert all(v["error"].startswith("PluginLoadError: ") for v in doc["versions"])
    assert "epabi inspect: error: PluginLoadError" in captured.err


def test_inspect_without_pyelftools(software_adapter, capsys, library_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "elftools.elf.elffile", None)  # makes the import fail
    doc = run_json(capsys, "inspect", library_path, "--cpu-only", "--json")
    assert doc["exports"] is None
    assert doc["exports_note"].startswith("unavailable: pyelftools is not installed")
    assert doc["missing_required_exports"] is None
    assert [v["registered"] for v in doc["versions"]][-1] is True


def test_run_edge_cases_exit_cleanly(tmp_path, capsys, software_adapter):
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, ["N", 3])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["N", 3])])
    path = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    np.save(tmp_path / "empty.npy", np.zeros((0, 3), np.float32))
    assert cli.main(["run", str(path), "--input", f"x={tmp_path / 'empty.npy'}", "--cpu-only"]) == 0
    assert "output y: float32[0, 3]" in capsys.readouterr().out
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x00\x01not a model at all")
    assert cli.main(["run", str(garbage)]) == 1
    assert "epabi run: error:" in capsys.readouterr().err
    assert cli.main(["run", "--runs", "0"]) == 2


def test_run_on_onnxruntime_host_exits_cleanly():
    pytest.importorskip("onnxruntime")  # installed with magika, a test dependency
    proc = subprocess.run([sys.executable, "-m", "epabi", "run", "--host", "onnxruntime", "--json", "--cpu-only"],
                          capture_output=True, text=True, timeout=120)
    # on a GPU machine onnxruntime lists the GPU (no software adapter then) and the MLP runs on our CUDA kernels
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["providers"][0] == "EpAbiExecutionProvider"
    assert set(doc["placement"].values()) == {"EpAbiExecutionProvider"}


def test_run_on_onnxruntime_host_reports_a_failing_run_without_crashing(tmp_path):
    # the session must be gone before the plugin library is unregistered, also when the run raised
    pytest.importorskip("onnxruntime")
    bad = tmp_path / "x.npy"
    np.save(bad, np.zeros((1, 64), np.float64))  # the MLP wants float32
    proc = subprocess.run([sys.executable, "-m", "epabi", "run", "--host", "onnxruntime", "--input", f"x={bad}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "epabi run: error:" in proc.stderr and "float" in proc.stderr


def test_run_with_a_library_that_is_not_a_plugin_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")  # run would set it for the rest of the process
    garbage = tmp_path / "garbage.so"
    garbage.write_bytes(b"not an ELF file")
    assert cli.main(["run", "--library", str(garbage)]) == 1
    err = capsys.readouterr().err
    assert "epabi run: error:" in err and "garbage.so" in err
