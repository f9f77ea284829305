"""Foreign CUDA arrays (CuPy, PyTorch, Numba, JAX, ...) read without copying: ``__cuda_array_interface__`` and DLPack.

:func:`describe_cuda_array` turns an object into a :class:`CudaArrayView` (device pointer, shape, numpy dtype,
device ordinal) after checking it: C-contiguous, a dtype with an ONNX element type, CUDA device memory (not
host or pinned memory), no mask. The view keeps a reference to the object (and to its DLPack capsule), so the
memory stays alive as long as the view does.

Synchronisation: a producer may still be writing the array on one of its streams. The CUDA Array Interface
(v3) names that stream in ``"stream"`` (None: ready); DLPack is asked for the array on the legacy default
stream (``__dlpack__(stream=1)``), and is used instead of an interface that names no stream at all (v2, e.g.
PyTorch); an object with neither gets its device synchronised. The stream is synchronised through the CUDA
driver (``cuStreamSynchronize``/``cuCtxSynchronize`` in the device's primary context) before the view is
returned, so the EP, which computes on its own streams, reads finished data. Without a CUDA driver (the
software adapter's emulated device memory) there is no work to wait for and nothing is synchronised.

Thread-safety: the functions are thread-safe; the driver is loaded once under a lock.
"""

from __future__ import annotations

import ctypes
import math
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .values import NUMPY_TO_ONNX

#: DLPack device types (dlpack.h ``DLDeviceType``).
DL_CUDA, DL_CUDA_MANAGED = 2, 13
_DL_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host (pinned)", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 10: "ROCm",
             11: "ROCm host", 13: "CUDA managed", 14: "oneAPI"}
_DL_DEVICE_MEMORY = (DL_CUDA, DL_CUDA_MANAGED)
#: DLPack ``DLDataTypeCode`` -> numpy kind letter (bfloat16 maps through ml_dtypes when onnx provides it).
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_BOOL = 0, 1, 2, 4, 6


@dataclass(frozen=True)
class CudaArrayView:
    """A C-contiguous array in CUDA device memory, described but not copied.

    Attributes:
        pointer: address of the first element (0 only for an empty array).
        shape: dims (each >= 0).
        dtype: numpy dtype, one with an ONNX element type.
        device_id: CUDA device ordinal.
        readonly: the producer marked the memory read-only (an input may use it; an output may not).
        owner: what keeps the memory alive (the object, and its DLPack capsule when DLPack was used).
    """

    pointer: int
    shape: tuple[int, ...]
    dtype: np.dtype
    device_id: int
    readonly: bool
    owner: Any = field(repr=False)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def element_type(self) -> int:
        """The ONNX element type of ``dtype``."""
        return NUMPY_TO_ONNX[self.dtype]


def describe_cuda_array(obj: Any, device_id: int | None = None) -> CudaArrayView:
    """Describes ``obj`` through ``__cuda_array_interface__`` (preferred) or DLPack, without copying.

    Args:
        obj: a CuPy array, a PyTorch CUDA tensor, or any object with ``__cuda_array_interface__`` or
            ``__dlpack__``/``__dlpack_device__``.
        device_id: the CUDA ordinal the caller expects; None takes the object's (from ``__dlpack_device__``,
            else the driver's record of the pointer, else 0).

    Raises:
        TypeError: ``obj`` exposes neither protocol, or its dtype has no ONNX element type (object, complex,
            big-endian, vector lanes ...), or its interface is malformed.
        ValueError: not C-contiguous, masked, not in CUDA device memory (CPU or pinned host memory), on another
            device than ``device_id``, a NULL pointer for a non-empty array, or a stream that cannot be
            synchronised.
    """
    what = _name(obj)
    if _has_attr(obj, "__dlpack_device__"):  # first, so that host arrays get a clear ValueError
        dev_type, _ = _dlpack_device(obj, what)
        if dev_type not in _DL_DEVICE_MEMORY:
            raise ValueError(f"{what} lives in {_DL_NAMES.get(dev_type, dev_type)} memory (DLPack device type "
                             f"{dev_type}), not in CUDA device memory; for host data use "
                             "OrtValue.ortvalue_from_numpy(array, 'cuda', device_id)")
    if _has_attr(obj, "__cuda_array_interface__"):
        try:
            cai = obj.__cuda_array_interface__
        except Exception as exc:  # e.g. torch refuses tensors that require grad
            raise TypeError(f"{what}: __cuda_array_interface__ failed: {exc}") from exc
        if isinstance(cai, dict) and "stream" not in cai and _has_attr(obj, "__dlpack__"):
            return _from_dlpack(obj, device_id, what)  # a v2 interface names no stream; DLPack orders the access
        return _from_cai(obj, cai, device_id, what)
    if _has_attr(obj, "__dlpack__"):
        return _from_dlpack(obj, device_id, what)
    raise TypeError(f"{what} exposes neither __cuda_array_interface__ nor __dlpack__; pass a CuPy array, a "
                    "PyTorch CUDA tensor or another CUDA array (for host data use OrtValue.ortvalue_from_numpy)")


# -- __cuda_array_interface__ ---------------------------------------------------------------------------------

def _from_cai(obj: Any, cai: Any, device_id: int | None, what: str) -> CudaArrayView:
    if not isinstance(cai, dict):
        raise TypeError(f"{what}: __cuda_array_interface__ is a {type(cai).__name__}, not a dict")
    missing = [k for k in ("shape", "typestr", "data") if k not in cai]
    if missing:
        raise TypeError(f"{what}: __cuda_array_interface__ lacks {missing}")
    shape = _shape(cai["shape"], what)
    dtype = _dtype(cai["typestr"], what)
    data = cai["data"]
    if not isinstance(data, tuple | list) or len(data) != 2 or not isinstance(data[0], int):
        raise TypeError(f"{what}: __cuda_array_interface__ 'data' must be (pointer, readonly), got {data!r}")
    pointer, readonly = int(data[0]), bool(data[1])
    if cai.get("mask") is not None:
        raise ValueError(f"{what}: masked arrays (__cuda_array_interface__ 'mask') are not supported")
    strides = cai.get("strides")
    if strides is not None:
        _check_contiguous(shape, tuple(int(s) for s in strides), dtype.itemsize, what)
    _check_pointer(pointer, shape, what)
    device_id = _device_of(obj, pointer, device_id, what)
    if "stream" not in cai:  # a v2 exporter: no stream named, so wait for everything on the device
        _driver().synchronize(None, device_id, what)
    elif (stream := cai["stream"]) is not None:  # None: the producer says the data is ready
        if not isinstance(stream, int) or stream == 0:
            raise ValueError(f"{what}: __cuda_array_interface__ 'stream' must be a non-zero integer, got {stream!r}")
        _driver().synchronize(stream, device_id, what)
    return CudaArrayView(pointer, shape, dtype, device_id, readonly, obj)


def _device_of(obj: Any, pointer: int, device_id: int | None, what: str) -> int:
    """The device ordinal: ``__dlpack_device__`` when present, else the driver's record of the pointer."""
    found: int | None = None
    if _has_attr(obj, "__dlpack_device__"):  # its type was checked by describe_cuda_array
        found = _dlpack_device(obj, what)[1]
    elif pointer:
        found = _driver().pointer_device(pointer)
    if device_id is not None and found is not None and found != device_id:
        raise ValueError(f"{what} is on CUDA device {found}, not on device {device_id}")
    return device_id if device_id is not None else (found if found is not None else 0)


# -- DLPack -----------------------------------------------------------------------------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def _dlpack_device(obj: Any, what: str) -> tuple[int, int]:
    try:
        dev = obj.__dlpack_device__()
        return int(dev[0]), int(dev[1])
    except Exception as exc:
        raise TypeError(f"{what}: __dlpack_device__() failed or is malformed: {exc}") from exc


def _from_dlpack(obj: Any, device_id: int | None, what: str) -> CudaArrayView:
    try:
        try:
            capsule = obj.__dlpack__(stream=1)  # ready on the legacy default stream, synchronised below
        except TypeError:
            capsule = obj.__dlpack__()  # producers without the stream keyword
    except Exception as exc:  # e.g. torch refuses tensors that require grad
        raise TypeError(f"{what}: __dlpack__() failed: {exc}") from exc
    if not _capsule_is_valid(capsule, b"dltensor"):
        raise TypeError(f"{what}: __dlpack__() did not return an unused 'dltensor' capsule")
    managed = _DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    t = managed.dl_tensor
    if t.device.device_type not in _DL_DEVICE_MEMORY:
        raise ValueError(f"{what} lives in {_DL_NAMES.get(t.device.device_type, t.device.device_type)} memory "
                         f"(DLPack device type {t.device.device_type}), not in CUDA device memory")
    if device_id is not None and t.device.device_id != device_id:
        raise ValueError(f"{what} is on CUDA device {t.device.device_id}, not on device {device_id}")
    if t.ndim < 0:
        raise TypeError(f"{what}: DLPack tensor has ndim {t.ndim}")
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    if any(d < 0 for d in shape):
        raise TypeError(f"{what}: DLPack shape {list(shape)} has a negative dim")
    dtype = _dl_dtype(t.dtype, what)
    if t.strides:
        strides = tuple(int(t.strides[i]) * dtype.itemsize for i in range(t.ndim))  # DLPack counts elements
        _check_contiguous(shape, strides, dtype.itemsize, what)
    pointer = int(t.data or 0) + int(t.byte_offset)
    _check_pointer(pointer, shape, what)
    _driver().synchronize(1, int(t.device.device_id), what)
    # The capsule stays unconsumed and alive in the view: its destructor calls the producer's deleter when the
    # view (and so the capsule) goes away, which is when the memory may be released.
    return CudaArrayView(pointer, shape, dtype, int(t.device.device_id), False, (obj, capsule))


def _dl_dtype(dt: _DLDataType, what: str) -> np.dtype:
    if dt.lanes != 1:
        raise TypeError(f"{what}: DLPack vector dtypes (lanes={dt.lanes}) are not supported")
    kinds = {_DL_INT: "i", _DL_UINT: "u", _DL_FLOAT: "f"}
    if dt.code == _DL_BOOL and dt.bits == 8:
        return np.dtype(np.bool_)
    if dt.code == _DL_BFLOAT and dt.bits == 16:
        bf16 = next((d for d in NUMPY_TO_ONNX if d.name == "bfloat16"), None)
        if bf16 is not None:
            return bf16
    if dt.code in kinds and dt.bits in (8, 16, 32, 64):
        return _dtype(f"<{kinds[dt.code]}{dt.bits // 8}", what)
    raise TypeError(f"{what}: DLPack dtype (code {dt.code}, {dt.bits} bits) has no ONNX element type")


# -- checks ------------------------------------------------------------------------------------------------------

def _name(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}".removeprefix("builtins.")


def _has_attr(obj: Any, name: str) -> bool:
    return hasattr(type(obj), name) or name in getattr(obj, "__dict__", {})


def _shape(shape: Any, what: str) -> tuple[int, ...]:
    if not isinstance(shape, tuple | list) or not all(isinstance(d, int | np.integer) and d >= 0 for d in shape):
        raise TypeError(f"{what}: shape {shape!r} is not a tuple of non-negative integers")
    return tuple(int(d) for d in shape)


def _dtype(typestr: Any, what: str) -> np.dtype:
    try:
        dtype = np.dtype(typestr)
    except TypeError as exc:
        raise TypeError(f"{what}: typestr {typestr!r} is not a numpy dtype") from exc
    if dtype not in NUMPY_TO_ONNX:
        raise TypeError(f"{what}: dtype {dtype.str} ({dtype}) has no ONNX element type supported by the epabi host")
    return dtype


def _check_contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int, what: str) -> None:
    if len(strides) != len(shape):
        raise TypeError(f"{what}: {len(strides)} strides for {len(shape)} dims")
    if math.prod(shape) == 0:
        return
    expected = itemsize
    for dim, stride in zip(reversed(shape), reversed(strides), strict=True):
        if dim != 1 and stride != expected:
            raise ValueError(f"{what} is not C-contiguous (shape {list(shape)}, byte strides {list(strides)}); "
                             "make a contiguous copy first (e.g. cupy.ascontiguousarray, tensor.contiguous())")
        expected *= dim


def _check_pointer(pointer: int, shape: tuple[int, ...], what: str) -> None:
    if pointer == 0 and math.prod(shape) != 0:
        raise ValueError(f"{what}: NULL data pointer for a non-empty array of shape {list(shape)}")


# -- the CUDA driver, for synchronisation and pointer queries ------------------------------------------------------

_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9


class _Driver:
    """``libcuda.so.1`` through ctypes, loaded on first use; absent on machines without an NVIDIA driver."""

    def __init__(self) -> None:
        self.lib: Any = None
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError:
            return
        if lib.cuInit(0) != 0:
            return
        self.lib = lib

    def device_count(self) -> int:
        """GPUs the driver sees; 0 without a driver or when the query fails."""
        count = ctypes.c_int(0)
        if self.lib is None or self.lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value

    def _check(self, rc: int, call: str, what: str) -> None:
        if rc != 0:
            raise ValueError(f"{what}: {call} failed with CUDA driver error {rc}")

    def synchronize(self, stream: int | None, device_id: int, what: str) -> None:
        """Waits for ``stream`` (a CUstream handle; 1 = legacy default, 2 = per-thread default; None = the whole
        primary context) in the primary context of ``device_id``. No-op without a driver."""
        lib = self.lib
        if lib is None:
            return
        dev, ctx, count = ctypes.c_int(0), ctypes.c_void_p(0), ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or not 0 <= device_id < count.value:
            raise ValueError(f"{what} is on CUDA device {device_id}, but the CUDA driver has {count.value} device(s)")
        self._check(lib.cuDeviceGet(ctypes.byref(dev), ctypes.c_int(device_id)), f"cuDeviceGet({device_id})", what)
        self._check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain", what)
        try:
            self._check(lib.cuCtxPushCurrent_v2(ctx), "cuCtxPushCurrent", what)
            try:
                if stream is None:
                    self._check(lib.cuCtxSynchronize(), "cuCtxSynchronize", what)
                else:
                    self._check(lib.cuStreamSynchronize(ctypes.c_void_p(stream)),
                                f"cuStreamSynchronize({stream:#x})", what)
            finally:
                popped = ctypes.c_void_p(0)
                lib.cuCtxPopCurrent_v2(ctypes.byref(popped))
        finally:
            lib.cuDevicePrimaryCtxRelease_v2(dev)

    def pointer_device(self, pointer: int) -> int | None:
        """The device ordinal the driver records for ``pointer``; None without a driver or for unknown memory."""
        lib = self.lib
        if lib is None:
            return None
        ordinal = ctypes.c_int(-1)
        rc = lib.cuPointerGetAttribute(ctypes.byref(ordinal), ctypes.c_int(_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL),
                                       ctypes.c_uint64(pointer))
        return ordinal.value if rc == 0 and ordinal.value >= 0 else None


_driver_lock = threading.Lock()
_driver_instance: _Driver | None = None


def _driver() -> _Driver:
    global _driver_instance
    with _driver_lock:
        if _driver_instance is None:
            _driver_instance = _Driver()
        return _driver_instance
