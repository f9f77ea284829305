"""The GPU EP device on CUDA (skipped without an NVIDIA GPU and driver): graph capture and replay in device memory.

Mirrors tests/test_graph_capture.py (the software adapter) on the plugin's GPU EP device, driven by the
emulated host exactly as ORT core drives it: inputs and outputs live in the device's "EpAbi_GPU" memory
(``OrtValue.ortvalue_from_numpy(x, "cuda", 0)``, CuPy arrays bound without copying), the first call warms up
and captures, later calls are ``ReplayGraph`` only. Also: ``arena.use_cuda_mempool=1``, two annotation ids with
two shapes, a user compute stream (CuPy) adopted and still usable after the session is gone, 8 threads with
their own graphs, magika's real model with and without graphs against onnxruntime's CPU EP, and the same
magika capture under the real onnxruntime of this interpreter (when importable).

Run on the H200 through the device tool; CI has no GPU. Tests that need CuPy, torch, onnxruntime or magika
skip without them.
"""

from __future__ import annotations

import gc
import importlib.util
import logging
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import epabi
from epabi.device_memory import DeviceValue
from epabi.models import mlp, sample_inputs
from gpu_devices import gpu_ep_device
from magika_model import batch
from magika_model import model_path as magika_path
from test_graph_capture import _add_model, _calls, _matmul_model, _run_opts  # the same models as on the host

pytestmark = pytest.mark.gpu

EP = "EpAbiExecutionProvider"
GPU_MEMORY = "EpAbi_GPU"
TOL = {"rtol": 1e-4, "atol": 1e-4}


if epabi.hardware.cuda_gpu_count() == 0:
    pytest.skip("no NVIDIA GPU with a working driver", allow_module_level=True)


# -- models and helpers -------------------------------------------------------------------------------------------

def _gpu_device(host: epabi.Host) -> epabi.EpDevice:
    device = gpu_ep_device(host)
    memory = device.memory_info(epabi.OrtDeviceMemoryType.DEFAULT)
    assert memory is not None and memory.name == GPU_MEMORY and memory.device_id == 0
    return device


def _session(host: epabi.Host, model: Any, graph: bool = True, **options: str) -> epabi.InferenceSession:
    so = epabi.SessionOptions()
    so.add_provider_for_devices([_gpu_device(host)], {"enable_cuda_graph": "1" if graph else "0", **options})
    session = epabi.InferenceSession(model, so)
    off = {n: ep for n, ep in session.node_assignment.items() if ep != EP}
    assert off == {}, f"nodes left to the CPU: {off}"
    assert session.graph_capture.enabled == graph
    return session


def _device(host: epabi.Host, array: np.ndarray) -> DeviceValue:
    value = epabi.OrtValue.ortvalue_from_numpy(array, "cuda", 0, host=host)
    assert isinstance(value, DeviceValue) and value.memory_info.name == GPU_MEMORY
    return value


def _bind(session: epabi.InferenceSession, feeds: dict[str, np.ndarray], out_shapes: dict[str, list[int]]):
    """Binds device copies of ``feeds`` and zero-filled device outputs; returns (binding, inputs, outputs)."""
    binding = session.io_binding()
    ins = {name: _device(session.host, a) for name, a in feeds.items()}
    outs = {name: epabi.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, "cuda", 0, host=session.host)
            for name, shape in out_shapes.items()}
    for name, v in ins.items():
        binding.bind_ortvalue_input(name, v)
    for name, v in outs.items():
        binding.bind_ortvalue_output(name, v)
    return binding, ins, outs


def _poison(*values: epabi.OrtValue) -> None:
    """NaN into bound outputs, so a replay that writes nothing cannot pass."""
    for v in values:
        v.update_inplace(np.full(v.shape(), np.nan, np.float32))


# -- capture and replay -----------------------------------------------------------------------------------------

def test_capture_then_replay_mlp(gpu_host: epabi.Host) -> None:
    model = mlp(layers=3, width=64, batch=2)
    feeds = sample_inputs(model, seed=3)
    ref = ReferenceEvaluator(model)
    with _session(gpu_host, model) as session:
        binding, ins, outs = _bind(session, feeds, {"y": [2, 64]})
        address = outs["y"].data_ptr()
        mark = len(gpu_host.trace)
        session.run_with_iobinding(binding)  # first call: 2 warm-up runs and the capture, inside one call
        np.testing.assert_allclose(outs["y"].numpy(), ref.run(None, feeds)[0], **TOL)
        assert _calls(gpu_host, mark, "OrtEp::OnRunStart") == 3
        assert _calls(gpu_host, mark, "OrtEp::ReplayGraph") == 0
        _poison(outs["y"])
        mark = len(gpu_host.trace)
        session.run_with_iobinding(binding)  # second call: a pure replay
        assert _calls(gpu_host, mark, "OrtEp::ReplayGraph") == 1
        assert _calls(gpu_host, mark, "OrtEp::OnRunStart") == 0
        assert _calls(gpu_host, mark, "OrtNodeComputeInfo::Compute") == 0
        assert _calls(gpu_host, mark, "OrtDataTransferImpl::CopyTensors") == 0  # nothing crosses to the host
        np.testing.assert_allclose(outs["y"].numpy(), ref.run(None, feeds)[0], **TOL)
        # new input values written in place change the replayed output
        for seed in (5, 6):
            new = sample_inputs(model, seed=seed)
            ins["x"].update_inplace(new["x"])
            _poison(outs["y"])
            session.run_with_iobinding(binding)
            np.testing.assert_allclose(outs["y"].numpy(), ref.run(None, new)[0], **TOL)
        assert outs["y"].data_ptr() == address
        assert session.graph_capture.replays == 3


def test_capture_refuses_host_memory_bindings(gpu_host: epabi.Host) -> None:
    x = np.ones((3, 2), np.float32)
    with _session(gpu_host, _add_model()) as session:
        binding = session.io_binding()
        binding.bind_cpu_input("x", x)
        binding.bind_ortvalue_input("y", _device(gpu_host, x))
        binding.bind_ortvalue_output("z", epabi.OrtValue.ortvalue_from_numpy(np.zeros((3, 2), np.float32)))
        with pytest.raises(epabi.OrtStatusError, match=r"input 'x', output 'z' are not") as info:
            session.run_with_iobinding(binding)
        assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
        # gpu_graph_id -1 runs without capture, so host memory is fine there
        session.run_with_iobinding(binding, _run_opts("-1"))
        np.testing.assert_array_equal(binding.get_outputs()[0].numpy(), x + x)


def test_add_model_with_cuda_mempool(gpu_host: epabi.Host) -> None:
    x, y = np.ones((3, 2), np.float32), np.full((3, 2), 2, np.float32)
    with _session(gpu_host, _add_model(), **{"arena.use_cuda_mempool": "1"}) as session:
        binding, ins, outs = _bind(session, {"x": x, "y": y}, {"z": [3, 2]})
        for _ in range(3):
            _poison(outs["z"])
            session.run_with_iobinding(binding)
            np.testing.assert_array_equal(outs["z"].numpy(), x + y)
        ins["y"].update_inplace(y * 10)
        session.run_with_iobinding(binding)
        np.testing.assert_array_equal(outs["z"].numpy(), x + y * 10)
        assert session.graph_capture.replays >= 2


def test_two_annotation_ids_with_different_shapes(gpu_host: epabi.Host) -> None:
    rng = np.random.default_rng(0)
    shapes = {"1": ((2, 3), (3, 4)), "2": ((4, 5), (5, 6))}
    with _session(gpu_host, _matmul_model()) as session:
        bound = {}
        for gid, (sa, sb) in shapes.items():
            a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
            bound[gid] = _bind(session, {"A": a, "B": b}, {"C": [sa[0], sb[1]]})
            session.run_with_iobinding(bound[gid][0], _run_opts(gid))
            np.testing.assert_allclose(bound[gid][2]["C"].numpy(), a @ b, **TOL)
        mark = len(gpu_host.trace)
        for _ in range(2):
            for gid, (sa, sb) in shapes.items():
                binding, ins, outs = bound[gid]
                a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
                ins["A"].update_inplace(a)
                ins["B"].update_inplace(b)
                _poison(outs["C"])
                session.run_with_iobinding(binding, _run_opts(gid))
                np.testing.assert_allclose(outs["C"].numpy(), a @ b, **TOL)
        assert _calls(gpu_host, mark, "OrtEp::ReplayGraph") == 4
        assert _calls(gpu_host, mark, "OrtNodeComputeInfo::Compute") == 0


def test_id_minus_one_never_captures(gpu_host: epabi.Host) -> None:
    x, y = np.ones((3, 2), np.float32), np.full((3, 2), 4, np.float32)
    with _session(gpu_host, _add_model()) as session:
        binding, _, outs = _bind(session, {"x": x, "y": y}, {"z": [3, 2]})
        mark = len(gpu_host.trace)
        for _ in range(4):
            session.run_with_iobinding(binding, _run_opts("-1"))
            np.testing.assert_array_equal(outs["z"].numpy(), x + y)
        assert _calls(gpu_host, mark, "OrtEp::OnRunStart") == 4
        assert session.graph_capture.replays == 0


def test_eight_threads_each_capture_their_own_graph(gpu_host: epabi.Host) -> None:
    model = mlp(layers=2, width=64, batch=1)
    ref = ReferenceEvaluator(model)
    errors: list[BaseException] = []
    with _session(gpu_host, model) as session:
        barrier = threading.Barrier(8)

        def worker(seed: int) -> None:
            try:
                binding, ins, outs = _bind(session, sample_inputs(model, seed=seed), {"y": [1, 64]})
                barrier.wait()
                for step in range(6):
                    new = sample_inputs(model, seed=seed * 100 + step)
                    ins["x"].update_inplace(new["x"])
                    _poison(outs["y"])
                    session.run_with_iobinding(binding)
                    np.testing.assert_allclose(outs["y"].numpy(), ref.run(None, new)[0], **TOL)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i + 1,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not errors, "\n".join(f"{type(e).__name__}: {e}" for e in errors)
        assert session.graph_capture.replays >= 8 * 5  # every thread captured once, then replayed its own graph


# -- CuPy / torch arrays, user stream -------------------------------------------------------------------------------

def test_cupy_arrays_bound_without_copying_capture_and_replay(gpu_host: epabi.Host) -> None:
    cp = pytest.importorskip("cupy")
    model = mlp(layers=3, width=64, batch=4)
    ref = ReferenceEvaluator(model)
    feeds = sample_inputs(model, seed=11)
    x, y = cp.asarray(feeds["x"]), cp.zeros((4, 64), cp.float32)
    with _session(gpu_host, model) as session:
        binding = session.io_binding()
        binding.bind_cuda_array_input("x", x)
        binding.bind_cuda_array_output("y", y)
        assert binding.inputs["x"].data_ptr() == x.data.ptr
        session.run_with_iobinding(binding)  # capture: the EP writes into the CuPy array itself
        np.testing.assert_allclose(cp.asnumpy(y), ref.run(None, feeds)[0], **TOL)
        for seed in (12, 13):
            new = sample_inputs(model, seed=seed)
            x[...] = cp.asarray(new["x"])  # written by CuPy on its stream ...
            y.fill(cp.nan)
            cp.cuda.get_current_stream().synchronize()  # ... finished before the replay reads it
            mark = len(gpu_host.trace)
            session.run_with_iobinding(binding)
            assert _calls(gpu_host, mark, "OrtEp::ReplayGraph") == 1
            np.testing.assert_allclose(cp.asnumpy(y), ref.run(None, new)[0], **TOL)
        # the same memory as a raw pointer, and through DLPack alone
        raw = session.io_binding()
        raw.bind_input("x", "cuda", 0, np.float32, [4, 64], x.data.ptr)
        raw.bind_output("y", "cuda", 0, np.float32, [4, 64], y.data.ptr)
        session.run_with_iobinding(raw, _run_opts("-1"))
        np.testing.assert_allclose(cp.asnumpy(y), ref.run(None, {"x": cp.asnumpy(x)})[0], **TOL)

    class OnlyDLPack:
        def __init__(self, a: Any) -> None:
            self.a = a

        def __dlpack__(self, stream: Any = None) -> Any:
            return self.a.__dlpack__(stream=stream)

        def __dlpack_device__(self) -> Any:
            return self.a.__dlpack_device__()

    v = epabi.OrtValue.ortvalue_from_cuda_array(OnlyDLPack(x), host=gpu_host)
    assert v.data_ptr() == x.data.ptr and v.memory_info.name == GPU_MEMORY
    np.testing.assert_array_equal(v.numpy(), cp.asnumpy(x))
    with pytest.raises(ValueError, match="not C-contiguous"):
        epabi.OrtValue.ortvalue_from_cuda_array(x[:, ::2], host=gpu_host)
    with pytest.raises(TypeError, match="complex64"):
        epabi.OrtValue.ortvalue_from_cuda_array(cp.zeros(3, cp.complex64), host=gpu_host)


def test_torch_tensors_bound_without_copying(gpu_host: epabi.Host) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    model = mlp(layers=2, width=64, batch=2)
    feeds = sample_inputs(model, seed=21)
    x = torch.from_numpy(feeds["x"]).cuda()
    y = torch.empty((2, 64), dtype=torch.float32, device="cuda")
    with _session(gpu_host, model, graph=False) as session:
        binding = session.io_binding()
        binding.bind_cuda_array_input("x", x)
        binding.bind_cuda_array_output("y", y)
        session.run_with_iobinding(binding)
    torch.cuda.synchronize()
    np.testing.assert_allclose(y.cpu().numpy(), ReferenceEvaluator(model).run(None, feeds)[0], **TOL)
    with pytest.raises(ValueError, match="lives in CPU memory"):
        epabi.OrtValue.ortvalue_from_cuda_array(torch.zeros(3), host=gpu_host)


def test_user_compute_stream_is_adopted_and_survives_the_session(gpu_host: epabi.Host,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    cp = pytest.importorskip("cupy")
    stream = cp.cuda.Stream(non_blocking=True)
    x, y = np.ones((3, 2), np.float32), np.full((3, 2), 5, np.float32)
    with caplog.at_level(logging.DEBUG, logger="epabi"):
        with _session(gpu_host, _add_model(), user_compute_stream=str(stream.ptr)) as session:
            assert session.ep.concurrent_run_supported is False  # one unified stream serialises runs
            binding = session.io_binding()
            with stream:  # made on the user's stream, which CuPy names in __cuda_array_interface__ ("stream"):
                xs, ys, zs = cp.asarray(x), cp.asarray(y), cp.zeros((3, 2), cp.float32)
                binding.bind_cuda_array_input("x", xs)  # ... and binding synchronises it
                binding.bind_cuda_array_input("y", ys)
                binding.bind_cuda_array_output("z", zs)
            np.testing.assert_array_equal(binding.inputs["y"].numpy(), y)
            for step in range(4):
                with stream:
                    ys[...] = float(step)
                stream.synchronize()
                session.run_with_iobinding(binding)
                np.testing.assert_array_equal(cp.asnumpy(zs), x + step)
            assert session.graph_capture.replays >= 2
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert f"user_compute_stream={stream.ptr:#x}" in text, text[-3000:]
    assert "adopts the user's stream" in text
    gc.collect()
    # the EP never destroyed the user's stream: work still runs on it after the session is gone
    with stream:
        a = cp.arange(1 << 16, dtype=cp.float32) * 2
        b = a.sum()
    stream.synchronize()
    assert float(b) == float(np.arange(1 << 16, dtype=np.float64).sum() * 2)


# -- magika -----------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def magika_cpu() -> tuple[Any, str]:
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(magika_path()), providers=["CPUExecutionProvider"])
    return session, session.get_outputs()[0].name


def _magika_batches() -> tuple[np.ndarray, np.ndarray]:
    first = batch()
    second = np.ascontiguousarray(first[::-1])  # other rows in the same buffer shape
    second[0, :16] = np.arange(16, dtype=np.int32)
    return first, second


def test_magika_on_gpu_without_graphs_matches_ort_cpu(gpu_host: epabi.Host, magika_cpu: tuple[Any, str]) -> None:
    cpu, _ = magika_cpu
    first, second = _magika_batches()
    with _session(gpu_host, str(magika_path()), graph=False) as session:
        for feed in (first, second):
            (scores,) = session.run(None, {"bytes": feed})
            (expected,) = cpu.run(None, {"bytes": feed})
            np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-4)
            assert (scores.argmax(1) == expected.argmax(1)).all()


def test_magika_on_gpu_with_graphs_matches_ort_cpu(gpu_host: epabi.Host, magika_cpu: tuple[Any, str]) -> None:
    cpu, out_name = magika_cpu
    first, second = _magika_batches()
    with _session(gpu_host, str(magika_path())) as session:
        binding, ins, outs = _bind(session, {"bytes": first}, {out_name: [len(first), 214]})
        for k, feed in enumerate([first, second, first]):
            ins["bytes"].update_inplace(feed)
            _poison(outs[out_name])
            mark = len(gpu_host.trace)
            session.run_with_iobinding(binding)
            assert _calls(gpu_host, mark, "OrtEp::ReplayGraph") == (0 if k == 0 else 1)
            (expected,) = cpu.run(None, {"bytes": feed})
            np.testing.assert_allclose(outs[out_name].numpy(), expected, rtol=0, atol=1e-4, err_msg=f"call {k}")
        assert session.graph_capture.replays == 2


# -- real onnxruntime ---------------------------------------------------------------------------------------------

# argv: library, model, first.npy, second.npy, output folder. Under real onnxruntime: our GPU EP device with
# enable_cuda_graph=1, IOBinding on values in the EP's device memory (ortvalue_from_numpy(..., "cuda", 0): ORT
# allocates them through the plugin's shared allocator and copies through its data transfer); 3 calls with
# gpu_graph_id 1, markers around each on stderr (where the VERBOSE session log goes).
REAL_ORT_SCRIPT = """
import gc
import os

import numpy as np

lib, model, first_path, second_path, out_dir = sys.argv[1:]
ort.register_execution_provider_library("epabi", lib)
gpus = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME and dict(d.ep_metadata).get("device_kind") == "gpu"]
if not gpus:
    emit(skip="onnxruntime lists no GPU EP device of ours (it found no GPU hardware device)",
         devices=[describe(d) for d in ort.get_ep_devices()])
    sys.exit(0)
so = ort.SessionOptions()
so.log_severity_level = 0
so.add_provider_for_devices(gpus[:1], {"enable_cuda_graph": "1"})
sess = ort.InferenceSession(model, sess_options=so, enable_fallback=0)
providers = sess.get_providers()
first, second = np.load(first_path), np.load(second_path)
out_name = sess.get_outputs()[0].name
x = ort.OrtValue.ortvalue_from_numpy(first, "cuda", 0)
y = ort.OrtValue.ortvalue_from_shape_and_type([first.shape[0], 214], np.float32, "cuda", 0)
io = sess.io_binding()
io.bind_ortvalue_input("bytes", x)
io.bind_ortvalue_output(out_name, y)
ro = ort.RunOptions()
ro.add_run_config_entry("gpu_graph_id", "1")
pointers = []
for k, feed in enumerate([first, second, first]):
    x.update_inplace(feed)
    y.update_inplace(np.full((first.shape[0], 214), np.nan, np.float32))
    sys.stderr.write(f"\\nEPABI-CALL {k}\\n")
    sys.stderr.flush()
    sess.run_with_iobinding(io, ro)
    sys.stderr.write(f"\\nEPABI-CALL-END {k}\\n")
    sys.stderr.flush()
    np.save(os.path.join(out_dir, f"call{k}.npy"), y.numpy())
    pointers.append([x.data_ptr(), y.data_ptr()])
devices = [x.device_name(), y.device_name()]
del sess, so, io, x, y
gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(ort_version=ort.__version__, providers=providers, pointers=pointers, devices=devices)
"""


def test_real_onnxruntime_replays_magika_on_the_gpu(library_path: str, magika_cpu: tuple[Any, str],
                                                     tmp_path: Path) -> None:
    """The interpreter's own onnxruntime (>= 1.26, the first with graph capture for plugin EPs) runs magika on our
    GPU EP device with enable_cuda_graph=1: the first call warms up and captures and is correct, the next two are
    one ReplayGraph each (counted from the plugin's VERBOSE log) and follow the inputs updated in place."""
    if importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("onnxruntime is not installed in this interpreter")
    import onnxruntime as ort

    if tuple(int(p) for p in re.findall(r"\d+", ort.__version__)[:2]) < (1, 26):
        pytest.skip(f"onnxruntime {ort.__version__} has no graph capture for plugin EPs (1.26+)")
    from real_ort import run_json_on_gpu
    from test_real_ort_capture import count, replays

    cpu, _ = magika_cpu
    first, second = _magika_batches()
    np.save(tmp_path / "first.npy", first)
    np.save(tmp_path / "second.npy", second)
    result, err = run_json_on_gpu(REAL_ORT_SCRIPT, [library_path, str(magika_path()), str(tmp_path / "first.npy"),
                                                    str(tmp_path / "second.npy"), str(tmp_path)])
    assert result["providers"][0] == EP, f"silent CPU fallback: {result['providers']}"
    assert result["devices"] == ["cuda", "cuda"]
    assert len({tuple(p) for p in result["pointers"]}) == 1  # the same device buffers on every call
    logs = []
    for k in range(3):
        match = re.search(rf"^EPABI-CALL {k}$(.*?)^EPABI-CALL-END {k}$", err, re.S | re.M)
        assert match, f"no log markers for call {k}:\n{err[-4000:]}"
        logs.append(match.group(1))
    for k, feed in enumerate([first, second, first]):
        (expected,) = cpu.run(None, {"bytes": feed})
        np.testing.assert_allclose(np.load(tmp_path / f"call{k}.npy"), expected, rtol=0, atol=1e-4,
                                   err_msg=f"call {k}")
    assert count(logs[0], "capturing graph of annotation id 1 on this thread after 2 regular run(s)") == 1, logs[0]
    assert replays(logs[0], 1) == []
    assert [replays(logs[k], 1) for k in (1, 2)] == [[2], [3]], err[-4000:]
    for k in (1, 2):
        assert count(logs[k], "capturing graph") == 0, logs[k]
