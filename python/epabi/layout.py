"""ONNX Runtime's layout transformation for an EP that prefers NHWC (``OrtEp::GetPreferredDataLayout``).

Each node the EP claimed whose op is layout sensitive gets its first input transposed channels-first to
channels-last and its first output transposed back, and moves to ORT's internal domain ``com.ms.internal.nhwc``
with the same op type and attributes (weights stay as they are: the EP handles them). Layout sensitive means:
``OrtEp::ShouldConvertDataLayoutForOp`` says so, or it has no opinion (-1, or NULL) and the op is in ORT's list
(the ONNX spatial ops, plus Resize, FusedConv and the QLinear pools), in the ONNX or com.microsoft domain.
Nodes whose first input has an unknown rank are left alone, as ORT leaves them.

ORT then runs its transpose optimizer to cancel and push the inserted Transposes; this module does not (the
README lists it as an intended difference): a Transpose only moves elements, so every value the model computes
is the same, while the EP runs the extra Transposes.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx import helper

from .kernel_registry import NHWC_DOMAIN

#: ORT's layout-sensitive ops (the ONNX ones plus ORT's own).
LAYOUT_SENSITIVE_OPS = frozenset({
    "BatchNormalization", "InstanceNormalization", "Conv", "QLinearConv", "ConvTranspose", "AveragePool", "LpPool",
    "MaxPool", "MaxUnpool", "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool", "LRN", "GridSample",
    "DepthToSpace", "SpaceToDepth", "FusedConv", "QLinearAveragePool", "QLinearGlobalAveragePool", "Resize"})
_DOMAINS = ("", "ai.onnx", "com.microsoft")


def channels_last_perm(rank: int) -> list[int]:
    """Channels-first to channels-last: [0, 2, ..., rank-1, 1]."""
    return [0, *range(2, rank), 1]


def channels_first_perm(rank: int) -> list[int]:
    """Channels-last to channels-first: [0, rank-1, 1, ..., rank-2]."""
    return [0, rank - 1, *range(1, rank - 1)]


def transform_layout(model: onnx.ModelProto, claimed: set[int], should_convert: Callable[[str, str], bool | None]
                     ) -> tuple[onnx.ModelProto, dict[int, int]] | None:
    """A copy of ``model`` with the claimed layout-sensitive nodes (by position in ``model.graph.node``, which is
    the node id of the graph view) converted to NHWC, and where each node kept as it was now sits
    (``{old position: new position}``; converted nodes and the Transposes are new nodes); None when no node
    qualifies. ``should_convert(domain, op_type)`` is the EP's answer (None: ORT's default)."""
    graph = model.graph
    types = {vi.name: vi.type for vi in (*graph.input, *graph.output, *graph.value_info)}
    for t in graph.initializer:
        types.setdefault(t.name, helper.make_tensor_type_proto(t.data_type, list(t.dims)))
    nodes: list[onnx.NodeProto] = []
    value_info: list[onnx.ValueInfoProto] = []
    kept: dict[int, int] = {}
    changed = False
    for index, node in enumerate(graph.node):
        rank = _rank(types.get(node.input[0])) if node.input else None
        if index not in claimed or rank is None or not _converts(node, should_convert):
            kept[index] = len(nodes)
            nodes.append(node)
            continue
        changed = True
        src, dst = node.input[0], node.output[0]
        tag = f"{node.name or node.op_type + '_' + str(index)}"
        nhwc_in, nhwc_out = f"{tag}_nhwc_in", f"{tag}_nhwc_out"
        to_last, to_first = channels_last_perm(rank), channels_first_perm(rank)
        nodes.append(helper.make_node("Transpose", [src], [nhwc_in], name=f"{tag}_to_nhwc", perm=to_last))
        converted = onnx.NodeProto()
        converted.CopyFrom(node)
        converted.domain = NHWC_DOMAIN
        converted.op_type = "Conv" if node.op_type == "FusedConv" else node.op_type
        converted.input[0] = nhwc_in
        converted.output[0] = nhwc_out
        nodes.append(converted)
        nodes.append(helper.make_node("Transpose", [nhwc_out], [dst], name=f"{tag}_to_nchw", perm=to_first))
        value_info += [_permuted(nhwc_in, types.get(src), to_last), _permuted(nhwc_out, types.get(dst), to_last)]
    if not changed:
        return None
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.value_info.extend(v for v in value_info if v is not None)
    onnx_opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    if all(o.domain != NHWC_DOMAIN for o in out.opset_import):  # the internal domain speaks the ONNX opset
        out.opset_import.append(helper.make_opsetid(NHWC_DOMAIN, onnx_opset))
    return out, kept


def _converts(node: onnx.NodeProto, should_convert: Callable[[str, str], bool | None]) -> bool:
    domain = node.domain or ""
    if domain not in _DOMAINS:
        return False
    answer = should_convert(domain, node.op_type)
    return node.op_type in LAYOUT_SENSITIVE_OPS if answer is None else answer


def _rank(tp: onnx.TypeProto | None) -> int | None:
    if tp is None or tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.HasField("shape"):
        return None
    return len(tp.tensor_type.shape.dim)


def _permuted(name: str, tp: onnx.TypeProto | None, perm: list[int]) -> onnx.ValueInfoProto | None:
    if tp is None or _rank(tp) != len(perm):
        return None
    dims = list(tp.tensor_type.shape.dim)
    shape = [dims[p].dim_value if dims[p].HasField("dim_value") else (dims[p].dim_param or None) for p in perm]
    return helper.make_tensor_value_info(name, tp.tensor_type.elem_type, shape)
