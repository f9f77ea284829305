"""Checks on how a plugin behaves, and the trace of host-to-plugin calls.

Callbacks the host serves cannot raise into C, so they record what went wrong here; the host checks the
record after each call into the plugin (:meth:`Conduct.check`) and raises there, in Python, naming the call.
Thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import ConductError, HostLimitationError

TRACE_KEEP = 100_000


class Conduct:
    """Violations (plugin misconduct), limitations (unserved host functions), internal host errors."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.violations: list[str] = []
        self.limitations: list[str] = []
        self.internal: list[str] = []
        self.trace: list[str] = []

    def violation(self, message: str) -> None:
        with self._lock:
            self.violations.append(message)

    def limitation(self, message: str) -> None:
        with self._lock:
            if message not in self.limitations[-8:]:  # a plugin calling in a loop reports once
                self.limitations.append(message)

    def internal_error(self, message: str) -> None:
        with self._lock:
            self.internal.append(message)

    def _append(self, name: str) -> None:
        # Bounded, so a long-lived host does not grow with every run: past 2*TRACE_KEEP entries the oldest
        # TRACE_KEEP go (indices taken before that no longer line up). Caller holds the lock.
        self.trace.append(name)
        if len(self.trace) > 2 * TRACE_KEEP:
            del self.trace[:TRACE_KEEP]

    @contextmanager
    def watch(self, where: str) -> Iterator[None]:
        """Records ``where`` in the trace, runs the body, then raises what the body's callbacks recorded."""
        with self._lock:
            marks = (len(self.violations), len(self.limitations), len(self.internal))
            self._append(where)
        try:
            yield
        except BaseException:
            self.check(where, marks)  # misconduct explains the failure better than its symptom
            raise
        self.check(where, marks)

    def check(self, where: str, marks: tuple[int, int, int]) -> None:
        with self._lock:
            violations = self.violations[marks[0]:]
            limitations = self.limitations[marks[1]:]
            internal = self.internal[marks[2]:]
        if violations:
            raise ConductError(f"{where}: " + "; ".join(violations))
        if limitations:
            raise HostLimitationError(f"{where}: " + "; ".join(limitations))
        if internal:
            raise RuntimeError(f"{where}: epabi host error while serving the plugin: " + "; ".join(internal))
