"""The ``OrtApiBase``/``OrtApi``/``OrtEpApi`` tables epabi serves plugins: one set per emulated API version per
process, made on first use and valid for the life of the process, as ONNX Runtime's are.

Plugins keep the tables (and what they got through them) as long as they like; the served functions therefore
belong to no host: each one works for the host whose call into the plugin is in progress
(:mod:`epabi.call_context`) and resolves handles in the process-wide table (:mod:`epabi.handles`), so an object of
a closed host answers with an error status (or NULL/0) and a conduct report, never a crash.

Every slot is filled: a served function where epabi implements the member and the table's version has it;
otherwise a trap that names the function and what the plugin asked for (a member newer than the emulated host is
plugin misconduct; an older member this host does not serve is a host limitation) and answers with the C value
its result type needs: an error ``OrtStatus``, NULL, 0, or nothing, so the plugin never jumps to garbage. Served
functions catch every exception, and nothing is printed by cffi: a failure is recorded in the conduct report and
raised in Python after the call into the plugin returns. Tables follow the semantics of the emulated ONNX Runtime
releases (see each function).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import call_context
from ._ffi import ffi, member_since, slot_fields
from .conduct import Conduct
from .errors import OrtErrorCode
from .handles import address
from .objects import (
    EpDevice,
    HardwareDevice,
    KeyValuePairs,
    MemoryInfo,
    OrtAllocatorType,
    OrtDeviceMemoryType,
    OrtHardwareDeviceType,
    OrtMemoryInfoDeviceType,
    Status,
    pystr,
)
from .ort_api_slots import ORT_API_SLOTS, ORT_EP_API_SLOTS, RESULT_POINTER, RESULT_STATUS, RESULT_VOID
from .served_allocators import AllocatorApi
from .served_graph import GraphApi
from .served_kernels import KernelEpApi, KernelOrtApi
from .served_model_editor import ModelEditorApi
from .served_profiling import ProfilingEpApi
from .served_values import EpGraphApi, ValueApi
from .versions import RELEASES, since_label

if TYPE_CHECKING:
    from .host import Host

_log = logging.getLogger("epabi.host")

_ORT_TO_PY_LEVEL = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR, 4: logging.CRITICAL}

#: Where served functions report when no host has called a plugin yet (nothing to raise it to).
_PROCESS_CONDUCT = Conduct()


class Misuse(Exception):
    """Raised inside a served function when the plugin passed something invalid; becomes a violation."""


class Logger:
    """``OrtLogger``: forwards plugin messages to a Python ``logging`` logger."""

    def __init__(self, name: str) -> None:
        self.logger = logging.getLogger(name)
        self.ptr: Any = ffi.NULL


_served: dict[int, ServedApi] = {}
_served_lock = threading.Lock()


def served_api(api_version: int) -> ServedApi:
    """The process's tables for one emulated API version, made on first use and never freed."""
    with _served_lock:
        served = _served.get(api_version)
        if served is None:
            served = _served[api_version] = ServedApi(api_version)
        return served


def _fail_value(ctype: Any) -> Any:
    """The C value a served function of this type answers with when it fails (not a status)."""
    result = ctype.result
    if result.kind == "void":
        return None
    if result.kind == "pointer":
        return ffi.NULL
    if result.kind == "primitive" and result.cname in ("float", "double"):
        return 0.0
    if result.kind == "primitive" and result.cname == "_Bool":
        return False
    return 0


class ServedApi:
    """The tables of one API version; keeps every cffi callback alive as long as itself (the process)."""

    def __init__(self, api_version: int) -> None:
        self.version = api_version
        self.release = RELEASES[api_version]
        self.c_release = ffi.new("char[]", self.release.encode())
        self._keep: list[Any] = []
        self.api = ffi.new("OrtApi*")
        self.ep_api = ffi.new("OrtEpApi*")
        self.base = ffi.new("OrtApiBase*")
        self.model_editor_api = ffi.new("OrtModelEditorApi*")
        self._fill("OrtApi", self.api, _OrtApiImpl(self))
        self._fill("OrtModelEditorApi", self.model_editor_api, ModelEditorApi(self))
        self._fill("OrtEpApi", self.ep_api, _OrtEpApiImpl(self))
        self._fill("OrtApiBase", self.base, _OrtApiBaseImpl(self))

    @property
    def host(self) -> Host:
        """The host this call serves (:func:`epabi.call_context.current_host`)."""
        host = call_context.current_host()
        if host is None:
            raise RuntimeError("a served function was called before any epabi host called a plugin")
        return host

    @property
    def conduct(self) -> Conduct:
        host = call_context.current_host()
        return _PROCESS_CONDUCT if host is None else host.conduct

    # -- building ------------------------------------------------------------------------------------

    def _fill(self, struct: str, table: Any, impl: object) -> None:
        since = member_since(struct)
        for name, slot, ctype in slot_fields(struct):
            if ctype.kind == "array":  # reserved padding: a named trap per slot
                for i in range(ctype.length):
                    cb = self._padding_trap(struct, slot + i)
                    self._keep.append(cb)
                    getattr(table, name)[i] = ffi.cast("void*", cb)
                continue
            label = f"{struct}::{name} (slot {slot}, since {since_label(since[name])})"
            fn = getattr(impl, name, None)
            if since[name] > self.version:
                fn = self._newer_trap(label, since[name])
            elif fn is None:
                fn = self._unserved_trap(label)
            cb = ffi.callback(ctype, self._guard(struct, name, ctype, fn), onerror=self._on_error(struct, name, ctype))
            self._keep.append(cb)
            setattr(table, name, cb)

    def _guard(self, struct: str, name: str, ctype: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
        returns_status = ctype.result.kind == "pointer" and ctype.result.item.cname == "OrtStatus"
        fail = _fail_value(ctype)

        def call(*args: Any) -> Any:
            try:
                return fn(*args)
            except _Unserved as exc:
                return self.error(OrtErrorCode.NOT_IMPLEMENTED, str(exc)) if returns_status else fail
            except Misuse as exc:
                self.report_violation(f"{struct}::{name}: {exc}")
                return self.error(OrtErrorCode.INVALID_ARGUMENT, f"{name}: {exc}") if returns_status else fail
            except Exception as exc:  # nothing may raise into C
                _log.debug("epabi host failed serving %s::%s", struct, name, exc_info=True)
                self.conduct.internal_error(f"{struct}::{name}: {type(exc).__name__}: {exc}")
                return self.error(OrtErrorCode.RUNTIME_EXCEPTION, f"{name}: {exc}") if returns_status else fail

        return call

    def _on_error(self, struct: str, name: str, ctype: Any) -> Callable[..., Any]:
        """cffi's last resort (a result that does not convert to the C type): recorded, never printed."""
        returns_status = ctype.result.kind == "pointer" and ctype.result.item.cname == "OrtStatus"

        def on_error(exc_type: Any, exc: BaseException, tb: Any) -> Any:
            try:
                self.conduct.internal_error(f"{struct}::{name}: {exc_type.__name__}: {exc}")
                if returns_status:
                    return self.error(OrtErrorCode.RUNTIME_EXCEPTION, f"{name}: {exc}")
            except Exception:  # the report itself failed: the C default (NULL/0) is all that is left
                pass
            return None

        return on_error

    def report_violation(self, message: str) -> None:
        """Records plugin misconduct for the current host; logged as well when no call of it is in progress
        (a plugin thread, or a closed host's object), since nothing will raise it then."""
        self.conduct.violation(message)
        if not call_context.in_call():
            _log.warning("plugin conduct (outside any host call): %s", message)

    def _newer_trap(self, label: str, since: int) -> Callable[..., Any]:
        def trap(*args: Any) -> Any:
            raise Misuse(f"{label} was called, but it appeared in API {since} and this host is ONNX Runtime "
                         f"{self.release} (API {self.version})")

        return trap

    def _unserved_trap(self, label: str) -> Callable[..., Any]:
        message = f"{label} is not served by the epabi host"

        def trap(*args: Any) -> Any:
            self.conduct.limitation(message)
            raise _Unserved(message)

        return trap

    def _padding_trap(self, struct: str, slot: int) -> Any:
        """A trap for a slot ort_abi.h leaves as padding, typed by the slot's result (named where known)."""
        known = ORT_API_SLOTS[slot] if struct == "OrtApi" and slot < len(ORT_API_SLOTS) else \
            ORT_EP_API_SLOTS.get(slot) if struct == "OrtEpApi" else None
        if known is not None:
            name, since, kind = known
            label = f"{struct}::{name} (slot {slot}, since {since_label(since)})"
        else:
            name, since, kind = f"slot {slot}", self.version, RESULT_STATUS
            label = f"{struct} slot {slot}"
        newer = since > self.version
        message = (f"{label} was called, but it appeared in API {since} and this host is ONNX Runtime "
                   f"{self.release} (API {self.version})") if newer else f"{label} is not served by the epabi host"
        ctype = {RESULT_STATUS: "OrtStatus*(*)(void)", RESULT_POINTER: "void*(*)(void)",
                 RESULT_VOID: "void(*)(void)"}.get(kind, "int64_t(*)(void)")
        fail = _fail_value(ffi.typeof(ctype))

        def trap() -> Any:
            if newer:
                self.report_violation(message)
                code = OrtErrorCode.INVALID_ARGUMENT
            else:
                self.conduct.limitation(message)
                code = OrtErrorCode.NOT_IMPLEMENTED
            return self.error(code, message) if kind == RESULT_STATUS else fail

        return ffi.callback(ctype, self._guard(struct, name, ffi.typeof(ctype), trap),
                            onerror=self._on_error(struct, name, ffi.typeof(ctype)))

    # -- helpers for served functions ----------------------------------------------------------------

    def error(self, code: int, message: str) -> Any:
        """A host-created error ``OrtStatus*``; the plugin must release it."""
        host = call_context.current_host()
        status = Status(int(code), message, origin=f"host->plugin:{call_context.current_library()}")
        if host is None:
            from .handles import PROCESS_HANDLES

            status.ptr = PROCESS_HANDLES.issue(status, "OrtStatus*", plugin_lifetime=True)
        else:
            status.ptr = host.handles.issue_for_plugin(status, "OrtStatus*")
        return status.ptr

    def get(self, ptr: Any, kind: type, what: str, allow_null: bool = False) -> Any:
        handles = self.host.handles
        obj = handles.lookup(ptr, kind)
        if obj is None and not (allow_null and address(ptr) == 0):
            raise Misuse(f"{what} {_fmt(ptr)} {handles.explain(ptr, kind)}")
        return obj

    def issue_kvp(self, kvp: KeyValuePairs) -> Any:
        """Key-value pairs handed to the plugin to own (it releases them with ReleaseKeyValuePairs)."""
        kvp.ptr = self.host.handles.issue_for_plugin(kvp, "OrtKeyValuePairs*")
        return kvp.ptr


class _Unserved(Exception):
    pass


def _fmt(ptr: Any) -> str:
    return "NULL" if address(ptr) == 0 else hex(address(ptr))


def _out(ptr: Any, what: str) -> Any:
    if address(ptr) == 0:
        raise Misuse(f"NULL output pointer for {what}")
    return ptr


class _OrtApiBaseImpl:
    """Served ``OrtApiBase`` members, named as in ONNX Runtime."""

    def __init__(self, served: ServedApi) -> None:
        self.s = served

    def GetApi(self, version: int) -> Any:
        s = self.s
        host = call_context.current_host()  # a plugin may ask at any time, even before a host called it
        if host is not None:
            host.api_requests.append(int(version))
        if 1 <= version <= s.version:
            return s.api
        _log.error("The requested API version [%d] is not available, only API versions [1, %d] are supported "
                   "in this build. Current ORT Version is: %s", version, s.version, s.release)
        return ffi.NULL

    def GetVersionString(self) -> Any:
        return self.s.c_release


class _OrtApiImpl(GraphApi, ValueApi, KernelOrtApi, AllocatorApi):
    """Served ``OrtApi`` members, named as in ONNX Runtime."""

    def __init__(self, served: ServedApi) -> None:
        self.s = served

    @property
    def h(self) -> Any:
        """The calling host's handles (lookups see every host's)."""
        return self.s.host.handles

    # statuses
    def CreateStatus(self, code: int, msg: Any) -> Any:
        status = Status(int(code), pystr(msg) or "", origin=f"plugin:{call_context.current_library()}")
        status.ptr = self.h.issue_for_plugin(status, "OrtStatus*")
        return status.ptr

    def GetErrorCode(self, status: Any) -> int:
        return self.s.get(status, Status, "status").code

    def GetErrorMessage(self, status: Any) -> Any:
        return self.s.get(status, Status, "status").c_message

    def ReleaseStatus(self, status: Any) -> None:
        if address(status) == 0:
            return
        self.s.get(status, Status, "status")
        self.h.drop(status)

    # memory infos
    def _new_memory_info(self, info: MemoryInfo, out: Any) -> None:
        info.ptr = self.h.issue_for_plugin(info, "OrtMemoryInfo*")
        info.device_ptr = self.h.issue_for_plugin(info.device, "OrtMemoryDevice*")
        _out(out, "memory info")[0] = info.ptr

    def CreateMemoryInfo(self, name: Any, allocator_type: int, device_id: int, mem_type: int, out: Any) -> Any:
        text = pystr(name) or ""
        on_cpu = text in ("Cpu", "CudaPinned") or mem_type != 0
        info = MemoryInfo(text, OrtMemoryInfoDeviceType.CPU if on_cpu else OrtMemoryInfoDeviceType.GPU,
                          0, device_id, OrtDeviceMemoryType.DEFAULT, 0, OrtAllocatorType(allocator_type), mem_type)
        self._new_memory_info(info, out)
        return ffi.NULL

    def CreateCpuMemoryInfo(self, allocator_type: int, mem_type: int, out: Any) -> Any:
        return self.CreateMemoryInfo(ffi.new("char[]", b"Cpu"), allocator_type, 0, mem_type, out)

    def CreateMemoryInfo_V2(self, name: Any, device_type: int, vendor_id: int, device_id: int, mem_type: int,
                            alignment: int, allocator_type: int, out: Any) -> Any:
        text = pystr(name)
        if not text:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "CreateMemoryInfo_V2: name is NULL or empty")
        try:
            info = MemoryInfo(text, OrtMemoryInfoDeviceType(device_type), int(vendor_id), int(device_id),
                              OrtDeviceMemoryType(mem_type), int(alignment), OrtAllocatorType(allocator_type))
        except ValueError as exc:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"CreateMemoryInfo_V2: {exc}")
        self._new_memory_info(info, out)
        return ffi.NULL

    def ReleaseMemoryInfo(self, info: Any) -> None:
        if address(info) == 0:
            return
        obj = self.s.get(info, MemoryInfo, "memory info")
        if self.s.host.is_host_owned(info):
            raise Misuse("ReleaseMemoryInfo on the host's own memory info (from GetTensorMemoryInfo)")
        self.h.drop(info)
        self.h.drop(obj.device_ptr)

    def CompareMemoryInfo(self, a: Any, b: Any, out: Any) -> Any:
        x, y = self.s.get(a, MemoryInfo, "memory info"), self.s.get(b, MemoryInfo, "memory info")
        _out(out, "comparison")[0] = 0 if x.same_as(y) else -1
        return ffi.NULL

    def MemoryInfoGetName(self, info: Any, out: Any) -> Any:
        _out(out, "name")[0] = self.s.get(info, MemoryInfo, "memory info").c_name
        return ffi.NULL

    def MemoryInfoGetId(self, info: Any, out: Any) -> Any:
        _out(out, "id")[0] = self.s.get(info, MemoryInfo, "memory info").device_id
        return ffi.NULL

    def MemoryInfoGetMemType(self, info: Any, out: Any) -> Any:
        _out(out, "mem type")[0] = self.s.get(info, MemoryInfo, "memory info").ort_mem_type
        return ffi.NULL

    def MemoryInfoGetType(self, info: Any, out: Any) -> Any:
        _out(out, "allocator type")[0] = int(self.s.get(info, MemoryInfo, "memory info").allocator_type)
        return ffi.NULL

    def MemoryInfoGetDeviceType(self, info: Any, out: Any) -> None:
        _out(out, "device type")[0] = int(self.s.get(info, MemoryInfo, "memory info").device_type)

    def MemoryInfoGetDeviceMemType(self, info: Any) -> int:
        return int(self.s.get(info, MemoryInfo, "memory info").mem_type)

    def MemoryInfoGetVendorId(self, info: Any) -> int:
        return self.s.get(info, MemoryInfo, "memory info").vendor_id

    # session options
    def _session_options(self, ptr: Any) -> Any:
        from .session_options import SessionOptions

        return self.s.get(ptr, SessionOptions, "session options")

    def HasSessionConfigEntry(self, options: Any, key: Any, out: Any) -> Any:
        _out(out, "flag")[0] = int(pystr(key) in self._session_options(options).config)
        return ffi.NULL

    def GetSessionConfigEntry(self, options: Any, key: Any, value: Any, size: Any) -> Any:
        # ORT semantics: a missing key is an error; *size is in/out and includes the terminating NUL.
        name = pystr(key) or ""
        config = self._session_options(options).config
        if name not in config:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"Session config entry '{name}' was not found")
        data = config[name].encode() + b"\0"
        capacity = _out(size, "size")[0]
        size[0] = len(data)
        if address(value) == 0:
            return ffi.NULL
        if capacity < len(data):
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT,
                                f"Session config entry '{name}': buffer of {capacity} bytes is too small, "
                                f"need {len(data)}")
        ffi.memmove(value, data, len(data))
        return ffi.NULL

    def GetSessionOptionsConfigEntries(self, options: Any, out: Any) -> Any:
        kvp = KeyValuePairs(self._session_options(options).config)
        _out(out, "config entries")[0] = self.s.issue_kvp(kvp)
        return ffi.NULL

    # logging
    def Logger_LogMessage(self, logger: Any, level: int, message: Any, file_path: Any, line: int,
                          func: Any) -> Any:
        obj = self.s.get(logger, Logger, "logger")
        pylevel = _ORT_TO_PY_LEVEL.get(int(level), logging.ERROR)
        obj.logger.log(pylevel, "%s", pystr(message) or "",
                       extra={"ort_file": pystr(file_path), "ort_line": line, "ort_func": pystr(func)})
        return ffi.NULL

    def Logger_GetLoggingSeverityLevel(self, logger: Any, out: Any) -> Any:
        effective = self.s.get(logger, Logger, "logger").logger.getEffectiveLevel()
        level = 0 if effective <= logging.DEBUG else 1 if effective <= logging.INFO else \
            2 if effective <= logging.WARNING else 3 if effective <= logging.ERROR else 4
        _out(out, "level")[0] = level
        return ffi.NULL

    # key-value pairs
    def CreateKeyValuePairs(self, out: Any) -> None:
        _out(out, "key-value pairs")[0] = self.s.issue_kvp(KeyValuePairs())

    def AddKeyValuePair(self, kvp: Any, key: Any, value: Any) -> None:
        obj = self.s.get(kvp, KeyValuePairs, "key-value pairs")
        k, v = pystr(key), pystr(value)
        if not k or v is None:
            raise Misuse(f"AddKeyValuePair with key {k!r} and value {v!r} (NULL or empty key, or NULL value)")
        obj.add(k, v)

    def GetKeyValue(self, kvp: Any, key: Any) -> Any:
        return self.s.get(kvp, KeyValuePairs, "key-value pairs").c_value(pystr(key) or "")

    def GetKeyValuePairs(self, kvp: Any, keys: Any, values: Any, num: Any) -> None:
        k, v, n = self.s.get(kvp, KeyValuePairs, "key-value pairs").c_arrays()
        _out(keys, "keys")[0] = k
        _out(values, "values")[0] = v
        _out(num, "count")[0] = n

    def RemoveKeyValuePair(self, kvp: Any, key: Any) -> None:
        self.s.get(kvp, KeyValuePairs, "key-value pairs").remove(pystr(key) or "")

    def ReleaseKeyValuePairs(self, kvp: Any) -> None:
        if address(kvp) == 0:
            return
        obj = self.s.get(kvp, KeyValuePairs, "key-value pairs")
        if self.s.host.is_borrowed(obj):
            raise Misuse("ReleaseKeyValuePairs on pairs owned by the host (device metadata or EP options)")
        self.h.drop(kvp)

    # hardware devices
    def _hw(self, ptr: Any) -> HardwareDevice:
        return self.s.get(ptr, HardwareDevice, "hardware device")

    def HardwareDevice_Type(self, device: Any) -> int:
        return int(self._hw(device).type)

    def HardwareDevice_VendorId(self, device: Any) -> int:
        return self._hw(device).vendor_id

    def HardwareDevice_Vendor(self, device: Any) -> Any:
        return self._hw(device).c_vendor

    def HardwareDevice_DeviceId(self, device: Any) -> int:
        return self._hw(device).device_id

    def HardwareDevice_Metadata(self, device: Any) -> Any:
        return self._hw(device).c_metadata.ptr

    # EP devices
    def _ep_device(self, ptr: Any) -> EpDevice:
        return self.s.get(ptr, EpDevice, "EP device")

    def EpDevice_EpName(self, device: Any) -> Any:
        return self._ep_device(device).c_ep_name

    def EpDevice_EpVendor(self, device: Any) -> Any:
        return self._ep_device(device).c_ep_vendor

    def EpDevice_EpMetadata(self, device: Any) -> Any:
        return self._ep_device(device).c_metadata.ptr

    def EpDevice_EpOptions(self, device: Any) -> Any:
        return self._ep_device(device).c_options.ptr

    def EpDevice_Device(self, device: Any) -> Any:
        return self._ep_device(device).device.ptr

    def EpDevice_MemoryInfo(self, device: Any, mem_type: int) -> Any:
        info = self._ep_device(device).memory_info(OrtDeviceMemoryType(mem_type))
        return ffi.NULL if info is None else info.ptr

    def GetEpApi(self) -> Any:
        return self.s.ep_api

    def GetModelEditorApi(self) -> Any:
        return self.s.model_editor_api

    def GetExperimentalFunction(self, name: Any) -> Any:
        # epabi offers no experimental functions: NULL is ORT's answer for a name it does not know, and what a
        # plugin must handle anyway (the set changes between releases); the names asked for are kept
        self.s.host.experimental_requests.append(pystr(name) or "")
        return ffi.NULL

    def SessionOptionsSetWeightlessSourceModelBuffer(self, options: Any, data: Any, length: int) -> Any:
        so = self._session_options(options)
        so.weightless_source = (ffi.cast("const void*", data), int(length)) if address(data) != 0 else None
        return ffi.NULL

    def GetRunConfigEntry(self, options: Any, key: Any) -> Any:
        from .run_options import RunOptions

        return self.s.get(options, RunOptions, "run options").c_value(pystr(key) or "")


class _OrtEpApiImpl(EpGraphApi, KernelEpApi, ProfilingEpApi):
    """Served ``OrtEpApi`` members, named as in ONNX Runtime."""

    def __init__(self, served: ServedApi) -> None:
        self.s = served

    @property
    def h(self) -> Any:
        """The calling host's handles (lookups see every host's)."""
        return self.s.host.handles

    def CreateEpDevice(self, factory: Any, hardware: Any, metadata: Any, options: Any, out: Any) -> Any:
        s = self.s
        owner = s.host.factory_for(factory)
        if owner is None:
            raise Misuse(f"CreateEpDevice with factory {_fmt(factory)}, which is not a factory being registered")
        hw = s.get(hardware, HardwareDevice, "hardware device")
        meta = s.get(metadata, KeyValuePairs, "EP metadata", allow_null=True)
        opts = s.get(options, KeyValuePairs, "EP options", allow_null=True)
        entries = meta.as_dict() if meta else {}
        if owner.version >= 23:  # as ORT: the EP version comes from OrtEpFactory::GetVersion, added here
            if "version" in entries:
                return s.error(OrtErrorCode.INVALID_ARGUMENT,
                               "The provided EP metadata should not explicitly specify the EP version.")
            if owner.plugin_version is not None:
                entries["version"] = owner.plugin_version
        device = EpDevice(owner, hw, entries, opts.as_dict() if opts else {})
        device.ptr = self.h.issue(device, "OrtEpDevice*")
        s.host.adopt_borrowed(device.c_metadata, device.c_options)
        _out(out, "EP device")[0] = device.ptr
        return ffi.NULL

    def ReleaseEpDevice(self, device: Any) -> None:
        if address(device) == 0:
            return
        obj = self.s.get(device, EpDevice, "EP device")
        self.s.host.forget_ep_device(obj)

    def EpDevice_AddAllocatorInfo(self, device: Any, info: Any) -> Any:
        dev = self.s.get(device, EpDevice, "EP device")
        mem = self.s.get(info, MemoryInfo, "memory info")
        if mem.allocator_type not in (OrtAllocatorType.DEVICE, OrtAllocatorType.READ_ONLY):
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT,
                                f"EpDevice_AddAllocatorInfo: memory info '{mem.name}' has allocator type "
                                f"{mem.allocator_type.name}; only DEVICE and READ_ONLY are accepted")
        for existing in dev.memory_infos:
            if existing.mem_type == mem.mem_type and existing.allocator_type == mem.allocator_type:
                return self.s.error(OrtErrorCode.INVALID_ARGUMENT,
                                    f"EpDevice_AddAllocatorInfo: the EP device already has a "
                                    f"{mem.allocator_type.name} allocator for memory type {mem.mem_type.name}")
        dev.memory_infos.append(mem)
        return ffi.NULL

    def MemoryInfo_GetMemoryDevice(self, info: Any) -> Any:
        return self.s.get(info, MemoryInfo, "memory info").device_ptr

    def _memory_device(self, ptr: Any) -> Any:
        from .objects import MemoryDevice

        return self.s.get(ptr, MemoryDevice, "memory device")

    def MemoryDevice_AreEqual(self, a: Any, b: Any) -> bool:
        return self._memory_device(a) == self._memory_device(b)

    def MemoryDevice_GetDeviceType(self, device: Any) -> int:
        return int(self._memory_device(device).device_type)

    def MemoryDevice_GetMemoryType(self, device: Any) -> int:
        return int(self._memory_device(device).mem_type)

    def MemoryDevice_GetVendorId(self, device: Any) -> int:
        return self._memory_device(device).vendor_id

    def MemoryDevice_GetDeviceId(self, device: Any) -> int:
        return self._memory_device(device).device_id

    def CreateHardwareDevice(self, device_type: int, vendor_id: int, device_id: int, vendor_name: Any,
                             metadata: Any, out: Any) -> Any:
        s = self.s
        meta = s.get(metadata, KeyValuePairs, "hardware device metadata", allow_null=True)
        try:
            kind = OrtHardwareDeviceType(device_type)
        except ValueError:
            return s.error(OrtErrorCode.INVALID_ARGUMENT, f"CreateHardwareDevice: unknown device type {device_type}")
        hw = HardwareDevice(kind, int(vendor_id), pystr(vendor_name) or "", int(device_id),
                            meta.as_dict() if meta else {}, created_by=f"plugin:{call_context.current_library()}")
        s.host.issue_hardware(hw, for_plugin=True)
        _out(out, "hardware device")[0] = hw.ptr
        return ffi.NULL

    def ReleaseHardwareDevice(self, device: Any) -> None:
        if address(device) == 0:
            return
        hw = self.s.get(device, HardwareDevice, "hardware device")
        if hw.created_by == "host":
            raise Misuse("ReleaseHardwareDevice on a hardware device the host discovered (only devices made "
                         "with CreateHardwareDevice may be released)")
        self.s.host.release_hardware(hw)

    def SessionOptionsGetWeightlessSourceModelBuffer(self, options: Any, data: Any, length: Any) -> Any:
        # the buffer the application set (the host keeps its pointer, as ORT does); NULL and 0 when none
        from .session_options import SessionOptions

        source = self.s.get(options, SessionOptions, "session options").weightless_source
        _out(data, "source model data")[0] = ffi.NULL if source is None else source[0]
        _out(length, "source model length")[0] = 0 if source is None else source[1]
        return ffi.NULL

    def GetEnvConfigEntries(self, out: Any) -> Any:
        _out(out, "config entries")[0] = self.s.issue_kvp(KeyValuePairs(self.s.host.env_config_view()))
        return ffi.NULL
