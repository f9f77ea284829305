"""Max/Min followed by Relu: the plan folds a float Relu into the Max/Min step (its epilogue), and the step must apply
it for one, two and three inputs, broadcast, NaN included (int32 keeps the Relu as a step of its own), on the
software adapter through epabi's host and real onnxruntime (its oldest supported and newest release), against
onnxruntime's CPU EP.

Until 2026-12-02 the variadic path (a broadcast copy, then one launch per further input) dropped the fused Relu:
Min(a, b) -> Relu returned negative values."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import epabi
from real_ort import MIN, NEWEST, run_json
from test_real_ort_models import RUN_MODEL_SCRIPT, SOFTWARE, assert_all_on_our_ep

SUMMARY = re.compile(r"compiled '[^']*': (\d+) steps \((\d+) on the host, (\d+) activation nodes fused")
VERBOSE_RUN_SCRIPT = RUN_MODEL_SCRIPT.replace("so.log_severity_level = 1", "so.log_severity_level = 0")
SHAPES = [[2, 3], [3], [2, 1]]
CASES = [(op, n, dtype) for op in ("Max", "Min") for n in (1, 2, 3) for dtype in (TensorProto.FLOAT, TensorProto.INT32)]


def _model(op: str, n_in: int, dtype: int) -> onnx.ModelProto:
    names = ["a", "b", "c"][:n_in]
    nodes = [helper.make_node(op, names, ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    graph = helper.make_graph(nodes, "max_min_relu",
                              [helper.make_tensor_value_info(n, dtype, SHAPES[i]) for i, n in enumerate(names)],
                              [helper.make_tensor_value_info("y", dtype, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])   # Relu takes int32 from 14
    model.ir_version = 9
    return model


def _feeds(model: onnx.ModelProto, nan: bool = True) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    out = {}
    for i, v in enumerate(model.graph.input):
        shape = [d.dim_value for d in v.type.tensor_type.shape.dim]
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            x = rng.standard_normal(shape).astype(np.float32)
            if i == 0 and nan:
                x.reshape(-1)[1] = np.nan
        else:
            x = rng.integers(-5, 5, shape).astype(np.int32)
        out[v.name] = x
    return out


def _plan(dtype: int) -> tuple[str, str, str]:
    """(steps, host steps, activations fused) of the summary: float folds the Relu into the Max/Min step; int32 keeps
    the Relu its own step."""
    return ("1", "0", "1") if dtype == TensorProto.FLOAT else ("2", "0", "0")


def _cpu_ep(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


@pytest.mark.parametrize(("op", "n_in", "dtype"), CASES, ids=lambda v: str(v))
def test_the_fused_relu_is_applied(host: epabi.Host, op: str, n_in: int, dtype: int,
                                   caplog: pytest.LogCaptureFixture) -> None:
    model = _model(op, n_in, dtype)
    feeds = _feeds(model)
    so = epabi.SessionOptions()
    so.log_severity_level = 0
    so.add_provider_for_devices([d for d in host.get_ep_devices() if d.ep_name == epabi.get_ep_name()][:1], {})
    with caplog.at_level(logging.DEBUG, logger="epabi"), epabi.InferenceSession(model, so) as sess:
        got = sess.run(None, feeds)[0]
    fused = [m.groups() for m in map(SUMMARY.search, (r.getMessage() for r in caplog.records)) if m]
    assert fused == [_plan(dtype)], fused
    np.testing.assert_array_equal(got, _cpu_ep(model, feeds))


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_the_fused_relu_is_applied_under_onnxruntime(version: str, library_path: str, tmp_path: Path) -> None:
    for op, n_in, dtype in CASES:
        model = _model(op, n_in, dtype)
        feeds = _feeds(model, nan=False)   # the script's repeatability check compares runs with NaN != NaN
        case = tmp_path / f"{op}{n_in}_{dtype}"
        case.mkdir()
        onnx.save(model, str(case / "model.onnx"))
        args = [library_path, str(case / "model.onnx"), "disable_all", str(case)]
        for name, value in feeds.items():
            np.save(case / f"in_{name}.npy", value)
            args.append(f"{name}={case / f'in_{name}.npy'}")
        result, _, err = run_json(version, VERBOSE_RUN_SCRIPT, SOFTWARE, args, timeout=300)
        assert_all_on_our_ep(result, version, err)
        fused = [m.groups() for m in map(SUMMARY.search, err.splitlines()) if m]
        assert fused == [_plan(dtype)], (op, n_in, dtype, fused)
        np.testing.assert_array_equal(np.load(case / "out0.npy"), _cpu_ep(model, feeds), err_msg=f"{op} {n_in}")
