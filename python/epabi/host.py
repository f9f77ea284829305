"""``Host``: an emulated ONNX Runtime environment of one API version that loads plugin EP libraries.

Names follow onnxruntime's Python API so one script runs on either::

    host = epabi.Host()                      # newest API epabi emulates; Host(api_version=24) for ORT 1.24
    host.register_execution_provider_library("epabi", epabi.get_library_path())
    devices = [d for d in host.get_ep_devices() if d.ep_name == epabi.get_ep_name()]

The host checks the plugin's conduct on every call (:class:`ConductError`), raises failed statuses as
:class:`OrtStatusError`, and routes plugin log messages to ``logging`` ("epabi.plugin" for the default logger,
"epabi.session.<EP>" for session loggers). Not thread-safe for registration; served callbacks are.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ._ffi import ffi
from .api_table import Logger, ServedApi
from .conduct import Conduct
from .ep import Ep
from .errors import ConductError, OrtStatusError
from .graph_view import GraphView
from .handles import HandleTable, address
from .hardware import discover_hardware
from .library import Factory, PluginLibrary
from .objects import EpDevice, HardwareDevice, KeyValuePairs, Status
from .session_options import SessionOptions
from .values import cpu_memory_info
from .versions import NEWEST_EMULATED, behaviour, parse_api_version


class Host:
    """An emulated ONNX Runtime host.

    Args:
        api_version: the ORT API to emulate (any of :data:`epabi.versions.EMULATED`; ``"1.24"``, ``"1.24.4"``
            and ``24`` all work); None means the newest epabi emulates. Versions below the plugin's minimum
            exist so that refusals can be tested.
        hardware: the hardware devices to offer plugins; None discovers them (CPU + NVIDIA GPUs from sysfs).
        env_config: environment config entries (``OrtEnvCreationOptions::config_entries``), read by plugins
            through ``OrtEpApi::GetEnvConfigEntries``.

    Raises:
        ValueError: api_version is malformed or outside the emulated range.
    """

    def __init__(self, api_version: int | str | None = None, hardware: list[HardwareDevice] | None = None,
                 env_config: dict[str, str] | None = None) -> None:
        self.api_version = NEWEST_EMULATED if api_version is None else parse_api_version(api_version)
        #: How ONNX Runtime's core of this API version differs from other releases (the versions.py table).
        self.behaviour = behaviour(self.api_version)
        self.version_string = self.behaviour.release
        self.handles = HandleTable()
        self.conduct = Conduct()
        self.api_requests: list[int] = []
        self.env_config = dict(env_config or {})
        self._tls = threading.local()
        self._libraries: dict[str, PluginLibrary] = {}
        self._enumerating: Factory | None = None
        self._registering: str | None = None
        self._borrowed: set[int] = set()
        self.hardware = list(discover_hardware() if hardware is None else hardware)
        for hw in self.hardware:
            self.issue_hardware(hw)
        self.served = ServedApi(self, self.api_version)
        self.default_logger = Logger("epabi.plugin")
        self.default_logger.ptr = self.handles.issue(self.default_logger, "OrtLogger*")
        self._host_owned: set[int] = set()
        self.cpu_memory = cpu_memory_info()
        self.cpu_memory.ptr = self.handles.issue(self.cpu_memory, "OrtMemoryInfo*")
        self.cpu_memory.device_ptr = self.handles.issue(self.cpu_memory.device, "OrtMemoryDevice*")
        self.mark_host_owned(self.cpu_memory.ptr)

    # -- onnxruntime-style API -------------------------------------------------------------------------

    def register_execution_provider_library(self, registration_name: str, path: str | Path) -> None:
        """Loads a plugin EP library and lists its EP devices.

        A name ending in ``.virtual`` sets env config ``allow_virtual_devices=1`` for it, as ORT does.

        Raises:
            ValueError: the name is already registered.
            PluginLoadError: the file cannot be loaded or lacks a required export.
            OrtStatusError: the plugin refused (e.g. host older than its minimum).
            ConductError: the plugin broke the contract.
        """
        if not isinstance(registration_name, str) or not registration_name:
            raise ValueError(f"registration name {registration_name!r}: a non-empty string is required")
        if registration_name in self._libraries:
            raise ValueError(f"EP library is already registered under {registration_name}")
        library = PluginLibrary(self, registration_name, path)
        self._registering = registration_name
        try:
            library.load()
        finally:
            self._registering = None
        self._libraries[registration_name] = library

    def unregister_execution_provider_library(self, registration_name: str) -> None:
        """Closes the library's live sessions, releases its EP devices and factories and unloads it.

        Raises:
            ValueError: nothing is registered under that name.
            ConductError: the library leaked statuses (raised after everything was released).
        """
        library = self._libraries.pop(registration_name, None)
        if library is None:
            raise ValueError(f"Execution provider library: {registration_name} was not registered.")
        library.close()

    def get_ep_devices(self) -> list[EpDevice]:
        """EP devices of every registered library, in registration order."""
        return [d for lib in self._libraries.values() for f in lib.factories for d in f.ep_devices]

    @property
    def libraries(self) -> list[PluginLibrary]:
        """The registered plugin libraries, in registration order."""
        return list(self._libraries.values())

    def create_ep(self, session_options: SessionOptions) -> Ep:
        """Creates the plugin EP for ``session_options.provider_devices`` (what session creation does first).

        The caller owns the returned :class:`Ep` and must ``close()`` it (or use ``with``).

        Raises:
            ValueError: no provider devices were added, or they come from a library no longer registered.
            OrtStatusError, ConductError: as raised by the plugin's CreateEp and the checks after it.
        """
        devices = session_options.provider_devices
        if not devices:
            raise ValueError("create_ep: the session options select no EP devices (add_provider_for_devices)")
        factory = devices[0].factory
        if any(d.factory is not factory for d in devices) or factory.library.name not in self._libraries:
            raise ValueError("create_ep: the EP devices must come from one factory of a registered library")
        return Ep.create(factory, session_options)

    def close(self) -> None:
        """Unregisters every library (the first leak error, if any, is raised after all are released)."""
        errors: list[Exception] = []
        for name in list(self._libraries):
            try:
                self.unregister_execution_provider_library(name)
            except ConductError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def trace(self) -> list[str]:
        """The host-to-plugin calls so far, in order (``"OrtEp::GetCapability"``, ...); the most recent
        100,000 to 200,000 of them on a long-lived host."""
        return list(self.conduct.trace)

    # -- used by the library/EP wrappers and served functions ------------------------------------------

    @contextmanager
    def calling(self, library: PluginLibrary, where: str) -> Iterator[None]:
        stack = self._tls.__dict__.setdefault("stack", [])
        stack.append(library.name)
        try:
            with self.conduct.watch(where):
                yield
        finally:
            stack.pop()

    def calling_library(self) -> str:
        stack = getattr(self._tls, "stack", None)
        return stack[-1] if stack else "?"

    @contextmanager
    def enumerating(self, factory: Factory) -> Iterator[None]:
        self._enumerating = factory
        try:
            yield
        finally:
            self._enumerating = None

    def factory_for(self, ptr: Any) -> Factory | None:
        f = self._enumerating
        return f if f is not None and address(f.ptr) == address(ptr) else None

    def raise_status(self, ptr: Any, where: str) -> None:
        """Consumes a status the plugin returned: NULL is success, anything else raises."""
        if address(ptr) == 0:
            return
        status = self.handles.lookup(ptr, Status)
        if status is None:
            raise ConductError(f"{where} returned {hex(address(ptr))}, which is not an OrtStatus made by "
                               f"CreateStatus (or was already released)")
        self.handles.drop(ptr)
        raise OrtStatusError(status.code, status.message, where)

    def issue_hardware(self, hw: HardwareDevice) -> None:
        hw.ptr = self.handles.issue(hw, "OrtHardwareDevice*")
        hw.c_metadata.ptr = self.handles.issue(hw.c_metadata, "OrtKeyValuePairs*")
        self.adopt_borrowed(hw.c_metadata)

    def release_hardware(self, hw: HardwareDevice) -> None:
        self._borrowed.discard(address(hw.c_metadata.ptr))
        self.handles.drop(hw.c_metadata.ptr)
        self.handles.drop(hw.ptr)

    def adopt_borrowed(self, *kvps: KeyValuePairs) -> None:
        """Marks key-value pairs the host owns; the plugin may read them but never release them."""
        for kvp in kvps:
            if kvp.ptr == ffi.NULL:
                kvp.ptr = self.handles.issue(kvp, "OrtKeyValuePairs*")
            self._borrowed.add(address(kvp.ptr))

    def is_borrowed(self, kvp: KeyValuePairs) -> bool:
        return address(kvp.ptr) in self._borrowed

    def forget_ep_device(self, device: EpDevice) -> None:
        for kvp in (device.c_metadata, device.c_options):
            self._borrowed.discard(address(kvp.ptr))
            self.handles.drop(kvp.ptr)
        self.handles.drop(device.ptr)

    def mark_host_owned(self, ptr: Any) -> None:
        """The plugin may use this handle but never release it."""
        self._host_owned.add(address(ptr))

    def is_host_owned(self, ptr: Any) -> bool:
        return address(ptr) in self._host_owned

    def release_handle(self, ptr: Any) -> None:
        if address(ptr) != 0:
            self._host_owned.discard(address(ptr))
            self.handles.drop(ptr)

    def expose_graph(self, graph: GraphView) -> None:
        """Issues handles for a graph view and everything in it (nodes, values, attributes, type infos)."""
        graph.ptr = self.handles.issue(graph, "OrtGraph*")
        for node in graph.nodes:
            node.ptr = self.handles.issue(node, "OrtNode*")
            for attr in node.attributes:
                attr.ptr = self.handles.issue(attr, "OrtOpAttr*")
        for value in graph.values.values():
            value.ptr = self.handles.issue(value, "OrtValueInfo*")
            if value.type_info is not None:
                value.type_info.ptr = self.handles.issue(value.type_info, "OrtTypeInfo*")
                if value.type_info.tensor is not None:
                    tensor = value.type_info.tensor
                    tensor.ptr = self.handles.issue(tensor, "OrtTensorTypeAndShapeInfo*")
                    self.mark_host_owned(value.type_info.tensor.ptr)
                self.mark_host_owned(value.type_info.ptr)
            if value.initializer is not None:
                value.initializer.ptr = self.handles.issue(value.initializer, "OrtValue*")
                self.mark_host_owned(value.initializer.ptr)

    def unexpose_graph(self, graph: GraphView) -> None:
        for value in graph.values.values():
            if value.initializer is not None:
                self.release_handle(value.initializer.ptr)
            if value.type_info is not None:
                if value.type_info.tensor is not None:
                    self.release_handle(value.type_info.tensor.ptr)
                self.release_handle(value.type_info.ptr)
            self.release_handle(value.ptr)
        for node in graph.nodes:
            for attr in node.attributes:
                self.release_handle(attr.ptr)
            self.release_handle(node.ptr)
        self.release_handle(graph.ptr)

    def env_config_view(self) -> dict[str, str]:
        config = dict(self.env_config)
        if self._registering is not None and self._registering.endswith(".virtual"):
            config["allow_virtual_devices"] = "1"
        return config
