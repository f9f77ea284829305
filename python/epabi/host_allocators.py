"""``OrtAllocator``s the host implements: the process's default CPU allocator (``GetAllocatorWithDefaultOptions``)
and the ones it hands to plugin kernels (``KernelInfoGetAllocator``, ``KernelContext_GetAllocator``,
``PrePackWeight``).

Host memory comes from the C heap (``aligned_alloc``), 64-byte aligned like ORT's CPU allocator; a kernel's
allocator for the EP's device memory wraps the session's allocator (the plugin's own ``OrtAllocator``). Every
table is struct version 18 (``Alloc``, ``Free``, ``Info``, ``Reserve``; callers check the version before the
newer members). The default allocator is one per process, valid for the life of the process and never to be
released, as ONNX Runtime's is. A kernel's allocator is owned by whoever asked for it and released with
``OrtApi::ReleaseAllocator``; memory still allocated then stays valid until the session closes
(:meth:`HostAllocator.close`), as ORT keeps the underlying allocator alive with the session.

``Info`` returns a memory info laid out like ONNX Runtime's own C++ ``OrtMemoryInfo`` (observed on the 1.24.4
and 1.32.0 wheels, x86-64, libstdc++): a ``std::string`` name (pointer, length, 16-byte inline buffer) at 0, the
``OrtMemType`` at 32, the ``OrtAllocatorType`` at 36, then ``OrtDevice``: device type (int8) at 40, memory type
(int8) at 41, device id (int16) at 42, vendor id (uint32) at 44, alignment (size_t) at 48; 56 bytes. Plugins built
from ORT's sources copy that struct out of an allocator (the WebGPU plugin's pre-packing does), so an opaque handle
would crash them; the same pointer is also a live handle for every ``OrtApi`` memory-info function.

The C tables share one set of cffi callbacks, which never print (a failure answers NULL and is logged); each
table is found again by its address in a lock-protected map, so the plugin may call from any thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import cffi

from ._ffi import ffi
from .handles import address

_c = cffi.FFI()
_c.cdef("void* aligned_alloc(size_t alignment, size_t size); void free(void* p);")
_libc: Any = _c.dlopen(None)

ALIGNMENT = 64
_ORT_MEMORY_INFO_SIZE = 56
_lock = threading.Lock()
_live: dict[int, HostAllocator] = {}  # OrtAllocator address -> allocator, while handed out
_default: HostAllocator | None = None
_log = logging.getLogger("epabi.host")


class HostAllocator:
    """A host-implemented ``OrtAllocator``: ``memory_info`` says where its memory lives.

    Args:
        memory_info: the :class:`epabi.objects.MemoryInfo` that ``Info`` describes.
        handles: the handles to issue the ORT-layout memory info with (a host's); None when ``info_ptr`` is given.
        device: a :class:`epabi.device_memory.DeviceAllocator` to forward to; None allocates host memory.
        info_ptr: an existing ORT-layout memory-info handle for ``Info`` (the process's CPU memory info).
    """

    def __init__(self, memory_info: Any, handles: Any = None, device: Any = None, info_ptr: Any = None) -> None:
        self.memory_info = memory_info
        self.device = device
        self._handles = handles
        if info_ptr is None:
            self._layout = ort_memory_info_layout(memory_info)
            self.info_ptr = handles.issue(memory_info, "OrtMemoryInfo*", cell=self._layout[0])
        else:
            self.info_ptr = info_ptr
        self._blocks: set[int] = set()  # host memory handed out and not yet freed
        self._blocks_lock = threading.Lock()
        self.table = ffi.new("OrtAllocator*")
        self.table.version = 18
        self.table.Alloc = _alloc_cb
        self.table.Free = _free_cb
        self.table.Info = _info_cb
        self.table.Reserve = _alloc_cb
        self.ptr = self.table
        with _lock:
            _live[address(self.table)] = self

    def alloc(self, size: int) -> Any:
        if self.device is not None:
            return self.device.alloc(size) if size else ffi.NULL
        rounded = max(ALIGNMENT, (int(size) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT)  # a multiple, as C11 asks
        p = int(_c.cast("uintptr_t", _libc.aligned_alloc(ALIGNMENT, rounded)))
        if p == 0:
            return ffi.NULL
        with self._blocks_lock:
            self._blocks.add(p)
        return ffi.cast("void*", p)

    def free(self, p: Any) -> None:
        if address(p) == 0:
            return
        if self.device is not None:
            self.device.free(p)
            return
        with self._blocks_lock:
            known = address(p) in self._blocks
            self._blocks.discard(address(p))
        if known:  # a pointer this allocator never gave out is not the C heap's to free
            _libc.free(_c.cast("void*", address(p)))

    def release(self) -> None:
        """Forgets the table (``ReleaseAllocator``): later calls through it find nothing and fail safely."""
        with _lock:
            _live.pop(address(self.table), None)
        if self._handles is not None:
            self._handles.drop(self.info_ptr)

    def close(self) -> None:
        """:meth:`release`, and frees the host memory still allocated (the session that lent it closed)."""
        self.release()
        with self._blocks_lock:
            blocks, self._blocks = self._blocks, set()
        for p in blocks:
            _libc.free(_c.cast("void*", p))


def default_allocator(cpu_memory: Any) -> HostAllocator:
    """The process's default CPU allocator (made on first use; ``cpu_memory`` is the process's "Cpu" memory info,
    whose handle is laid out as ORT's; never released)."""
    global _default
    with _lock:
        if _default is not None:
            return _default
    allocator = HostAllocator(cpu_memory, info_ptr=cpu_memory.ptr)
    with _lock:
        if _default is None:
            _default = allocator
        else:  # another thread made it meanwhile
            _live.pop(address(allocator.table), None)
        return _default


def is_default(allocator: HostAllocator) -> bool:
    """Whether ``allocator`` is the process's default allocator (which must never be released)."""
    return allocator is _default


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


def _quiet(exc_type: Any, exc: BaseException, tb: Any) -> None:
    _log.debug("a host allocator failed: %s: %s", exc_type.__name__, exc)


def _alloc(this: Any, size: int) -> Any:
    allocator = lookup(this)
    return ffi.NULL if allocator is None else allocator.alloc(int(size))


def _free(this: Any, p: Any) -> None:
    allocator = lookup(this)
    if allocator is not None:
        allocator.free(p)


def _info(this: Any) -> Any:
    allocator = lookup(this)
    return ffi.NULL if allocator is None else allocator.info_ptr


# out of memory or a failing device allocator answers NULL (cffi's default on error), as an allocator reports it
_alloc_cb = ffi.callback("void*(OrtAllocator*, size_t)", _alloc, onerror=_quiet)
_free_cb = ffi.callback("void(OrtAllocator*, void*)", _free, onerror=_quiet)
_info_cb = ffi.callback("const OrtMemoryInfo*(const OrtAllocator*)", _info, onerror=_quiet)
