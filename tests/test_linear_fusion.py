"""The plan's linear steps on the software adapter (native/kernels/linear.h, plan_passes.c epabi_plan_fuse_linear):
each MatMul/Gemm with the bias Add and the activation after it is one step and one launch, which gives ONNX Runtime's
CPU EP's values; EP option fused_gemm=0 keeps one step per node.

The pass is shared with the GPU, whose kernels test_gpu_linear.py checks; here the grouping decisions are read from
the plan's VERBOSE summary ("N steps (... K linear with F node(s) folded in)") and, for a captured graph, from the
launches of its INFO line. Also through real onnxruntime 1.32.0 (whose MatMulAddFusion hands us Gemm + Relu).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import epabi
from epabi.models import mlp, sample_inputs
from linear_models import CAPTURED, COMPILED, Case, empty_case_list, mlp_case_list, ort_cpu
from real_ort import NEWEST, run_json

EP = "EpAbiExecutionProvider"
TOL = {"rtol": 1e-4, "atol": 1e-4}


def _session(host: epabi.Host, model: onnx.ModelProto, **options: str) -> epabi.InferenceSession:
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), options)
    session = epabi.InferenceSession(model, so)
    assert set(session.node_assignment.values()) == {EP}, session.node_assignment
    return session


def _summaries(caplog: pytest.LogCaptureFixture) -> list[tuple[int, int, int]]:
    """(steps, linear steps, nodes folded into them) of every plan compiled while caplog listened."""
    found = [COMPILED.search(r.getMessage()) for r in caplog.records]
    return [(int(m.group(1)), int(m.group(2)), int(m.group(3))) for m in found if m]


@pytest.mark.parametrize("case", mlp_case_list() + empty_case_list(), ids=lambda c: c.id)
def test_group_is_one_step_with_ort_cpu_values(host: epabi.Host, caplog: pytest.LogCaptureFixture, case: Case) -> None:
    model, feeds, _ = case.build(seed=1)
    expected = ort_cpu(model, feeds)
    with caplog.at_level(logging.DEBUG, logger="epabi"), _session(host, model) as session:
        (got,) = session.run(None, feeds)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, **TOL)
    assert _summaries(caplog) == [(1, 1, case.folded)]


@pytest.mark.parametrize("value", ["0", "false"])
def test_fused_gemm_off_keeps_one_step_per_node(host: epabi.Host, caplog: pytest.LogCaptureFixture,
                                                value: str) -> None:
    case = Case(3, 17, 33, "Relu")
    model, feeds, _ = case.build(seed=2)
    with caplog.at_level(logging.DEBUG, logger="epabi"), _session(host, model, fused_gemm=value) as session:
        (got,) = session.run(None, feeds)
    np.testing.assert_allclose(got, ort_cpu(model, feeds), **TOL)
    assert _summaries(caplog) == [(2, 0, 0)]  # MatMul, then Add with the Relu as its epilogue


def test_fused_gemm_bad_value_is_refused(host: epabi.Host) -> None:
    model, _, _ = Case(2, 3, 4).build()
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {"fused_gemm": "yes"})
    with pytest.raises(epabi.OrtStatusError, match=r"fused_gemm' has value 'yes'") as info:
        epabi.InferenceSession(model, so)
    assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT


def _graph(nodes: list[onnx.NodeProto], inputs: dict[str, list[int]], outputs: dict[str, list[int]],
           inits: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(k, T.FLOAT, v) for k, v in inputs.items()],
                              [helper.make_tensor_value_info(k, T.FLOAT, v) for k, v in outputs.items()],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


RNG = np.random.default_rng(5)
W = RNG.uniform(-0.3, 0.3, (6, 5))
BIAS = RNG.uniform(-0.5, 0.5, (5,))


@pytest.mark.parametrize(("name", "model", "summary"), [
    # the Add's other operand is a graph input (a residual), not a constant: the MatMul alone is the linear step, and
    # the Relu after the Add stays its epilogue
    ("residual", _graph([helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", ["p", "r"], ["s"]),
                         helper.make_node("Relu", ["s"], ["y"])], {"x": [4, 6], "r": [4, 5]}, {"y": [4, 5]},
                        {"w": W}), (2, 1, 0)),
    # the product is read twice: nothing is folded into it
    ("read_twice", _graph([helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", ["p", "bias"], ["s"]),
                           helper.make_node("Sub", ["s", "p"], ["y"])], {"x": [4, 6]}, {"y": [4, 5]},
                          {"w": W, "bias": BIAS}), (2, 1, 0)),   # the Add and the Sub: one elementwise chain
    # the product with its bias is a graph output too: the Add is folded, the Relu is not
    ("output_between", _graph([helper.make_node("MatMul", ["x", "w"], ["p"]),
                               helper.make_node("Add", ["p", "bias"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
                              {"x": [4, 6]}, {"y": [4, 5], "s": [4, 5]}, {"w": W, "bias": BIAS}), (2, 1, 1)),
    # a [M, N] constant is no bias (the Add stays, with the Relu as its epilogue)
    ("matrix_add", _graph([helper.make_node("MatMul", ["x", "w"], ["p"]),
                           helper.make_node("Add", ["p", "c"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
                          {"x": [4, 6]}, {"y": [4, 5]}, {"w": W, "c": RNG.uniform(-1, 1, (4, 5))}), (2, 1, 0)),
    # a bias that would grow the result's rank ([1, 5] after a 1-D product [5]) is not folded
    ("bias_grows_rank", _graph([helper.make_node("MatMul", ["x", "w"], ["p"]),
                                helper.make_node("Add", ["p", "bias"], ["y"])], {"x": [6]}, {"y": [1, 5]},
                               {"w": W, "bias": BIAS.reshape(1, 5)}), (2, 1, 0)),
    # a batched B (rank 3) is no lead: the MatMul and the Add stay as they are
    ("batched_b", _graph([helper.make_node("MatMul", ["x", "w3"], ["p"]),
                          helper.make_node("Add", ["p", "bias"], ["y"])], {"x": [2, 4, 6]}, {"y": [2, 4, 5]},
                         {"w3": RNG.uniform(-1, 1, (2, 6, 5)), "bias": BIAS}), (2, 0, 0)),
    # Gemm with its own C takes no second bias; the activation after the Add is the Add's epilogue
    ("gemm_with_c_then_add", _graph([helper.make_node("Gemm", ["x", "w", "bias"], ["p"]),
                                     helper.make_node("Add", ["p", "bias"], ["s"]),
                                     helper.make_node("Relu", ["s"], ["y"])], {"x": [4, 6]}, {"y": [4, 5]},
                                    {"w": W, "bias": BIAS}), (2, 1, 0)),
])
def test_what_is_not_folded_still_matches(host: epabi.Host, caplog: pytest.LogCaptureFixture, name: str,
                                          model: onnx.ModelProto, summary: tuple[int, int, int]) -> None:
    feeds = {i.name: RNG.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
             for i in model.graph.input}
    import onnxruntime as ort

    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    with caplog.at_level(logging.DEBUG, logger="epabi"), _session(host, model) as session:
        got = session.run(None, feeds)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, **TOL)
    assert _summaries(caplog) == [summary], name


@pytest.mark.parametrize(("fused", "per_layer"), [("1", 1), ("0", 2)])
def test_a_captured_mlp_replays_one_launch_per_layer(host: epabi.Host, caplog: pytest.LogCaptureFixture, fused: str,
                                                     per_layer: int) -> None:
    layers = 8
    model = mlp(layers=layers, width=64, batch=1)
    feeds = sample_inputs(model, seed=4)
    expected = ort_cpu(model, feeds)
    with caplog.at_level(logging.INFO, logger="epabi"), \
            _session(host, model, enable_cuda_graph="1", fused_gemm=fused) as session:
        binding = session.io_binding()
        x = epabi.OrtValue.ortvalue_from_numpy(feeds["x"])
        y = epabi.OrtValue.ortvalue_from_shape_and_type([1, 64], np.float32)
        binding.bind_ortvalue_input("x", x)
        binding.bind_ortvalue_output("y", y)
        for _ in range(3):  # warm-up and capture, then replays
            session.run_with_iobinding(binding)
            np.testing.assert_allclose(y.numpy(), expected, **TOL)
        assert session.graph_capture.replays >= 2
    launches = [int(m.group(2)) for m in (CAPTURED.search(r.getMessage()) for r in caplog.records) if m]
    assert launches == [layers * per_layer]


# argv: library, fused_gemm, enable_cuda_graph, output folder, then MODEL.onnx:X.npy:OUT_SHAPE triples. Each model runs
# on our software-adapter device, 3 calls through IOBinding, between stderr markers (where the VERBOSE log goes);
# call k's output goes to <folder>/<i>_<k>.npy.
REAL_ORT_SCRIPT = """
import gc
import os

import numpy as np

lib, fused, graphs, out_dir, *triples = sys.argv[1:]
ort.set_default_logger_severity(0)
ort.register_execution_provider_library("epabi", lib)
ours = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
providers = []
for i, triple in enumerate(triples):
    model, x_path, shape = triple.split(":")
    out_shape = [int(d) for d in shape.split(",")]
    so = ort.SessionOptions()
    so.log_severity_level = 0
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    so.add_provider_for_devices(ours, {"fused_gemm": fused, "enable_cuda_graph": graphs})
    sys.stderr.write(f"\\nEPABI-MODEL {i}\\n")
    sys.stderr.flush()
    sess = ort.InferenceSession(model, sess_options=so, enable_fallback=0)
    providers.append(sorted({sub.ep_name for sub in sess.get_provider_graph_assignment_info()}))
    binding = sess.io_binding()
    xv = ort.OrtValue.ortvalue_from_numpy(np.load(x_path))
    yv = ort.OrtValue.ortvalue_from_shape_and_type(out_shape, np.float32)
    binding.bind_ortvalue_input("x", xv)
    binding.bind_ortvalue_output(sess.get_outputs()[0].name, yv)
    for k in range(3):
        sess.run_with_iobinding(binding)
        np.save(os.path.join(out_dir, f"{i}_{k}.npy"), yv.numpy())
    del sess, so, binding, xv, yv
    gc.collect()
    sys.stderr.write(f"\\nEPABI-MODEL-END {i}\\n")
    sys.stderr.flush()
del ours
gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(ort_version=ort.__version__, providers=providers)
"""

REAL_ORT_CASES = [Case(3, 17, 33, "Sigmoid"), Case(64, 512, 256, "Tanh"), Case(5, 30, 20, "GeluTanh"),
                  Case(2, 7, 9, "Gelu"), Case(6, 24, 10, "Relu", a_shape=(2, 3, 24)),
                  Case(3, 17, 33, "Relu", lead="Gemm", bias=None, c="vector", trans_b=True, alpha=0.5, beta=2.0)]


@pytest.mark.real_ort
@pytest.mark.parametrize(("fused", "graphs"), [("1", "0"), ("1", "1"), ("0", "1")])
def test_real_onnxruntime_runs_the_groups(library_path: str, tmp_path: Path, fused: str, graphs: str) -> None:
    """Under onnxruntime 1.32.0 (software adapter) every group stays on our EP with the CPU EP's values, graphs off
    and on. Its MatMulAddFusion turns a MatMul + Add with a 2-D A into a Gemm, so the MLP's plan has Gemm + Relu
    groups: one linear step (and one replayed launch) per layer, counted in the VERBOSE/INFO log on stderr; views
    launch nothing."""
    layers = 4
    mlp_model = mlp(layers=layers, width=64, batch=2)
    models = [c.build(seed=8) for c in REAL_ORT_CASES] + [(mlp_model, sample_inputs(mlp_model, seed=8), [2, 64])]
    args = [library_path, fused, graphs, str(tmp_path)]
    for i, (model, feeds, shape) in enumerate(models):
        onnx.save(model, tmp_path / f"{i}.onnx")
        np.save(tmp_path / f"{i}_x.npy", feeds["x"])
        args.append(f"{tmp_path / f'{i}.onnx'}:{tmp_path / f'{i}_x.npy'}:{','.join(map(str, shape))}")
    result, _, err = run_json(NEWEST, REAL_ORT_SCRIPT, {"EPABI_ALLOW_SOFTWARE_ADAPTER": "1"}, args, timeout=300)
    assert result["providers"] == [[EP]] * len(models), result["providers"]
    for i, (model, feeds, _) in enumerate(models):
        expected = ort_cpu(model, feeds)
        for k in range(3):
            np.testing.assert_allclose(np.load(tmp_path / f"{i}_{k}.npy"), expected, **TOL, err_msg=f"model {i}")
        log = re.search(rf"^EPABI-MODEL {i}$(.*?)^EPABI-MODEL-END {i}$", err, re.S | re.M)
        assert log, err[-3000:]
        summaries = [(int(m.group(1)), int(m.group(2)), int(m.group(3))) for m in COMPILED.finditer(log.group(1))]
        launches = [int(m.group(2)) for m in CAPTURED.finditer(log.group(1))]
        if i == len(models) - 1:  # the MLP: Gemm + Relu per hidden layer, a Gemm last; off: the Relus on their own
            steps = layers if fused == "1" else 2 * layers - 1
            assert summaries == [(steps, layers if fused == "1" else 0, layers - 1 if fused == "1" else 0)], log[1]
        else:  # one group, whatever ORT made of it (MatMul + Add, or its Gemm; with a 3-D A, Reshape + Gemm +
            # Reshape, the activation then after the second Reshape)
            assert len(summaries) == 1 and summaries[0][1] == (1 if fused == "1" else 0), log[1]
            steps = summaries[0][0]
            if fused == "1" and REAL_ORT_CASES[i].a_shape is None:
                assert steps == 1, log[1]
        # a Reshape around a 3-D A is a zero-copy view (README "Zero-copy views"): it launches nothing
        views = [int(v) for v in re.findall(r"compiled '[^']*': .*, (\d+) views,", log.group(1))]
        assert len(views) == 1, log[1]
        assert launches == ([steps - views[0]] if graphs == "1" else []), log[1]
