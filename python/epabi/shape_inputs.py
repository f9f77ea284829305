"""Shape inputs: ONNX node inputs whose values a kernel reads on the host (Reshape's shape, Slice's starts).

A device kernel reads such a value before it launches anything (ONNX Runtime's CUDA EP declares these inputs
``OrtMemTypeCPUInput`` in its kernel definitions, and so do ORT's other GPU EPs): the value decides output shapes
or launch parameters, and a captured graph keeps what the capturing run read. A replay therefore ignores a new
value written into a graph input that feeds one (directly, or through other nodes), which is why the
stale-replay check (:mod:`epabi.capture_bindings`) compares those inputs by value.

The table lists the CPU inputs of ORT's CUDA EP kernels (``core/providers/cuda`` in microsoft/onnxruntime; seen
there for Tile, Squeeze, Slice and Upsample, the rest by the ops' semantics: inputs that decide shapes, axes or
counts); an index an older opset takes as an attribute never matches a node input, so one entry serves every
opset.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import onnx

#: op type (default ONNX domain) -> indices of its inputs read on the host.
HOST_READ_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2),
    "Slice": (1, 2, 3, 4), "Pad": (1, 2, 3), "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,),
    "Resize": (1, 2, 3), "Upsample": (1,), "TopK": (1,), "OneHot": (1,), "CumSum": (1,), "Trilu": (1,),
    "Clip": (1, 2), "Dropout": (1, 2), "NonMaxSuppression": (2, 3, 4), "CenterCropPad": (1,), "Col2Im": (1, 2),
    **{op: (1,) for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                           "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")},
}

#: Ops whose outputs depend on their input's shape only: a value flowing through them stops mattering.
_SHAPE_ONLY = {"Shape", "Size"}


def inputs_feeding_shape_inputs(nodes: Iterable[onnx.NodeProto], graph_inputs: Sequence[str]) -> tuple[str, ...]:
    """The graph inputs (in ``graph_inputs`` order) whose values reach a shape input of some node, directly or
    through other nodes (not through Shape or Size, which read only shapes). ``nodes`` in topological order,
    as ONNX requires; nodes of other domains pass values on like any other node."""
    origins: dict[str, frozenset[str]] = {name: frozenset((name,)) for name in graph_inputs}
    found: set[str] = set()
    for node in nodes:
        if node.op_type in _SHAPE_ONLY and node.domain in ("", "ai.onnx"):
            continue
        if node.domain in ("", "ai.onnx"):
            for i in HOST_READ_INPUTS.get(node.op_type, ()):
                if i < len(node.input) and node.input[i] in origins:
                    found |= origins[node.input[i]]
        sources = frozenset().union(*(origins.get(name, frozenset()) for name in node.input))
        if sources:
            for name in node.output:
                if name:
                    origins[name] = sources
    return tuple(name for name in graph_inputs if name in found)
