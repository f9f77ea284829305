"""Replays epabi's host refuses, and state bound as both an input and an output, on the software adapter.

Stale replays (issue 10, item 2): a captured graph reads and writes the addresses, and keeps the shapes and
shape-input values, of the run that captured it. Before a replay the host compares the call's bindings with
those and raises ``StaleReplayError`` naming the value, the id and what changed: new input or output buffers,
a new shape, two buffer sets alternating under one id, a plain ``run()`` (fresh output buffers), a graph input
feeding a Reshape shape or Slice starts changed in place. ``epabi.graph_capture.on_binding_change=recapture``
releases the graph and captures the new bindings instead; ``replay`` replays as ONNX Runtime does (stale).

Aliased state (item 4): ``state_out = state + 1`` with one buffer bound as ``state`` and ``state_out`` advances
once per call at any ``min_num_runs_before_cuda_graph_capture``, although the first call executes the run
min_runs + 1 times (ORT's loop), and a call that fails leaves the state as it was.

Real onnxruntime: tests/test_real_ort_replay_rules.py; the GPU: tests/test_gpu_replay_bindings.py.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import epabi
from epabi.shape_inputs import inputs_feeding_shape_inputs
from test_graph_capture import _add_model, _calls, _matmul_model, _run_opts

POLICY = "epabi.graph_capture.on_binding_change"


def _model(nodes: list, inputs: list, outputs: list, initializer: list = ()) -> onnx.ModelProto:
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializer)),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def state_model() -> onnx.ModelProto:
    """state_out = state + 1; state, state_out: float [4]."""
    return _model([helper.make_node("Add", ["state", "one"], ["state_out"], name="step")],
                  [helper.make_tensor_value_info("state", T.FLOAT, [4])],
                  [helper.make_tensor_value_info("state_out", T.FLOAT, [4])],
                  [helper.make_tensor("one", T.FLOAT, [1], [1.0])])


def reshape_model() -> onnx.ModelProto:
    """y = Relu(Reshape(x, shape)); x: float [2, 3], shape: int64 [2] (a graph input)."""
    return _model([helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
                   helper.make_node("Relu", ["r"], ["y"], name="relu")],
                  [helper.make_tensor_value_info("x", T.FLOAT, [2, 3]),
                   helper.make_tensor_value_info("shape", T.INT64, [2])],
                  [helper.make_tensor_value_info("y", T.FLOAT, ["a", "b"])])


def slice_model() -> onnx.ModelProto:
    """y = Slice(x, Cast(starts, int64), ends) along axis 0; x: float [6, 2], starts: int32 [1], ends: int64 [1]."""
    return _model([helper.make_node("Cast", ["starts"], ["s64"], name="cast", to=T.INT64),
                   helper.make_node("Slice", ["x", "s64", "ends"], ["y"], name="slice")],
                  [helper.make_tensor_value_info("x", T.FLOAT, [6, 2]),
                   helper.make_tensor_value_info("starts", T.INT32, [1]),
                   helper.make_tensor_value_info("ends", T.INT64, [1])],
                  [helper.make_tensor_value_info("y", T.FLOAT, ["n", 2])])


def _session(host: epabi.Host, model: onnx.ModelProto, config: dict[str, str] | None = None,
             **options: str) -> epabi.InferenceSession:
    so = epabi.SessionOptions()
    for key, value in (config or {}).items():
        so.add_session_config_entry(key, value)
    so.add_provider_for_devices(host.get_ep_devices(), {"enable_cuda_graph": "1", **options})
    session = epabi.InferenceSession(model, so)
    assert session.graph_capture.enabled
    return session


def _values(feeds: dict[str, np.ndarray], out_shapes: dict[str, list[int]]) -> tuple[dict, dict]:
    """Fresh input buffers (copies of ``feeds``) and NaN-filled output buffers."""
    ins = {name: epabi.OrtValue.ortvalue_from_numpy(np.array(a)) for name, a in feeds.items()}
    outs = {name: epabi.OrtValue.ortvalue_from_numpy(np.full(shape, np.nan, np.float32))
            for name, shape in out_shapes.items()}
    return ins, outs


def _binding(session: epabi.InferenceSession, ins: dict, outs: dict) -> epabi.IOBinding:
    binding = session.io_binding()
    for name, v in ins.items():
        binding.bind_ortvalue_input(name, v)
    for name, v in outs.items():
        binding.bind_ortvalue_output(name, v)
    return binding


def _policy(policy: str, graph_id: str | None = None) -> epabi.RunOptions:
    ro = _run_opts(graph_id)
    ro.add_run_config_entry(POLICY, policy)
    return ro


X = np.arange(6, dtype=np.float32).reshape(3, 2)
Y = np.full((3, 2), 10, np.float32)


# -- stale replays are refused ---------------------------------------------------------------------------------

def test_new_input_address_under_a_captured_id_is_refused(host: epabi.Host) -> None:
    with _session(host, _add_model()) as session:
        ins, outs = _values({"x": X, "y": Y}, {"z": [3, 2]})
        session.run_with_iobinding(_binding(session, ins, outs))  # captures id 0
        np.testing.assert_array_equal(outs["z"].numpy(), X + Y)
        moved = epabi.OrtValue.ortvalue_from_numpy(X * 2)
        outs["z"].update_inplace(np.full((3, 2), np.nan, np.float32))
        mark = len(host.trace)
        with pytest.raises(epabi.StaleReplayError) as info:
            session.run_with_iobinding(_binding(session, {"x": moved, "y": ins["y"]}, outs))
        err = info.value
        assert err.code == epabi.OrtErrorCode.INVALID_ARGUMENT and err.graph_id == 0
        old, new = hex(ins["x"].data_ptr()), hex(moved.data_ptr())
        assert err.changes == [("input 'x'", "address", old, new)]
        assert f"input 'x': address {old} -> {new}" in str(err) and "annotation id 0" in str(err)
        assert _calls(host, mark, "OrtEp::ReplayGraph") == 0  # refused before the replay
        assert np.isnan(outs["z"].numpy()).all()
        # the captured bindings still replay, with the data updated in place
        ins["x"].update_inplace(X * 3)
        session.run_with_iobinding(_binding(session, ins, outs))
        np.testing.assert_array_equal(outs["z"].numpy(), X * 3 + Y)


def test_new_output_address_under_a_captured_id_is_refused(host: epabi.Host) -> None:
    with _session(host, _add_model()) as session:
        ins, outs = _values({"x": X, "y": Y}, {"z": [3, 2]})
        session.run_with_iobinding(_binding(session, ins, outs))
        _, other = _values({}, {"z": [3, 2]})
        with pytest.raises(epabi.StaleReplayError, match="output 'z': address ") as info:
            session.run_with_iobinding(_binding(session, ins, other))
        assert info.value.changes == [("output 'z'", "address", hex(outs["z"].data_ptr()),
                                       hex(other["z"].data_ptr()))]
        assert np.isnan(other["z"].numpy()).all()


def test_a_new_shape_under_one_id_is_refused(host: epabi.Host) -> None:
    rng = np.random.default_rng(1)
    with _session(host, _matmul_model()) as session:
        a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
        ins, outs = _values({"A": a, "B": b}, {"C": [2, 4]})
        session.run_with_iobinding(_binding(session, ins, outs), _run_opts("7"))
        np.testing.assert_allclose(outs["C"].numpy(), a @ b, rtol=1e-5, atol=1e-6)
        big, big_out = _values({"A": rng.standard_normal((5, 3)).astype(np.float32), "B": b}, {"C": [5, 4]})
        with pytest.raises(epabi.StaleReplayError) as info:
            session.run_with_iobinding(_binding(session, {"A": big["A"], "B": ins["B"]}, big_out), _run_opts("7"))
        changes = {(value, what): (old, new) for value, what, old, new in info.value.changes}
        assert changes[("input 'A'", "shape")] == ([2, 3], [5, 3])
        assert changes[("output 'C'", "shape")] == ([2, 4], [5, 4])
        assert ("input 'B'", "address") not in changes and info.value.graph_id == 7
        assert "input 'A': address " in str(info.value) and "shape [2, 3] -> [5, 3]" in str(info.value)


def test_two_buffer_sets_alternating_under_one_id_are_refused(host: epabi.Host) -> None:
    with _session(host, _add_model()) as session:
        first = _values({"x": X, "y": Y}, {"z": [3, 2]})
        second = _values({"x": X + 1, "y": Y}, {"z": [3, 2]})
        b1, b2 = _binding(session, *first), _binding(session, *second)
        session.run_with_iobinding(b1)
        for _ in range(2):
            with pytest.raises(epabi.StaleReplayError, match="annotation id 0"):
                session.run_with_iobinding(b2)
            session.run_with_iobinding(b1)  # the first set still replays
        np.testing.assert_array_equal(first[1]["z"].numpy(), X + Y)
        assert np.isnan(second[1]["z"].numpy()).all()
        assert session.graph_capture.replays == 2


def test_one_id_per_buffer_set_replays_each_correctly(host: epabi.Host) -> None:
    # the remedy: an annotation id per buffer set (and per shape); each id captures its own set once
    with _session(host, _add_model()) as session:
        sets = {gid: _values({"x": X * int(gid), "y": Y}, {"z": [3, 2]}) for gid in ("1", "2")}
        bindings = {gid: _binding(session, *values) for gid, values in sets.items()}
        for step in range(4):
            for gid, (ins, outs) in sets.items():
                x = X * (step + 1) - int(gid)
                ins["x"].update_inplace(x)
                outs["z"].update_inplace(np.full((3, 2), np.nan, np.float32))
                session.run_with_iobinding(bindings[gid], _run_opts(gid))
                np.testing.assert_array_equal(outs["z"].numpy(), x + Y)
        assert session.graph_capture.replays == 6


def test_plain_run_under_an_id_captured_with_iobinding_is_refused(host: epabi.Host) -> None:
    # run() gets fresh output buffers from the host each call: a replay would write the captured ones instead
    with _session(host, _add_model()) as session:
        ins, outs = _values({"x": X, "y": Y}, {"z": [3, 2]})
        session.run_with_iobinding(_binding(session, ins, outs))
        with pytest.raises(epabi.StaleReplayError) as info:
            session.run(None, {"x": X, "y": Y})
        outputs = [c for c in info.value.changes if c[0] == "output 'z'"]
        assert outputs == [("output 'z'", "address", f"{hex(outs['z'].data_ptr())} (float32[3, 2])",
                            "none (the host allocates a fresh buffer: plain run() or an output bound without a "
                            "buffer)")]
        assert "plain run()" in str(info.value)
        # an output bound without a buffer is the same case
        binding = _binding(session, ins, {})
        binding.bind_output("z")
        with pytest.raises(epabi.StaleReplayError, match="output 'z': address "):
            session.run_with_iobinding(binding)


def test_a_reshape_shape_bound_as_graph_input_is_checked_by_value(host: epabi.Host) -> None:
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    with _session(host, reshape_model()) as session:
        ins, outs = _values({"x": x, "shape": np.array([3, 2], np.int64)}, {"y": [3, 2]})
        binding = _binding(session, ins, outs)
        session.run_with_iobinding(binding)
        session.run_with_iobinding(binding)  # a replay: same buffers, same shape value
        np.testing.assert_array_equal(outs["y"].numpy(), np.maximum(x, 0).reshape(3, 2))
        ins["shape"].update_inplace(np.array([1, 6], np.int64))  # same address, new value
        with pytest.raises(epabi.StaleReplayError) as info:
            session.run_with_iobinding(binding)
        assert info.value.changes == [("input 'shape'", "value", [3, 2], [1, 6])]
        assert "input 'shape': value (it feeds a shape input, read on the host) [3, 2] -> [1, 6]" in str(info.value)
        ins["shape"].update_inplace(np.array([3, 2], np.int64))
        ins["x"].update_inplace(-x)  # data inputs are not compared by value
        session.run_with_iobinding(binding)
        np.testing.assert_array_equal(outs["y"].numpy(), np.maximum(-x, 0).reshape(3, 2))


def test_slice_starts_through_a_cast_are_checked_by_value(host: epabi.Host) -> None:
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    with _session(host, slice_model(), min_num_runs_before_cuda_graph_capture="0") as session:
        ins, outs = _values({"x": x, "starts": np.array([1], np.int32), "ends": np.array([4], np.int64)},
                            {"y": [3, 2]})
        binding = _binding(session, ins, outs)
        session.run_with_iobinding(binding)
        np.testing.assert_array_equal(outs["y"].numpy(), x[1:4])
        ins["starts"].update_inplace(np.array([2], np.int32))
        with pytest.raises(epabi.StaleReplayError, match=r"input 'starts': value .* \[1\] -> \[2\]"):
            session.run_with_iobinding(binding)
        # recapture: the new starts give a new output shape, bound to a new buffer
        _, short = _values({}, {"y": [2, 2]})
        binding.bind_ortvalue_output("y", short["y"])
        session.run_with_iobinding(binding, _policy("recapture"))
        np.testing.assert_array_equal(short["y"].numpy(), x[2:4])


def test_inputs_feeding_shape_inputs() -> None:
    assert inputs_feeding_shape_inputs(reshape_model().graph.node, ["x", "shape"]) == ("shape",)
    assert inputs_feeding_shape_inputs(slice_model().graph.node, ["x", "starts", "ends"]) == ("starts", "ends")
    # through Shape only the shape matters (already compared): x is not a value-checked input
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["y"])]
    assert inputs_feeding_shape_inputs(nodes, ["x"]) == ()
    # a value computed from an input on the way: Add, then Expand's shape
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Expand", ["x", "s"], ["y"])]
    assert inputs_feeding_shape_inputs(nodes, ["x", "a", "b"]) == ("a", "b")
    assert inputs_feeding_shape_inputs(_add_model().graph.node, ["x", "y"]) == ()


# -- policies ---------------------------------------------------------------------------------------------------

def test_recapture_policy_releases_and_captures_the_new_bindings(host: epabi.Host) -> None:
    with _session(host, _add_model(), {POLICY: "recapture"}) as session:
        first = _values({"x": X, "y": Y}, {"z": [3, 2]})
        second = _values({"x": X * 5, "y": Y}, {"z": [3, 2]})
        b1, b2 = _binding(session, *first), _binding(session, *second)
        session.run_with_iobinding(b1)
        mark = len(host.trace)
        session.run_with_iobinding(b2)  # released, then 2 warm-up runs and the capture of the second set
        assert _calls(host, mark, "OrtEp::ReleaseCapturedGraph") == 1
        assert _calls(host, mark, "OrtEp::OnRunStart") == 3 and _calls(host, mark, "OrtEp::ReplayGraph") == 0
        np.testing.assert_array_equal(second[1]["z"].numpy(), X * 5 + Y)
        second[0]["x"].update_inplace(X * 7)
        mark = len(host.trace)
        session.run_with_iobinding(b2)  # a pure replay of the new capture
        assert _calls(host, mark, "OrtEp::ReplayGraph") == 1 and _calls(host, mark, "OrtEp::OnRunStart") == 0
        np.testing.assert_array_equal(second[1]["z"].numpy(), X * 7 + Y)
        first[0]["x"].update_inplace(X * 9)
        session.run_with_iobinding(b1)  # and back: captured once more
        np.testing.assert_array_equal(first[1]["z"].numpy(), X * 9 + Y)
        # a run option overrides the session's policy
        with pytest.raises(epabi.StaleReplayError):
            session.run_with_iobinding(b2, _policy("error"))


def test_recapture_needs_release_captured_graph(library_path: str, software_adapter: None,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # API 26 captures on the software adapter only in its own memory (host memory needs API 30)
    monkeypatch.setenv("EPABI_SOFTWARE_DEVICE_MEMORY", "device")
    with epabi.Host(api_version=26, hardware=[epabi.cpu_device()]) as host:
        host.register_execution_provider_library("epabi", library_path)
        with _session(host, _add_model()) as session:
            def device(a: np.ndarray) -> epabi.OrtValue:
                return epabi.OrtValue.ortvalue_from_numpy(a, "cuda", 0, host=host)

            ins = {"x": device(X), "y": device(Y)}
            session.run_with_iobinding(_binding(session, ins, {"z": device(np.zeros((3, 2), np.float32))}))
            with pytest.raises(epabi.StaleReplayError, match="recapture needs OrtEp::ReleaseCapturedGraph"):
                session.run_with_iobinding(_binding(session, ins, {"z": device(np.zeros((3, 2), np.float32))}),
                                           _policy("recapture"))
            del ins


def test_replay_policy_replays_stale_like_onnxruntime(host: epabi.Host) -> None:
    # what the check prevents: the replay reads the captured x and writes the captured z
    with _session(host, _add_model(), {POLICY: "replay"}) as session:
        first = _values({"x": X, "y": Y}, {"z": [3, 2]})
        second = _values({"x": X * 5, "y": Y}, {"z": [3, 2]})
        session.run_with_iobinding(_binding(session, *first))
        first[1]["z"].update_inplace(np.zeros((3, 2), np.float32))
        session.run_with_iobinding(_binding(session, *second))
        assert np.isnan(second[1]["z"].numpy()).all()  # the new output buffer was never written
        np.testing.assert_array_equal(first[1]["z"].numpy(), X + Y)  # the old one got the old inputs' sum


def test_unknown_policy_is_refused(host: epabi.Host) -> None:
    with pytest.raises(epabi.OrtStatusError, match=f"{POLICY}='sometimes': expected one of error, recapture, "
                                                   "replay") as info:
        _session(host, _add_model(), {POLICY: "sometimes"})
    assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
    with _session(host, _add_model()) as session:
        ins, outs = _values({"x": X, "y": Y}, {"z": [3, 2]})
        with pytest.raises(epabi.OrtStatusError, match=f"{POLICY}='Recapture'"):
            session.run_with_iobinding(_binding(session, ins, outs), _policy("Recapture"))


def test_release_captured_graph_forgets_the_bindings(host: epabi.Host) -> None:
    with _session(host, _add_model()) as session:
        first = _values({"x": X, "y": Y}, {"z": [3, 2]})
        second = _values({"x": X * 2, "y": Y}, {"z": [3, 2]})
        session.run_with_iobinding(_binding(session, *first))
        session.release_captured_graph(0)
        session.run_with_iobinding(_binding(session, *second))  # captures the second set, no refusal
        np.testing.assert_array_equal(second[1]["z"].numpy(), X * 2 + Y)
        with pytest.raises(epabi.StaleReplayError):
            session.run_with_iobinding(_binding(session, *first))


def test_an_unchanged_replay_calls_the_plugin_as_onnxruntime_does(host: epabi.Host) -> None:
    with _session(host, reshape_model()) as session:
        ins, outs = _values({"x": np.ones((2, 3), np.float32), "shape": np.array([3, 2], np.int64)}, {"y": [3, 2]})
        binding = _binding(session, ins, outs)
        session.run_with_iobinding(binding)
        mark = len(host.trace)
        session.run_with_iobinding(binding)
        # the value check reads host memory itself: no extra plugin call (1.32: Sync after ReplayGraph)
        assert host.trace[mark:] == ["OrtEp::IsGraphCaptured", "OrtEp::ReplayGraph", "OrtEp::Sync",
                                     "OrtEp::IsGraphCaptureEnabled", "OrtEp::IsGraphCaptured"]


# -- aliased state --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("min_runs", [0, 1, 2, 5])
def test_state_bound_as_input_and_output_advances_once_per_call(host: epabi.Host, min_runs: int) -> None:
    start = np.array([0, 10, -5, 2.5], np.float32)
    with _session(host, state_model(), min_num_runs_before_cuda_graph_capture=str(min_runs)) as session:
        state = epabi.OrtValue.ortvalue_from_numpy(start.copy())
        binding = session.io_binding()
        binding.bind_ortvalue_input("state", state)
        binding.bind_ortvalue_output("state_out", state)
        mark = len(host.trace)
        session.run_with_iobinding(binding)
        assert _calls(host, mark, "OrtEp::OnRunStart") == min_runs + 1  # hidden executions happened...
        np.testing.assert_array_equal(state.numpy(), start + 1)  # ...and were undone
        for k in range(2, 5):
            session.run_with_iobinding(binding)  # replays
            np.testing.assert_array_equal(state.numpy(), start + k)
        assert session.graph_capture.replays == 3


def test_aliased_state_advances_once_with_id_minus_one_and_after_recapture(host: epabi.Host) -> None:
    with _session(host, state_model(), {POLICY: "recapture"}) as session:
        state = epabi.OrtValue.ortvalue_from_numpy(np.zeros(4, np.float32))
        binding = session.io_binding()
        binding.bind_ortvalue_input("state", state)
        binding.bind_ortvalue_output("state_out", state)
        session.run_with_iobinding(binding, _run_opts("-1"))
        np.testing.assert_array_equal(state.numpy(), np.ones(4))
        session.run_with_iobinding(binding)
        np.testing.assert_array_equal(state.numpy(), np.full(4, 2))
        moved = epabi.OrtValue.ortvalue_from_numpy(np.full(4, 100, np.float32))
        binding.bind_ortvalue_input("state", moved)
        binding.bind_ortvalue_output("state_out", moved)
        session.run_with_iobinding(binding)  # released and captured again on the new buffer: 3 executions
        np.testing.assert_array_equal(moved.numpy(), np.full(4, 101))
        session.run_with_iobinding(binding)
        np.testing.assert_array_equal(moved.numpy(), np.full(4, 102))
        np.testing.assert_array_equal(state.numpy(), np.full(4, 2))  # the old buffer is left alone


def test_a_failed_call_leaves_aliased_state_as_it_was(host: epabi.Host) -> None:
    with _session(host, state_model(), min_num_runs_before_cuda_graph_capture="10") as session:
        state = epabi.OrtValue.ortvalue_from_numpy(np.zeros(4, np.float32))
        binding = session.io_binding()
        binding.bind_ortvalue_input("state", state)
        binding.bind_ortvalue_output("state_out", state)
        with pytest.raises(epabi.OrtStatusError, match="Graph capture did not complete after 8 internal runs"):
            session.run_with_iobinding(binding)
        np.testing.assert_array_equal(state.numpy(), np.zeros(4))


def test_state_in_a_separate_output_buffer_is_not_restored(host: epabi.Host) -> None:
    # no aliasing: nothing is copied, and the output is the input + 1 as usual
    with _session(host, state_model()) as session:
        state = epabi.OrtValue.ortvalue_from_numpy(np.zeros(4, np.float32))
        out = epabi.OrtValue.ortvalue_from_numpy(np.zeros(4, np.float32))
        binding = session.io_binding()
        binding.bind_ortvalue_input("state", state)
        binding.bind_ortvalue_output("state_out", out)
        session.run_with_iobinding(binding)
        np.testing.assert_array_equal(out.numpy(), np.ones(4))
        state.update_inplace(out.numpy())
        session.run_with_iobinding(binding)
        np.testing.assert_array_equal(out.numpy(), np.full(4, 2))
