"""On a machine with an NVIDIA GPU and its driver (skipped elsewhere): the GPU EP device and its memory.

Run on the H200 through the device tool; CI has no GPU. These tests cover discovery, registration (real hosts
create the device-memory allocator then) and real allocations through the plugin's allocator; the CUDA kernels,
streams and graphs are tested in test_gpu_cuda.py and the GPU half of test_conformance.py.
"""

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

pytestmark = pytest.mark.gpu


if epabi.hardware.cuda_gpu_count() == 0:
    pytest.skip("no NVIDIA GPU with a working driver", allow_module_level=True)


def test_emulated_host_lists_and_allocates_on_the_gpu(library_path: str, no_software_adapter: None) -> None:
    gpus = epabi.hardware.pci_gpus()
    assert gpus, "the driver sees a GPU but sysfs lists no NVIDIA display controller"
    with epabi.Host() as host:
        host.register_execution_provider_library("epabi", library_path)
        devices = [d for d in host.get_ep_devices() if d.ep_name == epabi.get_ep_name()]
        assert [d.ep_metadata["device_kind"] for d in devices] == ["gpu"] * len(gpus)
        allocator = devices[0].factory.shared_allocators[0]
        p = allocator.alloc(1 << 20)  # 1 MiB of device memory through cuMemAlloc in the primary context
        assert int(epabi._ffi.ffi.cast("uintptr_t", p)) != 0
        allocator.free(p)


def test_real_onnxruntime_registers_on_a_gpu_machine(library_path: str) -> None:
    pytest.importorskip("onnxruntime")
    script = (
        "import onnxruntime as ort, sys\n"
        "ort.register_execution_provider_library('epabi', sys.argv[1])\n"
        "ours = [d for d in ort.get_ep_devices() if d.ep_name == 'EpAbiExecutionProvider']\n"
        "print(json.dumps([[d.device.type.name, dict(d.ep_metadata)['device_kind']] for d in ours]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", "import json\n" + script, library_path], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "EPABI_ALLOW_SOFTWARE_ADAPTER": "0"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    listed = json.loads(proc.stdout.strip().splitlines()[-1])
    # onnxruntime discovers GPUs through DRM nodes; where it does, our GPU EP device is listed (and its
    # device-memory allocator was created at registration, which used to fail the registration)
    if any(Path("/sys/class/drm").glob("card*")):
        assert ["GPU", "gpu"] in listed, listed
    assert all(entry == ["GPU", "gpu"] for entry in listed), listed


def test_a_cpu_only_host_gets_the_gpus_the_cuda_driver_sees(library_path: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # a host that passes no GPU (ORT on VMs/containers without DRM nodes): the plugin creates the hardware devices
    # itself through OrtEpApi::CreateHardwareDevice, with the PCI bus id and CUDA ordinal, and runs on them
    monkeypatch.setenv("EPABI_CUDA_DISCOVERY", "1")
    monkeypatch.delenv("EPABI_ALLOW_SOFTWARE_ADAPTER", raising=False)
    from onnx.reference import ReferenceEvaluator

    from epabi.models import mlp, sample_inputs

    with epabi.Host(hardware=[epabi.cpu_device()]) as host:
        host.register_execution_provider_library("epabi", library_path)
        gpus = [d for d in host.get_ep_devices() if d.ep_name == epabi.get_ep_name()]
        assert [d.ep_metadata["device_kind"] for d in gpus] == ["gpu"] * epabi.hardware.cuda_gpu_count()
        hw = gpus[0].device
        assert hw.created_by != "host" and hw.vendor_id == 0x10DE
        assert hw.metadata["cuda_ordinal"] == "0"
        assert re.fullmatch(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]", hw.metadata["pci_bus_id"])
        model = mlp(layers=3, width=32, batch=2)
        feeds = sample_inputs(model, seed=4)
        so = epabi.SessionOptions()
        so.add_provider_for_devices(gpus[:1])
        with epabi.InferenceSession(model, so) as session:
            assert set(session.node_assignment.values()) == {epabi.get_ep_name()}
            (y,) = session.run(None, feeds)
        np.testing.assert_allclose(y, ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-4, atol=1e-4)
