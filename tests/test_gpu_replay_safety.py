"""Graph replay you can trust, on the GPU EP device (CUDA; skipped without an NVIDIA GPU and driver): issue 10.

* Memory a captured graph uses stays reserved for it: a device buffer the caller drops while the graph lives is
  freed only when the graph is released (its address goes to no new value meanwhile), gpu_graph_id=-1 runs between
  replays keep their results, and under real onnxruntime a plain run() captured on the GPU leaves later results
  alone (native/alloc_registry.h).
* Errors the kernels find while they run (an out-of-range Gather index, an integer division by zero in data only
  the GPU holds, or in a replay) fail the run with INVALID_ARGUMENT naming the node, read from the stream's
  pinned error word at the run's synchronize.
* User streams: user_compute_stream=0 or 0x1 (the legacy default stream) with enable_cuda_graph=1 is refused at
  CreateEp; with graphs on, a run while the caller captures its own stream is a clear error; with graphs off, the
  EP's kernels are recorded into the caller's capture (CuPy, PyTorch), and the caller's graph replays them.

Run on the H200 (``pytest -m gpu tests/test_gpu_replay_safety.py``); CI has no GPU. Tests that need CuPy, torch or
onnxruntime skip without them.
"""

from __future__ import annotations

import gc
import importlib.util
import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

import epabi
from epabi.models import mlp, sample_inputs
from gpu_devices import gpu_ep_device as _gpu_device
from test_graph_capture import _GATHER_DATA, _add_model, _checked_model, _run_opts

pytestmark = pytest.mark.gpu

EP = "EpAbiExecutionProvider"
TOL = {"rtol": 1e-4, "atol": 1e-4}

if epabi.hardware.cuda_gpu_count() == 0:
    pytest.skip("no NVIDIA GPU with a working driver", allow_module_level=True)


def _session(host: epabi.Host, model: onnx.ModelProto, graph: bool = True, **options: str) -> epabi.InferenceSession:
    so = epabi.SessionOptions()
    so.add_provider_for_devices([_gpu_device(host)], {"enable_cuda_graph": "1" if graph else "0", **options})
    session = epabi.InferenceSession(model, so)
    off = {n: ep for n, ep in session.node_assignment.items() if ep != EP}
    assert off == {}, f"nodes left to the CPU: {off}"
    return session


def _device(host: epabi.Host, array: np.ndarray) -> epabi.OrtValue:
    return epabi.OrtValue.ortvalue_from_numpy(array, "cuda", 0, host=host)


def _empty(host: epabi.Host, shape: list[int]) -> epabi.OrtValue:
    return epabi.OrtValue.ortvalue_from_shape_and_type(shape, np.float32, "cuda", 0, host=host)


def _binding(session: epabi.InferenceSession, ins: dict[str, Any], outs: dict[str, Any]) -> epabi.IOBinding:
    binding = session.io_binding()
    for name, v in ins.items():
        binding.bind_ortvalue_input(name, v)
    for name, v in outs.items():
        binding.bind_ortvalue_output(name, v)
    return binding


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# -- 1. memory a graph uses stays reserved --------------------------------------------------------------------------

def test_graph_holds_a_dropped_device_output_until_released(gpu_host: epabi.Host) -> None:
    """Id 0 is captured on bound device buffers; gpu_graph_id=-1 runs on buffers allocated after the capture keep
    their results across the later replays; then the caller drops the captured output: its block (an allocation of
    the EP's allocator) is held by the graph, so new values of the same size never get its address, until the
    graph is released."""
    rng = np.random.default_rng(1)
    x, y = _rand(rng, 64, 64), _rand(rng, 64, 64)
    with _session(gpu_host, _add_model_of(64)) as session:
        vx, vy, vz = _device(gpu_host, x), _device(gpu_host, y), _empty(gpu_host, [64, 64])
        binding = _binding(session, {"x": vx, "y": vy}, {"z": vz})
        session.run_with_iobinding(binding)  # captures id 0
        np.testing.assert_allclose(vz.numpy(), x + y, **TOL)
        minus = []
        for _ in range(4):
            x2 = _rand(rng, 64, 64)
            vx.update_inplace(x2)
            session.run_with_iobinding(binding)
            np.testing.assert_allclose(vz.numpy(), x2 + y, **TOL)
            a, b = _rand(rng, 64, 64), _rand(rng, 64, 64)
            out = _empty(gpu_host, [64, 64])
            session.run_with_iobinding(_binding(session, {"x": _device(gpu_host, a), "y": _device(gpu_host, b)},
                                                {"z": out}), _run_opts("-1"))
            minus.append((out, a + b))
        session.run_with_iobinding(binding)
        for out, want in minus:
            np.testing.assert_allclose(out.numpy(), want, **TOL)
        held = vz.data_ptr()
        del binding, vz, out, minus
        gc.collect()
        fresh = [_empty(gpu_host, [64, 64]) for _ in range(8)]
        assert held not in {v.data_ptr() for v in fresh}, "a block the graph holds went to a new value"
        del fresh
        session.release_captured_graph(0)
        del vx, vy


def _add_model_of(n: int) -> onnx.ModelProto:
    model = _add_model()
    for vi in (*model.graph.input, *model.graph.output):
        dims = vi.type.tensor_type.shape.dim
        dims[0].dim_value, dims[1].dim_value = n, n
    return model


def test_real_onnxruntime_plain_runs_on_the_gpu_keep_their_results(library_path: str, tmp_path: Path) -> None:
    """The interpreter's own onnxruntime (1.26+) on our GPU EP device: id 0 captured from a plain run() (ORT copies
    the feeds into our allocator's memory and frees them, and the outputs, after the call), then -1 plain runs,
    replays of id 0 and calls of id 1 on a binding made after the capture (whose buffers, without the graph's
    holds, could be the capture's freed ones): every result stays what its call returned."""
    if importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("onnxruntime is not installed in this interpreter")
    import onnxruntime as ort

    if tuple(int(p) for p in re.findall(r"\d+", ort.__version__)[:2]) < (1, 26):
        pytest.skip(f"onnxruntime {ort.__version__} has no graph capture for plugin EPs (1.26+)")
    from test_real_ort_capture import ADD_SHAPE, CAPTURE, Plan, add_model, replays

    model = tmp_path / "add.onnx"
    onnx.save(add_model(), str(model))
    rng = np.random.default_rng(2)
    plan = Plan(CAPTURE, "device", cpu_arena=False)
    plan.bind("late", {"x": _rand(rng, *ADD_SHAPE), "y": _rand(rng, *ADD_SHAPE)}, {"z": list(ADD_SHAPE)})
    first = plan.plain(0, x=_rand(rng, *ADD_SHAPE), y=_rand(rng, *ADD_SHAPE))
    minus, again, late = [], [], []
    for _ in range(4):
        minus.append(plan.plain(-1, x=_rand(rng, *ADD_SHAPE), y=_rand(rng, *ADD_SHAPE)))
        again.append(plan.plain(0, x=_rand(rng, *ADD_SHAPE), y=_rand(rng, *ADD_SHAPE)))
        late.append(plan.call("late", 1, x=_rand(rng, *ADD_SHAPE)))
    out = plan.run_on_gpu(library_path, model, tmp_path / "run")

    def want(k: int) -> np.ndarray:
        ins = plan.inputs_at(k)
        return ins["x"] + ins["y"]

    for k in [first, *minus]:
        np.testing.assert_allclose(out.outputs[k]["plain0"], want(k), **TOL)
        np.testing.assert_allclose(out.final[k][0], want(k), **TOL)
    assert all(out.outputs[k] == {} for k in again)
    for k in late:
        np.testing.assert_allclose(out.outputs[k]["z"], want(k), **TOL)
    np.testing.assert_allclose(out.final_bound["late"]["z"], want(late[-1]), **TOL)
    # on CUDA the replay right after the capture is the first: ReplayGraph's count from 2
    assert [replays(out.logs[k], 0) for k in again] == [[2 + i] for i in range(len(again))]


# -- 3. errors the kernels find -------------------------------------------------------------------------------------

@pytest.mark.parametrize("graph", [False, True], ids=["eager", "replay"])
def test_kernel_errors_on_the_gpu_fail_the_run(gpu_host: epabi.Host, graph: bool) -> None:
    """Indices and divisors in device memory are not read back before the launch (no host synchronization per
    node): the CUDA kernels check them, store the node's site in the stream's pinned error word, and the run fails
    at its synchronize with INVALID_ARGUMENT naming the node. Eager runs and replays alike; a good run after a
    failed one is correct."""
    idx, a, b = np.array([3, 0], np.int64), np.array([7, -9, 4], np.int32), np.array([2, 4, -3], np.int32)
    with _session(gpu_host, _checked_model(), graph=graph) as session:
        ins = {"idx": _device(gpu_host, idx), "a": _device(gpu_host, a), "b": _device(gpu_host, b)}
        outs = {"y": _empty(gpu_host, [2, 3]), "q": _empty(gpu_host, [3])}
        binding = _binding(session, ins, outs)

        def good(i: np.ndarray, y: np.ndarray, bound: tuple) -> None:
            binding, ins, outs = bound
            ins["idx"].update_inplace(i)
            ins["b"].update_inplace(y)
            session.run_with_iobinding(binding)
            np.testing.assert_array_equal(outs["y"].numpy(), _GATHER_DATA[i])
            np.testing.assert_array_equal(outs["q"].numpy(), np.trunc(a / y).astype(np.float32))

        bound = (binding, ins, outs)
        good(idx, b, bound)
        good(np.array([1, 2], np.int64), b, bound)
        ins["idx"].update_inplace(np.array([0, 4], np.int64))
        with pytest.raises(epabi.OrtStatusError, match=r"node 'gather' \(Gather\).*index is out of range") as info:
            session.run_with_iobinding(binding)
        assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
        assert ("replaying a captured graph" in str(info.value)) == graph, str(info.value)
        good(np.array([-4, 3], np.int64), b, bound)
        ins["b"].update_inplace(np.array([1, 0, 1], np.int32))
        with pytest.raises(epabi.OrtStatusError, match=r"node 'div' \(Div\).*integer division by zero") as info:
            session.run_with_iobinding(binding)
        assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
        good(idx, np.array([3, 3, 3], np.int32), bound)
        del binding, ins, outs, bound


# -- 5. user streams ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("legacy", ["0", "0x1"])
def test_legacy_stream_with_graphs_is_refused_at_create_ep(gpu_host: epabi.Host, legacy: str) -> None:
    """CUDA cannot capture its legacy default stream: with enable_cuda_graph=1 the EP refuses it at CreateEp,
    saying why; without graphs the legacy stream is fine."""
    with pytest.raises(epabi.OrtStatusError, match="legacy default stream") as info:
        _session(gpu_host, _add_model(), user_compute_stream=legacy)
    assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
    x = np.ones((3, 2), np.float32)
    with _session(gpu_host, _add_model(), graph=False, user_compute_stream=legacy) as session:
        vx, vz = _device(gpu_host, x), _empty(gpu_host, [3, 2])
        binding = _binding(session, {"x": vx, "y": vx}, {"z": vz})
        session.run_with_iobinding(binding)
        np.testing.assert_array_equal(vz.numpy(), x + x)
        del binding, vx, vz


def _cupy() -> Any:
    return pytest.importorskip("cupy")


def test_graphs_on_inside_the_callers_capture_is_a_clear_error(gpu_host: epabi.Host) -> None:
    """With enable_cuda_graph=1 the EP captures and replays its own graphs on the user's stream, which cannot happen
    inside the caller's capture of that stream: both a capturing run and a replay are refused with a message naming
    the cause and the remedies; the caller's capture is left intact, and runs after it work."""
    cp = _cupy()
    stream = cp.cuda.Stream(non_blocking=True)
    x = np.ones((3, 2), np.float32)
    with _session(gpu_host, _add_model(), user_compute_stream=str(stream.ptr)) as session:
        with stream:
            xs, zs = cp.asarray(x), cp.zeros((3, 2), cp.float32)
        stream.synchronize()
        binding = session.io_binding()
        binding.bind_cuda_array_input("x", xs)
        binding.bind_cuda_array_input("y", xs)
        binding.bind_cuda_array_output("z", zs)
        for captured in (False, True):  # before the EP's graph exists (a capturing run), then a replay
            stream.begin_capture()
            try:
                with stream:
                    zs.fill(7)  # the caller's own work in its capture (no allocation)
                with pytest.raises(epabi.OrtStatusError, match="is being captured by its owner") as info:
                    session.run_with_iobinding(binding)
            finally:
                graph = stream.end_capture()
            assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
            assert "enable_cuda_graph=0" in str(info.value), str(info.value)
            assert ("ReplayGraph" in str(info.value)) == captured
            graph.launch(stream=stream)  # the caller's capture is intact: its own work replays
            stream.synchronize()
            np.testing.assert_array_equal(cp.asnumpy(zs), np.full((3, 2), 7, np.float32))
            del graph
            session.run_with_iobinding(binding)  # outside: captures (first pass), replays (second)
            np.testing.assert_array_equal(cp.asnumpy(zs), x + x)
        assert session.graph_capture.replays >= 1


@pytest.mark.parametrize("mode", ["relaxed", "thread_local"])
def test_graphs_off_kernels_are_recorded_into_the_callers_cupy_capture(gpu_host: epabi.Host, mode: str) -> None:
    """enable_cuda_graph=0 with user_compute_stream: a run while CuPy captures that stream records the EP's
    kernels (MatMul through cuBLAS, Add, Relu) into CuPy's graph, with no synchronization or read-back inside the
    capture, and CuPy's graph then replays them on new inputs written in place, correctly."""
    cp = _cupy()
    modes = {"relaxed": cp.cuda.runtime.streamCaptureModeRelaxed,
             "thread_local": cp.cuda.runtime.streamCaptureModeThreadLocal}
    model = mlp(layers=3, width=64, batch=4)
    ref = ReferenceEvaluator(model)
    stream = cp.cuda.Stream(non_blocking=True)
    feeds = sample_inputs(model, seed=31)
    with _session(gpu_host, model, graph=False, user_compute_stream=str(stream.ptr)) as session:
        with stream:
            x, y = cp.asarray(feeds["x"]), cp.zeros((4, 64), cp.float32)
        stream.synchronize()
        binding = session.io_binding()
        binding.bind_cuda_array_input("x", x)
        binding.bind_cuda_array_output("y", y)
        session.run_with_iobinding(binding)  # eager, outside the capture: kernels compiled, arena warm
        np.testing.assert_allclose(cp.asnumpy(y), ref.run(None, feeds)[0], **TOL)
        stream.begin_capture(mode=modes[mode])
        try:
            session.run_with_iobinding(binding)  # recorded, not run
        finally:
            graph = stream.end_capture()
        for seed in (32, 33, 34):
            new = sample_inputs(model, seed=seed)
            with stream:
                x[...] = cp.asarray(new["x"])
                y.fill(cp.nan)
            graph.launch(stream=stream)
            stream.synchronize()
            np.testing.assert_allclose(cp.asnumpy(y), ref.run(None, new)[0], **TOL, err_msg=f"seed {seed}")
        # the session still runs eagerly afterwards
        session.run_with_iobinding(binding)
        np.testing.assert_allclose(cp.asnumpy(y), ref.run(None, new)[0], **TOL)
        del graph


def test_graphs_off_kernels_are_recorded_into_a_torch_cuda_graph(gpu_host: epabi.Host) -> None:
    """The same with PyTorch: torch.cuda.graph on a side stream given as user_compute_stream records the EP's
    kernels, and CUDAGraph.replay() recomputes the output from inputs copied in place."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    model = mlp(layers=2, width=64, batch=2)
    ref = ReferenceEvaluator(model)
    feeds = sample_inputs(model, seed=41)
    side = torch.cuda.Stream()
    x = torch.from_numpy(feeds["x"]).cuda()
    y = torch.zeros((2, 64), dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    with _session(gpu_host, model, graph=False, user_compute_stream=str(side.cuda_stream)) as session:
        binding = session.io_binding()
        binding.bind_cuda_array_input("x", x)
        binding.bind_cuda_array_output("y", y)
        with torch.cuda.stream(side):
            session.run_with_iobinding(binding)  # eager warm-up on the side stream
        torch.cuda.synchronize()
        np.testing.assert_allclose(y.cpu().numpy(), ref.run(None, feeds)[0], **TOL)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=side, capture_error_mode="thread_local"):
            session.run_with_iobinding(binding)
        for seed in (42, 43):
            new = sample_inputs(model, seed=seed)
            x.copy_(torch.from_numpy(new["x"]))
            y.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            np.testing.assert_allclose(y.cpu().numpy(), ref.run(None, new)[0], **TOL, err_msg=f"seed {seed}")
        del g
