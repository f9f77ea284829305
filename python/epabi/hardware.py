"""Hardware discovery as ONNX Runtime does it on Linux: always the CPU, plus NVIDIA GPUs from PCI in sysfs.

Tests and the CLI may pass their own list to :class:`epabi.Host` instead (``hardware=[...]``).
"""

from __future__ import annotations

from pathlib import Path

from .objects import HardwareDevice, OrtHardwareDeviceType

NVIDIA_VENDOR_ID = 0x10DE
_CPU_VENDORS = {"GenuineIntel": ("Intel", 0x8086), "AuthenticAMD": ("AMD", 0x1022)}


def cpu_device(cpuinfo: Path = Path("/proc/cpuinfo")) -> HardwareDevice:
    """The CPU hardware device (vendor from ``/proc/cpuinfo``; device id 0, no metadata, as ORT reports it)."""
    vendor, vendor_id = "Unknown", 0
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("vendor_id"):
                vendor, vendor_id = _CPU_VENDORS.get(line.split(":", 1)[1].strip(), (line.split(":", 1)[1].strip(), 0))
                break
            if line.startswith("CPU implementer"):
                vendor, vendor_id = "ARM", int(line.split(":", 1)[1].strip(), 16)
                break
    except OSError:
        pass
    return HardwareDevice(OrtHardwareDeviceType.CPU, vendor_id, vendor, 0, {})


def nvidia_gpu_device(device_id: int = 0, pci_bus_id: str | None = None) -> HardwareDevice:
    """An NVIDIA GPU hardware device (for injection in tests, or as discovered from sysfs)."""
    metadata = {"Discrete": "1"}
    if pci_bus_id:
        metadata["pci_bus_id"] = pci_bus_id
    return HardwareDevice(OrtHardwareDeviceType.GPU, NVIDIA_VENDOR_ID, "NVIDIA", device_id, metadata)


def pci_gpus(root: Path = Path("/sys/bus/pci/devices")) -> list[HardwareDevice]:
    """NVIDIA display/3D controllers (PCI class 0x03xxxx) under ``root``, in bus order."""
    found: list[HardwareDevice] = []
    if not root.is_dir():
        return found
    for dev in sorted(root.iterdir()):
        try:
            pci_class = int((dev / "class").read_text().strip(), 16)
            vendor = int((dev / "vendor").read_text().strip(), 16)
            device = int((dev / "device").read_text().strip(), 16)
        except (OSError, ValueError):
            continue
        if pci_class >> 16 == 0x03 and vendor == NVIDIA_VENDOR_ID:
            found.append(nvidia_gpu_device(device, dev.name))
    return found


def discover_hardware() -> list[HardwareDevice]:
    """The CPU first, then every NVIDIA GPU sysfs shows."""
    return [cpu_device(), *pci_gpus()]


def cuda_gpu_count() -> int:
    """GPUs the CUDA driver sees (``cuInit`` + ``cuDeviceGetCount`` through ``libcuda.so.1``); 0 without a driver
    or when it fails. Thread-safe; loads the driver library into the process on first use (the same loader as
    :mod:`epabi.cuda_arrays`)."""
    from .cuda_arrays import _driver  # late: cuda_arrays needs numpy, hardware discovery does not

    return _driver().device_count()
