"""Built-in models made with the ``onnx`` helper API (no files, no downloads).

``mlp``: ``layers`` x (MatMul -> Add -> Relu), the last layer without Relu; float32 input ``x`` of shape
[batch, width], output ``y`` [batch, width]; weights drawn from N(0, 1/width) with a fixed seed, so outputs
are reproducible. Opset 17.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def mlp(layers: int = 3, width: int = 64, batch: int = 1, seed: int = 0) -> onnx.ModelProto:
    """The MLP described in the module docstring. Raises ValueError for non-positive sizes."""
    if layers < 1 or width < 1 or batch < 1:
        raise ValueError(f"mlp: layers={layers}, width={width}, batch={batch} must all be >= 1")
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    x = "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        b = (rng.standard_normal(width) * 0.1).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        last = i == layers - 1
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"mm{i}"], name=f"matmul{i}"))
        nodes.append(helper.make_node("Add", [f"mm{i}", f"b{i}"], ["y" if last else f"add{i}"], name=f"add{i}"))
        if not last:
            nodes.append(helper.make_node("Relu", [f"add{i}"], [f"relu{i}"], name=f"relu{i}"))
            x = f"relu{i}"
    graph = helper.make_graph(nodes, f"mlp{layers}x{width}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="epabi")
    model.ir_version = 8  # readable by every onnxruntime epabi supports
    return model


def sample_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs for every graph input (symbolic dims become 1; floats N(0,1), ints in [0, 10))."""
    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[vi.name] = rng.integers(0, 2, shape).astype(np.bool_)
        else:
            feeds[vi.name] = rng.integers(0, 10, shape).astype(dtype)
    return feeds
