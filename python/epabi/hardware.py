"""Hardware discovery as ONNX Runtime does it on Linux: always the CPU, plus NVIDIA GPUs from PCI in sysfs.

Tests and the CLI may pass their own list to :class:`epabi.Host` instead (``hardware=[...]``); the CLI's
``--hardware`` specs are parsed by :func:`parse_hardware`.
"""

from __future__ import annotations

from pathlib import Path

from .objects import HardwareDevice, OrtHardwareDeviceType

NVIDIA_VENDOR_ID = 0x10DE
_CPU_VENDORS = {"GenuineIntel": ("Intel", 0x8086), "AuthenticAMD": ("AMD", 0x1022)}
#: Vendors a ``--hardware`` spec may name: (vendor string, vendor id), per device type (AMD GPUs have their own
#: PCI vendor id); other vendors are given by number.
_NAMED_VENDORS = {
    "intel": ("Intel", 0x8086, 0x8086),
    "amd": ("AMD", 0x1022, 0x1002),
    "nvidia": ("NVIDIA", NVIDIA_VENDOR_ID, NVIDIA_VENDOR_ID),
    "arm": ("ARM", 0x41, 0x41),
}
_TYPES = {"cpu": OrtHardwareDeviceType.CPU, "gpu": OrtHardwareDeviceType.GPU, "npu": OrtHardwareDeviceType.NPU}


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


def parse_hardware(spec: str) -> HardwareDevice:
    """A hardware device from ``TYPE[:VENDOR[:DEVICE_ID]][,KEY=VALUE...]``, the CLI's ``--hardware`` syntax.

    TYPE is ``cpu``, ``gpu`` or ``npu``; VENDOR a name (``intel``, ``amd``, ``nvidia``, ``arm``) or a vendor id
    (``0x8086``); DEVICE_ID a PCI device id (default 0); KEY=VALUE pairs are the device's metadata. ``cpu``
    alone is this machine's CPU (:func:`cpu_device`); an NVIDIA GPU gets ``Discrete=1`` as discovered ones do.
    Examples: ``cpu:intel`` (an Intel CPU, as OpenVINO's plugin needs), ``gpu:nvidia:0x2335,pci_bus_id=0000:01:00.0``.

    Raises:
        ValueError: the spec does not parse (the message says why).
    """
    head, *pairs = spec.strip().split(",")
    metadata: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"hardware {spec!r}: metadata {pair!r} is not KEY=VALUE")
        metadata[key] = value
    kind, *rest = head.lower().split(":")
    if kind not in _TYPES or len(rest) > 2:
        raise ValueError(f"hardware {spec!r}: expected TYPE[:VENDOR[:DEVICE_ID]][,KEY=VALUE...] with TYPE cpu, "
                         "gpu or npu")
    if not rest:
        if kind != "cpu":
            raise ValueError(f"hardware {spec!r}: an injected {kind.upper()} needs a vendor, {kind}:VENDOR with VENDOR "
                             f"{', '.join(_NAMED_VENDORS)} or an id (e.g. {kind}:intel, {kind}:0x8086); only cpu "
                             "alone means this machine's CPU")
        cpu = cpu_device()
        return HardwareDevice(cpu.type, cpu.vendor_id, cpu.vendor, cpu.device_id, metadata)
    vendor_text = rest[0]
    if vendor_text in _NAMED_VENDORS:
        vendor, cpu_id, other_id = _NAMED_VENDORS[vendor_text]
        vendor_id = cpu_id if kind == "cpu" else other_id
    else:
        vendor_id = _number(spec, "vendor", vendor_text)
        vendor = next((v for v, cpu_id, other_id in _NAMED_VENDORS.values() if vendor_id in (cpu_id, other_id)),
                      f"{vendor_id:#06x}")
    device_id = _number(spec, "device id", rest[1]) if len(rest) == 2 else 0
    if kind == "gpu" and vendor_id == NVIDIA_VENDOR_ID:
        metadata = {"Discrete": "1", **metadata}
    return HardwareDevice(_TYPES[kind], vendor_id, vendor, device_id, metadata)


def _number(spec: str, what: str, text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        value = -1
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"hardware {spec!r}: {what} {text!r} is not a name or a number (0x8086, 4318)")
    return value
