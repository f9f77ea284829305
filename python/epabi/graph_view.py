"""The graph a plugin sees: ``OrtGraph``/``OrtNode``/``OrtValueInfo``/``OrtOpAttr`` views over an ``onnx`` model.

Built the way ONNX Runtime builds its EP graph views: nodes in topological order; graph inputs include
initializers that are also inputs; each value has one ``ValueInfoView`` with its producer, consumers and
flags (required/optional graph input, graph output, constant initializer); ``Node_GetSinceVersion`` is the
since-version of the operator schema that applies under the model's opset (as ORT's ``Node::SinceVersion``).
Read-only after construction, so served accessors are thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from ._ffi import enum_value, ffi
from .model_metadata import ExternalInitializerInfo, ModelMetadata
from .values import OrtValue, TensorTypeAndShapeInfo, TypeInfo

_ATTR_TYPES = {  # onnx.AttributeProto.AttributeType -> OrtOpAttrType (values from ort_abi.h)
    getattr(onnx.AttributeProto, kind): enum_value("OrtOpAttrType", f"ORT_OP_ATTR_{kind}")
    for kind in ("INT", "INTS", "FLOAT", "FLOATS", "STRING", "STRINGS", "GRAPH", "TENSOR")
}


def type_info_from_proto(tp: onnx.TypeProto | None) -> TypeInfo | None:
    """``OrtTypeInfo`` of an ONNX ``TypeProto`` (None when the type is unknown)."""
    if tp is None or tp.WhichOneof("value") is None:
        return None
    if tp.WhichOneof("value") != "tensor_type":
        kinds = {"sequence_type": 2, "map_type": 3, "optional_type": 6, "sparse_tensor_type": 5}
        return TypeInfo(kinds.get(tp.WhichOneof("value"), 0), None)
    tt = tp.tensor_type
    dims: list[int] | None = None
    symbolic: list[str] | None = None
    if tt.HasField("shape"):
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        symbolic = [d.dim_param if d.HasField("dim_param") else "" for d in tt.shape.dim]
    return TypeInfo(1, TensorTypeAndShapeInfo(tt.elem_type, dims, symbolic))


class OpAttrView:
    """``OrtOpAttr``: one node attribute."""

    def __init__(self, proto: onnx.AttributeProto) -> None:
        self.proto = proto
        self.name = proto.name
        self.c_name = ffi.new("char[]", proto.name.encode())
        self.type = _ATTR_TYPES.get(proto.type, 0)
        self.ptr: Any = ffi.NULL


class ValueInfoView:
    """``OrtValueInfo``: a named value with its type and graph relations."""

    def __init__(self, graph: GraphView, name: str, type_info: TypeInfo | None) -> None:
        self.graph = graph
        self.name = name
        self.c_name = ffi.new("char[]", name.encode())
        self.type_info = type_info
        self.producer: tuple[NodeView, int] | None = None
        self.consumers: list[tuple[NodeView, int]] = []
        self.implicit_consumers: list[NodeView] = []  # control-flow nodes whose subgraphs read this value
        self.required_graph_input = False
        self.optional_graph_input = False
        self.graph_output = False
        self.constant_initializer = False
        self.outer_scope = False
        self.initializer: OrtValue | None = None
        self.external: ExternalInitializerInfo | None = None  # where the initializer's data lives, if external
        self.ptr: Any = ffi.NULL


class NodeView:
    """``OrtNode``: one node of a graph view."""

    def __init__(self, graph: GraphView, proto: onnx.NodeProto, node_id: int, since_version: int,
                 defaults: Iterable[onnx.AttributeProto] = (), schema_attributes: Iterable[str] = ()) -> None:
        self.graph = graph
        self.proto = proto
        self.id = node_id
        self.name = proto.name
        self.op_type = proto.op_type
        self.domain = proto.domain
        self.since_version = since_version
        self.c_name = ffi.new("char[]", proto.name.encode())
        self.c_op_type = ffi.new("char[]", proto.op_type.encode())
        self.c_domain = ffi.new("char[]", proto.domain.encode())
        self.inputs: list[ValueInfoView | None] = []
        self.outputs: list[ValueInfoView | None] = []
        self.implicit_inputs: list[ValueInfoView] = []
        # ORT's graph resolution gives a node every attribute its schema has a default for (graph.cc,
        # VerifyNodeAndOpMatch): the model's own ones, then the defaults
        given = {a.name for a in proto.attribute}
        self.attributes = [OpAttrView(a) for a in proto.attribute]
        self.attributes += [OpAttrView(a) for a in defaults if a.name not in given]
        #: every attribute the node's schema defines (``Node_GetAttributeByName`` answers NULL for those unset)
        self.schema_attributes = frozenset(schema_attributes)
        graph_kinds = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
        self.subgraphs = [a for a in proto.attribute if a.type in graph_kinds]
        self.ep_name = ""
        self.c_ep_name = ffi.new("char[]", b"")
        self.ptr: Any = ffi.NULL

    def assign(self, ep_name: str) -> None:
        self.ep_name = ep_name
        self.c_ep_name = ffi.new("char[]", ep_name.encode())


class GraphView:
    """``OrtGraph``: nodes, inputs, outputs, initializers of a (sub)graph.

    ``nodes`` are in the model's order (their ``id``s, as ORT's node indices); ``order`` is the order ORT's
    ``Graph_GetNodes`` gives them (:func:`ort_topological_order`), or the given order with ``keep_order`` (a
    fused node's graph, which ORT shows in the order of the graph it was cut from)."""

    def __init__(self, name: str, nodes: Iterable[onnx.NodeProto], inputs: list[str], outputs: list[str],
                 initializers: dict[str, np.ndarray], value_types: dict[str, onnx.TypeProto],
                 opsets: dict[str, int], ir_version: int, model_path: str = "",
                 constant_initializers: set[str] | None = None, keep_order: bool = False) -> None:
        self.name = name
        self.c_name = ffi.new("char[]", name.encode())
        self.model_path = model_path
        self.c_model_path = ffi.new("char[]", model_path.encode())
        self.ir_version = ir_version
        self.opsets = dict(opsets)
        self.c_opset_domains = [ffi.new("char[]", d.encode()) for d in self.opsets]
        self.parent_node: NodeView | None = None
        self.metadata: ModelMetadata | None = None  # the model's (Graph_GetModelMetadata); subgraphs share it
        self.values: dict[str, ValueInfoView] = {}
        self.ptr: Any = ffi.NULL
        constant = set(initializers) if constant_initializers is None else constant_initializers

        def value(name: str) -> ValueInfoView:
            if name not in self.values:
                tp = value_types.get(name)
                if tp is None and name in initializers:
                    arr = initializers[name]
                    tp = onnx.helper.make_tensor_type_proto(onnx.helper.np_dtype_to_tensor_dtype(arr.dtype),
                                                            list(arr.shape))
                self.values[name] = ValueInfoView(self, name, type_info_from_proto(tp))
            return self.values[name]

        self.inputs = [value(n) for n in inputs]
        # an initializer listed among the inputs can be overridden by a feed from IR version 4 on (ORT's
        # Graph::CanOverrideInitializer); in older models it is a constant that merely appears among the inputs
        overridable = ir_version >= 4
        for v in self.inputs:
            if v.name not in initializers:
                v.required_graph_input = True
            elif overridable:
                v.optional_graph_input = True
        self.outputs = [value(n) for n in outputs]
        for v in self.outputs:
            v.graph_output = True
        self.initializers = []
        for name, arr in initializers.items():
            v = value(name)
            v.initializer = OrtValue(np.require(arr, requirements="C"))
            if name in constant and not v.optional_graph_input:
                v.constant_initializer = True
            else:
                v.optional_graph_input = True
            self.initializers.append(v)

        self.nodes: list[NodeView] = []
        for node_id, proto in enumerate(nodes):
            domain = proto.domain or ""
            opset = self.opsets.get(domain if domain != "ai.onnx" else "", 0)
            schema = _schema(proto.op_type, domain, opset)
            since = schema.since_version if schema is not None else opset
            node = NodeView(self, proto, node_id, since, _default_attributes(schema),
                            schema.attributes if schema is not None else ())
            for i, name in enumerate(proto.input):
                if name == "":
                    node.inputs.append(None)
                    continue
                v = value(name)
                v.consumers.append((node, i))
                node.inputs.append(v)
            if node.subgraphs:
                node.implicit_inputs = [value(n) for n in outer_scope_names(proto) if n in self.values or
                                        n in value_types or n in initializers]
                for v in node.implicit_inputs:
                    v.implicit_consumers.append(node)
            for i, name in enumerate(proto.output):
                if name == "":
                    node.outputs.append(None)
                    continue
                v = value(name)
                v.producer = (node, i)
                node.outputs.append(v)
            self.nodes.append(node)
        self.order = list(self.nodes) if keep_order else ort_topological_order(self.nodes)


def ort_topological_order(nodes: list[NodeView]) -> list[NodeView]:
    """The nodes in the order ORT's ``GraphViewer`` lists them (``ExecutionOrder::DEFAULT``, what
    ``Graph_GetNodes`` returns; ORT 1.24-1.32 ``graph_viewer.cc``/``graph.cc``): a depth-first walk up from the
    nodes no other node consumes (in index order, the last one first), each node's producers visited highest index
    first, a node listed when everything it reads from other nodes (inputs and a subgraph's outer-scope values) is
    listed. ``nodes`` are in index order."""
    position = {id(n): i for i, n in enumerate(nodes)}
    producers: list[list[int]] = []
    consumed = [False] * len(nodes)
    for node in nodes:
        feeding = {position[id(v.producer[0])] for v in (*node.inputs, *node.implicit_inputs)
                   if v is not None and v.producer is not None and id(v.producer[0]) in position}
        producers.append(sorted(feeding))
        for i in feeding:
            consumed[i] = True
    stack = [(i, False) for i in range(len(nodes)) if not consumed[i]]
    visited = [False] * len(nodes)
    order: list[NodeView] = []
    while stack:
        i, leaving = stack.pop()
        if leaving:
            order.append(nodes[i])
            continue
        if visited[i]:
            continue
        visited[i] = True
        stack.append((i, True))
        stack.extend((j, False) for j in producers[i])
    return order


def outer_scope_names(node: onnx.NodeProto) -> list[str]:
    """Names a node's subgraphs read from the enclosing scope (its implicit inputs), in first-use order."""
    found: list[str] = []

    def visit(graph: onnx.GraphProto, bound: set[str]) -> None:
        bound = bound | {i.name for i in graph.input} | {t.name for t in graph.initializer}
        for n in graph.node:
            for name in n.input:
                if name and name not in bound and name not in found:
                    found.append(name)
            for attr in n.attribute:
                for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)):
                    visit(sub, bound)
            bound = bound | set(n.output)

    for attr in node.attribute:
        for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)):
            visit(sub, set())
    return found


def _schema(op_type: str, domain: str, opset: int) -> Any:
    """The ONNX schema a node resolves to (None: no ONNX schema; ORT's own domains are not known here)."""
    if domain == "com.ms.internal.nhwc":  # ORT's layout-transformed ops take their ONNX schema
        domain = ""
    try:
        return onnx.defs.get_schema(op_type, max_inclusive_version=opset, domain=domain)
    except Exception:  # unknown op: ORT would fail graph resolution
        return None


def _default_attributes(schema: Any) -> list[onnx.AttributeProto]:
    """The attributes a schema has defaults for (ORT adds them to every node lacking them)."""
    if schema is None:
        return []
    return [a.default_value for _, a in sorted(schema.attributes.items())
            if not a.required and a.default_value.name]


def model_graph(model: onnx.ModelProto, model_path: str = "") -> GraphView:
    """The main graph of a (shape-inferred) model as ORT presents it to ``GetCapability``."""
    g = model.graph
    types = {vi.name: vi.type for vi in (*g.input, *g.output, *g.value_info)}
    initializers = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    opsets = {(o.domain if o.domain != "ai.onnx" else ""): o.version for o in model.opset_import}
    inputs = [i.name for i in g.input]
    view = GraphView(g.name, g.node, inputs, [o.name for o in g.output], initializers, types, opsets,
                     model.ir_version, model_path)
    view.metadata = ModelMetadata.of(model)
    for t in g.initializer:
        if t.name in view.values:
            view.values[t.name].external = ExternalInitializerInfo.of(t)
    return view
