"""EP device memory as ONNX Runtime's core handles it: buffers from the plugin's ``OrtAllocator``, copies
through the plugin's ``OrtDataTransferImpl``.

When the EP device registers a DEFAULT memory info, the session asks the factory for an allocator for it
(``OrtEpFactory::CreateAllocator``); fused-node inputs are copied from host memory into buffers of that
allocator with ``CopyTensors`` (after ``CanCopy``, asked before every copy), fused-node outputs are allocated
there, and values read by CPU nodes or returned to the caller are copied back. The host never dereferences
device memory.
Thread-safety: the allocator and data transfer are called from the run's thread; the plugin's own objects
are required to be thread-safe, as in ORT.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ._ffi import ffi
from .errors import ConductError, OrtErrorCode, OrtStatusError
from .gating import host_reads
from .objects import EpDevice, KeyValuePairs, MemoryInfo, OrtDeviceMemoryType, OrtMemoryInfoDeviceType
from .values import ONNX_TO_NUMPY, OrtValue, TensorTypeAndShapeInfo, onnx_type_of, update_source
from .versions import ALLOCATOR_STATS_SINCE

if TYPE_CHECKING:
    from .host import Host
    from .library import Factory, PluginLibrary

#: ``OrtValue.device_name()`` per memory device type, as onnxruntime names them (every GPU is "cuda" there).
_DEVICE_NAMES = {OrtMemoryInfoDeviceType.CPU: "cpu", OrtMemoryInfoDeviceType.GPU: "cuda",
                 OrtMemoryInfoDeviceType.FPGA: "fpga", OrtMemoryInfoDeviceType.NPU: "npu"}
#: ``device_type`` names of the onnxruntime Python API -> memory device type (and the vendor it implies).
DEVICE_TYPES: dict[str, tuple[OrtMemoryInfoDeviceType, int | None]] = {
    "cuda": (OrtMemoryInfoDeviceType.GPU, 0x10DE), "gpu": (OrtMemoryInfoDeviceType.GPU, None),
    "npu": (OrtMemoryInfoDeviceType.NPU, None), "fpga": (OrtMemoryInfoDeviceType.FPGA, None)}


class DeviceValue(OrtValue):
    """A tensor in EP device memory: shape, element type, the device pointer and its memory info.

    Made by the host (fused-node outputs, copies of feeds), by :meth:`OrtValue.ortvalue_from_numpy` with a
    device type, or around memory someone else owns (:meth:`wrap`: a bound device pointer, a CuPy array).
    ``numpy()`` and ``update_inplace()`` copy through the plugin's data transfer when the value has one;
    the host itself never dereferences the pointer.

    Thread-safety: as :class:`OrtValue`; the buffer is freed through the plugin's (thread-safe) allocator by
    ``release()`` or when the value is garbage-collected, never after its library was unregistered.
    """

    def __init__(self, allocator: DeviceAllocator, shape: list[int], elem_type: int,
                 transfer: DataTransfer | None = None) -> None:
        self._init(allocator.memory_info, shape, elem_type, transfer, allocator.factory.library)
        self._allocator: DeviceAllocator | None = allocator
        self.device_ptr = allocator.alloc(self._nbytes) if self._nbytes else ffi.NULL

    def _init(self, memory_info: MemoryInfo, shape: list[int], elem_type: int, transfer: DataTransfer | None,
              library: PluginLibrary) -> None:
        self._shape = [int(d) for d in shape]
        if any(d < 0 for d in self._shape):
            raise ValueError(f"negative dimension in shape {self._shape}")
        self._elem_type = elem_type
        self._device_type = _DEVICE_NAMES.get(OrtMemoryInfoDeviceType(memory_info.device_type), "ep_device")
        self.memory_info = memory_info
        self.transfer = transfer
        self._library = library
        self._owner: Any = None
        self._allocator = None
        self._nbytes = math.prod(self._shape) * ONNX_TO_NUMPY[elem_type].itemsize
        self.device_ptr: Any = ffi.NULL
        self.released = False  # by release(): the buffer is gone, the value may not be read or run again
        self.ptr: Any = ffi.NULL

    @classmethod
    def wrap(cls, memory: DeviceMemory, pointer: int, shape: list[int], elem_type: int, owner: Any = None
             ) -> DeviceValue:
        """A value over ``pointer`` in ``memory`` that someone else allocated (no copy, never freed here).

        ``owner`` is kept referenced as long as the value lives (e.g. the CuPy array the pointer belongs to).
        Raises ValueError for a NULL pointer of a non-empty tensor or a negative dim.
        """
        value = cls.__new__(cls)
        value._init(memory.memory_info, shape, elem_type, memory.transfer, memory.factory.library)
        if not pointer and value._nbytes:
            raise ValueError(f"NULL device pointer for a non-empty tensor of shape {value._shape}")
        value.device_ptr = ffi.cast("void*", pointer)
        value._owner = owner
        return value

    def release(self) -> None:
        """Frees the buffer through the plugin's allocator (only one the host allocated); idempotent. Afterwards
        ``numpy()``, ``update_inplace()`` and runs refuse the value (ValueError, INVALID_ARGUMENT)."""
        allocator, pointer = self._allocator, self.device_ptr
        self.device_ptr = ffi.NULL
        self.released = True
        if allocator is not None and pointer != ffi.NULL:
            allocator.free(pointer)

    def check_alive(self, what: str) -> None:
        """Raises ValueError when :meth:`release` freed the buffer (the plugin would be handed NULL)."""
        if self.released and self._nbytes:
            raise ValueError(f"{what}: this DeviceValue ({self.memory_info.name}) was released")

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # best effort at interpreter teardown
            pass

    @property
    def owner(self) -> Any:
        """The object that owns wrapped memory (None for memory the host allocated)."""
        return self._owner

    def _live_transfer(self, what: str) -> DataTransfer:
        self.check_alive(what)
        if self.transfer is None:
            raise TypeError(f"{what}: this DeviceValue ({self.memory_info.name}) has no data transfer; the session "
                            "copies it for you")
        if not self._library.loaded:
            raise RuntimeError(f"{what}: the plugin library '{self._library.name}' that serves "
                               f"'{self.memory_info.name}' was unregistered")
        return self.transfer

    # device memory is opaque to the host: reading it is a copy through the plugin
    @property
    def array(self) -> np.ndarray:
        raise TypeError("a DeviceValue lives in EP device memory; copy it to the host first (numpy())")

    def numpy(self) -> np.ndarray:
        """A host copy, through the plugin's data transfer.

        Raises:
            TypeError: the value has no data transfer (an internal value of a session).
            RuntimeError: its plugin library was unregistered.
        """
        transfer = self._live_transfer("numpy()")
        return transfer.to_host(self).array

    def update_inplace(self, array: np.ndarray) -> None:
        """Copies host ``array`` into this value's device buffer (same address), through the data transfer.

        Raises:
            ValueError: another element count or dtype (as :meth:`OrtValue.update_inplace`).
            TypeError, RuntimeError: neither a numpy array nor an OrtValue; as :meth:`numpy`.
        """
        array = update_source(array, ONNX_TO_NUMPY[self._elem_type], int(np.prod(self._shape, dtype=np.int64)))
        array = array.reshape(self._shape)
        transfer = self._live_transfer("update_inplace()")
        if self._nbytes:
            transfer.copy(OrtValue(np.require(array, requirements="C")), self)

    def data_ptr(self) -> int:
        return int(ffi.cast("uintptr_t", self.device_ptr))

    def binding_key(self) -> tuple[int, tuple[int, ...], np.dtype]:
        """As :meth:`OrtValue.binding_key`, read each time (``release()`` clears the pointer)."""
        return self.data_ptr(), tuple(self._shape), ONNX_TO_NUMPY[self._elem_type]

    def shape(self) -> list[int]:
        return list(self._shape)

    @property
    def nbytes(self) -> int:
        return self._nbytes

    def c_data(self) -> Any:
        return self.device_ptr

    def type_and_shape(self) -> TensorTypeAndShapeInfo:
        return TensorTypeAndShapeInfo(self._elem_type, list(self._shape))

    def __repr__(self) -> str:
        return f"DeviceValue({ONNX_TO_NUMPY[self._elem_type]}{self._shape}, {self.memory_info.name})"


class DeviceAllocator:
    """The plugin's ``OrtAllocator`` for one memory info, made by ``OrtEpFactory::CreateAllocator``, or for a
    session's allocators by ``OrtEp::CreateAllocator`` when the EP has it (ORT prefers the EP's; either way it
    releases them with ``OrtEpFactory::ReleaseAllocator``)."""

    def __init__(self, host: Host, factory: Factory, memory_info: MemoryInfo, ep: Any = None) -> None:
        self.host = host
        self.factory = factory
        self.memory_info = memory_info
        out = ffi.new("OrtAllocator**")
        if ep is not None and "CreateAllocator" in ep.members:
            ep.call_status("CreateAllocator", memory_info.ptr, out)
        elif "CreateAllocator" not in factory.members:
            raise ConductError(f"{factory.name}: the EP device registers memory '{memory_info.name}' but "
                               "OrtEpFactory::CreateAllocator is NULL")
        else:
            factory.call_status("CreateAllocator", memory_info.ptr, ffi.NULL, out)
        self.ptr = out[0]
        if self.ptr == ffi.NULL:
            raise ConductError(f"{factory.name}: CreateAllocator for '{memory_info.name}' returned NULL")
        if int(self.ptr.version) == 0 or ffi.NULL in (self.ptr.Alloc, self.ptr.Free, self.ptr.Info):
            self.close()
            raise ConductError(f"{factory.name}: the OrtAllocator for '{memory_info.name}' has version 0 or a "
                               "NULL Alloc/Free/Info")
        self.live = 0

    def alloc(self, nbytes: int) -> Any:
        with self.host.calling(self.factory.library, "OrtAllocator::Alloc"):
            p = self.ptr.Alloc(self.ptr, nbytes)
        if p == ffi.NULL:
            raise MemoryError(f"{self.factory.name}: OrtAllocator::Alloc of {nbytes} bytes in "
                              f"'{self.memory_info.name}' failed")
        self.live += 1
        return p

    def free(self, p: Any) -> None:
        """Frees ``p``; a no-op once the allocator was released (its memory went with it)."""
        if self.ptr == ffi.NULL:
            return
        with self.host.calling(self.factory.library, "OrtAllocator::Free"):
            self.ptr.Free(self.ptr, p)
        self.live -= 1

    def stats(self) -> dict[str, str]:
        """``OrtAllocator::GetStats``: e.g. the arena's InUse/TotalAllocated/NumAllocs; {} when the host does not
        know it, the allocator's ``version`` predates it, or it is NULL."""
        v, since = int(self.ptr.version), ALLOCATOR_STATS_SINCE
        if not host_reads(since, v, self.host.api_version) or v < since or self.ptr.GetStats == ffi.NULL:
            return {}
        out = ffi.new("OrtKeyValuePairs**")
        with self.host.calling(self.factory.library, "OrtAllocator::GetStats"):
            self.host.raise_status(self.ptr.GetStats(self.ptr, out), f"{self.factory.name}: GetStats")
        kvp = self.host.handles.lookup(out[0], KeyValuePairs)
        if kvp is None:
            raise ConductError(f"{self.factory.name}: GetStats returned no OrtKeyValuePairs made by the host")
        self.host.handles.drop(out[0])
        return kvp.as_dict()

    def close(self) -> None:
        if self.ptr != ffi.NULL and "ReleaseAllocator" in self.factory.members:
            self.factory.call("ReleaseAllocator", self.ptr)
        self.ptr = ffi.NULL


class DataTransfer:
    """Host <-> EP device copies through an ``OrtDataTransferImpl`` of the factory: the one it made at
    registration (``factory.data_transfer``, for copies outside a session) or a session's own (``impl``).
    ``device_memory`` None: copies between host buffers only.

    As ORT's ``DataTransferManager``, every copy first asks ``CanCopy(src device, dst device)``; a refusal fails
    the copy (ORT has no other data transfer for EP device memory)."""

    def __init__(self, host: Host, factory: Factory, device_memory: MemoryInfo | None, impl: Any = None) -> None:
        self.host = host
        self.factory = factory
        self.device_memory = device_memory
        self.impl = factory.data_transfer if impl is None else impl
        if self.impl == ffi.NULL:
            raise ConductError(f"{factory.name}: the EP device registers device memory but CreateDataTransfer "
                               "returned no OrtDataTransferImpl")

    def can_copy(self, src: Any, dst: Any) -> bool:
        """``OrtDataTransferImpl::CanCopy`` for two ``OrtMemoryDevice*``."""
        with self.host.calling(self.factory.library, "OrtDataTransferImpl::CanCopy"):
            return bool(self.impl.CanCopy(self.impl, src, dst))

    def _memory_device(self, value: OrtValue) -> tuple[Any, str]:
        info = value.memory_info if isinstance(value, DeviceValue) else self.host.cpu_memory
        return info.device_ptr, info.name

    def copy(self, src: OrtValue, dst: OrtValue, probed: bool = False) -> None:
        """Copies one tensor; both must have the same shape and element type. ``probed``: the caller has asked
        ``CanCopy`` already.

        Raises:
            OrtStatusError: FAIL when ``CanCopy`` refuses the pair of devices, or the plugin's CopyTensors error.
        """
        (src_dev, src_name), (dst_dev, dst_name) = self._memory_device(src), self._memory_device(dst)
        if not probed and not self.can_copy(src_dev, dst_dev):
            raise OrtStatusError(OrtErrorCode.FAIL, f"There's no data transfer registered for copying tensors from "
                                 f"'{src_name}' to '{dst_name}'", f"{self.factory.name}: CopyTensors")
        handles = [self.host.handles.issue(v, "OrtValue*") for v in (src, dst)]
        try:
            srcs = ffi.new("OrtValue*[]", [handles[0]])
            dsts = ffi.new("OrtValue*[]", [handles[1]])
            streams = ffi.new("OrtSyncStream*[]", 1)
            with self.host.calling(self.factory.library, "OrtDataTransferImpl::CopyTensors"):
                status = self.impl.CopyTensors(self.impl, srcs, dsts, streams, 1)
                self.host.raise_status(status, f"{self.factory.name}: CopyTensors")
        finally:
            for h in handles:
                self.host.handles.drop(h)

    def to_device(self, value: OrtValue, allocator: DeviceAllocator) -> DeviceValue:
        dev = DeviceValue(allocator, value.shape(), value.element_type())
        try:
            if dev.nbytes:
                self.copy(value, dev)
        except BaseException:
            dev.release()
            raise
        return dev

    def to_host(self, value: DeviceValue) -> OrtValue:
        host = OrtValue(np.empty(value.shape(), dtype=ONNX_TO_NUMPY[value.element_type()]))
        if value.nbytes:
            self.copy(value, host)
        return host


class DeviceMemory:
    """One EP device's DEFAULT device memory as a host-side target: its memory info, the allocator ORT keeps
    for it (created at registration), and the factory's data transfer. Made by :func:`find_device_memory`."""

    def __init__(self, device: EpDevice, memory_info: MemoryInfo, allocator: DeviceAllocator | None) -> None:
        self.device = device
        self.factory: Factory = device.factory
        self.memory_info = memory_info
        self.allocator = allocator
        self.transfer = self.factory.transfer_for(memory_info)

    def allocate(self, shape: list[int], elem_type: int) -> DeviceValue:
        """An uninitialised device tensor. Raises MemoryError (the plugin's Alloc failed), ValueError."""
        if self.allocator is None:
            raise ValueError(f"{self.factory.name}: no allocator for '{self.memory_info.name}'")
        return DeviceValue(self.allocator, shape, elem_type, self.transfer)

    def __repr__(self) -> str:
        info = self.memory_info
        return (f"DeviceMemory({info.name!r}, {OrtMemoryInfoDeviceType(info.device_type).name}:{info.device_id}, "
                f"vendor {info.vendor_id:#06x}, {self.factory.name})")


def find_device_memory(device_type: str, device_id: int = 0, vendor_id: int = -1, host: Host | None = None,
                       memory_info: MemoryInfo | None = None) -> DeviceMemory:
    """The EP device memory that onnxruntime's ``(device_type, device_id[, vendor_id])`` names.

    ``"cuda"`` is GPU-typed memory of vendor 0x10DE (NVIDIA), ``"gpu"`` any GPU-typed memory (``vendor_id``
    narrows it), ``"npu"``/``"fpga"`` likewise. The candidates are the DEFAULT device memories of the EP
    devices of ``host`` (all hosts' registered libraries when None, the most recently registered first):
    the epabi plugin's GPU devices ("EpAbi_GPU") and, in device-memory mode, its software adapter
    ("EpAbi_Software", GPU-typed like a discrete device). ``memory_info`` picks one memory info directly.

    Raises:
        ValueError: unknown device type, or no registered EP device has such memory (the message lists what
            there is).
    """
    from .library import registered_libraries

    libraries = host.libraries if host is not None else registered_libraries()
    candidates: list[tuple[EpDevice, MemoryInfo]] = []
    for library in reversed(libraries):
        for factory in library.factories:
            for device in factory.ep_devices:
                info = device.memory_info(OrtDeviceMemoryType.DEFAULT)
                if info is not None:
                    candidates.append((device, info))
    if memory_info is not None:
        match = [(d, i) for d, i in candidates if i is memory_info or i.same_as(memory_info)]
        wanted = f"memory info '{memory_info.name}'"
    else:
        kind = DEVICE_TYPES.get(device_type.lower())
        if kind is None:
            raise ValueError(f"device_type {device_type!r}: expected 'cpu' or one of {sorted(DEVICE_TYPES)}")
        mem_type, implied_vendor = kind
        vendor = vendor_id if vendor_id >= 0 else implied_vendor
        match = [(d, i) for d, i in candidates if i.device_type == mem_type and i.device_id == int(device_id)
                 and (vendor is None or i.vendor_id == vendor)]
        wanted = f"{device_type}:{device_id}" + ("" if vendor is None else f" (vendor {vendor:#06x})")
    if not match:
        where = "this host" if host is not None else "any registered plugin library"
        have = ", ".join(f"'{i.name}' ({OrtMemoryInfoDeviceType(i.device_type).name}:{i.device_id}, vendor "
                         f"{i.vendor_id:#06x}, {d.ep_name})" for d, i in candidates) or "none"
        raise ValueError(f"no EP device of {where} has {wanted} device memory (device memories: {have}); register "
                         "a plugin library whose EP device has it (epabi: a GPU, or EPABI_SOFTWARE_DEVICE_MEMORY="
                         "device with EPABI_ALLOW_SOFTWARE_ADAPTER=1)")
    device, info = match[0]
    allocator = next((a for a in device.factory.shared_allocators if a.memory_info is info), None)
    return DeviceMemory(device, info, allocator)


def device_value_from_numpy(memory: DeviceMemory, array: np.ndarray) -> DeviceValue:
    """A device copy of host ``array`` (allocated through the plugin, copied through its data transfer)."""
    array = np.require(array, requirements="C")  # unlike ascontiguousarray, keeps a 0-d array 0-d
    value = memory.allocate(list(array.shape), onnx_type_of(array.dtype))
    try:
        if value.nbytes:
            memory.transfer.copy(OrtValue(array), value)
    except BaseException:
        value.release()
        raise
    return value
