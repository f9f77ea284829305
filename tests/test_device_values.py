"""Values in EP device memory without a GPU: the software adapter's GPU-typed "EpAbi_Software" memory
(EPABI_SOFTWARE_DEVICE_MEMORY=device) stands in for the GPU's "EpAbi_GPU".

``OrtValue.ortvalue_from_numpy(x, "cuda", 0)`` allocates through the plugin's allocator and copies through its
data transfer; IOBinding binds raw device pointers and foreign CUDA arrays (``__cuda_array_interface__``,
DLPack) without copying. The foreign arrays here are small fakes whose memory the plugin allocated.
"""

from __future__ import annotations

import ctypes
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

import epabi
from epabi._ffi import ffi
from epabi.device_memory import DeviceValue
from epabi.library import registered_libraries
from epabi.models import mlp, sample_inputs

EP = "EpAbiExecutionProvider"


@pytest.fixture
def dm_host(library_path: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[epabi.Host]:
    """A host whose software adapter computes in its own GPU-typed device memory."""
    monkeypatch.setenv("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")
    monkeypatch.setenv("EPABI_SOFTWARE_DEVICE_MEMORY", "device")
    with epabi.Host(hardware=[epabi.cpu_device()]) as h:
        h.register_execution_provider_library("epabi", library_path)
        yield h


def _session(host: epabi.Host, model: onnx.ModelProto) -> epabi.InferenceSession:
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices())
    return epabi.InferenceSession(model, so)


def _shared_allocator(host: epabi.Host) -> Any:
    (dev,) = host.get_ep_devices()
    return dev.factory.shared_allocators[0]


def _calls(host: epabi.Host, start: int, name: str) -> int:
    return host.trace[start:].count(name)


class FakeCudaArray:
    """Exposes device memory the plugin allocated through ``__cuda_array_interface__`` (v3), like CuPy."""

    def __init__(self, backing: epabi.OrtValue, shape: tuple[int, ...] | None = None, typestr: str = "<f4",
                 strides: tuple[int, ...] | None = None, readonly: bool = False, device: tuple[int, int] = (2, 0),
                 **extra: Any) -> None:
        self.backing = backing  # keeps the memory alive, as a CuPy array owns its memory
        self.interface = {"shape": tuple(backing.shape()) if shape is None else shape, "typestr": typestr,
                          "data": (backing.data_ptr(), readonly), "strides": strides, "version": 3, **extra}
        self.device = device

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self.interface

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


# -- OrtValue in device memory --------------------------------------------------------------------------------

def test_ortvalue_from_numpy_cuda_lives_in_plugin_device_memory(dm_host: epabi.Host) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    allocator = _shared_allocator(dm_host)
    live, mark = allocator.live, len(dm_host.trace)
    v = epabi.OrtValue.ortvalue_from_numpy(x, "cuda", 0)  # onnxruntime's positional signature
    assert isinstance(v, DeviceValue) and v.memory_info.name == "EpAbi_Software"
    assert v.memory_info.device_type == epabi.OrtMemoryInfoDeviceType.GPU and v.memory_info.vendor_id == 0x10DE
    assert v.device_name() == "cuda" and v.shape() == [3, 4] and v.element_type() == T.FLOAT
    assert allocator.live == live + 1  # the allocator ORT keeps for the EP device (created at registration)
    assert _calls(dm_host, mark, "OrtAllocator::Alloc") == 1
    assert _calls(dm_host, mark, "OrtDataTransferImpl::CopyTensors") == 1
    assert v.data_ptr() not in (0, x.ctypes.data)
    np.testing.assert_array_equal(v.numpy(), x)
    with pytest.raises(TypeError, match="copy it to the host first"):
        _ = v.array
    address = v.data_ptr()
    v.update_inplace(x * 3)
    assert v.data_ptr() == address
    np.testing.assert_array_equal(v.numpy(), x * 3)
    v.update_inplace(x.T)  # as onnxruntime: the element count must match, the data goes in C order
    np.testing.assert_array_equal(v.numpy(), np.ascontiguousarray(x.T).reshape(3, 4))
    assert v.shape() == [3, 4]
    with pytest.raises(ValueError, match=r"update_inplace: got float32\[4, 4\] \(16 elements\)"):
        v.update_inplace(np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match="update_inplace: got float64"):
        v.update_inplace(x.astype(np.float64))
    del v
    gc.collect()
    assert allocator.live == live  # freed through the plugin when the value went away


def test_a_released_device_value_is_refused_not_handed_over_as_null(dm_host: epabi.Host) -> None:
    # numpy() on a released value handed the plugin's data transfer a NULL source: a segfault
    model = mlp(layers=1, width=4, batch=2)
    x = epabi.OrtValue.ortvalue_from_numpy(np.ones((2, 4), np.float32), "cuda", 0, host=dm_host)
    y = epabi.OrtValue.ortvalue_from_shape_and_type([2, 4], np.float32, "cuda", 0, host=dm_host)
    x.release()
    x.release()  # idempotent
    mark = len(dm_host.trace)
    for call in (x.numpy, lambda: x.update_inplace(np.zeros((2, 4), np.float32))):
        with pytest.raises(ValueError, match="was released"):
            call()
    assert _calls(dm_host, mark, "OrtDataTransferImpl::CopyTensors") == 0
    with _session(dm_host, model) as session:
        with pytest.raises(epabi.OrtStatusError, match="input 'x': the DeviceValue bound to it was released"):
            session.run(None, {"x": x})
        binding = session.io_binding()
        binding.bind_cpu_input("x", np.ones((2, 4), np.float32))
        binding.bind_ortvalue_output("y", y)
        y.release()
        with pytest.raises(epabi.OrtStatusError,
                           match=r"output\(s\) \['y'\]: the DeviceValue bound to it was released"):
            session.run_with_iobinding(binding)
    assert _calls(dm_host, mark, "OrtNodeComputeInfo::Compute") == 0


def test_the_plugins_data_transfer_refuses_a_tensor_without_data(dm_host: epabi.Host) -> None:
    # what a host bug (a freed value) would hand it: an error status, not a copy from address 0
    value = epabi.OrtValue.ortvalue_from_shape_and_type([2, 4], np.float32, "cuda", 0, host=dm_host)
    pointer, value.device_ptr = value.device_ptr, ffi.NULL
    try:
        with pytest.raises(epabi.OrtStatusError, match=r"CopyTensors: tensor 0 \(32 bytes\) has no source data"):
            value.transfer.to_host(value)
        with pytest.raises(epabi.OrtStatusError, match="has no destination data"):
            value.transfer.copy(epabi.OrtValue(np.ones((2, 4), np.float32)), value)
    finally:
        value.device_ptr = pointer


def test_ortvalue_from_shape_and_type_on_device(dm_host: epabi.Host) -> None:
    z = epabi.OrtValue.ortvalue_from_shape_and_type([2, 5], np.int64, "cuda", 0)
    assert isinstance(z, DeviceValue) and z.element_type() == T.INT64
    np.testing.assert_array_equal(z.numpy(), np.zeros((2, 5), np.int64))
    h = epabi.OrtValue.ortvalue_from_shape_and_type((4,), T.FLOAT16, "gpu", 0, host=dm_host)  # ONNX type number
    assert h.numpy().dtype == np.float16 and h.shape() == [4]
    empty = epabi.OrtValue.ortvalue_from_numpy(np.zeros((0, 3), np.float32), "cuda", 0)
    assert empty.shape() == [0, 3] and empty.numpy().shape == (0, 3)


def test_device_lookup_names_what_exists(dm_host: epabi.Host, library_path: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.ones(3, np.float32)
    with pytest.raises(ValueError, match=r"cuda:1 .*'EpAbi_Software' \(GPU:0, vendor 0x10de"):
        epabi.OrtValue.ortvalue_from_numpy(x, "cuda", 1)
    with pytest.raises(ValueError, match="npu:0"):
        epabi.OrtValue.ortvalue_from_numpy(x, "npu", 0)
    with pytest.raises(ValueError, match=r"gpu:0 \(vendor 0x1002\)"):
        epabi.OrtValue.ortvalue_from_numpy(x, "gpu", 0, 0x1002)
    with pytest.raises(ValueError, match="device_type 'tpu'"):
        epabi.OrtValue.ortvalue_from_numpy(x, "tpu", 0)
    with pytest.raises(TypeError, match="host must be"):
        epabi.OrtValue.ortvalue_from_numpy(x, "cuda", 0, host="epabi")
    # a host whose software adapter computes in host memory has no device memory to offer
    monkeypatch.delenv("EPABI_SOFTWARE_DEVICE_MEMORY")
    with epabi.Host(hardware=[epabi.cpu_device()]) as plain:
        plain.register_execution_provider_library("epabi", library_path)
        with pytest.raises(ValueError, match="no EP device of this host has cuda:0"):
            epabi.OrtValue.ortvalue_from_numpy(x, "cuda", 0, host=plain)
        # without host=, every registered library is searched: dm_host's device memory is found
        assert epabi.OrtValue.ortvalue_from_numpy(x, "cuda", 0).memory_info.name == "EpAbi_Software"


def test_values_outliving_their_library_refuse_copies(library_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")
    monkeypatch.setenv("EPABI_SOFTWARE_DEVICE_MEMORY", "device")
    host = epabi.Host(hardware=[epabi.cpu_device()])
    host.register_execution_provider_library("epabi", library_path)
    v = epabi.OrtValue.ortvalue_from_numpy(np.ones(4, np.float32), "cuda", 0)
    host.unregister_execution_provider_library("epabi")
    with pytest.raises(RuntimeError, match="'epabi' .* was unregistered"):
        v.numpy()
    assert not any(lib.host is host for lib in registered_libraries())  # forgotten by the registry
    with pytest.raises(ValueError, match="no EP device of this host"):
        epabi.OrtValue.ortvalue_from_numpy(np.ones(4, np.float32), "cuda", 0, host=host)
    del v  # the allocator went with the library: nothing is freed into an unloaded plugin
    gc.collect()


# -- sessions on device values ------------------------------------------------------------------------------------

def test_run_with_device_feeds_and_zero_copy_bound_outputs(dm_host: epabi.Host) -> None:
    model = mlp(layers=3, width=16, batch=2)
    ref = ReferenceEvaluator(model)
    feeds = sample_inputs(model, seed=1)
    with _session(dm_host, model) as session:
        x = epabi.OrtValue.ortvalue_from_numpy(feeds["x"], "cuda", 0, host=session)
        (y,) = session.run(None, {"x": x})  # a device feed to a plain run
        np.testing.assert_allclose(y, ref.run(None, feeds)[0], rtol=1e-5, atol=1e-6)
        out = epabi.OrtValue.ortvalue_from_shape_and_type([2, 16], np.float32, "cuda", 0)
        binding = session.io_binding()
        binding.bind_ortvalue_input("x", x)
        binding.bind_ortvalue_output("y", out)
        address = out.data_ptr()
        for seed in (2, 3):
            new = sample_inputs(model, seed=seed)
            x.update_inplace(new["x"])
            mark = len(dm_host.trace)
            session.run_with_iobinding(binding)
            # the EP read the bound input and wrote the bound output where they are: nothing was copied
            assert _calls(dm_host, mark, "OrtDataTransferImpl::CopyTensors") == 0
            assert _calls(dm_host, mark, "OrtNodeComputeInfo::Compute") == 1
            assert binding.get_outputs()[0] is out and out.data_ptr() == address
            np.testing.assert_allclose(out.numpy(), ref.run(None, new)[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(binding.copy_outputs_to_cpu()[0], out.numpy())
        binding.synchronize_inputs()
        binding.synchronize_outputs()


def test_bind_raw_device_pointers(dm_host: epabi.Host) -> None:
    model = mlp(layers=2, width=8, batch=3)
    feeds = sample_inputs(model, seed=4)
    expected = ReferenceEvaluator(model).run(None, feeds)[0]
    with _session(dm_host, model) as session:
        x = epabi.OrtValue.ortvalue_from_numpy(feeds["x"], "cuda", 0)
        y = epabi.OrtValue.ortvalue_from_shape_and_type([3, 8], np.float32, "cuda", 0)
        binding = session.io_binding()
        binding.bind_input("x", "cuda", 0, np.float32, [3, 8], x.data_ptr())
        binding.bind_output("y", "cuda", 0, T.FLOAT, [3, 8], y.data_ptr())
        session.run_with_iobinding(binding)
        (bound,) = binding.get_outputs()
        assert isinstance(bound, DeviceValue) and bound.data_ptr() == y.data_ptr()
        np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5, atol=1e-6)
        # an output bound to the device without a buffer: each run allocates it there
        binding.bind_output("y", "cuda", 0)
        session.run_with_iobinding(binding)
        (fresh,) = binding.get_outputs()
        assert isinstance(fresh, DeviceValue) and fresh.memory_info.name == "EpAbi_Software"
        np.testing.assert_allclose(fresh.numpy(), expected, rtol=1e-5, atol=1e-6)
        with pytest.raises(ValueError, match="buffer_ptr is NULL|NULL device pointer"):
            binding.bind_input("x", "cuda", 0, np.float32, [3, 8], 0)
        with pytest.raises(ValueError, match="cuda:3"):
            binding.bind_input("x", "cuda", 3, np.float32, [3, 8], x.data_ptr())
        with pytest.raises(TypeError, match="'y' is float32, the value is int32"):
            binding.bind_output("y", "cuda", 0, np.int32, [3, 8], y.data_ptr())


def test_device_values_feed_a_host_memory_ep_through_their_own_transfer(dm_host: epabi.Host, library_path: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # a value in dm_host's device memory feeds a session whose EP computes in host memory: the host copies
    # it out through the data transfer of the plugin that owns it
    monkeypatch.delenv("EPABI_SOFTWARE_DEVICE_MEMORY")
    model = mlp(layers=2, width=8)
    feeds = sample_inputs(model, seed=5)
    x = epabi.OrtValue.ortvalue_from_numpy(feeds["x"], "cuda", 0, host=dm_host)
    with epabi.Host(hardware=[epabi.cpu_device()]) as plain:
        plain.register_execution_provider_library("epabi", library_path)
        with _session(plain, model) as session:
            assert session.ep_memory_info is None
            (y,) = session.run(None, {"x": x})
    np.testing.assert_allclose(y, ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-5, atol=1e-6)


def test_cpu_nodes_read_device_feeds(dm_host: epabi.Host) -> None:
    nodes = [helper.make_node("Softplus", ["x"], ["s"], name="softplus"),
             helper.make_node("Add", ["s", "x"], ["y"], name="add")]
    model = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                                                [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = np.random.default_rng(6).standard_normal((2, 3)).astype(np.float32)
    with _session(dm_host, model) as session:
        assert session.node_assignment["softplus"] == "CPUExecutionProvider"
        (y,) = session.run(None, {"x": epabi.OrtValue.ortvalue_from_numpy(x, "cuda", 0)})
    np.testing.assert_allclose(y, ReferenceEvaluator(model).run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)


# -- foreign CUDA arrays ------------------------------------------------------------------------------------------

def test_bind_cuda_arrays_without_copying(dm_host: epabi.Host) -> None:
    model = mlp(layers=3, width=8, batch=2)
    feeds = sample_inputs(model, seed=7)
    ref = ReferenceEvaluator(model)
    with _session(dm_host, model) as session:
        x_mem = epabi.OrtValue.ortvalue_from_numpy(feeds["x"], "cuda", 0)
        y_mem = epabi.OrtValue.ortvalue_from_shape_and_type([2, 8], np.float32, "cuda", 0)
        x_arr, y_arr = FakeCudaArray(x_mem, readonly=True), FakeCudaArray(y_mem, strides=(32, 4))
        binding = session.io_binding()
        binding.bind_cuda_array_input("x", x_arr)  # a read-only input is fine
        binding.bind_cuda_array_output("y", y_arr)
        (bound_x,) = binding.inputs.values()
        assert isinstance(bound_x, DeviceValue) and bound_x.data_ptr() == x_mem.data_ptr()
        assert bound_x.owner.owner is x_arr  # the binding keeps the array alive
        mark = len(dm_host.trace)
        session.run_with_iobinding(binding)
        assert _calls(dm_host, mark, "OrtDataTransferImpl::CopyTensors") == 0
        np.testing.assert_allclose(y_mem.numpy(), ref.run(None, feeds)[0], rtol=1e-5, atol=1e-6)
        with pytest.raises(ValueError, match="read-only; an output must be writable"):
            binding.bind_cuda_array_output("y", FakeCudaArray(y_mem, readonly=True))
        with pytest.raises(TypeError, match="'y' is float32, the value is int32"):
            binding.bind_cuda_array_output("y", FakeCudaArray(y_mem, typestr="<i4"))


def test_ortvalue_from_cuda_array_keeps_its_owner_alive(dm_host: epabi.Host) -> None:
    data = np.arange(6, dtype=np.int32).reshape(2, 3)
    arr = FakeCudaArray(epabi.OrtValue.ortvalue_from_numpy(data, "cuda", 0), typestr="<i4")
    owner = weakref.ref(arr)
    v = epabi.OrtValue.ortvalue_from_cuda_array(arr)
    assert v.shape() == [2, 3] and v.element_type() == T.INT32 and v.device_name() == "cuda"
    del arr
    gc.collect()
    assert owner() is not None  # the value holds the array
    np.testing.assert_array_equal(v.numpy(), data)
    v.update_inplace(data + 1)  # written into the array's own memory
    np.testing.assert_array_equal(owner().backing.numpy(), data + 1)
    del v
    gc.collect()
    assert owner() is None


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"strides": (4, 8)}, ValueError, r"FakeCudaArray is not C-contiguous \(shape \[2, 3\], byte strides \[4, 8\]"),
    ({"typestr": "<c8"}, TypeError, r"FakeCudaArray: dtype <c8 \(complex64\) has no ONNX element type"),
    ({"typestr": ">f4"}, TypeError, "dtype >f4"),
    ({"mask": object()}, ValueError, "masked arrays"),
    ({"device": (1, 0)}, ValueError, r"FakeCudaArray lives in CPU memory \(DLPack device type 1\)"),
    ({"device": (3, 0)}, ValueError, r"CUDA host \(pinned\) memory"),
    ({"device": (2, 1)}, ValueError, "no EP device .* cuda:1|on CUDA device 1, but the CUDA driver has 1 device"),
    ({"shape": (2, -3)}, TypeError, "is not a tuple of non-negative integers"),
    ({"stream": 0}, ValueError, "'stream' must be a non-zero integer"),
])
def test_bad_cuda_arrays_are_refused_by_name(dm_host: epabi.Host, kwargs: dict, error: type, match: str) -> None:
    backing = epabi.OrtValue.ortvalue_from_numpy(np.zeros((2, 3), np.float32), "cuda", 0)
    with pytest.raises(error, match=match):
        epabi.OrtValue.ortvalue_from_cuda_array(FakeCudaArray(backing, **kwargs))


def test_objects_without_a_cuda_array_protocol_are_refused(dm_host: epabi.Host) -> None:
    with pytest.raises(TypeError, match="list exposes neither __cuda_array_interface__ nor __dlpack__"):
        epabi.OrtValue.ortvalue_from_cuda_array([1.0, 2.0])
    # numpy arrays speak DLPack, but from host memory
    with pytest.raises(ValueError, match=r"numpy.ndarray lives in CPU memory .*ortvalue_from_numpy"):
        epabi.OrtValue.ortvalue_from_cuda_array(np.ones(3, np.float32))
    backing = epabi.OrtValue.ortvalue_from_numpy(np.zeros(3, np.float32), "cuda", 0)
    null = FakeCudaArray(backing)
    null.interface["data"] = (0, False)
    with pytest.raises(ValueError, match="NULL data pointer for a non-empty array"):
        epabi.OrtValue.ortvalue_from_cuda_array(null)
    with pytest.raises(TypeError, match="'data' must be"):
        bad = FakeCudaArray(backing)
        bad.interface["data"] = "0x1234"
        epabi.OrtValue.ortvalue_from_cuda_array(bad)


# -- DLPack ---------------------------------------------------------------------------------------------------------

class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManaged(ctypes.Structure):
    _fields_ = [("tensor", _DLTensor), ("ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))


class FakeDLPackArray:
    """A DLPack producer (no __cuda_array_interface__) over device memory the plugin allocated."""

    def __init__(self, backing: epabi.OrtValue, code: int = 2, bits: int = 32, strides: list[int] | None = None,
                 offset_elems: int = 0, device: tuple[int, int] = (2, 0)) -> None:
        self.backing = backing
        self.shape = (ctypes.c_int64 * len(backing.shape()))(*backing.shape())
        self.strides = None if strides is None else (ctypes.c_int64 * len(strides))(*strides)
        self.managed = _DLManaged()
        t = self.managed.tensor
        t.data, t.device_type, t.device_id = backing.data_ptr(), device[0], device[1]
        t.ndim, t.code, t.bits, t.lanes = len(backing.shape()), code, bits, 1
        t.shape = self.shape
        t.strides = self.strides
        t.byte_offset = offset_elems * bits // 8
        self.device = device
        self.streams: list[Any] = []

    def __dlpack__(self, stream: Any = None) -> Any:
        self.streams.append(stream)
        return _capsule_new(ctypes.addressof(self.managed), b"dltensor", None)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


def test_dlpack_arrays_are_read_without_copying(dm_host: epabi.Host) -> None:
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    arr = FakeDLPackArray(epabi.OrtValue.ortvalue_from_numpy(data, "cuda", 0))
    v = epabi.OrtValue.ortvalue_from_cuda_array(arr)
    assert arr.streams == [1]  # asked for the array on the legacy default stream, which the host then syncs
    assert v.data_ptr() == arr.backing.data_ptr() and v.shape() == [3, 4] and v.element_type() == T.FLOAT
    np.testing.assert_array_equal(v.numpy(), data)
    # C-contiguous strides (in elements) are fine; others are refused
    ok = FakeDLPackArray(arr.backing, strides=[4, 1])
    np.testing.assert_array_equal(epabi.OrtValue.ortvalue_from_cuda_array(ok).numpy(), data)
    with pytest.raises(ValueError, match=r"not C-contiguous \(shape \[3, 4\], byte strides \[4, 12\]\)"):
        epabi.OrtValue.ortvalue_from_cuda_array(FakeDLPackArray(arr.backing, strides=[1, 3]))
    with pytest.raises(TypeError, match="DLPack dtype \\(code 5, 64 bits\\)"):
        epabi.OrtValue.ortvalue_from_cuda_array(FakeDLPackArray(arr.backing, code=5, bits=64))
    ints = FakeDLPackArray(epabi.OrtValue.ortvalue_from_numpy(data.astype(np.int64), "cuda", 0), code=0, bits=64)
    np.testing.assert_array_equal(epabi.OrtValue.ortvalue_from_cuda_array(ints).numpy(), data.astype(np.int64))


def test_an_interface_without_stream_defers_to_dlpack(dm_host: epabi.Host) -> None:
    # PyTorch's __cuda_array_interface__ (v2) names no stream; its DLPack export orders the access instead
    data = np.arange(4, dtype=np.float32)
    backing = epabi.OrtValue.ortvalue_from_numpy(data, "cuda", 0)

    class Both(FakeDLPackArray):
        @property
        def __cuda_array_interface__(self) -> dict[str, Any]:
            return {"shape": (4,), "typestr": "<f4", "data": (backing.data_ptr(), False), "version": 2}

    both = Both(backing)
    np.testing.assert_array_equal(epabi.OrtValue.ortvalue_from_cuda_array(both).numpy(), data)
    assert both.streams == [1]
    # with a stream named (None: ready), the interface itself is used
    named = FakeCudaArray(backing, stream=None)
    np.testing.assert_array_equal(epabi.OrtValue.ortvalue_from_cuda_array(named).numpy(), data)


# -- runs of an EP without concurrent-run support take turns ----------------------------------------------------

def test_runs_take_turns_when_the_ep_refuses_concurrent_runs(host: epabi.Host) -> None:
    # one user_compute_stream means no concurrent runs (IsConcurrentRunSupported false): like ORT, the session
    # runs one call at a time, so no OnRunStart comes between another run's OnRunStart and OnRunEnd
    import threading

    model = mlp(layers=4, width=32, batch=4)
    feeds = sample_inputs(model)
    expected = ReferenceEvaluator(model).run(None, feeds)[0]
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {"user_compute_stream": "0x10"})
    errors: list[BaseException] = []
    with epabi.InferenceSession(model, so) as session:
        assert session.ep.concurrent_run_supported is False
        mark = len(host.trace)

        def worker() -> None:
            try:
                for _ in range(20):
                    np.testing.assert_allclose(session.run(None, feeds)[0], expected, rtol=1e-5, atol=1e-6)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert not errors, errors
    marks = [c for c in host.trace[mark:] if c in ("OrtEp::OnRunStart", "OrtEp::OnRunEnd")]
    assert len(marks) == 4 * 20 * 2
    assert marks == ["OrtEp::OnRunStart", "OrtEp::OnRunEnd"] * (4 * 20)


def test_scalars_keep_rank_zero_in_device_memory(dm_host: epabi.Host) -> None:
    # a 0-d array stays 0-d on the device (not [1]), so a model with a scalar input runs through IOBinding
    x = epabi.OrtValue.ortvalue_from_numpy(np.array(3.5, np.float32), "cuda", 0)
    assert x.shape() == []
    assert x.numpy().shape == () and float(x.numpy()) == 3.5
    x.update_inplace(np.array(-2.0, np.float32))
    assert float(x.numpy()) == -2.0
    assert epabi.OrtValue.ortvalue_from_shape_and_type([], np.float32, "cuda", 0).shape() == []
    graph = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["y"], name="sq")], "sq",
                              [helper.make_tensor_value_info("x", T.FLOAT, [])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with _session(dm_host, model) as session:
        binding = session.io_binding()
        binding.bind_ortvalue_input("x", x)
        binding.bind_output("y", "cuda", 0)
        session.run_with_iobinding(binding)
        (y,) = binding.copy_outputs_to_cpu()
    assert y.shape == () and float(y) == 4.0
