"""The served API tables: one set per API version per process, valid for the life of the process; every slot a
served function or a trap naming itself; objects of closed hosts answered with errors, never a crash; no
Python traceback on the terminal; the entry points third-party plugins call (model metadata, external
initializers, the default allocator, experimental functions, the weightless buffer, preallocated outputs)."""

from __future__ import annotations

import gc

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import epabi
from epabi import call_context
from epabi._ffi import ffi
from epabi.api_table import served_api
from epabi.graph_view import model_graph
from epabi.handles import PROCESS_HANDLES, TOMBSTONES
from epabi.objects import Status, pystr


def _slot(api: object, index: int, ctype: str) -> object:
    return ffi.cast(ctype, ffi.cast("void**", api)[index])


def _status(host: epabi.Host, ptr: object) -> tuple[int, str] | None:
    status = host.handles.lookup(ptr, Status)
    if status is None:
        return None
    host.handles.drop(ptr)
    return status.code, status.message


def test_one_table_set_per_version_for_the_life_of_the_process() -> None:
    a, b = epabi.Host(api_version=28, hardware=[]), epabi.Host(api_version=28, hardware=[])
    c = epabi.Host(api_version=24, hardware=[])
    assert a.served is b.served is served_api(28) and c.served is not a.served
    base = a.served.base
    a.close()
    b.close()
    del a, b
    gc.collect()
    assert base.GetApi(28) == served_api(28).api  # still valid: plugins keep what the first host gave them
    assert ffi.string(base.GetVersionString()) == b"1.28.0"
    assert base.GetApi(29) == ffi.NULL
    c.close()


@pytest.mark.parametrize(("api", "struct", "slot", "message"), [
    (30, "OrtApi", 3, "OrtApi::CreateEnv (slot 3, since v1) is not served by the epabi host"),
    (31, "OrtApi", 426, "OrtApi::SessionOptionsSetEpContextDataReadFunc [name UNVERIFIED] (slot 426, since 1.31) is "
                        "not served by the epabi host"),
    (32, "OrtEpApi", 74, "OrtEpApi::SessionOptions_GetEpContextConfig [name UNVERIFIED] (slot 74, since 1.31) is not "
                         "served by the epabi host"),
])
def test_unserved_slots_name_the_function(api: int, struct: str, slot: int, message: str) -> None:
    host = epabi.Host(api_version=api, hardware=[])
    table = host.served.api if struct == "OrtApi" else host.served.ep_api
    with call_context.calling(host, "test"):
        code, text = _status(host, _slot(table, slot, "OrtStatus*(*)(void)")())
    assert (code, text) == (epabi.OrtErrorCode.NOT_IMPLEMENTED, message)
    assert ("limitation", message) in host.conduct_report()


def test_a_slot_newer_than_the_host_is_misconduct() -> None:
    host = epabi.Host(api_version=30, hardware=[])
    with call_context.calling(host, "test"):
        code, text = _status(host, _slot(host.served.api, 426, "OrtStatus*(*)(void)")())
    assert code == epabi.OrtErrorCode.INVALID_ARGUMENT
    assert "(slot 426, since 1.31) was called, but it appeared in API 31 and this host is ONNX Runtime 1.30.0" in text


def test_traps_answer_with_the_c_value_of_their_result_type() -> None:
    host = epabi.Host(hardware=[])
    with call_context.calling(host, "test"):
        assert _slot(host.served.api, 219, "void*(*)(uint32_t)")(1) == ffi.NULL  # GetTrainingApi: a pointer
        assert _slot(host.served.api, 92, "void(*)(void*)")(ffi.NULL) is None  # ReleaseEnv: void
        editor = host.served.api.GetModelEditorApi()
        assert editor == host.served.model_editor_api
        code, text = _status(host, editor.CreateModel(ffi.NULL, ffi.NULL, 0, ffi.new("OrtModel**")))
    assert (code, text) == (epabi.OrtErrorCode.NOT_IMPLEMENTED,
                            "OrtModelEditorApi::CreateModel (slot 12, since 1.22) is not served by the epabi host")


def test_objects_of_a_closed_host_answer_with_errors(capfd: pytest.CaptureFixture) -> None:
    host = epabi.Host(hardware=[epabi.cpu_device()])
    hw = host.hardware[0].ptr
    api = host.served.api
    with call_context.calling(host, "test"):
        assert api.HardwareDevice_VendorId(hw) == host.hardware[0].vendor_id
    host.close()
    later = epabi.Host(hardware=[])
    with call_context.calling(later, "test"):
        assert api.HardwareDevice_VendorId(hw) == 0  # the C value for a failure, and a report
        assert api.HardwareDevice_Vendor(hw) == ffi.NULL
        assert api.GetErrorMessage(ffi.cast("OrtStatus*", 0x1234)) == ffi.NULL
    report = [m for kind, m in later.conduct_report() if kind == "violation"]
    assert any("was a HardwareDevice and has been released" in m for m in report), report
    assert any("is not a live Status this host issued" in m for m in report), report
    assert capfd.readouterr().err == ""  # no Python traceback reached the terminal


def test_the_default_logger_and_allocator_are_process_objects() -> None:
    a, b = epabi.Host(hardware=[]), epabi.Host(api_version=24, hardware=[])
    assert a.default_logger is b.default_logger
    a.close()
    with call_context.calling(b, "test"):
        out_a, out_b = ffi.new("OrtAllocator**"), ffi.new("OrtAllocator**")
        assert a.served.api.GetAllocatorWithDefaultOptions(out_a) == ffi.NULL
        assert b.served.api.GetAllocatorWithDefaultOptions(out_b) == ffi.NULL
        assert out_a[0] == out_b[0]
        allocator = out_a[0]
        p = ffi.new("void**")
        assert b.served.api.AllocatorAlloc(allocator, 100, p) == ffi.NULL
        assert int(ffi.cast("uintptr_t", p[0])) % 64 == 0
        ffi.memmove(p[0], b"x" * 100, 100)
        assert b.served.api.AllocatorFree(allocator, p[0]) == ffi.NULL
        info = ffi.new("const OrtMemoryInfo**")
        assert b.served.api.AllocatorGetInfo(allocator, info) == ffi.NULL
        assert info[0] == b.cpu_memory.ptr
        assert a.served.api.GetExperimentalFunction(b"OrtApi_ExperimentalApiTest_SinceV28") == ffi.NULL
    assert b.experimental_requests == ["OrtApi_ExperimentalApiTest_SinceV28"]
    b.close()


def test_the_default_allocator_is_the_hosts_allocator_kind_and_never_released(capfd: pytest.CaptureFixture) -> None:
    """One OrtAllocator implementation for the default allocator and the ones lent to kernels: version 18 with
    Reserve, C-heap memory, an Info laid out as ORT's C++ OrtMemoryInfo ("Cpu", OrtMemTypeDefault,
    OrtDeviceAllocator, a CPU OrtDevice); releasing the default one is refused, as ORT would crash on it."""
    host = epabi.Host(hardware=[])
    api = host.served.api
    with call_context.calling(host, "test"):
        out = ffi.new("OrtAllocator**")
        assert api.GetAllocatorWithDefaultOptions(out) == ffi.NULL
        allocator = out[0]
        assert allocator.version == 18 and allocator.Reserve != ffi.NULL
        p = allocator.Reserve(allocator, 10)
        assert int(ffi.cast("uintptr_t", p)) % 64 == 0
        allocator.Free(allocator, p)
        info = allocator.Info(allocator)
        base = int(ffi.cast("uintptr_t", info))
        name = ffi.cast("char**", base)[0]
        assert ffi.string(name, ffi.cast("size_t*", base + 8)[0]) == b"Cpu"
        assert ffi.cast("int32_t*", base + 32)[0] == 0  # OrtMemTypeDefault
        assert ffi.cast("int32_t*", base + 36)[0] == 0  # OrtDeviceAllocator
        assert ffi.cast("int8_t*", base + 40)[0] == 0  # OrtDevice::CPU
        name_out = ffi.new("const char**")
        assert api.MemoryInfoGetName(info, name_out) == ffi.NULL and pystr(name_out[0]) == "Cpu"
        api.ReleaseAllocator(allocator)
        assert api.GetAllocatorWithDefaultOptions(out) == ffi.NULL and out[0] == allocator  # still served
    report = [m for kind, m in host.conduct_report() if kind == "violation"]
    assert any("ReleaseAllocator on the default allocator" in m for m in report), report
    assert capfd.readouterr().err == ""
    host.close()


def _metadata_model() -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "the_graph",
                              [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2])], doc_string="graph doc")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tests",
                              domain="ai.epabi", doc_string="model doc", model_version=7)
    helper.set_model_props(model, {"author": "epabi", "license": "MIT"})
    return model


def test_graph_model_metadata_as_ort_hands_it_out() -> None:
    host = epabi.Host(hardware=[])
    graph = model_graph(_metadata_model())
    host.expose_graph(graph)
    api = host.served.api
    with call_context.calling(host, "test"):
        allocator = ffi.new("OrtAllocator**")
        api.GetAllocatorWithDefaultOptions(allocator)
        meta = ffi.new("OrtModelMetadata**")
        assert api.Graph_GetModelMetadata(graph.ptr, meta) == ffi.NULL
        text = ffi.new("char**")
        got = {}
        for name in ("ProducerName", "GraphName", "Domain", "Description", "GraphDescription"):
            assert getattr(api, f"ModelMetadataGet{name}")(meta[0], allocator[0], text) == ffi.NULL
            got[name] = pystr(text[0])
            api.AllocatorFree(allocator[0], text[0])
        version = ffi.new("int64_t*")
        assert api.ModelMetadataGetVersion(meta[0], version) == ffi.NULL
        assert api.ModelMetadataLookupCustomMetadataMap(meta[0], allocator[0], b"license", text) == ffi.NULL
        assert pystr(text[0]) == "MIT"
        assert api.ModelMetadataLookupCustomMetadataMap(meta[0], allocator[0], b"missing", text) == ffi.NULL
        assert text[0] == ffi.NULL
        keys, count = ffi.new("char***"), ffi.new("int64_t*")
        assert api.ModelMetadataGetCustomMetadataMapKeys(meta[0], allocator[0], keys, count) == ffi.NULL
        assert sorted(pystr(keys[0][i]) for i in range(count[0])) == ["author", "license"]
        api.ReleaseModelMetadata(meta[0])
        ext = ffi.new("OrtExternalInitializerInfo**")
        assert api.ValueInfo_GetExternalInitializerInfo(graph.values["x"].ptr, ext) == ffi.NULL
        assert ext[0] == ffi.NULL  # data inside the model: no external info, as ORT answers
    assert got == {"ProducerName": "tests", "GraphName": "the_graph", "Domain": "ai.epabi",
                   "Description": "model doc", "GraphDescription": "graph doc"}
    assert version[0] == 7
    assert not [r for r in host.conduct_report() if r[0] != "tolerated"]
    host.unexpose_graph(graph)
    host.close()


def test_weightless_source_buffer_round_trips() -> None:
    host = epabi.Host(hardware=[])
    so = epabi.SessionOptions()
    so_ptr = host.handles.issue(so, "OrtSessionOptions*")
    data = ffi.new("char[]", b"model bytes")
    with call_context.calling(host, "test"):
        got, size = ffi.new("const void**"), ffi.new("size_t*")
        assert host.served.ep_api.SessionOptionsGetWeightlessSourceModelBuffer(so_ptr, got, size) == ffi.NULL
        assert (got[0], size[0]) == (ffi.NULL, 0)
        assert host.served.api.SessionOptionsSetWeightlessSourceModelBuffer(so_ptr, data, 11) == ffi.NULL
        assert host.served.ep_api.SessionOptionsGetWeightlessSourceModelBuffer(so_ptr, got, size) == ffi.NULL
        assert ffi.buffer(got[0], size[0])[:] == b"model bytes"
    host.handles.drop(so_ptr)
    host.close()


def test_preallocated_output_is_the_bound_value_or_null() -> None:
    from epabi.served_values import KernelContext

    host = epabi.Host(hardware=[])
    bound = epabi.OrtValue.ortvalue_from_numpy(np.zeros(3, np.float32))
    ctx = KernelContext([], [], [1, 1], ["a", "b"], host.default_logger, {0: bound})
    ctx.ptr = host.handles.issue(ctx, "OrtKernelContext*")
    out = ffi.new("OrtValue**")
    with call_context.calling(host, "test"):
        assert host.served.api.KernelContext_GetPreallocatedOutput(ctx.ptr, 0, out) == ffi.NULL
        assert host.handles.lookup(out[0], epabi.OrtValue) is bound
        assert host.served.api.KernelContext_GetPreallocatedOutput(ctx.ptr, 1, out) == ffi.NULL
        assert out[0] == ffi.NULL
        code, _ = _status(host, host.served.api.KernelContext_GetPreallocatedOutput(ctx.ptr, 2, out))
    assert code == epabi.OrtErrorCode.INVALID_ARGUMENT
    host.close()


def test_released_handles_stay_recognisable_but_bounded() -> None:
    host = epabi.Host(hardware=[])
    ptr = host.handles.issue(object(), "OrtValue*")
    host.handles.drop(ptr)
    assert "has been released" in host.handles.explain(ptr, epabi.OrtValue)
    for _ in range(TOMBSTONES + 10):
        host.handles.drop(host.handles.issue(object(), "OrtValue*"))
    assert PROCESS_HANDLES.tombstone_count() == TOMBSTONES
