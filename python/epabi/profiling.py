"""A session's profile (``SessionOptions.enable_profiling``), kept and written as ONNX Runtime's
``profiling::Profiler`` does (``onnxruntime/core/common/profiler.cc``; the file and events compared with those of
the 1.24.4, 1.26.0 and 1.32.0 wheels).

Profiling starts when the session is created and ends at ``InferenceSession.end_profiling()`` (or when the session
closes), which writes ``<profile_file_prefix>_<local time>.json``: a JSON array of Chrome-trace complete events
(``"ph": "X"``) with ``cat`` (Session, Node, Kernel, Api), ``pid``, ``tid`` (the kernel's thread id), ``ts`` (the
start, microseconds since the profiling start) and ``dur`` (microseconds, truncated), ``name`` and string ``args``;
the session's events in the order they ended, then each EP profiler's (:mod:`epabi.ep_profiler`) as it handed them.
The time is ``%Y-%m-%d_%H-%M-%S``, followed by ``_<milliseconds>`` (3 digits) on hosts whose behaviour row says so
(1.26.0 and 1.32.0 observed; 1.24.4 writes none). At most :data:`MAX_EVENTS` session events are kept, as in ORT.

The session's events: ``model_loading_uri`` / ``model_loading_array``, ``session_initialization``, per execution
``model_run`` (also per graph replay) and ``SequentialExecutor::Execute``, per unit run ``<name>_kernel_time``
(category Node, args ``op_name``, ``provider``, ``node_index``; a CPU partition run through onnxruntime is one
``cpu_partition_<i>_kernel_time`` with ``node_count``). Each is handed to every EP profiler's ``StartEvent`` when it
begins and ``StopEvent`` when it ends. Thread-safe: concurrent runs record into one list under a lock.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from .ep_profiler import EpProfiler
from .served_profiling import EventCategory, ProfilingEvent

_log = logging.getLogger("epabi.session")

#: Session events kept per profile (ORT's default ``Profiler::global_max_num_events_``).
MAX_EVENTS = 1000 * 1000
#: ``SessionOptions.profile_file_prefix``'s default in onnxruntime.
DEFAULT_PREFIX = "onnxruntime_profile_"
_NOTHING = nullcontext()  # reusable


def _arg_json(value: str) -> Any:
    """An arg as ORT writes it: a value that starts like a JSON object or array is embedded, others are strings."""
    if value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            pass
    return value


class SessionProfiler:
    """The profile of one session.

    Args:
        enabled: profile from now on (``SessionOptions.enable_profiling``).
        prefix: the file name's prefix (``SessionOptions.profile_file_prefix``).
        millisecond_names: the file name ends with the milliseconds of the profiling start.
    """

    def __init__(self, enabled: bool, prefix: str, millisecond_names: bool) -> None:
        self.enabled = False
        self.start_time_ns = 0  # the profiling start, ns since the Unix epoch (0: never started)
        self._start_ns = 0  # the same moment on the monotonic clock
        self._path = ""
        self._events: list[ProfilingEvent] = []
        self._full = False
        self._lock = threading.Lock()
        self._ep_profilers: list[EpProfiler] = []
        if enabled:
            self._start(prefix, millisecond_names)

    def _start(self, prefix: str, millisecond_names: bool) -> None:
        self._start_ns = time.monotonic_ns()
        self.start_time_ns = time.time_ns()
        local = time.localtime(self.start_time_ns // 10**9)
        suffix = f"_{self.start_time_ns // 10**6 % 1000:03d}" if millisecond_names else ""  # ORT pads to 3
        self._path = f"{prefix}_{time.strftime('%Y-%m-%d_%H-%M-%S', local)}{suffix}.json"
        self.enabled = True

    def add_ep_profiler(self, profiler: EpProfiler | None) -> None:
        """Takes the session's EP profiler (None: the EP has none); started at once when profiling is on."""
        if profiler is None:
            return
        self._ep_profilers.append(profiler)
        if self.enabled:
            profiler.start(time.monotonic_ns() - self._start_ns)

    def _correlation_id(self, start_ns: int) -> int:
        return (start_ns - self._start_ns) // 1000 + self.start_time_ns // 1000

    def begin(self) -> int:
        """An event starts now (call only while :attr:`enabled`): its start, for :meth:`record`."""
        start = time.monotonic_ns()
        if self._ep_profilers:
            correlation = self._correlation_id(start)
            for profiler in self._ep_profilers:
                profiler.start_event(correlation)
        return start

    def record(self, category: EventCategory, name: str, start: int, args: dict[str, str] | None = None) -> None:
        """The event begun at ``start`` ends now: kept, and handed to the EP profilers' ``StopEvent``."""
        end = time.monotonic_ns()
        event = ProfilingEvent(category, os.getpid(), threading.get_native_id(), name,
                               (start - self._start_ns) // 1000, (end - start) // 1000, dict(args or {}))
        with self._lock:
            if len(self._events) < MAX_EVENTS:
                self._events.append(event)
            elif not self._full:
                self._full = True
                _log.error("Maximum number of events reached, could not record profile event.")
        if self._ep_profilers:
            correlation = self._correlation_id(start)
            for profiler in self._ep_profilers:
                profiler.stop_event(correlation, event.copy())

    def event(self, category: EventCategory, name: str,
              args: dict[str, str] | None = None) -> AbstractContextManager[None]:
        """Records the block as one event when profiling (also when it raises); nothing otherwise (a shared
        null context: a session that does not profile pays one test)."""
        return self._event(category, name, args) if self.enabled else _NOTHING

    @contextmanager
    def _event(self, category: EventCategory, name: str, args: dict[str, str] | None) -> Iterator[None]:
        start = self.begin()
        try:
            yield
        finally:
            self.record(category, name, start, args)

    def end_profiling(self) -> str:
        """Collects the EP profilers' events, writes the file and stops profiling; returns its path ("" when not
        profiling, as ORT, which also logs at VERBOSE that the profiler is disabled). Raises OSError when the file
        cannot be written."""
        if not self.enabled:
            _log.debug("Profiler is disabled.")  # ORT logs it at VERBOSE
            return ""
        self.enabled = False
        with self._lock:
            events = list(self._events)
            self._events = []
        for profiler in self._ep_profilers:
            events += profiler.end()
        with open(self._path, "w") as f:
            f.write("[\n")
            for i, ev in enumerate(events):
                record = ev.as_json()
                record["args"] = {k: _arg_json(v) for k, v in record["args"].items()}
                f.write(json.dumps(record) + (",\n" if i + 1 < len(events) else "\n"))
            f.write("]\n")
        _log.info("Writing profiler data to file %s", self._path)
        return self._path

    def close(self) -> None:
        """Releases the EP profilers (``OrtEpProfilerImpl::Release``); call before the EP goes."""
        profilers, self._ep_profilers = self._ep_profilers, []
        for profiler in profilers:
            profiler.close()
