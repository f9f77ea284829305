"""``SessionOptions`` as in onnxruntime: config entries plus the EP devices chosen for the session.

Provider options given to :meth:`SessionOptions.add_provider_for_devices` reach the plugin's ``CreateEp`` the
way ONNX Runtime forwards them: as session config entries ``ep.<lower-cased EP name>.<key>``, after the
EP device's own ``ep_options``. Not thread-safe; build one per session.
"""

from __future__ import annotations

from typing import Any

from .objects import EpDevice
from .profiling import DEFAULT_PREFIX

#: onnxruntime 1.32.0's SessionOptions fields the host keeps without using them, with ORT's defaults (enums as
#: their numbers: ORT_SEQUENTIAL, DEFAULT order, ORT_ENABLE_ALL).
_ORT_FIELDS: dict[str, object] = {
    "enable_cpu_mem_arena": True, "enable_mem_pattern": True, "enable_mem_reuse": True, "execution_mode": 0,
    "execution_order": 0, "graph_optimization_level": 99, "inter_op_num_threads": 0, "intra_op_num_threads": 0,
    "log_severity_level": -1, "log_verbosity_level": 0, "logid": "", "optimized_model_filepath": "",
    "use_deterministic_compute": False, "use_per_session_threads": True}


class SessionOptions:
    """Session configuration (``add_session_config_entry``) and EP selection (``add_provider_for_devices``).

    onnxruntime's other fields (``intra_op_num_threads``, ``graph_optimization_level``, ``log_severity_level``,
    ...) exist with ORT's defaults and are kept, not used: the host's CPU fallback and logging have their own
    settings. Other attributes raise AttributeError, as on onnxruntime's binding (a misspelt field is not
    silently kept)."""

    __slots__ = ("config", "provider_devices", "provider_options", "provider_eps", "weightless_source",
                 "_enable_profiling", "_profile_file_prefix", *_ORT_FIELDS)

    def __init__(self) -> None:
        for name, default in _ORT_FIELDS.items():
            setattr(self, name, default)
        self.config: dict[str, str] = {}
        self.provider_devices: list[EpDevice] = []
        self.provider_options: dict[str, str] = {}
        #: The EP of each ``add_provider_for_devices`` call, in order (the host runs the last call's devices,
        #: and refuses a session whose EPs repeat, as ORT does).
        self.provider_eps: list[str] = []
        #: ``(const void*, length)`` the application set with ``SessionOptionsSetWeightlessSourceModelBuffer``
        #: (the host keeps the pointer, not a copy), read back by ``SessionOptionsGetWeightlessSourceModelBuffer``.
        self.weightless_source: tuple[Any, int] | None = None
        self._enable_profiling = False
        self._profile_file_prefix = DEFAULT_PREFIX

    @property
    def enable_profiling(self) -> bool:
        """Profile sessions made with these options (:mod:`epabi.profiling`); ``InferenceSession.end_profiling()``
        writes the file. Set as onnxruntime's binding (pybind11's bool) converts: None is False, a number (int,
        float, numpy scalar) its truth value; anything else (str, list, ...) raises TypeError."""
        return self._enable_profiling

    @enable_profiling.setter
    def enable_profiling(self, value: bool) -> None:
        if value is not None and not hasattr(type(value), "__bool__"):
            raise TypeError(f"enable_profiling must be a bool, not {type(value).__name__}")
        self._enable_profiling = bool(value)

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

    def add_provider_for_devices(self, devices: list[EpDevice], options: dict[str, str] | None = None) -> None:
        """Selects EP devices of one EP for this session, with provider options.

        As onnxruntime's binding, ``devices`` is a list or tuple of :class:`EpDevice` and ``options`` a dict of
        str to str (here it may be left out). Each call adds a provider, as in onnxruntime: session creation
        fails when one EP was added twice (see :attr:`provider_eps`).

        Raises:
            TypeError: devices or options of other types.
            ValueError: no devices, or devices of different EPs.
        """
        if not isinstance(devices, list | tuple) or not all(isinstance(d, EpDevice) for d in devices):
            raise TypeError(f"add_provider_for_devices: devices must be a list of EpDevice, not {devices!r}")
        if options is not None and (not isinstance(options, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in options.items())):
            raise TypeError(f"add_provider_for_devices: options must be a dict of str to str, not {options!r}")
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
            self.config[prefix + key] = value
            self.provider_options[key] = value
        self.provider_devices = devices
        self.provider_eps.append(devices[0].ep_name)
