"""ONNX backend test cases run through the epabi host on the software adapter.

Sources: ``onnx.backend.test.case`` node cases (models built in code), the ``pytorch-converted`` /
``pytorch-operator`` data shipped in the ``onnx`` wheel, and a few one-node cases of our own (``epabi``) for
dtypes our kernels cover that those leave out. A case is *relevant* when its graph holds an op the
plugin has a kernel for; it is *baselined* when ``onnx.reference`` alone reproduces its expected outputs (so a
failure is ours, not the reference evaluator's).
"""

from __future__ import annotations

import functools
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

KERNEL_OPS = frozenset(
    "MatMul Gemm Add Sub Mul Div Pow Max Min Sqrt Reciprocal Exp Erf Tanh Relu Sigmoid Abs Softmax LayerNormalization "
    "ReduceSum ReduceMean ReduceMax Transpose Reshape Squeeze Unsqueeze Identity Cast Concat Slice Expand Equal "
    "Where Gather Conv GlobalMaxPool Shape "
    "Split Flatten Tile Range ConstantOfShape Pad ArgMax ArgMin ReduceMin ReduceProd ReduceL2 Resize".split()
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


@functools.cache
def all_cases() -> list[Case]:
    cases = _node_cases() + _data_cases("pytorch-converted") + _data_cases("pytorch-operator") + _own_cases()
    limit = os.environ.get("EPABI_CONFORMANCE_LIMIT")
    return cases[: int(limit)] if limit else cases


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
def baseline_ok(name: str) -> bool:
    """onnx.reference alone reproduces the case (else the case says nothing about us)."""
    case = next(c for c in all_cases() if c.name == name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = ReferenceEvaluator(case.model)
            initializers = {t.name for t in case.model.graph.initializer}
            names = [i.name for i in case.model.graph.input if i.name not in initializers]
            feeds = dict(zip(names, case.inputs))
            return close(ref.run(None, feeds), case.outputs, case.rtol, case.atol) is None
    except Exception:  # any failure means no baseline
        return False
