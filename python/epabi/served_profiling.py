"""Profile events as plugins see them (API 25+): ``OrtProfilingEvent``, ``OrtProfilingEventsContainer`` and the
``OrtEpApi`` functions over them, as ONNX Runtime 1.25-1.32 serve them
(``onnxruntime/core/session/plugin_ep/ep_api.cc``).

An ``OrtProfilingEvent`` is one record of the session's profile (ORT's ``profiling::EventRecord``): the host
hands its own events to ``OrtEpProfilerImpl::StopEvent`` (host-owned: the plugin reads them, never releases them);
``CreateProfilingEvent`` makes one the plugin owns until ``ReleaseProfilingEvent``. ``EndProfiling`` gets a
container, and ``ProfilingEventsContainer_AddEvents`` copies events into it (the plugin still releases its own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from ._ffi import ffi
from .errors import OrtErrorCode
from .handles import address
from .objects import pystr


class EventCategory(IntEnum):
    """``OrtProfilingEventCategory``; ``label`` is the profile JSON's ``cat``."""

    SESSION = 0
    NODE = 1
    KERNEL = 2
    API = 3

    @property
    def label(self) -> str:
        return self.name.capitalize()


@dataclass
class ProfilingEvent:
    """One profile record: ``ts`` and ``dur`` in microseconds (``ts`` since the profiling start), string args."""

    category: EventCategory
    pid: int
    tid: int
    name: str
    ts: int
    dur: int
    args: dict[str, str] = field(default_factory=dict)
    ptr: Any = ffi.NULL
    _c: dict[str, Any] = field(default_factory=dict, repr=False)  # C strings handed out, alive with the event

    def c_string(self, key: str, text: str) -> Any:
        """A C copy of ``text`` that lives as long as this event (what ``ProfilingEvent_Get*`` return)."""
        c = self._c.get(key)
        if c is None:
            c = self._c[key] = ffi.new("char[]", text.encode())
        return c

    def copy(self) -> ProfilingEvent:
        return ProfilingEvent(self.category, self.pid, self.tid, self.name, self.ts, self.dur, dict(self.args))

    def as_json(self) -> dict[str, Any]:
        """The record as ONNX Runtime writes it (``profiler.cc``: complete events, ``"ph": "X"``)."""
        return {"cat": self.category.label, "pid": self.pid, "tid": self.tid, "dur": self.dur, "ts": self.ts,
                "ph": "X", "name": self.name, "args": dict(self.args)}


@dataclass
class EventsContainer:
    """``OrtProfilingEventsContainer``: the events a plugin adds at ``EndProfiling``."""

    events: list[ProfilingEvent] = field(default_factory=list)
    ptr: Any = ffi.NULL


class ProfilingEpApi:
    """Served ``OrtEpApi`` profiling members (mixin of the EP API table; ``self.s`` is the served table)."""

    s: Any
    h: Any

    def _event(self, ptr: Any) -> ProfilingEvent | None:
        return None if address(ptr) == 0 else self.s.get(ptr, ProfilingEvent, "profiling event")

    def CreateProfilingEvent(self, category: int, process_id: int, thread_id: int, event_name: Any,
                             timestamp_us: int, duration_us: int, arg_keys: Any, arg_values: Any, num_args: int,
                             out: Any) -> Any:
        s = self.s
        if address(out) == 0:
            return s.error(OrtErrorCode.INVALID_ARGUMENT, "OrtProfilingEvent output parameter is NULL")
        if event_name == ffi.NULL:
            return s.error(OrtErrorCode.INVALID_ARGUMENT, "Event name argument is NULL")
        out[0] = ffi.NULL
        if not 0 <= category < len(EventCategory):
            return s.error(OrtErrorCode.INVALID_ARGUMENT, f"OrtProfilingEventCategory value '{category}' is out of "
                           f"the expected range: [0 ... {len(EventCategory)})")
        args: dict[str, str] = {}
        if num_args > 0:
            if arg_keys == ffi.NULL or arg_values == ffi.NULL:
                return s.error(OrtErrorCode.INVALID_ARGUMENT,
                               "`arg_keys` and `arg_values` must be non-null when `num_args` > 0")
            for i in range(num_args):
                if arg_keys[i] == ffi.NULL:
                    return s.error(OrtErrorCode.INVALID_ARGUMENT, f"Arg key at index {i} is NULL")
                if arg_values[i] == ffi.NULL:
                    return s.error(OrtErrorCode.INVALID_ARGUMENT, f"Arg value at index {i} is NULL")
                args.setdefault(pystr(arg_keys[i]) or "", pystr(arg_values[i]) or "")  # the first of a key wins
        event = ProfilingEvent(EventCategory(category), int(process_id), int(thread_id), pystr(event_name) or "",
                               int(timestamp_us), int(duration_us), args)
        event.ptr = self.h.issue_for_plugin(event, "OrtProfilingEvent*")
        out[0] = event.ptr
        return ffi.NULL

    def ReleaseProfilingEvent(self, event: Any) -> None:
        if address(event) == 0:
            return
        self.s.get(event, ProfilingEvent, "profiling event")
        if self.s.host.is_host_owned(event):
            from .api_table import Misuse

            raise Misuse("ReleaseProfilingEvent on an event the host handed to StopEvent (it is the host's)")
        self.h.drop(event)

    def ProfilingEvent_GetCategory(self, event: Any, out: Any) -> Any:
        ev = self._event(event)
        if ev is None:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "OrtProfilingEvent is NULL")
        if address(out) == 0:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "OrtProfilingEventCategory output parameter is NULL")
        out[0] = int(ev.category)
        return ffi.NULL

    def ProfilingEvent_GetName(self, event: Any, out: Any) -> Any:
        ev = self._event(event)
        if ev is None:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "OrtProfilingEvent is NULL")
        if address(out) == 0:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "output parameter for the event name is NULL")
        out[0] = ev.c_string("\0name", ev.name)
        return ffi.NULL

    def ProfilingEvent_GetTimestampUs(self, event: Any, out: Any) -> Any:
        ev = self._event(event)
        if ev is None:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "OrtProfilingEvent is NULL")
        if address(out) == 0:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "output parameter for the event timestamp is NULL")
        out[0] = ev.ts
        return ffi.NULL

    def ProfilingEvent_GetDurationUs(self, event: Any, out: Any) -> Any:
        ev = self._event(event)
        if ev is None:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "OrtProfilingEvent is NULL")
        if address(out) == 0:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "output parameter for the event duration is NULL")
        out[0] = ev.dur
        return ffi.NULL

    def ProfilingEvent_GetArgValue(self, event: Any, key: Any, out: Any) -> Any:
        ev = self._event(event)
        if ev is None:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "OrtProfilingEvent is NULL")
        if key == ffi.NULL:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "Key parameter is NULL")
        if address(out) == 0:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "Output parameter is NULL")
        name = pystr(key) or ""
        value = ev.args.get(name)
        out[0] = ffi.NULL if value is None else ev.c_string(name, value)
        return ffi.NULL

    def ProfilingEventsContainer_AddEvents(self, events_container: Any, events: Any, num_events: int) -> Any:
        s = self.s
        container = None if address(events_container) == 0 else \
            s.get(events_container, EventsContainer, "profiling events container")
        if container is None:
            return s.error(OrtErrorCode.INVALID_ARGUMENT, "OrtProfilingEventsContainer instance is NULL")
        if events == ffi.NULL or num_events == 0:
            return s.error(OrtErrorCode.INVALID_ARGUMENT,
                           "Must provide at least one event to add to OrtProfilingEventsContainer.")
        found = []
        for i in range(num_events):  # every event is checked before any is added, as in ORT
            if events[i] == ffi.NULL:
                return s.error(OrtErrorCode.INVALID_ARGUMENT, f"OrtProfilingEvent instance at index {i} is NULL")
            found.append(s.get(events[i], ProfilingEvent, f"profiling event at index {i}"))
        container.events.extend(ev.copy() for ev in found)
        return ffi.NULL
