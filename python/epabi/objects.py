"""Host-side objects behind the opaque pointers: key-value pairs, hardware devices, memory infos, EP devices.

Their public attributes use onnxruntime's Python names (``OrtEpDevice.ep_name``, ``OrtHardwareDevice.vendor_id``,
...), so a script written for onnxruntime reads epabi's devices unchanged. The C-facing parts (``ptr`` and
the cdata strings the plugin may read) stay valid for as long as the object is alive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._ffi import ffi, header_enum

# The enums' members and values come from ort_abi.h, like every other part of the ABI.
OrtHardwareDeviceType = header_enum("OrtHardwareDeviceType", "Hardware device type: CPU, GPU, NPU.",
                                    prefix="OrtHardwareDeviceType_")
OrtMemoryInfoDeviceType = header_enum("OrtMemoryInfoDeviceType", "Memory device type: CPU, GPU, FPGA, NPU.",
                                      prefix="OrtMemoryInfoDeviceType_")
OrtDeviceMemoryType = header_enum("OrtDeviceMemoryType", "Device memory type: DEFAULT, HOST_ACCESSIBLE.",
                                  prefix="OrtDeviceMemoryType_")
OrtAllocatorType = header_enum("OrtAllocatorType", "Allocator type: INVALID, DEVICE, ARENA, READ_ONLY.",
                               rename={"OrtInvalidAllocator": "INVALID", "OrtDeviceAllocator": "DEVICE",
                                       "OrtArenaAllocator": "ARENA", "OrtReadOnlyAllocator": "READ_ONLY"})


def cstr(text: str) -> Any:
    """A NUL-terminated C copy of ``text`` (UTF-8); keep the result alive while C may read it."""
    return ffi.new("char[]", text.encode())


def pystr(ptr: Any) -> str | None:
    """Python text of a C string, None for NULL."""
    return None if ptr == ffi.NULL else ffi.string(ptr).decode("utf-8", "replace")


class KeyValuePairs:
    """``OrtKeyValuePairs``: ordered string map; C views are rebuilt lazily after each change."""

    def __init__(self, items: dict[str, str] | None = None) -> None:
        self._items: dict[str, str] = {}
        self._cvalues: dict[str, Any] = {}
        self._arrays: tuple[Any, Any, Any, Any] | None = None
        self.ptr: Any = ffi.NULL
        for key, value in (items or {}).items():
            self.add(key, value)

    def add(self, key: str, value: str) -> None:
        self._items[key] = value
        self._cvalues[key] = cstr(value)
        self._arrays = None

    def remove(self, key: str) -> None:
        self._items.pop(key, None)
        self._cvalues.pop(key, None)
        self._arrays = None

    def c_value(self, key: str) -> Any:
        return self._cvalues.get(key, ffi.NULL)

    def c_arrays(self) -> tuple[Any, Any, int]:
        """``(const char* const* keys, const char* const* values, n)`` valid until the next change."""
        if self._arrays is None:
            keys = [cstr(k) for k in self._items]
            vals = [self._cvalues[k] for k in self._items]
            self._arrays = (ffi.new("const char*[]", keys or [ffi.NULL]),
                            ffi.new("const char*[]", vals or [ffi.NULL]), keys, vals)
        return self._arrays[0], self._arrays[1], len(self._items)

    def as_dict(self) -> dict[str, str]:
        return dict(self._items)


@dataclass(eq=False)
class HardwareDevice:
    """``OrtHardwareDevice``: what the host found (or a plugin created). Same attributes as onnxruntime's.

    ``type`` is an :class:`OrtHardwareDeviceType`; ``vendor_id``/``device_id`` are PCI ids (0 for the CPU).
    """

    type: OrtHardwareDeviceType
    vendor_id: int
    vendor: str
    device_id: int = 0
    metadata: dict[str, str] = field(default_factory=dict)
    created_by: str = "host"

    def __post_init__(self) -> None:
        self.type = OrtHardwareDeviceType(self.type)
        self.c_vendor = cstr(self.vendor)
        self.c_metadata = KeyValuePairs(self.metadata)
        self.ptr: Any = ffi.NULL

    def __repr__(self) -> str:
        return (f"HardwareDevice({self.type.name}, vendor={self.vendor!r}, vendor_id={self.vendor_id:#06x}, "
                f"device_id={self.device_id:#x}, metadata={self.metadata})")


@dataclass(eq=False)
class MemoryInfo:
    """``OrtMemoryInfo``: where a buffer lives and which allocator kind serves it."""

    name: str
    device_type: OrtMemoryInfoDeviceType
    vendor_id: int
    device_id: int
    mem_type: OrtDeviceMemoryType
    alignment: int
    allocator_type: OrtAllocatorType
    ort_mem_type: int = 0  # OrtMemType (CPUInput/CPUOutput/Default); 0 for V2-created infos

    def __post_init__(self) -> None:
        self.c_name = cstr(self.name)
        self.ptr: Any = ffi.NULL
        self.device = MemoryDevice(OrtMemoryInfoDeviceType(self.device_type), OrtDeviceMemoryType(self.mem_type),
                                   self.vendor_id, self.device_id)

    def same_as(self, other: MemoryInfo) -> bool:
        return (self.name, self.device, self.allocator_type) == (other.name, other.device, other.allocator_type)


@dataclass(frozen=True)
class MemoryDevice:
    """``OrtMemoryDevice``: the device part of a memory info; equal devices share memory."""

    device_type: OrtMemoryInfoDeviceType
    mem_type: OrtDeviceMemoryType
    vendor_id: int
    device_id: int


class EpDevice:
    """``OrtEpDevice``: one (EP, hardware device) pairing offered by a plugin factory.

    Attributes follow onnxruntime: ``ep_name``, ``ep_vendor``, ``ep_metadata`` (dict), ``ep_options`` (dict),
    ``device`` (:class:`HardwareDevice`); ``memory_info(OrtDeviceMemoryType)`` returns the allocator info.
    """

    def __init__(self, factory: Any, device: HardwareDevice, metadata: dict[str, str],
                 options: dict[str, str]) -> None:
        self.factory = factory
        self.device = device
        self.ep_name: str = factory.name
        self.ep_vendor: str = factory.vendor
        self.c_ep_name = cstr(self.ep_name)
        self.c_ep_vendor = cstr(self.ep_vendor)
        self.c_metadata = KeyValuePairs(metadata)
        self.c_options = KeyValuePairs(options)
        self.memory_infos: list[MemoryInfo] = []
        self.ptr: Any = ffi.NULL

    @property
    def ep_metadata(self) -> dict[str, str]:
        return self.c_metadata.as_dict()

    @property
    def ep_options(self) -> dict[str, str]:
        return self.c_options.as_dict()

    def memory_info(self, mem_type: OrtDeviceMemoryType = OrtDeviceMemoryType.DEFAULT) -> MemoryInfo | None:
        """The non-read-only allocator info of this memory type (as ``EpDevice_MemoryInfo``), or None."""
        for info in self.memory_infos:
            if info.mem_type == mem_type and info.allocator_type != OrtAllocatorType.READ_ONLY:
                return info
        return None

    def __repr__(self) -> str:
        return f"EpDevice({self.ep_name!r} on {self.device!r}, metadata={self.ep_metadata})"


class Status:
    """``OrtStatus``: an error code and message."""

    def __init__(self, code: int, message: str, origin: str) -> None:
        self.code = code
        self.message = message
        self.origin = origin  # "plugin:<name>" or "host"
        self.c_message = cstr(message)
