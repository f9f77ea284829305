"""``IOBinding`` as in onnxruntime: inputs and outputs bound to fixed ``OrtValue`` buffers.

Bound outputs are written in place (fused-node outputs directly into the bound buffer), so their
addresses stay the same from run to run, which graph replay relies on. Not thread-safe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ._ffi import ffi
from .values import ONNX_TO_NUMPY, OrtValue

if TYPE_CHECKING:
    from .session import InferenceSession


def _wrap(buffer_ptr: int, element_type: Any, shape: list[int]) -> OrtValue:
    if not buffer_ptr and int(np.prod(shape, dtype=np.int64)) != 0:
        raise ValueError(f"buffer_ptr is NULL for a non-empty tensor of shape {list(shape)}")
    dtype = np.dtype(element_type) if not isinstance(element_type, int) else ONNX_TO_NUMPY[element_type]
    count = int(np.prod(shape, dtype=np.int64))
    raw = ffi.buffer(ffi.cast("void*", buffer_ptr), count * dtype.itemsize)
    return OrtValue(np.frombuffer(raw, dtype=dtype).reshape(shape))


class IOBinding:
    """Binds session inputs/outputs to ``OrtValue``s (``bind_ortvalue_input`` / ``bind_output`` ...)."""

    def __init__(self, session: InferenceSession) -> None:
        self._session = session
        self.inputs: dict[str, OrtValue] = {}
        self.outputs: dict[str, OrtValue | None] = {}
        self._results: list[OrtValue] = []

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        self._session._check_input_name(name)
        self.inputs[name] = ortvalue

    def bind_cpu_input(self, name: str, array: np.ndarray) -> None:
        self.bind_ortvalue_input(name, OrtValue.ortvalue_from_numpy(array))

    def bind_input(self, name: str, device_type: str, device_id: int, element_type: Any, shape: list[int],
                   buffer_ptr: int) -> None:
        """Binds host memory at ``buffer_ptr`` (not copied; it must outlive the binding)."""
        if device_type.lower() != "cpu":
            raise ValueError(f"bind_input: device_type {device_type!r} is not supported by this host (cpu only)")
        self.bind_ortvalue_input(name, _wrap(buffer_ptr, element_type, list(shape)))

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        """Binds an output to ``ortvalue`` (its dtype must be the output's; the shape is checked per run)."""
        self._session._check_output_name(name)
        expected = self._session._output_dtype(name)
        if expected is not None and ortvalue.array.dtype != expected:
            raise TypeError(f"bind_ortvalue_output: '{name}' is {expected}, the value is {ortvalue.array.dtype}")
        self.outputs[name] = ortvalue

    def bind_output(self, name: str, device_type: str = "cpu", device_id: int = 0, element_type: Any = None,
                    shape: list[int] | None = None, buffer_ptr: int | None = None) -> None:
        """Binds an output: to a buffer when ``buffer_ptr`` is given, else to a value the run allocates."""
        self._session._check_output_name(name)
        if device_type.lower() != "cpu":
            raise ValueError(f"bind_output: device_type {device_type!r} is not supported by this host (cpu only)")
        if buffer_ptr is not None:
            if element_type is None or shape is None:
                raise ValueError("bind_output: element_type and shape are required with buffer_ptr")
            self.bind_ortvalue_output(name, _wrap(buffer_ptr, element_type, list(shape)))
        else:
            self.outputs[name] = None

    def get_outputs(self) -> list[OrtValue]:
        """The output values of the last run, in binding order."""
        return list(self._results)

    def copy_outputs_to_cpu(self) -> list[np.ndarray]:
        return [v.numpy() for v in self._results]

    def clear_binding_inputs(self) -> None:
        self.inputs.clear()

    def clear_binding_outputs(self) -> None:
        self.outputs.clear()
        self._results = []

    def synchronize_inputs(self) -> None:
        """Host memory needs no synchronization."""

    def synchronize_outputs(self) -> None:
        """Host memory needs no synchronization."""
