"""EP device memory as ONNX Runtime's core handles it: buffers from the plugin's ``OrtAllocator``, copies
through the plugin's ``OrtDataTransferImpl``.

When the EP device registers a DEFAULT memory info, the session asks the factory for an allocator for it
(``OrtEpFactory::CreateAllocator``); fused-node inputs are copied from host memory into buffers of that
allocator with ``CopyTensors`` (after ``CanCopy``), fused-node outputs are allocated there, and values read by
CPU nodes or returned to the caller are copied back. The host never dereferences device memory.
Thread-safety: the allocator and data transfer are called from the run's thread; the plugin's own objects
are required to be thread-safe, as in ORT.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ._ffi import ffi
from .errors import ConductError
from .gating import host_reads
from .objects import KeyValuePairs, MemoryInfo
from .values import ONNX_TO_NUMPY, OrtValue, TensorTypeAndShapeInfo

if TYPE_CHECKING:
    from .host import Host
    from .library import Factory


class DeviceValue(OrtValue):
    """A tensor in EP device memory: shape, element type, the device pointer and its memory info."""

    def __init__(self, allocator: DeviceAllocator, shape: list[int], elem_type: int) -> None:
        self._allocator = allocator
        self._shape = [int(d) for d in shape]
        self._elem_type = elem_type
        self._device_type = "ep_device"
        self._device_id = allocator.memory_info.device_id
        self.memory_info = allocator.memory_info
        self._nbytes = math.prod(self._shape) * ONNX_TO_NUMPY[elem_type].itemsize
        self.device_ptr = allocator.alloc(self._nbytes) if self._nbytes else ffi.NULL
        self.ptr: Any = ffi.NULL

    def release(self) -> None:
        if self.device_ptr != ffi.NULL:
            self._allocator.free(self.device_ptr)
            self.device_ptr = ffi.NULL

    # device memory is opaque to the host
    @property
    def array(self) -> np.ndarray:
        raise TypeError("a DeviceValue lives in EP device memory; copy it to the host first")

    def numpy(self) -> np.ndarray:
        raise TypeError("a DeviceValue lives in EP device memory; copy it to the host first")

    def data_ptr(self) -> int:
        return int(ffi.cast("uintptr_t", self.device_ptr))

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
    """The plugin's ``OrtAllocator`` for one memory info, made by ``OrtEpFactory::CreateAllocator``."""

    def __init__(self, host: Host, factory: Factory, memory_info: MemoryInfo) -> None:
        self.host = host
        self.factory = factory
        self.memory_info = memory_info
        if "CreateAllocator" not in factory.members:
            raise ConductError(f"{factory.name}: the EP device registers memory '{memory_info.name}' but "
                               "OrtEpFactory::CreateAllocator is NULL")
        out = ffi.new("OrtAllocator**")
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
        with self.host.calling(self.factory.library, "OrtAllocator::Free"):
            self.ptr.Free(self.ptr, p)
        self.live -= 1

    def stats(self) -> dict[str, str]:
        """``OrtAllocator::GetStats`` (API 23+): e.g. the arena's InUse/TotalAllocated/NumAllocs; {} if absent."""
        v = int(self.ptr.version)
        if not host_reads(23, v, self.host.api_version) or v < 23 or self.ptr.GetStats == ffi.NULL:
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
    """Host <-> EP device copies through the factory's ``OrtDataTransferImpl``."""

    def __init__(self, host: Host, factory: Factory, device_memory: MemoryInfo) -> None:
        self.host = host
        self.factory = factory
        self.impl = factory.data_transfer
        if self.impl == ffi.NULL:
            raise ConductError(f"{factory.name}: the EP device registers device memory but CreateDataTransfer "
                               "returned no OrtDataTransferImpl")
        cpu, dev = host.cpu_memory.device_ptr, device_memory.device_ptr
        for src, dst, what in ((cpu, dev, "host -> device"), (dev, cpu, "device -> host")):
            with host.calling(factory.library, "OrtDataTransferImpl::CanCopy"):
                ok = self.impl.CanCopy(self.impl, src, dst)
            if not ok:
                raise ConductError(f"{factory.name}: OrtDataTransferImpl::CanCopy refuses {what} copies for its "
                                   "own device memory")

    def copy(self, src: OrtValue, dst: OrtValue) -> None:
        """Copies one tensor; both must have the same shape and element type."""
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
