"""Sessions through the emulated host on the software adapter: partitioning, results, IOBinding, bad input."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import epabi
from epabi.models import mlp, sample_inputs

EP = "EpAbiExecutionProvider"


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
           inits: list[onnx.TensorProto] | None = None, opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _session(host: epabi.Host, model: onnx.ModelProto, config: dict[str, str] | None = None,
             options: dict[str, str] | None = None) -> epabi.InferenceSession:
    so = epabi.SessionOptions()
    for k, v in (config or {}).items():
        so.add_session_config_entry(k, v)
    so.add_provider_for_devices(host.get_ep_devices(), options)
    return epabi.InferenceSession(model, so)


def test_mlp_matches_reference_and_runs_on_our_ep(host: epabi.Host) -> None:
    model = mlp(layers=4, width=32, batch=3)
    feeds = sample_inputs(model, seed=7)
    expected = ReferenceEvaluator(model).run(None, feeds)[0]
    with _session(host, model) as session:
        assert session.get_providers() == [EP, "CPUExecutionProvider"]
        assert set(session.node_assignment.values()) == {EP}, session.node_assignment
        for _ in range(3):  # repeated runs reuse the arena and must give the same numbers
            (out,) = session.run(None, feeds)
            np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert host.trace.count("OrtEp::Compile") == 1


def test_unclaimed_op_between_claimed_ops_partitions_without_cycles(host: epabi.Host) -> None:
    # Add -> (Softplus: no kernel) -> Mul, plus a branch Add -> Mul: two groups around the CPU node
    nodes = [helper.make_node("Add", ["x", "x"], ["a"], name="add"),
             helper.make_node("Softplus", ["a"], ["s"], name="softplus"),
             helper.make_node("Mul", ["s", "a"], ["y"], name="mul")]
    vi = [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])]
    model = _model(nodes, vi, [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    with _session(host, model) as session:
        assignment = session.node_assignment
        assert assignment["softplus"] == "CPUExecutionProvider"
        (y,) = session.run(None, {"x": x})
    np.testing.assert_allclose(y, ReferenceEvaluator(model).run(None, {"x": x})[0], rtol=1e-6)
    if assignment["add"] == EP and assignment["mul"] == EP:
        assert host.trace.count("OrtEp::Compile") >= 1


def test_force_cpu_nodes_option(host: epabi.Host) -> None:
    model = mlp(layers=2, width=8)
    with _session(host, model, options={"force_cpu_nodes": "matmul0,add1"}) as session:
        assert session.node_assignment["matmul0"] == "CPUExecutionProvider"
        assert session.node_assignment["add1"] == "CPUExecutionProvider"
        assert session.node_assignment["matmul1"] == EP
        feeds = sample_inputs(model)
        np.testing.assert_allclose(session.run(None, feeds)[0], ReferenceEvaluator(model).run(None, feeds)[0],
                                   rtol=1e-5, atol=1e-6)


def test_io_binding_writes_into_bound_output(host: epabi.Host) -> None:
    model = mlp(layers=2, width=16)
    feeds = sample_inputs(model)
    expected = ReferenceEvaluator(model).run(None, feeds)[0]
    with _session(host, model) as session:
        x = epabi.OrtValue.ortvalue_from_numpy(feeds["x"])
        y = epabi.OrtValue.ortvalue_from_shape_and_type([1, 16], np.float32)
        address = y.data_ptr()
        binding = session.io_binding()
        binding.bind_ortvalue_input("x", x)
        binding.bind_ortvalue_output("y", y)
        session.run_with_iobinding(binding)
        np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5, atol=1e-6)
        doubled = feeds["x"] * 2
        expected2 = ReferenceEvaluator(model).run(None, {"x": doubled})[0]
        x.update_inplace(doubled)  # x shares feeds["x"]'s buffer (as in onnxruntime): that array changes too
        session.run_with_iobinding(binding)
        np.testing.assert_allclose(y.numpy(), expected2, rtol=1e-5, atol=1e-6)
        assert y.data_ptr() == address
        assert binding.get_outputs()[0] is y


@pytest.mark.parametrize(
    ("feeds", "text"),
    [
        ({"x": np.zeros((1, 8), np.float64)}, "Unexpected input data type"),
        ({"x": np.zeros((2, 8), np.float32)}, "invalid dimensions for input: x"),
        ({"x": np.zeros((8,), np.float32)}, "Invalid rank for input: x"),
        ({"x": np.zeros((1, 8), np.float32), "z": np.zeros(1, np.float32)}, "Invalid input name: z"),
    ],
)
def test_bad_feeds_are_clear_errors(host: epabi.Host, feeds: dict[str, np.ndarray], text: str) -> None:
    with _session(host, mlp(layers=1, width=8)) as session:
        with pytest.raises(epabi.OrtStatusError, match=text) as info:
            session.run(None, feeds)
        assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT


def test_missing_feed_is_a_value_error(host: epabi.Host) -> None:
    """As onnxruntime's Python binding, run() refuses a feed without a required input before the run starts."""
    with _session(host, mlp(layers=1, width=8)) as session:
        with pytest.raises(ValueError, match=r"Required inputs \(\['x'\]\) are missing from input feed \(\[\]\)"):
            session.run(None, {})


def test_nan_propagates(host: epabi.Host) -> None:
    model = mlp(layers=1, width=4)
    x = np.array([[np.nan, 1, 2, 3]], np.float32)
    with _session(host, model) as session:
        (y,) = session.run(None, {"x": x})
    assert np.isnan(y).all()  # every output reads the NaN through the matmul


def test_unknown_op_is_a_clear_error(host: epabi.Host) -> None:
    nodes = [helper.make_node("NoSuchOp", ["x"], ["y"], domain="com.example")]
    model = _model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [1])],
                   [helper.make_tensor_value_info("y", T.FLOAT, [1])])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices())
    with pytest.raises(epabi.OrtStatusError, match="NoSuchOp"):
        epabi.InferenceSession(model, so)


def test_truncated_and_missing_model_files(host: epabi.Host, tmp_path) -> None:
    data = mlp(layers=2, width=8).SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(epabi.OrtStatusError) as info:
        epabi.InferenceSession(str(path))
    assert info.value.code in (epabi.OrtErrorCode.INVALID_PROTOBUF, epabi.OrtErrorCode.INVALID_GRAPH)
    with pytest.raises(epabi.OrtStatusError) as info:
        epabi.InferenceSession(str(tmp_path / "missing.onnx"))
    assert info.value.code == epabi.OrtErrorCode.NO_SUCHFILE


def test_session_close_releases_everything(host: epabi.Host) -> None:
    from epabi.values import OrtValue

    model = mlp(layers=2, width=8)
    before = len(host.handles.live(object))
    with _session(host, model) as session:
        session.run(None, sample_inputs(model))
    assert len(host.handles.live(object)) == before
    assert host.handles.live(OrtValue) == []
    assert "OrtEp::ReleaseNodeComputeInfos" in host.trace and host.trace[-1] == "OrtEpFactory::ReleaseEp"


def test_initializer_constant_reaches_kernel(host: epabi.Host) -> None:
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])],
                   [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", T.FLOAT, [2, 4])], [numpy_helper.from_array(w, "w")])
    x = np.ones((2, 3), np.float32)
    with _session(host, model) as session:
        np.testing.assert_allclose(session.run(None, {"x": x})[0], x @ w)


@pytest.fixture
def device_memory_host(library_path: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[epabi.Host]:
    """The software adapter with its own device memory (EPABI_SOFTWARE_DEVICE_MEMORY=device)."""
    monkeypatch.setenv("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")
    monkeypatch.setenv("EPABI_SOFTWARE_DEVICE_MEMORY", "device")
    with epabi.Host(hardware=[epabi.cpu_device()]) as h:
        h.register_execution_provider_library("epabi", library_path)
        yield h


def test_host_memory_mode_needs_no_copies(host: epabi.Host) -> None:
    model = mlp(layers=2, width=8)
    with _session(host, model) as session:
        session.run(None, sample_inputs(model))
        assert session.allocator_stats() == {}
    assert "OrtDataTransferImpl::CopyTensors" not in host.trace and "OrtEpFactory::CreateAllocator" not in host.trace


def test_device_memory_goes_through_plugin_allocator_and_data_transfer(device_memory_host: epabi.Host) -> None:
    host = device_memory_host
    model = mlp(layers=3, width=16)
    feeds = sample_inputs(model)
    (dev,) = host.get_ep_devices()
    memory = dev.memory_info(epabi.OrtDeviceMemoryType.DEFAULT)
    assert memory is not None and memory.name == "EpAbi_Software"
    with _session(host, model) as session:
        assert "OrtEpFactory::CreateAllocator" in host.trace
        # the plans uploaded their constants into the device's memory at Compile, as a GPU's weights are
        constants = session.allocator_stats()["InUse"]
        assert int(constants) >= sum(numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
        session.run(None, feeds)  # warm-up: arena chunks reserved
        warm = session.allocator_stats()
        assert int(warm["NumAllocs"]) > 0 and int(warm["NumReserves"]) > 0
        copies = host.trace.count("OrtDataTransferImpl::CopyTensors")
        for _ in range(5):
            np.testing.assert_allclose(session.run(None, feeds)[0], ReferenceEvaluator(model).run(None, feeds)[0],
                                       rtol=1e-5, atol=1e-6)
        stats = session.allocator_stats()
        # chunks are reused across runs: no new reservations, same footprint, more allocations served
        assert stats["NumReserves"] == warm["NumReserves"]
        assert stats["TotalAllocated"] == warm["TotalAllocated"]
        assert int(stats["NumAllocs"]) > int(warm["NumAllocs"])
        # only the run's input and output cross each run: the plan holds its own copies of the constants
        # (the EP fuses with drop_constant_initializers), so no weight ever goes through the data transfer
        assert host.trace.count("OrtDataTransferImpl::CopyTensors") - copies == 5 * 2
        assert copies == 2  # the warm-up run: its input in, its output out
        assert stats["InUse"] == constants  # at rest every per-run buffer went back to the arena
    assert host.trace[-1] == "OrtEpFactory::ReleaseEp"


def test_device_memory_mode_matches_host_mode(device_memory_host: epabi.Host) -> None:
    # the same partitioned model (CPU node in the middle) gives the same numbers when every crossing goes
    # through the plugin's data transfer
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
             helper.make_node("Softplus", ["a"], ["s"], name="softplus"),
             helper.make_node("Add", ["s", "a"], ["y"], name="add")]
    w = np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)
    model = _model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [3, 4])],
                   [helper.make_tensor_value_info("y", T.FLOAT, [3, 4])], [numpy_helper.from_array(w, "w")])
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    with _session(device_memory_host, model) as session:
        assert session.node_assignment["softplus"] == "CPUExecutionProvider"
        (y,) = session.run(None, {"x": x})
    np.testing.assert_allclose(y, ReferenceEvaluator(model).run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_gather_out_of_range_index_is_an_error(host: epabi.Host) -> None:
    model = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=0)],
                   [helper.make_tensor_value_info("x", T.FLOAT, [3, 2]),
                    helper.make_tensor_value_info("i", T.INT64, [2])],
                   [helper.make_tensor_value_info("y", T.FLOAT, [2, 2])])
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    with _session(host, model) as session:
        assert session.node_assignment["Gather_0"] == EP
        np.testing.assert_array_equal(session.run(None, {"x": x, "i": np.array([2, -3])})[0], x[[2, -3]])
        with pytest.raises(epabi.OrtStatusError, match=r"index 3 at position 1 is out of range \[-3, 3\)") as info:
            session.run(None, {"x": x, "i": np.array([0, 3])})
        assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT


def test_unregistering_the_library_closes_its_sessions(library_path: str, software_adapter: None) -> None:
    host = epabi.Host(hardware=[epabi.cpu_device()])
    host.register_execution_provider_library("epabi", library_path)
    session = _session(host, mlp(layers=1, width=4))
    host.unregister_execution_provider_library("epabi")  # ORT would crash later; epabi closes the session
    with pytest.raises(epabi.OrtStatusError, match="session is closed"):
        session.run(None, {"x": np.zeros((1, 4), np.float32)})


def test_relu_keeps_nan_and_integer_division_by_zero_is_an_error(host: epabi.Host) -> None:
    relu = _model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", T.FLOAT, [3])],
                  [helper.make_tensor_value_info("y", T.FLOAT, [3])])
    with _session(host, relu) as session:
        y = session.run(None, {"x": np.array([np.nan, -1, 2], np.float32)})[0]
    assert np.isnan(y[0]) and y[1] == 0 and y[2] == 2
    div = _model([helper.make_node("Div", ["a", "b"], ["c"])],
                 [helper.make_tensor_value_info("a", T.INT64, [2]), helper.make_tensor_value_info("b", T.INT64, [2])],
                 [helper.make_tensor_value_info("c", T.INT64, [2])])
    with _session(host, div) as session:
        assert session.node_assignment["Div_0"] == EP
        out = session.run(None, {"a": np.array([7, -7]), "b": np.array([2, 2])})[0]
        np.testing.assert_array_equal(out, [3, -3])  # C-style truncation, as ORT's CPU EP
        with pytest.raises(epabi.OrtStatusError, match="integer division by zero"):
            session.run(None, {"a": np.array([7, 1]), "b": np.array([2, 0])})


def test_io_binding_refuses_mismatched_outputs_and_null_inputs(host: epabi.Host) -> None:
    model = mlp(layers=1, width=4)
    with _session(host, model) as session:
        binding = session.io_binding()
        with pytest.raises(TypeError, match="'y' is float32"):
            binding.bind_ortvalue_output("y", epabi.OrtValue.ortvalue_from_shape_and_type([1, 4], np.int32))
        with pytest.raises(ValueError, match="buffer_ptr is NULL"):
            binding.bind_input("x", "cpu", 0, np.float32, [1, 4], 0)
        binding.bind_cpu_input("x", np.ones((1, 4), np.float32))
        binding.bind_ortvalue_output("y", epabi.OrtValue.ortvalue_from_shape_and_type([4, 1], np.float32))
        with pytest.raises(epabi.OrtStatusError, match=r"bound output 'y' is float32\[4, 1\]"):
            session.run_with_iobinding(binding)


def test_output_that_is_an_input_is_a_copy(host: epabi.Host) -> None:
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", T.FLOAT, [2]), helper.make_tensor_value_info("x", T.FLOAT, [2])])
    x = np.array([1.0, -1.0], np.float32)
    with _session(host, model) as session:
        _, x_out = session.run(None, {"x": x})
    x_out[0] = 42
    assert x[0] == 1.0


def test_onnxruntime_style_keywords(host: epabi.Host) -> None:
    # a plugin EP named in providers is looked up in the session's host (onnxruntime: its one environment)
    with pytest.warns(UserWarning, match="not in available provider names"), \
            pytest.raises(epabi.UnknownProviderError, match="^Unknown Provider Type: EpAbiExecutionProvider$"):
        epabi.InferenceSession(mlp(layers=1, width=4), providers=["EpAbiExecutionProvider"])
    with epabi.InferenceSession(mlp(layers=1, width=4), providers=["CPUExecutionProvider"], enable_fallback=0) as s:
        assert s.get_providers() == ["CPUExecutionProvider"]
        with pytest.raises(TypeError, match="RunOptions"):
            s.run(None, {"x": np.zeros((1, 4), np.float32)}, run_options="gpu_graph_id=1")


@pytest.mark.parametrize("options", [{"enable_cuda_graph": 1}, {"enable_cuda_graph": None}, {1: "1"},
                                     [("enable_cuda_graph", "1")]])
def test_add_provider_for_devices_takes_str_options_only(host: epabi.Host, options: object) -> None:
    # onnxruntime 1.32.0's binding takes dict[str, str]: ints, None and pairs are a TypeError there too
    with pytest.raises(TypeError, match="add_provider_for_devices"):
        epabi.SessionOptions().add_provider_for_devices(host.get_ep_devices(), options)  # type: ignore[arg-type]


@pytest.mark.parametrize("devices", [["not a device"], "x", (d for d in [])])
def test_add_provider_for_devices_takes_a_sequence_of_ep_devices(host: epabi.Host, devices: object) -> None:
    with pytest.raises(TypeError, match="add_provider_for_devices"):
        epabi.SessionOptions().add_provider_for_devices(devices, {})  # type: ignore[arg-type]
    so = epabi.SessionOptions()
    so.add_provider_for_devices(tuple(host.get_ep_devices()), {})  # a tuple is a sequence, as in onnxruntime
    assert so.provider_devices == host.get_ep_devices()


def test_the_same_ep_added_twice_fails_session_creation(host: epabi.Host) -> None:
    # onnxruntime 1.32.0: "[ONNXRuntimeError] : 1 : FAIL : Provider EpAbiExecutionProvider has already been
    # registered." when the session is created (the second call's options are not silently taken instead)
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {})
    so.add_provider_for_devices(host.get_ep_devices(), {"force_cpu_nodes": "relu0"})
    mark = len(host.trace)
    with pytest.raises(epabi.OrtStatusError, match=f"Provider {epabi.get_ep_name()} has already been registered") \
            as info:
        epabi.InferenceSession(mlp(layers=1, width=4), so)
    assert info.value.code == epabi.OrtErrorCode.FAIL
    assert "OrtEpFactory::CreateEp" not in host.trace[mark:]


def _identity(elem_type: int, shape: list[int] | None) -> onnx.ModelProto:
    return _model([helper.make_node("Identity", ["x"], ["y"], name="id")], [helper.make_tensor_value_info(
        "x", elem_type, shape)], [helper.make_tensor_value_info("y", elem_type, shape)])


@pytest.mark.parametrize(("elem_type", "feed", "want"), [
    (T.FLOAT, [1, 2], np.array([1, 2], np.float32)), (T.FLOAT, [1.5, 2.5], np.array([1.5, 2.5], np.float32)),
    (T.FLOAT, [True, False], np.array([1, 0], np.float32)), (T.FLOAT, ["1", "2"], np.array([1, 2], np.float32)),
    (T.INT64, [1.5, 2.5], np.array([1, 2], np.int64)), (T.BOOL, [1, 0], np.array([True, False]))])
def test_a_list_feed_takes_the_inputs_element_type(host: epabi.Host, elem_type: int, feed: list, want: np.ndarray
                                                   ) -> None:
    # onnxruntime 1.24.4 and 1.32.0 make a list into a tensor of the input's type (an array keeps its own dtype)
    with _session(host, _identity(elem_type, [2])) as session:
        (out,) = session.run(None, {"x": feed})
    assert out.dtype == want.dtype
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("feed", [1.5, 1, np.float32(2), (1.0, 2.0), ["a", "b"], [[1.0], [1.0, 2.0]]])
def test_feeds_onnxruntime_cannot_make_a_tensor_of_are_refused(host: epabi.Host, feed: object) -> None:
    # 1.32.0: "Unable to handle object of type <class 'float'>", "Input must be a list of dictionaries or a single
    # numpy array", "Could not create tensor from given input list": RuntimeErrors, as OrtStatusError is
    shape: list[int] = [2] if isinstance(feed, list | tuple) else []
    with _session(host, _identity(T.FLOAT, shape)) as session:
        with pytest.raises(epabi.OrtStatusError, match="input 'x'") as info:
            session.run(None, {"x": feed})
    assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT


def test_a_rank_0_input_takes_any_shape_as_in_onnxruntime(host: epabi.Host) -> None:
    # ORT checks the shape of a feed only against a model input of rank 1 or more (1.24.4 and 1.32.0 run a [2]
    # array for a scalar input, warning only about the output's shape)
    with _session(host, _identity(T.FLOAT, [])) as session:
        (out,) = session.run(None, {"x": np.array([1.5, 2], np.float32)})
        np.testing.assert_array_equal(out, [1.5, 2])
    with _session(host, _identity(T.FLOAT, [2])) as session:
        with pytest.raises(epabi.OrtStatusError, match="Invalid rank for input: x Got: 0 Expected: 1"):
            session.run(None, {"x": np.array(1.5, np.float32)})


def test_options_objects_have_onnxruntimes_fields_and_no_others() -> None:
    # onnxruntime 1.32.0's defaults; a misspelt field is an AttributeError there (pybind11 classes have no
    # __dict__), so it must not be silently kept here
    so = epabi.SessionOptions()
    assert (so.intra_op_num_threads, so.inter_op_num_threads, so.log_severity_level, so.logid,
            so.optimized_model_filepath, so.enable_mem_pattern, so.use_deterministic_compute) == (0, 0, -1, "", "",
                                                                                                 True, False)
    so.intra_op_num_threads = 2
    assert so.intra_op_num_threads == 2
    with pytest.raises(AttributeError):
        so.enable_profilling = True  # type: ignore[attr-defined]
    ro = epabi.RunOptions()
    assert (ro.terminate, ro.log_severity_level, ro.logid, ro.only_execute_path_to_fetches) == (False, -1, "", False)
    with pytest.raises(AttributeError):
        ro.terminated = True  # type: ignore[attr-defined]


def test_a_run_with_the_terminate_flag_fails_as_in_onnxruntime(host: epabi.Host) -> None:
    model = mlp(layers=1, width=4)
    ro = epabi.RunOptions()
    ro.terminate = True
    mark = len(host.trace)
    with _session(host, model) as session:
        with pytest.raises(epabi.OrtStatusError, match="Exiting due to terminate flag being set to true") as info:
            session.run(None, {"x": np.zeros((1, 4), np.float32)}, ro)
        assert info.value.code == epabi.OrtErrorCode.FAIL
        # ORT's executor checks the flag before each node: the EP is started and ended, nothing computed
        calls = [c for c in host.trace[mark:] if c.startswith(("OrtEp::OnRun", "OrtNodeComputeInfo::Compute"))]
        assert calls == ["OrtEp::OnRunStart", "OrtEp::OnRunEnd"]
        ro.terminate = False
        session.run(None, {"x": np.zeros((1, 4), np.float32)}, ro)


def test_run_with_ort_values_as_in_onnxruntime(host: epabi.Host) -> None:
    model = mlp(layers=2, width=4, batch=3)
    feeds = sample_inputs(model, seed=5)
    with _session(host, model) as session:
        (want,) = session.run(None, feeds)
        (got,) = session.run_with_ort_values(None, {k: epabi.OrtValue.ortvalue_from_numpy(v) for k, v in feeds.items()})
        assert isinstance(got, epabi.OrtValue) and got.data_type() == "tensor(float)" and got.shape() == [3, 4]
        np.testing.assert_array_equal(got.numpy(), want)
        with pytest.raises(TypeError, match="not OrtValues"):  # onnxruntime 1.32.0 fails on arrays too
            session.run_with_ort_values(None, feeds)
        with pytest.raises(ValueError, match="Required inputs"):  # as onnxruntime 1.32.0's Python binding
            session.run_with_ort_values(["y"], {})
    assert epabi.OrtValue.ortvalue_from_numpy(np.zeros(2, np.int64)).data_type() == "tensor(int64)"


def test_string_tensors_through_the_cpu_fallback(host: epabi.Host) -> None:
    model = _model([helper.make_node("Identity", ["s"], ["t"])], [helper.make_tensor_value_info("s", T.STRING, [2])],
                   [helper.make_tensor_value_info("t", T.STRING, [2])])
    with _session(host, model) as session:
        assert session.node_assignment["Identity_0"] == "CPUExecutionProvider"  # strings never go to the EP
        (out,) = session.run(None, {"s": np.array(["ab", "c"])})
    assert out.dtype == object and list(out) == ["ab", "c"]


@pytest.mark.parametrize("relu_input_is_output", [False, True])
def test_add_relu_fusion_matches_reference(host: epabi.Host, caplog: pytest.LogCaptureFixture,
                                           relu_input_is_output: bool) -> None:
    # Add -> Relu becomes one launch with a Relu epilogue, unless the Add's result is also read elsewhere (here:
    # a graph output); NaN must stay NaN through the fused epilogue, negatives become 0
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu"),
             helper.make_node("Sub", ["y", "b"], ["z"], name="sub")]
    outputs = [helper.make_tensor_value_info("z", T.FLOAT, [2, 3])]
    if relu_input_is_output:
        outputs.append(helper.make_tensor_value_info("s", T.FLOAT, [2, 3]))
    model = _model(nodes, [helper.make_tensor_value_info("a", T.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("b", T.FLOAT, [3])], outputs)
    a = np.array([[-1.0, 2.0, np.nan], [0.5, -3.0, 4.0]], np.float32)
    b = np.array([0.25, -0.5, 1.0], np.float32)
    expected = ReferenceEvaluator(model).run(None, {"a": a, "b": b})
    with caplog.at_level("DEBUG"), _session(host, model) as session:
        assert set(session.node_assignment.values()) == {EP}
        got = session.run(None, {"a": a, "b": b})
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)
    compiled = [r.getMessage() for r in caplog.records if "compiled '" in r.getMessage()]
    fused = 0 if relu_input_is_output else 1
    assert compiled and f"{fused} activation nodes fused" in compiled[0], compiled
