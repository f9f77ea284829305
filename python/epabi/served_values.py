"""Served ``OrtApi`` tensor and kernel-context functions, and the graph-support part of ``OrtEpApi``.

``OrtValue``s the plugin creates (``CreateTensorAsOrtValue``, ``CreateTensorWithDataAsOrtValue``) are owned by
the plugin until ``ReleaseValue``; values the host hands out (kernel-context inputs/outputs, initializers)
stay owned by the host. Kernel-context outputs are allocated by the host with the requested shape and
the element type the fused node's output has in the graph.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._ffi import ffi
from .errors import OrtErrorCode
from .handles import address
from .objects import MemoryInfo
from .values import ONNX_TO_NUMPY, OrtValue, TensorTypeAndShapeInfo


class KernelContext:
    """``OrtKernelContext`` of one fused-node ``Compute``: input values, lazily created outputs."""

    def __init__(self, inputs: list[OrtValue], input_ptrs: list[Any], output_types: list[int],
                 output_names: list[str], logger: Any, preallocated: dict[int, OrtValue] | None = None,
                 allocator: Any = None) -> None:
        self.inputs = inputs
        self.input_ptrs = input_ptrs  # one handle per use, so concurrent runs never share a handle
        self.output_types = output_types
        self.output_names = output_names
        self.outputs: list[OrtValue | None] = [None] * len(output_types)
        self.output_ptrs: list[Any] = [ffi.NULL] * len(output_types)
        self.preallocated = preallocated or {}  # output index -> a bound value in the memory the EP computes in
        self.allocator = allocator  # DeviceAllocator when outputs live in EP device memory
        self.logger = logger
        self.ptr: Any = ffi.NULL

    def allocator_for(self, index: int) -> Any:
        """The DeviceAllocator output ``index`` is allocated with (None: host memory)."""
        return self.allocator


class NodeComputeContext:
    """``OrtNodeComputeContext`` passed to ``CreateState``: names the fused node."""

    def __init__(self, node_name: str) -> None:
        self.c_name = ffi.new("char[]", node_name.encode())
        self.ptr: Any = ffi.NULL


class ValueApi:
    """Mixin of ``_OrtApiImpl``: needs ``self.s`` (ServedApi) and ``self.h`` (HandleTable)."""

    s: Any
    h: Any

    def _value(self, ptr: Any) -> OrtValue:
        return self.s.get(ptr, OrtValue, "OrtValue")

    def _new_value(self, value: OrtValue, out: Any) -> Any:
        value.ptr = self.h.issue_for_plugin(value, "OrtValue*")
        out[0] = value.ptr
        return ffi.NULL

    def CreateTensorAsOrtValue(self, allocator: Any, shape: Any, n: int, elem: int, out: Any) -> Any:
        dtype = ONNX_TO_NUMPY.get(int(elem))
        if dtype is None:
            return self.s.error(OrtErrorCode.NOT_IMPLEMENTED, f"CreateTensorAsOrtValue: element type {elem} "
                                "is not supported by the epabi host")
        dims = [int(shape[i]) for i in range(n)]
        if any(d < 0 for d in dims):
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"CreateTensorAsOrtValue: negative dimension in {dims}")
        return self._new_value(OrtValue(np.zeros(dims, dtype=dtype)), out)

    def CreateTensorWithDataAsOrtValue(self, info: Any, data: Any, length: int, shape: Any, n: int,
                                       elem: int, out: Any) -> Any:
        self.s.get(info, MemoryInfo, "memory info")
        dtype = ONNX_TO_NUMPY.get(int(elem))
        if dtype is None:
            return self.s.error(OrtErrorCode.NOT_IMPLEMENTED, f"element type {elem} is not supported")
        dims = [int(shape[i]) for i in range(n)]
        need = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
        if any(d < 0 for d in dims) or need > length:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"CreateTensorWithDataAsOrtValue: shape {dims} "
                                f"needs {need} bytes, buffer has {length}")
        array = np.frombuffer(ffi.buffer(data, need), dtype=dtype).reshape(dims) if need else np.zeros(dims, dtype)
        value = OrtValue.__new__(OrtValue)
        OrtValue.__init__(value, array)  # wraps the caller's buffer without copying
        return self._new_value(value, out)

    def ReleaseValue(self, v: Any) -> None:
        if address(v) == 0:
            return
        self._value(v)
        if self.s.host.is_host_owned(v):
            from .api_table import Misuse

            raise Misuse("ReleaseValue on a value owned by the host (kernel-context input/output or initializer)")
        self.h.drop(v)

    def IsTensor(self, v: Any, out: Any) -> Any:
        self._value(v)
        out[0] = 1
        return ffi.NULL

    def GetValueType(self, v: Any, out: Any) -> Any:
        self._value(v)
        out[0] = 1
        return ffi.NULL

    def GetTensorMutableData(self, v: Any, out: Any) -> Any:
        out[0] = self._value(v).c_data()
        return ffi.NULL

    def GetTensorData(self, v: Any, out: Any) -> Any:
        out[0] = self._value(v).c_data()
        return ffi.NULL

    def GetTensorSizeInBytes(self, v: Any, out: Any) -> Any:
        out[0] = self._value(v).nbytes
        return ffi.NULL

    def GetTensorTypeAndShape(self, v: Any, out: Any) -> Any:
        info: TensorTypeAndShapeInfo = self._value(v).type_and_shape()
        info.ptr = self.h.issue_for_plugin(info, "OrtTensorTypeAndShapeInfo*")
        out[0] = info.ptr
        return ffi.NULL

    def GetTensorMemoryInfo(self, v: Any, out: Any) -> Any:
        out[0] = getattr(self._value(v), "memory_info", self.s.host.cpu_memory).ptr
        return ffi.NULL

    # -- kernel context -------------------------------------------------------------------------------
    def _ctx(self, ptr: Any) -> KernelContext:
        return self.s.get(ptr, KernelContext, "kernel context")

    def KernelContext_GetInputCount(self, c: Any, out: Any) -> Any:
        out[0] = len(self._ctx(c).inputs)
        return ffi.NULL

    def KernelContext_GetOutputCount(self, c: Any, out: Any) -> Any:
        out[0] = len(self._ctx(c).outputs)
        return ffi.NULL

    def KernelContext_GetInput(self, c: Any, index: int, out: Any) -> Any:
        ctx = self._ctx(c)
        if not 0 <= index < len(ctx.inputs):
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"KernelContext_GetInput: index {index} out of "
                                f"range [0, {len(ctx.inputs)})")
        out[0] = ctx.input_ptrs[index]
        return ffi.NULL

    def KernelContext_GetOutput(self, c: Any, index: int, dims: Any, n: int, out: Any) -> Any:
        ctx = self._ctx(c)
        if not 0 <= index < len(ctx.outputs):
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"KernelContext_GetOutput: index {index} out of "
                                f"range [0, {len(ctx.outputs)})")
        if not ctx.output_names[index]:  # an optional output the node leaves out: there is none to write
            out[0] = ffi.NULL
            return ffi.NULL
        shape = [int(dims[i]) for i in range(n)]
        if any(d < 0 for d in shape):
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"KernelContext_GetOutput: output "
                                f"'{ctx.output_names[index]}' requested with negative dims {shape}")
        existing = ctx.outputs[index]
        if existing is not None:
            if existing.shape() != shape:
                return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"KernelContext_GetOutput: output "
                                    f"'{ctx.output_names[index]}' was already created with shape {existing.shape()}")
            out[0] = ctx.output_ptrs[index]
            return ffi.NULL
        dtype = ONNX_TO_NUMPY.get(ctx.output_types[index])
        if dtype is None:
            return self.s.error(OrtErrorCode.NOT_IMPLEMENTED, f"output '{ctx.output_names[index]}' has element type "
                                f"{ctx.output_types[index]}, which the epabi host does not allocate")
        target = ctx.preallocated.get(index)
        if target is not None and target.shape() == shape and target.element_type() == ctx.output_types[index]:
            value = target  # a bound output (host or EP device memory): the EP writes straight into it
        elif ctx.allocator_for(index) is not None:
            from .device_memory import DeviceValue

            value = DeviceValue(ctx.allocator_for(index), shape, ctx.output_types[index])
        else:
            value = OrtValue(np.empty(shape, dtype=dtype))
        ctx.outputs[index] = value
        ctx.output_ptrs[index] = self.h.issue(value, "OrtValue*")
        self.s.host.mark_host_owned(ctx.output_ptrs[index])
        out[0] = ctx.output_ptrs[index]
        return ffi.NULL

    def KernelContext_GetPreallocatedOutput(self, c: Any, index: int, out: Any) -> Any:
        """The output value when it already exists: created by ``KernelContext_GetOutput`` before, or bound by the
        caller in the memory the EP computes in (IOBinding), which then becomes the output; NULL otherwise."""
        ctx = self._ctx(c)
        if not 0 <= index < len(ctx.outputs):
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"KernelContext_GetPreallocatedOutput: index {index} "
                                f"out of range [0, {len(ctx.outputs)})")
        if ctx.outputs[index] is None:
            target = ctx.preallocated.get(index)
            if target is None or target.element_type() != ctx.output_types[index]:
                out[0] = ffi.NULL
                return ffi.NULL
            ctx.outputs[index] = target
            ctx.output_ptrs[index] = self.h.issue(target, "OrtValue*")
            self.s.host.mark_host_owned(ctx.output_ptrs[index])
        out[0] = ctx.output_ptrs[index]
        return ffi.NULL

    def KernelContext_GetLogger(self, c: Any, out: Any) -> Any:
        out[0] = self._ctx(c).logger.ptr
        return ffi.NULL


class GraphSupportInfo:
    """``OrtEpGraphSupportInfo``: what GetCapability claimed: groups of nodes to fuse, and single nodes a
    kernel-registry EP runs with its own kernels (found with ``kernel_lookup``, the session's registry search)."""

    def __init__(self, graph: Any, kernel_lookup: Any = None) -> None:
        self.graph = graph
        self.groups: list[tuple[list[Any], bool]] = []  # (nodes, drop_constant_initializers)
        self.single_nodes: list[Any] = []
        self.kernel_lookup = kernel_lookup  # NodeView -> KernelDef | None; None: the EP has no kernel registry
        self.claimed: set[int] = set()
        self.ptr: Any = ffi.NULL


class EpGraphApi:
    """Mixin of ``_OrtEpApiImpl`` for GetCapability/Compile support."""

    s: Any
    h: Any

    def EpGraphSupportInfo_AddNodesToFuse(self, info: Any, nodes: Any, n: int, options: Any) -> Any:
        from .graph_view import NodeView

        support = self.s.get(info, GraphSupportInfo, "graph support info")
        if n == 0:
            return self.s.error(OrtErrorCode.INVALID_ARGUMENT, "EpGraphSupportInfo_AddNodesToFuse: no nodes given")
        group = []
        for i in range(n):
            node = self.s.get(nodes[i], NodeView, f"node {i}")
            if node.graph is not support.graph:
                return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"node '{node.name}' is not in the graph given "
                                    "to GetCapability")
            if node.id in support.claimed:
                return self.s.error(OrtErrorCode.INVALID_ARGUMENT, f"node '{node.name}' was already claimed")
            group.append(node)
        drop = False
        if address(options) != 0:
            drop = bool(options.drop_constant_initializers)
        for node in group:
            support.claimed.add(node.id)
        support.groups.append((group, drop))
        return ffi.NULL

    def NodeComputeContext_NodeName(self, c: Any) -> Any:
        return self.s.get(c, NodeComputeContext, "node compute context").c_name

    def Value_GetMemoryDevice(self, v: Any) -> Any:
        value = self.s.get(v, OrtValue, "OrtValue")
        return getattr(value, "memory_info", self.s.host.cpu_memory).device_ptr
