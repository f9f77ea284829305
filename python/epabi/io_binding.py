"""``IOBinding`` as in onnxruntime: inputs and outputs bound to fixed ``OrtValue`` buffers.

Bound outputs are written in place (fused-node outputs directly into the bound buffer), so their
addresses stay the same from run to run, which graph replay relies on. Buffers may live in host memory or
in the EP device's memory: ``bind_input``/``bind_output`` with ``device_type="cuda"`` wrap a raw device
pointer, ``bind_cuda_array_input``/``bind_cuda_array_output`` a CuPy array, a PyTorch CUDA tensor or any
object with ``__cuda_array_interface__`` or DLPack, all without copying; such a value carries the memory info
of the session's EP device memory (e.g. "EpAbi_GPU"), so the EP reads and writes it in place.

Not thread-safe: one binding per thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from ._ffi import ffi
from .device_memory import DeviceMemory, DeviceValue, device_value_from_numpy, find_device_memory
from .values import ONNX_TO_NUMPY, OrtValue, as_ortvalue, onnx_type_of

if TYPE_CHECKING:
    from .session import InferenceSession


def _elem_type(element_type: Any) -> int:
    """ONNX element type of a numpy dtype/type or an ONNX element type number. Raises TypeError."""
    if isinstance(element_type, int | np.integer) and not isinstance(element_type, bool):
        if int(element_type) not in ONNX_TO_NUMPY:
            raise TypeError(f"ONNX element type {element_type} is not supported by the epabi host")
        return int(element_type)
    return onnx_type_of(np.dtype(element_type))


def _wrap(buffer_ptr: int, element_type: Any, shape: list[int]) -> OrtValue:
    if not buffer_ptr and int(np.prod(shape, dtype=np.int64)) != 0:
        raise ValueError(f"buffer_ptr is NULL for a non-empty tensor of shape {list(shape)}")
    dtype = ONNX_TO_NUMPY[_elem_type(element_type)]
    count = int(np.prod(shape, dtype=np.int64))
    raw = ffi.buffer(ffi.cast("void*", buffer_ptr), count * dtype.itemsize)
    return OrtValue(np.frombuffer(raw, dtype=dtype).reshape(shape))


class IOBinding:
    """Binds session inputs/outputs to ``OrtValue``s (``bind_ortvalue_input`` / ``bind_output`` ...)."""

    def __init__(self, session: InferenceSession) -> None:
        self._session = session
        self.inputs: dict[str, OrtValue] = {}
        self.outputs: dict[str, OrtValue | None] = {}
        self.output_devices: dict[str, DeviceMemory] = {}  # unbound outputs to be left in device memory
        self._results: list[OrtValue] = []

    # -- device memory -----------------------------------------------------------------------------------

    def _device_memory(self, device_type: str, device_id: int) -> DeviceMemory:
        """The device memory of the session's host named ``device_type:device_id`` (ValueError if none)."""
        return find_device_memory(device_type, device_id, -1, self._session.host)

    def _wrap_device(self, device_type: str, device_id: int, element_type: Any, shape: list[int],
                     buffer_ptr: int) -> DeviceValue:
        memory = self._device_memory(device_type, device_id)
        return DeviceValue.wrap(memory, int(buffer_ptr or 0), [int(d) for d in shape], _elem_type(element_type))

    def _wrap_array(self, obj: Any, what: str) -> DeviceValue:
        from .cuda_arrays import describe_cuda_array

        view = describe_cuda_array(obj)
        if what == "output" and view.readonly:
            raise ValueError(f"{type(obj).__name__}: the array is read-only; an output must be writable")
        memory = self._device_memory("cuda", view.device_id)
        return DeviceValue.wrap(memory, view.pointer, list(view.shape), view.element_type, owner=view)

    # -- inputs --------------------------------------------------------------------------------------------

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        self._session.input_arg(name)
        self.inputs[name] = ortvalue

    def bind_cpu_input(self, name: str, array: np.ndarray) -> None:
        self.bind_ortvalue_input(name, OrtValue.ortvalue_from_numpy(array))

    def bind_input(self, name: str, device_type: str, device_id: int, element_type: Any, shape: list[int],
                   buffer_ptr: int) -> None:
        """Binds memory at ``buffer_ptr`` without copying; it must outlive the binding.

        ``device_type`` "cpu": host memory; "cuda"/"gpu": EP device memory of ``device_id`` (the pointer is
        handed to the EP as it is, with that memory's info). ``element_type``: a numpy dtype or an ONNX element
        type number.

        Raises:
            ValueError: NULL pointer for a non-empty tensor; no EP device has that device memory.
            TypeError: unsupported element type.
        """
        if device_type.lower() == "cpu":
            self.bind_ortvalue_input(name, _wrap(buffer_ptr, element_type, list(shape)))
        else:
            self.bind_ortvalue_input(name, self._wrap_device(device_type, device_id, element_type, list(shape),
                                                             buffer_ptr))

    def bind_cuda_array_input(self, name: str, array: Any) -> None:
        """Binds a CUDA array (CuPy, PyTorch, ``__cuda_array_interface__`` or DLPack) without copying; the
        binding keeps it alive. The producer's stream is synchronised once, here: later writes by the producer
        (``x[...] = ...`` in CuPy) must be finished (e.g. its stream synchronised) before the next run.
        Raises TypeError/ValueError as :func:`epabi.cuda_arrays.describe_cuda_array`, ValueError when no EP
        device has GPU memory of the array's device."""
        self.bind_ortvalue_input(name, self._wrap_array(array, "input"))

    # -- outputs -------------------------------------------------------------------------------------------

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        """Binds an output to ``ortvalue`` (its dtype must be the output's; the shape is checked per run).

        Raises TypeError for another dtype."""
        arg = self._session.output_arg(name)
        expected = None if arg.elem_type == 0 else np.dtype(onnx.helper.tensor_dtype_to_np_dtype(arg.elem_type))
        actual = ONNX_TO_NUMPY.get(ortvalue.element_type())
        if expected is not None and actual != expected:
            raise TypeError(f"bind_ortvalue_output: '{name}' is {expected}, the value is {actual}")
        self.outputs[name] = ortvalue
        self.output_devices.pop(name, None)

    def bind_output(self, name: str, device_type: str = "cpu", device_id: int = 0, element_type: Any = None,
                    shape: list[int] | None = None, buffer_ptr: int | None = None) -> None:
        """Binds an output: to a buffer when ``buffer_ptr`` is given (host memory for "cpu", EP device memory
        for "cuda"/"gpu", not copied), else to a value each run allocates there (``get_outputs()``).

        Raises:
            ValueError: ``element_type``/``shape`` missing with ``buffer_ptr``; NULL pointer; no such device memory.
            TypeError: the element type is not the output's.
        """
        self._session.output_arg(name)
        on_device = device_type.lower() != "cpu"
        if buffer_ptr is not None:
            if element_type is None or shape is None:
                raise ValueError("bind_output: element_type and shape are required with buffer_ptr")
            value = self._wrap_device(device_type, device_id, element_type, list(shape), buffer_ptr) if on_device \
                else _wrap(buffer_ptr, element_type, list(shape))
            self.bind_ortvalue_output(name, value)
        else:
            self.outputs[name] = None
            if on_device:
                self.output_devices[name] = self._device_memory(device_type, device_id)
            else:
                self.output_devices.pop(name, None)

    def bind_cuda_array_output(self, name: str, array: Any) -> None:
        """Binds an output to a writable CUDA array (as :meth:`bind_cuda_array_input`); the EP writes into it.

        Raises TypeError for another dtype than the output's, ValueError for a read-only array and as
        :meth:`bind_cuda_array_input`."""
        self._session.output_arg(name)
        self.bind_ortvalue_output(name, self._wrap_array(array, "output"))

    # -- results --------------------------------------------------------------------------------------------

    def store_outputs(self, results: dict[str, Any]) -> None:
        """Keeps a run's outputs (by name) for :meth:`get_outputs`, in binding order: a bound value as it is,
        an unbound one as an OrtValue, copied into device memory when it was bound with a device type.
        Called by ``InferenceSession.run_with_iobinding``."""
        values = []
        for name, bound in self.outputs.items():
            value = bound or as_ortvalue(results[name])
            memory = bound is None and self.output_devices.get(name)
            if memory and not (isinstance(value, DeviceValue) and value.memory_info is memory.memory_info):
                value = device_value_from_numpy(memory, value.numpy())  # bind_output(name, "cuda", ...)
            values.append(value)
        self._results = values

    def get_outputs(self) -> list[OrtValue]:
        """The output values of the last run, in binding order."""
        return list(self._results)

    def copy_outputs_to_cpu(self) -> list[np.ndarray]:
        """Host copies of the last run's outputs (device values are copied through the plugin)."""
        return [np.array(v.numpy()) for v in self._results]

    def clear_binding_inputs(self) -> None:
        self.inputs.clear()

    def clear_binding_outputs(self) -> None:
        self.outputs.clear()
        self.output_devices.clear()
        self._results = []

    def synchronize_inputs(self) -> None:
        """``OrtEp::Sync`` when an input is bound in device memory (as ORT syncs the bound devices' EPs);
        foreign CUDA arrays were already synchronised with their producer's stream when bound."""
        if any(isinstance(v, DeviceValue) for v in self.inputs.values()):
            self._session.sync_ep()

    def synchronize_outputs(self) -> None:
        """``OrtEp::Sync`` when an output is in device memory. Runs end with ``OnRunEnd(sync_stream=True)``
        and some hosts call ``Sync`` after a replay (``HostBehaviour.syncs_after_replay``), so this matters for
        replays on the others."""
        if self.output_devices or any(isinstance(v, DeviceValue) for v in self.outputs.values()):
            self._session.sync_ep()
