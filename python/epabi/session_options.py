"""``SessionOptions`` as in onnxruntime: config entries plus the EP devices chosen for the session.

Provider options given to :meth:`SessionOptions.add_provider_for_devices` reach the plugin's ``CreateEp`` the
way ONNX Runtime forwards them: as session config entries ``ep.<lower-cased EP name>.<key>``, after the
EP device's own ``ep_options``. Not thread-safe; build one per session.
"""

from __future__ import annotations

from typing import Any

from .objects import EpDevice
from .option_fields import (
    BoolField,
    EnumField,
    ExecutionMode,
    ExecutionOrder,
    GraphOptimizationLevel,
    IntField,
    StrField,
    config_entry,
)
from .profiling import DEFAULT_PREFIX

#: onnxruntime 1.32.0's defaults of the SessionOptions fields (the same on 1.24.4).
_DEFAULTS: dict[str, object] = {
    "enable_cpu_mem_arena": True, "enable_mem_pattern": True, "enable_mem_reuse": True, "enable_profiling": False,
    "execution_mode": ExecutionMode.ORT_SEQUENTIAL, "execution_order": ExecutionOrder.DEFAULT,
    "graph_optimization_level": GraphOptimizationLevel.ORT_ENABLE_ALL, "inter_op_num_threads": 0,
    "intra_op_num_threads": 0, "log_severity_level": -1, "log_verbosity_level": 0, "logid": "",
    "optimized_model_filepath": "", "profile_file_prefix": DEFAULT_PREFIX, "use_deterministic_compute": False,
    "use_per_session_threads": True}


class SessionOptions:
    """Session configuration (``add_session_config_entry``) and EP selection (``add_provider_for_devices``).

    onnxruntime's other fields (``intra_op_num_threads``, ``graph_optimization_level``, ``log_severity_level``,
    ...) exist with ORT's defaults (1.32.0) and are kept, not used: the host's CPU fallback and logging have their
    own settings. Each takes the types onnxruntime's binding converts and raises TypeError for others
    (:mod:`epabi.option_fields`: ``so.intra_op_num_threads = "2"`` and ``so.graph_optimization_level = 3`` fail;
    enums are :class:`epabi.GraphOptimizationLevel`, :class:`epabi.ExecutionMode`, :class:`epabi.ExecutionOrder`).
    Other attributes raise AttributeError, as on onnxruntime's binding (a misspelt field is not silently kept)."""

    enable_cpu_mem_arena = BoolField()
    enable_mem_pattern = BoolField()
    enable_mem_reuse = BoolField()
    #: Profile sessions made with these options (:mod:`epabi.profiling`); ``InferenceSession.end_profiling()``
    #: writes the file.
    enable_profiling = BoolField()
    execution_mode = EnumField(ExecutionMode)
    execution_order = EnumField(ExecutionOrder)
    graph_optimization_level = EnumField(GraphOptimizationLevel)
    inter_op_num_threads = IntField()
    intra_op_num_threads = IntField()
    log_severity_level = IntField()
    log_verbosity_level = IntField()
    logid = StrField()
    optimized_model_filepath = StrField()
    #: The profile file's name up to ``_<time>.json`` (default ``onnxruntime_profile_``, in the working directory).
    profile_file_prefix = StrField()
    use_deterministic_compute = BoolField()
    use_per_session_threads = BoolField()

    __slots__ = ("config", "provider_devices", "provider_options", "provider_eps", "weightless_source",
                 *(f"_{name}" for name in _DEFAULTS))

    def __init__(self) -> None:
        for name, default in _DEFAULTS.items():
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

    def copy_without_providers(self) -> SessionOptions:
        """A copy of these options (fields and config entries) without their EP selection: what a session made
        with ``providers=[...]`` starts from (``InferenceSession``, ``set_providers``; epabi's, not in onnxruntime,
        which ignores the selection of the same object). The config entries stay, ``ep.<ep name>.<key>`` too."""
        copy = SessionOptions()
        for name in _DEFAULTS:
            setattr(copy, "_" + name, getattr(self, "_" + name))
        copy.config = dict(self.config)
        copy.weightless_source = self.weightless_source
        return copy

    def add_session_config_entry(self, key: str, value: str) -> None:
        """Sets one config entry (``session.compile_only``, ``ep.epabiexecutionprovider.enable_cuda_graph``, ...).

        Raises:
            TypeError: key or value is not a str.
        """
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"session config entry {key!r}={value!r}: key and value must be str")
        self.config[key] = value

    def get_session_config_entry(self, key: str) -> str:
        """The value of one config entry.

        Raises:
            ConfigEntryNotFoundError: (a RuntimeError) no such entry, with onnxruntime's message
                ("SessionOptions does not have configuration with key: KEY", 1.24.4 and 1.32.0).
            TypeError: key is not a str.
        """
        return config_entry(self.config, key, "SessionOptions", "get_session_config_entry")

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
