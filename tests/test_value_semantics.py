"""ONNX Runtime's value, memory and model-load semantics in epabi's host, checked against real onnxruntime.

CPU ``OrtValue``s share the numpy buffer; buffers the host allocates for a run are gone after it; a dim
stored as -1 is dynamic; opsets above the release's maximum and node inputs nothing provides are refused with
ORT's codes.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import epabi
from epabi.freed_buffers import FreedBuffers
from real_ort import MIN, NEWEST, run_json

SHARING = """
import numpy as np
a = np.zeros((2, 3), np.float32)
v = ort.OrtValue.ortvalue_from_numpy(a)
a[0, 0] = 5
b = np.zeros((3, 2), np.float32).T
w = ort.OrtValue.ortvalue_from_numpy(b)
b[0, 0] = 7
r = np.zeros(4, np.int64)
r.flags.writeable = False
ro = ort.OrtValue.ortvalue_from_numpy(r)
view = v.numpy()
view[0, 1] = 9
emit(shared=float(v.numpy()[0, 0]), non_contiguous=float(w.numpy()[0, 0]), same_address=v.data_ptr() == a.ctypes.data,
     readonly_shared=ro.data_ptr() == r.ctypes.data, numpy_writes_back=float(a[0, 1]))
"""


def _sharing_here() -> dict:
    a = np.zeros((2, 3), np.float32)
    v = epabi.OrtValue.ortvalue_from_numpy(a)
    a[0, 0] = 5
    b = np.zeros((3, 2), np.float32).T
    w = epabi.OrtValue.ortvalue_from_numpy(b)
    b[0, 0] = 7
    r = np.zeros(4, np.int64)
    r.flags.writeable = False
    ro = epabi.OrtValue.ortvalue_from_numpy(r)
    view = v.numpy()
    view[0, 1] = 9
    return {"shared": float(v.numpy()[0, 0]), "non_contiguous": float(w.numpy()[0, 0]),
            "same_address": v.data_ptr() == a.ctypes.data, "readonly_shared": ro.data_ptr() == r.ctypes.data,
            "numpy_writes_back": float(a[0, 1])}


def test_cpu_ortvalue_shares_the_numpy_buffer() -> None:
    assert _sharing_here() == {"shared": 5.0, "non_contiguous": 0.0, "same_address": True, "readonly_shared": True,
                               "numpy_writes_back": 9.0}


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_cpu_ortvalue_sharing_matches_real_onnxruntime(version: str) -> None:
    result, _, _ = run_json(version, SHARING)
    assert result == _sharing_here()


# What onnxruntime's OrtValue makes of and writes from (run here with ``ort`` being onnxruntime or epabi); an
# update_inplace of another dtype is left out: ORT reinterprets the bytes, epabi refuses (an intended difference).
CONSTRUCTION = """
import json
import numpy as np


def attempt(f):
    try:
        return json.loads(json.dumps(f()))
    except Exception:  # the outcome is compared, not the message
        return "refused"


v = ort.OrtValue.ortvalue_from_numpy(np.zeros(6, np.float32))
emit(from_list=attempt(lambda: ort.OrtValue.ortvalue_from_numpy([1.0, 2.0]).shape()),
     from_scalar=attempt(lambda: ort.OrtValue.ortvalue_from_numpy(np.float32(3)).shape()),
     from_0d=attempt(lambda: ort.OrtValue.ortvalue_from_numpy(np.array(3, np.float32)).shape()),
     update_reshaped=attempt(lambda: (v.update_inplace(np.arange(6, dtype=np.float32).reshape(2, 3)),
                                      v.numpy().tolist(), v.shape())[1:]),
     update_list=attempt(lambda: v.update_inplace([1.0] * 6)),
     update_count=attempt(lambda: v.update_inplace(np.zeros(7, np.float32))),
     update_ortvalue=attempt(lambda: (v.update_inplace(ort.OrtValue.ortvalue_from_numpy(np.full(6, 2, np.float32))),
                                      v.numpy().tolist())[1]))
"""


def _construction_here() -> dict:
    result: dict = {}
    exec(CONSTRUCTION, {"ort": epabi, "emit": result.update})  # noqa: S102 - the script real ORT runs too
    return result


def test_ortvalue_construction_and_update_inplace_take_what_onnxruntime_takes() -> None:
    assert _construction_here() == {"from_list": "refused", "from_scalar": "refused", "from_0d": [],
                                    "update_reshaped": [[0, 1, 2, 3, 4, 5], [6]], "update_list": "refused",
                                    "update_count": "refused", "update_ortvalue": [2, 2, 2, 2, 2, 2]}


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_ortvalue_construction_matches_real_onnxruntime(version: str) -> None:
    result, _, _ = run_json(version, CONSTRUCTION)
    here = _construction_here()
    if version == MIN:  # 1.24.4's update_inplace takes arrays only (1.32.0 also OrtValues, as epabi)
        assert result.pop("update_ortvalue") == "refused"
        here.pop("update_ortvalue")
    assert result == here


def _relu(shape: list[int], opsets: list[tuple[str, int]]) -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", T.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = 8
    return model


def test_a_dim_stored_as_minus_one_is_dynamic(host: epabi.Host) -> None:
    model = _relu([-1, 3], [("", 17)])
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices())
    with epabi.InferenceSession(model, so) as sess:
        assert sess.get_inputs()[0].shape == [None, 3]  # as onnxruntime shows it
        for rows in (1, 5):
            x = np.linspace(-1, 1, rows * 3, dtype=np.float32).reshape(rows, 3)
            np.testing.assert_array_equal(sess.run(None, {"x": x})[0], np.maximum(x, 0))


@pytest.mark.parametrize(("api", "opset", "refused"), [(24, 25, False), (24, 26, True), (25, 26, False),
                                                       (epabi.NEWEST_EMULATED, 99, True)])
def test_opsets_above_the_release_maximum_are_refused(software_adapter: None, library_path: str, api: int, opset: int,
                                                      refused: bool) -> None:
    maximum = epabi.versions.behaviour(api).max_onnx_opset
    with epabi.Host(api_version=api, hardware=[epabi.cpu_device()]) as h:
        h.register_execution_provider_library("epabi", library_path)
        so = epabi.SessionOptions()
        so.add_provider_for_devices(h.get_ep_devices())
        model = _relu([2, 3], [("", opset)])
        if not refused:
            epabi.InferenceSession(model, so).close()
            return
        with pytest.raises(epabi.OrtStatusError) as err:
            epabi.InferenceSession(model, so)
        assert err.value.code == epabi.OrtErrorCode.FAIL
        assert f"Opset {opset} is under development" in err.value.message
        assert f"Current official support for domain ai.onnx is till opset {maximum}." in err.value.message


def test_ml_domain_above_5_is_refused() -> None:
    with pytest.raises(epabi.OrtStatusError, match="domain ai.onnx.ml is till opset 5") as err:
        epabi.InferenceSession(_relu([2, 3], [("", 17), ("ai.onnx.ml", 6)]))
    assert err.value.code == epabi.OrtErrorCode.FAIL


def test_a_node_input_nothing_provides_is_invalid_argument() -> None:
    graph = helper.make_graph([helper.make_node("Add", ["x", "nope"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(epabi.OrtStatusError) as err:
        epabi.InferenceSession(model)
    assert err.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
    assert "Invalid model. Node input 'nope' is not a graph input, initializer, or output of a previous node." \
        in err.value.message


def _graph(nodes: list[onnx.NodeProto], initializer: list[onnx.TensorProto] = ()) -> onnx.ModelProto:
    model = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                                                [helper.make_tensor_value_info("y", T.FLOAT, [2])],
                                                initializer=list(initializer)),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


#: Main graphs ORT's Graph::Resolve refuses with FAIL at load (1.24.4 and 1.32.0: "This is an invalid model.
#: Error: ..."), where epabi's host ran them, failed in the EP's Compile or raised a raw ValueError.
STRUCTURE_ERRORS = {
    "same_node_name": _graph([helper.make_node("Relu", ["x"], ["a"], name="n"),
                              helper.make_node("Neg", ["a"], ["y"], name="n")]),
    "produced_twice": _graph([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])]),
    "produces_an_input": _graph([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["y"], ["x"])]),
    "produces_an_initializer": _graph([helper.make_node("Relu", ["x"], ["b"]),
                                       helper.make_node("Add", ["b", "x"], ["y"])],
                                      [helper.make_tensor("b", T.FLOAT, [2], [1, 2])]),
    "cycle": _graph([helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
                     helper.make_node("Add", ["x", "b"], ["y"])]),
    "reads_its_own_output": _graph([helper.make_node("Add", ["x", "a"], ["a"]),
                                    helper.make_node("Relu", ["a"], ["y"])]),
}


@pytest.mark.parametrize("name", sorted(STRUCTURE_ERRORS))
def test_graphs_onnxruntime_cannot_resolve_are_refused_at_load(name: str) -> None:
    want = {"same_node_name": "two nodes with same node name (n).",
            "produced_twice": "Duplicate definition of name (y).",
            "produces_an_input": "Duplicate definition of name (x).",
            "produces_an_initializer": "Duplicate definition of name (b).", "cycle": "the graph is not acyclic.",
            "reads_its_own_output": "the graph is not acyclic."}[name]
    with pytest.raises(epabi.OrtStatusError) as err:
        epabi.InferenceSession(STRUCTURE_ERRORS[name])
    assert err.value.code == epabi.OrtErrorCode.FAIL
    assert err.value.message.endswith(f"failed:This is an invalid model. Error: {want}")


def test_nodes_out_of_topological_order_run_as_in_onnxruntime(host: epabi.Host) -> None:
    # a valid model whose nodes are not sorted: ORT orders them; the plugin must see producers first
    model = _graph([helper.make_node("Neg", ["a"], ["y"], name="neg"),
                    helper.make_node("Relu", ["x"], ["a"], name="relu")])
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {})
    with epabi.InferenceSession(model, so) as session:
        assert session.node_assignment == {"neg": epabi.get_ep_name(), "relu": epabi.get_ep_name()}
        (y,) = session.run(None, {"x": np.array([1, -2], np.float32)})
    np.testing.assert_array_equal(y, [-1, 0])
    assert [n.name for n in model.graph.node] == ["neg", "relu"]  # the caller's model is left as it was


def _overridable(ir_version: int) -> onnx.ModelProto:
    """y = x + b, b an initializer that is also a graph input (overridable from IR 4)."""
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", T.FLOAT, [2]), helper.make_tensor_value_info("b", T.FLOAT, [2])],
        [helper.make_tensor_value_info("y", T.FLOAT, [2])],
        initializer=[helper.make_tensor("b", T.FLOAT, [2], [10, 20])]),
        opset_imports=[helper.make_opsetid("", 17 if ir_version >= 4 else 8)])
    model.ir_version = ir_version
    return model


def test_an_initializer_that_is_a_graph_input_can_be_fed(host: epabi.Host) -> None:
    # onnxruntime 1.32.0 (IR >= 4): get_inputs() leaves b out, get_overridable_initializers() lists it, a feed
    # replaces its value and is checked like an input; IR 3 initializers are constants ("Invalid input name: b")
    x = np.array([1, -2], np.float32)
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {})
    with epabi.InferenceSession(_overridable(8), so) as session:
        assert [i.name for i in session.get_inputs()] == ["x"]
        assert [i.name for i in session.get_overridable_initializers()] == ["b"]
        assert session.node_assignment == {"add": epabi.get_ep_name()}
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], [11, 18])
        np.testing.assert_array_equal(session.run(None, {"x": x, "b": np.array([1, 1], np.float32)})[0], [2, -1])
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], [11, 18])  # the initializer again
        with pytest.raises(epabi.OrtStatusError, match="Got invalid dimensions for input: b"):
            session.run(None, {"x": x, "b": np.zeros(3, np.float32)})
    # with graph capture, a fed initializer is a binding like any input
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {"enable_cuda_graph": "1"})
    with epabi.InferenceSession(_overridable(8), so) as session:
        xv = epabi.OrtValue.ortvalue_from_numpy(x.copy())
        bv = epabi.OrtValue.ortvalue_from_numpy(np.ones(2, np.float32))
        y = epabi.OrtValue.ortvalue_from_numpy(np.zeros(2, np.float32))
        binding = session.io_binding()
        for name, value in (("x", xv), ("b", bv)):
            binding.bind_ortvalue_input(name, value)
        binding.bind_ortvalue_output("y", y)
        session.run_with_iobinding(binding)  # captured with b fed
        bv.update_inplace(np.array([5, 5], np.float32))
        session.run_with_iobinding(binding)
        np.testing.assert_array_equal(y.numpy(), [6, 3])
        binding.clear_binding_inputs()
        binding.bind_ortvalue_input("x", xv)
        with pytest.raises(epabi.StaleReplayError, match=r"input 'b': address 0x[0-9a-f]+ \(float32\[2\]\) -> none "
                                                         r"\(not fed: the initializer's own value\)"):
            session.run_with_iobinding(binding)
    with epabi.InferenceSession(_overridable(3)) as session:
        assert session.get_overridable_initializers() == []
        with pytest.raises(epabi.OrtStatusError, match="Invalid input name: b"):
            session.run(None, {"x": x, "b": np.zeros(2, np.float32)})


def test_a_run_must_request_an_output(host: epabi.Host) -> None:
    # ORT 1.24.4/1.32.0: INVALID_ARGUMENT "At least one output should be requested." for a model without outputs
    # and for an IOBinding without outputs
    empty = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["a"])], "g",
                                                [helper.make_tensor_value_info("x", T.FLOAT, [2])], []),
                              opset_imports=[helper.make_opsetid("", 17)])
    with epabi.InferenceSession(empty) as session:
        with pytest.raises(epabi.OrtStatusError, match="At least one output should be requested") as err:
            session.run(None, {"x": np.ones(2, np.float32)})
        assert err.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
    with epabi.InferenceSession(_relu([2], [("", 17)])) as session:
        binding = session.io_binding()
        binding.bind_cpu_input("x", np.ones(2, np.float32))
        with pytest.raises(epabi.OrtStatusError, match="At least one output should be requested"):
            session.run_with_iobinding(binding)


LOAD_ERRORS = """
import numpy as np
out = {}
for path in sys.argv[1:]:
    try:
        ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        out[path] = None
    except Exception as exc:
        out[path] = str(exc)
emit(**out)
"""


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_load_refusals_match_real_onnxruntime(tmp_path, version: str) -> None:
    dangling = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "nope"], ["y"])], "g", [helper.make_tensor_value_info("x", T.FLOAT, [2])],
        [helper.make_tensor_value_info("y", T.FLOAT, [2])]), opset_imports=[helper.make_opsetid("", 17)])
    dangling.ir_version = 8
    models = {"dangling": dangling, "opset99": _relu([2], [("", 99)]), "ml6": _relu([2], [("", 17), ("ai.onnx.ml", 6)]),
              **STRUCTURE_ERRORS}
    paths = {}
    for name, model in models.items():
        paths[name] = str(tmp_path / f"{name}.onnx")
        onnx.save(model, paths[name])
    real, _, _ = run_json(version, LOAD_ERRORS, args=list(paths.values()))
    api = min(int(version.split(".")[1]), epabi.NEWEST_EMULATED)
    with epabi.Host(api_version=api, hardware=[epabi.cpu_device()]) as host:
        for name, path in paths.items():
            so = epabi.SessionOptions()
            with pytest.raises(epabi.OrtStatusError) as err:
                epabi.InferenceSession(path, so, host=host)
            code = "2 : INVALID_ARGUMENT" if name == "dangling" else "1 : FAIL"
            assert f"[ONNXRuntimeError] : {code}" in real[path]
            tail = err.value.message.split("failed:", 1)[1].strip()
            assert tail.split(" Current official")[0] in real[path]


def test_freed_buffers_are_poisoned_and_writes_into_them_are_named() -> None:
    freed = FreedBuffers(limit=64)
    a, b = np.ones(4, np.float32), np.ones(8, np.int64)
    freed.free(a, "'a'", quarantine=True)
    freed.free(b, "'b'", quarantine=False)
    assert np.isnan(a).all() and (b == -1).all()
    assert freed.written() == []
    a[2] = 1.0  # a write after free
    assert freed.written() == ["'a'"]
    assert freed.written() == []  # reported once
    big = np.ones(32, np.float32)  # 128 bytes: past the limit, the oldest leave the quarantine
    freed.free(big, "'big'", quarantine=True)
    big[0] = 0
    assert freed.written() == []
