"""``Constant`` nodes become initializers when a model is loaded, as ONNX Runtime's graph does on construction.

ONNX Runtime never shows a ``Constant`` node to an EP: when it builds a graph (the main graph and every subgraph)
it replaces each node whose op type is ``Constant`` by an initializer of that graph, named after the node's output
and holding the value of its attribute, so an EP sees a constant initializer (``ValueInfo_IsConstantInitializer``)
where the model had a node. PyTorch's TorchScript exporter writes most small constants (pads, axes, shapes,
scalars) that way. Models of IR version < 4 also get each new initializer as a graph input (of the main graph
here: a subgraph's inputs are its signature).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import AttributeProto, numpy_helper

from .errors import OrtErrorCode, OrtStatusError

_GRAPH_KINDS = (AttributeProto.GRAPH, AttributeProto.GRAPHS)


def _dense(sparse: onnx.SparseTensorProto) -> np.ndarray:
    """A sparse tensor's dense value: indices are linear [NNZ] or per-axis [NNZ, rank]."""
    values = numpy_helper.to_array(sparse.values)
    out = np.zeros(tuple(sparse.dims), values.dtype)
    if values.size:
        indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
        flat = indices if indices.ndim == 1 else np.ravel_multi_index(tuple(indices.T), out.shape)
        out.reshape(-1)[flat] = values.reshape(-1)
    return out


def _value(node: onnx.NodeProto) -> onnx.TensorProto:
    """The tensor a Constant node's one attribute gives, named after its output."""
    if len(node.attribute) != 1 or len(node.output) != 1:
        raise OrtStatusError(OrtErrorCode.INVALID_GRAPH,
                             f"Constant node '{node.name}' needs exactly one value attribute and one output")
    attr = node.attribute[0]
    name = node.output[0]
    if attr.type == AttributeProto.TENSOR:
        tensor = onnx.TensorProto()
        tensor.CopyFrom(attr.t)
        tensor.name = name
        return tensor
    arrays = {
        AttributeProto.FLOAT: lambda: np.array(attr.f, np.float32),
        AttributeProto.FLOATS: lambda: np.array(attr.floats, np.float32),
        AttributeProto.INT: lambda: np.array(attr.i, np.int64),
        AttributeProto.INTS: lambda: np.array(attr.ints, np.int64),
        AttributeProto.STRING: lambda: np.array(attr.s, dtype=object),
        AttributeProto.STRINGS: lambda: np.array(list(attr.strings), dtype=object),
        AttributeProto.SPARSE_TENSOR: lambda: _dense(attr.sparse_tensor),
    }
    if attr.type not in arrays:
        raise OrtStatusError(OrtErrorCode.INVALID_GRAPH,
                             f"Constant node '{node.name}': attribute '{attr.name}' holds no constant value")
    return numpy_helper.from_array(arrays[attr.type](), name)


def _fold(graph: onnx.GraphProto, add_inputs: bool) -> int:
    count = 0
    for node in graph.node:
        for attr in node.attribute:
            if attr.type in _GRAPH_KINDS:
                for sub in [attr.g] if attr.type == AttributeProto.GRAPH else attr.graphs:
                    count += _fold(sub, False)
    constants = [n for n in graph.node if n.op_type == "Constant"]
    if not constants:
        return count
    for node in constants:
        tensor = _value(node)
        graph.initializer.append(tensor)
        if add_inputs:
            shape = list(tensor.dims)
            graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, shape))
    kept = [n for n in graph.node if n.op_type != "Constant"]
    del graph.node[:]
    graph.node.extend(kept)
    return count + len(constants)


def constants_to_initializers(model: onnx.ModelProto) -> int:
    """Replaces, in place, every ``Constant`` node of every graph of ``model`` by an initializer of its graph
    (see the module docstring); returns how many it replaced.

    Raises:
        OrtStatusError: INVALID_GRAPH for a Constant node without exactly one value attribute and one output.
    """
    return _fold(model.graph, model.ir_version < 4)
