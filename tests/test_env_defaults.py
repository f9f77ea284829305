"""Process-wide EP defaults: ``ep_factory.EpAbiExecutionProvider.<key>`` in the environment's config entries
(``Host(env_config=...)``, ORT's ``OrtEnvCreationOptions::config_entries``) sit below the session's provider
options and above the built-in defaults. Real onnxruntime (whose Python API cannot set env config entries) is
covered by the C consumer in examples/c/ (tests/test_c_examples.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

import epabi

EP = epabi.get_ep_name()
ENV = f"ep_factory.{EP}."


def _model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["s"], name="add"), helper.make_node("Relu", ["s"], ["z"], name="relu")],
        "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 3]), helper.make_tensor_value_info("y", T.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("z", T.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


FEEDS = {"x": np.array([[1, -2, 3], [-4, 5, -6]], np.float32), "y": np.full((2, 3), 0.5, np.float32)}


def _host(library_path: str, env: dict[str, str], api_version: str | None = None) -> epabi.Host:
    host = epabi.Host(api_version=api_version, hardware=[epabi.cpu_device()], env_config=env)
    host.register_execution_provider_library("epabi", library_path)
    return host


def _session(host: epabi.Host, options: dict[str, str] | None = None) -> epabi.InferenceSession:
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), options or {})
    return epabi.InferenceSession(_model(), so)


@pytest.mark.parametrize("api_version", ["1.24", None])
def test_env_default_applies_and_provider_option_overrides_it(software_adapter: None, library_path: str,
                                                                api_version: str | None) -> None:
    want = ReferenceEvaluator(_model()).run(None, FEEDS)[0]
    with _host(library_path, {ENV + "force_cpu_nodes": "relu"}, api_version) as host:
        with _session(host) as session:  # the env default alone
            assert session.node_assignment == {"add": EP, "relu": "CPUExecutionProvider"}
            np.testing.assert_array_equal(session.run(None, FEEDS)[0], want)
        with _session(host, {"force_cpu_nodes": "add"}) as session:  # provider option beats the env default
            assert session.node_assignment == {"add": "CPUExecutionProvider", "relu": EP}
            np.testing.assert_array_equal(session.run(None, FEEDS)[0], want)
        with _session(host, {"force_cpu_nodes": ""}) as session:  # present but empty: still the session's value
            assert session.node_assignment == {"add": EP, "relu": EP}
    with _host(library_path, {}, api_version) as host, _session(host) as session:  # built-in default: none forced
        assert session.node_assignment == {"add": EP, "relu": EP}


def test_session_config_entry_spellings_also_beat_the_env(software_adapter: None, library_path: str) -> None:
    with _host(library_path, {ENV + "force_cpu_nodes": "relu"}) as env_host:
        for key in ("ep.cuda.force_cpu_nodes", "force_cpu_nodes"):
            so = epabi.SessionOptions()
            so.add_session_config_entry(key, "add")
            so.add_provider_for_devices(env_host.get_ep_devices())
            with epabi.InferenceSession(_model(), so) as session:
                assert session.node_assignment == {"add": "CPUExecutionProvider", "relu": EP}, key


def test_env_default_turns_graph_capture_on_and_session_turns_it_off(software_adapter: None,
                                                                      library_path: str) -> None:
    want = ReferenceEvaluator(_model()).run(None, FEEDS)[0]
    env = {ENV + "enable_cuda_graph": "1", ENV + "min_num_runs_before_cuda_graph_capture": "1"}
    with _host(library_path, env) as host:
        with _session(host) as session:
            assert session.graph_capture.enabled
            binding = session.io_binding()
            x = epabi.OrtValue.ortvalue_from_numpy(FEEDS["x"].copy())
            y = epabi.OrtValue.ortvalue_from_numpy(FEEDS["y"].copy())
            z = epabi.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32)
            binding.bind_ortvalue_input("x", x)
            binding.bind_ortvalue_input("y", y)
            binding.bind_ortvalue_output("z", z)
            mark = len(host.trace)
            session.run_with_iobinding(binding)  # one warm-up run (the env's count), then the capture
            assert host.trace[mark:].count("OrtEp::OnRunStart") == 2
            np.testing.assert_array_equal(z.numpy(), want)
            x.update_inplace(-FEEDS["x"])
            session.run_with_iobinding(binding)
            assert session.graph_capture.replays == 1
            np.testing.assert_array_equal(z.numpy(), np.maximum(-FEEDS["x"] + FEEDS["y"], 0))
        with _session(host, {"enable_cuda_graph": "0"}) as session:
            assert not session.graph_capture.enabled


def test_malformed_env_value_fails_create_ep_naming_the_env_key(software_adapter: None, library_path: str) -> None:
    key = ENV + "min_num_runs_before_cuda_graph_capture"
    with _host(library_path, {key: "-1"}) as host:
        with pytest.raises(epabi.OrtStatusError) as info:
            _session(host)
        assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
        assert f"option '{key}' has value '-1'" in info.value.message
        # a session value shadows the env entry, which is then never read
        with _session(host, {"min_num_runs_before_cuda_graph_capture": "3"}) as session:
            assert session.get_providers()[0] == EP


@pytest.mark.parametrize("key", [f"ep_factory.{EP.lower()}.enable_cuda_graph",  # the EP name is case-sensitive
                                 "ep_factory.EpAbi.enable_cuda_graph", f"ep.{EP.lower()}.enable_cuda_graph",
                                 "ep.cuda.enable_cuda_graph", "enable_cuda_graph"])
def test_only_the_ep_factory_spelling_is_read_from_the_env(software_adapter: None, library_path: str,
                                                           key: str) -> None:
    # a malformed value under any other spelling is not an option of ours: CreateEp succeeds, capture stays off
    with _host(library_path, {key: "maybe"}) as host, _session(host) as session:
        assert session.get_providers()[0] == EP
        assert not session.graph_capture.enabled


@pytest.mark.parametrize("config", [{ENV + "enable_cuda_graph": 1}, {ENV + "enable_cuda_graph": None}, {1: "1"},
                                    [(ENV + "enable_cuda_graph", "1")], {ENV + "enable_cuda_graph": "1\0"}])
def test_env_config_that_is_not_a_str_map_is_refused_by_host(config: object) -> None:
    # config entries are C strings (OrtEnvCreationOptions::config_entries): anything else is refused when the host
    # is made, not as an error inside the plugin's GetSupportedDevices
    with pytest.raises((TypeError, ValueError), match="env_config"):
        epabi.Host(hardware=[epabi.cpu_device()], env_config=config)  # type: ignore[arg-type]
