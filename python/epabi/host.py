"""``Host``: an emulated ONNX Runtime environment of one API version that loads plugin EP libraries.

Names follow onnxruntime's Python API so one script runs on either::

    host = epabi.Host()                      # newest API epabi emulates; Host(api_version=24) for ORT 1.24
    host.register_execution_provider_library("epabi", epabi.get_library_path())
    devices = [d for d in host.get_ep_devices() if d.ep_name == epabi.get_ep_name()]

The host is as strict as ONNX Runtime: what ORT refuses raises :class:`OrtStatusError` with ORT's code, plugin
misconduct ORT would crash on raises :class:`ConductError`, and deviations ORT tolerates (zero factories, claims
that would form a cycle, a leaked status, ...) go to the conduct report (:meth:`Host.conduct_report`) with a
logged warning while the host proceeds as ORT does; ``Host(strict=True)`` raises those too, for EP authors.
Plugin log messages go to ``logging`` ("epabi.plugin" for the default logger, "epabi.session.<EP>" for session
loggers).

Any number of hosts may live in one process, in sequence or at once, like repeated ORT environments would
if ORT allowed them: they share the process's served API tables, default logger and handle table, which
outlive every host (plugins keep what the first host gave them). Not thread-safe for registration; served
callbacks are.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import call_context
from ._ffi import ffi
from .api_table import Logger, served_api
from .conduct import Conduct
from .ep import Ep
from .errors import ConductError, HostLimitationError, OrtErrorCode, OrtStatusError
from .graph_view import GraphView
from .handles import PROCESS_HANDLES, HostHandles, address
from .hardware import discover_hardware
from .host_allocators import ort_memory_info_layout
from .library import Factory, PluginLibrary
from .objects import EpDevice, HardwareDevice, KeyValuePairs, Status
from .session_options import SessionOptions
from .values import cpu_memory_info
from .versions import NEWEST_EMULATED, behaviour, parse_api_version

_host_ids = itertools.count(1)
_process_lock = threading.Lock()
_process_objects: dict[str, Any] = {}


def _process_object(name: str) -> Any:
    """The process-wide default logger ("logger") and CPU memory info ("cpu_memory"): made once, never
    released, as ORT's live as long as its process (plugins keep the logger CreateEpFactories gave them). The
    memory info is laid out as ORT's C++ ``OrtMemoryInfo`` (:mod:`epabi.host_allocators`): it is the ``Info`` of
    the default allocator, which plugins built from ORT's sources may read as that struct."""
    with _process_lock:
        if not _process_objects:
            logger = Logger("epabi.plugin")
            logger.ptr = PROCESS_HANDLES.issue(logger, "OrtLogger*")
            memory = cpu_memory_info()
            layout = ort_memory_info_layout(memory)
            memory.ptr = PROCESS_HANDLES.issue(memory, "OrtMemoryInfo*", cell=layout[0])
            _process_objects["cpu_memory_layout"] = layout  # the name bytes the layout may point at
            memory.device_ptr = PROCESS_HANDLES.issue(memory.device, "OrtMemoryDevice*")
            PROCESS_HANDLES.set_flags(memory.ptr, host_owned=True)
            PROCESS_HANDLES.set_flags(memory.device_ptr, host_owned=True)
            _process_objects.update(logger=logger, cpu_memory=memory)
        return _process_objects[name]


def _env_config(config: dict[str, str] | None) -> dict[str, str]:
    """A copy of ``Host(env_config=...)``, checked: the entries become C strings for ``GetEnvConfigEntries``."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise TypeError(f"env_config must be a dict of str to str, not {type(config).__name__}")
    for key, value in config.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"env_config entry {key!r}: {value!r}: keys and values must be str")
        if "\0" in key or "\0" in value:
            raise ValueError(f"env_config entry {key!r}: {value!r}: a C string cannot hold a NUL character")
    return dict(config)


class Host:
    """An emulated ONNX Runtime host.

    Args:
        api_version: the ORT API to emulate (any of :data:`epabi.versions.EMULATED`; ``"1.24"``, ``"1.24.4"``
            and ``24`` all work; a patch release must be the emulated one, :data:`epabi.RELEASES`, so
            ``"1.24.9"`` is refused); None means the newest epabi emulates. Versions below the plugin's minimum
            exist so that refusals can be tested.
        hardware: the hardware devices to offer plugins; None discovers them (CPU + NVIDIA GPUs from sysfs).
        env_config: environment config entries (``OrtEnvCreationOptions::config_entries``), read by plugins
            through ``OrtEpApi::GetEnvConfigEntries``; ``ep_factory.<EP name>.<key>`` entries are process-wide
            EP options by ORT's convention (``{"ep_factory.EpAbiExecutionProvider.enable_cuda_graph": "1"}``
            is a default below every session's provider options).
        strict: raise :class:`ConductError` also for deviations ONNX Runtime tolerates (see the module
            docstring); False (default) reports them in :meth:`conduct_report` and proceeds as ORT does.

    Raises:
        UnknownReleaseError: (a ValueError) api_version is malformed, a patch release epabi does not emulate, or
            outside the emulated range.
        ValueError: an env_config string holds a NUL.
        TypeError: env_config is not a dict of str to str; a hardware entry is not a HardwareDevice.
    """

    def __init__(self, api_version: int | str | None = None, hardware: list[HardwareDevice] | None = None,
                 env_config: dict[str, str] | None = None, strict: bool = False) -> None:
        self.api_version = NEWEST_EMULATED if api_version is None else parse_api_version(api_version)
        #: How ONNX Runtime's core of this API version differs from other releases (the versions.py table).
        self.behaviour = behaviour(self.api_version)
        self.version_string = self.behaviour.release
        self.id = next(_host_ids)
        self.strict = strict
        self.handles = HostHandles(self.id)
        self.conduct = Conduct(strict)
        self.api_requests: list[int] = []
        #: Names plugins asked ``GetExperimentalFunction`` for (epabi answers NULL to every one).
        self.experimental_requests: list[str] = []
        self.env_config = _env_config(env_config)
        self._libraries: dict[str, PluginLibrary] = {}
        self._enumerating: Factory | None = None
        self._registering: str | None = None
        self.hardware = list(discover_hardware() if hardware is None else hardware)
        wrong = [hw for hw in self.hardware if not isinstance(hw, HardwareDevice)]
        if wrong:
            raise TypeError(f"hardware: {wrong[0]!r} is not a HardwareDevice (make one with epabi.cpu_device() or "
                            "epabi.hardware.parse_hardware('cpu:intel'))")
        self._hardware_issued = False
        self._issue_host_hardware()
        #: The process's tables for this API version (shared with every host of that version).
        self.served = served_api(self.api_version)
        #: The process's default logger, handed to every ``CreateEpFactories``.
        self.default_logger: Logger = _process_object("logger")
        #: The process's CPU memory info ("Cpu"), as ``GetTensorMemoryInfo`` reports host memory.
        self.cpu_memory = _process_object("cpu_memory")
        # A host dropped without close() still releases its handles (its libraries stay loaded, as ORT's would).
        weakref.finalize(self, PROCESS_HANDLES.drop_owner_later, self.id)

    def _issue_host_hardware(self) -> None:
        if not self._hardware_issued:
            for hw in self.hardware:
                self.issue_hardware(hw)
            self._hardware_issued = True

    # -- onnxruntime-style API -------------------------------------------------------------------------

    def register_execution_provider_library(self, registration_name: str, path: str | Path) -> None:
        """Loads a plugin EP library and lists its EP devices.

        A name ending in ``.virtual`` sets env config ``allow_virtual_devices=1`` for it, as ORT does.

        Raises:
            TypeError: the name is not a str.
            ValueError: the name is already registered.
            PluginLoadError: the file cannot be loaded or lacks a required export.
            OrtStatusError: the plugin refused (e.g. host older than its minimum).
            ConductError: the plugin broke the contract.
        """
        if not isinstance(registration_name, str):  # "" is a name, as in onnxruntime 1.24.4 and 1.32.0
            raise TypeError(f"registration name {registration_name!r}: a str is required")
        if registration_name in self._libraries:
            raise ValueError(f"EP library is already registered under {registration_name}")
        self._issue_host_hardware()
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
            OrtStatusError: FAIL when one EP was added twice (as ORT); as raised by the plugin's CreateEp.
            HostLimitationError: several plugin EPs were added (the host runs one per session).
            ConductError: as raised by the checks after CreateEp.
        """
        devices = session_options.provider_devices
        if not devices:
            raise ValueError("create_ep: the session options select no EP devices (add_provider_for_devices)")
        repeated = next((n for i, n in enumerate(session_options.provider_eps) if n in
                         session_options.provider_eps[:i]), None)
        if repeated is not None:  # ORT's ExecutionProviders::Add refuses the second registration
            raise OrtStatusError(OrtErrorCode.FAIL, f"Provider {repeated} has already been registered.")
        if len(session_options.provider_eps) > 1:
            raise HostLimitationError(f"the session options add several plugin EPs ({session_options.provider_eps}); "
                                      "epabi's host runs one plugin EP per session")
        factory = devices[0].factory
        # by identity: devices kept from an unregistered library name a released factory even when that name is
        # registered again (CreateEp on it would call into freed memory)
        if any(d.factory is not factory for d in devices) or \
                self._libraries.get(factory.library.name) is not factory.library:
            raise ValueError("create_ep: the EP devices must come from one factory of a registered library (devices "
                             "of an unregistered library stay invalid after it is registered again: take them anew "
                             "from get_ep_devices())")
        return Ep.create(factory, session_options)

    def close(self) -> None:
        """Unregisters every library and releases the host's own handles (hardware devices, ...): a plugin that
        still uses them afterwards gets an error status and a conduct report. The host may register libraries
        again later. Raises the first ConductError of an unregistration (a strict host's leak report) after all
        are released."""
        errors: list[Exception] = []
        for name in list(self._libraries):
            try:
                self.unregister_execution_provider_library(name)
            except ConductError as exc:
                errors.append(exc)
        PROCESS_HANDLES.drop_owner(self.id)
        for hw in self.hardware:
            hw.ptr = hw.c_metadata.ptr = ffi.NULL
        self._hardware_issued = False
        if errors:
            raise errors[0]

    def conduct_report(self) -> list[tuple[str, str]]:
        """What the plugins did that the host noticed: ``(kind, message)`` pairs, kind "violation" (raised as
        ConductError), "tolerated" (accepted as ONNX Runtime accepts it, with a logged warning), "limitation"
        (a function epabi does not serve) or "internal"."""
        return self.conduct.report()

    def tolerate(self, message: str) -> None:
        """Reports a deviation ONNX Runtime accepts: a warning in the conduct report, or ConductError when
        strict."""
        self.conduct.tolerate(message)

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
        """A call into ``library``'s code: served functions work for this host meanwhile; what they record is
        raised after it (:meth:`Conduct.watch`)."""
        with call_context.calling(self, library.name), self.conduct.watch(where):
            yield

    def calling_library(self) -> str:
        """Registration name of the library being called on this thread ("?" when none)."""
        return call_context.current_library()

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
                               f"CreateStatus: it {self.handles.explain(ptr, Status)}")
        self.handles.drop(ptr)
        raise OrtStatusError(status.code, status.message, where)

    def issue_hardware(self, hw: HardwareDevice, for_plugin: bool = False) -> None:
        """Handles for a hardware device and its metadata: the host's own, or (``for_plugin``) one the plugin
        made with CreateHardwareDevice, which lives until the plugin releases it."""
        issue = self.handles.issue_for_plugin if for_plugin else self.handles.issue
        hw.ptr = issue(hw, "OrtHardwareDevice*")
        hw.c_metadata.ptr = issue(hw.c_metadata, "OrtKeyValuePairs*")
        self.adopt_borrowed(hw.c_metadata)

    def release_hardware(self, hw: HardwareDevice) -> None:
        self.handles.drop(hw.c_metadata.ptr)
        self.handles.drop(hw.ptr)

    def adopt_borrowed(self, *kvps: KeyValuePairs) -> None:
        """Marks key-value pairs the host owns; the plugin may read them but never release them."""
        for kvp in kvps:
            if kvp.ptr == ffi.NULL:
                kvp.ptr = self.handles.issue(kvp, "OrtKeyValuePairs*")
            PROCESS_HANDLES.set_flags(kvp.ptr, borrowed=True)

    def is_borrowed(self, kvp: KeyValuePairs) -> bool:
        return PROCESS_HANDLES.flags(kvp.ptr)[1]

    def forget_ep_device(self, device: EpDevice) -> None:
        for kvp in (device.c_metadata, device.c_options):
            self.handles.drop(kvp.ptr)
        self.handles.drop(device.ptr)

    def mark_host_owned(self, ptr: Any) -> None:
        """The plugin may use this handle but never release it."""
        PROCESS_HANDLES.set_flags(ptr, host_owned=True)

    def is_host_owned(self, ptr: Any) -> bool:
        return PROCESS_HANDLES.flags(ptr)[0]

    def release_handle(self, ptr: Any) -> None:
        if address(ptr) != 0:
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
