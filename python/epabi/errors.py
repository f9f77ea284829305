"""Exceptions raised by the epabi host.

- :class:`OrtStatusError` - a plugin (or the host on its behalf) returned a non-NULL ``OrtStatus``.
- :class:`StaleReplayError` - (an ``OrtStatusError``) a run would replay a captured graph whose bindings changed.
- :class:`ConductError` - the plugin broke the plugin-EP contract (NULL required member, version 0,
  unknown or leaked handle, a call to an API above the emulated host's version, ...).
- :class:`PluginLoadError` - the library could not be loaded or lacks a required export.
- :class:`HostLimitationError` - the plugin called an ``OrtApi`` function this host does not emulate.
- :class:`ConfigEntryNotFoundError` - (a ``RuntimeError``) a session or run config entry asked for is absent.
- :class:`UnknownProviderError` - (a ``RuntimeError``) ``providers`` names an EP the host cannot select.
- :class:`UnknownReleaseError` - (a ``ValueError``) a host version names no ONNX Runtime release epabi emulates.
- :class:`CheckArgumentError` - ``epabi.check`` / ``epabi check`` was given arguments it cannot work with.
"""

from __future__ import annotations

from ._ffi import header_enum

OrtErrorCode = header_enum("OrtErrorCode", "``OrtErrorCode`` values (ort_abi.h): OK, FAIL, INVALID_ARGUMENT, ...",
                           prefix="ORT_")


class OrtStatusError(RuntimeError):
    """A failed ``OrtStatus``: ``.code`` (:class:`OrtErrorCode`), ``.message`` (str), ``.where`` (the call)."""

    def __init__(self, code: int, message: str, where: str = "") -> None:
        try:
            self.code: OrtErrorCode | int = OrtErrorCode(code)
            name = self.code.name
        except ValueError:
            self.code = code
            name = str(code)
        self.message = message
        self.where = where
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}[{name}] {message}")


class StaleReplayError(OrtStatusError):
    """A run of a captured annotation id whose bound inputs or outputs differ from the capturing run's
    (epabi's host refuses the replay; ONNX Runtime replays on the captured addresses and shapes regardless).

    ``.code`` is INVALID_ARGUMENT; ``.graph_id`` the annotation id; ``.changes`` one
    ``(value, what, captured, now)`` tuple per difference, e.g. ``("input 'x'", "address", "0x7f..", "0x7e..")``
    (``what``: "address", "shape", "dtype", "value"; unbound outputs show ``None`` as their address).
    """

    def __init__(self, graph_id: int, changes: list[tuple[str, str, object, object]], message: str) -> None:
        self.graph_id = graph_id
        self.changes = changes
        super().__init__(OrtErrorCode.INVALID_ARGUMENT, message)


class ConductError(RuntimeError):
    """The plugin violated the plugin-EP contract; the message says what and where."""


class PluginLoadError(OSError):
    """The plugin library could not be loaded, or lacks ``CreateEpFactories``/``ReleaseEpFactory``."""


class HostLimitationError(NotImplementedError):
    """The plugin needs an ``OrtApi``/``OrtEpApi`` function this emulated host does not provide."""


class CheckArgumentError(ValueError):
    """``epabi.check`` cannot start or finish on these arguments: no such library file, a malformed or empty
    ``--versions`` range, a bad option, or an EP name that no factory of the library has at any checked version."""


class ConfigEntryNotFoundError(RuntimeError):
    """``get_session_config_entry`` / ``get_run_config_entry`` of a key that was never set; a RuntimeError with
    onnxruntime's message, as its binding raises (1.24.4 and 1.32.0)."""


class UnknownReleaseError(ValueError):
    """A host version (``Host(api_version=...)``, ``--host-version``) that is not one epabi emulates: ``.value``
    is what was given, ``.known`` the releases there are (``"1.24.4"``, ...)."""

    def __init__(self, value: object, known: tuple[str, ...], message: str) -> None:
        self.value = value
        self.known = known
        super().__init__(message)


class UnknownProviderError(RuntimeError):
    """``InferenceSession(providers=[...])`` / ``set_providers`` naming an EP that is neither the CPU nor a plugin
    EP the host can select by name; a RuntimeError with onnxruntime's message ("Unknown Provider Type: NAME")."""
