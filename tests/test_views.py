"""Zero-copy views (native/plan_passes.c, epabi_plan_mark_views; kernel.h, epabi_exec_output_view): Reshape, Squeeze,
Unsqueeze, Flatten, Identity, an Expand that repeats nothing and a Slice of the whole input hand out their input's
bytes instead of a copy, unless their output is a fused output (the host's buffer: copied).

Each case checks the plan's VERBOSE summary ("N views"), the launches a captured run records (a view launches
nothing; a copy does), and values against ORT's CPU EP: on epabi's host (software adapter, host memory and its own
device memory, with graph capture and replays of inputs updated in place), under real onnxruntime 1.24.4 and 1.32.0
(ORT_DISABLE_ALL, so the graph it partitions is the model's own) and on the GPU (``-m gpu``). Liveness: a view's
source read again after the view's readers, and a view read after its source's other readers, with intermediates
of the same size allocated between (the arena hands a freed block out again at once, so a block freed too early
would be overwritten). Then magika at batch 1 and 6.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import epabi
from real_ort import MIN, NEWEST, run_json
from test_real_ort_models import RUN_MODEL_SCRIPT, SOFTWARE, assert_all_on_our_ep

F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
EP = epabi.get_ep_name()
VIEWS = re.compile(r"compiled '[^']*': (\d+) steps \(.*\), (\d+) views,")
LAUNCHES = re.compile(r"captured graph of annotation id -?\d+: (\d+) launch\(es\)")
#: the run-model script of test_real_ort_models.py with the session logging VERBOSE, where the plan's summary goes
VERBOSE_RUN_SCRIPT = RUN_MODEL_SCRIPT.replace("so.log_severity_level = 1", "so.log_severity_level = 0")
assert VERBOSE_RUN_SCRIPT != RUN_MODEL_SCRIPT


def _ints(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, tuple[int, list]], outputs: list[str],
           inits: list[onnx.TensorProto] | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "views", [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
                              [helper.make_tensor_value_info(o, 0, None) for o in outputs], inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(inferred, full_check=True)
    return inferred


def chain_model() -> onnx.ModelProto:
    """Reshape -> Unsqueeze -> Squeeze -> Add: views of a fused input and of views, read by the Add."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Unsqueeze", ["r", "ax"], ["u"]),
             helper.make_node("Squeeze", ["u", "ax"], ["q"]), helper.make_node("Add", ["q", "b"], ["y"])]
    b = numpy_helper.from_array(np.linspace(-1, 1, 4).astype(np.float32), "b")
    return _model(nodes, {"x": (F, [2, 3, 4])}, ["y"], [_ints("s", [6, 4]), _ints("ax", [0]), b])


def const_source_model() -> onnx.ModelProto:
    """A Reshape and a Flatten of constants (views of the plan's copies) multiplied with the input."""
    c = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(2, 6) - 5, "c")
    nodes = [helper.make_node("Reshape", ["c", "s"], ["rc"]), helper.make_node("Mul", ["x", "rc"], ["m"]),
             helper.make_node("Flatten", ["m"], ["f"], axis=0), helper.make_node("Identity", ["f"], ["i"]),
             helper.make_node("Transpose", ["i"], ["y"], perm=[1, 0])]
    return _model(nodes, {"x": (F, [3, 4])}, ["y"], [c, _ints("s", [3, 4])])


def output_model() -> onnx.ModelProto:
    """Views that are graph outputs (copied into the host's buffers), and a view of a graph output read inside."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Identity", ["x"], ["i"]),
             helper.make_node("Unsqueeze", ["r", "ax"], ["u"]), helper.make_node("Neg", ["u"], ["y"])]
    return _model(nodes, {"x": (F, [2, 6])}, ["r", "i", "y"], [_ints("s", [3, 4]), _ints("ax", [1])])


def reread_model() -> onnx.ModelProto:
    """Liveness, int32 (no elementwise chain forms): a = Abs(x) is viewed (v), v's readers run, int32 values of a's
    size are allocated, then a itself is read again; and w views a second intermediate whose other readers are done
    before w is read."""
    nodes = [helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Reshape", ["a", "s"], ["v"]),
             helper.make_node("Neg", ["v"], ["n"]), helper.make_node("Reshape", ["n", "back"], ["nb"]),
             helper.make_node("Mul", ["nb", "x"], ["m"]),
             helper.make_node("Add", ["m", "a"], ["p"]),          # a read after its view's readers
             helper.make_node("Reshape", ["p", "s"], ["w"]),      # w views p
             helper.make_node("Neg", ["p"], ["pn"]),              # p's other reader
             helper.make_node("Abs", ["pn"], ["pa"]),             # same-size values while p is alive through w
             helper.make_node("Mul", ["pa", "x"], ["pm"]),
             helper.make_node("Reshape", ["pm", "s"], ["pv"]),
             helper.make_node("Sub", ["w", "pv"], ["y"])]         # w read last
    return _model(nodes, {"x": (I32, [4, 6])}, ["y"], [_ints("s", [2, 12]), _ints("back", [4, 6])])


def expand_model() -> onnx.ModelProto:
    """Expands to the input's own shape (magika's BroadcastTo) and to a shape adding only 1s: views; one that
    repeats rows: a copy."""
    nodes = [helper.make_node("Expand", ["x", "same"], ["e0"]), helper.make_node("Expand", ["e0", "ones"], ["e1"]),
             helper.make_node("Expand", ["z", "rows"], ["e2"]), helper.make_node("Add", ["e1", "e2"], ["y"])]
    return _model(nodes, {"x": (F, [1, 3]), "z": (F, [1, 3])}, ["y"],
                  [_ints("same", [1, 3]), _ints("ones", [1, 1, 1, 3]), _ints("rows", [4, 3])])


def slice_model() -> onnx.ModelProto:
    """Slices of the whole input (ends INT64_MAX and 1e9, step 1; an axis of extent 1 with step -1): views; a
    partial slice and a reversing one: copies."""
    nodes = [helper.make_node("Slice", ["x", "zero2", "big2", "ax01", "one2"], ["s0"]),
             helper.make_node("Slice", ["s0", "zero1", "e9", "ax1"], ["s1"]),
             helper.make_node("Slice", ["x", "one1", "big1", "ax1"], ["s2"]),
             helper.make_node("Slice", ["x", "minus1", "neg_big", "ax1", "minus1"], ["s3"]),
             helper.make_node("Slice", ["z", "zero1", "big1", "ax0", "minus1"], ["s4"]),
             helper.make_node("Neg", ["s1"], ["y0"]), helper.make_node("Neg", ["s2"], ["y1"]),
             helper.make_node("Neg", ["s3"], ["y2"]), helper.make_node("Neg", ["s4"], ["y3"])]
    big = 2**63 - 1
    return _model(nodes, {"x": (F, [3, 5]), "z": (F, [1, 5])}, ["y0", "y1", "y2", "y3"],
                  [_ints("zero2", [0, 0]), _ints("big2", [big, big]), _ints("ax01", [0, 1]), _ints("one2", [1, 1]),
                   _ints("zero1", [0]), _ints("e9", [10**9]), _ints("ax1", [1]), _ints("ax0", [0]),
                   _ints("one1", [1]), _ints("big1", [big]), _ints("minus1", [-1]), _ints("neg_big", [-big])])


#: name -> (model, steps, views, launches of a captured run on the software adapter)
CASES = {
    "chain": (chain_model, 4, 3, 1),
    "const_source": (const_source_model, 5, 3, 2),
    "graph_outputs": (output_model, 4, 1, 3),
    "liveness": (reread_model, 12, 4, 8),
    "expand": (expand_model, 4, 3, 2),
    "slice": (slice_model, 9, 5, 6),
}


def _feeds(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == I32:
            feeds[vi.name] = rng.integers(-1000, 1000, dims).astype(np.int32)
        else:
            feeds[vi.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def _cpu_ep(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _assert_close(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want), what
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, what
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=what)


def _counts(pattern: re.Pattern, messages: list[str]) -> list[tuple[int, ...]]:
    return [tuple(int(g) for g in m.groups()) for m in (pattern.search(s) for s in messages) if m]


@pytest.fixture
def compiled(caplog: pytest.LogCaptureFixture) -> Iterator:
    """compiled(host, model, options) -> (session, (steps, views)) on the host's EP devices."""
    made: list[epabi.InferenceSession] = []

    def make(host: epabi.Host, model: onnx.ModelProto, options: dict[str, str] | None = None):
        so = epabi.SessionOptions()
        so.log_severity_level = 0
        so.add_provider_for_devices(host.get_ep_devices(), options or {})
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="epabi"):
            sess = epabi.InferenceSession(model, so)
        made.append(sess)
        assert set(sess.node_assignment.values()) == {EP}, sess.node_assignment
        counts = _counts(VIEWS, [r.getMessage() for r in caplog.records])
        assert len(counts) == 1, caplog.text[-3000:]
        return sess, counts[0]

    yield make
    for s in made:
        s.close()


@pytest.fixture(params=["host", "device"])
def memory_host(request: pytest.FixtureRequest, library_path: str, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """(host, memory): the software adapter in host memory, or in its own device memory."""
    monkeypatch.setenv("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")
    monkeypatch.setenv("EPABI_CUDA_DISCOVERY", "0")
    monkeypatch.setenv("EPABI_SOFTWARE_DEVICE_MEMORY", request.param)
    with epabi.Host(hardware=[epabi.cpu_device()]) as h:
        h.register_execution_provider_library("epabi", library_path)
        yield h, request.param


@pytest.mark.parametrize("case", list(CASES))
def test_views_plan_and_values(memory_host, compiled, case: str) -> None:
    build, steps, views, _ = CASES[case]
    model = build()
    sess, counts = compiled(memory_host[0], model)
    assert counts == (steps, views)
    for seed in (1, 2):   # a second run: nothing of the first (freed blocks, views) leaks into it
        feeds = _feeds(model, seed)
        _assert_close(sess.run(None, feeds), _cpu_ep(model, feeds), f"{case} seed {seed}")


@pytest.mark.parametrize("case", list(CASES))
def test_views_in_graph_capture(memory_host, caplog: pytest.LogCaptureFixture, case: str) -> None:
    """IOBinding, inputs updated in place: the capture records no launch for a view (the launch counts) and every
    replay follows the fresh inputs; in device memory every view is in the EP's memory (operands are checked)."""
    host, memory = memory_host
    build, steps, views, launches = CASES[case]
    model = build()
    place: tuple = ("cuda", 0) if memory == "device" else ()
    want0 = _cpu_ep(model, _feeds(model, 0))
    so = epabi.SessionOptions()
    so.log_severity_level = 0
    so.add_provider_for_devices(host.get_ep_devices(), {"enable_cuda_graph": "1",
                                                        "min_num_runs_before_cuda_graph_capture": "1"})
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="epabi"), epabi.InferenceSession(model, so) as sess:
        names = [o.name for o in model.graph.output]
        ins = {k: epabi.OrtValue.ortvalue_from_numpy(v, *place, host=host) for k, v in _feeds(model, 0).items()}
        outs = {n: epabi.OrtValue.ortvalue_from_shape_and_type(list(w.shape), w.dtype, *place, host=host)
                for n, w in zip(names, want0, strict=True)}
        binding = sess.io_binding()
        for k, v in ins.items():
            binding.bind_ortvalue_input(k, v)
        for k, v in outs.items():
            binding.bind_ortvalue_output(k, v)
        for seed in range(4):
            feeds = _feeds(model, seed)
            for k, v in feeds.items():
                ins[k].update_inplace(v)
            sess.run_with_iobinding(binding)
            _assert_close([outs[n].numpy() for n in names], _cpu_ep(model, feeds), f"{case} call {seed}")
        assert sess.graph_capture.replays == 3
        del binding, ins, outs
    messages = [r.getMessage() for r in caplog.records]
    assert _counts(VIEWS, messages) == [(steps, views)]
    assert _counts(LAUNCHES, messages) == [(launches,)], [m for m in messages if "captured" in m]


def _magika():
    from magika_model import batch, model_path
    return onnx.load(str(model_path())), batch()


MAGIKA_VIEWS = 21   # 21 of its 71 steps: Reshape/Squeeze/Unsqueeze/Flatten, 7 identity Expands, full Slices


def test_magika_views(host: epabi.Host, compiled) -> None:
    model, x = _magika()
    sess, (steps, views) = compiled(host, model)
    assert (steps, views) == (71, MAGIKA_VIEWS)
    for feed in [x, x[:1]]:
        _assert_close(sess.run(None, {"bytes": feed}), _cpu_ep(model, {"bytes": feed}), f"batch {len(feed)}")


def _run_real(version: str, library_path: str, model: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp: Path,
              level: str = "disable_all") -> tuple[list[np.ndarray], list[tuple[int, ...]]]:
    """The model on our software adapter under real onnxruntime: its outputs and the plans' (steps, views)."""
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "model.onnx"
    onnx.save(model, str(path))
    args = [library_path, str(path), level, str(tmp)]
    for name, value in feeds.items():
        np.save(tmp / f"in_{name}.npy", value)
        args.append(f"{name}={tmp / f'in_{name}.npy'}")
    result, _, err = run_json(version, VERBOSE_RUN_SCRIPT, SOFTWARE, args, timeout=300)
    assert_all_on_our_ep(result, version, err)
    outs = [np.load(tmp / f"out{i}.npy") for i in range(len(result["output_names"]))]
    return outs, _counts(VIEWS, err.splitlines())


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_real_ort_views(version: str, library_path: str, tmp_path: Path) -> None:
    """Under ORT_DISABLE_ALL ORT partitions the model's own graph: the same plan as on epabi's host."""
    for case, (build, steps, views, _) in CASES.items():
        model = build()
        feeds = _feeds(model, 3)
        got, counts = _run_real(version, library_path, model, feeds, tmp_path / case)
        assert counts == [(steps, views)], case
        _assert_close(got, _cpu_ep(model, feeds), f"{case} on {version}")


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_real_ort_magika_views(version: str, library_path: str, tmp_path: Path) -> None:
    """magika at ORT's default level (its MatMulAddFusion makes the last Dense one Gemm, no view op changes)."""
    model, x = _magika()
    for feed in [x, x[:1]]:
        got, counts = _run_real(version, library_path, model, {"bytes": feed}, tmp_path / f"b{len(feed)}", "default")
        assert [v for _, v in counts] == [MAGIKA_VIEWS]
        _assert_close(got, _cpu_ep(model, {"bytes": feed}), f"batch {len(feed)} on {version}")


@pytest.mark.real_ort
@pytest.mark.parametrize("version", ["1.26.0", NEWEST])
def test_real_ort_capture_with_views(version: str, library_path: str, tmp_path: Path) -> None:
    """Real onnxruntime's capture loop (test_real_ort_capture.py's script): replays of views of bound inputs follow
    the inputs updated in place."""
    from test_real_ort_capture import Plan, memory_for
    model = chain_model()
    path = tmp_path / "chain.onnx"
    onnx.save(model, str(path))
    plan = Plan({"enable_cuda_graph": "1"}, memory_for(version))
    plan.bind("b", _feeds(model, 0), {"y": [6, 4]})
    calls = [plan.call("b", 1)] + [plan.call("b", 1, **_feeds(model, seed)) for seed in (1, 2, 3)]
    out = plan.run(version, library_path, path, tmp_path / "run")
    for k in calls:
        np.testing.assert_allclose(out.outputs[k]["y"], _cpu_ep(model, plan.inputs_at(k))[0], rtol=1e-6, atol=1e-6,
                                   err_msg=f"call {k}")
    # ORT's default level may merge the reshapes (1.26.0 and 1.32.0: into one Reshape); all but the Add are views
    [(steps, views)] = _counts(VIEWS, out.stderr.splitlines())
    assert views == steps - 1 >= 1, (steps, views)
    assert _counts(LAUNCHES, out.stderr.splitlines()) == [(1,)]


# -- the GPU (-m gpu; skipped without an NVIDIA GPU) -------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("case", list(CASES))
def test_gpu_views(gpu_host: epabi.Host, caplog: pytest.LogCaptureFixture, case: str) -> None:
    """The same plans on the GPU EP device (no host step here: each view reads a fused input, a constant or a
    device value), eager and captured with IOBinding in device memory, replays following inputs updated in place."""
    if epabi.hardware.cuda_gpu_count() == 0:
        pytest.skip("no NVIDIA GPU with a working driver")
    from gpu_devices import gpu_ep_device
    build, steps, views, _ = CASES[case]
    model = build()
    device = gpu_ep_device(gpu_host)
    for graph in (False, True):
        so = epabi.SessionOptions()
        so.log_severity_level = 0
        so.add_provider_for_devices([device], {"enable_cuda_graph": "1" if graph else "0",
                                               "min_num_runs_before_cuda_graph_capture": "1"})
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="epabi"), epabi.InferenceSession(model, so) as sess:
            assert set(sess.node_assignment.values()) == {EP}, sess.node_assignment
            names = [o.name for o in model.graph.output]
            if not graph:
                for seed in (1, 2):
                    feeds = _feeds(model, seed)
                    _assert_close(sess.run(None, feeds), _cpu_ep(model, feeds), f"{case} eager seed {seed}")
            else:
                want0 = _cpu_ep(model, _feeds(model, 0))
                ins = {k: epabi.OrtValue.ortvalue_from_numpy(v, "cuda", 0, host=gpu_host)
                       for k, v in _feeds(model, 0).items()}
                outs = {n: epabi.OrtValue.ortvalue_from_shape_and_type(list(w.shape), w.dtype, "cuda", 0,
                                                                       host=gpu_host)
                        for n, w in zip(names, want0, strict=True)}
                binding = sess.io_binding()
                for k, v in ins.items():
                    binding.bind_ortvalue_input(k, v)
                for k, v in outs.items():
                    binding.bind_ortvalue_output(k, v)
                for seed in range(4):
                    feeds = _feeds(model, seed)
                    for k, v in feeds.items():
                        ins[k].update_inplace(v)
                    sess.run_with_iobinding(binding)
                    _assert_close([outs[n].numpy() for n in names], _cpu_ep(model, feeds), f"{case} replay {seed}")
                assert sess.graph_capture.replays == 3
                del binding, ins, outs
        assert _counts(VIEWS, [r.getMessage() for r in caplog.records]) == [(steps, views)], case


@pytest.mark.gpu
def test_gpu_magika_views(gpu_host: epabi.Host, caplog: pytest.LogCaptureFixture) -> None:
    """magika on the GPU: its views counted (Shape -> Slice -> Concat chains run on the host there, so a view of a
    host value is a host step's), outputs at batch 1 and 6 within 1e-4 of the CPU EP, eager and captured."""
    if epabi.hardware.cuda_gpu_count() == 0:
        pytest.skip("no NVIDIA GPU with a working driver")
    from gpu_devices import gpu_ep_device
    model, x = _magika()
    for graph in ("0", "1"):
        so = epabi.SessionOptions()
        so.log_severity_level = 0
        so.add_provider_for_devices([gpu_ep_device(gpu_host)], {"enable_cuda_graph": graph,
                                                                "min_num_runs_before_cuda_graph_capture": "1"})
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="epabi"), epabi.InferenceSession(model, so) as sess:
            for feed in [x, x[:1]] if graph == "0" else [x]:
                for _ in range(3):   # capture, then replays
                    got = sess.run(None, {"bytes": feed})
                    want = _cpu_ep(model, {"bytes": feed})
                    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)
        counts = _counts(VIEWS, [r.getMessage() for r in caplog.records])
        assert len(counts) == 1 and counts[0][1] >= MAGIKA_VIEWS - 2, counts
