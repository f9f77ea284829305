"""Real third-party plugin EPs from PyPI through epabi's host, against real onnxruntime with the same plugin.

onnxruntime-ep-openvino 1.8.1 (offers devices on Intel CPUs only: the host is given an Intel CPU, so it runs on
any machine) and onnxruntime-ggml 0.2.0 each register, list their devices and run an MLP and magika at the newest
emulated API and at 1.24 where they accept it, twice in one process (a second host after the first is closed),
with outputs equal to real onnxruntime's with the same plugin (ORT's CPU EP where real ORT offers no device);
``python -m epabi inspect`` reports on each; register/unregister cycles leave nothing behind.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

import epabi
from magika_model import batch, model_path
from real_ort import MIN, NEWEST, run_json
from third_party import PLUGINS, require_plugin

INTEL_CPU = epabi.HardwareDevice(epabi.OrtHardwareDeviceType.CPU, 0x8086, "Intel")
PAIRS = [(epabi.NEWEST_EMULATED, NEWEST), (24, MIN)]

#: Runs each model once under real onnxruntime with the plugin's first EP device (the CPU EP when it offers none);
#: saves the outputs beside the inputs. ``whole`` says whether the EP takes every node: a session with the CPU
#: EP fallback disabled can be made only then (``get_providers`` lists the EP even when it claims nothing).
REAL_RUN = """
import numpy as np
lib, ep_name, folder = sys.argv[1:4]
ort.register_execution_provider_library(ep_name, lib)
devices = [d for d in ort.get_ep_devices() if d.ep_name == ep_name]
whole = {}
for name in sys.argv[4:]:
    so = ort.SessionOptions()
    if devices:
        so.add_provider_for_devices(devices[:1], {})
    sess = ort.InferenceSession(f"{folder}/{name}.onnx", sess_options=so, enable_fallback=0)
    x = np.load(f"{folder}/{name}.in.npy")
    np.save(f"{folder}/{name}.out.npy", sess.run(None, {sess.get_inputs()[0].name: x})[0])
    if devices:
        so = ort.SessionOptions()
        so.add_provider_for_devices(devices[:1], {})
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        try:
            ort.InferenceSession(f"{folder}/{name}.onnx", sess_options=so, enable_fallback=0)
            whole[name] = True
        except Exception:
            whole[name] = False
emit(devices=len(devices), whole=whole)
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("third-party-models")
    mlp = epabi.models.mlp(layers=3, width=64, batch=2)
    onnx.save(mlp, folder / "mlp.onnx")
    np.save(folder / "mlp.in.npy", epabi.models.sample_inputs(mlp, seed=11)["x"])
    onnx.save(onnx.load(model_path()), folder / "magika.onnx")
    np.save(folder / "magika.in.npy", batch())
    return folder


def _run_here(host: epabi.Host, ep_name: str, folder: Path, name: str) -> tuple[np.ndarray, dict[str, str]]:
    so = epabi.SessionOptions()
    so.add_provider_for_devices([d for d in host.get_ep_devices() if d.ep_name == ep_name][:1])
    with epabi.InferenceSession(str(folder / f"{name}.onnx"), so) as sess:
        x = np.load(folder / f"{name}.in.npy")
        (y,) = sess.run(None, {sess.get_inputs()[0].name: x})
        return y, dict(sess.node_assignment)


@pytest.mark.real_ort
@pytest.mark.parametrize("plugin", ["openvino", "ggml"])
@pytest.mark.parametrize(("api", "release"), PAIRS, ids=[f"api{a}" for a, _ in PAIRS])
def test_plugin_runs_the_mlp_and_magika_like_real_onnxruntime(plugin: str, api: int, release: str,
                                                              models: Path) -> None:
    lib = require_plugin(plugin)
    ep_name = PLUGINS[plugin].ep_name
    names = ["mlp", "magika"]
    real, _, _ = run_json(release, REAL_RUN, args=[str(lib), ep_name, str(models), *names], timeout=600)
    expected = {name: np.load(models / f"{name}.out.npy") for name in names}
    for round_ in range(2):  # twice in one process: the second host after the first is closed
        host = epabi.Host(api_version=api, hardware=[INTEL_CPU])
        try:
            host.register_execution_provider_library(ep_name, lib)
            devices = [d for d in host.get_ep_devices() if d.ep_name == ep_name]
            assert len(devices) == real["devices"], f"round {round_}: {devices}"
            if not devices:  # onnxruntime-ggml needs API 29: on 1.24 it returns no factory, as under real ORT
                assert any("returned no factory" in m for k, m in host.conduct_report() if k == "tolerated")
                continue
            for name in names:
                y, assignment = _run_here(host, ep_name, models, name)
                np.testing.assert_allclose(y, expected[name], rtol=1e-5, atol=1e-5, err_msg=f"{name}, round {round_}")
                assert (set(assignment.values()) == {ep_name}) == real["whole"][name], \
                    f"{name}, round {round_}: {assignment}"
        finally:
            host.close()
        del host
        gc.collect()


@pytest.mark.parametrize(("plugin", "first"), [("openvino", 24), ("ggml", 29)])
def test_hosts_at_once_and_in_sequence_with_the_same_plugin(models: Path, plugin: str, first: int) -> None:
    lib = require_plugin(plugin)
    ep_name = PLUGINS[plugin].ep_name
    x = np.load(models / "mlp.in.npy")
    reference = ReferenceEvaluator(onnx.load(models / "mlp.onnx")).run(None, {"x": x})[0]
    a = epabi.Host(api_version=first, hardware=[INTEL_CPU])
    b = epabi.Host(hardware=[INTEL_CPU])
    for host in (a, b):
        host.register_execution_provider_library(ep_name, lib)
    ya, _ = _run_here(a, ep_name, models, "mlp")
    a.close()
    yb, _ = _run_here(b, ep_name, models, "mlp")  # the plugin keeps what the first host gave it
    b.close()
    c = epabi.Host(api_version=30, hardware=[INTEL_CPU])
    c.register_execution_provider_library(ep_name, lib)
    yc, _ = _run_here(c, ep_name, models, "mlp")
    c.close()
    np.testing.assert_array_equal(yb, ya)
    np.testing.assert_array_equal(yc, ya)
    np.testing.assert_allclose(ya, reference, atol=2e-2)  # both keep weights in reduced precision (f16/bf16)
    assert not [m for h in (a, b, c) for k, m in h.conduct_report() if k in ("violation", "internal")]


@pytest.mark.parametrize("plugin", ["openvino", "ggml", "webgpu"])
def test_inspect_prints_a_full_report(plugin: str) -> None:
    lib = require_plugin(plugin)
    proc = subprocess.run([sys.executable, "-m", "epabi", "inspect", str(lib)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    for api in epabi.versions.EMULATED:
        assert any(line.startswith(f"API {api:>2} ({epabi.RELEASES[api]}):") for line in lines), api
    newest = next(line for line in lines if line.startswith(f"API {epabi.NEWEST_EMULATED} "))
    assert "registered;" in newest and "factor" in newest
    assert "members set and read by the host" in proc.stdout
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("plugin", ["ggml", "openvino"])
def test_register_unregister_cycles_leave_nothing_behind(plugin: str) -> None:
    lib = str(require_plugin(plugin))
    ep_name = PLUGINS[plugin].ep_name
    host = epabi.Host(hardware=[INTEL_CPU])

    def cycle() -> None:
        host.register_execution_provider_library(ep_name, lib)
        assert host.get_ep_devices()
        host.unregister_execution_provider_library(ep_name)

    def rss() -> int:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def maps() -> int:
        return len(Path("/proc/self/maps").read_text().splitlines())

    for _ in range(20):
        cycle()
    gc.collect()
    before = (len(os.listdir("/proc/self/fd")), maps(), rss())
    for _ in range(200):
        cycle()
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= before[0]
    assert maps() <= before[1]
    assert rss() - before[2] < 1 << 20, f"RSS grew {(rss() - before[2]) >> 10} kB over 200 cycles"
    assert not [m for k, m in host.conduct_report() if k != "tolerated"]
    host.close()
