"""Served ``OrtApi`` graph accessors (``Graph_*``, ``Node_*``, ``ValueInfo_*``, ``OpAttr_*``, type infos, external
initializer info, model metadata).

Semantics follow ONNX Runtime 1.23+: arrays are copied into caller-provided buffers that must be large
enough (``ORT_INVALID_ARGUMENT`` otherwise); returned strings and objects are owned by the graph and live
as long as it does; a missing optional node input/output is a NULL ``OrtValueInfo``.
"""

from __future__ import annotations

import struct
from typing import Any

from onnx import numpy_helper

from ._ffi import enum_value, ffi
from .errors import OrtErrorCode
from .graph_view import GraphView, NodeView, OpAttrView, ValueInfoView
from .handles import address
from .model_metadata import ExternalInitializerInfo, ModelMetadata
from .values import OrtValue, TensorTypeAndShapeInfo, TypeInfo

_ATTR = {k: enum_value("OrtOpAttrType", f"ORT_OP_ATTR_{k}") for k in ("INT", "INTS", "FLOAT", "FLOATS", "STRING",
                                                                    "STRINGS")}


def _null_or(obj: Any) -> Any:
    return ffi.NULL if obj is None else obj.ptr


class GraphApi:
    """Mixin of ``_OrtApiImpl``: needs ``self.s`` (ServedApi) and ``self.h`` (HandleTable)."""

    s: Any
    h: Any

    def _graph(self, ptr: Any) -> GraphView:
        return self.s.get(ptr, GraphView, "graph")

    def _node(self, ptr: Any) -> NodeView:
        return self.s.get(ptr, NodeView, "node")

    def _vi(self, ptr: Any) -> ValueInfoView:
        return self.s.get(ptr, ValueInfoView, "value info")

    def _attr(self, ptr: Any) -> OpAttrView:
        return self.s.get(ptr, OpAttrView, "op attribute")

    def _fill(self, what: str, items: list[Any], dst: Any, capacity: int) -> Any:
        if capacity < len(items):
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT,
                                f"{what}: the array holds {capacity} entries but {len(items)} are needed")
        if items and address(dst) == 0:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"{what}: NULL destination array")
        for i, item in enumerate(items):
            dst[i] = _null_or(item)
        return ffi.NULL

    @staticmethod
    def _set(out: Any, value: Any) -> Any:
        out[0] = value
        return ffi.NULL

    # -- graph ----------------------------------------------------------------------------------------
    def Graph_GetName(self, g: Any, out: Any) -> Any:
        return self._set(out, self._graph(g).c_name)

    def Graph_GetModelPath(self, g: Any, out: Any) -> Any:
        return self._set(out, self._graph(g).c_model_path)

    def Graph_GetOnnxIRVersion(self, g: Any, out: Any) -> Any:
        return self._set(out, self._graph(g).ir_version)

    def Graph_GetNumOperatorSets(self, g: Any, out: Any) -> Any:
        return self._set(out, len(self._graph(g).opsets))

    def Graph_GetOperatorSets(self, g: Any, domains: Any, versions: Any, n: int) -> Any:
        graph = self._graph(g)
        if n < len(graph.opsets):
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"Graph_GetOperatorSets: room for {n} of "
                                f"{len(graph.opsets)} opsets")
        for i, (c_domain, version) in enumerate(zip(graph.c_opset_domains, graph.opsets.values(), strict=True)):
            domains[i] = c_domain
            versions[i] = version
        return ffi.NULL

    def Graph_GetNumInputs(self, g: Any, out: Any) -> Any:
        return self._set(out, len(self._graph(g).inputs))

    def Graph_GetInputs(self, g: Any, dst: Any, n: int) -> Any:
        return self._fill("Graph_GetInputs", self._graph(g).inputs, dst, n)

    def Graph_GetNumOutputs(self, g: Any, out: Any) -> Any:
        return self._set(out, len(self._graph(g).outputs))

    def Graph_GetOutputs(self, g: Any, dst: Any, n: int) -> Any:
        return self._fill("Graph_GetOutputs", self._graph(g).outputs, dst, n)

    def Graph_GetNumInitializers(self, g: Any, out: Any) -> Any:
        return self._set(out, len(self._graph(g).initializers))

    def Graph_GetInitializers(self, g: Any, dst: Any, n: int) -> Any:
        return self._fill("Graph_GetInitializers", self._graph(g).initializers, dst, n)

    def Graph_GetNumNodes(self, g: Any, out: Any) -> Any:
        return self._set(out, len(self._graph(g).nodes))

    def Graph_GetNodes(self, g: Any, dst: Any, n: int) -> Any:
        return self._fill("Graph_GetNodes", self._graph(g).order, dst, n)

    def Graph_GetParentNode(self, g: Any, out: Any) -> Any:
        return self._set(out, _null_or(self._graph(g).parent_node))

    # -- nodes ----------------------------------------------------------------------------------------
    def Node_GetId(self, n: Any, out: Any) -> Any:
        return self._set(out, self._node(n).id)

    def Node_GetName(self, n: Any, out: Any) -> Any:
        return self._set(out, self._node(n).c_name)

    def Node_GetOperatorType(self, n: Any, out: Any) -> Any:
        return self._set(out, self._node(n).c_op_type)

    def Node_GetDomain(self, n: Any, out: Any) -> Any:
        return self._set(out, self._node(n).c_domain)

    def Node_GetSinceVersion(self, n: Any, out: Any) -> Any:
        return self._set(out, self._node(n).since_version)

    def Node_GetNumInputs(self, n: Any, out: Any) -> Any:
        return self._set(out, len(self._node(n).inputs))

    def Node_GetInputs(self, n: Any, dst: Any, cap: int) -> Any:
        return self._fill("Node_GetInputs", self._node(n).inputs, dst, cap)

    def Node_GetNumOutputs(self, n: Any, out: Any) -> Any:
        return self._set(out, len(self._node(n).outputs))

    def Node_GetOutputs(self, n: Any, dst: Any, cap: int) -> Any:
        return self._fill("Node_GetOutputs", self._node(n).outputs, dst, cap)

    def Node_GetNumImplicitInputs(self, n: Any, out: Any) -> Any:
        return self._set(out, len(self._node(n).implicit_inputs))

    def Node_GetImplicitInputs(self, n: Any, dst: Any, cap: int) -> Any:
        return self._fill("Node_GetImplicitInputs", self._node(n).implicit_inputs, dst, cap)

    def Node_GetNumAttributes(self, n: Any, out: Any) -> Any:
        return self._set(out, len(self._node(n).attributes))

    def Node_GetAttributes(self, n: Any, dst: Any, cap: int) -> Any:
        return self._fill("Node_GetAttributes", self._node(n).attributes, dst, cap)

    def Node_GetAttributeByName(self, n: Any, name: Any, out: Any) -> Any:
        from .objects import pystr

        key = pystr(name)
        node = self._node(n)
        for attr in node.attributes:
            if attr.name == key:
                return self._set(out, attr.ptr)
        # observed on 1.24.4, 1.26.0 and 1.32.0: an attribute the node's schema defines but the node lacks (one
        # without a default) is NULL with success; one the schema does not know is ORT_NOT_FOUND
        if key in node.schema_attributes:
            return self._set(out, ffi.NULL)
        out[0] = ffi.NULL
        return self.s.error(OrtErrorCode.NOT_FOUND, f"Attribute '{key}' not found in node '{node.name}'")

    def Node_GetNumSubgraphs(self, n: Any, out: Any) -> Any:
        return self._set(out, len(self._node(n).subgraphs))

    def Node_GetGraph(self, n: Any, out: Any) -> Any:
        node = self._node(n)
        return self._set(out, node.graph.ptr if node.graph.ptr is not None else ffi.NULL)

    def Node_GetEpName(self, n: Any, out: Any) -> Any:
        return self._set(out, self._node(n).c_ep_name)

    # -- attributes -----------------------------------------------------------------------------------
    def OpAttr_GetType(self, a: Any, out: Any) -> Any:
        return self._set(out, self._attr(a).type)

    def OpAttr_GetName(self, a: Any, out: Any) -> Any:
        return self._set(out, self._attr(a).c_name)

    def OpAttr_GetTensorAttributeAsOrtValue(self, a: Any, out: Any) -> Any:
        attr = self._attr(a)
        if attr.type != 8:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"attribute '{attr.name}' is not a tensor")
        value = OrtValue(numpy_helper.to_array(attr.proto.t).copy())
        value.ptr = self.h.issue_for_plugin(value, "OrtValue*")
        return self._set(out, value.ptr)  # caller releases with ReleaseValue

    def ReadOpAttr(self, a: Any, kind: int, data: Any, length: int, out: Any) -> Any:
        attr = self._attr(a)
        p = attr.proto
        payload: bytes
        if kind == _ATTR["INT"]:
            if not p.HasField("i"):
                out[0] = 8
                return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "Attribute has no int64 value.")
            payload = struct.pack("<q", p.i)
        elif kind == _ATTR["INTS"]:
            payload = struct.pack(f"<{len(p.ints)}q", *p.ints)
        elif kind == _ATTR["FLOAT"]:
            if not p.HasField("f"):
                out[0] = 4
                return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "Attribute has no float value.")
            payload = struct.pack("<f", p.f)
        elif kind == _ATTR["FLOATS"]:
            payload = struct.pack(f"<{len(p.floats)}f", *p.floats)
        elif kind == _ATTR["STRING"]:
            # the string's bytes without a terminating NUL, and their count (observed on 1.24.4, 1.26.0 and
            # 1.32.0; ORT's sources before that counted and wrote a NUL)
            payload = p.s
        elif kind == _ATTR["STRINGS"]:
            payload = b"".join(s + b"\0" for s in p.strings)
        else:
            out[0] = 0
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "Unexpected attribute type. ")
        out[0] = len(payload)
        if length < len(payload):
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"Size of data not large enough for attribute "
                                f"'{attr.name}' ({length} < {len(payload)} bytes)")
        if payload:
            ffi.memmove(data, payload, len(payload))
        return ffi.NULL

    # -- value infos ----------------------------------------------------------------------------------
    def GetValueInfoName(self, v: Any, out: Any) -> Any:
        return self._set(out, self._vi(v).c_name)

    def GetValueInfoTypeInfo(self, v: Any, out: Any) -> Any:
        return self._set(out, _null_or(self._vi(v).type_info))

    def ValueInfo_GetValueProducer(self, v: Any, node: Any, index: Any) -> Any:
        producer = self._vi(v).producer
        node[0] = ffi.NULL if producer is None else producer[0].ptr
        if address(index) != 0:
            index[0] = 0 if producer is None else producer[1]
        return ffi.NULL

    def ValueInfo_GetValueNumConsumers(self, v: Any, out: Any) -> Any:
        return self._set(out, len(self._vi(v).consumers))

    def ValueInfo_GetValueConsumers(self, v: Any, nodes: Any, indices: Any, n: int) -> Any:
        consumers = self._vi(v).consumers
        if n < len(consumers):
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"room for {n} of {len(consumers)} consumers")
        for i, (node, idx) in enumerate(consumers):
            nodes[i] = node.ptr
            indices[i] = idx
        return ffi.NULL

    def ValueInfo_GetInitializerValue(self, v: Any, out: Any) -> Any:
        vi = self._vi(v)
        if vi.initializer is None:
            out[0] = ffi.NULL
            return ffi.NULL  # ORT returns OK with NULL for values that are not initializers
        return self._set(out, vi.initializer.ptr)

    def ValueInfo_IsRequiredGraphInput(self, v: Any, out: Any) -> Any:
        return self._set(out, self._vi(v).required_graph_input)

    def ValueInfo_IsOptionalGraphInput(self, v: Any, out: Any) -> Any:
        return self._set(out, self._vi(v).optional_graph_input)

    def ValueInfo_IsGraphOutput(self, v: Any, out: Any) -> Any:
        return self._set(out, self._vi(v).graph_output)

    def ValueInfo_IsConstantInitializer(self, v: Any, out: Any) -> Any:
        return self._set(out, self._vi(v).constant_initializer)

    def ValueInfo_IsFromOuterScope(self, v: Any, out: Any) -> Any:
        return self._set(out, self._vi(v).outer_scope)

    # -- type infos -----------------------------------------------------------------------------------
    def _type_info(self, ptr: Any) -> TypeInfo:
        return self.s.get(ptr, TypeInfo, "type info")

    def _tensor_info(self, ptr: Any) -> TensorTypeAndShapeInfo:
        return self.s.get(ptr, TensorTypeAndShapeInfo, "tensor type-and-shape info")

    def CastTypeInfoToTensorInfo(self, t: Any, out: Any) -> Any:
        info = self._type_info(t)
        return self._set(out, ffi.NULL if info.tensor is None else info.tensor.ptr)

    def GetOnnxTypeFromTypeInfo(self, t: Any, out: Any) -> Any:
        return self._set(out, self._type_info(t).onnx_type)

    def GetTensorElementType(self, t: Any, out: Any) -> Any:
        return self._set(out, self._tensor_info(t).elem_type)

    def GetDimensionsCount(self, t: Any, out: Any) -> Any:
        return self._set(out, len(self._tensor_info(t).dims or []))

    def GetDimensions(self, t: Any, dims: Any, n: int) -> Any:
        values = self._tensor_info(t).dims or []
        for i in range(min(n, len(values))):
            dims[i] = values[i]
        return ffi.NULL

    def GetSymbolicDimensions(self, t: Any, names: Any, n: int) -> Any:
        info = self._tensor_info(t)
        for i in range(min(n, len(info.c_symbolic))):
            names[i] = info.c_symbolic[i]
        return ffi.NULL

    def TensorTypeAndShape_HasShape(self, t: Any) -> bool:
        return self._tensor_info(t).dims is not None

    def GetTensorShapeElementCount(self, t: Any, out: Any) -> Any:
        dims = self._tensor_info(t).dims
        if dims is None or any(d < 0 for d in dims):
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "the shape has unknown dimensions")
        count = 1
        for d in dims:
            count *= d
        return self._set(out, count)

    def _release_owned(self, t: Any, kind: type, what: str) -> None:
        if address(t) == 0:
            return
        self.s.get(t, kind, what)
        if self.s.host.is_host_owned(t):
            from .api_table import Misuse

            raise Misuse(f"Release of a {what} owned by the host (it belongs to a graph or value)")
        self.h.drop(t)

    def ReleaseTensorTypeAndShapeInfo(self, t: Any) -> None:
        self._release_owned(t, TensorTypeAndShapeInfo, "tensor type-and-shape info")

    def ReleaseTypeInfo(self, t: Any) -> None:
        info = self.h.lookup(t, TypeInfo)
        self._release_owned(t, TypeInfo, "type info")
        if info is not None and info.tensor is not None and info.tensor.ptr != ffi.NULL:
            self.s.host.release_handle(info.tensor.ptr)  # the plugin's copy: its tensor part goes with it

    # -- external initializers (ORT 1.23+) --------------------------------------------------------------
    def _external(self, ptr: Any) -> ExternalInitializerInfo:
        return self.s.get(ptr, ExternalInitializerInfo, "external initializer info")

    def ValueInfo_GetExternalInitializerInfo(self, v: Any, out: Any) -> Any:
        # a copy the plugin owns (ReleaseExternalInitializerInfo); NULL for data inside the model
        ext = self._vi(v).external
        if ext is None:
            return self._set(out, ffi.NULL)
        info = ExternalInitializerInfo(ext.path, ext.offset, ext.size)
        info.ptr = self.h.issue_for_plugin(info, "OrtExternalInitializerInfo*")
        return self._set(out, info.ptr)

    def ReleaseExternalInitializerInfo(self, info: Any) -> None:
        if address(info) != 0:
            self._external(info)
            self.h.drop(info)

    def ExternalInitializerInfo_GetFilePath(self, info: Any) -> Any:
        return self._external(info).c_path

    def ExternalInitializerInfo_GetFileOffset(self, info: Any) -> int:
        return self._external(info).offset

    def ExternalInitializerInfo_GetByteSize(self, info: Any) -> int:
        return self._external(info).size

    # -- model metadata (Graph_GetModelMetadata since 1.23; the getters are the session API's) ----------
    def _metadata(self, ptr: Any) -> ModelMetadata:
        return self.s.get(ptr, ModelMetadata, "model metadata")

    def _allocated(self, allocator: Any, data: bytes) -> Any:
        """``data`` copied into memory from the caller's ``OrtAllocator`` (the caller frees it with it)."""
        if address(allocator) == 0:
            from .api_table import Misuse

            raise Misuse("NULL OrtAllocator")
        p = allocator.Alloc(allocator, max(len(data), 1))
        if p == ffi.NULL:
            raise MemoryError(f"the caller's OrtAllocator failed to allocate {len(data)} bytes")
        ffi.memmove(p, data, len(data))
        return p

    def _string_out(self, allocator: Any, text: str, out: Any) -> Any:
        return self._set(out, ffi.cast("char*", self._allocated(allocator, text.encode() + b"\0")))

    def Graph_GetModelMetadata(self, g: Any, out: Any) -> Any:
        meta = (self._graph(g).metadata or ModelMetadata()).copy()
        meta.ptr = self.h.issue_for_plugin(meta, "OrtModelMetadata*")
        return self._set(out, meta.ptr)

    def ReleaseModelMetadata(self, m: Any) -> None:
        if address(m) != 0:
            self._metadata(m)
            self.h.drop(m)

    def ModelMetadataGetProducerName(self, m: Any, allocator: Any, out: Any) -> Any:
        return self._string_out(allocator, self._metadata(m).producer_name, out)

    def ModelMetadataGetGraphName(self, m: Any, allocator: Any, out: Any) -> Any:
        return self._string_out(allocator, self._metadata(m).graph_name, out)

    def ModelMetadataGetDomain(self, m: Any, allocator: Any, out: Any) -> Any:
        return self._string_out(allocator, self._metadata(m).domain, out)

    def ModelMetadataGetDescription(self, m: Any, allocator: Any, out: Any) -> Any:
        return self._string_out(allocator, self._metadata(m).description, out)

    def ModelMetadataGetGraphDescription(self, m: Any, allocator: Any, out: Any) -> Any:
        return self._string_out(allocator, self._metadata(m).graph_description, out)

    def ModelMetadataLookupCustomMetadataMap(self, m: Any, allocator: Any, key: Any, out: Any) -> Any:
        from .objects import pystr

        value = self._metadata(m).custom.get(pystr(key) or "")
        return self._set(out, ffi.NULL) if value is None else self._string_out(allocator, value, out)

    def ModelMetadataGetVersion(self, m: Any, out: Any) -> Any:
        return self._set(out, self._metadata(m).version)

    def ModelMetadataGetCustomMetadataMapKeys(self, m: Any, allocator: Any, keys: Any, num: Any) -> Any:
        # an array of strings, array and strings each from the caller's allocator; NULL when there are none
        names = list(self._metadata(m).custom)
        num[0] = len(names)
        if not names:
            return self._set(keys, ffi.NULL)
        array = ffi.cast("char**", self._allocated(allocator, bytes(ffi.sizeof("char*") * len(names))))
        for i, name in enumerate(names):
            array[i] = ffi.cast("char*", self._allocated(allocator, name.encode() + b"\0"))
        return self._set(keys, array)
