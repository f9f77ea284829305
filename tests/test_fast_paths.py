"""The software adapter's fast CPU paths compute what they replace: checked against float64 numpy, onnx.reference and
ONNX Runtime's CPU EP, through epabi's host and through real onnxruntime (MIN and NEWEST).

* vmath.h (Exp, Sigmoid, Tanh, Gelu's tanh form): error bounds against float64 numpy over every range an input can
  take (dense sweeps of [-110, 110], magnitudes from 1e-40 to 100, the special values), on pools of 1, 2 and 3
  threads with sizes that leave ragged chunks.
* elementwise.c's float rows (both operands contiguous, or one a single value) and its dims coalescing and thread
  split: every broadcast pattern, bit for bit against numpy float32 (one rounding per element either way), with a
  fused Relu and with Max/Min accumulating in place.

Speed itself is measured by bench/software_adapter.py, never here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import epabi
from real_ort import MIN, NEWEST
from test_real_ort_models import assert_all_on_our_ep, run_on_real_ort

THREADS = "intra_op_num_threads"
FLT_TINY = np.float32(np.finfo(np.float32).tiny)


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, tuple[int, list | None]], outputs: list[str],
           inits: list[onnx.TensorProto] | None = None, opset: int = 20) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "fast_paths",
                              [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


@pytest.fixture
def session(host: epabi.Host) -> Iterator:
    """session(model, threads) -> epabi.InferenceSession with every node on our EP; all closed afterwards."""
    made: list[epabi.InferenceSession] = []

    def make(model: onnx.ModelProto, threads: int = 1) -> epabi.InferenceSession:
        so = epabi.SessionOptions()
        so.add_provider_for_devices(host.get_ep_devices(), {THREADS: str(threads)})
        sess = epabi.InferenceSession(model, so)
        made.append(sess)
        assert set(sess.node_assignment.values()) == {epabi.get_ep_name()}, sess.node_assignment
        return sess

    yield make
    for s in made:
        s.close()


def _cpu_ep(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


# -- vmath.h ------------------------------------------------------------------------------------------------------

ACTIVATIONS = ["exp", "sigmoid", "tanh", "gelu"]


def activation_model() -> onnx.ModelProto:
    nodes = [helper.make_node("Exp", ["x"], ["exp"]), helper.make_node("Sigmoid", ["x"], ["sigmoid"]),
             helper.make_node("Tanh", ["x"], ["tanh"]), helper.make_node("Gelu", ["x"], ["gelu"], approximate="tanh")]
    return _model(nodes, {"x": (TensorProto.FLOAT, None)}, ACTIVATIONS)


def activation_inputs(n_sweep: int = 2_000_001) -> np.ndarray:
    """Dense sweeps over [-110, 110] and [-1, 1], random magnitudes 1e-40 .. 100 of both signs, and the special
    values: zeros, infinities, NaN, denormals, exp's overflow and underflow edges, tanh's switch at 0.5."""
    rng = np.random.default_rng(5)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 88.72, 88.73, 89.5, -87.33, -103.9,
                        -104.1, -200.0, 0.5, -0.5, 0.49999997, 0.50000006, 9.1, -9.1, 44.5], np.float32)
    mags = (np.float32(10.0) ** rng.uniform(-40, 2, 300_001)).astype(np.float32)
    return np.concatenate([np.linspace(-110, 110, n_sweep, dtype=np.float32),
                           np.linspace(-1, 1, 200_001, dtype=np.float32), mags * rng.choice([-1, 1], mags.size),
                           special]).astype(np.float32)


def activation_reference(x: np.ndarray) -> dict[str, np.ndarray]:
    xd = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return {"exp": np.exp(xd), "sigmoid": 1 / (1 + np.exp(-xd)), "tanh": np.tanh(xd),
                "gelu": 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd ** 3)))}


def assert_activation_error(name: str, x: np.ndarray, got: np.ndarray, ref: np.ndarray) -> None:
    """NaN exactly where float32 of the reference is NaN, infinities exactly; exp within 2 ulp of every normal
    result, Sigmoid and Tanh within 3e-7 relative (normal results) or 1e-38 absolute (below FLT_MIN); Gelu within
    4e-7 of its magnitude or absolutely (its 1 + tanh cancels for negative x, in every float implementation)."""
    with np.errstate(over="ignore"):
        r32 = ref.astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(r32)), f"{name}: NaN at {x[np.isnan(got) != np.isnan(r32)][:5]}"
    inf = np.isinf(r32)
    assert np.array_equal(got[inf], r32[inf]), f"{name}: infinities at {x[inf][got[inf] != r32[inf]][:5]}"
    fin = np.isfinite(r32)
    err = np.abs(got[fin].astype(np.float64) - ref[fin])
    mag = np.abs(ref[fin])
    normal = mag >= FLT_TINY
    if name == "exp":
        ulp = err[normal] / np.spacing(np.abs(r32[fin][normal])).astype(np.float64)
        assert ulp.max() <= 2.0, f"exp: {ulp.max():.2f} ulp at x={x[fin][normal][np.argmax(ulp)]!r}"
    elif name == "gelu":
        bound = 4e-7 * np.maximum(mag, 1.0)
        assert (err <= bound).all(), f"gelu: error {err.max():.2e} at x={x[fin][np.argmax(err - bound)]!r}"
    else:
        rel = err[normal] / mag[normal]
        assert rel.max() <= 3e-7, f"{name}: relative error {rel.max():.2e} at x={x[fin][normal][np.argmax(rel)]!r}"
    assert (err[~normal] <= 1e-38).all(), f"{name}: error {err[~normal].max():.2e} below FLT_MIN"


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_vector_activations_are_accurate(session, threads: int) -> None:
    x = activation_inputs()
    x = x[: x.size - threads]  # sizes that leave ragged chunks on each pool
    outs = session(activation_model(), threads).run(None, {"x": x})
    ref = activation_reference(x)
    for name, got in zip(ACTIVATIONS, outs):
        assert_activation_error(name, x, got, ref[name])


def test_vector_activations_equal_the_cpu_ep(session) -> None:
    x = activation_inputs(200_001)
    model = activation_model()
    for name, got, want in zip(ACTIVATIONS, session(model, 2).run(None, {"x": x}), _cpu_ep(model, {"x": x})):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=name)


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_real_ort_vector_activations(version: str, library_path: str, tmp_path: Path) -> None:
    x = activation_inputs(200_001)
    x = x[np.isfinite(x)]  # the script checks two runs for equal outputs, which NaN (Gelu(-inf) too) never is
    model = activation_model()
    path = tmp_path / "acts.onnx"
    onnx.save(model, str(path))
    result, outs, err = run_on_real_ort(version, library_path, path, {"x": x}, "default", tmp_path / "run")
    assert_all_on_our_ep(result, version, err)
    ref = activation_reference(x)
    for name, got, want in zip(ACTIVATIONS, outs, _cpu_ep(model, {"x": x})):
        assert_activation_error(name, x, got, ref[name])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=name)


# -- elementwise.c ------------------------------------------------------------------------------------------------

#: (shape of A, shape of B): scalars on either side, rows and columns broadcast, middle dims broadcast, both
#: contiguous; odd extents so that rows and thread chunks are ragged.
BROADCASTS = [((3, 517, 61), ()), ((), (3, 517, 61)), ((3, 517, 61), (3, 517, 61)), ((3, 517, 61), (1, 517, 1)),
              ((3, 517, 61), (61,)), ((3, 1, 61), (3, 517, 1)), ((1,), (70001,)), ((70001,), (1,)),
              ((2, 3, 1, 129), (1, 3, 257, 1))]
BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Max": np.maximum,
          "Min": np.minimum}


def _operand(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    v = rng.standard_normal(shape).astype(np.float32)
    if v.size > 4:
        v.flat[:: max(1, v.size // 3)] = np.nan  # NaN propagates through every op, Max and Min included
    return v


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize(("sa", "sb"), BROADCASTS)
def test_binary_rows_equal_numpy(session, threads: int, sa: tuple, sb: tuple) -> None:
    rng = np.random.default_rng(len(sa) * 7 + len(sb))
    a, b = _operand(rng, sa), _operand(rng, sb)
    nodes = [helper.make_node(op, ["a", "b"], [op.lower()]) for op in BINARY]
    nodes += [helper.make_node("Add", ["a", "b"], ["sum"]), helper.make_node("Relu", ["sum"], ["relu"])]
    model = _model(nodes, {"a": (TensorProto.FLOAT, list(sa)), "b": (TensorProto.FLOAT, list(sb))},
                   [op.lower() for op in BINARY] + ["relu"], opset=13)
    outs = session(model, threads).run(None, {"a": a, "b": b})
    with np.errstate(all="ignore"):
        want = [f(a, b) for f in BINARY.values()] + [np.where(np.isnan(a + b), a + b, np.maximum(a + b, 0))]
    for name, got, exp in zip([*BINARY, "Add+Relu"], outs, want):
        assert got.shape == exp.shape and got.dtype == np.float32, name
        assert np.array_equal(got, exp, equal_nan=True), f"{name} {sa} {sb}: {np.sum(got != exp)} differ"


@pytest.mark.parametrize("threads", [1, 3])
def test_variadic_max_min_accumulate_in_place(session, threads: int) -> None:
    rng = np.random.default_rng(3)
    xs = [_operand(rng, s) for s in [(5, 1, 4099), (1, 7, 4099), (4099,)]]
    nodes = [helper.make_node("Max", ["x0", "x1", "x2"], ["max"]), helper.make_node("Min", ["x0", "x1", "x2"], ["min"])]
    model = _model(nodes, {f"x{i}": (TensorProto.FLOAT, list(x.shape)) for i, x in enumerate(xs)}, ["max", "min"],
                   opset=13)
    got_max, got_min = session(model, threads).run(None, {f"x{i}": x for i, x in enumerate(xs)})
    assert np.array_equal(got_max, np.maximum(np.maximum(xs[0], xs[1]), xs[2]), equal_nan=True)
    assert np.array_equal(got_min, np.minimum(np.minimum(xs[0], xs[1]), xs[2]), equal_nan=True)


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_real_ort_binary_rows(version: str, library_path: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((3, 517, 61)).astype(np.float32), rng.standard_normal((1, 517, 1)).astype(np.float32)
    s = rng.standard_normal(()).astype(np.float32)
    nodes = [helper.make_node("Mul", ["s", "a"], ["sa"]), helper.make_node("Add", ["sa", "b"], ["sab"]),
             helper.make_node("Relu", ["sab"], ["y"]), helper.make_node("Max", ["a", "b", "s"], ["m"])]
    model = _model(nodes, {"a": (TensorProto.FLOAT, [3, 517, 61]), "b": (TensorProto.FLOAT, [1, 517, 1]),
                           "s": (TensorProto.FLOAT, [])}, ["y", "m"], opset=13)
    path = tmp_path / "binary.onnx"
    onnx.save(model, str(path))
    feeds = {"a": a, "b": b, "s": s}
    result, outs, err = run_on_real_ort(version, library_path, path, feeds, "default", tmp_path / "run")
    assert_all_on_our_ep(result, version, err)
    for got, want in zip(outs, _cpu_ep(model, feeds)):
        assert np.array_equal(got, want)
