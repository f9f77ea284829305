"""The per-node execution path of a kernel-registry plugin EP, as ONNX Runtime's core runs one.

Session creation (the session drives it): right after ``CreateEp``, ``OrtEp::GetKernelRegistry`` (plugin version
>= 24) gives a registry the host copies; ``GetCapability`` claims nodes one by one (``EpGraphSupportInfo_AddSingleNode``
after ``EpGraphSupportInfo_LookUpKernel`` against that copy). For the claimed nodes the host then, in ORT's order:
places the constant initializers they read in the memory their kernel definitions ask for (EP device memory, from
the EP device's read-only allocator when it has one, through the plugin's data transfer; host memory for the CPU
memory types), calls each kernel's ``OrtKernelCreateFunc`` with an ``OrtKernelInfo``, and offers each constant
initializer to ``OrtKernelImpl::PrePackWeight`` (with a shared weight cache when the allocator is host memory).

A run calls ``Compute`` per node with an ``OrtKernelContext``: inputs in the memory the definition asks for,
outputs allocated on ``KernelContext_GetOutput`` in EP device memory (the CPU memory types: host memory), the
session's sync stream (made at the first run) when the factory is stream aware. A value crosses between host and
device memory where a node needs it on the other side: through the plugin's own ``MemcpyFromHost``/``MemcpyToHost``
kernels when its registry has them and ORT would put a Memcpy node there (between nodes, and for a graph input that
CPU nodes read too), else through the plugin's data transfer; without a ``MemcpyFromHost`` kernel, values from the
CPU side reach the kernel in host memory, as ORT's CPU-EP fallback Memcpy leaves them.

``close`` releases the stream, every kernel (``OrtKernelImpl::Release``), pre-packed buffers and device copies.
Runs may call ``run`` concurrently only when the EP supports concurrent runs (the session serialises otherwise).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from ._ffi import ffi, member_since
from .device_memory import DeviceAllocator, DeviceValue
from .errors import ConductError, OrtErrorCode, OrtStatusError
from .gating import readable_members
from .graph_view import GraphView, NodeView
from .host_allocators import HostAllocator
from .kernel_registry import MEM_CPU_INPUT, MEM_CPU_OUTPUT, KernelDef, KernelEntry, KernelRegistry
from .objects import OrtAllocatorType, OrtDeviceMemoryType
from .served_values import KernelContext
from .values import OrtValue, as_ortvalue

if TYPE_CHECKING:
    from .device_memory import DataTransfer
    from .ep import Ep

#: ``OrtEp::GetKernelRegistry``: the host reads it only from a plugin that declares this API or newer.
_KERNEL_SINCE = member_since("OrtEp")["GetKernelRegistry"]


class KernelInfo:
    """``OrtKernelInfo`` of one node: the node, its kernel definition, and what the session lends its kernel."""

    def __init__(self, node: NodeView, kernel_def: KernelDef, nodes: KernelNodes) -> None:
        self.node = node
        self.kernel_def = kernel_def
        self.nodes = nodes
        self.ptr: Any = ffi.NULL

    @property
    def ep(self) -> Ep:
        return self.nodes.ep

    @property
    def logger(self) -> Any:
        return self.nodes.ep.logger

    @property
    def config(self) -> dict[str, str]:
        return dict(self.nodes.ep.session_options.config)

    def constant_input(self, index: int) -> OrtValue | None:
        """The constant initializer the node reads at ``index``, in the memory its kernel reads it from."""
        if not 0 <= index < len(self.node.inputs):
            return None
        value = self.node.inputs[index]
        if value is None or value.initializer is None or not value.constant_initializer:
            return None
        if self.nodes.device_input(self.kernel_def, index):
            return self.nodes.device_initializer(value.name)
        return value.initializer

    def allocator(self, mem_type: int) -> HostAllocator:
        """A new allocator for the kernel's device memory (``OrtMemTypeDefault``) or host memory (CPU types)."""
        return self.nodes.new_allocator(on_device=mem_type not in (MEM_CPU_INPUT, MEM_CPU_OUTPUT))


class NodeKernelContext(KernelContext):
    """``OrtKernelContext`` of one kernel ``Compute``: each output placed as the kernel definition says."""

    def __init__(self, inputs: list[Any], input_ptrs: list[Any], output_types: list[int], output_names: list[str],
                 logger: Any, output_allocators: list[Any], stream: Any, nodes: KernelNodes) -> None:
        super().__init__(inputs, input_ptrs, output_types, output_names, logger)
        self.output_allocators = output_allocators
        self.stream = stream
        self.nodes = nodes

    def allocator_for(self, index: int) -> Any:
        return self.output_allocators[index]


class SyncStream:
    """``OrtSyncStream``: the host's wrapper of a plugin ``OrtSyncStreamImpl`` for the EP's device memory."""

    def __init__(self, impl: Any, memory_device: Any) -> None:
        self.impl = impl
        self.memory_device = memory_device
        self.ptr: Any = ffi.NULL

    def handle(self) -> Any:
        return ffi.NULL if self.impl.GetHandle == ffi.NULL else self.impl.GetHandle(self.impl)


class WeightCache:
    """``OrtSharedPrePackedWeightCache``: the buffers a kernel stored while pre-packing (the host owns them)."""

    def __init__(self) -> None:
        self.buffers: list[tuple[Any, int]] = []  # (pointer from the allocator given, size in bytes)
        self.ptr: Any = ffi.NULL


class KernelNode:
    """One node the EP runs with its own kernel: definition, create function, the kernel once created."""

    def __init__(self, node: NodeView, entry: KernelEntry) -> None:
        self.node = node
        self.entry = entry
        self.kernel_def = entry.kernel_def
        self.info: KernelInfo | None = None
        self.impl: Any = ffi.NULL


class KernelNodes:
    """The kernel-registry part of one session: the EP's registry copy, its kernels, copies and stream.

    Made by :meth:`for_ep` right after ``CreateEp``; :meth:`create` makes the kernels of the claimed nodes;
    :meth:`run` computes one; :meth:`close` releases everything (idempotent).
    """

    def __init__(self, ep: Ep, registry: KernelRegistry) -> None:
        self.ep = ep
        self.host = ep.host
        self.registry = registry
        self.nodes: dict[int, KernelNode] = {}
        self.allocator: DeviceAllocator | None = None
        self.initializer_allocator: DeviceAllocator | None = None  # the EP device's READ_ONLY allocator, if any
        self.transfer: DataTransfer | None = None
        self.stream: SyncStream | None = None
        self._memcpy: dict[tuple[str, str], KernelNode] = {}  # (direction, value) -> the Memcpy kernel ORT places
        self._host_handed: set[str] = set()  # values a kernel gets in host memory though it asks for device memory
        self._packed_away: set[str] = set()  # initializers ORT frees once kernels pre-packed them
        self._shared_weights: list[tuple[HostAllocator, list[Any]]] = []  # pre-packed buffers the host owns
        self._memcpy_graphs: list[GraphView] = []
        self._device_initializers: dict[str, DeviceValue] = {}
        self._allocators: list[HostAllocator] = []
        self._stream_checked = False
        self._lock = threading.Lock()  # concurrent runs: the first makes the stream; kernels may ask for allocators
        self._infos: list[KernelInfo] = []

    # -- creation -------------------------------------------------------------------------------------

    @classmethod
    def for_ep(cls, ep: Ep) -> KernelNodes | None:
        """``OrtEp::GetKernelRegistry`` when the host reads it (plugin version >= 24, non-NULL); the host's own
        copy of the registry, or None when the EP has none.

        Raises OrtStatusError (the plugin failed) or ConductError (not a registry the host made)."""
        if int(ep.ptr.ort_version_supported) < _KERNEL_SINCE or "GetKernelRegistry" not in ep.members:
            return None
        out = ffi.new("OrtKernelRegistry**")
        ep.call_status("GetKernelRegistry", out)
        if out[0] == ffi.NULL:
            return None
        registry = ep.host.handles.lookup(out[0], KernelRegistry)
        if registry is None:
            raise ConductError(f"{ep.name}: GetKernelRegistry returned {hex(int(ffi.cast('uintptr_t', out[0])))}, "
                               "which is not an OrtKernelRegistry made by CreateKernelRegistry")
        return cls(ep, registry.copy())

    def lookup(self, node: NodeView) -> KernelDef | None:
        """``EpGraphSupportInfo_LookUpKernel``: the kernel definition that fits ``node`` for this EP."""
        entry = self.registry.lookup(node, self.ep.name)
        return None if entry is None else entry.kernel_def

    def preferred_layout_nhwc(self) -> bool:
        """``OrtEp::GetPreferredDataLayout`` (NULL: NCHW). Raises OrtStatusError, ConductError (bad value)."""
        if "GetPreferredDataLayout" not in self.ep.members:
            return False
        out = ffi.new("OrtEpDataLayout*", 0)
        self.ep.call_status("GetPreferredDataLayout", out)
        if int(out[0]) not in (0, 1):
            raise ConductError(f"{self.ep.name}: GetPreferredDataLayout returned {int(out[0])}, not NCHW (0) or "
                               "NHWC (1)")
        return int(out[0]) == 1

    def should_convert(self, domain: str, op_type: str) -> bool | None:
        """``OrtEp::ShouldConvertDataLayoutForOp`` for NHWC: True/False, None = ORT's default (also when NULL)."""
        if "ShouldConvertDataLayoutForOp" not in self.ep.members:
            return None
        out = ffi.new("int*", -1)
        self.ep.call_status("ShouldConvertDataLayoutForOp", ffi.new("char[]", domain.encode()),
                            ffi.new("char[]", op_type.encode()), 1, out)
        return None if out[0] < 0 else bool(out[0])

    def create(self, graph: GraphView, claimed: list[NodeView], units: list[Any], allocator: DeviceAllocator | None,
               transfer: DataTransfer | None) -> None:
        """Creates the kernels of ``claimed`` (graph order) and the Memcpy kernels ``units`` need, and pre-packs.

        Raises OrtStatusError (a create function or PrePackWeight failed) or ConductError."""
        self.allocator, self.transfer = allocator, transfer
        for node in claimed:
            entry = self.registry.lookup(node, self.ep.name)
            if entry is None:
                raise OrtStatusError(OrtErrorCode.FAIL, f"{self.ep.name} claimed node '{node.name}' "
                                     f"({node.op_type}), but its kernel registry has no kernel for it")
            self.nodes[node.id] = KernelNode(node, entry)
        self._place_initializers()
        self._plan_memcpy(graph, units)
        for knode in [*self.nodes.values(), *self._memcpy.values()]:
            self._create_kernel(knode)
        uses: dict[str, int] = {}
        for node in graph.nodes:
            for v in (*node.inputs, *node.implicit_inputs):
                if v is not None:
                    uses[v.name] = uses.get(v.name, 0) + 1
        for knode in self.nodes.values():
            self._prepack(knode, uses)

    def device_input(self, kernel_def: KernelDef, index: int) -> bool:
        """Whether the kernel reads input ``index`` in EP device memory (else host memory)."""
        return self.allocator is not None and not kernel_def.input_on_cpu(index)

    def device_output(self, kernel_def: KernelDef, index: int) -> bool:
        return self.allocator is not None and not kernel_def.output_on_cpu(index)

    def owns_info(self, info: KernelInfo) -> bool:
        """Whether ``info`` is one the host passed to a create function (copies belong to the plugin)."""
        return any(own is info for own in self._infos)

    def device_initializer(self, name: str) -> DeviceValue | None:
        return self._device_initializers.get(name)

    def new_allocator(self, on_device: bool) -> HostAllocator:
        if on_device and self.allocator is not None:
            allocator = HostAllocator(self.allocator.memory_info, self.host.handles, self.allocator)
        else:
            allocator = HostAllocator(self.host.cpu_memory, self.host.handles)
        with self._lock:
            self._allocators.append(allocator)  # memory stays valid until the session closes, as in ORT
        return allocator

    def open_initializer_allocator(self) -> None:
        """The allocator for initializers in device memory: the EP device's read-only allocator when it offers one
        (``EpDevice_AddAllocatorInfo`` with ``OrtReadOnlyAllocator``), made with the session's allocators."""
        memory = self.ep.session_options.provider_devices[0].memory_info(OrtDeviceMemoryType.DEFAULT)
        read_only = next((m for m in self.ep.session_options.provider_devices[0].memory_infos
                          if m.allocator_type == OrtAllocatorType.READ_ONLY and m.device == memory.device), None)
        if read_only is not None:
            self.initializer_allocator = DeviceAllocator(self.host, self.ep.factory, read_only, self.ep)

    def _place_initializers(self) -> None:
        """Constant initializers a kernel reads in device memory are copied there once, as ORT's session state
        places initializers before it creates kernels: with the EP device's read-only allocator when it offers
        one (``EpDevice_AddAllocatorInfo`` with ``OrtReadOnlyAllocator``), else its device allocator."""
        if self.allocator is None:
            return
        allocator = self.initializer_allocator or self.allocator
        for knode in self.nodes.values():
            for i, value in enumerate(knode.node.inputs):
                if value is None or value.initializer is None or not value.constant_initializer or \
                        value.name in self._device_initializers:  # a feed may override the others: copied per run
                    continue
                if self.device_input(knode.kernel_def, i):
                    self._device_initializers[value.name] = self.transfer.to_device(value.initializer, allocator)

    def _plan_memcpy(self, graph: GraphView, units: list[Any]) -> None:
        """The Memcpy nodes ORT's MemcpyTransformer would insert, run with the plugin's own Memcpy kernels.

        A value gets a MemcpyFromHost when a kernel reads it in device memory and a CPU-side producer makes it
        (a CPU node, a kernel's host-memory output) or it is a graph input a CPU-side consumer reads too; a
        MemcpyToHost when a kernel makes it in device memory and a CPU-side consumer reads it."""
        if self.allocator is None:
            return
        from_host = self.registry.find("MemcpyFromHost", "", self.ep.name)
        to_host = self.registry.find("MemcpyToHost", "", self.ep.name)
        cpu_made: set[str] = set()
        cpu_read: set[str] = set()
        device_read: set[str] = set()
        device_made: set[str] = set()
        for unit in units:
            node = getattr(unit, "kernel_node", None)
            if node is not None and node.id in self.nodes:
                kdef = self.nodes[node.id].kernel_def
                for i, v in enumerate(node.inputs):
                    if v is not None:
                        (device_read if self.device_input(kdef, i) else cpu_read).add(v.name)
                for i, v in enumerate(node.outputs):
                    if v is not None:
                        (device_made if self.device_output(kdef, i) else cpu_made).add(v.name)
            elif unit.cpu_node is not None:
                cpu_read.update(unit.inputs)
                cpu_made.update(unit.outputs)
        graph_inputs = {v.name for v in graph.inputs if v.initializer is None}
        crossing = sorted(n for n in device_read if n in cpu_made or (n in graph_inputs and n in cpu_read))
        wanted: list[tuple[str, str, KernelEntry]] = []
        if from_host is not None:
            wanted += [("MemcpyFromHost", n, from_host) for n in crossing]
        else:
            # ORT's CPU-EP fallback Memcpy leaves these in host memory (the planner gap _host_handed_values of
            # epabi.session describes for compile-based EPs): the kernel gets them there
            self._host_handed = set(crossing)
        if to_host is not None:
            wanted += [("MemcpyToHost", n, to_host) for n in sorted(device_made & cpu_read)]
        if not wanted:
            return
        types = {v.name: v.type_info for v in graph.values.values()}
        # named as ORT's graph names them: "Memcpy", then "Memcpy_token_<n>"
        protos = [onnx.helper.make_node(op, [name], [f"{name}_{self.ep.name}" if op == "MemcpyFromHost" else
                                                     f"{name}_host"], name="Memcpy" if i == 0 else
                                        f"Memcpy_token_{i - 1}")
                  for i, (op, name, _) in enumerate(wanted)]
        value_types = {}
        for (_, name, _), proto in zip(wanted, protos, strict=True):
            tp = _type_proto(types.get(name))
            if tp is not None:
                value_types[proto.input[0]] = value_types[proto.output[0]] = tp
        holder = GraphView("memcpy_nodes", protos, [p.input[0] for p in protos], [p.output[0] for p in protos], {},
                           value_types, {"": 1}, graph.ir_version)
        self.host.expose_graph(holder)
        self._memcpy_graphs.append(holder)
        for (op, name, entry), node in zip(wanted, holder.nodes, strict=True):
            node.assign(self.ep.name)
            self._memcpy[(op, name)] = KernelNode(node, entry)

    def _create_stream(self) -> SyncStream | None:
        """A sync stream for the EP's device memory when the factory is stream aware (OrtEp's
        CreateSyncStreamForDevice preferred over the factory's), as ORT registers one per device."""
        factory = self.ep.factory
        if not factory.is_stream_aware():
            return None
        device = self.allocator.memory_info.device_ptr
        out = ffi.new("OrtSyncStreamImpl**")
        if "CreateSyncStreamForDevice" in self.ep.members:
            self.ep.call_status("CreateSyncStreamForDevice", device, out)
        elif "CreateSyncStreamForDevice" in factory.members:
            factory.call_status("CreateSyncStreamForDevice", device, ffi.NULL, out)
        else:
            raise ConductError(f"{factory.name} is stream aware but has no CreateSyncStreamForDevice")
        if out[0] == ffi.NULL:
            raise ConductError(f"{self.ep.name}: CreateSyncStreamForDevice succeeded without a stream")
        stream = SyncStream(out[0], device)
        stream.ptr = self.host.handles.issue(stream, "OrtSyncStream*")
        return stream

    def _create_kernel(self, knode: KernelNode) -> None:
        version = int(self.ep.ptr.ort_version_supported)
        if self.host.behaviour.limits_kernel_ep_version and not 0 < version <= self.host.api_version:
            raise OrtStatusError(OrtErrorCode.FAIL, f"Exception during initialization: OrtEp for '{self.ep.name}' has "
                                 f"invalid ort_version_supported={version} (expected 1..{self.host.api_version}). "
                                 "Possible pointer corruption or stale plugin DLL.")
        info = KernelInfo(knode.node, knode.kernel_def, self)
        info.ptr = self.host.handles.issue(info, "OrtKernelInfo*")
        self._infos.append(info)
        knode.info = info
        out = ffi.new("OrtKernelImpl**")
        create = ffi.cast("OrtKernelCreateFunc", knode.entry.create_func)
        where = f"{self.ep.name}: OrtKernelCreateFunc of node '{knode.node.name}' ({knode.node.op_type})"
        with self.host.calling(self.ep.factory.library, "OrtKernelCreateFunc"):
            self.host.raise_status(create(knode.entry.state, info.ptr, out), where)
        if out[0] == ffi.NULL:
            raise OrtStatusError(OrtErrorCode.FAIL, "OrtKernelCreateFunc returned a NULL OrtKernelImpl", where)
        knode.impl = out[0]
        if knode.impl.Compute == ffi.NULL or knode.impl.Release == ffi.NULL:
            raise ConductError(f"{where}: the OrtKernelImpl has a NULL Compute or Release")

    def _prepack(self, knode: KernelNode, uses: dict[str, int]) -> None:
        """``PrePackWeight`` per constant initializer the kernel reads (ORT 1.24-1.32): with the allocator of the
        kernel's device; with a weight cache when that allocator is host memory, whose buffers go back to the
        kernel through ``SetSharedPrePackedWeight`` and are freed with the session. A packed initializer nothing
        else reads is freed, as ORT frees it: the kernel then gets no such input (NULL) at Compute."""
        impl = knode.impl
        members = readable_members("OrtKernelImpl", impl, self.host.api_version)
        if "PrePackWeight" not in members:
            return
        where = f"{self.ep.name}: PrePackWeight of node '{knode.node.name}'"
        for i, value in enumerate(knode.node.inputs):
            if value is None or value.initializer is None or not value.constant_initializer:
                continue
            tensor = knode.info.constant_input(i)
            if tensor is None:
                continue
            on_device = self.device_input(knode.kernel_def, i)
            allocator = self.new_allocator(on_device)
            cache = None if on_device else WeightCache()
            cache_ptr = ffi.NULL if cache is None else self.host.handles.issue(cache, "OrtSharedPrePackedWeightCache*")
            ptr = self.host.handles.issue(tensor, "OrtValue*")
            self.host.mark_host_owned(ptr)
            packed = ffi.new("bool*", False)
            try:
                with self.host.calling(self.ep.factory.library, "OrtKernelImpl::PrePackWeight"):
                    self.host.raise_status(impl.PrePackWeight(impl, ptr, i, allocator.ptr, cache_ptr, packed),
                                           f"{where} input {i}")
            finally:
                self.host.release_handle(ptr)
                if cache is not None:
                    self.host.handles.drop(cache_ptr)
                    if cache.buffers:
                        self._shared_weights.append((allocator, [b for b, _ in cache.buffers]))
            if cache is not None and cache.buffers:
                self._share(knode, members, cache, i, bool(packed[0]), where)
            if packed[0]:
                uses[value.name] -= 1
                if uses[value.name] == 0:
                    self._packed_away.add(value.name)

    def _share(self, knode: KernelNode, members: dict[str, Any], cache: WeightCache, index: int, packed: bool,
               where: str) -> None:
        if not packed:
            raise OrtStatusError(OrtErrorCode.FAIL, "OrtKernelImpl::PrePackWeight() tried to share packed weight "
                                 "data but did not set the `is_packed` output parameter to true.", where)
        if "SetSharedPrePackedWeight" not in members:
            raise OrtStatusError(OrtErrorCode.FAIL, f"The kernel corresponding to the node {knode.node.name} doesn't "
                                 "have an implementation that can consume provided pre-packed weights", where)
        ptrs = ffi.new("void*[]", [b for b, _ in cache.buffers])
        sizes = ffi.new("size_t[]", [s for _, s in cache.buffers])
        impl = knode.impl
        with self.host.calling(self.ep.factory.library, "OrtKernelImpl::SetSharedPrePackedWeight"):
            self.host.raise_status(impl.SetSharedPrePackedWeight(impl, ptrs, sizes, len(cache.buffers), index),
                                   f"{self.ep.name}: SetSharedPrePackedWeight of node '{knode.node.name}'")

    # -- running --------------------------------------------------------------------------------------

    def run(self, node: NodeView, run: Any) -> None:
        """Computes one claimed node; its outputs go to ``run.values`` (raises OrtStatusError from Compute).

        The session's stream is made on the first run (as ORT makes device streams when it first runs)."""
        if not self._stream_checked and self.allocator is not None:
            with self._lock:
                if not self._stream_checked:
                    self.stream = self._create_stream()
                    self._stream_checked = True
        knode = self.nodes[node.id]
        inputs = [None if v is None or v.name in self._packed_away else
                  self._input(v.name, self.device_input(knode.kernel_def, i), run)
                  for i, v in enumerate(node.inputs)]
        outputs = self._compute(knode, inputs, run)
        for v, value in zip(node.outputs, outputs, strict=True):
            if v is not None:
                if value is None:
                    raise ConductError(f"{self.ep.name}: Compute of node '{node.name}' ({node.op_type}) succeeded "
                                       f"without producing output '{v.name}'")
                run.values[v.name] = value
                memcpy = self._memcpy.get(("MemcpyToHost", v.name))
                if memcpy is not None:  # ORT's MemcpyToHost node runs right after its producer
                    host_copy = self._compute(memcpy, [value], run)[0]
                    run.on_host[v.name] = host_copy.array

    def _compute(self, knode: KernelNode, inputs: list[Any], run: Any) -> list[Any]:
        host, node = self.host, knode.node
        input_ptrs = []
        for value in inputs:
            ptr = ffi.NULL if value is None else host.handles.issue(value, "OrtValue*")
            if value is not None:
                host.mark_host_owned(ptr)
            input_ptrs.append(ptr)
        types, names, allocators = [], [], []
        for i, v in enumerate(node.outputs):
            tensor = None if v is None or v.type_info is None else v.type_info.tensor
            types.append(0 if tensor is None else int(tensor.elem_type))
            names.append("" if v is None else v.name)
            allocators.append(self.allocator if self.device_output(knode.kernel_def, i) else None)
        ctx = NodeKernelContext(inputs, input_ptrs, types, names, self.ep.logger, allocators, self.stream, self)
        ctx.ptr = host.handles.issue(ctx, "OrtKernelContext*")
        impl = knode.impl
        try:
            with host.calling(self.ep.factory.library, "OrtKernelImpl::Compute"):
                host.raise_status(impl.Compute(impl, ctx.ptr), f"{self.ep.name}: Compute of node '{node.name}' "
                                  f"({node.op_type})")
        finally:
            for ptr in (ctx.ptr, *input_ptrs, *ctx.output_ptrs):
                host.release_handle(ptr)
            run.temps.extend(v for v in ctx.outputs if isinstance(v, DeviceValue))
            # host-memory outputs are freed after the run as ORT frees them (the session poisons them)
            run.host_allocated.extend((v, n) for v, n in zip(ctx.outputs, names, strict=True)
                                      if v is not None and not isinstance(v, DeviceValue))
        return list(ctx.outputs)

    def _input(self, name: str, on_device: bool, run: Any) -> Any:
        """The value ``name`` in the memory a kernel reads it from, copied there once per run if needed."""
        x = run.values[name]
        if name in self._host_handed and not isinstance(x, DeviceValue):
            on_device = False
        if not on_device:
            if not isinstance(x, DeviceValue):
                return as_ortvalue(x.array if isinstance(x, OrtValue) else x)
            if name not in run.on_host:
                run.on_host[name] = self._to_host(x)
            return as_ortvalue(run.on_host[name])
        if isinstance(x, DeviceValue) and x.memory_info.device == self.allocator.memory_info.device:
            return x
        if name in self._device_initializers:
            return self._device_initializers[name]
        if name in run.on_device:
            return run.on_device[name]
        if isinstance(x, DeviceValue):  # another device's memory: through the host
            x = self._to_host(x)
        source = as_ortvalue(x.array if isinstance(x, OrtValue) else x)
        memcpy = self._memcpy.get(("MemcpyFromHost", name))
        if memcpy is not None:
            dev = self._compute(memcpy, [source], run)[0]
        else:
            dev = self.transfer.to_device(source, self.allocator)
            run.temps.append(dev)
        run.on_device[name] = dev
        return dev

    def _to_host(self, x: DeviceValue) -> np.ndarray:
        return x.numpy() if x.transfer is not None else self.transfer.to_host(x).array

    def end_run(self) -> None:
        """After ``OnRunEnd``: the stream is flushed and told the run ended (``Flush``, ``OnSessionRunEnd``)."""
        stream = self.stream
        if stream is None:
            return
        for member in ("Flush", "OnSessionRunEnd"):
            fn = getattr(stream.impl, member)
            if fn != ffi.NULL:
                with self.host.calling(self.ep.factory.library, f"OrtSyncStreamImpl::{member}"):
                    self.host.raise_status(fn(stream.impl), f"{self.ep.name}: OrtSyncStreamImpl::{member}")

    # -- teardown -------------------------------------------------------------------------------------

    def close(self) -> None:
        """Releases kernels, infos, the stream, device copies and lent allocators; idempotent."""
        lib = self.ep.factory.library
        if self.stream is not None:  # ORT releases its device streams before the kernels
            stream, self.stream = self.stream, None
            self.host.handles.drop(stream.ptr)
            if stream.impl.Release != ffi.NULL:
                with self.host.calling(lib, "OrtSyncStreamImpl::Release"):
                    stream.impl.Release(stream.impl)
        for knode in [*self.nodes.values(), *self._memcpy.values()]:
            impl, knode.impl = knode.impl, ffi.NULL
            if impl != ffi.NULL:
                with self.host.calling(lib, "OrtKernelImpl::Release"):
                    impl.Release(impl)
        for info in self._infos:
            self.host.handles.drop(info.ptr)
        self._infos = []
        for allocator, buffers in self._shared_weights:
            for buffer in buffers:
                allocator.free(buffer)
        self._shared_weights = []
        for value in self._device_initializers.values():
            self.host.release_handle(value.ptr)  # lent to kernels by KernelInfoGetConstantInput_tensor
            value.release()
        self._device_initializers = {}
        for entry in self.registry.entries:  # lent to GetCapability by EpGraphSupportInfo_LookUpKernel
            self.host.release_handle(entry.kernel_def.ptr)
            entry.kernel_def.ptr = ffi.NULL
        if self.initializer_allocator is not None:
            self.initializer_allocator.close()
            self.initializer_allocator = None
        for allocator in self._allocators:
            allocator.close()
        self._allocators = []
        for graph in self._memcpy_graphs:
            self.host.unexpose_graph(graph)
        self._memcpy_graphs = []
        self._memcpy = {}


def _type_proto(type_info: Any) -> onnx.TypeProto | None:
    if type_info is None or type_info.tensor is None:
        return None
    dims = type_info.tensor.dims
    return onnx.helper.make_tensor_type_proto(type_info.tensor.elem_type,
                                              None if dims is None else [d if d >= 0 else None for d in dims])
