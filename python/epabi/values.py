"""Tensors as the host holds them: ``OrtValue`` (onnxruntime's Python names) and the type/shape infos.

An :class:`OrtValue` wraps a C-contiguous numpy array in host memory; the plugin reads and writes it in
place through ``GetTensorData``/``GetTensorMutableData``. ``update_inplace`` keeps the buffer address, which
IOBinding and graph replay rely on. Element types follow ``ONNXTensorElementDataType``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper as onnx_helper

from ._ffi import ffi
from .objects import MemoryInfo, OrtAllocatorType, OrtDeviceMemoryType, OrtMemoryInfoDeviceType

#: ONNX element type -> numpy dtype (strings, complex and sub-byte types are not supported by the host).
ONNX_TO_NUMPY: dict[int, np.dtype] = {
    1: np.dtype(np.float32), 2: np.dtype(np.uint8), 3: np.dtype(np.int8), 4: np.dtype(np.uint16),
    5: np.dtype(np.int16), 6: np.dtype(np.int32), 7: np.dtype(np.int64), 9: np.dtype(np.bool_),
    10: np.dtype(np.float16), 11: np.dtype(np.float64), 12: np.dtype(np.uint32), 13: np.dtype(np.uint64),
}
for _elem in (16, 17, 18, 19, 20):  # bfloat16 and the float8 types, through onnx's ml_dtypes mapping
    try:
        ONNX_TO_NUMPY[_elem] = np.dtype(onnx_helper.tensor_dtype_to_np_dtype(_elem))
    except (KeyError, TypeError, ValueError):
        pass
NUMPY_TO_ONNX: dict[np.dtype, int] = {v: k for k, v in ONNX_TO_NUMPY.items()}

def cpu_memory_info() -> MemoryInfo:
    """The host's CPU memory info ("Cpu", device allocator), one per host."""
    return MemoryInfo("Cpu", OrtMemoryInfoDeviceType.CPU, 0, 0, OrtDeviceMemoryType.DEFAULT, 0, OrtAllocatorType.DEVICE)


def _host_of(host: Any) -> Any:
    """The :class:`epabi.Host` named by a Host, an InferenceSession (its host) or None (None: any host).

    Raises TypeError for anything else."""
    if host is None:
        return None
    from .host import Host

    if isinstance(host, Host):
        return host
    inner = getattr(host, "host", None)
    if isinstance(inner, Host):
        return inner
    raise TypeError(f"host must be an epabi.Host or an epabi.InferenceSession, not {type(host).__name__}")


def onnx_type_of(dtype: np.dtype) -> int:
    """ONNX element type of a numpy dtype. Raises TypeError for unsupported dtypes (object, str, complex)."""
    try:
        return NUMPY_TO_ONNX[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"numpy dtype {np.dtype(dtype)} has no supported ONNX tensor element type") from None


class TensorTypeAndShapeInfo:
    """``OrtTensorTypeAndShapeInfo``: element type, dims (-1 = unknown) and symbolic dim names."""

    def __init__(self, elem_type: int, dims: list[int] | None, symbolic: list[str] | None = None) -> None:
        self.elem_type = elem_type
        self.dims = dims  # None: shape unknown (rank unknown)
        self.symbolic = symbolic or ([""] * len(dims or []))
        self.c_symbolic = [ffi.new("char[]", s.encode()) for s in self.symbolic]
        self.ptr: Any = ffi.NULL


class TypeInfo:
    """``OrtTypeInfo``: only tensors are represented (onnx_type 1); others carry their ONNXType only."""

    def __init__(self, onnx_type: int, tensor: TensorTypeAndShapeInfo | None) -> None:
        self.onnx_type = onnx_type
        self.tensor = tensor
        self.ptr: Any = ffi.NULL


class OrtValue:
    """A tensor in host memory (same names as ``onnxruntime.OrtValue``).

    Thread-safety: none; a value bound to a session must not be resized while a run uses it.
    """

    def __init__(self, array: np.ndarray) -> None:
        if not isinstance(array, np.ndarray):
            raise TypeError(f"OrtValue needs a numpy array, got {type(array).__name__}")
        self._elem_type = onnx_type_of(array.dtype)
        self._array = np.require(array, requirements="C")  # keeps 0-d arrays 0-d
        if self._array is array and not array.flags.writeable:
            self._array = array.copy()
        self._device_type = "cpu"
        self.ptr: Any = ffi.NULL
        self._key: tuple[int, tuple[int, ...], np.dtype] | None = None

    def _share(self, array: np.ndarray) -> None:
        """Initialises the value over ``array`` itself (C-contiguous; read-only arrays included, as ORT shares
        them). Raises TypeError for an unsupported dtype."""
        self._elem_type = onnx_type_of(array.dtype)
        self._array = array
        self._device_type = "cpu"
        self.ptr = ffi.NULL
        self._key = None

    # -- onnxruntime-style API ---------------------------------------------------------------------

    @staticmethod
    def ortvalue_from_numpy(array: np.ndarray, device_type: str = "cpu", device_id: int = 0, vendor_id: int = -1,
                            *, host: Any = None) -> OrtValue:
        """A value over ``array`` in host memory, or a copy of it in an EP device's memory.

        As onnxruntime's, a CPU value shares the array's buffer when the array is C-contiguous (read-only
        arrays too): writes to either show in the other, and the value keeps the array alive. Other arrays are
        copied into a C-contiguous buffer.

        Args:
            array: any numpy array whose dtype has an ONNX element type.
            device_type: "cpu" (host memory), or "cuda" / "gpu" / "npu" (onnxruntime's names): the DEFAULT
                memory of a registered plugin EP device of that type and ``device_id`` (see
                :func:`epabi.device_memory.find_device_memory`), e.g. the epabi GPU's "EpAbi_GPU" or the
                software adapter's GPU-typed "EpAbi_Software"; allocated through the plugin's allocator and
                filled through its data transfer. ``numpy()`` copies back.
            device_id: the device ordinal (the memory info's device id).
            vendor_id: PCI vendor id narrowing "gpu"/"npu" (-1: any; "cuda" implies 0x10DE).
            host: the :class:`epabi.Host` (or an :class:`epabi.InferenceSession`) whose EP devices to use;
                None searches every registered plugin library, the most recently registered first.

        Raises:
            TypeError: the dtype has no ONNX element type.
            ValueError: unknown device type, or no registered EP device has such memory.
            MemoryError: the plugin's allocator failed.
        """
        if not isinstance(array, np.ndarray):  # ORT makes no value of a list or a scalar either
            raise TypeError(f"ortvalue_from_numpy needs a numpy array, not {type(array).__name__}")
        if device_type.lower() == "cpu":
            if not array.flags.c_contiguous:
                return OrtValue(np.array(array, copy=True, order="C"))
            value = OrtValue.__new__(OrtValue)
            value._share(array)
            return value
        from .device_memory import device_value_from_numpy, find_device_memory

        memory = find_device_memory(device_type, device_id, vendor_id, _host_of(host))
        return device_value_from_numpy(memory, array)

    @staticmethod
    def ortvalue_from_shape_and_type(shape: list[int] | tuple[int, ...], element_type: Any = np.float32,
                                     device_type: str = "cpu", device_id: int = 0, vendor_id: int = -1,
                                     *, host: Any = None) -> OrtValue:
        """A zero-filled value of this shape and element type (a numpy dtype or an ONNX element type number),
        placed as :meth:`ortvalue_from_numpy` places it. Raises as :meth:`ortvalue_from_numpy`."""
        dtype = ONNX_TO_NUMPY[element_type] if isinstance(element_type, int) else np.dtype(element_type)
        return OrtValue.ortvalue_from_numpy(np.zeros(tuple(shape), dtype=dtype), device_type, device_id, vendor_id,
                                            host=host)

    @staticmethod
    def ortvalue_from_cuda_array(obj: Any, device_id: int | None = None, *, host: Any = None) -> OrtValue:
        """A value over a foreign CUDA array's memory, without copying (CuPy arrays, PyTorch CUDA tensors, any
        object with ``__cuda_array_interface__`` or DLPack): it carries the memory info of the registered EP
        device's GPU memory of that device ordinal and keeps ``obj`` alive. The EP reads and writes the array in
        place; ``numpy()`` copies through the plugin's data transfer.

        Args:
            obj: the array; C-contiguous, in CUDA device memory, a dtype with an ONNX element type.
            device_id: the expected CUDA ordinal (None: the array's).
            host: as for :meth:`ortvalue_from_numpy`.

        Raises:
            TypeError: no array protocol, or an unsupported dtype (see :func:`epabi.cuda_arrays.describe_cuda_array`).
            ValueError: not contiguous, not in CUDA device memory, on another device, or no registered EP device
                has GPU memory of that ordinal.
        """
        from .cuda_arrays import describe_cuda_array
        from .device_memory import DeviceValue, find_device_memory

        view = describe_cuda_array(obj, device_id)
        memory = find_device_memory("cuda", view.device_id, -1, _host_of(host))
        return DeviceValue.wrap(memory, view.pointer, list(view.shape), view.element_type, owner=view)

    def numpy(self) -> np.ndarray:
        """The data as a numpy array sharing this value's host buffer (as onnxruntime's ``numpy()`` of a CPU
        value: writes through it change the value)."""
        return self._array

    def update_inplace(self, array: np.ndarray | OrtValue) -> None:
        """Copies ``array`` (a numpy array or an OrtValue, as onnxruntime 1.32's) into this value's buffer, keeping
        its address and shape. As in onnxruntime, the element count must match, not the shape.

        Raises:
            TypeError: ``array`` is neither.
            ValueError: another element count, or another dtype (ORT copies the bytes regardless).
        """
        array = update_source(array, self._array.dtype, self._array.size)
        np.copyto(self._array, array.reshape(self._array.shape))

    def data_ptr(self) -> int:
        """Address of the first element."""
        return int(self._array.ctypes.data)

    def binding_key(self) -> tuple[int, tuple[int, ...], np.dtype]:
        """(address, shape, numpy dtype): what a captured graph keeps of a bound value
        (:mod:`epabi.capture_bindings`). Computed once: a host value never moves or changes shape."""
        if self._key is None:
            self._key = (int(self._array.ctypes.data), self._array.shape, self._array.dtype)
        return self._key

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def element_type(self) -> int:
        """The ONNX element type (1 = float, 7 = int64, ...)."""
        return self._elem_type

    def data_type(self) -> str:
        """The value's type as onnxruntime names it, e.g. ``tensor(float)``."""
        name = onnx_helper.tensor_dtype_to_string(self.element_type()).split(".")[-1].lower()
        return f"tensor({name})"

    def device_name(self) -> str:
        return self._device_type

    def is_tensor(self) -> bool:
        return True

    def has_value(self) -> bool:
        return True

    # -- host internals ------------------------------------------------------------------------------

    @property
    def array(self) -> np.ndarray:
        """The live buffer (no copy)."""
        return self._array

    @property
    def nbytes(self) -> int:
        return int(self._array.nbytes)

    def c_data(self) -> Any:
        return ffi.cast("void*", self._array.ctypes.data)

    def type_and_shape(self) -> TensorTypeAndShapeInfo:
        return TensorTypeAndShapeInfo(self._elem_type, list(self._array.shape))

    def __repr__(self) -> str:
        return f"OrtValue({self._array.dtype}{list(self._array.shape)}, {self._device_type})"


def update_source(data: Any, dtype: np.dtype, size: int) -> np.ndarray:
    """The host array ``update_inplace(data)`` copies into a value of ``dtype`` and ``size`` elements.

    Raises TypeError (neither a numpy array nor an OrtValue) and ValueError (another count or dtype)."""
    if isinstance(data, OrtValue):
        data = data.numpy()
    elif not isinstance(data, np.ndarray):
        raise TypeError(f"update_inplace: data must be a numpy.ndarray or an OrtValue, not {type(data).__name__}")
    if data.size != size or data.dtype != dtype:
        raise ValueError(f"update_inplace: got {data.dtype}{list(data.shape)} ({data.size} elements), the value "
                         f"holds {size} {dtype} elements")
    return data


def as_ortvalue(x: Any) -> OrtValue:
    """``x`` itself when it is an :class:`OrtValue`, else an OrtValue over ``np.asarray(x)`` (no copy when the
    array is C-contiguous and writable)."""
    return x if isinstance(x, OrtValue) else OrtValue(np.asarray(x))
