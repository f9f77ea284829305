"""The process's default CPU ``OrtAllocator`` and the served ``OrtApi`` allocator functions.

``GetAllocatorWithDefaultOptions`` hands every plugin the same allocator, valid for the life of the process and
never to be released, as ONNX Runtime's is: C heap memory (``aligned_alloc``, 64-byte aligned like ORT's CPU
allocator), described by the process's "Cpu" memory info. ``AllocatorAlloc``/``AllocatorFree``/
``AllocatorGetInfo`` call through any ``OrtAllocator``'s table, the default one or a plugin's. Thread-safe.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import cffi

from ._ffi import ffi
from .errors import OrtErrorCode
from .handles import address

_c = cffi.FFI()
_c.cdef("void* aligned_alloc(size_t alignment, size_t size); void free(void* p);")
_libc: Any = _c.dlopen(None)

ALIGNMENT = 64

_lock = threading.Lock()
_default: DefaultAllocator | None = None
_log = logging.getLogger("epabi.host")


def _quiet(exc_type: Any, exc: BaseException, tb: Any) -> None:
    _log.debug("the default allocator failed: %s: %s", exc_type.__name__, exc)


class DefaultAllocator:
    """An ``OrtAllocator`` (struct version 18: Alloc, Free, Info, Reserve) over the C heap."""

    def __init__(self, memory_info: Any) -> None:
        self.memory_info = memory_info
        self.struct = ffi.new("OrtAllocator*")
        self.struct.version = 18  # no GetStats/AllocOnStream/Shrink: callers check the version before those
        self._callbacks = [  # a failure answers NULL (cffi's default) and is logged, never printed
            ffi.callback("void*(*)(OrtAllocator*, size_t)", self._alloc, onerror=_quiet),
            ffi.callback("void(*)(OrtAllocator*, void*)", self._free, onerror=_quiet),
            ffi.callback("const OrtMemoryInfo*(*)(const OrtAllocator*)", self._info, onerror=_quiet),
            ffi.callback("void*(*)(OrtAllocator*, size_t)", self._alloc, onerror=_quiet),
        ]
        self.struct.Alloc, self.struct.Free, self.struct.Info, self.struct.Reserve = self._callbacks

    @staticmethod
    def _alloc(this: Any, size: int) -> Any:
        rounded = max(ALIGNMENT, (int(size) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT)  # a multiple, as C11 asks
        return ffi.cast("void*", int(_c.cast("uintptr_t", _libc.aligned_alloc(ALIGNMENT, rounded))))

    @staticmethod
    def _free(this: Any, p: Any) -> None:
        if address(p) != 0:
            _libc.free(_c.cast("void*", address(p)))

    def _info(self, this: Any) -> Any:
        return self.memory_info.ptr


def default_allocator(memory_info: Any) -> DefaultAllocator:
    """The process's default allocator (made on first use, described by ``memory_info``; never freed)."""
    global _default
    with _lock:
        if _default is None:
            _default = DefaultAllocator(memory_info)
        return _default


class AllocatorApi:
    """Mixin of ``_OrtApiImpl``: needs ``self.s`` (ServedApi)."""

    s: Any

    def GetAllocatorWithDefaultOptions(self, out: Any) -> Any:
        out[0] = default_allocator(self.s.host.cpu_memory).struct
        return ffi.NULL

    def AllocatorAlloc(self, allocator: Any, size: int, out: Any) -> Any:
        if address(allocator) == 0 or allocator.Alloc == ffi.NULL:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "AllocatorAlloc: NULL allocator or Alloc")
        out[0] = allocator.Alloc(allocator, size)
        if out[0] == ffi.NULL and size:
            return self.s.error(OrtErrorCode.RUNTIME_EXCEPTION, f"AllocatorAlloc: allocating {size} bytes failed")
        return ffi.NULL

    def AllocatorFree(self, allocator: Any, p: Any) -> Any:
        if address(allocator) == 0 or allocator.Free == ffi.NULL:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "AllocatorFree: NULL allocator or Free")
        allocator.Free(allocator, p)
        return ffi.NULL

    def AllocatorGetInfo(self, allocator: Any, out: Any) -> Any:
        if address(allocator) == 0 or allocator.Info == ffi.NULL:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "AllocatorGetInfo: NULL allocator or Info")
        out[0] = allocator.Info(allocator)
        return ffi.NULL
