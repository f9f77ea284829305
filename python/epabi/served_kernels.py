"""Served functions for kernel-registry EPs: the kernel registry and definition builder (``OrtEpApi`` 18-48),
``OrtKernelInfo`` getters and the kernel-context members that only kernels use (``OrtApi``), sync streams.

Semantics follow ONNX Runtime 1.24+: a missing attribute is ``ORT_FAIL`` ("No attribute with name..."), a wrong
attribute type ``ORT_FAIL``; strings and arrays are copied into caller buffers with ORT's size protocol (``*size``
in/out; a NULL buffer asks for the size; a short buffer is ``ORT_INVALID_ARGUMENT`` with ``*size`` set); type
infos, key-value pairs, kernel-info copies and allocators handed out are owned by the caller and released with
the matching ``Release*`` (``ReleaseAllocator``: :mod:`epabi.served_allocators`); kernel definitions, registries
and builders belong to the plugin until it releases them (handles of plugin lifetime, whichever host is alive),
and the host keeps its own copy of a registry a session uses. ``OrtDataType``s are process objects, one per
element type.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from ._ffi import ffi
from .errors import OrtErrorCode
from .handles import PROCESS_HANDLES, address
from .kernel_registry import DataType, KernelDef, KernelDefBuilder, KernelRegistry, default_attribute
from .objects import KeyValuePairs, MemoryInfo, pystr
from .values import OrtValue, TensorTypeAndShapeInfo, TypeInfo

#: onnx.AttributeProto.AttributeType of each attribute kind a getter reads.
_ONNX_ATTR = {k: getattr(onnx.AttributeProto, k) for k in ("INT", "INTS", "FLOAT", "FLOATS", "STRING", "STRINGS",
                                                          "TENSOR")}


_shape_lock = threading.Lock()
_shapes: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # value -> its int64_t[] dims


def _shape_ref(value: OrtValue) -> Any:
    """A C copy of ``value``'s dims that lives as long as the value (what a shape reference points at)."""
    with _shape_lock:
        dims = _shapes.get(value)
        if dims is None or list(dims) != value.shape():
            dims = ffi.new("int64_t[]", value.shape() or [0])
            _shapes[value] = dims
        return dims


_data_types_lock = threading.Lock()
_data_types: dict[int, DataType] = {}


def _data_type(elem: int) -> DataType:
    """The process's one ``OrtDataType`` of a tensor element type, like ORT's singletons: a process handle that
    every host's plugins may keep."""
    with _data_types_lock:
        data_type = _data_types.get(elem)
        if data_type is None:
            data_type = _data_types[elem] = DataType(elem)
            data_type.ptr = PROCESS_HANDLES.issue(data_type, "OrtDataType*")
        return data_type


def _misuse(message: str) -> Exception:
    from .api_table import Misuse

    return Misuse(message)


class KernelOrtApi:
    """Mixin of ``_OrtApiImpl`` (``OrtApi`` members): needs ``self.s`` (ServedApi) and ``self.h`` (HandleTable)."""

    s: Any
    h: Any

    # -- kernel info ----------------------------------------------------------------------------------
    def _info(self, ptr: Any) -> Any:
        from .kernel_nodes import KernelInfo

        return self.s.get(ptr, KernelInfo, "kernel info")

    def _copy_out(self, what: str, text: str, out: Any, size: Any) -> Any:
        """ORT's string protocol: NULL ``out`` asks for the size (with the NUL), a short buffer is an error."""
        data = text.encode() + b"\0"
        if address(size) == 0:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"{what}: size is NULL")
        capacity = int(size[0])
        size[0] = len(data)
        if address(out) == 0:
            return ffi.NULL
        if capacity < len(data):
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"{what}: Result buffer is not large enough "
                                f"({capacity} bytes, {len(data)} needed)")
        ffi.memmove(out, data, len(data))
        return ffi.NULL

    def _attribute(self, info: Any, name: Any, kind: str) -> Any:
        """The node attribute ``name`` of ONNX type ``kind``, or an error status (``ORT_FAIL``, as ORT)."""
        key = pystr(name) or ""
        node = self._info(info).node
        attr = next((a for a in node.proto.attribute if a.name == key), None) or default_attribute(node, key)
        if attr is None:
            return None, self.s.error(OrtErrorCode.FAIL, f"No attribute with name:'{key}'is defined.")
        if attr.type != _ONNX_ATTR[kind]:
            return None, self.s.error(OrtErrorCode.FAIL, f"Attribute name and type don't match for '{key}'")
        return attr, ffi.NULL

    def KernelInfoGetAttribute_float(self, info: Any, name: Any, out: Any) -> Any:
        attr, status = self._attribute(info, name, "FLOAT")
        if attr is not None:
            out[0] = attr.f
        return status

    def KernelInfoGetAttribute_int64(self, info: Any, name: Any, out: Any) -> Any:
        attr, status = self._attribute(info, name, "INT")
        if attr is not None:
            out[0] = attr.i
        return status

    def KernelInfoGetAttribute_string(self, info: Any, name: Any, out: Any, size: Any) -> Any:
        attr, status = self._attribute(info, name, "STRING")
        if attr is None:
            return status
        return self._copy_out("KernelInfoGetAttribute_string", attr.s.decode("utf-8", "replace"), out, size)

    def _array(self, info: Any, name: Any, kind: str, items: str, ctype: str, out: Any, size: Any) -> Any:
        attr, status = self._attribute(info, name, kind)
        if attr is None:
            return status
        values = list(getattr(attr, items))
        if address(size) == 0:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"attribute '{attr.name}': size is NULL")
        capacity = int(size[0])
        size[0] = len(values)
        if address(out) == 0:
            return ffi.NULL
        if capacity < len(values):
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"attribute '{attr.name}': Result buffer is not large "
                                f"enough ({capacity} entries, {len(values)} needed)")
        if values:
            ffi.memmove(out, ffi.new(f"{ctype}[]", values), len(values) * ffi.sizeof(ctype))
        return ffi.NULL

    def KernelInfoGetAttributeArray_float(self, info: Any, name: Any, out: Any, size: Any) -> Any:
        return self._array(info, name, "FLOATS", "floats", "float", out, size)

    def KernelInfoGetAttributeArray_int64(self, info: Any, name: Any, out: Any, size: Any) -> Any:
        return self._array(info, name, "INTS", "ints", "int64_t", out, size)

    def KernelInfoGetAttributeArray_string(self, info: Any, name: Any, allocator: Any, out: Any, size: Any) -> Any:
        attr, status = self._attribute(info, name, "STRINGS")
        if attr is None:
            return status
        if address(allocator) == 0:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "KernelInfoGetAttributeArray_string: NULL allocator")
        strings = [s + b"\0" for s in attr.strings]
        # the caller frees every string and the array with this allocator, so all of it comes from it
        array = allocator.Alloc(allocator, max(1, len(strings)) * ffi.sizeof("char*"))
        if array == ffi.NULL:
            return self.s.error(OrtErrorCode.FAIL, "KernelInfoGetAttributeArray_string: the allocator failed")
        table = ffi.cast("char**", array)
        for i, data in enumerate(strings):
            buf = allocator.Alloc(allocator, len(data))
            if buf == ffi.NULL:
                for j in range(i):
                    allocator.Free(allocator, table[j])
                allocator.Free(allocator, array)
                return self.s.error(OrtErrorCode.FAIL, "KernelInfoGetAttributeArray_string: the allocator failed")
            ffi.memmove(buf, data, len(data))
            table[i] = ffi.cast("char*", buf)
        out[0] = table
        size[0] = len(strings)
        return ffi.NULL

    def KernelInfoGetAttribute_tensor(self, info: Any, name: Any, allocator: Any, out: Any) -> Any:
        attr, status = self._attribute(info, name, "TENSOR")
        if attr is None:
            return status
        value = OrtValue(np.ascontiguousarray(numpy_helper.to_array(attr.t)))
        value.ptr = self.h.issue_for_plugin(value, "OrtValue*")
        out[0] = value.ptr  # the caller releases it with ReleaseValue
        return ffi.NULL

    def KernelInfo_GetInputCount(self, info: Any, out: Any) -> Any:
        out[0] = len(self._info(info).node.inputs)
        return ffi.NULL

    def KernelInfo_GetOutputCount(self, info: Any, out: Any) -> Any:
        out[0] = len(self._info(info).node.outputs)
        return ffi.NULL

    def _arg(self, info: Any, index: int, outputs: bool) -> tuple[Any, Any]:
        node = self._info(info).node
        args = node.outputs if outputs else node.inputs
        if not 0 <= index < len(args):
            what = "output" if outputs else "input"
            return None, self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"node '{node.name}' has {len(args)} {what}s; "
                                      f"index {index} is out of range")
        return args[index], ffi.NULL

    def KernelInfo_GetInputName(self, info: Any, index: int, out: Any, size: Any) -> Any:
        value, status = self._arg(info, index, False)
        return status if status != ffi.NULL else self._copy_out("KernelInfo_GetInputName",
                                                                "" if value is None else value.name, out, size)

    def KernelInfo_GetOutputName(self, info: Any, index: int, out: Any, size: Any) -> Any:
        value, status = self._arg(info, index, True)
        return status if status != ffi.NULL else self._copy_out("KernelInfo_GetOutputName",
                                                                "" if value is None else value.name, out, size)

    def _type_info(self, info: Any, index: int, outputs: bool, out: Any) -> Any:
        value, status = self._arg(info, index, outputs)
        if status != ffi.NULL:
            return status
        if value is None or value.type_info is None:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"{'output' if outputs else 'input'} {index} has no "
                                "type information")
        src = value.type_info
        tensor = None
        if src.tensor is not None:
            tensor = TensorTypeAndShapeInfo(src.tensor.elem_type, None if src.tensor.dims is None else
                                            list(src.tensor.dims), list(src.tensor.symbolic))
        copy = TypeInfo(src.onnx_type, tensor)
        copy.ptr = self.h.issue_for_plugin(copy, "OrtTypeInfo*")
        if tensor is not None:  # part of the type info: released with it, never on its own
            tensor.ptr = self.h.issue_for_plugin(tensor, "OrtTensorTypeAndShapeInfo*")
            self.s.host.mark_host_owned(tensor.ptr)
        out[0] = copy.ptr
        return ffi.NULL

    def KernelInfo_GetInputTypeInfo(self, info: Any, index: int, out: Any) -> Any:
        return self._type_info(info, index, False, out)

    def KernelInfo_GetOutputTypeInfo(self, info: Any, index: int, out: Any) -> Any:
        return self._type_info(info, index, True, out)

    def KernelInfo_GetNodeName(self, info: Any, out: Any, size: Any) -> Any:
        return self._copy_out("KernelInfo_GetNodeName", self._info(info).node.name, out, size)

    def KernelInfo_GetLogger(self, info: Any, out: Any) -> Any:
        out[0] = self._info(info).logger.ptr
        return ffi.NULL

    def KernelInfoGetConstantInput_tensor(self, info: Any, index: int, is_constant: Any, out: Any) -> Any:
        value = self._info(info).constant_input(int(index))
        is_constant[0] = int(value is not None)
        out[0] = ffi.NULL if value is None else self._lend(value)
        return ffi.NULL

    def _lend(self, value: OrtValue) -> Any:
        """A host-owned handle for a value the host keeps (the plugin may read it but never release it)."""
        if value.ptr == ffi.NULL or self.h.lookup(value.ptr, OrtValue) is not value:
            value.ptr = self.h.issue(value, "OrtValue*")
            self.s.host.mark_host_owned(value.ptr)
        return value.ptr

    def KernelInfoGetAllocator(self, info: Any, mem_type: int, out: Any) -> Any:
        out[0] = self._info(info).allocator(int(mem_type)).ptr
        return ffi.NULL

    def KernelInfo_GetConfigEntries(self, info: Any, out: Any) -> Any:
        out[0] = self.s.issue_kvp(KeyValuePairs(self._info(info).config))
        return ffi.NULL

    def KernelInfo_GetOperatorDomain(self, info: Any, out: Any, size: Any) -> Any:
        return self._copy_out("KernelInfo_GetOperatorDomain", self._info(info).node.domain or "", out, size)

    def KernelInfo_GetOperatorType(self, info: Any, out: Any, size: Any) -> Any:
        return self._copy_out("KernelInfo_GetOperatorType", self._info(info).node.op_type, out, size)

    def KernelInfo_GetOperatorSinceVersion(self, info: Any, out: Any) -> Any:
        out[0] = self._info(info).node.since_version
        return ffi.NULL

    def CopyKernelInfo(self, info: Any, out: Any) -> Any:
        from .kernel_nodes import KernelInfo

        src = self._info(info)
        copy = KernelInfo(src.node, src.kernel_def, src.nodes)
        copy.ptr = self.h.issue_for_plugin(copy, "OrtKernelInfo*")
        out[0] = copy.ptr
        return ffi.NULL

    def ReleaseKernelInfo(self, info: Any) -> None:
        if address(info) == 0:
            return
        obj = self._info(info)
        if obj.nodes.owns_info(obj):
            raise _misuse("ReleaseKernelInfo on the kernel info the host passed to the create function")
        self.h.drop(info)

    def GetTensorElementTypeAndShapeDataReference(self, v: Any, elem: Any, shape: Any, count: Any) -> Any:
        value = self.s.get(v, OrtValue, "OrtValue")
        elem[0] = value.element_type()
        shape[0] = _shape_ref(value)
        count[0] = len(value.shape())
        return ffi.NULL

    # -- kernel context -------------------------------------------------------------------------------
    def _kctx(self, ptr: Any) -> Any:
        from .served_values import KernelContext

        return self.s.get(ptr, KernelContext, "kernel context")

    def KernelContext_GetGPUComputeStream(self, c: Any, out: Any) -> Any:
        stream = getattr(self._kctx(c), "stream", None)
        out[0] = ffi.NULL if stream is None else stream.handle()
        return ffi.NULL

    def KernelContext_GetSyncStream(self, c: Any, out: Any) -> Any:
        stream = getattr(self._kctx(c), "stream", None)
        out[0] = ffi.NULL if stream is None else stream.ptr
        return ffi.NULL

    def KernelContext_GetAllocator(self, c: Any, mem_info: Any, out: Any) -> Any:
        ctx = self._kctx(c)
        info = self.s.get(mem_info, MemoryInfo, "memory info")
        nodes = getattr(ctx, "nodes", None)
        if nodes is None:  # a fused node's context: as before kernel-registry EPs were served
            self.s.host.conduct.limitation("OrtApi::KernelContext_GetAllocator is not implemented by the epabi host "
                                           "for fused nodes")
            return self.s.error(OrtErrorCode.NOT_IMPLEMENTED, "KernelContext_GetAllocator is not implemented by the "
                                "epabi host for fused nodes")
        device = nodes.allocator
        on_device = device is not None and info.device == device.memory_info.device
        if not on_device and info.device != self.s.host.cpu_memory.device:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"KernelContext_GetAllocator: no allocator for memory "
                                f"'{info.name}' in this session")
        out[0] = nodes.new_allocator(on_device).ptr
        return ffi.NULL

    def KernelContext_ParallelFor(self, c: Any, fn: Any, total: int, num_batch: int, usr_data: Any) -> Any:
        self._kctx(c)
        for i in range(int(total)):  # the host runs no thread pool: in order, on the calling thread
            fn(usr_data, i)
        return ffi.NULL

    # -- sync streams ---------------------------------------------------------------------------------
    def SyncStream_GetHandle(self, stream: Any) -> Any:
        from .kernel_nodes import SyncStream

        return self.s.get(stream, SyncStream, "sync stream").handle()


class KernelEpApi:
    """Mixin of ``_OrtEpApiImpl`` (``OrtEpApi`` members): needs ``self.s`` (ServedApi) and ``self.h``."""

    s: Any
    h: Any

    def _builder(self, ptr: Any) -> KernelDefBuilder:
        return self.s.get(ptr, KernelDefBuilder, "kernel definition builder")

    def _kdef(self, ptr: Any) -> KernelDef:
        return self.s.get(ptr, KernelDef, "kernel definition")

    def _invalid(self, message: str) -> Any:
        return self.s.error(OrtErrorCode.INVALID_ARGUMENT, message)

    # registries
    def CreateKernelRegistry(self, out: Any) -> Any:
        registry = KernelRegistry()
        registry.ptr = self.h.issue_for_plugin(registry, "OrtKernelRegistry*")
        out[0] = registry.ptr
        return ffi.NULL

    def ReleaseKernelRegistry(self, registry: Any) -> None:
        if address(registry) != 0:
            self.s.get(registry, KernelRegistry, "kernel registry")
            self.h.drop(registry)

    def KernelRegistry_AddKernel(self, registry: Any, kernel_def: Any, create_func: Any, state: Any) -> Any:
        if address(registry) == 0:
            return self._invalid("Must specify a non-null OrtKernelRegistry")
        if address(kernel_def) == 0:
            return self._invalid("Must specify a non-null OrtKernelDef")
        if address(create_func) == 0:
            return self._invalid("Must specify a non-null OrtKernelCreateFunc")
        refusal = self.s.get(registry, KernelRegistry, "kernel registry").add(self._kdef(kernel_def), create_func,
                                                                            state)
        return ffi.NULL if refusal is None else self.s.error(OrtErrorCode.FAIL, refusal)

    # definition builders
    def CreateKernelDefBuilder(self, out: Any) -> Any:
        builder = KernelDefBuilder()
        builder.ptr = self.h.issue_for_plugin(builder, "OrtKernelDefBuilder*")
        out[0] = builder.ptr
        return ffi.NULL

    def ReleaseKernelDefBuilder(self, builder: Any) -> None:
        if address(builder) != 0:
            self._builder(builder)
            self.h.drop(builder)

    def KernelDefBuilder_SetOperatorType(self, builder: Any, op_type: Any) -> Any:
        self._builder(builder).op_type = pystr(op_type) or ""
        return ffi.NULL

    def KernelDefBuilder_SetDomain(self, builder: Any, domain: Any) -> Any:
        self._builder(builder).domain = pystr(domain) or ""
        return ffi.NULL

    def KernelDefBuilder_SetSinceVersion(self, builder: Any, start: int, end: int) -> Any:
        b = self._builder(builder)
        if start < 1:
            return self._invalid("Start version must be >= 1")
        if end < start:
            return self._invalid("End version must be >= to the start version")
        b.since = (int(start), int(end))
        return ffi.NULL

    def KernelDefBuilder_SetExecutionProvider(self, builder: Any, ep_name: Any) -> Any:
        self._builder(builder).ep_name = pystr(ep_name) or ""
        return ffi.NULL

    def KernelDefBuilder_SetInputMemType(self, builder: Any, index: int, mem_type: int) -> Any:
        self._builder(builder).input_mem[int(index)] = int(mem_type)
        return ffi.NULL

    def KernelDefBuilder_SetOutputMemType(self, builder: Any, index: int, mem_type: int) -> Any:
        self._builder(builder).output_mem[int(index)] = int(mem_type)
        return ffi.NULL

    def KernelDefBuilder_AddTypeConstraint(self, builder: Any, name: Any, types: Any, n: int) -> Any:
        b = self._builder(builder)
        if n == 0:
            return self._invalid("Must specify at least one OrtDataType instance")
        if address(types) == 0:
            return self._invalid("Must specify a valid array of OrtDataType instances")
        if address(name) == 0:
            return self._invalid("Must specify a valid name for a kernel definition's type constraint")
        b.type_constraints[pystr(name) or ""] = [self.s.get(types[i], DataType, f"data type {i}").elem_type
                                                for i in range(n)]
        return ffi.NULL

    def _aliases(self, builder: Any, inputs: Any, outputs: Any, n: int, mutable: bool) -> Any:
        b = self._builder(builder)
        suffix = " (mutable)" if mutable else ""
        if n == 0:
            return self._invalid(f"Must specify at least one input/output alias{suffix}")
        if address(inputs) == 0:
            return self._invalid(f"Must specify a valid array of input indices to alias{suffix}")
        if address(outputs) == 0:
            return self._invalid(f"Must specify a valid array of output indices to alias{suffix}")
        pairs = [(int(inputs[i]), int(outputs[i])) for i in range(n)]
        (b.mutable_aliases if mutable else b.aliases).extend(pairs)
        return ffi.NULL

    def KernelDefBuilder_AddInputOutputAliases(self, builder: Any, inputs: Any, outputs: Any, n: int) -> Any:
        return self._aliases(builder, inputs, outputs, n, False)

    def KernelDefBuilder_AddInputOutputMutableAliases(self, builder: Any, inputs: Any, outputs: Any, n: int) -> Any:
        return self._aliases(builder, inputs, outputs, n, True)

    def KernelDefBuilder_Build(self, builder: Any, out: Any) -> Any:
        kernel_def = self._builder(builder).build()
        kernel_def.ptr = self.h.issue_for_plugin(kernel_def, "OrtKernelDef*")
        out[0] = kernel_def.ptr
        return ffi.NULL

    # definitions
    def ReleaseKernelDef(self, kernel_def: Any) -> None:
        if address(kernel_def) != 0:
            self._kdef(kernel_def)
            self.h.drop(kernel_def)

    def KernelDef_GetOperatorType(self, kernel_def: Any) -> Any:
        return self._kdef(kernel_def).c_op_type

    def KernelDef_GetDomain(self, kernel_def: Any) -> Any:
        return self._kdef(kernel_def).c_domain

    def KernelDef_GetExecutionProvider(self, kernel_def: Any) -> Any:
        return self._kdef(kernel_def).c_ep_name

    def KernelDef_GetSinceVersion(self, kernel_def: Any, start: Any, end: Any) -> Any:
        if address(kernel_def) == 0:
            return self._invalid("Must specify a valid non-null OrtKernelDef")
        if address(start) == 0:
            return self._invalid("Must specify a non-null `start_version` output parameter")
        if address(end) == 0:
            return self._invalid("Must specify a non-null `end_version` output parameter")
        start[0], end[0] = self._kdef(kernel_def).since
        return ffi.NULL

    def _mem_type(self, kernel_def: Any, index: int, out: Any, outputs: bool) -> Any:
        if address(kernel_def) == 0:
            return self._invalid("Must specify a valid non-null OrtKernelDef")
        if address(out) == 0:
            return self._invalid("Must specify a non-null `mem_type` output parameter")
        kdef = self._kdef(kernel_def)
        out[0] = kdef.output_mem_type(int(index)) if outputs else kdef.input_mem_type(int(index))
        return ffi.NULL

    def KernelDef_GetInputMemType(self, kernel_def: Any, index: int, out: Any) -> Any:
        return self._mem_type(kernel_def, index, out, False)

    def KernelDef_GetOutputMemType(self, kernel_def: Any, index: int, out: Any) -> Any:
        return self._mem_type(kernel_def, index, out, True)

    def GetTensorDataType(self, elem_type: int, out: Any) -> Any:
        from .values import ONNX_TO_NUMPY

        elem = int(elem_type)
        if elem not in ONNX_TO_NUMPY and elem != 8:  # strings have no numpy dtype but are tensor types
            return self._invalid(f"GetTensorDataType: {elem} is not a tensor element type the epabi host knows")
        out[0] = _data_type(elem).ptr
        return ffi.NULL

    # graph support
    def EpGraphSupportInfo_LookUpKernel(self, info: Any, node: Any, out: Any) -> Any:
        from .graph_view import NodeView
        from .served_values import GraphSupportInfo

        if address(out) == 0:
            return self._invalid("Must specify a non-null OrtKernelDef output parameter")
        out[0] = ffi.NULL
        if address(info) == 0:
            return self._invalid("Must specify a valid non-null OrtEpGraphSupportInfo instance")
        if address(node) == 0:
            return self._invalid("Must specify a valid non-null OrtNode instance")
        support = self.s.get(info, GraphSupportInfo, "graph support info")
        view = self.s.get(node, NodeView, "node")
        kernel_def = None if support.kernel_lookup is None else support.kernel_lookup(view)
        if kernel_def is not None:
            out[0] = self._lend_def(kernel_def)
        return ffi.NULL

    def _lend_def(self, kernel_def: KernelDef) -> Any:
        """The session's copy of a definition, handed out as the plugin's own (never released by it)."""
        if kernel_def.ptr == ffi.NULL or self.h.lookup(kernel_def.ptr, KernelDef) is not kernel_def:
            kernel_def.ptr = self.h.issue(kernel_def, "OrtKernelDef*")
            self.s.host.mark_host_owned(kernel_def.ptr)
        return kernel_def.ptr

    def EpGraphSupportInfo_AddSingleNode(self, info: Any, node: Any) -> Any:
        from .graph_view import NodeView
        from .served_values import GraphSupportInfo

        if address(info) == 0:
            return self._invalid("Must specify a valid OrtGraph instance")
        if address(node) == 0:
            return self._invalid("Must specify a non-null OrtNode")
        support = self.s.get(info, GraphSupportInfo, "graph support info")
        view = self.s.get(node, NodeView, "node")
        if view.graph is not support.graph:
            return self._invalid(f"node '{view.name}' is not in the graph given to GetCapability")
        if view.id in support.claimed:
            return self._invalid(f"node '{view.name}' was already claimed")
        support.claimed.add(view.id)
        support.single_nodes.append(view)
        return ffi.NULL

    def SharedPrePackedWeightCache_StoreWeightData(self, cache: Any, ptrs: Any, sizes: Any, n: int) -> Any:
        from .kernel_nodes import WeightCache

        if address(cache) == 0:
            return self._invalid("Must specify a valid OrtPrePackedWeightsCache instance")
        if address(ptrs) == 0:
            return self._invalid("Must specify a valid array of buffer data pointers")
        if address(sizes) == 0:
            return self._invalid("Must specify a valid array of buffer data sizes")
        if n == 0:
            return self._invalid("Must specify at least one weight data buffer")
        weights = self.s.get(cache, WeightCache, "shared pre-packed weight cache")
        weights.buffers = [(ptrs[i], int(sizes[i])) for i in range(n)]  # the host owns them from here on
        return ffi.NULL

    def KernelInfo_GetEp(self, info: Any, out: Any) -> Any:
        from .kernel_nodes import KernelInfo

        out[0] = self.s.get(info, KernelInfo, "kernel info").ep.ptr
        return ffi.NULL

    def ReleaseKernelImpl(self, impl: Any) -> None:
        if address(impl) != 0:  # the host makes none (no CreateIfKernel/Loop/Scan), so nothing is its to free
            raise _misuse(f"ReleaseKernelImpl on {hex(address(impl))}, which is not an OrtKernelImpl the host made")

    # sync streams
    def _stream(self, ptr: Any) -> Any:
        from .kernel_nodes import SyncStream

        return self.s.get(ptr, SyncStream, "sync stream")

    def SyncStream_GetImpl(self, stream: Any) -> Any:
        return self._stream(stream).impl

    def SyncStream_GetSyncId(self, stream: Any) -> int:
        self._stream(stream)
        return 0  # the host never records cross-stream waits

    def GetSyncIdForLastWaitOnSyncStream(self, producer: Any, consumer: Any) -> int:
        return 0
