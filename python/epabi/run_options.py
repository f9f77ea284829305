"""``RunOptions`` as in onnxruntime: per-run config entries (``gpu_graph_id``, ...)."""

from __future__ import annotations

from typing import Any

from ._ffi import ffi
from .option_fields import BoolField, IntField, StrField, config_entry


class RunOptions:
    """Per-run configuration, read by the plugin through ``OrtApi::GetRunConfigEntry``. Not thread-safe, except
    ``terminate``, which another thread may set during a run.

    onnxruntime's fields, with its defaults: ``terminate`` (True fails a run before its next node, FAIL "Exiting
    due to terminate flag being set to true.", as ORT's executor), ``log_severity_level``, ``log_verbosity_level``,
    ``logid``, ``only_execute_path_to_fetches`` (kept, not used by the host), each taking the types onnxruntime's
    binding converts and raising TypeError for others (:mod:`epabi.option_fields`). Other attributes raise
    AttributeError, as on onnxruntime's binding.
    """

    terminate = BoolField()
    log_severity_level = IntField()
    log_verbosity_level = IntField()
    logid = StrField()
    only_execute_path_to_fetches = BoolField()

    __slots__ = ("config", "_c_values", "ptr", "_terminate", "_log_severity_level", "_log_verbosity_level",
                 "_logid", "_only_execute_path_to_fetches")

    def __init__(self) -> None:
        self.config: dict[str, str] = {}
        self._c_values: dict[str, Any] = {}
        self.ptr: Any = ffi.NULL
        self.terminate = False
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.only_execute_path_to_fetches = False

    def add_run_config_entry(self, key: str, value: str) -> None:
        """Sets one entry. Raises TypeError unless key and value are str."""
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"run config entry {key!r}={value!r}: key and value must be str")
        self.config[key] = value
        self._c_values[key] = ffi.new("char[]", value.encode())

    def get_run_config_entry(self, key: str) -> str:
        """The value of one entry.

        Raises:
            ConfigEntryNotFoundError: (a RuntimeError) no such entry, with onnxruntime's message
                ("RunOptions does not have configuration with key: KEY", 1.24.4 and 1.32.0).
            TypeError: key is not a str.
        """
        return config_entry(self.config, key, "RunOptions", "get_run_config_entry")

    def c_value(self, key: str) -> Any:
        return self._c_values.get(key, ffi.NULL)
