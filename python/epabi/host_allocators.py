"""``OrtAllocator``s the host hands to plugin kernels (``KernelInfoGetAllocator``, ``KernelContext_GetAllocator``).

Two kinds, as ONNX Runtime hands them out: host (CPU) memory, 64-byte aligned like ORT's CPU allocator, and a
wrapper around the session's allocator for the EP's device memory (the plugin's own ``OrtAllocator``). Either is
owned by whoever asked for it and released with ``OrtApi::ReleaseAllocator``; memory still allocated then stays
valid until the host is closed (ORT keeps the underlying allocator alive with the session).

``Info`` returns a memory info laid out like ONNX Runtime's own C++ ``OrtMemoryInfo`` (observed on the 1.24.4
and 1.32.0 wheels, x86-64, libstdc++): a ``std::string`` name (pointer, length, 16-byte inline buffer) at 0, the
``OrtMemType`` at 32, the ``OrtAllocatorType`` at 36, then ``OrtDevice``: device type (int8) at 40, memory type
(int8) at 41, device id (int16) at 42, vendor id (uint32) at 44, alignment (size_t) at 48; 56 bytes. Plugins built
from ORT's sources copy that struct out of an allocator (the WebGPU plugin's pre-packing does), so an opaque handle
would crash them; the same pointer is also a live handle for every ``OrtApi`` memory-info function.

The C tables share one set of cffi callbacks; each table is found again by its address in a lock-protected map,
so the plugin may call from any thread.
"""

from __future__ import annotations

import threading
from typing import Any

from ._ffi import ffi
from .handles import address

_ALIGNMENT = 64
_ORT_MEMORY_INFO_SIZE = 56
_lock = threading.Lock()
_live: dict[int, HostAllocator] = {}  # OrtAllocator address -> allocator, while handed out


class HostAllocator:
    """A host-implemented ``OrtAllocator``: ``memory_info`` says where its memory lives.

    Args:
        memory_info: the :class:`epabi.objects.MemoryInfo` (with a live handle) that ``Info`` returns.
        device: a :class:`epabi.device_memory.DeviceAllocator` to forward to; None allocates host memory.
    """

    def __init__(self, memory_info: Any, handles: Any, device: Any = None) -> None:
        self.memory_info = memory_info
        self.device = device
        self._handles = handles
        self._layout, self._name = ort_memory_info_layout(memory_info)
        self.info_ptr = handles.issue(memory_info, "OrtMemoryInfo*", cell=self._layout)
        self._blocks: dict[int, Any] = {}  # host memory: aligned address -> owning cdata
        self._blocks_lock = threading.Lock()
        self.table = ffi.new("OrtAllocator*")
        self.table.version = 1  # only the three members every version has
        self.table.Alloc = _alloc_cb
        self.table.Free = _free_cb
        self.table.Info = _info_cb
        self.ptr = self.table
        with _lock:
            _live[address(self.table)] = self

    def alloc(self, size: int) -> Any:
        if self.device is not None:
            return self.device.alloc(size) if size else ffi.NULL
        block = ffi.new("char[]", size + _ALIGNMENT)
        base = address(block)
        aligned = (base + _ALIGNMENT - 1) // _ALIGNMENT * _ALIGNMENT
        with self._blocks_lock:
            self._blocks[aligned] = block
        return ffi.cast("void*", aligned)

    def free(self, p: Any) -> None:
        if address(p) == 0:
            return
        if self.device is not None:
            self.device.free(p)
            return
        with self._blocks_lock:
            self._blocks.pop(address(p), None)

    def release(self) -> None:
        """Forgets the table (``ReleaseAllocator``): later calls through it find nothing and fail safely."""
        with _lock:
            _live.pop(address(self.table), None)
        self._handles.drop(self.info_ptr)


def ort_memory_info_layout(info: Any) -> tuple[Any, Any]:
    """``(struct bytes, name bytes)`` of ``info`` in ORT's C++ ``OrtMemoryInfo`` layout (module docstring); keep
    both alive while C may read them."""
    name = info.name.encode()
    blob = ffi.new("char[]", _ORT_MEMORY_INFO_SIZE)
    base = address(blob)
    text = ffi.new("char[]", name + b"\0")
    if len(name) <= 15:  # short names live in the string's own buffer, as libstdc++ keeps them
        ffi.memmove(ffi.cast("char*", base + 16), name + b"\0", len(name) + 1)
        data = base + 16
    else:
        ffi.cast("size_t*", base + 16)[0] = len(name)  # the allocated capacity
        data = address(text)
    ffi.cast("uintptr_t*", base)[0] = data
    ffi.cast("size_t*", base + 8)[0] = len(name)
    ffi.cast("int32_t*", base + 32)[0] = int(info.ort_mem_type)
    ffi.cast("int32_t*", base + 36)[0] = int(info.allocator_type)
    ffi.cast("int8_t*", base + 40)[0] = int(info.device_type)
    ffi.cast("int8_t*", base + 41)[0] = int(info.mem_type)
    ffi.cast("int16_t*", base + 42)[0] = int(info.device_id)
    ffi.cast("uint32_t*", base + 44)[0] = int(info.vendor_id)
    ffi.cast("size_t*", base + 48)[0] = int(info.alignment)
    return blob, text


def lookup(ptr: Any) -> HostAllocator | None:
    """The host allocator behind an ``OrtAllocator*``; None when the host did not hand it out (or it was released)."""
    with _lock:
        return _live.get(address(ptr))


def _find(this: Any) -> HostAllocator | None:
    with _lock:
        return _live.get(address(this))


def _alloc(this: Any, size: int) -> Any:
    allocator = _find(this)
    if allocator is None:
        return ffi.NULL
    try:
        return allocator.alloc(int(size))
    except Exception:  # out of memory in the plugin's allocator: NULL, as an allocator reports it
        return ffi.NULL


def _free(this: Any, p: Any) -> None:
    allocator = _find(this)
    if allocator is not None:
        try:
            allocator.free(p)
        except Exception:  # nothing may raise into C; a failed free leaves the block allocated
            pass


def _info(this: Any) -> Any:
    allocator = _find(this)
    return ffi.NULL if allocator is None else allocator.info_ptr


_alloc_cb = ffi.callback("void*(OrtAllocator*, size_t)", _alloc)
_free_cb = ffi.callback("void(OrtAllocator*, void*)", _free)
_info_cb = ffi.callback("const OrtMemoryInfo*(const OrtAllocator*)", _info)
