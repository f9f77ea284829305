"""Moments fusion (native/plan_moments.c, native/kernels/moments.h): ReduceSum(X, axes) and ReduceSum(Mul(X, X), axes)
over equal specs become one plan step reading X once (one launch on the GPU, one walk on the software adapter).

Each case checks the plan (the VERBOSE summary's steps and "N moment pair(s)"), that the outputs equal, bit for bit,
the same nodes run one session per node on our EP (the unfused ReduceSum and Mul kernels), and that they match ORT's
CPU EP: axes first, middle, last, several, negative, as an attribute (opset 11) or an input (13), keepdims 0 and 1,
empty axes with noop_with_empty_axes 0 (everything reduced) and 1 (X and X * X), a symbolic batch. Left unfused: a
Mul(X, Y) with Y another value, a square read elsewhere or leaving the graph, ReduceSums of different axes or
keepdims. Then graph capture, magika (two pairs, both hosts: epabi's and real onnxruntime 1.24.4 / 1.32.0), and the
GPU twins, including column reductions of every Reduce op over axis 1 of [2, 512, 256] (reduce_cols_f32).
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
from gpu_devices import gpu_ep_device
from real_ort import MIN, NEWEST, run_json
from test_chain_fusion import node_by_node

SUMMARY = re.compile(r"compiled '[^']*': (\d+) steps \(.*\), (\d+) moment pair\(s\)")
F = TensorProto.FLOAT


def moments_model(shape: list, axes: list[int] | None, keepdims: int = 0, noop: int = 0, opset: int = 13,
                  second: str = "x", keepdims2: int | None = None, axes2: list[int] | None = None,
                  extra: str | None = None) -> onnx.ModelProto:
    """s1 = ReduceSum(x), s2 = ReduceSum(x * second), both graph outputs, plus var = s2 / n - (s1 / n)^2 as an expanded
    LayerNorm computes it. axes None: no axes at all. opset 13 takes axes as a constant input, 11 as an attribute.
    keepdims2/axes2: the second ReduceSum's own. extra: 'output' makes the square a graph output too, 'abs' has an Abs
    read it."""
    inits: list[onnx.TensorProto] = []

    def reduce(data: str, out: str, ax: list[int] | None, keep: int, tag: str) -> onnx.NodeProto:
        attrs: dict = {"keepdims": keep}
        ins = [data]
        if opset >= 13:
            if noop:
                attrs["noop_with_empty_axes"] = noop
            if ax is not None:
                if all(t.name != f"axes_{tag}" for t in inits):
                    inits.append(numpy_helper.from_array(np.array(ax, np.int64), f"axes_{tag}"))
                ins.append(f"axes_{tag}")
        elif ax is not None:
            attrs["axes"] = ax
        return helper.make_node("ReduceSum", ins, [out], **attrs)

    nodes = [reduce("x", "s1", axes, keepdims, "a"), helper.make_node("Mul", ["x", second], ["sq"]),
             reduce("sq", "s2", axes if axes2 is None else axes2, keepdims if keepdims2 is None else keepdims2,
                    "a" if axes2 is None else "b")]
    rank = len(shape)
    reduced = range(rank) if not axes and not noop else [] if not axes else [a % rank for a in axes]
    count = float(np.prod([shape[a] if isinstance(shape[a], int) else 1 for a in reduced])) if reduced else 1.0
    inits.append(numpy_helper.from_array(np.array(1.0 / count, np.float32), "inv_n"))
    nodes += [helper.make_node("Mul", ["s1", "inv_n"], ["mean"]), helper.make_node("Mul", ["s2", "inv_n"], ["msq"])]
    if keepdims2 is None and axes2 is None:
        nodes += [helper.make_node("Mul", ["mean", "mean"], ["m2"]), helper.make_node("Sub", ["msq", "m2"], ["var"])]
    outputs = ["s1", "s2"] + (["var"] if keepdims2 is None and axes2 is None else ["mean", "msq"])
    if extra == "output":
        outputs.append("sq")
    elif extra == "abs":
        nodes.append(helper.make_node("Abs", ["sq"], ["asq"]))
        outputs.append("asq")
    inputs = [helper.make_tensor_value_info("x", F, shape)]
    if second != "x":
        inputs.append(helper.make_tensor_value_info(second, F, shape))
    graph = helper.make_graph(nodes, "moments", inputs, [helper.make_tensor_value_info(o, 0, None) for o in outputs],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(inferred, full_check=True)
    return inferred


#: name -> (model builder, pairs fused)
CASES = {
    "first_axis": (lambda: moments_model([4, 6, 8], [0]), 1),
    "middle_axis_keepdims": (lambda: moments_model([3, 40, 16], [1], keepdims=1), 1),
    "last_axis": (lambda: moments_model([5, 7, 33], [2]), 1),
    "two_axes_keepdims": (lambda: moments_model([2, 6, 5, 9], [1, 3], keepdims=1), 1),
    "negative_axis": (lambda: moments_model([3, 8, 10], [-2]), 1),
    "negative_and_positive": (lambda: moments_model([3, 8, 10], [-1, 0]), 1),
    "attribute_axes": (lambda: moments_model([4, 9, 6], [1], opset=11), 1),
    "attribute_absent": (lambda: moments_model([4, 9, 6], None, keepdims=1, opset=11), 1),
    "empty_axes_reduce_all": (lambda: moments_model([3, 4, 5], None), 1),
    "empty_axes_noop": (lambda: moments_model([3, 4, 5], None, noop=1), 1),
    "empty_list_noop": (lambda: moments_model([3, 4, 5], [], noop=1), 1),
    "symbolic_batch": (lambda: moments_model(["batch", 64, 32], [1]), 1),
    "big_row": (lambda: moments_model([2, 5000], [1]), 1),
    "other_operand": (lambda: moments_model([4, 6, 8], [1], second="y"), 0),
    "square_is_output": (lambda: moments_model([4, 6, 8], [1], extra="output"), 0),
    "square_read_elsewhere": (lambda: moments_model([4, 6, 8], [1], extra="abs"), 0),
    "other_keepdims": (lambda: moments_model([4, 6, 8], [1], keepdims2=1), 0),
    "other_axes": (lambda: moments_model([4, 6, 8], [1], axes2=[2]), 0),
    "equal_axes_constants": (lambda: moments_model([4, 6, 8], [1], axes2=[1]), 1),
}


def _feeds(model: onnx.ModelProto, seed: int, batch: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else batch for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = (rng.standard_normal(dims) * 3 + 0.5).astype(np.float32)
    return feeds


def _cpu_ep(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _close_to_cpu(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    """Within 1e-5 of ORT's CPU EP, which sums in float (we sum in double): relative, with an absolute floor for
    the values that cancel (sums and variances near 0)."""
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (what, k, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-4, err_msg=f"{what} output {k}")


@pytest.fixture
def compile_log(caplog: pytest.LogCaptureFixture) -> Iterator:
    """compile_log(model, devices) -> (session, (steps, pairs)) on those EP devices."""
    made: list[epabi.InferenceSession] = []

    def make(model: onnx.ModelProto, devices: list):
        so = epabi.SessionOptions()
        so.log_severity_level = 0
        so.add_provider_for_devices(devices, {})
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="epabi"):
            sess = epabi.InferenceSession(model, so)
        made.append(sess)
        assert set(sess.node_assignment.values()) == {epabi.get_ep_name()}, sess.node_assignment
        counts = [tuple(int(g) for g in m.groups()) for m in (SUMMARY.search(r.getMessage()) for r in caplog.records)
                  if m]
        assert len(counts) == 1, [r.getMessage() for r in caplog.records if "compiled" in r.getMessage()]
        return sess, counts[0]

    yield make
    for s in made:
        s.close()


def _check_case(host: epabi.Host, compile_log, case: str, devices: list) -> None:
    build, pairs = CASES[case]
    model = build()
    sess, (steps, got_pairs) = compile_log(model, devices)
    assert got_pairs == pairs, case
    unfused = len(model.graph.node)
    assert steps <= unfused - 2 * pairs, (case, steps)
    feeds = _feeds(model, len(case))
    got = sess.run(None, feeds)
    ref = node_by_node(host, model, feeds, devices)
    for out, value in zip(model.graph.output, got):
        np.testing.assert_array_equal(value, ref[out.name], err_msg=f"{case} {out.name}: not the unfused bits")
    _close_to_cpu(got, _cpu_ep(model, feeds), case)


@pytest.mark.parametrize("case", list(CASES))
def test_moments_plan_and_values(host: epabi.Host, compile_log, case: str) -> None:
    _check_case(host, compile_log, case, host.get_ep_devices())


def test_symbolic_batch_sizes(host: epabi.Host, compile_log) -> None:
    """One plan over a symbolic batch serves batches 1 and 7."""
    model = CASES["symbolic_batch"][0]()
    sess, (_, pairs) = compile_log(model, host.get_ep_devices())
    assert pairs == 1
    for batch in [1, 7]:
        feeds = _feeds(model, batch, batch)
        _close_to_cpu(sess.run(None, feeds), _cpu_ep(model, feeds), f"batch {batch}")


def test_moments_in_graph_capture(host: epabi.Host) -> None:
    """Replays of a captured moments step recompute both sums from inputs updated in place."""
    model = moments_model([2, 40, 16], [1])
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {"enable_cuda_graph": "1",
                                                        "min_num_runs_before_cuda_graph_capture": "1"})
    with epabi.InferenceSession(model, so) as sess:
        x = epabi.OrtValue.ortvalue_from_numpy(_feeds(model, 0)["x"])
        outs = {name: epabi.OrtValue.ortvalue_from_shape_and_type([2, 16], np.float32) for name in ["s1", "s2", "var"]}
        binding = sess.io_binding()
        binding.bind_ortvalue_input("x", x)
        for name, value in outs.items():
            binding.bind_ortvalue_output(name, value)
        for k in range(4):
            feed = _feeds(model, k + 1)["x"]
            x.update_inplace(feed)
            sess.run_with_iobinding(binding)
            _close_to_cpu([outs[n].numpy() for n in ["s1", "s2", "var"]], _cpu_ep(model, {"x": feed}), f"run {k}")
        assert sess.graph_capture.replays >= 2


def test_magika_moments(host: epabi.Host, compile_log) -> None:
    """magika's two expanded LayerNorms (over axis 1 of [B, 512, 256] and of [B, 512]) each make one pair; outputs
    match ORT's CPU EP within 1e-5 at batches 6 and 1."""
    from magika_model import batch, model_path
    model = onnx.load(str(model_path()))
    sess, counts = compile_log(model, host.get_ep_devices())
    from magika_model import PLAN_MOMENTS, PLAN_STEPS
    assert counts == (PLAN_STEPS, PLAN_MOMENTS)
    x = batch()
    for feed in [x, x[:1]]:
        np.testing.assert_allclose(sess.run(None, {"bytes": feed})[0], _cpu_ep(model, {"bytes": feed})[0],
                                   rtol=1e-5, atol=1e-5)


# argv: library, output folder, then MODEL.onnx per model, each with <model>.npz of its feeds next to it. Each runs on
# our software-adapter device between stderr markers (the VERBOSE log goes there); output k goes to <model>_<k>.npy.
REAL_ORT_SCRIPT = """
import gc
import os

import numpy as np

lib, out_dir, *models = sys.argv[1:]
ort.set_default_logger_severity(0)
ort.register_execution_provider_library("epabi", lib)
ours = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
providers = []
for i, model in enumerate(models):
    so = ort.SessionOptions()
    so.log_severity_level = 0
    so.add_provider_for_devices(ours, {})
    sys.stderr.write(f"\\nEPABI-MODEL {i}\\n")
    sys.stderr.flush()
    sess = ort.InferenceSession(model, sess_options=so, enable_fallback=0)
    providers.append(sess.get_providers()[0])
    feeds = dict(np.load(model + ".npz"))
    for k, value in enumerate(sess.run(None, feeds)):
        np.save(os.path.join(out_dir, f"{i}_{k}.npy"), value)
    del sess, so
    gc.collect()
    sys.stderr.write(f"\\nEPABI-MODEL-END {i}\\n")
    sys.stderr.flush()
del ours
gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(ort_version=ort.__version__, providers=providers)
"""

REAL_ORT_CASES = ["middle_axis_keepdims", "two_axes_keepdims", "negative_axis", "attribute_axes",
                  "empty_axes_noop", "symbolic_batch", "square_read_elsewhere", "other_operand"]


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_real_onnxruntime_moments(version: str, library_path: str, tmp_path: Path) -> None:
    """The cases and magika (batches 6 and 1) under real onnxruntime: the pairs its plans count (every node on our EP)
    and the CPU EP's values."""
    from magika_model import batch, model_path
    magika = onnx.load(str(model_path()))
    models: list[tuple[onnx.ModelProto, dict[str, np.ndarray], int]] = []
    for case in REAL_ORT_CASES:
        model = CASES[case][0]()
        models.append((model, _feeds(model, 5), CASES[case][1]))
    x = batch()
    models += [(magika, {"bytes": x}, 2), (magika, {"bytes": x[:1]}, 2)]
    paths = []
    for i, (model, feeds, _) in enumerate(models):
        path = tmp_path / f"m{i}.onnx"
        onnx.save(model, str(path))
        np.savez(str(path) + ".npz", **feeds)
        paths.append(str(path))
    result, _, err = run_json(version, REAL_ORT_SCRIPT, {"EPABI_ALLOW_SOFTWARE_ADAPTER": "1"},
                              [library_path, str(tmp_path), *paths], timeout=300)
    assert result["ort_version"] == version
    assert result["providers"] == [epabi.get_ep_name()] * len(models), result["providers"]
    for i, (model, feeds, pairs) in enumerate(models):
        log = re.search(rf"^EPABI-MODEL {i}$(.*?)^EPABI-MODEL-END {i}$", err, re.S | re.M)
        assert log, err[-3000:]
        found = [int(m.group(2)) for m in SUMMARY.finditer(log.group(1))]
        assert found == [pairs], (i, log.group(1)[-2000:])
        want = _cpu_ep(model, feeds)
        got = [np.load(tmp_path / f"{i}_{k}.npy") for k in range(len(want))]
        if i < len(REAL_ORT_CASES):
            _close_to_cpu(got, want, REAL_ORT_CASES[i])
        else:
            np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5, err_msg=f"magika model {i}")


# ---- the GPU ---------------------------------------------------------------------------------------------------

@pytest.fixture
def gpu_device(gpu_host: epabi.Host) -> epabi.EpDevice:
    if epabi.hardware.cuda_gpu_count() == 0:
        pytest.skip("no NVIDIA GPU with a working driver")
    return gpu_ep_device(gpu_host)


GPU_CASES = ["first_axis", "middle_axis_keepdims", "last_axis", "two_axes_keepdims", "negative_and_positive",
             "attribute_axes", "empty_axes_reduce_all", "empty_axes_noop", "symbolic_batch", "big_row",
             "square_read_elsewhere", "other_axes"]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES)
def test_gpu_moments(gpu_host: epabi.Host, gpu_device: epabi.EpDevice, compile_log, case: str) -> None:
    """The moments kernels (thread, block and column shapes): the plan pairs as on the host; values equal the unfused
    CUDA ReduceSum and Mul kernels bit for bit (same kernel shape, same combine order) and match the CPU EP."""
    _check_case(gpu_host, compile_log, case, [gpu_device])


@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "axes"), [([2, 512, 256], [1]), ([1, 512, 256], [1]), ([6, 512, 256], [1]),
                                             ([3, 70000], [1]), ([2, 100, 4, 300], [1, 2]), ([700, 5], [0])])
def test_gpu_moments_shapes(gpu_host: epabi.Host, gpu_device: epabi.EpDevice, compile_log, shape: list[int],
                            axes: list[int]) -> None:
    """magika's column reduction at batches 1, 2 and 6, a big row, a column run under a kept one, a narrow column."""
    device = gpu_device
    model = moments_model(shape, axes)
    sess, (_, pairs) = compile_log(model, [device])
    assert pairs == 1
    feeds = _feeds(model, sum(shape))
    got = sess.run(None, feeds)
    ref = node_by_node(gpu_host, model, feeds, [device])
    for out, value in zip(model.graph.output, got):
        np.testing.assert_array_equal(value, ref[out.name], err_msg=f"{shape} {axes} {out.name}")
    _close_to_cpu(got, _cpu_ep(model, feeds), f"{shape} {axes}")


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"])
@pytest.mark.parametrize(("shape", "axes"), [([2, 512, 256], [1]), ([3, 33, 20, 70], [0, 2]), ([40, 3], [0])])
def test_gpu_column_reduce(gpu_device: epabi.EpDevice, op: str, shape: list[int], axes: list[int]) -> None:
    """Every Reduce op over a non-last axis (reduce_cols_f32: coalesced column reads) against the CPU EP; ReduceMax
    and ReduceMin with a NaN in a column against numpy, whose NaN propagation the kernels follow (ORT's CPU EP loses
    the NaN on some shapes)."""
    node = helper.make_node(op, ["x"], ["y"], keepdims=1, axes=axes)
    graph = helper.make_graph([node], "col", [helper.make_tensor_value_info("x", F, shape)],
                              [helper.make_tensor_value_info("y", 0, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    rng = np.random.default_rng(len(shape))
    scale = 1.0 if op != "ReduceProd" else 0.02
    x = (1.0 + rng.standard_normal(shape) * scale).astype(np.float32)
    so = epabi.SessionOptions()
    so.add_provider_for_devices([gpu_device], {})
    with epabi.InferenceSession(model, so) as sess:
        assert set(sess.node_assignment.values()) == {epabi.get_ep_name()}
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], _cpu_ep(model, {"x": x})[0], rtol=2e-5, atol=1e-5,
                                   err_msg=op)
        if op in ("ReduceMax", "ReduceMin"):
            x.reshape(-1)[5] = np.nan
            want = (np.max if op == "ReduceMax" else np.min)(x, axis=tuple(axes), keepdims=True)
            np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want, err_msg=f"{op} with a NaN")


@pytest.mark.gpu
def test_gpu_magika_moments(gpu_device: epabi.EpDevice, compile_log) -> None:
    from magika_model import batch, model_path
    model = onnx.load(str(model_path()))
    sess, counts = compile_log(model, [gpu_device])
    assert counts[1] == 2
    x = batch()
    for feed in [x, x[:1]]:
        np.testing.assert_allclose(sess.run(None, {"bytes": feed})[0], _cpu_ep(model, {"bytes": feed})[0],
                                   rtol=1e-5, atol=1e-5)
