"""Opaque handles: the pointers the host gives the plugin for its own Python objects.

Every ``OrtKeyValuePairs*``, ``OrtHardwareDevice*``, ``OrtStatus*``, ... the plugin sees is the address of a
small buffer the host allocated; the table maps it back to the Python object. A pointer the table does not
know (never issued, already released, or of another kind) is plugin misconduct, reported by the caller.
Thread-safe: the plugin may call back from any thread.
"""

from __future__ import annotations

import threading
from typing import Any, TypeVar

from ._ffi import ffi

T = TypeVar("T")


def address(ptr: Any) -> int:
    """Integer address of a cffi pointer (0 for NULL)."""
    return int(ffi.cast("uintptr_t", ptr))


class HandleTable:
    """Maps issued opaque pointers to Python objects."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[int, tuple[Any, Any]] = {}

    def issue(self, obj: object, ctype: str, cell: Any = None) -> Any:
        """New opaque pointer of C type ``ctype`` (e.g. ``"OrtStatus*"``) naming ``obj``; ``cell`` is the memory it
        points at when the plugin is to find bytes there (kept alive with the handle), else 8 fresh bytes."""
        cell = ffi.new("char[8]") if cell is None else cell
        ptr = ffi.cast(ctype, cell)
        with self._lock:
            self._objects[address(ptr)] = (obj, cell)
        return ptr

    def lookup(self, ptr: Any, kind: type[T]) -> T | None:
        """The live object behind ``ptr`` if it is a ``kind``; None for NULL, unknown or other kinds."""
        key = address(ptr)
        if key == 0:
            return None
        with self._lock:
            entry = self._objects.get(key)
        if entry is None or not isinstance(entry[0], kind):
            return None
        return entry[0]

    def drop(self, ptr: Any) -> object | None:
        """Forgets ``ptr``; returns the object it named, or None when it named nothing."""
        with self._lock:
            entry = self._objects.pop(address(ptr), None)
        return None if entry is None else entry[0]

    def live(self, kind: type[T]) -> list[T]:
        """All live objects of one kind (for leak checks)."""
        with self._lock:
            return [obj for obj, _ in self._objects.values() if isinstance(obj, kind)]
