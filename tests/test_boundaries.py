"""Values crossing between our EP and the CPU EP (``boundary_models.py``), through real onnxruntime and our host.

ONNX Runtime (1.24.4 ... 1.32.0 seen) puts a MemcpyFromHost node in front of a fused node for a value the CPU EP
produces; a compile-based plugin EP has no kernel for it, so ORT runs its CPU EP's fallback kernel and hands
the fused node a tensor in CPU memory where it declared device memory. On a GPU that was an illegal address in
the first kernel reading it (``cuStreamSynchronize ... CUDA error 700``). The plan now copies such inputs into
device memory (plan.h), and the software adapter's device-memory mode refuses any kernel operand outside its
own memory, so the same mistake fails here instead of passing silently.

Each case runs with plain ``run()`` and with IOBinding (CPU values; device values where the host can make them),
on the software adapter in host and in device memory, and on the GPU (``-m gpu``): every output equals ORT's
CPU EP (real onnxruntime) or onnx.reference (our host).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

import epabi
from boundary_models import Case, cases
from real_ort import MIN, NEWEST, run_json, run_json_on_gpu

EP = "EpAbiExecutionProvider"
TOL = {"rtol": 1e-4, "atol": 1e-4}
CASES = cases()
MODES = ["host", "device"]

# argv: library, case folder (cases.json + models + feeds), device kind ("software" or "gpu"). For every case:
# ORT's CPU EP, then our EP device with force_cpu_nodes, by run() and by IOBinding on CPU values and (where this
# onnxruntime can allocate in our device memory) on device values; emits the placement and the largest
# differences from the CPU EP.
BOUNDARY_SCRIPT = """
import gc
import os

import numpy as np

lib, folder, kind = sys.argv[1:]
cases = json.load(open(os.path.join(folder, "cases.json")))
ort.register_execution_provider_library("epabi", lib)
ours = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME and dict(d.ep_metadata).get("device_kind") == kind]
if not ours:
    emit(skip=f"onnxruntime lists no {kind} EP device of ours", devices=[describe(d) for d in ort.get_ep_devices()])
    sys.exit(0)
device_memory = ours[0].memory_info(ort.OrtDeviceMemoryType.DEFAULT) is not None
report = {}
for case in cases:
    model = os.path.join(folder, case["model"])
    feeds = {k: np.load(os.path.join(folder, p)) for k, p in case["feeds"].items()}
    expected = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    so = ort.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    so.add_provider_for_devices(ours[:1], {"force_cpu_nodes": case["cpu"]})
    sess = ort.InferenceSession(model, sess_options=so, enable_fallback=0)
    names = [o.name for o in sess.get_outputs()]
    placement = {n.name: sub.ep_name for sub in sess.get_provider_graph_assignment_info() for n in sub.get_nodes()}
    diffs = {}
    got = sess.run(None, feeds)
    diffs["run"] = [float(np.abs(a - b).max()) for a, b in zip(got, expected)]
    got = sess.run(None, feeds)
    diffs["run_again"] = [float(np.abs(a - b).max()) for a, b in zip(got, expected)]
    for where in ("cpu", "device"):
        if where == "device" and not device_memory:
            continue
        place = ("cuda", 0) if where == "device" else ()
        try:
            ins = {k: ort.OrtValue.ortvalue_from_numpy(v, *place) for k, v in feeds.items()}
            outs = {n: ort.OrtValue.ortvalue_from_numpy(np.full(e.shape, np.nan, np.float32), *place)
                    for n, e in zip(names, expected)}
        except Exception as exc:
            diffs["binding_" + where] = str(exc)
            continue
        io = sess.io_binding()
        for k in ins:
            io.bind_ortvalue_input(k, ins[k])
        for n in outs:
            io.bind_ortvalue_output(n, outs[n])
        sess.run_with_iobinding(io)
        diffs["binding_" + where] = [float(np.abs(outs[n].numpy() - e).max()) for n, e in zip(names, expected)]
        del io, ins, outs  # no device value may outlive the library (REAL_HOST_NOTES trap 2)
    report[case["name"]] = {"placement": placement, "diffs": diffs, "providers": sess.get_providers()}
    del sess, so
gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(ort_version=ort.__version__, device_memory=device_memory, report=report)
"""


def _write_cases(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    listing = []
    for case in CASES:
        onnx.save(case.model, folder / f"{case.name}.onnx")
        feeds = {}
        for name, value in case.feeds.items():
            np.save(folder / f"{case.name}_{name}.npy", value)
            feeds[name] = f"{case.name}_{name}.npy"
        listing.append({"name": case.name, "model": f"{case.name}.onnx", "feeds": feeds, "cpu": case.force_cpu_nodes})
    (folder / "cases.json").write_text(json.dumps(listing))
    return folder


def _check_report(result: dict, kind: str, device_binding_expected: bool) -> None:
    """Every case: the forced nodes on the CPU, all others on our EP, every output equal to the CPU EP's."""
    for case in CASES:
        got = result["report"][case.name]
        assert got["providers"][0] == EP, f"{case.name}: silent CPU fallback {got['providers']}"
        # ORT's own fusions may rename our nodes (MatMul + Add -> Gemm); the forced ones stay as they are
        on_cpu = {name for name, ep in got["placement"].items() if ep != EP}
        assert on_cpu == set(case.cpu), f"{case.name}: {got['placement']}"
        assert all(got["placement"][name] == "CPUExecutionProvider" for name in on_cpu), got["placement"]
        diffs = got["diffs"]
        for binding in ("run", "run_again", "binding_cpu"):
            assert max(diffs[binding]) <= 1e-4, f"{case.name} ({kind}, {binding}): {diffs[binding]}"
        if device_binding_expected:
            assert isinstance(diffs.get("binding_device"), list), f"{case.name}: {diffs.get('binding_device')}"
            assert max(diffs["binding_device"]) <= 1e-4, f"{case.name} ({kind}, device binding): {diffs}"


# -- real onnxruntime, software adapter ---------------------------------------------------------------------------

@pytest.mark.real_ort
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_boundaries_under_real_onnxruntime(version: str, mode: str, library_path: str, tmp_path: Path) -> None:
    folder = _write_cases(tmp_path / "cases")
    env = {"EPABI_ALLOW_SOFTWARE_ADAPTER": "1", "EPABI_SOFTWARE_DEVICE_MEMORY": mode}
    result, _, err = run_json(version, BOUNDARY_SCRIPT, env, [library_path, str(folder), "software"], timeout=300)
    assert result["ort_version"] == version
    assert result["device_memory"] == (mode == "device")
    # onnxruntime 1.24.4's Python cannot allocate plugin device memory ("Can't allocate memory on the device
    # using this package"); 1.32.0 allocates it through our allocator
    device_binding = mode == "device" and version != MIN
    _check_report(result, f"onnxruntime {version}, {mode} memory", device_binding)
    if mode == "device" and version == MIN:
        assert "Can't allocate memory on the device" in result["report"]["cpu_ep_cpu"]["diffs"]["binding_device"]


# -- our host ---------------------------------------------------------------------------------------------------

def _our_session(host: epabi.Host, case: Case) -> epabi.InferenceSession:
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {"force_cpu_nodes": case.force_cpu_nodes})
    session = epabi.InferenceSession(case.model, so)
    want = {n.name: ("CPUExecutionProvider" if n.name in case.cpu else EP) for n in case.model.graph.node}
    assert session.node_assignment == want
    return session


@pytest.mark.parametrize("binding", ["run", "cpu", "device"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("api_version", [MIN, epabi.NEWEST_EMULATED])
def test_boundaries_under_our_host(case: Case, mode: str, binding: str, api_version: str | int, library_path: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    if mode == "host" and binding == "device":
        pytest.skip("the software adapter has no device memory in host mode")
    monkeypatch.setenv("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")
    monkeypatch.setenv("EPABI_SOFTWARE_DEVICE_MEMORY", mode)
    expected = ReferenceEvaluator(case.model).run(None, case.feeds)
    names = [o.name for o in case.model.graph.output]
    with epabi.Host(api_version=api_version, hardware=[epabi.cpu_device()]) as host:
        host.register_execution_provider_library("epabi", library_path)
        with _our_session(host, case) as session:
            for _ in range(2):
                if binding == "run":
                    got = session.run(None, case.feeds)
                else:
                    where = ("cuda", 0) if binding == "device" else ()
                    io = session.io_binding()
                    outs = {n: epabi.OrtValue.ortvalue_from_numpy(np.full(e.shape, np.nan, np.float32), *where,
                                                                  host=host) for n, e in zip(names, expected)}
                    for k, v in case.feeds.items():
                        io.bind_ortvalue_input(k, epabi.OrtValue.ortvalue_from_numpy(v, *where, host=host))
                    for n, v in outs.items():
                        io.bind_ortvalue_output(n, v)
                    session.run_with_iobinding(io)
                    got = [outs[n].numpy() for n in names]
                for g, e, n in zip(got, expected, names):
                    np.testing.assert_allclose(g, e, **TOL, err_msg=f"{case.name}: output {n}")


def test_device_mode_refuses_a_kernel_operand_outside_its_memory(library_path: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard itself: in device-memory mode a kernel operand outside the adapter's own memory is a clear error
    naming the value and the node, where a GPU kernel would fault. A raw host pointer bound as device memory
    (``bind_input(..., "cuda", 0, ...)``, trusted as in onnxruntime) is such an operand."""
    monkeypatch.setenv("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")
    monkeypatch.setenv("EPABI_SOFTWARE_DEVICE_MEMORY", "device")
    case = next(c for c in CASES if c.name == "fan_out")
    x = case.feeds["x"]
    with epabi.Host(hardware=[epabi.cpu_device()]) as host:
        host.register_execution_provider_library("epabi", library_path)
        with _our_session(host, case) as session:
            io = session.io_binding()
            io.bind_input("x", "cuda", 0, np.float32, list(x.shape), x.ctypes.data)
            io.bind_output("y")
            io.bind_output("c")
            with pytest.raises(epabi.OrtStatusError) as info:
                session.run_with_iobinding(io)
    message = str(info.value)
    assert "node 'conv' (Conv)" in message and "input 'x'" in message, message
    assert "is not in the device's memory" in message, message


# -- the GPU ----------------------------------------------------------------------------------------------------

def _gpu_or_skip() -> None:
    if epabi.hardware.cuda_gpu_count() == 0:
        pytest.skip("no NVIDIA GPU with a working driver")


@pytest.mark.gpu
def test_boundaries_under_real_onnxruntime_on_the_gpu(library_path: str, tmp_path: Path) -> None:
    """The interpreter's own onnxruntime (the device machine's) on our GPU EP device: the crash of 6 of 8 real
    models reproduced by ``ep_cpu_ep``, and every other crossing, equal to ORT's CPU EP."""
    _gpu_or_skip()
    if importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("onnxruntime is not installed in this interpreter")
    folder = _write_cases(tmp_path / "cases")
    result, _ = run_json_on_gpu(BOUNDARY_SCRIPT, [library_path, str(folder), "gpu"])
    _check_report(result, f"onnxruntime {result['ort_version']}, GPU", True)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_boundaries_under_our_host_on_the_gpu(case: Case, library_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _gpu_or_skip()
    monkeypatch.setenv("EPABI_CUDA_DISCOVERY", "1")
    monkeypatch.delenv("EPABI_ALLOW_SOFTWARE_ADAPTER", raising=False)
    expected = ReferenceEvaluator(case.model).run(None, case.feeds)
    with epabi.Host() as host:
        host.register_execution_provider_library("epabi", library_path)
        gpus = [d for d in host.get_ep_devices() if d.ep_metadata.get("device_kind") == "gpu"]
        so = epabi.SessionOptions()
        so.add_provider_for_devices(gpus[:1], {"force_cpu_nodes": case.force_cpu_nodes})
        with epabi.InferenceSession(case.model, so) as session:
            for g, e in zip(session.run(None, case.feeds), expected):
                np.testing.assert_allclose(g, e, **TOL, err_msg=case.name)
