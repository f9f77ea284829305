"""A loaded plugin EP library and its factories, driven in ONNX Runtime's registration order.

Registration (``PluginLibrary.load``): dlopen; resolve ``CreateEpFactories`` and ``ReleaseEpFactory`` (both
required); ``CreateEpFactories(name, api_base, logger, factories, max=4, &n)`` (zero factories is accepted, as
ORT accepts it); per factory: check the table, ``GetSupportedDevices(..., max_ep_devices=8)``, an allocator for
each EP device's device memory, then ``CreateDataTransfer``. Unregistration (``close``): release EP devices, the
data transfer, then the allocators, ``ReleaseEpFactory``
per factory (a failure is logged and the factory treated as released, as ORT does), check for leaked statuses,
dlclose. Not thread-safe: the host serialises registration.
"""

from __future__ import annotations

import logging
import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._ffi import ffi, member_since
from .dynlib import SharedLibrary
from .errors import ConductError, OrtErrorCode, OrtStatusError, PluginLoadError
from .gating import readable_members
from .objects import EpDevice, Status, pystr

if TYPE_CHECKING:
    from .host import Host

_log = logging.getLogger("epabi.host")

MAX_FACTORIES = 4
MAX_EP_DEVICES = 8
# Required on every host that knows them (their since marks in ort_abi.h). GetVersion and CreateDataTransfer
# are optional in ORT's header, but ORT's core calls them without a NULL check: NULL crashed every host
# 1.24.4-1.32.0 (facts sheet, section 2).
REQUIRED_FACTORY_MEMBERS = ("GetName", "GetVendor", "GetSupportedDevices", "CreateEp", "ReleaseEp", "GetVersion",
                            "CreateDataTransfer")


class Factory:
    """One ``OrtEpFactory`` of a plugin: identity, members the host may read, EP devices it offered."""

    def __init__(self, library: PluginLibrary, ptr: Any) -> None:
        self.library = library
        self.ptr = ptr
        self.version = int(ptr.ort_version_supported)
        where = f"factory of library '{library.name}'"
        if self.version == 0:  # ORT 1.24.4-1.32.0 accept it (observed) and read only the 1.23 members
            library.host.tolerate(f"{where}: ort_version_supported is 0; a plugin must declare the API it was "
                                  "built for (ONNX Runtime reads only the members of API 23 and older then)")
        host_api = library.host.api_version
        self.members = readable_members("OrtEpFactory", ptr, host_api)
        since = member_since("OrtEpFactory")
        missing = [m for m in REQUIRED_FACTORY_MEMBERS if since[m] <= host_api and m not in self.members]
        if missing:
            raise ConductError(f"{where}: required OrtEpFactory members are NULL: {', '.join(missing)}")
        self.name = self._text("GetName")
        self.vendor = self._text("GetVendor")
        self.plugin_version = self._text("GetVersion") if "GetVersion" in self.members else None
        self.vendor_id = int(self.call("GetVendorId")) if "GetVendorId" in self.members else None
        self.ep_devices: list[EpDevice] = []
        self.shared_allocators: list[Any] = []  # DeviceAllocator per EP device memory, as ORT keeps them
        self.data_transfer: Any = ffi.NULL
        self._transfers: dict[int, Any] = {}  # id(MemoryInfo) -> DataTransfer, made on first use

    def transfer_for(self, memory_info: Any) -> Any:
        """The :class:`~epabi.device_memory.DataTransfer` between host memory and ``memory_info`` (one of this
        factory's EP device memories), made once. Raises ConductError when the plugin cannot copy there."""
        from .device_memory import DataTransfer

        transfer = self._transfers.get(id(memory_info))
        if transfer is None:
            transfer = self._transfers[id(memory_info)] = DataTransfer(self.library.host, self, memory_info)
        return transfer

    def create_data_transfer(self) -> Any:
        """``OrtEpFactory::CreateDataTransfer``: the ``OrtDataTransferImpl*`` (NULL: the factory copies nothing),
        which the caller releases with its ``Release``. ORT asks at registration (the environment's copies) and
        again for every session (the session's copies, released with the session; observed on 1.24.4-1.32.0).
        Raises OrtStatusError, or ConductError for a table with version 0 or a NULL member."""
        out = ffi.new("OrtDataTransferImpl**")
        self.call_status("CreateDataTransfer", out)
        impl = out[0]
        if impl != ffi.NULL:
            if int(impl.ort_version_supported) == 0:
                raise ConductError(f"{self.name}: OrtDataTransferImpl has ort_version_supported 0")
            for member in ("Release", "CanCopy", "CopyTensors"):
                if getattr(impl, member) == ffi.NULL:
                    raise ConductError(f"{self.name}: OrtDataTransferImpl::{member} is NULL")
        return impl

    def is_stream_aware(self) -> bool:
        """``OrtEpFactory::IsStreamAware`` (False when the member is NULL), which ORT asks for every session when it
        registers the session's stream handlers."""
        if "IsStreamAware" not in self.members:
            return False
        return bool(self.call("IsStreamAware"))

    def release_data_transfer(self, impl: Any) -> None:
        """``OrtDataTransferImpl::Release`` of one :meth:`create_data_transfer` returned (NULL: nothing)."""
        if impl != ffi.NULL:
            with self.library.host.calling(self.library, "OrtDataTransferImpl::Release"):
                impl.Release(impl)

    def _text(self, member: str) -> str:
        value = pystr(self.call(member))
        if value is None:
            raise ConductError(f"factory of library '{self.library.name}': OrtEpFactory::{member} returned NULL")
        return value

    def call(self, member: str, *args: Any) -> Any:
        """Calls a member the host may read, recording it in the trace and raising recorded misconduct."""
        with self.library.host.calling(self.library, f"OrtEpFactory::{member}"):
            return self.members[member](self.ptr, *args)

    def call_status(self, member: str, *args: Any) -> None:
        """Calls an ``OrtStatus*``-returning member and raises :class:`OrtStatusError` on failure."""
        host = self.library.host
        with host.calling(self.library, f"OrtEpFactory::{member}"):
            status = self.members[member](self.ptr, *args)
            host.raise_status(status, f"{self.name}: OrtEpFactory::{member}")


_registered: list[weakref.ref[PluginLibrary]] = []
_registered_lock = threading.Lock()


def registered_libraries() -> list[PluginLibrary]:
    """Every plugin library loaded and not yet unregistered, on any live host, in registration order.

    ``OrtValue.ortvalue_from_numpy(array, "cuda", 0)`` looks for device memory here when no host is named.
    """
    with _registered_lock:
        return [lib for ref in _registered if (lib := ref()) is not None and lib.loaded]


class PluginLibrary:
    """A registered plugin library: the dlopen handle, its factories, their EP devices."""

    def __init__(self, host: Host, name: str, path: str | Path) -> None:
        self.host = host
        self.name = name
        self.path = str(Path(path).resolve()) if Path(path).exists() else str(path)
        self.factories: list[Factory] = []
        self.sessions: weakref.WeakSet[Any] = weakref.WeakSet()  # live sessions on this library's EPs
        self._lib: SharedLibrary | None = None
        self._create: Any = None
        self._release: Any = None
        self._c_name = ffi.new("char[]", name.encode())

    @property
    def loaded(self) -> bool:
        """True from a successful dlopen in :meth:`load` until :meth:`close` unloads the library."""
        return self._lib is not None

    def load(self) -> None:
        """Runs ONNX Runtime's registration sequence. Raises PluginLoadError, OrtStatusError, ConductError."""
        try:
            self._lib = SharedLibrary(self.path)
        except OSError as exc:
            raise PluginLoadError(f"Failed to load library {self.path}: {exc}") from exc
        try:
            self._resolve()
            self._create_factories()
            for factory in self.factories:  # ORT's order (observed on 1.24.4, 1.26.0 and 1.32.0)
                self._list_devices(factory)
                self._create_shared_allocators(factory)
                self._register_data_transfer(factory)
        except BaseException:
            self.close(check_leaks=False)
            raise
        with _registered_lock:
            _registered.append(weakref.ref(self))

    def _resolve(self) -> None:
        for symbol in ("CreateEpFactories", "ReleaseEpFactory"):
            try:
                fn = self._lib.function(symbol)
            except AttributeError as exc:
                raise PluginLoadError(f"Failed to get symbol {symbol} from {self.path}") from exc
            if symbol == "CreateEpFactories":
                self._create = fn
            else:
                self._release = fn

    def _create_factories(self) -> None:
        host = self.host
        out = ffi.new("OrtEpFactory*[]", MAX_FACTORIES)
        num = ffi.new("size_t*", 0)
        with host.calling(self, "CreateEpFactories"):
            status = self._create(self._c_name, host.served.base, host.default_logger.ptr, out, MAX_FACTORIES, num)
            host.raise_status(status, f"CreateEpFactories of '{self.name}'")
        if num[0] > MAX_FACTORIES:
            if host.behaviour.checks_factory_count:  # 1.31+; older releases abort on an assertion
                raise OrtStatusError(OrtErrorCode.FAIL, f"CreateEpFactories returned {num[0]} factories but the "
                                     f"supplied capacity was {MAX_FACTORIES}.", f"CreateEpFactories of '{self.name}'")
            raise ConductError(f"CreateEpFactories of '{self.name}' reported {num[0]} factories; at most "
                               f"{MAX_FACTORIES} were allowed")
        if num[0] == 0:  # ORT registers the library with no EP devices (onnxruntime-ggml 0.2.0 does this on 1.24)
            host.tolerate(f"CreateEpFactories of '{self.name}' succeeded but returned no factory: the library is "
                          "registered with no EP devices")
        for i in range(num[0]):
            if out[i] == ffi.NULL:
                raise ConductError(f"CreateEpFactories of '{self.name}' returned a NULL factory at index {i}")
            self.factories.append(Factory(self, out[i]))

    def _list_devices(self, factory: Factory) -> None:
        host = self.host
        hw = host.hardware
        hw_ptrs = ffi.new("OrtHardwareDevice*[]", [d.ptr for d in hw] or [ffi.NULL])
        out = ffi.new("OrtEpDevice*[]", MAX_EP_DEVICES)
        num = ffi.new("size_t*", 0)
        with host.enumerating(factory):
            factory.call_status("GetSupportedDevices", hw_ptrs, len(hw), out, MAX_EP_DEVICES, num)
        if num[0] > MAX_EP_DEVICES:
            raise ConductError(f"{factory.name}: GetSupportedDevices reported {num[0]} EP devices; at most "
                               f"{MAX_EP_DEVICES} fit")
        for i in range(num[0]):
            device = host.handles.lookup(out[i], EpDevice)
            if device is None or device.factory is not factory:
                raise ConductError(f"{factory.name}: GetSupportedDevices returned entry {i} that is not an "
                                   f"OrtEpDevice made by CreateEpDevice for this factory")
            # ONNX Runtime adds the library path to every plugin EP device's metadata (and the EP version in
            # CreateEpDevice, for factories declaring API 23 or newer)
            device.c_metadata.add("library_path", self.path)
            factory.ep_devices.append(device)

    def _register_data_transfer(self, factory: Factory) -> None:
        factory.data_transfer = factory.create_data_transfer()

    def _create_shared_allocators(self, factory: Factory) -> None:
        """ORT creates an allocator for each EP device's DEFAULT device memory when the library is registered
        (observed: onnxruntime 1.30 on a GPU machine fails the registration when CreateAllocator fails)."""
        from .device_memory import DeviceAllocator
        from .objects import OrtDeviceMemoryType

        for device in factory.ep_devices:
            info = device.memory_info(OrtDeviceMemoryType.DEFAULT)
            if info is not None:
                factory.shared_allocators.append(DeviceAllocator(self.host, factory, info))

    def close(self, check_leaks: bool = True) -> None:
        """Releases everything in ONNX Runtime's order; raises ConductError for leaked statuses afterwards."""
        host = self.host
        with _registered_lock:
            _registered[:] = [ref for ref in _registered if ref() not in (None, self)]
        for session in list(self.sessions):  # ORT crashes here; we close them, so later runs raise cleanly
            session.close()
        for factory in self.factories:
            for device in factory.ep_devices:
                host.forget_ep_device(device)
            factory.ep_devices = []
            factory._transfers = {}
            # as ORT: the environment's data transfer goes before its shared allocators (observed, 1.24.4-1.32.0)
            factory.release_data_transfer(factory.data_transfer)
            factory.data_transfer = ffi.NULL
            for allocator in factory.shared_allocators:
                allocator.close()
            factory.shared_allocators = []
        factories, self.factories = self.factories, []
        findings: list[str] = []
        if self._release is not None:
            for factory in factories:  # as ORT: a failure is logged and the factory counts as released
                try:
                    with host.calling(self, "ReleaseEpFactory"):
                        host.raise_status(self._release(factory.ptr), f"ReleaseEpFactory of '{self.name}'")
                except (OrtStatusError, ConductError) as exc:
                    _log.error("ReleaseEpFactory failed for: %s with error: %s", self.path, exc)
                    findings.append(f"ReleaseEpFactory of '{self.name}' failed: {exc}")
        leaked = [s for s in host.handles.live(Status) if s.origin.endswith(f"plugin:{self.name}")]
        for status in leaked:
            host.handles.drop(status.ptr)
        if self._lib is not None:
            self._lib.close()
            self._lib = None
        self._create = self._release = None
        if check_leaks and leaked:
            first = leaked[0]
            findings.append(f"library '{self.name}' leaked {len(leaked)} OrtStatus object(s) it never returned "
                            f"or released (first: code {first.code}, {first.message!r})")
        for finding in findings:  # after everything is released, so a strict host raises with nothing left over
            host.tolerate(finding)
