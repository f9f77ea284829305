"""``SessionOptions`` as in onnxruntime: config entries plus the EP devices chosen for the session.

Provider options given to :meth:`SessionOptions.add_provider_for_devices` reach the plugin's ``CreateEp`` the
way ONNX Runtime forwards them: as session config entries ``ep.<lower-cased EP name>.<key>``, after the
EP device's own ``ep_options``. Not thread-safe; build one per session.
"""

from __future__ import annotations

from typing import Any

from .objects import EpDevice
from .profiling import DEFAULT_PREFIX


class SessionOptions:
    """Session configuration (``add_session_config_entry``) and EP selection (``add_provider_for_devices``)."""

    def __init__(self) -> None:
        self.config: dict[str, str] = {}
        self.provider_devices: list[EpDevice] = []
        self.provider_options: dict[str, str] = {}
        #: ``(const void*, length)`` the application set with ``SessionOptionsSetWeightlessSourceModelBuffer``
        #: (the host keeps the pointer, not a copy), read back by ``SessionOptionsGetWeightlessSourceModelBuffer``.
        self.weightless_source: tuple[Any, int] | None = None
        self._enable_profiling = False
        self._profile_file_prefix = DEFAULT_PREFIX

    @property
    def enable_profiling(self) -> bool:
        """Profile sessions made with these options (:mod:`epabi.profiling`); ``InferenceSession.end_profiling()``
        writes the file. Raises TypeError when set to anything but a bool, as onnxruntime's binding."""
        return self._enable_profiling

    @enable_profiling.setter
    def enable_profiling(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"enable_profiling must be a bool, not {type(value).__name__}")
        self._enable_profiling = value

    @property
    def profile_file_prefix(self) -> str:
        """The profile file's name up to ``_<time>.json`` (default ``onnxruntime_profile_``, in the working
        directory). Raises TypeError when set to anything but a str."""
        return self._profile_file_prefix

    @profile_file_prefix.setter
    def profile_file_prefix(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"profile_file_prefix must be a str, not {type(value).__name__}")
        self._profile_file_prefix = value

    def add_session_config_entry(self, key: str, value: str) -> None:
        """Sets one config entry (``session.compile_only``, ``ep.epabiexecutionprovider.enable_cuda_graph``, ...).

        Raises:
            TypeError: key or value is not a str.
        """
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"session config entry {key!r}={value!r}: key and value must be str")
        self.config[key] = value

    def get_session_config_entry(self, key: str) -> str:
        """The value of one config entry. Raises KeyError when absent."""
        return self.config[key]

    def add_provider_for_devices(self, devices: list[EpDevice], options: dict[str, Any] | None = None) -> None:
        """Selects EP devices of one EP for this session, with provider options (values converted with str).

        Raises:
            ValueError: no devices, or devices of different EPs.
        """
        devices = list(devices)
        if not devices:
            raise ValueError("add_provider_for_devices: no EP devices given")
        names = {d.ep_name for d in devices}
        if len(names) != 1:
            raise ValueError(f"add_provider_for_devices: devices belong to several EPs {sorted(names)}; pick one")
        prefix = f"ep.{devices[0].ep_name.lower()}."
        for device in devices:
            for key, value in device.ep_options.items():
                self.config.setdefault(prefix + key, value)
        for key, value in (options or {}).items():
            self.config[prefix + key] = str(value)
            self.provider_options[key] = str(value)
        self.provider_devices = devices
