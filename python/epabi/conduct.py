"""Checks on how a plugin behaves, the conduct report, and the trace of host-to-plugin calls.

Two kinds of findings, as the host is exactly as strict as ONNX Runtime:

* *violations*: what ONNX Runtime would crash on or cannot interpret (a forged handle, a call past the
  emulated table, releasing a host object). Served callbacks cannot raise into C, so they record them here
  and answer the plugin with an error status (or NULL/0); the host raises :class:`ConductError` after the call
  into the plugin returns (:meth:`Conduct.watch`), naming the call.
* *tolerated* deviations: what ONNX Runtime accepts (zero factories, claims that would form a cycle, a leaked
  status, an OrtEp version it does not check). They go to the report with a logged warning and the host
  proceeds as ONNX Runtime does; a strict host (``Host(strict=True)``, for EP authors) raises them instead.

Plus *limitations* (functions this host does not serve, raised as :class:`HostLimitationError`) and internal
host errors. Thread-safe.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import ConductError, HostLimitationError

TRACE_KEEP = 100_000

_log = logging.getLogger("epabi.conduct")


class Conduct:
    """Violations, tolerated deviations (``warnings``), limitations and internal errors of one host."""

    def __init__(self, strict: bool = False) -> None:
        self._lock = threading.RLock()  # a finalizer that calls a plugin may run inside a locked section
        self.strict = strict
        self.violations: list[str] = []
        self.warnings: list[str] = []
        self.limitations: list[str] = []
        self.internal: list[str] = []
        self.trace: list[str] = []

    def violation(self, message: str) -> None:
        with self._lock:
            self.violations.append(message)

    def tolerate(self, message: str) -> None:
        """Records a deviation ONNX Runtime accepts. Raises ConductError at once on a strict host; otherwise
        logs a warning and returns, so the caller proceeds as ONNX Runtime does."""
        if self.strict:
            with self._lock:
                self.violations.append(message)
            raise ConductError(f"{message} (Host(strict=True); ONNX Runtime accepts this)")
        with self._lock:
            self.warnings.append(message)
        _log.warning("plugin conduct: %s", message)

    def tolerate_in_callback(self, message: str) -> None:
        """:meth:`tolerate` for served callbacks, which must not raise: a strict host raises it after the call."""
        with self._lock:
            (self.violations if self.strict else self.warnings).append(message)
        if not self.strict:
            _log.warning("plugin conduct: %s", message)

    def limitation(self, message: str) -> None:
        with self._lock:
            if message not in self.limitations[-8:]:  # a plugin calling in a loop reports once
                self.limitations.append(message)

    def internal_error(self, message: str) -> None:
        with self._lock:
            self.internal.append(message)

    def report(self) -> list[tuple[str, str]]:
        """The conduct report so far: ``(kind, message)`` with kind "violation", "tolerated", "limitation" or
        "internal", in that order of kinds."""
        with self._lock:
            return ([("violation", m) for m in self.violations] + [("tolerated", m) for m in self.warnings] +
                    [("limitation", m) for m in self.limitations] + [("internal", m) for m in self.internal])

    def _append(self, name: str) -> None:
        # Bounded, so a long-lived host does not grow with every run: past 2*TRACE_KEEP entries the oldest
        # TRACE_KEEP go (indices taken before that no longer line up); the names are interned, so an entry costs
        # one list slot, not a string. Caller holds the lock.
        self.trace.append(sys.intern(name))
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
