"""Elementwise chains (native/plan_chains.c, native/kernels/chain.h): float32 unary ops, Clip with constant bounds and
Add/Sub/Mul/Div over statically known shapes fused into one plan step.

Each case checks the plan (the VERBOSE summary: steps and "K elementwise chain(s) of M step(s)"), that the fused
outputs equal, bit for bit, the same nodes run one session per node on our EP (the unfused kernels), and that they
match ORT's CPU EP. Edge cases: a chain intermediate that is a graph output or read outside the chain, broadcasts,
integer dtypes and two inputs of symbolic shapes (not fused), one input of a symbolic shape (fused: every op keeps
its shape), scalar constants as immediates (GELU-tanh as magika exports it), the 16-op limit, NaN and infinities, a
path leaving and re-entering a chain (not fused: it would be a cycle). Then magika itself, real onnxruntime 1.24.4
and 1.32.0, and the GPU.
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
from real_ort import MIN, NEWEST
from test_real_ort_models import assert_all_on_our_ep, run_on_real_ort

SUMMARY = re.compile(r"compiled '[^']*': (\d+) steps \(.*\), (\d+) elementwise chain\(s\) of (\d+) step\(s\)")
F = TensorProto.FLOAT


def _scalar(name: str, value: float, dtype: type = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(value, dtype), name)


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, tuple[int, list]], outputs: list[str],
           inits: list[onnx.TensorProto] | None = None, opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "chains", [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
                              [helper.make_tensor_value_info(o, 0, None) for o in outputs], inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(inferred, full_check=True)
    return inferred


def hard_swish_model(shape: list, keep: bool = False) -> onnx.ModelProto:
    """x * relu6(x + 3) / 6 as PyTorch ports write it (Add, Clip, Mul, Div); keep: the Clip's output too."""
    nodes = [helper.make_node("Add", ["x", "three"], ["a"]), helper.make_node("Clip", ["a", "zero", "six"], ["c"]),
             helper.make_node("Mul", ["x", "c"], ["m"]), helper.make_node("Div", ["m", "six"], ["y"])]
    return _model(nodes, {"x": (F, shape)}, ["y", "c"] if keep else ["y"],
                  [_scalar("three", 3), _scalar("six", 6), _scalar("zero", 0)])


def silu_se_model() -> onnx.ModelProto:
    """SiLU of x, then a squeeze-excite scale s [N, C, 1, 1] and a residual Add of x; the SiLU output also leaves."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["g"]), helper.make_node("Mul", ["x", "g"], ["u"]),
             helper.make_node("Mul", ["u", "s"], ["v"]), helper.make_node("Add", ["v", "x"], ["y"])]
    return _model(nodes, {"x": (F, [2, 3, 5, 7]), "s": (F, [2, 3, 1, 1])}, ["y", "u"])


def activations_model() -> onnx.ModelProto:
    """A longer chain through the parameterised activations and a bias row [W] broadcast over [N, H, W]."""
    nodes = [helper.make_node("LeakyRelu", ["x"], ["l"], alpha=0.3), helper.make_node("Add", ["l", "bias"], ["b"]),
             helper.make_node("HardSigmoid", ["b"], ["h"], alpha=0.25, beta=0.4),
             helper.make_node("Sub", ["h", "x"], ["d"]), helper.make_node("Tanh", ["d"], ["t"]),
             helper.make_node("Exp", ["t"], ["e"]), helper.make_node("Neg", ["e"], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]
    bias = numpy_helper.from_array(np.linspace(-2, 2, 300).astype(np.float32), "bias")
    return _model(nodes, {"x": (F, [3, 7, 300])}, ["y"], [bias])


def add_relu_model() -> onnx.ModelProto:
    """Add -> Relu (the epilogue pass folds the Relu into the Add) -> Sqrt -> HardSwish: one chain of three steps."""
    nodes = [helper.make_node("Add", ["x", "z"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Sqrt", ["r"], ["q"]), helper.make_node("HardSwish", ["q"], ["y"])]
    return _model(nodes, {"x": (F, [4, 1, 33]), "z": (F, [1, 5, 33])}, ["y"])


def read_outside_model() -> onnx.ModelProto:
    """A chain value read by a Transpose outside the chain: it is written, and the chain goes on."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["g"]), helper.make_node("Mul", ["g", "x"], ["u"]),
             helper.make_node("Transpose", ["u"], ["tu"], perm=[1, 0]), helper.make_node("Abs", ["u"], ["y"]),
             helper.make_node("Add", ["tu", "y"], ["w"])]
    return _model(nodes, {"x": (F, [6, 6])}, ["w"])


def cycle_model() -> onnx.ModelProto:
    """Sigmoid's output leaves through a Transpose and comes back into the Add: Sigmoid and Add cannot be one step."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["g"]), helper.make_node("Transpose", ["g"], ["t"], perm=[1, 0]),
             helper.make_node("Add", ["g", "t"], ["y"])]
    return _model(nodes, {"x": (F, [5, 5])}, ["y"])


def int_model() -> onnx.ModelProto:
    nodes = [helper.make_node("Add", ["x", "one"], ["a"]), helper.make_node("Mul", ["a", "x"], ["m"]),
             helper.make_node("Abs", ["m"], ["y"])]
    return _model(nodes, {"x": (TensorProto.INT32, [4, 8])}, ["y"], [_scalar("one", 1, np.int32)])


def symbolic_model() -> onnx.ModelProto:
    nodes = [helper.make_node("Sigmoid", ["x"], ["g"]), helper.make_node("Mul", ["x", "g"], ["y"])]
    return _model(nodes, {"x": (F, ["batch", 16])}, ["y"])


def gelu_tanh_model(shape: list) -> onnx.ModelProto:
    """GELU-tanh as jax2tf exports it in magika: 0.5 * x * (1 + tanh(0.7978846 * (x + 0.044715 * x * x * x))), nine
    nodes whose constants are scalars on the left (one of shape [1, 1, 1]): immediates, so x is the one input."""
    nodes = [helper.make_node("Mul", ["c0", "x"], ["m0"]), helper.make_node("Mul", ["x", "m0"], ["m1"]),
             helper.make_node("Mul", ["x", "m1"], ["m2"]), helper.make_node("Add", ["x", "m2"], ["a0"]),
             helper.make_node("Mul", ["c1", "a0"], ["m3"]), helper.make_node("Tanh", ["m3"], ["t"]),
             helper.make_node("Add", ["one", "t"], ["a1"]), helper.make_node("Mul", ["half", "a1"], ["m4"]),
             helper.make_node("Mul", ["x", "m4"], ["y"])]
    one = numpy_helper.from_array(np.ones([1, 1, 1], np.float32), "one")
    return _model(nodes, {"x": (F, shape)}, ["y"],
                  [_scalar("c0", 0.044715), _scalar("c1", 0.7978846), one, _scalar("half", 0.5)])


def immediates_model() -> onnx.ModelProto:
    """Scalar constants on either side of every arithmetic op (Sub and Div are not symmetric), a one-element [1]
    constant, and a bias row that still takes an input slot."""
    nodes = [helper.make_node("Sub", ["c", "x"], ["a"]), helper.make_node("Div", ["a", "d"], ["b"]),
             helper.make_node("Div", ["e", "b"], ["f"]), helper.make_node("Sub", ["f", "e"], ["g"]),
             helper.make_node("Add", ["g", "bias"], ["h"]), helper.make_node("Mul", ["h", "c"], ["y"])]
    bias = numpy_helper.from_array(np.linspace(-1, 1, 12).astype(np.float32), "bias")
    return _model(nodes, {"x": (F, [5, 12])}, ["y"],
                  [_scalar("c", 1.5), numpy_helper.from_array(np.array([-3.0], np.float32), "d"), _scalar("e", 7.0),
                   bias])


def long_model(n: int) -> onnx.ModelProto:
    """n unary nodes in a row (Neg and Abs in turn): a chain takes at most 16, the rest stay apart."""
    names = ["x"] + [f"v{k}" for k in range(n - 1)] + ["y"]
    nodes = [helper.make_node("Neg" if k % 2 else "Abs", [names[k]], [names[k + 1]]) for k in range(n)]
    return _model(nodes, {"x": (F, [3, 4])}, ["y"])


def symbolic_two_model(z_batch: str | None = "batch") -> onnx.ModelProto:
    """Two inputs whose batch dims are one symbol: the Add and the Sigmoid after it fuse. With another symbol (or an
    unnamed dim, None) for z, the chain still computes the Add's run-time shape as the broadcast of both (each value
    it writes depends on both)."""
    nodes = [helper.make_node("Add", ["x", "z"], ["a"]), helper.make_node("Sigmoid", ["a"], ["y"])]
    return _model(nodes, {"x": (F, ["batch", 16]), "z": (F, [z_batch, 16])}, ["y"])


def layernorm_tail_model() -> onnx.ModelProto:
    """The tail of an expanded LayerNorm over a symbolic batch B: (R - E) * M + beta, E [B,1,8] the mean, M [B,6,8]
    the scale, beta a [1,6,1] constant; one chain of three steps with four inputs."""
    nodes = [helper.make_node("Sub", ["r", "e"], ["c"]), helper.make_node("Mul", ["c", "m"], ["s"]),
             helper.make_node("Add", ["s", "beta"], ["y"])]
    beta = numpy_helper.from_array(np.linspace(-1, 1, 6).astype(np.float32).reshape(1, 6, 1), "beta")
    return _model(nodes, {"r": (F, ["B", 6, 8]), "e": (F, ["B", 1, 8]), "m": (F, ["B", 6, 8])}, ["y"], [beta])


def grow_first_model() -> onnx.ModelProto:
    """A first link whose output is larger than each operand: x [B,1,8] * gamma [1,6,1] -> [B,6,8], then + r."""
    nodes = [helper.make_node("Mul", ["x", "gamma"], ["g"]), helper.make_node("Add", ["g", "r"], ["y"])]
    gamma = numpy_helper.from_array(np.linspace(0.5, 2, 6).astype(np.float32).reshape(1, 6, 1), "gamma")
    return _model(nodes, {"x": (F, ["B", 1, 8]), "r": (F, ["B", 6, 8])}, ["y"], [gamma])


def softmax_head_model() -> onnx.ModelProto:
    """A softmax's Sub(x [B,7], m [B,1]) -> Exp, the Exp read by a ReduceSum outside the chain."""
    nodes = [helper.make_node("Sub", ["x", "m"], ["d"]), helper.make_node("Exp", ["d"], ["e"]),
             helper.make_node("ReduceSum", ["e"], ["s"], keepdims=1), helper.make_node("Div", ["e", "s"], ["y"])]
    return _model(nodes, {"x": (F, ["B", 7]), "m": (F, ["B", 1])}, ["y"], opset=13)


def kept_intermediate_model(z_batch: str | None) -> onnx.ModelProto:
    """u = Sigmoid(x [B,16]) leaves the graph and v = u + z: z [B,16] proves v of u's shape (one chain); z [C,16] or
    [?,16] does not, and u, written, could be smaller than v at run time: nothing fuses."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["u"]), helper.make_node("Add", ["u", "z"], ["v"])]
    return _model(nodes, {"x": (F, ["B", 16]), "z": (F, [z_batch, 16])}, ["u", "v"])


def growing_operand_model() -> onnx.ModelProto:
    """u = Sigmoid(x [B,1,8]) leaves the graph; u * w [B,6,8] would grow it: not fused."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["u"]), helper.make_node("Mul", ["u", "w"], ["v"])]
    return _model(nodes, {"x": (F, ["B", 1, 8]), "w": (F, ["B", 6, 8])}, ["u", "v"])


def max_min_model() -> onnx.ModelProto:
    """An expanded LayerNorm's clamp: Sub(x [B,6,8], m [B,1,8]) -> Max(0, .) -> Min(., six [1,6,1]) -> Mul(., x); NaN
    and infinities among the specials must pass through Max/Min as the unfused kernels pass them."""
    nodes = [helper.make_node("Sub", ["x", "m"], ["d"]), helper.make_node("Max", ["zero", "d"], ["p"]),
             helper.make_node("Min", ["p", "six"], ["q"]), helper.make_node("Mul", ["q", "x"], ["y"])]
    six = numpy_helper.from_array(np.linspace(0.5, 6, 6).astype(np.float32).reshape(1, 6, 1), "six")
    return _model(nodes, {"x": (F, ["B", 6, 8]), "m": (F, ["B", 1, 8])}, ["y"], [_scalar("zero", 0.0), six])


#: name -> (model, input shapes, expected steps, chains, steps fused into them)
CASES = {
    "hard_swish": (lambda: hard_swish_model([2, 8, 9, 9]), 1, 1, 4),
    "hard_swish_keep_clip": (lambda: hard_swish_model([1, 4, 3, 3], keep=True), 1, 1, 4),
    "silu_se_residual": (silu_se_model, 1, 1, 4),
    "activations": (activations_model, 1, 1, 8),
    "add_relu_broadcast": (add_relu_model, 1, 1, 3),
    "read_outside": (read_outside_model, 3, 1, 3),
    "cycle": (cycle_model, 3, 0, 0),
    "int32": (int_model, 3, 0, 0),
    "symbolic": (symbolic_model, 1, 1, 2),
    "symbolic_two_inputs": (symbolic_two_model, 1, 1, 2),
    "symbolic_two_symbols": (lambda: symbolic_two_model("other"), 1, 1, 2),
    "symbolic_two_unnamed": (lambda: symbolic_two_model(None), 1, 1, 2),
    "layernorm_tail": (layernorm_tail_model, 1, 1, 3),
    "grow_first": (grow_first_model, 1, 1, 2),
    "softmax_head": (softmax_head_model, 3, 1, 2),
    "kept_intermediate": (lambda: kept_intermediate_model("B"), 1, 1, 2),
    "kept_intermediate_other_symbol": (lambda: kept_intermediate_model("C"), 2, 0, 0),
    "kept_intermediate_unnamed": (lambda: kept_intermediate_model(None), 2, 0, 0),
    "growing_operand": (growing_operand_model, 2, 0, 0),
    "max_min": (max_min_model, 1, 1, 4),
    "gelu_tanh": (lambda: gelu_tanh_model([2, 16, 64]), 1, 1, 9),
    "gelu_tanh_symbolic": (lambda: gelu_tanh_model(["batch", 16, 64]), 1, 1, 9),
    "immediates": (immediates_model, 1, 1, 6),
    "sixteen": (lambda: long_model(16), 1, 1, 16),
    "seventeen": (lambda: long_model(17), 2, 1, 16),
}


def _feeds(model: onnx.ModelProto, rng: np.random.Generator, special: bool = False,
           batch: int = 3) -> dict[str, np.ndarray]:
    feeds = {}
    for vi in model.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else batch for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == TensorProto.INT32:
            feeds[vi.name] = rng.integers(-50, 50, dims).astype(np.int32)
            continue
        x = (rng.standard_normal(dims) * 4).astype(np.float32)
        if special:   # NaN, infinities, signed zeros and values at the clamps' edges
            flat = x.reshape(-1)
            picks = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -3.0, 3.0, 6.0, 1e-40, -88.0, 89.0], np.float32)
            flat[: min(flat.size, picks.size)] = picks[: flat.size]
        feeds[vi.name] = x
    return feeds


@pytest.fixture
def compile_log(host: epabi.Host, caplog: pytest.LogCaptureFixture) -> Iterator:
    """compile_log(model, options) -> (session, (steps, chains, chained steps)) on the software adapter."""
    made: list[epabi.InferenceSession] = []

    def make(model: onnx.ModelProto, options: dict[str, str] | None = None):
        so = epabi.SessionOptions()
        so.log_severity_level = 0
        so.add_provider_for_devices(host.get_ep_devices(), options or {})
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="epabi"):
            sess = epabi.InferenceSession(model, so)
        made.append(sess)
        assert set(sess.node_assignment.values()) == {epabi.get_ep_name()}, sess.node_assignment
        found = [SUMMARY.search(r.getMessage()) for r in caplog.records]
        counts = [tuple(int(g) for g in m.groups()) for m in found if m]
        assert len(counts) == 1, [r.getMessage() for r in caplog.records if "compiled" in r.getMessage()]
        return sess, counts[0]

    yield make
    for s in made:
        s.close()


def node_by_node(host: epabi.Host, model: onnx.ModelProto, feeds: dict[str, np.ndarray],
                 devices: list | None = None) -> dict[str, np.ndarray]:
    """Every value of the graph, computed one single-node session per node on our EP (``devices``: the host's, or
    these): the unfused kernels."""
    env = dict(feeds)
    consts = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        ins = [n for n in node.input if n and n not in consts]
        infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(env[n].dtype), env[n].shape)
                 for n in ins]
        graph = helper.make_graph(
            [node], "one", infos,
            [helper.make_tensor_value_info(o, 0, None) for o in node.output],
            [consts[n] for n in node.input if n in consts])
        one = helper.make_model(graph, opset_imports=list(model.opset_import))
        one.ir_version = model.ir_version
        so = epabi.SessionOptions()
        so.add_provider_for_devices(devices or host.get_ep_devices(), {})
        with epabi.InferenceSession(one, so) as sess:
            assert set(sess.node_assignment.values()) == {epabi.get_ep_name()}, sess.node_assignment
            for name, value in zip(node.output, sess.run(None, {n: env[n] for n in ins})):
                env[name] = value
    return env


def _cpu_ep(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_chain_plan_and_values(host: epabi.Host, compile_log, case: str, special: bool) -> None:
    build, steps, chains, chained = CASES[case]
    model = build()
    sess, counts = compile_log(model)
    assert counts == (steps, chains, chained)
    feeds = _feeds(model, np.random.default_rng(len(case)), special)
    got = sess.run(None, feeds)
    ref = node_by_node(host, model, feeds)
    for out, value in zip(model.graph.output, got):
        assert value.dtype == ref[out.name].dtype and value.shape == ref[out.name].shape, out.name
        assert np.array_equal(value, ref[out.name], equal_nan=True), \
            f"{out.name}: {np.sum(~np.isclose(value, ref[out.name], equal_nan=True))} values differ from unfused"
    if not special:   # the CPU EP's Sigmoid/Tanh/Exp approximations differ by ulps
        for value, want in zip(got, _cpu_ep(model, feeds)):
            np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5)


SYMBOLIC = ["symbolic_two_inputs", "symbolic_two_symbols", "symbolic_two_unnamed", "layernorm_tail", "grow_first",
            "softmax_head", "kept_intermediate", "gelu_tanh_symbolic"]


@pytest.mark.parametrize("batch", [1, 5])
@pytest.mark.parametrize("case", SYMBOLIC)
def test_symbolic_chain_batches(host: epabi.Host, compile_log, case: str, batch: int) -> None:
    """One session over symbolic shapes at batches 1 and 5: the chain's run-time shape follows its inputs'."""
    build, steps, chains, chained = CASES[case]
    model = build()
    sess, counts = compile_log(model)
    assert counts == (steps, chains, chained)
    feeds = _feeds(model, np.random.default_rng(batch), batch=batch)
    for value, want in zip(sess.run(None, feeds), _cpu_ep(model, feeds)):
        assert value.shape == want.shape
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5)


def test_symbolic_chain_refuses_differing_symbols(host: epabi.Host, compile_log) -> None:
    """u = Sigmoid(x [B,16]) is written and v = u + z [B,16]: a run with z's B 4 and x's B 1 would make u [1,16] and
    v [4,16]. ORT's CPU EP runs it (it checks no symbols); the chain refuses it, naming the input and the shapes."""
    model = kept_intermediate_model("B")
    sess, counts = compile_log(model)
    assert counts == (1, 1, 2)
    feeds = {"x": np.ones([1, 16], np.float32), "z": np.ones([4, 16], np.float32)}
    assert [w.shape for w in _cpu_ep(model, feeds)] == [(1, 16), (4, 16)]
    with pytest.raises(epabi.OrtStatusError) as err:
        sess.run(None, feeds)
    assert err.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
    assert "input 0 has shape [1,16]" in str(err.value) and "gives it the shape [1,16], not the output shape [4,16]" \
        in str(err.value) and "[B,16] (input 0) and [B,16] (output)" in str(err.value), str(err.value)


@pytest.mark.parametrize("threads", [1, 3])
def test_long_chain_over_threads_and_blocks(host: epabi.Host, compile_log, threads: int) -> None:
    """Rows longer than the host's block (256), partial rows per thread, a bias broadcast along them."""
    model = activations_model()
    sess, counts = compile_log(model, {"intra_op_num_threads": str(threads)})
    assert counts[1:] == (1, 8)
    feeds = _feeds(model, np.random.default_rng(7))
    got = sess.run(None, feeds)[0]
    assert np.array_equal(got, node_by_node(host, model, feeds)["y"], equal_nan=True)


def test_chain_in_graph_capture(host: epabi.Host) -> None:
    """Replays of a captured chain recompute it from inputs updated in place."""
    model = hard_swish_model([2, 8, 9, 9])
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {"enable_cuda_graph": "1",
                                                        "min_num_runs_before_cuda_graph_capture": "1"})
    rng = np.random.default_rng(3)
    with epabi.InferenceSession(model, so) as sess:
        x = epabi.OrtValue.ortvalue_from_numpy(_feeds(model, rng)["x"])
        y = epabi.OrtValue.ortvalue_from_shape_and_type([2, 8, 9, 9], np.float32)
        binding = sess.io_binding()
        binding.bind_ortvalue_input("x", x)
        binding.bind_ortvalue_output("y", y)
        for _ in range(4):
            feed = _feeds(model, rng)["x"]
            x.update_inplace(feed)
            sess.run_with_iobinding(binding)
            np.testing.assert_allclose(y.numpy(), _cpu_ep(model, {"x": feed})[0], rtol=1e-6, atol=1e-6)


def test_magika_chains(host: epabi.Host, compile_log) -> None:
    """magika (batch symbolic): its two GELU-tanh (9 nodes each, scalar immediates) and the elementwise runs of its
    LayerNorms and softmax that read one value fuse; outputs match ORT's CPU EP at two batch sizes."""
    from magika_model import batch, model_path
    model = onnx.load(str(model_path()))
    sess, counts = compile_log(model)
    from magika_model import PLAN_CHAIN_NODES, PLAN_CHAINS, PLAN_STEPS
    assert counts == (PLAN_STEPS, PLAN_CHAINS, PLAN_CHAIN_NODES)   # before symbols and cones: (71, 6, 28)
    x = batch()
    for feed in [x, x[:1], np.concatenate([x, x])[:6]]:
        np.testing.assert_allclose(sess.run(None, {"bytes": feed})[0], _cpu_ep(model, {"bytes": feed})[0],
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_real_ort_magika_chains(version: str, library_path: str, tmp_path: Path) -> None:
    from magika_model import batch, model_path
    x = batch()
    for n, feed in enumerate([x[:1], np.concatenate([x, x])[:6]]):
        feeds = {"bytes": feed}
        result, outs, err = run_on_real_ort(version, library_path, model_path(), feeds, "default",
                                            tmp_path / f"magika{n}")
        assert_all_on_our_ep(result, version, err)
        want = _cpu_ep(onnx.load(str(model_path())), feeds)
        np.testing.assert_allclose(outs[0], want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_real_ort_chains(version: str, library_path: str, tmp_path: Path) -> None:
    for case in ["hard_swish_keep_clip", "silu_se_residual", "activations", "add_relu_broadcast", "read_outside",
                 "gelu_tanh_symbolic", "immediates", "sixteen", *SYMBOLIC]:
        model = CASES[case][0]()
        path = tmp_path / f"{case}.onnx"
        onnx.save(model, str(path))
        for batch in [1, 5] if case in SYMBOLIC else [3]:
            feeds = _feeds(model, np.random.default_rng(1), batch=batch)
            result, outs, err = run_on_real_ort(version, library_path, path, feeds, "default",
                                                tmp_path / f"{case}{batch}")
            assert_all_on_our_ep(result, version, err)
            for got, want in zip(outs, _cpu_ep(model, feeds)):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"{case} batch {batch}")


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["hard_swish_keep_clip", "silu_se_residual", "activations", "add_relu_broadcast",
                                  "read_outside", "gelu_tanh", "gelu_tanh_symbolic", "immediates", "seventeen",
                                  *SYMBOLIC])
@pytest.mark.parametrize("jit", ["require", "0"])
def test_gpu_chains(library_path: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
                    case: str, jit: str) -> None:
    """Chains on the GPU, through their own compiled kernels (EPABI_CHAIN_JIT=require: an error where a chain would
    not get one; native/cuda/cuda_chain_jit.c) and through the interpreting chain_f32 (EPABI_CHAIN_JIT=0): the plan
    fuses as on the host; values equal the unfused CUDA kernels bit for bit (NaN and infinities included) and match the
    CPU EP."""
    if epabi.hardware.cuda_gpu_count() == 0:
        pytest.skip("no NVIDIA GPU with a working driver")
    monkeypatch.setenv("EPABI_CHAIN_JIT", jit)
    monkeypatch.setenv("EPABI_CUDA_DISCOVERY", "1")
    monkeypatch.delenv("EPABI_ALLOW_SOFTWARE_ADAPTER", raising=False)
    build, steps, chains, chained = CASES[case]
    model = build()
    with epabi.Host() as host:
        host.register_execution_provider_library("epabi", library_path)
        gpus = [d for d in host.get_ep_devices()
                if d.ep_name == epabi.get_ep_name() and d.ep_metadata.get("device_kind") == "gpu"]
        assert gpus, host.get_ep_devices()
        so = epabi.SessionOptions()
        so.log_severity_level = 0
        so.add_provider_for_devices(gpus[:1], {})
        for special in [False, True]:
            feeds = _feeds(model, np.random.default_rng(5), special)
            caplog.clear()
            with caplog.at_level(logging.DEBUG, logger="epabi"), epabi.InferenceSession(model, so) as sess:
                got = sess.run(None, feeds)
            counts = [m.groups() for m in (SUMMARY.search(r.getMessage()) for r in caplog.records) if m]
            assert [tuple(int(g) for g in c) for c in counts] == [(steps, chains, chained)]
            ref = node_by_node(host, model, feeds, gpus[:1])
            for out, value in zip(model.graph.output, got):
                np.testing.assert_array_equal(value, ref[out.name], err_msg=f"{case} {out.name} special={special}")
            if not special:
                for value, want in zip(got, _cpu_ep(model, feeds)):
                    np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5, err_msg=case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["gelu_tanh_symbolic", "layernorm_tail", "softmax_head", "symbolic_two_symbols"])
def test_gpu_chain_kernels_over_batches(library_path: str, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """A chain's own kernel is compiled for its op list, not its shape: one session over symbolic dims runs batches
    1, 7, 1 and 300 through it (EPABI_CHAIN_JIT=require), each equal to the interpreter's bits in a second session
    (EPABI_CHAIN_JIT=0) and to ORT's CPU EP at 1e-5."""
    if epabi.hardware.cuda_gpu_count() == 0:
        pytest.skip("no NVIDIA GPU with a working driver")
    monkeypatch.setenv("EPABI_CUDA_DISCOVERY", "1")
    monkeypatch.delenv("EPABI_ALLOW_SOFTWARE_ADAPTER", raising=False)
    model = CASES[case][0]()
    batches = [1, 7, 1, 300]
    feeds = [_feeds(model, np.random.default_rng(b + 11 * i), batch=b) for i, b in enumerate(batches)]
    got: dict[str, list[list[np.ndarray]]] = {}
    with epabi.Host() as host:
        host.register_execution_provider_library("epabi", library_path)
        gpus = [d for d in host.get_ep_devices()
                if d.ep_name == epabi.get_ep_name() and d.ep_metadata.get("device_kind") == "gpu"]
        assert gpus, host.get_ep_devices()
        for jit in ["require", "0"]:
            monkeypatch.setenv("EPABI_CHAIN_JIT", jit)
            so = epabi.SessionOptions()
            so.add_provider_for_devices(gpus[:1], {})
            with epabi.InferenceSession(model, so) as sess:
                assert set(sess.node_assignment.values()) == {epabi.get_ep_name()}, sess.node_assignment
                got[jit] = [sess.run(None, f) for f in feeds]
    for b, f, own, interpreted in zip(batches, feeds, got["require"], got["0"]):
        for value, ref, want in zip(own, interpreted, _cpu_ep(model, f)):
            np.testing.assert_array_equal(value, ref, err_msg=f"{case} batch {b}")
            np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5, err_msg=f"{case} batch {b}")
