"""epabi's host is as tolerant and as strict as real onnxruntime: each case runs the misbehaving test plugin under
epabi's host and under real onnxruntime (1.24.4 and the newest release), and both must agree.

Where ORT accepts something a careful EP author would want to hear about, epabi reports it
(``Host.conduct_report()``, a logged warning) and proceeds as ORT does; ``Host(strict=True)`` raises instead.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import epabi
from plugin_builder import build_plugin
from real_ort import MIN, NEWEST, run_in_ort, run_json

HOSTS = [MIN, NEWEST]

PROBE = """
import numpy as np
lib, model = sys.argv[1:3]
ort.register_execution_provider_library("probe", lib)
devices = [d for d in ort.get_ep_devices() if d.ep_name == "MisbehavingEp"]
result = {"devices": len(devices)}
if devices and model:
    so = ort.SessionOptions()
    so.add_provider_for_devices(devices, {})
    try:
        sess = ort.InferenceSession(model, sess_options=so, enable_fallback=0)
        x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
        result.update(providers=sess.get_providers(), y=sess.run(None, {"x": x})[0].tolist())
    except Exception as exc:
        result["error"] = str(exc)
emit(**result)
"""


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fidelity-plugins")


@pytest.fixture(scope="module")
def non_convex_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """relu -> sigmoid -> add(relu, sigmoid): the plugin claims relu and add, so sigmoid lies between them."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Sigmoid", ["r"], ["s"], name="sig"),
             helper.make_node("Add", ["r", "s"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "non_convex", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("models") / "non_convex.onnx"
    onnx.save(model, path)
    return path


def _api(version: str) -> int:
    """The emulated API closest to a real release (the newest epabi emulates for newer releases)."""
    return min(int(version.split(".")[1]), epabi.NEWEST_EMULATED)


def _x() -> np.ndarray:
    return np.arange(-3, 3, dtype=np.float32).reshape(2, 3)


def _session(host: epabi.Host, lib: Path, model: Path) -> epabi.InferenceSession:
    host.register_execution_provider_library("probe", lib)
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices())
    return epabi.InferenceSession(str(model), so)


def _tolerated(host: epabi.Host) -> list[str]:
    return [m for kind, m in host.conduct_report() if kind == "tolerated"]


@pytest.mark.parametrize("api", [24, epabi.NEWEST_EMULATED])
def test_non_convex_claim_drops_every_claim_and_runs_on_the_cpu(plugin_dir: Path, non_convex_model: Path,
                                                                  api: int) -> None:
    lib = build_plugin(plugin_dir, "CLAIM_NON_CONVEX")
    with epabi.Host(api_version=api, hardware=[epabi.cpu_device()]) as host:
        with _session(host, lib, non_convex_model) as sess:
            assert set(sess.node_assignment.values()) == {"CPUExecutionProvider"}
            y = sess.run(None, {"x": _x()})[0]
        r = np.maximum(_x(), 0)
        np.testing.assert_allclose(y, r + 1 / (1 + np.exp(-r)), rtol=1e-6)
        assert any("OrtEp::GetCapability() for MisbehavingEp set nodes that cannot be fused together" in m
                   for m in _tolerated(host))
    with epabi.Host(api_version=api, hardware=[epabi.cpu_device()], strict=True) as host:
        with pytest.raises(epabi.ConductError, match="cannot be fused together"):
            _session(host, lib, non_convex_model)


@pytest.mark.real_ort
@pytest.mark.parametrize("version", HOSTS)
def test_non_convex_claim_under_real_onnxruntime(plugin_dir: Path, non_convex_model: Path, version: str) -> None:
    lib = build_plugin(plugin_dir, "CLAIM_NON_CONVEX")
    result, _, err = run_json(version, PROBE, args=[str(lib), str(non_convex_model)])
    assert "cannot be fused together" in err
    with epabi.Host(hardware=[epabi.cpu_device()]) as host, _session(host, lib, non_convex_model) as sess:
        np.testing.assert_allclose(sess.run(None, {"x": _x()})[0], np.array(result["y"], np.float32), rtol=1e-6)


@pytest.mark.real_ort
@pytest.mark.parametrize("version", HOSTS)
@pytest.mark.parametrize("flag", ["ZERO_FACTORIES", "FACTORY_VERSION_ZERO", "RELEASE_FACTORY_FAILS"])
def test_registration_oddities_match_real_onnxruntime(plugin_dir: Path, version: str, flag: str) -> None:
    lib = build_plugin(plugin_dir, flag)
    result, _, _ = run_json(version, PROBE + "\nort.unregister_execution_provider_library('probe')\n",
                            args=[str(lib), ""])
    with epabi.Host(api_version=_api(version), hardware=[epabi.cpu_device()]) as host:
        host.register_execution_provider_library("probe", lib)
        assert len(host.get_ep_devices()) == result["devices"]
        host.unregister_execution_provider_library("probe")


@pytest.mark.real_ort
@pytest.mark.parametrize("version", HOSTS)
def test_ep_version_21_matches_real_onnxruntime(plugin_dir: Path, non_convex_model: Path, version: str) -> None:
    lib = build_plugin(plugin_dir, "EP_VERSION_21")
    result, _, _ = run_json(version, PROBE, args=[str(lib), str(non_convex_model)])
    with epabi.Host(api_version=_api(version), hardware=[epabi.cpu_device()]) as host:
        if "error" in result:  # 1.28+
            assert "OrtEp has invalid ort_version_supported=21 (expected at least 22)." in result["error"]
            with pytest.raises(epabi.OrtStatusError, match=r"ort_version_supported=21 \(expected at least 22\)"):
                _session(host, lib, non_convex_model)
        else:
            assert result["providers"][0] == "MisbehavingEp"
            with _session(host, lib, non_convex_model) as sess:
                assert sess.get_providers()[0] == "MisbehavingEp"


@pytest.mark.parametrize("api", [24, epabi.NEWEST_EMULATED])
def test_ep_metadata_naming_the_version_is_refused(plugin_dir: Path, api: int) -> None:
    # ORT adds "version" (from OrtEpFactory::GetVersion) in CreateEpDevice and refuses metadata that names it
    lib = build_plugin(plugin_dir, "METADATA_VERSION")
    with epabi.Host(api_version=api, hardware=[epabi.cpu_device()]) as host:
        with pytest.raises(epabi.OrtStatusError) as err:
            host.register_execution_provider_library("probe", lib)
        assert err.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
        assert err.value.message == "The provided EP metadata should not explicitly specify the EP version."
        assert host.get_ep_devices() == []


@pytest.mark.real_ort
@pytest.mark.parametrize("version", HOSTS)
def test_ep_metadata_naming_the_version_under_real_onnxruntime(plugin_dir: Path, version: str) -> None:
    lib = build_plugin(plugin_dir, "METADATA_VERSION")
    code, out, err = run_in_ort(version, "ort.register_execution_provider_library('probe', sys.argv[1])\n",
                                args=[str(lib)])
    assert code != 0
    assert "INVALID_ARGUMENT : The provided EP metadata should not explicitly specify the EP version." in out + err
