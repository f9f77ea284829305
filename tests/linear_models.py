"""Models of one MatMul/Gemm + bias + activation group (the plan's linear step, native/kernels/linear.h) for the
fusion tests on the software adapter (test_linear_fusion.py) and on the GPU (test_gpu_linear.py).

Each :class:`Case` builds a model with one float input ``x`` (A), its weights (B) and bias or C as initializers,
and one output ``y``, plus its feeds; :func:`ort_cpu` gives ONNX Runtime's CPU EP's output for it, the reference.
Weights are scaled by 1/sqrt(K), so outputs stay of order 1 at any K and 1e-4 is a tolerance FP32 meets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

#: Activation names of the cases -> (ONNX op, its attributes)
ACTIVATIONS = {"Relu": ("Relu", {}), "Sigmoid": ("Sigmoid", {}), "Tanh": ("Tanh", {}), "Gelu": ("Gelu", {}),
               "GeluTanh": ("Gelu", {"approximate": "tanh"})}

#: The plan's summary line (native/plan_build.c, VERBOSE): steps, and linear steps with the nodes folded into them
COMPILED = re.compile(r"compiled '[^']*': (\d+) steps \(\d+ on the host, \d+ activation nodes fused, (\d+) linear "
                      r"with (\d+) node\(s\) folded in\)")

#: The capture summary (native/capture_policy.c, INFO): the launches a replay runs (CUDA: the graph's nodes)
CAPTURED = re.compile(r"captured graph of annotation id (-?\d+): (\d+) launch\(es\)")


@dataclass(frozen=True)
class Case:
    """One group. ``bias`` (MatMul, or Gemm without C followed by an Add): "vector" [N], "row" [1, N], "scalar" [1]
    or None; ``c`` (Gemm's own C): "vector", "matrix" [M, N], "column" [M, 1] or None. ``a_shape`` overrides
    MatMul's A (its last dim is K). ``dynamic``: the input's first dim is symbolic."""

    m: int
    k: int
    n: int
    activation: str | None = "Relu"
    lead: str = "MatMul"
    bias: str | None = "vector"
    c: str | None = None
    trans_a: bool = False
    trans_b: bool = False
    alpha: float = 1.0
    beta: float = 1.0
    a_shape: tuple[int, ...] | None = None
    dynamic: bool = False

    @property
    def id(self) -> str:
        parts = [f"{self.lead}{self.m}x{self.k}x{self.n}", self.activation or "noact"]
        if self.lead == "Gemm":
            parts += [f"tA{int(self.trans_a)}tB{int(self.trans_b)}", f"a{self.alpha:g}b{self.beta:g}", f"C{self.c}"]
        if self.bias != "vector":
            parts.append(f"bias{self.bias}")
        if self.a_shape is not None:
            parts.append("A" + "x".join(map(str, self.a_shape)))
        if self.dynamic:
            parts.append("dyn")
        return "-".join(parts)

    @property
    def folded(self) -> int:
        """The nodes the plan folds into the lead: the bias Add (when the lead has no C) and the activation."""
        takes_bias = self.bias is not None and (self.lead == "MatMul" or self.c is None)
        return int(takes_bias) + int(self.activation is not None)

    @property
    def opset(self) -> int:
        return 20 if self.activation in ("Gelu", "GeluTanh") else 17

    def build(self, seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[int]]:
        """(model, feeds, output shape)."""
        rng = np.random.default_rng(seed)
        m, k, n = self.m, self.k, self.n
        inits: list[onnx.TensorProto] = []
        nodes: list[onnx.NodeProto] = []

        def const(name: str, value: np.ndarray) -> str:
            inits.append(numpy_helper.from_array(value.astype(np.float32), name))
            return name

        if self.lead == "MatMul":
            a_shape = list(self.a_shape) if self.a_shape is not None else [m, k]
            out_shape = a_shape[:-1] + [n]
            w = rng.uniform(-1, 1, (k, n)) / np.sqrt(max(k, 1))
            nodes.append(helper.make_node("MatMul", ["x", const("w", w)], ["p"], name="lead"))
        else:
            a_shape = [k, m] if self.trans_a else [m, k]
            out_shape = [m, n]
            w = rng.uniform(-1, 1, (n, k) if self.trans_b else (k, n)) / np.sqrt(max(k, 1))
            ins = ["x", const("w", w)]
            if self.c is not None:
                c_shape = {"vector": [n], "matrix": [m, n], "column": [m, 1]}[self.c]
                ins.append(const("c", rng.uniform(-0.5, 0.5, c_shape)))
            nodes.append(helper.make_node("Gemm", ins, ["p"], name="lead", transA=int(self.trans_a),
                                          transB=int(self.trans_b), alpha=self.alpha, beta=self.beta))
        last = "p"
        if self.bias is not None and (self.lead == "MatMul" or self.c is None):
            b_shape = {"vector": [n], "row": [1, n], "scalar": [1]}[self.bias]
            nodes.append(helper.make_node("Add", [last, const("bias", rng.uniform(-0.5, 0.5, b_shape))], ["s"],
                                          name="bias_add"))
            last = "s"
        if self.activation is not None:
            op, attrs = ACTIVATIONS[self.activation]
            nodes.append(helper.make_node(op, [last], ["y"], name="act", **attrs))
        else:
            nodes[-1].output[0] = "y"
        in_dims: list[int | str] = list(a_shape)
        out_dims: list[int | str] = list(out_shape)
        if self.dynamic:
            in_dims[0] = out_dims[0] = "batch"
        graph = helper.make_graph(nodes, "linear", [helper.make_tensor_value_info("x", T.FLOAT, in_dims)],
                                  [helper.make_tensor_value_info("y", T.FLOAT, out_dims)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 9
        onnx.checker.check_model(model)
        feeds = {"x": rng.standard_normal(a_shape).astype(np.float32)}
        return model, feeds, out_shape


def mlp_case_list() -> list[Case]:
    """Shapes (tails included: 1x1x1, 3x17x33), every activation, Gemm's attributes, bias shapes and A ranks."""
    cases = [Case(m, k, n, act) for m, k, n in ((1, 1, 1), (3, 17, 33), (16, 1024, 1024), (64, 512, 256))
             for act in (None, *ACTIVATIONS)]
    cases += [
        Case(1, 64, 64, "Relu"), Case(2, 40, 70, "Tanh"), Case(4, 40, 70, "Sigmoid"), Case(8, 300, 7, "Relu"),
        Case(9, 70, 40, None), Case(17, 33, 65, "Relu"),                      # row tiles 1..16 and past them
        Case(5, 30, 20, "Relu", bias=None), Case(5, 30, 20, None, bias=None),  # MatMul without bias
        Case(5, 30, 20, "Relu", bias="row"), Case(5, 30, 20, "Sigmoid", bias="scalar"),
        Case(6, 24, 10, "Relu", a_shape=(2, 3, 24)), Case(1, 24, 10, "Tanh", a_shape=(24,)),
        Case(3, 50, 20, "Relu", dynamic=True), Case(40, 50, 20, "Gelu", dynamic=True),
        Case(3, 17, 33, "Relu", lead="Gemm", bias=None, c="vector", trans_b=True, alpha=0.5, beta=2.0),
        Case(16, 1024, 1024, "Relu", lead="Gemm", bias=None, c="vector", trans_b=True),
        Case(64, 512, 256, None, lead="Gemm", bias=None, c="vector", trans_b=True),
        Case(64, 512, 256, "Relu", lead="Gemm", bias=None, c="matrix", alpha=1.5, beta=0.5),
        Case(7, 20, 30, "Tanh", lead="Gemm", bias=None, c="matrix", trans_a=True),
        Case(7, 20, 30, "Relu", lead="Gemm", bias=None, c="column", trans_a=True, trans_b=True, beta=0.7),
        Case(7, 20, 30, "Sigmoid", lead="Gemm", bias=None, c="vector", beta=0.0),
        Case(4, 20, 30, "Relu", lead="Gemm", bias="vector", c=None, trans_b=True, alpha=2.0),
        Case(70, 300, 90, "GeluTanh", lead="Gemm", bias="vector", c=None),
        Case(40, 20, 30, "Relu", lead="Gemm", bias=None, c="column", trans_a=True, trans_b=True, beta=0.7),
    ]
    return cases


def empty_case_list() -> list[Case]:
    """Empty operands: K = 0 (the product is 0: Y = act(beta * C)), M = 0 (an empty output)."""
    return [Case(3, 0, 5, "Sigmoid"), Case(3, 0, 5, "Relu", lead="Gemm", bias=None, c="matrix", beta=0.5),
            Case(0, 4, 5, "Relu")]


def ort_cpu(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """The output of ONNX Runtime's CPU EP (the interpreter's onnxruntime). A Gemm with K = 0 is the exception:
    onnxruntime before 1.32 returns C there without beta (seen with 1.24.4, 1.26.0 and the H200's 1.30.0; 1.32.0
    gives beta * C as the ONNX spec does), so those cases get onnx.reference's output."""
    import onnxruntime as ort

    gemm_k0 = any(n.op_type == "Gemm" for n in model.graph.node) and any(0 in v.shape for v in feeds.values())
    if gemm_k0 and tuple(int(p) for p in re.findall(r"\d+", ort.__version__)[:2]) < (1, 32):
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(model).run(None, feeds)[0]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]
