"""Opaque handles: the pointers the host gives plugins for its own Python objects, one table per process.

Every ``OrtKeyValuePairs*``, ``OrtHardwareDevice*``, ``OrtStatus*``, ... a plugin sees is the address of a
small buffer the host allocated; :data:`PROCESS_HANDLES` maps it back to the Python object. As in ONNX
Runtime, where a plugin may keep what the one environment gave it, the table is shared by every
:class:`epabi.Host` of the process: any host's served functions resolve any host's handles.

Each handle records the host that issued it (``owner``, 0 for process objects such as the default logger) and
its lifetime: a *host* handle names a host object (a device, a graph, a session logger) and dies with it or
with the host; a *plugin* handle names something the plugin created through the API (a status, key-value
pairs, a memory info) and lives until the plugin releases it, whichever host is alive.

A released handle stays known for a while as a tombstone (its cell is kept, so the address is not reused), so
that a plugin still using an object of a closed host or session is told so, instead of aliasing a new object.
A pointer the table does not know (never issued, released, or of another kind) is plugin misconduct, reported
by the caller. Thread-safe: plugins call back from any thread.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Any, TypeVar

from ._ffi import ffi

T = TypeVar("T")

#: How many released handles stay recognisable (each keeps its 8-byte cell): a bound, so a long-lived
#: process does not grow, and enough to cover the objects of a few closed hosts or sessions.
TOMBSTONES = 1024

PROCESS_OWNER = 0


def address(ptr: Any) -> int:
    """Integer address of a cffi pointer (0 for NULL)."""
    return int(ffi.cast("uintptr_t", ptr))


@dataclass
class _Entry:
    obj: Any
    cell: Any
    owner: int
    plugin_lifetime: bool
    host_owned: bool = False  # the plugin may use it but never release it
    borrowed: bool = False    # key-value pairs the host owns (device metadata, EP options)


class HandleTable:
    """Maps issued opaque pointers to Python objects, for every host of the process."""

    def __init__(self, tombstones: int = TOMBSTONES) -> None:
        # reentrant: a garbage collection inside a locked section may run a finalizer that drops handles
        self._lock = threading.RLock()
        self._pending_owners: list[int] = []
        self._objects: dict[int, _Entry] = {}
        self._graves: dict[int, str] = {}
        self._quarantine: deque[tuple[int, Any]] = deque()
        self._keep = tombstones

    def issue(self, obj: object, ctype: str, owner: int = PROCESS_OWNER, plugin_lifetime: bool = False,
              cell: Any = None) -> Any:
        """New opaque pointer of C type ``ctype`` (e.g. ``"OrtStatus*"``) naming ``obj``; ``cell`` is the memory it
        points at when the plugin is to find bytes there (kept alive with the handle), else 8 fresh bytes."""
        self._drop_pending()
        cell = ffi.new("char[8]") if cell is None else cell
        ptr = ffi.cast(ctype, cell)
        with self._lock:
            self._objects[address(ptr)] = _Entry(obj, cell, owner, plugin_lifetime)
        return ptr

    def lookup(self, ptr: Any, kind: type[T]) -> T | None:
        """The live object behind ``ptr`` if it is a ``kind``; None for NULL, unknown or other kinds."""
        key = address(ptr)
        if key == 0:
            return None
        with self._lock:
            entry = self._objects.get(key)
        if entry is None or not isinstance(entry.obj, kind):
            return None
        return entry.obj

    def explain(self, ptr: Any, kind: type) -> str:
        """Why ``lookup(ptr, kind)`` finds nothing, in words for a conduct report."""
        key = address(ptr)
        if key == 0:
            return "is NULL"
        with self._lock:
            entry = self._objects.get(key)
            grave = self._graves.get(key)
        if entry is not None:
            return f"is a {type(entry.obj).__name__}, not a {kind.__name__}"
        if grave is not None:
            return f"was a {grave} and has been released (by the plugin, or with the host or session it belonged to)"
        return f"is not a live {kind.__name__} this host issued"

    def drop(self, ptr: Any) -> object | None:
        """Forgets ``ptr`` (it becomes a tombstone); returns the object it named, or None."""
        key = address(ptr)
        with self._lock:
            entry = self._objects.pop(key, None)
            if entry is not None:
                self._bury(key, entry)
        return None if entry is None else entry.obj

    def drop_owner(self, owner: int) -> int:
        """Forgets every host-lifetime handle ``owner`` issued (the host closed); returns how many."""
        dropped = 0
        with self._lock:
            keys = [k for k, e in self._objects.items() if e.owner == owner and not e.plugin_lifetime]
            for key in keys:
                entry = self._objects.pop(key, None)
                if entry is not None:
                    self._bury(key, entry)
                    dropped += 1
        return dropped

    def drop_owner_later(self, owner: int) -> None:
        """:meth:`drop_owner` at the next issue (for finalizers, which may run inside any code, even this
        table's)."""
        self._pending_owners.append(owner)

    def _drop_pending(self) -> None:
        while self._pending_owners:
            self.drop_owner(self._pending_owners.pop())

    def _bury(self, key: int, entry: _Entry) -> None:
        # caller holds the lock; the cell stays referenced while the tombstone exists, so no new handle
        # can get this address and be mistaken for the old object
        self._graves[key] = type(entry.obj).__name__
        self._quarantine.append((key, entry.cell))
        while len(self._quarantine) > self._keep:
            old, _ = self._quarantine.popleft()
            self._graves.pop(old, None)

    def set_flags(self, ptr: Any, *, host_owned: bool | None = None, borrowed: bool | None = None) -> None:
        """Marks a live handle host-owned or borrowed (no-op for unknown pointers)."""
        with self._lock:
            entry = self._objects.get(address(ptr))
            if entry is None:
                return
            if host_owned is not None:
                entry.host_owned = host_owned
            if borrowed is not None:
                entry.borrowed = borrowed

    def flags(self, ptr: Any) -> tuple[bool, bool]:
        """``(host_owned, borrowed)`` of a live handle; ``(False, False)`` for unknown pointers."""
        with self._lock:
            entry = self._objects.get(address(ptr))
        return (False, False) if entry is None else (entry.host_owned, entry.borrowed)

    def tombstone_count(self) -> int:
        """How many released handles are still recognised (at most the table's bound)."""
        with self._lock:
            return len(self._graves)

    def live(self, kind: type[T], owner: int | None = None) -> list[T]:
        """All live objects of one kind, of one owner or of all (for leak checks)."""
        with self._lock:
            return [e.obj for e in self._objects.values()
                    if isinstance(e.obj, kind) and (owner is None or e.owner == owner)]


#: The one handle table of this process.
PROCESS_HANDLES = HandleTable()


class HostHandles:
    """One host's view of :data:`PROCESS_HANDLES`: issues in its name, counts only its handles; lookups and
    drops see every host's handles (a plugin may hand one host's object to another, as in one ORT process)."""

    def __init__(self, owner: int, table: HandleTable = PROCESS_HANDLES) -> None:
        self.owner = owner
        self.table = table

    def issue(self, obj: object, ctype: str, cell: Any = None) -> Any:
        """A host-lifetime handle (dropped at the latest when the host closes); ``cell`` as in
        :meth:`HandleTable.issue`."""
        return self.table.issue(obj, ctype, self.owner, cell=cell)

    def issue_for_plugin(self, obj: object, ctype: str, cell: Any = None) -> Any:
        """A handle for something the plugin created through the API; it lives until the plugin releases it."""
        return self.table.issue(obj, ctype, self.owner, plugin_lifetime=True, cell=cell)

    def lookup(self, ptr: Any, kind: type[T]) -> T | None:
        return self.table.lookup(ptr, kind)

    def explain(self, ptr: Any, kind: type) -> str:
        return self.table.explain(ptr, kind)

    def drop(self, ptr: Any) -> object | None:
        return self.table.drop(ptr)

    def live(self, kind: type[T]) -> list[T]:
        """This host's live objects of one kind."""
        return self.table.live(kind, self.owner)
