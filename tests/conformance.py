"""ONNX backend test cases run through the epabi host on the software adapter.

Sources: ``onnx.backend.test.case`` node cases (models built in code), the ``pytorch-converted`` /
``pytorch-operator`` data shipped in the ``onnx`` wheel, and a few one-node cases of our own (``epabi``) for
dtypes our kernels cover that those leave out. A case is *relevant* when its graph holds an op the
plugin has a kernel for; it is *baselined* when a CPU fallback engine alone reproduces its expected outputs
(onnxruntime's CPU EP when onnxruntime is installed, else or where that fails ``onnx.reference``), so a failure
is ours, not the fallback's.
"""

from __future__ import annotations

import functools
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from epabi.cpu_fallback import ONNX_REFERENCE, ONNXRUNTIME, fallback_kind

KERNEL_OPS = frozenset(
    "MatMul Gemm Add Sub Mul Div Pow Max Min Sqrt Reciprocal Exp Erf Tanh Relu Sigmoid Abs Softmax LayerNormalization "
    "ReduceSum ReduceMean ReduceMax Transpose Reshape Squeeze Unsqueeze Identity Cast Concat Slice Expand Equal "
    "Where Gather Conv GlobalMaxPool Shape".split()
    + "Less Greater LessOrEqual GreaterOrEqual Mod And Or".split()
    + "Neg Floor Ceil Round Log Sin Cos Sign Not Clip HardSigmoid HardSwish LeakyRelu Gelu".split()
    + "MaxPool AveragePool GlobalAveragePool BatchNormalization InstanceNormalization ConvTranspose LSTM".split()
    + "Split Flatten Tile Range ConstantOfShape Pad ArgMax ArgMin ReduceMin ReduceProd ReduceL2 Resize".split()
)


@dataclass
class Case:
    name: str
    source: str
    model: onnx.ModelProto
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    rtol: float = 1e-3
    atol: float = 1e-5

    @property
    def ops(self) -> set[str]:
        return {n.op_type for n in self.model.graph.node if n.domain in ("", "ai.onnx")}


def _node_cases() -> list[Case]:
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node.collect_testcases(None)
    out = []
    for c in cases:
        if c.model is None or not c.data_sets:
            continue
        inputs, outputs = c.data_sets[0]
        out.append(Case(c.name, "node", c.model, list(inputs), list(outputs), c.rtol, c.atol))
    return out


def _tensors(data: Path, prefix: str) -> list[np.ndarray]:
    files = sorted(data.glob(f"{prefix}_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
    return [numpy_helper.to_array(onnx.load_tensor(str(f))) for f in files]


def _data_cases(kind: str) -> list[Case]:
    root = Path(onnx.__file__).parent / "backend" / "test" / "data" / kind
    out = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        data = d / "test_data_set_0"
        if not (d / "model.onnx").is_file() or not data.is_dir():
            continue
        model = onnx.load(str(d / "model.onnx"))
        out.append(Case(d.name, kind, model, _tensors(data, "input"), _tensors(data, "output")))
    return out


def _one_node(name: str, op: str, opset: int, x: np.ndarray, y: np.ndarray) -> Case:
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], name,
                              [helper.make_tensor_value_info("x", elem, list(x.shape))],
                              [helper.make_tensor_value_info("y", elem, list(y.shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return Case(name, "epabi", model, [x], [y])


def _own_cases() -> list[Case]:
    """Abs on the dtypes beside float (the node cases have float only); the most negative integer wraps to
    itself, as in numpy."""
    rng = np.random.default_rng(15)
    out = []
    for dtype, opset in ((np.int32, 13), (np.int64, 6)):
        info = np.iinfo(dtype)
        x = np.concatenate([np.array([info.min, info.max, -info.max, 0, -1], dtype=dtype),
                            rng.integers(-1000, 1000, size=19, dtype=dtype)]).reshape(2, 3, 4)
        out.append(_one_node(f"epabi_abs_{np.dtype(dtype).name}", "Abs", opset, x, np.abs(x)))
    x = np.concatenate([np.array([np.nan, -0.0, -np.inf, np.inf, -5e-324]), rng.standard_normal(7)]).reshape(3, 4)
    out.append(_one_node("epabi_abs_float64", "Abs", 13, x, np.abs(x)))
    return out


def _node_case(name: str, op: str, opset: int, inputs: list[np.ndarray | None], y: np.ndarray, **attrs: object) -> Case:
    """A one-node case; None in inputs is an absent optional input."""
    names = [f"x{i}" if x is not None else "" for i, x in enumerate(inputs)]
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], **attrs)], name,
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))
         for n, x in zip(names, inputs) if x is not None],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(y.dtype), list(y.shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return Case(name, "epabi", model, [x for x in inputs if x is not None], [y])


def _math_cases() -> list[Case]:
    """The dtypes beside float of the elementwise math, activation, comparison and Mod kernels that the node cases
    leave out (so the GPU run checks them too): float64 with NaN/+-0/+-inf/halves, int32/int64 Neg and Sign
    (the most negative value wraps), Clip on float64 and integers, comparisons with NaN, integer Mod by -1."""
    rng = np.random.default_rng(16)
    sp = np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, 0.5, -0.5, 1.5, -2.5, 3.0, -7.25, 1e300])
    x = np.concatenate([sp, rng.standard_normal(12) * 3])
    pos = np.abs(x)
    out = []
    with np.errstate(all="ignore"):
        for op, opset, fn, v in (("Neg", 13, np.negative, x), ("Floor", 13, np.floor, x), ("Ceil", 13, np.ceil, x),
                                 ("Round", 22, np.round, x), ("Log", 13, np.log, pos), ("Sin", 22, np.sin, x),
                                 ("Cos", 22, np.cos, x), ("Sign", 13, np.sign, x)):
            out.append(_node_case(f"epabi_{op.lower()}_float64", op, opset, [v], fn(v)))
        erf = np.vectorize(math.erf)
        hs = np.clip(0.3 * x + 0.6, 0, 1)
        out.append(_node_case("epabi_hardsigmoid_float64", "HardSigmoid", 22, [x], hs, alpha=0.3, beta=0.6))
        out.append(_node_case("epabi_hardswish_float64", "HardSwish", 22, [x], x * np.clip(x / 6 + 0.5, 0, 1)))
        out.append(_node_case("epabi_leakyrelu_float64", "LeakyRelu", 16, [x], np.where(x < 0, 0.1 * x, x),
                              alpha=0.1))
        g = x[np.isfinite(x)]
        out.append(_node_case("epabi_gelu_float64", "Gelu", 20, [g], 0.5 * g * (1 + erf(g / math.sqrt(2)))))
        t = 0.5 * g * (1 + np.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g**3)))
        out.append(_node_case("epabi_gelu_tanh_float64", "Gelu", 20, [g], t, approximate="tanh"))
    for dtype in (np.int32, np.int64):
        info = np.iinfo(dtype)
        name = np.dtype(dtype).name
        v = np.concatenate([np.array([info.min, info.max, 0, -1], dtype=dtype),
                            rng.integers(-1000, 1000, size=8, dtype=dtype)])
        out.append(_node_case(f"epabi_neg_{name}", "Neg", 13, [v], np.zeros_like(v) - v))
        out.append(_node_case(f"epabi_sign_{name}", "Sign", 13, [v], np.sign(v)))
        lo, hi = np.array(-500, dtype), np.array(700, dtype)
        out.append(_node_case(f"epabi_clip_{name}", "Clip", 13, [v, lo, hi], np.clip(v, lo, hi)))
        out.append(_node_case(f"epabi_clip_{name}_no_min", "Clip", 12, [v, None, hi], np.minimum(v, hi)))
        a = np.array([7, -7, 7, -7, info.min, info.min, 9, 0], dtype=dtype)
        b = np.array([3, 3, -3, -3, -1, 5, info.max, -4], dtype=dtype)
        out.append(_node_case(f"epabi_mod_{name}", "Mod", 13, [a, b], np.mod(a, b)))
        out.append(_node_case(f"epabi_fmod_{name}", "Mod", 13, [a, b], np.fmod(a, b), fmod=1))
        w = rng.integers(-3, 4, size=(3, 4), dtype=dtype)
        out.append(_node_case(f"epabi_less_{name}", "Less", 13, [w, w[0, :1]], w < w[0, :1]))
        out.append(_node_case(f"epabi_greater_equal_{name}", "GreaterOrEqual", 16, [w, w[:, :1]], w >= w[:, :1]))
    u = rng.integers(0, 255, size=10, dtype=np.uint8)
    out.append(_node_case("epabi_clip_uint8", "Clip", 13, [u, np.array(20, np.uint8), np.array(200, np.uint8)],
                          np.clip(u, 20, 200)))
    xs = x[np.isfinite(x)]
    out.append(_node_case("epabi_clip_float64", "Clip", 13, [xs, np.array(-1.0), np.array(2.0)], np.clip(xs, -1, 2)))
    f = np.array([np.nan, 1.0, np.inf, -np.inf, 2.0, -0.0])
    g2 = np.array([1.0, np.nan, np.inf, 0.0, 2.0, 0.0])
    for op, fn in (("Less", np.less), ("Greater", np.greater), ("LessOrEqual", np.less_equal),
                   ("GreaterOrEqual", np.greater_equal)):
        opset = 13 if op in ("Less", "Greater") else 16
        out.append(_node_case(f"epabi_{op.lower()}_float64_nan", op, opset, [f, g2], fn(f, g2)))
        out.append(_node_case(f"epabi_{op.lower()}_float32_nan", op, opset,
                              [f.astype(np.float32), g2.astype(np.float32)], fn(f, g2)))
    return out


@functools.cache
def all_cases() -> list[Case]:
    cases = (_node_cases() + _data_cases("pytorch-converted") + _data_cases("pytorch-operator") + _own_cases()
             + _math_cases())
    limit = os.environ.get("EPABI_CONFORMANCE_LIMIT")
    return cases[: int(limit)] if limit else cases


#: Per-case tolerances when onnxruntime's CPU EP is the fallback, with the reason (ORT's own backend test runner
#: keeps such overrides too). Real onnxruntime 1.32.0 with our plugin gives these outputs bit for bit.
ORT_FALLBACK_TOLERANCES = {
    # ORT computes fp16 nodes of a CPU partition in float32 between Casts it inserts, so it rounds at other
    # places than the reference does: one fp16 ulp off below 1.0
    "test_attention_4d_causal_fp16_expanded": (1e-3, 2.0 ** -11),
    # the same on the GPU EP device under onnxruntime 1.30 (the H200's): 2^-11 off at 0.4
    "test_attention_4d_fp16_expanded": (1e-3, 2.0 ** -11),
}


def tolerance(case: Case) -> tuple[float, float]:
    """(rtol, atol) a run through the epabi host is held to: the case's own, or the override the CPU fallback
    in use needs."""
    if fallback_kind() == ONNXRUNTIME and case.name in ORT_FALLBACK_TOLERANCES:
        return ORT_FALLBACK_TOLERANCES[case.name]
    return case.rtol, case.atol


def relevant_cases() -> list[Case]:
    return [c for c in all_cases() if c.ops & KERNEL_OPS]


def close(actual: list[np.ndarray], expected: list[np.ndarray], rtol: float, atol: float) -> str | None:
    """None when equal within tolerance (NaNs must match), else what differs."""
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, expected {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
        a, e = np.asarray(a), np.asarray(e)
        if a.shape != e.shape:
            return f"output {i}: shape {a.shape}, expected {e.shape}"
        if a.dtype != e.dtype:
            return f"output {i}: dtype {a.dtype}, expected {e.dtype}"
        if e.dtype.kind in "fc":
            if not np.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True):
                err = np.nanmax(np.abs(a.astype(np.float64) - e.astype(np.float64)))
                return f"output {i}: max abs error {err}"
        elif not np.array_equal(a, e):
            return f"output {i}: values differ"
    return None


@functools.cache
def baseline_engine(name: str) -> str | None:
    """The CPU fallback engine that alone reproduces the case (else the case says nothing about us): the default
    one (onnxruntime's CPU EP when onnxruntime is installed), else onnx.reference; None when neither does.

    A case only onnx.reference reproduces (onnxruntime has no CPU kernel for one of its nodes, say) is run
    with ``EPABI_CPU_FALLBACK=onnx.reference``, so our kernels are tested on it all the same."""
    case = next(c for c in all_cases() if c.name == name)
    initializers = {t.name for t in case.model.graph.initializer}
    names = [i.name for i in case.model.graph.input if i.name not in initializers]
    feeds = dict(zip(names, case.inputs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if fallback_kind() == ONNXRUNTIME:
            import onnxruntime

            try:
                session = onnxruntime.InferenceSession(case.model.SerializeToString(),
                                                       providers=["CPUExecutionProvider"])
                arrays = {n: np.asarray(v) for n, v in feeds.items()}  # its binding takes no numpy scalars
                if close(session.run(None, arrays), case.outputs, *tolerance(case)) is None:
                    return ONNXRUNTIME
            except Exception:  # onnxruntime refuses or fails the case
                pass
        try:
            if close(ReferenceEvaluator(case.model).run(None, feeds), case.outputs, case.rtol, case.atol) is None:
                return ONNX_REFERENCE
        except Exception:  # any failure means no baseline
            pass
    return None
