"""onnxruntime-ep-webgpu 0.4.0, a kernel-registry plugin EP (no Compile), through epabi's host: it registers, lists
the device real onnxruntime lists, and runs the built-in MLP and magika at the newest emulated API and at 1.24,
with outputs identical to real onnxruntime 1.24.4's and 1.32.0's with the same plugin (Mesa's lavapipe as the
Vulkan driver; see tests/webgpu_env.py). Each epabi run has its own process, as a real application has; one
process also runs both models in two hosts in turn, the second made after the first is closed."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import magika_model
from epabi.models import mlp
from real_ort import ORT_VERSIONS, PRELUDE, result_of, run_json
from third_party import require_plugin
from webgpu_env import require_webgpu

MIN, NEWEST, _ = ORT_VERSIONS
EP = "WebGpuExecutionProvider"

_COMMON = '''
import sys
import numpy as np
lib, model_path, feed_path = sys.argv[1:4]
feed = np.load(feed_path)
'''

_EPABI = PRELUDE.replace("import onnxruntime as ort\n", "import epabi\n") + _COMMON + '''
api = None if sys.argv[4] == "newest" else int(sys.argv[4])
with epabi.Host(api_version=api) as host:
    host.register_execution_provider_library("webgpu", lib)
    devices = host.get_ep_devices()
    so = epabi.SessionOptions()
    so.add_provider_for_devices([d for d in devices if d.ep_name == "WebGpuExecutionProvider"])
    try:
        sess = epabi.InferenceSession(model_path, so)
    except epabi.OrtStatusError as exc:
        emit(error=exc.message, code=exc.code.name)
        sys.exit(0)
    with sess:
        outputs = sess.run(None, {sess.get_inputs()[0].name: feed})
        assignment = dict(sess.node_assignment)
    emit(devices=[describe(d) for d in devices], outputs=[o.tolist() for o in outputs], assignment=assignment,
         release=host.version_string)
'''

#: Two hosts in one process, the second made after the first is closed (the plugin keeps the first one's tables):
#: each registers the plugin and runs every model given; argv: plugin, then model and feed paths in pairs.
_EPABI_TWICE = PRELUDE.replace("import onnxruntime as ort\n", "import epabi\n") + '''
import numpy as np
lib, rest = sys.argv[1], sys.argv[2:]
rounds = []
for api in (None, 24):
    host = epabi.Host(api_version=api)
    try:
        host.register_execution_provider_library("webgpu", lib)
        so = epabi.SessionOptions()
        so.add_provider_for_devices([d for d in host.get_ep_devices() if d.ep_name == "WebGpuExecutionProvider"])
        outputs = []
        for model_path, feed_path in zip(rest[::2], rest[1::2]):
            with epabi.InferenceSession(model_path, so) as sess:
                outputs.append([o.tolist() for o in sess.run(None, {sess.get_inputs()[0].name: np.load(feed_path)})])
        rounds.append({"release": host.version_string, "outputs": outputs,
                       "violations": [m for kind, m in host.conduct_report() if kind == "violation"]})
    finally:
        host.close()
emit(rounds=rounds)
'''

_REAL = _COMMON + '''
ort.register_execution_provider_library("webgpu", lib)
devices = ort.get_ep_devices()
so = ort.SessionOptions()
so.add_provider_for_devices([d for d in devices if d.ep_name == "WebGpuExecutionProvider"], {})
try:
    sess = ort.InferenceSession(model_path, sess_options=so, enable_fallback=0)
except Exception as exc:
    emit(error=str(exc))
    sys.exit(0)
outputs = sess.run(None, {sess.get_inputs()[0].name: feed})
emit(devices=[describe(d) for d in devices if d.ep_name == "WebGpuExecutionProvider"],
     outputs=[o.tolist() for o in outputs], providers=sess.get_providers())
'''


@pytest.fixture(scope="module")
def webgpu() -> tuple[Path, dict[str, str]]:
    plugin = require_plugin("webgpu")
    return plugin, require_webgpu(plugin)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("webgpu-models")
    mlp_path, mlp_feed = folder / "mlp.onnx", folder / "mlp.npy"
    onnx.save(mlp(), mlp_path)
    np.save(mlp_feed, np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32))
    magika_feed = folder / "magika.npy"
    np.save(magika_feed, magika_model.batch())
    return {"mlp": (mlp_path, mlp_feed), "magika": (magika_model.model_path(), magika_feed)}


def _epabi(plugin: Path, env: dict[str, str], model: tuple[Path, Path], api: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _EPABI, str(plugin), str(model[0]), str(model[1]), api],
                          capture_output=True, text=True, timeout=600, env={**os.environ, **env})
    result = result_of(proc.stdout)
    if proc.returncode != 0 or result is None:
        pytest.fail(f"epabi run exited with {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}",
                    pytrace=False)
    return result


@functools.cache
def _real(version: str, plugin: str, model_path: str, feed_path: str, env: tuple[tuple[str, str], ...]) -> dict:
    return run_json(version, _REAL, dict(env), [plugin, model_path, feed_path], timeout=600)[0]


@pytest.mark.real_ort
def test_webgpu_registers_and_lists_the_device_real_onnxruntime_lists(webgpu: tuple[Path, dict[str, str]],
                                                                      models: dict[str, tuple[Path, Path]]) -> None:
    plugin, env = webgpu
    mine = _epabi(plugin, env, models["mlp"], "newest")
    real = _real(NEWEST, str(plugin), *map(str, models["mlp"]), tuple(env.items()))
    assert [d for d in mine["devices"] if d["ep_name"] == EP] == real["devices"]
    assert real["devices"][0]["type"] == "CPU" and real["devices"][0]["ep_metadata"]["version"] == "0.4.0"


@pytest.mark.real_ort
@pytest.mark.parametrize("api", ["newest", "24"])
@pytest.mark.parametrize("name", ["mlp", "magika"])
def test_webgpu_computes_what_real_onnxruntime_computes(webgpu: tuple[Path, dict[str, str]],
                                                        models: dict[str, tuple[Path, Path]], name: str,
                                                        api: str) -> None:
    plugin, env = webgpu
    mine = _epabi(plugin, env, models[name], api)
    if api == "24":
        assert mine["release"] == "1.24.4"
    on_cpu = sorted(n for n, ep in mine["assignment"].items() if ep != EP)
    # WebGPU has no int64 Cast/Slice kernels; the rest, the NHWC Conv and GlobalMaxPool included, runs on it
    assert on_cpu == ([] if name == "mlp" else ["jax2tf_get_logits_/Shape__8", "jax2tf_get_logits_/strided_slice"])
    for version in (MIN, NEWEST):
        real = _real(version, str(plugin), *map(str, models[name]), tuple(env.items()))
        assert real["providers"][0] == EP
        assert mine["outputs"] == real["outputs"], f"epabi (API {api}) and onnxruntime {version} differ"


@pytest.mark.real_ort
def test_webgpu_is_refused_where_onnxruntime_1_26_refuses_it(webgpu: tuple[Path, dict[str, str]],
                                                             models: dict[str, tuple[Path, Path]]) -> None:
    """The plugin's OrtEp declares API 30; 1.26.0 alone checks that when it creates a kernel."""
    plugin, env = webgpu
    mine = _epabi(plugin, env, models["mlp"], "26")
    real = _real("1.26.0", str(plugin), *map(str, models["mlp"]), tuple(env.items()))
    assert mine["code"] == "FAIL"
    reason = "OrtEp for 'WebGpuExecutionProvider' has invalid ort_version_supported=30 (expected 1..26)"
    assert reason in mine["error"] and reason in real["error"]


@pytest.mark.real_ort
def test_webgpu_runs_in_a_second_host_after_the_first_is_closed(webgpu: tuple[Path, dict[str, str]],
                                                                models: dict[str, tuple[Path, Path]]) -> None:
    """The plugin keeps the API tables, default logger and OrtDataTypes of the first host for the life of the
    process (as under ORT, which has one set per process): a second host, of another API version, runs it too."""
    plugin, env = webgpu
    paths = [str(p) for name in ("mlp", "magika") for p in models[name]]
    proc = subprocess.run([sys.executable, "-c", _EPABI_TWICE, str(plugin), *paths], capture_output=True, text=True,
                          timeout=600, env={**os.environ, **env})
    result = result_of(proc.stdout)
    if proc.returncode != 0 or result is None:
        pytest.fail(f"epabi run exited with {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}",
                    pytrace=False)
    first, second = result["rounds"]
    assert (first["release"], second["release"]) == (NEWEST, MIN)
    assert first["violations"] == second["violations"] == []
    for i, name in enumerate(("mlp", "magika")):
        real = _real(NEWEST, str(plugin), *map(str, models[name]), tuple(env.items()))
        assert first["outputs"][i] == second["outputs"][i] == real["outputs"], name
