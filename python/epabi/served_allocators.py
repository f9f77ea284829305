"""Served ``OrtApi`` allocator functions: the default allocator, calls through any ``OrtAllocator``, releasing one
the host handed out.

``GetAllocatorWithDefaultOptions`` hands every plugin the process's one CPU allocator
(:func:`epabi.host_allocators.default_allocator`), never to be released. ``AllocatorAlloc``/``AllocatorFree``/
``AllocatorGetInfo`` call through any ``OrtAllocator``'s table, the host's or a plugin's. ``ReleaseAllocator``
takes the allocators the host lent to kernels. Thread-safe.
"""

from __future__ import annotations

from typing import Any

from ._ffi import ffi
from .errors import OrtErrorCode
from .handles import address
from .host_allocators import default_allocator, is_default
from .host_allocators import lookup as lookup_allocator


class AllocatorApi:
    """Mixin of ``_OrtApiImpl``: needs ``self.s`` (ServedApi)."""

    s: Any

    def GetAllocatorWithDefaultOptions(self, out: Any) -> Any:
        out[0] = default_allocator(self.s.host.cpu_memory).ptr
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

    def ReleaseAllocator(self, allocator: Any) -> None:
        from .api_table import Misuse

        if address(allocator) == 0:
            return
        obj = lookup_allocator(allocator)
        if obj is None:
            raise Misuse(f"ReleaseAllocator on {hex(address(allocator))}, which is not an allocator the host "
                         "handed out (or was already released)")
        if is_default(obj):  # ORT would delete its static allocator: a crash later
            raise Misuse("ReleaseAllocator on the default allocator (GetAllocatorWithDefaultOptions), which is "
                         "never to be released")
        obj.release()
