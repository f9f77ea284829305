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
        self._c_symbolic = [ffi.new("char[]", s.encode()) for s in self.symbolic]
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

    def __init__(self, array: np.ndarray, device_type: str = "cpu", device_id: int = 0) -> None:
        if not isinstance(array, np.ndarray):
            raise TypeError(f"OrtValue needs a numpy array, got {type(array).__name__}")
        self._elem_type = onnx_type_of(array.dtype)
        self._array = np.require(array, requirements="C")  # keeps 0-d arrays 0-d
        if self._array is array and not array.flags.writeable:
            self._array = array.copy()
        self._device_type = device_type
        self._device_id = device_id
        self.ptr: Any = ffi.NULL

    # -- onnxruntime-style API ---------------------------------------------------------------------

    @staticmethod
    def ortvalue_from_numpy(array: np.ndarray, device_type: str = "cpu", device_id: int = 0) -> OrtValue:
        """A value holding a copy of ``array`` (C-contiguous). Only ``device_type="cpu"`` is supported here.

        Raises:
            TypeError: the dtype has no ONNX element type.
            ValueError: a device type other than "cpu".
        """
        if device_type.lower() != "cpu":
            raise ValueError(f"device_type {device_type!r}: this host keeps tensors in CPU memory only")
        return OrtValue(np.array(array, copy=True, order="C"), "cpu", device_id)

    @staticmethod
    def ortvalue_from_shape_and_type(shape: list[int] | tuple[int, ...], element_type: Any = np.float32,
                                     device_type: str = "cpu", device_id: int = 0) -> OrtValue:
        """A zero-filled value of this shape and numpy element type."""
        return OrtValue.ortvalue_from_numpy(np.zeros(tuple(shape), dtype=element_type), device_type, device_id)

    def numpy(self) -> np.ndarray:
        """A copy of the data."""
        return self._array.copy()

    def update_inplace(self, array: np.ndarray) -> None:
        """Copies ``array`` into this value's buffer, keeping its address.

        Raises:
            ValueError: shape or dtype differ from the value's.
        """
        array = np.asarray(array)
        if array.shape != self._array.shape or array.dtype != self._array.dtype:
            raise ValueError(f"update_inplace: got {array.dtype}{list(array.shape)}, the value is "
                             f"{self._array.dtype}{list(self._array.shape)}")
        np.copyto(self._array, array)

    def data_ptr(self) -> int:
        """Address of the first element."""
        return int(self._array.ctypes.data)

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def element_type(self) -> int:
        """The ONNX element type (1 = float, 7 = int64, ...)."""
        return self._elem_type

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
