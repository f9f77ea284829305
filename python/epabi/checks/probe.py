"""One API version's run of ``epabi check``: a host of that version with the library registered, the factory and
EP device under check, and helpers that make EPs and sessions on it as ONNX Runtime would.

A check is a function of a :class:`Probe` that returns what passed (one line) or raises :class:`CheckFailed` /
:class:`CheckSkipped` with the reason. Not thread-safe (one probe per version, used by one thread).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx

from .._ffi import ffi
from ..cmd_common import no_device_hint, one_line
from ..errors import ConductError, HostLimitationError, OrtStatusError, PluginLoadError
from ..hardware import discover_hardware
from ..host import Host
from ..objects import EpDevice, OrtHardwareDeviceType
from ..session import InferenceSession
from ..session_options import SessionOptions
from ..versions import RELEASES
from .findings import Findings
from .tables import member_states, set_beyond_host

if TYPE_CHECKING:
    from ..ep import Ep
    from ..library import Factory
    from .spec import CheckSpec


#: The status ONNX Runtime 1.31+ (and epabi's host) make when CreateEpFactories reports too many factories.
_HOST_REFUSAL = "factories but the supplied capacity was"
#: The registration error ``required_functions`` reports.
_REQUIRED_NULL = "required OrtEpFactory members are NULL"


class CheckFailed(Exception):
    """The check found the plugin at fault; the message is the reason."""


class CheckSkipped(Exception):
    """The check cannot run here (an older API, a feature the EP does not use, an earlier failure)."""


def mapped(path: str) -> bool:
    """Whether this process maps the file ``path`` (Linux ``/proc/self/maps``; False where there is none)."""
    maps = Path("/proc/self/maps")
    if not maps.exists():
        return False
    real = os.path.realpath(path)
    return any(line.endswith(real) for line in maps.read_text().splitlines())


class Probe:
    """The host of one API version and what registering the library gave it.

    After :meth:`open`: ``registered`` says whether registration succeeded; ``blocked`` says why no EP-level
    check can run (None when they can); ``factory``/``device`` are the factory and EP device under check;
    ``first_ep`` holds what the first ``CreateEp`` returned (name, declared version, members) or
    ``ep_error`` why it failed. :meth:`close` unregisters and records what the host noticed in ``findings``.
    """

    def __init__(self, spec: CheckSpec, api: int) -> None:
        self.spec = spec
        self.api = api
        self.findings = Findings()
        self.host: Host | None = None
        self.factory: Factory | None = None
        self.device: EpDevice | None = None
        self.registered = False
        self.registration_error: str | None = None
        self.load_error: str | None = None
        self.blocked: str | None = None
        self.first_ep: dict[str, Any] = {}
        self.ep_error: str | None = None
        self.ep_error_conduct = False
        self.factory_names: list[str] = []
        self.info: dict[str, Any] = {}
        self.mapped_after_close: bool | None = None
        self.allocator_versions: dict[str, int] = {}
        self.data_transfer_version: int | None = None
        self.factory_states: dict[str, str] = {}
        self.factory_beyond_host: list[str] = []
        #: Probe models the EP took whole (``model_matches_cpu``), for the graph-capture checks.
        self.whole_models: list[tuple[str, onnx.ModelProto]] = []
        #: Shared state of checks (the graph-capture session), by name; closed before the host.
        self.shared: dict[str, Any] = {}

    @property
    def label(self) -> str:
        return f"API {self.api} ({RELEASES[self.api]})"

    # -- registration -------------------------------------------------------------------------------

    def open(self) -> None:
        """Creates the host and registers the library; never raises for what the plugin does."""
        spec = self.spec
        hardware = discover_hardware() if spec.hardware is None else list(spec.hardware)
        self.host = Host(api_version=self.api, hardware=hardware)
        try:
            self.host.register_execution_provider_library(spec.name, spec.library)
            self.registered = True
        except PluginLoadError as exc:
            self.load_error = self.registration_error = one_line(exc)
            self.blocked = f"the library did not load: {self.load_error}"
        except OrtStatusError as exc:
            self.registration_error = one_line(exc)
            if _HOST_REFUSAL in exc.message:  # ORT's own refusal of what the plugin did
                self.findings.add("violation", str(exc))
                self.blocked = f"registration failed: {self.registration_error}"
            else:  # the plugin refused this host, as it may
                self.blocked = f"the plugin refuses {self.label}: {self.registration_error}"
        except ConductError as exc:  # conduct_report fails with it, unless an ORT check names it
            self.findings.add("raised" if _REQUIRED_NULL in str(exc) else "violation", str(exc))
            self.registration_error = one_line(exc)
            self.blocked = f"registration failed: {self.registration_error}"
        except HostLimitationError as exc:
            self.registration_error = one_line(exc)
            self.blocked = f"epabi host limitation during registration: {self.registration_error}"
        self.info["api_requested"] = list(self.host.api_requests)
        if not self.registered:
            self.info["registration_error"] = self.registration_error
            return
        factories = [f for lib in self.host.libraries for f in lib.factories]
        self.factory_names = [f.name for f in factories]
        self.info["factories"] = [{"name": f.name, "vendor": f.vendor, "version": f.plugin_version,
                                   "ort_version_supported": f.version, "ep_devices": len(f.ep_devices)}
                                  for f in factories]
        if not factories:
            self.blocked = f"the library created no EP factory for {self.label} (it may need a newer API)"
            return
        wanted = spec.ep
        chosen = [f for f in factories if wanted is None or f.name == wanted
                  or any(d.ep_name == wanted for d in f.ep_devices)]
        if not chosen:
            self.blocked = (f"no factory is named {wanted!r} at {self.label} (factories: "
                            f"{', '.join(self.factory_names)})")
            return
        self.factory = chosen[0]
        devices = [d for d in self.factory.ep_devices if wanted is None or d.ep_name == wanted] or \
            self.factory.ep_devices
        self.info["ep_name"] = self.factory.name
        transfer = self.factory.data_transfer
        self.data_transfer_version = None if transfer == ffi.NULL else int(transfer.ort_version_supported)
        self.factory_states = member_states("OrtEpFactory", self.factory.ptr, self.api)
        self.factory_beyond_host = set_beyond_host("OrtEpFactory", self.factory.ptr, self.api)
        if not devices:
            offered = ", ".join(f"{hw.type.name} {hw.vendor} ({hw.vendor_id:#06x})" for hw in hardware) or "none"
            hint = no_device_hint(spec.library, [self.factory.name], hardware)
            self.blocked = f"{self.factory.name} lists no EP device for the hardware offered ({offered}); {hint}"
            return
        self.device = devices[0]
        hw = self.device.device
        self.info["ep_device"] = f"{OrtHardwareDeviceType(hw.type).name} {hw.vendor} ({hw.vendor_id:#06x})"
        self._first_ep()

    def _first_ep(self) -> None:
        try:
            with self.ep() as ep:
                self.first_ep = {"name": ep.name, "ort_version_supported": int(ep.ptr.ort_version_supported),
                                 "members": sorted(ep.members),
                                 "states": member_states("OrtEp", ep.ptr, self.api),
                                 "beyond_host": set_beyond_host("OrtEp", ep.ptr, self.api)}
        except ConductError as exc:
            self.findings.add_raised(exc)
            self.ep_error, self.ep_error_conduct = one_line(exc), True
        except OrtStatusError as exc:  # may be the host's refusal of the OrtEp's declared version
            self.findings.add_raised(exc)
            self.ep_error = one_line(exc)
        except HostLimitationError as exc:
            self.ep_error = one_line(exc)
        if self.ep_error is not None:
            self.info["ep_error"] = self.ep_error
        else:
            self.info["ep"] = {k: v for k, v in self.first_ep.items() if k in ("name", "ort_version_supported")}

    # -- EPs and sessions ---------------------------------------------------------------------------

    def require_ep(self) -> None:
        """Raises CheckSkipped when no EP can be made here (registration, device or CreateEp failed)."""
        if self.blocked is not None:
            raise CheckSkipped(self.blocked)
        if self.ep_error is not None:
            raise CheckSkipped(f"CreateEp failed (see ep_created): {self.ep_error}")

    def session_options(self, extra: dict[str, str] | None = None) -> SessionOptions:
        """Session options selecting the EP device under check, with ``ep_options`` and ``extra``."""
        if self.device is None:
            raise CheckSkipped(self.blocked or "no EP device")
        options = SessionOptions()
        options.add_provider_for_devices([self.device], {**self.spec.ep_options, **(extra or {})})
        return options

    @contextmanager
    def ep(self, extra: dict[str, str] | None = None) -> Iterator[Ep]:
        """A fresh OrtEp on the EP device (``CreateEp``), released (``ReleaseEp``) afterwards."""
        assert self.host is not None
        ep = self.host.create_ep(self.session_options(extra))
        try:
            yield ep
        finally:
            ep.close()

    def session(self, model: onnx.ModelProto | str, extra: dict[str, str] | None = None) -> InferenceSession:
        """An :class:`InferenceSession` of ``model`` on the EP device (the caller closes it)."""
        return InferenceSession(model, self.session_options(extra), host=self.host)

    def record(self, exc: BaseException) -> None:
        """Files an error a check's call raised with the findings (for the conduct checks)."""
        if isinstance(exc, ConductError):
            self.findings.add_raised(exc)

    # -- the end --------------------------------------------------------------------------------------

    def close(self) -> None:
        """Unregisters the library (ReleaseEpFactory, dlclose) and collects the host's conduct report."""
        host = self.host
        if host is None:
            return
        for name, value in list(self.shared.items()):
            close = getattr(value, "close", None)
            if close is not None:
                try:
                    close()
                except (ConductError, OrtStatusError, HostLimitationError) as exc:
                    self.record(exc)
            del self.shared[name]
        try:
            host.close()
        except ConductError as exc:
            self.findings.add_raised(exc)
        self.findings.add_report(host.conduct_report())
        self.info["api_requested"] = list(host.api_requests)
        if self.load_error is None:
            self.mapped_after_close = mapped(self.spec.library)


def device_label(device: EpDevice) -> str:
    hw = device.device
    return f"{device.ep_name} on {OrtHardwareDeviceType(hw.type).name} {hw.vendor} ({hw.vendor_id:#06x})"
