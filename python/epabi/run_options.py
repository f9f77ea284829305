"""``RunOptions`` as in onnxruntime: per-run config entries (``gpu_graph_id``, ...)."""

from __future__ import annotations

from typing import Any

from ._ffi import ffi


class RunOptions:
    """Per-run configuration, read by the plugin through ``OrtApi::GetRunConfigEntry``. Not thread-safe."""

    def __init__(self) -> None:
        self.config: dict[str, str] = {}
        self._c_values: dict[str, Any] = {}
        self.ptr: Any = ffi.NULL

    def add_run_config_entry(self, key: str, value: str) -> None:
        """Sets one entry. Raises TypeError unless key and value are str."""
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"run config entry {key!r}={value!r}: key and value must be str")
        self.config[key] = value
        self._c_values[key] = ffi.new("char[]", value.encode())

    def get_run_config_entry(self, key: str) -> str:
        """The value of one entry; KeyError when absent."""
        return self.config[key]

    def c_value(self, key: str) -> Any:
        return self._c_values.get(key, ffi.NULL)
