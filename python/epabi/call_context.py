"""Which host (and plugin library) a served function works for.

The served ``OrtApi``/``OrtEpApi`` tables are shared by every :class:`epabi.Host` of the process (one set per
API version, as ONNX Runtime has one per process), so a served function finds its host here: the host whose
call into a plugin is in progress on this thread (innermost first), else the host that called a plugin last
(a plugin calling back from a thread of its own, or after its host closed). Thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_tls = threading.local()
# One reference, replaced whole (atomic under the GIL): no lock, so a finalizer that calls a plugin while a
# garbage collection interrupts this module cannot deadlock.
_last: tuple[Any, str] | None = None


@contextmanager
def calling(host: Any, library_name: str) -> Iterator[None]:
    """Marks a call from ``host`` into the plugin library ``library_name`` on this thread."""
    global _last
    stack = _tls.__dict__.setdefault("stack", [])
    stack.append((host, library_name))
    _last = (host, library_name)
    try:
        yield
    finally:
        stack.pop()


def current() -> tuple[Any, str] | None:
    """``(host, library name)`` of the call in progress on this thread, else of the last call anywhere."""
    stack = getattr(_tls, "stack", None)
    if stack:
        return stack[-1]
    return _last


def in_call() -> bool:
    """True while a host's call into a plugin is in progress on this thread."""
    return bool(getattr(_tls, "stack", None))


def current_host() -> Any:
    """The host served functions work for (see the module docstring); None before any host called a plugin."""
    found = current()
    return None if found is None else found[0]


def current_library() -> str:
    """Registration name of the library being called ("?" when none)."""
    found = current()
    return "?" if found is None else found[1]
