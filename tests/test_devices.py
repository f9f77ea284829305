"""Device matrix: GPU present/absent, software adapter on/off, virtual on/off, compile-only, multi-device."""

from __future__ import annotations

import logging

import pytest

import epabi
from epabi import OrtAllocatorType, OrtDeviceMemoryType, OrtHardwareDeviceType, OrtMemoryInfoDeviceType

NVIDIA = 0x10DE


def _register(hardware: list[epabi.HardwareDevice], library_path: str, name: str = "epabi",
              api: int | None = None) -> epabi.Host:
    host = epabi.Host(api_version=api, hardware=hardware)
    host.register_execution_provider_library(name, library_path)
    return host


def _ours(host: epabi.Host) -> list[epabi.EpDevice]:
    return [d for d in host.get_ep_devices() if d.ep_name == epabi.get_ep_name()]


@pytest.mark.parametrize("software", [False, True])
def test_each_nvidia_gpu_becomes_an_ep_device(library_path: str, monkeypatch: pytest.MonkeyPatch,
                                              software: bool) -> None:
    if software:
        monkeypatch.setenv("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")
    gpus = [epabi.nvidia_gpu_device(0x2335, "0000:01:00.0"), epabi.nvidia_gpu_device(0x2335, "0000:02:00.0")]
    amd = epabi.HardwareDevice(OrtHardwareDeviceType.GPU, 0x1002, "AMD", 0x744C)
    with _register([epabi.cpu_device(), gpus[0], amd, gpus[1]], library_path) as host:
        devices = _ours(host)
        # software adapter never shows when a GPU exists; the AMD GPU is not ours
        assert [d.device for d in devices] == gpus
        for ordinal, dev in enumerate(devices):
            assert dev.ep_metadata["device_kind"] == "gpu"
            infos = {(i.name, i.allocator_type) for i in dev.memory_infos}
            assert infos == {("EpAbi_GPU", OrtAllocatorType.DEVICE), ("EpAbi_GPU_readonly", OrtAllocatorType.READ_ONLY),
                             ("EpAbi_GPU_pinned", OrtAllocatorType.DEVICE)}
            for info in dev.memory_infos:
                pinned = info.name == "EpAbi_GPU_pinned"
                assert (info.device_type, info.vendor_id, info.device_id, info.mem_type) == (
                    OrtMemoryInfoDeviceType.GPU, NVIDIA, ordinal,
                    OrtDeviceMemoryType.HOST_ACCESSIBLE if pinned else OrtDeviceMemoryType.DEFAULT)
            assert dev.memory_info(OrtDeviceMemoryType.DEFAULT).name == "EpAbi_GPU"
            assert dev.memory_info(OrtDeviceMemoryType.HOST_ACCESSIBLE).name == "EpAbi_GPU_pinned"


def test_no_gpu_no_software_adapter_lists_nothing(library_path: str, no_software_adapter: None,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="epabi"):
        with _register([epabi.cpu_device()], library_path) as host:
            assert _ours(host) == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("value", ["0", "yes", "true", ""])
def test_software_adapter_needs_exactly_1(library_path: str, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("EPABI_ALLOW_SOFTWARE_ADAPTER", value)
    with _register([epabi.cpu_device()], library_path) as host:
        assert _ours(host) == []


def test_software_adapter_on_cpu_with_a_warning(library_path: str, software_adapter: None,
                                                caplog: pytest.LogCaptureFixture) -> None:
    cpu = epabi.cpu_device()
    with caplog.at_level(logging.DEBUG, logger="epabi"):
        with _register([cpu], library_path) as host:
            (dev,) = _ours(host)
            assert dev.device is cpu
            assert dev.ep_metadata["device_kind"] == "software"
            assert dev.memory_infos == []  # computes in host memory unless EPABI_SOFTWARE_DEVICE_MEMORY=device
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "epabi.plugin"]
    assert len(warnings) == 1 and "software device" in warnings[0].getMessage()
    # the negotiation note is logged at VERBOSE -> DEBUG
    assert any(r.levelno == logging.DEBUG and "negotiated API" in r.getMessage() for r in caplog.records)


def test_software_adapter_with_device_memory(library_path: str, software_adapter: None,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EPABI_SOFTWARE_DEVICE_MEMORY", "device")
    with _register([epabi.cpu_device()], library_path) as host:
        (dev,) = _ours(host)
        (mem,) = dev.memory_infos  # host memory presented as device memory, served by the plugin
        assert mem.name == "EpAbi_Software" and mem.device_type == epabi.OrtMemoryInfoDeviceType.GPU
        assert (mem.vendor_id, mem.allocator_type) == (0x10DE, OrtAllocatorType.DEVICE)
        assert dev.factory.data_transfer != epabi._ffi.ffi.NULL


@pytest.mark.parametrize("name", ["epabi.virtual", "epabi"])
def test_virtual_device_only_for_virtual_registrations(library_path: str, no_software_adapter: None,
                                                       name: str) -> None:
    with _register([epabi.cpu_device()], library_path, name) as host:
        devices = _ours(host)
        if not name.endswith(".virtual"):
            assert devices == []
            return
        (dev,) = devices
        assert dev.device.type == OrtHardwareDeviceType.GPU
        assert dev.device.metadata["is_virtual"] == "1"
        assert dev.device.created_by.startswith("plugin:")
        assert dev.memory_infos == []
        assert dev.ep_metadata["device_kind"] == "virtual"


def test_virtual_device_via_env_config_and_alongside_gpu(library_path: str) -> None:
    host = epabi.Host(hardware=[epabi.cpu_device(), epabi.nvidia_gpu_device()],
                      env_config={"allow_virtual_devices": "1"})
    with host:
        host.register_execution_provider_library("epabi", library_path)
        kinds = [d.ep_metadata["device_kind"] for d in _ours(host)]
        assert kinds == ["gpu", "virtual"]


def _create(host: epabi.Host, devices: list[epabi.EpDevice], config: dict[str, str] | None = None,
            options: dict[str, str] | None = None) -> epabi.Ep:
    so = epabi.SessionOptions()
    for key, value in (config or {}).items():
        so.add_session_config_entry(key, value)
    so.add_provider_for_devices(devices, options)
    return host.create_ep(so)


def test_virtual_device_serves_only_compile_only_sessions(library_path: str) -> None:
    with _register([epabi.cpu_device()], library_path, "epabi.virtual") as host:
        (dev,) = _ours(host)
        with pytest.raises(epabi.OrtStatusError) as info:
            _create(host, [dev])
        assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
        assert "virtual" in info.value.message and "session.compile_only" in info.value.message
        with _create(host, [dev], {"session.compile_only": "1"}) as ep:
            assert ep.name == epabi.get_ep_name()


def test_create_ep_refuses_more_than_one_device(library_path: str) -> None:
    with _register([epabi.cpu_device(), epabi.nvidia_gpu_device(1), epabi.nvidia_gpu_device(2)], library_path) as host:
        devices = _ours(host)
        assert len(devices) == 2
        with pytest.raises(epabi.OrtStatusError, match="given 2 devices") as info:
            _create(host, devices)
        assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
        for dev in devices:  # each alone is fine
            with _create(host, [dev]) as ep:
                assert ep.name == epabi.get_ep_name()


def test_gpu_ep_on_api_24_host(library_path: str) -> None:
    with _register([epabi.cpu_device(), epabi.nvidia_gpu_device()], library_path, api=24) as host:
        (dev,) = _ours(host)
        assert len(dev.memory_infos) == 3
        with _create(host, [dev]) as ep:
            assert "Sync" not in ep.members


@pytest.mark.parametrize(("api", "accepted"), [(26, True), (epabi.NEWEST_EMULATED, False)])
def test_context_enable_marks_compile_only_on_old_hosts(library_path: str, api: int, accepted: bool) -> None:
    # hosts before API 27 have no session.compile_only; their compile API sets ep.context_enable=1 instead
    with _register([epabi.cpu_device()], library_path, "epabi.virtual", api=api) as host:
        (dev,) = _ours(host)
        if accepted:
            with _create(host, [dev], {"ep.context_enable": "1"}) as ep:
                assert ep.name == epabi.get_ep_name()
        else:
            with pytest.raises(epabi.OrtStatusError, match="virtual"):
                _create(host, [dev], {"ep.context_enable": "1"})


def test_gpu_memory_gets_allocators_at_registration(library_path: str, caplog: pytest.LogCaptureFixture) -> None:
    # Hosts create an allocator for each EP device's DEFAULT memory when the library is registered (ORT 1.30
    # fails the registration if that fails), so it must work without a GPU driver; allocating then fails
    # cleanly with one warning naming the reason.
    with caplog.at_level(logging.WARNING, logger="epabi"):
        with _register([epabi.cpu_device(), epabi.nvidia_gpu_device()], library_path) as host:
            (dev,) = _ours(host)
            assert host.trace.count("OrtEpFactory::CreateAllocator") == 1
            (allocator,) = dev.factory.shared_allocators
            assert allocator.memory_info.name == "EpAbi_GPU"
            if epabi.hardware.cuda_gpu_count() > 0:
                pytest.skip("a CUDA driver is present: tests/test_gpu.py covers real allocations")
            with pytest.raises(MemoryError, match="EpAbi_GPU"):
                allocator.alloc(1024)
        assert "OrtEpFactory::ReleaseAllocator" in host.trace
    assert any("GPU 0 memory cannot be allocated" in r.getMessage() for r in caplog.records)



@pytest.mark.parametrize("entry", ["cpu", None, {"type": "cpu"}])
def test_injected_hardware_must_be_hardware_devices(entry: object) -> None:
    # a spec string is parsed by epabi.hardware.parse_hardware, not taken as a device ('str' has no 'ptr' before)
    with pytest.raises(TypeError, match="is not a HardwareDevice .*parse_hardware"):
        epabi.Host(hardware=[epabi.cpu_device(), entry])  # type: ignore[list-item]
