"""A plugin EP's ``OrtEpProfilerImpl`` (API 25+), held as ONNX Runtime's core holds it.

Followed: ``onnxruntime/core/session/plugin_ep/ep_event_profiling.cc`` (``PluginEpProfiler``) and the calls the
1.32.0 wheel makes, observed with the epabi plugin (tests/test_real_ort_profiling.py):

* ``OrtEp::CreateProfiler`` once per session, right after the EP is created, profiling on or off, when the EP's
  table has it (``ort_version_supported`` >= 25). An error status, a NULL profiler, a profiler declaring a version
  below 25 or one missing ``Release``/``StartProfiling``/``EndProfiling`` leaves the session without an EP
  profiler: the error is logged, the session goes on (released first in the last case only).
* ``StartProfiling(offset_ns)``: when the session profiles (at once when it already does), with the nanoseconds
  elapsed since the session's profiling start.
* ``StartEvent(id)`` / ``StopEvent(id, event)`` around each of the session's own events; ``id`` is the event's
  start (microseconds since the profiling start) plus the profiling start in microseconds since the Unix epoch.
  Either may be NULL.
* ``EndProfiling(container)`` when the profile is written; the EP's events are appended after the session's.
* ``Release`` when the session goes, before ``ReleaseEp``.

Failures of the profiler's calls are logged at ERROR and never fail the session or a run (as in ORT). Not
thread-safe by itself: :class:`epabi.profiling.SessionProfiler` serialises the calls that need it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ._ffi import ffi, member_since
from .errors import OrtStatusError
from .gating import readable_members
from .served_profiling import EventsContainer, ProfilingEvent

if TYPE_CHECKING:
    from .ep import Ep

_log = logging.getLogger("epabi.session")

#: The oldest ``OrtEpProfilerImpl::ort_version_supported`` a host accepts: the API that introduced the table.
MIN_PROFILER_VERSION = member_since("OrtEpProfilerImpl")["Release"]
_REQUIRED = ("Release", "StartProfiling", "EndProfiling")


class EpProfiler:
    """The profiler one session got from its EP (:meth:`create`); :meth:`close` releases it."""

    def __init__(self, ep: Ep, ptr: Any, members: dict[str, Any]) -> None:
        self.ep = ep
        self.ptr = ptr
        self.members = members

    @classmethod
    def create(cls, ep: Ep) -> EpProfiler | None:
        """``OrtEp::CreateProfiler`` (when the host reads it); None when the session gets no EP profiler."""
        if "CreateProfiler" not in ep.members:
            return None
        out = ffi.new("OrtEpProfilerImpl**")
        try:
            ep.call_status("CreateProfiler", out)
        except OrtStatusError as exc:
            _log.error("OrtEp::CreateProfiler for %s returned an error status: %s", ep.name, exc.message)
            return None
        ptr = out[0]
        if ptr == ffi.NULL:
            return None
        host = ep.host
        version = int(ptr.ort_version_supported)
        if version < MIN_PROFILER_VERSION:  # ORT 1.32 neither uses nor releases it
            message = (f"OrtEpProfilerImpl::ort_version_supported ({version}) for {ep.name} expected to be >= "
                       f"{MIN_PROFILER_VERSION}")
            _log.error("%s", message)
            host.tolerate(f"{message}: the session has no EP profiler")
            return None
        members = readable_members("OrtEpProfilerImpl", ptr, host.api_version)
        if any(name not in members for name in _REQUIRED):
            profiler = cls(ep, ptr, members)
            profiler.close()
            message = (f"OrtEpProfilerImpl for {ep.name} is missing one or more required function implementations: "
                       "Release, StartProfiling, and EndProfiling")
            _log.error("%s", message)
            host.tolerate(f"{message}: the session has no EP profiler")
            return None
        return cls(ep, ptr, members)

    def _call(self, member: str, *args: Any) -> bool:
        """Calls a member; an error status is logged (False), as ORT does."""
        ep = self.ep
        where = f"OrtEpProfilerImpl::{member}"
        try:
            with ep.host.calling(ep.factory.library, where):
                ep.host.raise_status(self.members[member](self.ptr, *args), f"{ep.name}: {where}")
        except OrtStatusError as exc:
            _log.error("%s() for %s returned an error OrtStatus: %s", where, ep.name, exc.message)
            return False
        return True

    def start(self, offset_ns: int) -> None:
        """``StartProfiling``: ``offset_ns`` since the session's profiling start."""
        self._call("StartProfiling", int(offset_ns))

    def start_event(self, correlation_id: int) -> None:
        if "StartEvent" in self.members:
            self._call("StartEvent", correlation_id)

    def stop_event(self, correlation_id: int, event: ProfilingEvent) -> None:
        """``StopEvent`` with the session's finished event (host-owned for the call)."""
        if "StopEvent" not in self.members:
            return
        host = self.ep.host
        event.ptr = host.handles.issue(event, "OrtProfilingEvent*")
        host.mark_host_owned(event.ptr)
        try:
            self._call("StopEvent", correlation_id, event.ptr)
        finally:
            host.handles.drop(event.ptr)
            event.ptr = ffi.NULL

    def end(self) -> list[ProfilingEvent]:
        """``EndProfiling``: the events the EP added (none when it failed)."""
        host = self.ep.host
        container = EventsContainer()
        container.ptr = host.handles.issue(container, "OrtProfilingEventsContainer*")
        try:
            ok = self._call("EndProfiling", container.ptr)
        finally:
            host.handles.drop(container.ptr)
        return container.events if ok else []

    def close(self) -> None:
        """``Release``; idempotent."""
        ptr, self.ptr = self.ptr, ffi.NULL
        if ptr != ffi.NULL and "Release" in self.members:
            ep = self.ep
            with ep.host.calling(ep.factory.library, "OrtEpProfilerImpl::Release"):
                self.members["Release"](ptr)
