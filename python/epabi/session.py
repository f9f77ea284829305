"""``InferenceSession``: runs an ONNX model through a plugin EP the way ONNX Runtime's core does.

Session creation: load and shape-infer the model; ``CreateEp`` on the selected EP device; show the graph to
``GetCapability``; fuse each claimed group; ``Compile`` all fused nodes at once; ``CreateState`` per fused
node. Nodes a kernel-registry EP claims one by one run with its own kernels (:mod:`epabi.kernel_nodes`; an EP
that prefers NHWC gets them converted first, :mod:`epabi.layout`). Unclaimed nodes run on the CPU through
:mod:`epabi.cpu_fallback`: onnxruntime's CPU EP when onnxruntime is installed, else ``onnx.reference``
(libraries, not epabi's kernels).
A run: ``OnRunStart``, the units in topological order (fused nodes through ``Compute`` with an
``OrtKernelContext``, single nodes through their kernel's ``Compute``), ``OnRunEnd(sync_stream=True)``.
``close()`` releases states, compute infos, kernels and the EP.
Concurrent ``run`` calls run concurrently when the EP says so (``IsConcurrentRunSupported``), else one at a
time, as in ORT; creation and close are not thread-safe.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from ._ffi import ffi
from .capture import GraphCapture, annotation_id
from .capture_bindings import BindingLayout
from .constant_nodes import constants_to_initializers
from .cpu_fallback import CpuFallback
from .device_memory import DataTransfer, DeviceAllocator, DeviceValue
from .ep_profiler import EpProfiler
from .errors import ConductError, OrtErrorCode, OrtStatusError
from .freed_buffers import FreedBuffers
from .graph_view import GraphView, NodeView, model_graph
from .io_binding import IOBinding
from .kernel_nodes import KernelNodes
from .layout import transform_layout
from .model_checks import check_ir_version, check_node_inputs, check_opsets, topological_order
from .model_metadata import ModelMetadata
from .objects import MemoryInfo, OrtDeviceMemoryType
from .partition import FusedGroup, Unit, build_groups, non_convex_groups, order_units
from .profiling import SessionProfiler
from .provider_list import session_options_for
from .run_options import RunOptions
from .served_profiling import EventCategory
from .served_values import GraphSupportInfo, KernelContext, NodeComputeContext
from .session_options import SessionOptions
from .shape_inputs import inputs_feeding_shape_inputs
from .values import ONNX_TO_NUMPY, OrtValue, as_ortvalue
from .versions import NEWEST_EMULATED, HostBehaviour, behaviour

if TYPE_CHECKING:
    from .ep import Ep

_log = logging.getLogger("epabi.session")
_NO_EVENT = contextlib.nullcontext()  # reusable: what a unit's run is wrapped in when the session does not profile


#: ONNX's names of the tensor element types, as ORT's messages write them ("tensor(float)").
_ONNX_TYPE_NAMES = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
                    9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64", 14: "complex64",
                    15: "complex128", 16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2",
                    20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1"}


def _ort_type_name(elem_type: int) -> str:
    return f"tensor({_ONNX_TYPE_NAMES.get(int(elem_type), str(elem_type))})"


def _invalid(message: str) -> OrtStatusError:
    return OrtStatusError(OrtErrorCode.INVALID_ARGUMENT, message)


def load_model(path_or_bytes: str | bytes | Path | onnx.ModelProto,
               release: HostBehaviour | None = None) -> tuple[onnx.ModelProto, str]:
    """Parses and shape-infers a model (ONNX's inference without data propagation, which is what ORT's own
    inference shows an EP most closely), its Constant nodes turned into initializers as ORT does
    (:mod:`epabi.constant_nodes`) and its nodes in topological order, refusing what the ONNX Runtime ``release``
    refuses at load (IR versions and opsets above its maxima, node inputs nothing provides, duplicate names and
    definitions, cycles: :mod:`epabi.model_checks`). Raises OrtStatusError (NO_SUCHFILE, INVALID_PROTOBUF,
    INVALID_GRAPH, FAIL, INVALID_ARGUMENT)."""
    model_path = ""
    if isinstance(path_or_bytes, onnx.ModelProto):
        model = path_or_bytes
    elif isinstance(path_or_bytes, bytes | bytearray):
        try:
            model = onnx.load_from_string(bytes(path_or_bytes))
        except Exception as exc:  # protobuf raises several types
            raise OrtStatusError(OrtErrorCode.INVALID_PROTOBUF, f"Failed to load model from bytes: {exc}") from exc
    else:
        model_path = str(path_or_bytes)
        if not Path(model_path).is_file():
            raise OrtStatusError(OrtErrorCode.NO_SUCHFILE, f"Load model from {model_path} failed: File doesn't exist")
        try:
            model = onnx.load(model_path)
        except Exception as exc:
            raise OrtStatusError(OrtErrorCode.INVALID_PROTOBUF,
                                 f"Load model from {model_path} failed: protobuf parsing failed ({exc})") from exc
    if not model.graph.node and not model.graph.output:
        raise OrtStatusError(OrtErrorCode.INVALID_GRAPH, "the model has an empty graph (truncated or not a model?)")
    if release is not None:
        check_ir_version(model, release, model_path or "memory")
        check_opsets(model, release, model_path or "memory")
    check_node_inputs(model, model_path or "memory")
    order = topological_order(model, model_path or "memory")
    if order is not None:  # ORT presents the nodes sorted; a copy, so the caller's ModelProto stays as it was
        nodes = [model.graph.node[i] for i in order]
        sorted_model = onnx.ModelProto()
        sorted_model.CopyFrom(model)
        del sorted_model.graph.node[:]
        sorted_model.graph.node.extend(nodes)
        model = sorted_model
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # ORT accepts some models the checker rejects (untyped outputs)
        _log.warning("onnx.checker: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    declared = _dim_params(model.graph)
    try:
        model = onnx.shape_inference.infer_shapes(model, data_prop=False)
    except Exception as exc:
        raise OrtStatusError(OrtErrorCode.INVALID_GRAPH, f"the model is not valid ONNX: {exc}") from exc
    _unname_invented_dims(model.graph, declared)
    constants_to_initializers(model)  # in the inferred copy: the caller's ModelProto stays as it was
    return model, model_path


def _graphs(graph: onnx.GraphProto) -> list[onnx.GraphProto]:
    """``graph`` and every subgraph of its nodes' attributes, depth first."""
    found = [graph]
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                found.extend(_graphs(sub))
    return found


def _value_infos(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    return [vi for g in _graphs(graph) for vi in [*g.input, *g.output, *g.value_info]]


def _dim_params(graph: onnx.GraphProto) -> set[str]:
    """The symbolic dim names the model itself declares (its inputs, outputs and value_info, subgraphs included)."""
    return {d.dim_param for vi in _value_infos(graph) for d in vi.type.tensor_type.shape.dim if d.dim_param}


def _unname_invented_dims(graph: onnx.GraphProto, declared: set[str]) -> None:
    """Clears the "unk__N" names onnx's shape inference invents for dims it cannot infer: ORT's own inference (Graph
    resolve, onnxruntime/core/graph/graph.cc, 1.24 to 1.32) leaves such dims unnamed, so its EPs see "" from
    GetSymbolicDimensions there, and only the model's own names propagate."""
    for vi in _value_infos(graph):
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param and d.dim_param not in declared:
                d.ClearField("dim_param")


class NodeArg:
    """Input/output description (``name``, ``type`` like ``"tensor(float)"``, ``shape`` with str/None dims)."""

    def __init__(self, vi: onnx.ValueInfoProto) -> None:
        self.name = vi.name
        self.shape: list[int | str | None] | None = None
        if vi.type.WhichOneof("value") != "tensor_type":
            self.elem_type = 0
            self.type = vi.type.WhichOneof("value") or "unknown"
            return
        tt = vi.type.tensor_type
        self.elem_type = tt.elem_type
        self.type = f"tensor({onnx.helper.tensor_dtype_to_string(tt.elem_type).split('.')[-1].lower()})"
        if tt.HasField("shape"):
            # a dim stored as a negative value is dynamic, as in ORT (its NodeArg shows None)
            self.shape = [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else (d.dim_param or None)
                          for d in tt.shape.dim]


class InferenceSession:
    """A model bound to the EP devices of ``sess_options`` (or the CPU alone).

    Args:
        path_or_bytes: model file path, serialized model bytes, or a ``ModelProto``.
        sess_options: :class:`SessionOptions`; its ``add_provider_for_devices`` selection picks the plugin EP.
        providers, provider_options: as onnxruntime's (:mod:`epabi.provider_list`): None uses the selection of
            ``sess_options`` (``add_provider_for_devices``); a list replaces it (a UserWarning when there was one):
            ``"CPUExecutionProvider"``, or a plugin EP's name on hosts 1.26+, with its options.
        enable_fallback: accepted and ignored: epabi never falls back silently.
        host: the :class:`epabi.Host` the EP devices came from (taken from the devices when omitted); plugin EPs
            named in ``providers`` are looked up there.

    Raises:
        OrtStatusError: the model cannot be loaded, or the plugin failed (CreateEp, GetCapability, Compile...).
        ConductError: the plugin broke the contract.
    """

    def __init__(self, path_or_bytes: str | bytes | Path | onnx.ModelProto,
                 sess_options: SessionOptions | None = None, providers: list[Any] | None = None,
                 provider_options: Any = None, enable_fallback: int = 1, host: Any = None) -> None:
        self._closed = True  # until the fields below exist, close() has nothing to release
        self._idle = threading.Condition()
        self._run_lock = threading.Lock()  # serialises runs when the EP does not support concurrent ones
        self._in_flight = 0
        del enable_fallback  # epabi never falls back silently: every failure raises
        #: What set_providers re-creates the session from (as onnxruntime keeps the model and the first options).
        self._source = (path_or_bytes, sess_options, host)
        initial = sess_options or SessionOptions()
        if host is None and initial.provider_devices:
            host = initial.provider_devices[0].factory.library.host
        chosen = session_options_for(providers, provider_options, initial, host)
        self._closed = False
        self._ep: Any = None
        self._groups: list[FusedGroup] = []
        self._states: list[Any] = []
        self._infos: Any = ffi.NULL
        self._exposed: list[GraphView] = []
        self._allocator: DeviceAllocator | None = None
        self._transfer: DataTransfer | None = None
        self._session_transfer: Any = ffi.NULL  # this session's OrtDataTransferImpl (CreateDataTransfer)
        self._device_initializers: dict[str, DeviceValue] = {}
        self._cpu: CpuFallback | None = None
        self._kernels: KernelNodes | None = None
        self._kernel_nodes: list[NodeView] = []
        self._freed = FreedBuffers()
        self.options = chosen
        devices = self.options.provider_devices
        self.host = host if host is not None else (devices[0].factory.library.host if devices else None)
        self._model_meta: ModelMetadata | None = None
        release = self.host.behaviour if self.host is not None else behaviour(NEWEST_EMULATED)
        # as ORT: profiling starts with the session, before the model loads (epabi.profiling)
        self._profile = SessionProfiler(self.options.enable_profiling, self.options.profile_file_prefix,
                                        release.profile_name_ms)
        self._init_start: int | None = None
        self._unit_events: list[tuple[str, dict[str, str]] | None] = []
        loading = "model_loading_uri" if isinstance(path_or_bytes, str | Path) else "model_loading_array"
        with self._profile.event(EventCategory.SESSION, loading):
            self.model, model_path = load_model(path_or_bytes, release)
        self.graph = model_graph(self.model, model_path)
        initializer_names = {t.name for t in self.model.graph.initializer}
        self._inputs = [NodeArg(vi) for vi in self.model.graph.input if vi.name not in initializer_names]
        # as ORT from IR 4: an initializer that is also a graph input may be fed, replacing its value for a run
        self._overridable = [NodeArg(vi) for vi in self.model.graph.input if vi.name in initializer_names] \
            if self.model.ir_version >= 4 else []
        self._outputs = [NodeArg(vi) for vi in self.model.graph.output]
        self.node_assignment: dict[str, str] = {}
        try:
            if devices:
                self._create_ep()
            if self._init_start is None and self._profile.enabled:
                self._init_start = self._profile.begin()
            self._units = order_units(self.graph, self._groups, frozenset(n.id for n in self._kernel_nodes),
                                      copies=self._allocator is not None)
            for unit in self._units:
                if unit.cpu_node is not None:
                    node = unit.cpu_node
                    self.node_assignment[node.name or f"{node.op_type}_{node.id}"] = "CPUExecutionProvider"
            # ORT's order after partitioning (facts sheet, section 9; observed on 1.24.4, 1.26.0 and 1.32.0):
            # the graph-capture checks, the session state's streams (IsStreamAware), 1.32's second
            # IsGraphCaptureEnabled, then the kernels: CreateState of each fused node
            self.graph_capture = GraphCapture(self._ep, self.graph, self.node_assignment, self.options.config)
            if self._kernel_nodes:
                self._kernels.create(self.graph, self._kernel_nodes, self._units, self._allocator, self._transfer)
            elif self._ep is not None:
                self._ep.factory.is_stream_aware()
            if self._ep is not None and self.host.behaviour.requeries_graph_capture and \
                    "IsGraphCaptureEnabled" in self._ep.members:
                self._ep.call("IsGraphCaptureEnabled")
            self._host_handed = _host_handed_values(self.graph, self._units)
            # graph inputs only fused nodes read: ORT copies these feeds into EP memory before the first node
            self._fed_to_ep = {name for g in self._groups for name in g.inputs} - self._host_handed
            self._cpu = CpuFallback(self.model, self.graph, self._units)
            self._create_states()
            names = [i.name for i in (*self._inputs, *self._overridable)]
            self._binding_layout = BindingLayout(names, [o.name for o in self._outputs], inputs_feeding_shape_inputs(
                (n.proto for n in self.graph.nodes), names)) if self.graph_capture.enabled else None
            if self._profile.enabled:
                self._unit_events = [self._unit_event_spec(unit) for unit in self._units]
                self._profile.record(EventCategory.SESSION, "session_initialization", self._init_start)
        except BaseException:
            self.close()
            raise

    # -- creation -------------------------------------------------------------------------------------

    def _create_ep(self) -> None:
        host = self.host
        self._ep = host.create_ep(self.options)
        ep = self._ep
        ep.factory.library.sessions.add(self)
        self._kernels = KernelNodes.for_ep(ep)
        # ORT's session state takes the EP's data transfer (one per session, released with it), then asks for
        # the EP's profiler (profiling on or off; its session_initialization event starts after that), then makes
        # the session's allocators, all before it partitions; a kernel-registry EP may set itself up there
        # (order observed with the differential tests' tracing shim, 1.32.0)
        self._session_transfer = ep.factory.create_data_transfer()
        self._profile.add_ep_profiler(EpProfiler.create(ep))
        if self._profile.enabled:
            self._init_start = self._profile.begin()
        memory = self.options.provider_devices[0].memory_info(OrtDeviceMemoryType.DEFAULT)
        if memory is not None:
            self._allocator = DeviceAllocator(host, ep.factory, memory, ep)
            self._transfer = DataTransfer(host, ep.factory, memory, self._session_transfer)
            if self._kernels is not None:
                self._kernels.open_initializer_allocator()
        support = self._get_capability()
        self._kernel_nodes = list(support.single_nodes)
        if support.single_nodes and self._kernels is not None and self._kernels.preferred_layout_nhwc() and \
                self._convert_layout(support):
            support = self._get_capability()
            claimed = {n.id for n in self._kernel_nodes}
            self._kernel_nodes += [n for n in support.single_nodes if n.id not in claimed]
            self._kernel_nodes.sort(key=lambda n: n.id)
        self._groups = build_groups(self.graph, support.groups, ep.name)
        if not self._groups and not self._kernel_nodes:
            return  # nothing runs on the EP: no device memory is needed
        if self._kernel_nodes and self._kernels is None:
            node = self._kernel_nodes[0]
            raise OrtStatusError(OrtErrorCode.NOT_IMPLEMENTED, f"Could not find an implementation for "
                                 f"{node.op_type}({node.since_version}) node with name '{node.name}': {ep.name} "
                                 "claimed it as a single node but has no kernel registry")
        for node in self._kernel_nodes:
            node.assign(ep.name)
            self.node_assignment[node.name or f"{node.op_type}_{node.id}"] = ep.name
        if not self._groups:
            return
        if "Compile" not in ep.members:
            raise ConductError(f"{ep.name} claimed {len(self._groups)} node group(s) but OrtEp::Compile is NULL")
        for group in self._groups:
            for node in group.nodes:
                node.assign(ep.name)
                self.node_assignment[node.name or f"{node.op_type}_{node.id}"] = ep.name
            self._make_subgraph(group)
        self._compile()

    def _convert_layout(self, support: GraphSupportInfo) -> bool:
        """As ORT's partitioner for an NHWC EP: the claimed nodes are assigned to the EP, the claimed
        layout-sensitive ones converted (:mod:`epabi.layout`); when that changed the graph, the EP is then asked
        again about the new one (True), in which the nodes it kept stay assigned to it (``Node_GetEpName``) and the
        converted ones are new."""
        converted = transform_layout(self.model, {n.id for n in support.single_nodes}, self._kernels.should_convert)
        if converted is None:
            return False
        self.model, kept = converted
        self.graph = model_graph(self.model, self.graph.model_path)
        self._kernel_nodes = [self.graph.nodes[kept[n.id]] for n in self._kernel_nodes if n.id in kept]
        for node in self._kernel_nodes:
            node.assign(self._ep.name)
        return True

    def _get_capability(self) -> GraphSupportInfo:
        """``OrtEp::GetCapability`` on the session graph: what the EP claimed."""
        host, ep = self.host, self._ep
        host.expose_graph(self.graph)
        self._exposed.append(self.graph)
        support = GraphSupportInfo(self.graph, None if self._kernels is None else self._kernels.lookup)
        support.ptr = host.handles.issue(support, "OrtEpGraphSupportInfo*")
        try:
            ep.call_status("GetCapability", self.graph.ptr, support.ptr)
        finally:
            host.handles.drop(support.ptr)
        bad = non_convex_groups(support.groups)
        if bad:  # as ORT: it logs an error and takes none of the EP's claims, so every node runs on the CPU
            names = [", ".join(n.name or n.op_type for n in support.groups[i][0][:4]) for i in bad]
            host.tolerate(f"OrtEp::GetCapability() for {ep.name} set nodes that cannot be fused together (a node "
                          f"outside the group lies on a path between two of its nodes: {'; '.join(names)}); as ONNX "
                          "Runtime, the host uses none of the EP's claims")
            support.groups = []
            support.single_nodes = []
        return support

    def _make_subgraph(self, group: FusedGroup) -> None:
        g = self.graph
        types = {vi.name: vi.type for vi in (*self.model.graph.input, *self.model.graph.output,
                                               *self.model.graph.value_info)}
        for t in self.model.graph.initializer:
            types.setdefault(t.name, onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)))
        initializers = {name: g.values[name].initializer.array for name in group.constant_inputs}
        # ORT shows a fused node's graph in the order of the graph it was cut from
        position = {id(n): i for i, n in enumerate(g.order)}
        nodes = sorted(group.nodes, key=lambda n: position[id(n)])
        sub = GraphView(group.name, [n.proto for n in nodes], group.inputs, group.outputs, initializers, types,
                        g.opsets, g.ir_version, g.model_path, constant_initializers=set(initializers), keep_order=True)
        sub.metadata = g.metadata  # Graph_GetModelMetadata on a fused node's graph answers for the model
        for name in initializers:
            sub.values[name].external = g.values[name].external
        group.proto = onnx.helper.make_node(group.name, group.inputs, group.outputs, name=group.name)
        group.subgraph = sub
        self.host.expose_graph(sub)
        self._exposed.append(sub)
        holder = GraphView("fused_nodes", [group.proto], [], [], {}, types, {"": 1}, g.ir_version)
        group.fused_node = holder.nodes[0]
        group.fused_node.assign(self._ep.name)
        self.host.expose_graph(holder)
        self._exposed.append(holder)

    def _compile(self) -> None:
        ep, host, n = self._ep, self.host, len(self._groups)
        graphs = ffi.new("OrtGraph*[]", [g.subgraph.ptr for g in self._groups])
        nodes = ffi.new("OrtNode*[]", [g.fused_node.ptr for g in self._groups])
        self._infos = ffi.new("OrtNodeComputeInfo*[]", n)
        ep_context = ffi.new("OrtNode*[]", n)
        ep.call_status("Compile", graphs, nodes, n, self._infos, ep_context)
        for i, group in enumerate(self._groups):
            info = self._infos[i]
            if info == ffi.NULL:
                raise ConductError(f"{ep.name}: Compile returned no OrtNodeComputeInfo for fused node {group.name}")
            if int(info.ort_version_supported) == 0 or info.CreateState == ffi.NULL or info.Compute == ffi.NULL:
                raise ConductError(f"{ep.name}: OrtNodeComputeInfo of {group.name} has version 0 or NULL "
                                   "CreateState/Compute")
            if ep_context[i] != ffi.NULL:
                host.conduct.limitation("EPContext nodes from Compile are not supported by the epabi host")

    def _create_states(self) -> None:
        """``OrtNodeComputeInfo::CreateState`` of each fused node, as ORT creates the kernels of its session state."""
        host = self.host
        ep = self._ep
        for i, group in enumerate(self._groups):
            ctx = NodeComputeContext(group.name)
            ctx.ptr = host.handles.issue(ctx, "OrtNodeComputeContext*")
            state = ffi.new("void**")
            try:
                with host.calling(ep.factory.library, "OrtNodeComputeInfo::CreateState"):
                    host.raise_status(self._infos[i].CreateState(self._infos[i], ctx.ptr, state),
                                      f"{ep.name}: CreateState of {group.name}")
            finally:
                host.handles.drop(ctx.ptr)
            self._states.append(state[0])

    # -- onnxruntime-style API ------------------------------------------------------------------------

    @property
    def ep(self) -> Ep | None:
        """The plugin EP this session created (None when every node runs on the CPU)."""
        return self._ep

    @property
    def cpu_fallback(self) -> str:
        """What runs the nodes no EP claimed: ``"onnxruntime"`` (its CPU EP, one session per CPU partition) or
        ``"onnx.reference"`` (onnxruntime not installed, or ``EPABI_CPU_FALLBACK=onnx.reference``)."""
        return self._cpu.kind

    @property
    def ep_memory_info(self) -> MemoryInfo | None:
        """The EP device memory the fused nodes compute in; None when the EP computes in host memory (or no
        node runs on an EP)."""
        return None if self._allocator is None else self._allocator.memory_info

    def get_providers(self) -> list[str]:
        return ([self._ep.name] if self._ep is not None else []) + ["CPUExecutionProvider"]

    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def get_overridable_initializers(self) -> list[NodeArg]:
        """Initializers that are also graph inputs (IR >= 4): a feed of one replaces its value for that run."""
        return list(self._overridable)

    def input_arg(self, name: str) -> NodeArg:
        """The model input (or overridable initializer) ``name``. Raises OrtStatusError (INVALID_ARGUMENT) naming
        the inputs there are."""
        for arg in (*self._inputs, *self._overridable):
            if arg.name == name:
                return arg
        raise _invalid(f"Invalid input name: {name}; the model's inputs are {[i.name for i in self._inputs]}")

    def output_arg(self, name: str) -> NodeArg:
        """The model output ``name``. Raises OrtStatusError (INVALID_ARGUMENT) naming the outputs there are."""
        for arg in self._outputs:
            if arg.name == name:
                return arg
        raise _invalid(f"Invalid output name: {name}; the model's outputs are {[o.name for o in self._outputs]}")

    def io_binding(self) -> IOBinding:
        return IOBinding(self)

    def run(self, output_names: list[str] | None, input_feed: dict[str, Any],
            run_options: RunOptions | None = None) -> list[np.ndarray]:
        """Runs the model; returns the requested outputs (all when ``output_names`` is None) as arrays.

        Raises:
            ValueError: a required input is missing (onnxruntime's Python binding checks that first).
            OrtStatusError: INVALID_ARGUMENT for unknown inputs, wrong dtype or shape; the plugin's error for a
                failed Compute.
        """
        _check_run_options(run_options)
        self._check_required_inputs(input_feed)
        feeds = {name: self._feed_value(name, value) for name, value in input_feed.items()}
        names = [o.name for o in self._outputs] if not output_names else list(output_names)
        if not names:
            raise _invalid("At least one output should be requested.")
        for name in names:
            self.output_arg(name)
        results = self._run(feeds, {}, run_options, copy_outputs=True)
        if results is None:  # a replay hands no fresh outputs to a plain run, as in ORT
            _log.warning("graph replay: run() returns no outputs; bind pre-allocated outputs with io_binding()")
            return []
        return [results[name] for name in names]

    def _check_required_inputs(self, input_feed: dict[str, Any]) -> None:
        # as onnxruntime's Python binding checks before it calls into ORT (InferenceSession._validate_input)
        missing = [i.name for i in self._inputs if i.name not in input_feed and not i.type.startswith("optional")]
        if missing:
            raise ValueError(f"Required inputs ({missing}) are missing from input feed ({list(input_feed)}).")

    def run_with_ort_values(self, output_names: list[str] | None, input_dict_ort_values: dict[str, OrtValue],
                            run_options: RunOptions | None = None) -> list[OrtValue]:
        """As :meth:`run`, with ``OrtValue`` inputs and outputs (onnxruntime's ``run_with_ort_values``): the
        outputs are new host-memory values.

        Raises:
            TypeError: an input is not an OrtValue (onnxruntime fails on it too).
            ValueError, OrtStatusError: as :meth:`run`.
        """
        wrong = [name for name, value in input_dict_ort_values.items() if not isinstance(value, OrtValue)]
        if wrong:
            raise TypeError(f"run_with_ort_values: input(s) {wrong} are not OrtValues")
        return [OrtValue(np.require(a, requirements="C")) if isinstance(a, np.ndarray) else as_ortvalue(a)
                for a in self.run(output_names, input_dict_ort_values, run_options)]

    def run_with_iobinding(self, binding: IOBinding, run_options: RunOptions | None = None) -> None:
        """Runs with bound inputs; bound outputs are written in place, unbound ones allocated."""
        _check_run_options(run_options)
        if not binding.outputs:
            raise _invalid("At least one output should be requested.")
        feeds = {name: self._feed_value(name, value) for name, value in binding.inputs.items()}
        prealloc = {name: v for name, v in binding.outputs.items() if v is not None}
        released = [name for name, v in prealloc.items() if isinstance(v, DeviceValue) and v.released and v.nbytes]
        if released:
            raise _invalid(f"output(s) {released}: the DeviceValue bound to it was released")
        results = self._run(feeds, prealloc, run_options)
        if results is None:
            unbound = [name for name in binding.outputs if name not in prealloc]
            if unbound:
                raise OrtStatusError(OrtErrorCode.INVALID_ARGUMENT, f"output(s) {unbound} are not bound to "
                                     "pre-allocated buffers; a replayed graph writes only into the buffers it captured")
            results = dict(prealloc)
        binding.store_outputs(results)

    def end_profiling(self) -> str:
        """Ends the profile this session keeps since its creation (``SessionOptions.enable_profiling``): the EP's
        events are collected (``OrtEpProfilerImpl::EndProfiling``) and the Chrome-trace JSON file is written
        (:mod:`epabi.profiling`). Returns its path; "" when the session does not profile (or no longer: a second
        call), as in onnxruntime. Raises OSError when the file cannot be written."""
        return self._profile.end_profiling()

    def get_profiling_start_time_ns(self) -> int:
        """When profiling started, in nanoseconds since the Unix epoch (0 when the session never profiled)."""
        return self._profile.start_time_ns

    def get_modelmeta(self) -> ModelMetadata:
        """The model's metadata, as onnxruntime's ``get_modelmeta()``: ``producer_name``, ``graph_name``,
        ``domain``, ``description`` (the model's doc string), ``graph_description``, ``version`` (model_version)
        and ``custom_metadata_map`` (``metadata_props``; a repeated key keeps its last value). The same object on
        every call, as in onnxruntime."""
        if self._model_meta is None:
            self._model_meta = ModelMetadata.of(self.model)
        return self._model_meta

    def set_providers(self, providers: Any = None, provider_options: Any = None) -> None:
        """Re-creates the session (a new ``CreateEp``, ``GetCapability``, ``Compile``...) from the model and the
        session options it was created with, on ``providers`` (read as the constructor reads them: None keeps
        those options' ``add_provider_for_devices`` selection, ``["CPUExecutionProvider"]`` runs on the CPU alone,
        a plugin EP's name selects its devices on hosts 1.26+), as onnxruntime's ``set_providers``. The old
        session's EP, graphs and bindings are released first.

        Raises:
            ValueError, OrtStatusError: as the constructor (a malformed list, an unknown provider, a plugin
                failure); the session is then closed.
        """
        path_or_bytes, sess_options, host = self._source
        self.close()
        self.__init__(path_or_bytes, sess_options, providers, provider_options, host=host)  # type: ignore[misc]

    def run_async(self, output_names: list[str] | None, input_feed: dict[str, Any],
                  callback: Callable[[list[Any], Any, str], None], user_data: Any,
                  run_options: RunOptions | None = None) -> None:
        """Runs the model on another thread and calls ``callback(outputs, user_data, err)`` there, as
        onnxruntime's ``run_async``: ``outputs`` as :meth:`run` returns them and ``err`` "" on success, ``[]`` and
        the error's message on failure (an unknown output, a bad shape, a failed Compute, ``terminate``).
        Returns None at once. An exception the callback raises goes to ``threading.excepthook``, as onnxruntime
        reports it as unraisable; nothing reaches the caller.

        Raises (here, before the run starts, as onnxruntime):
            ValueError: a required input is missing.
            TypeError: ``callback`` is not callable, ``run_options`` not a RunOptions.
            OrtStatusError: INVALID_ARGUMENT when ``intra_op_num_threads`` is 1 (onnxruntime runs the request on
                its intra-op pool and needs a thread there besides the caller's).
        """
        if not callable(callback):
            raise TypeError(f"run_async: callback must be callable, not {type(callback).__name__}")
        _check_run_options(run_options)
        self._check_required_inputs(input_feed)
        if self.options.intra_op_num_threads == 1:
            raise _invalid("intra op thread pool must have at least one thread for RunAsync")

        def work() -> None:
            try:
                outputs = self.run(output_names, input_feed, run_options)
            except Exception as exc:  # every failure reaches the callback, as ORT hands it the run's status
                callback([], user_data, exc.message if isinstance(exc, OrtStatusError) else str(exc))
                return
            callback(outputs, user_data, "")

        threading.Thread(target=work, name="epabi-run-async", daemon=True).start()

    def release_captured_graph(self, graph_annotation_id: int) -> None:
        """Drops the calling thread's captured graph of this annotation id (ORT's SessionReleaseCapturedGraph,
        API 27+): the next runs of the id warm up and capture again, e.g. after binding other buffers.

        Raises:
            OrtStatusError: INVALID_ARGUMENT when no such graph exists; NOT_IMPLEMENTED without graph capture.
        """
        self.graph_capture.release(int(graph_annotation_id))

    def close(self) -> None:
        """Releases fused-node states, compute infos and the EP. Idempotent."""
        with self._idle:
            if self._closed:
                return
            self._closed = True
            self._idle.wait_for(lambda: self._in_flight == 0)
        profile = getattr(self, "_profile", None)
        if profile is not None and profile.enabled:  # as ORT's session destructor: the profile is written
            try:
                profile.end_profiling()
            except OSError as exc:
                _log.error("cannot write the profile: %s", exc)
        ep = self._ep
        if ep is not None and ep.ptr != ffi.NULL:
            # ORT's order (observed with the differential tests' tracing shim on 1.24.4 and 1.32.0): the session
            # state's data transfer and kernels, its allocators, the EP's profiler, then the EP itself (its
            # compute infos, then ReleaseEp)
            lib = ep.factory.library
            ep.factory.release_data_transfer(self._session_transfer)
            self._session_transfer = ffi.NULL
            for i, state in enumerate(self._states):
                info = self._infos[i]
                if info.ReleaseState != ffi.NULL:
                    with self.host.calling(lib, "OrtNodeComputeInfo::ReleaseState"):
                        info.ReleaseState(info, state)
            self._states = []
            for value in self._device_initializers.values():
                value.release()
            self._device_initializers = {}
            if self._kernels is not None:
                self._kernels.close()
            if self._allocator is not None:
                self._allocator.close()
            if profile is not None:
                profile.close()
            if self._groups and "ReleaseNodeComputeInfos" in ep.members and self._infos != ffi.NULL:
                ep.call("ReleaseNodeComputeInfos", self._infos, len(self._groups))
            ep.close()
        elif profile is not None:
            profile.close()
        for graph in self._exposed:
            self.host.unexpose_graph(graph)
        self._exposed = []
        if self._cpu is not None:
            self._cpu.close()

    def __enter__(self) -> InferenceSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # best effort at interpreter teardown
            pass

    # -- running --------------------------------------------------------------------------------------

    def _feed_value(self, name: str, value: Any) -> Any:
        """Checks one feed against the model input (dtype, rank, fixed dims); returns it (a list as a new array of
        the input's element type). Raises OrtStatusError (INVALID_ARGUMENT) as ORT's binding and session do."""
        arg = self.input_arg(name)
        if arg.elem_type == 0:  # sequences, maps, optionals: handed to the CPU fallback as they are
            return value
        if isinstance(value, DeviceValue):
            if value.released and value.nbytes:
                raise _invalid(f"input '{name}': the DeviceValue bound to it was released")
            self._check_feed_meta(name, arg, ONNX_TO_NUMPY[value.element_type()], value.shape())
            return value
        expected = onnx.helper.tensor_dtype_to_np_dtype(arg.elem_type)
        if isinstance(value, list):  # as ORT's binding: a list becomes a tensor of the input's element type
            try:
                value = np.array(value, dtype=expected)
            except (TypeError, ValueError) as exc:
                raise _invalid(f"Could not create tensor from given input list for input '{name}': {exc}") from None
        elif not isinstance(value, OrtValue | np.ndarray):  # ORT refuses scalars, tuples, ... the same way
            raise _invalid(f"Unable to handle object of type {type(value)} for input '{name}': feed a numpy array, "
                           "a list or an OrtValue")
        array = value.array if isinstance(value, OrtValue) else value
        if expected == np.dtype(object) and array.dtype.kind in "US":  # str tensors, as onnxruntime accepts
            array = array.astype(object)
            value = array
        self._check_feed_meta(name, arg, array.dtype, list(array.shape))
        return value if isinstance(value, OrtValue) else array

    @staticmethod
    def _check_feed_meta(name: str, arg: NodeArg, dtype: np.dtype, shape: list[int]) -> None:
        """ORT's checks of a feed (``InferenceSession::ValidateInputs``), with its messages."""
        expected = onnx.helper.tensor_dtype_to_np_dtype(arg.elem_type)
        if dtype != expected:
            actual = onnx.helper.np_dtype_to_tensor_dtype(dtype) if dtype != np.dtype(object) else 8
            raise _invalid(f"Unexpected input data type. Actual: ({_ort_type_name(actual)}) , expected: "
                           f"({_ort_type_name(arg.elem_type)})")
        if arg.shape:  # as ORT, a model input of rank 0 takes a feed of any shape
            if len(shape) != len(arg.shape):
                raise _invalid(f"Invalid rank for input: {name} Got: {len(shape)} Expected: {len(arg.shape)} "
                               "Please fix either the inputs/outputs or the model.")
            bad = [i for i, d in enumerate(arg.shape) if isinstance(d, int) and d != shape[i]]
            if bad:
                lines = "".join(f"\n index: {i} Got: {shape[i]} Expected: {arg.shape[i]}" for i in bad)
                raise _invalid(f"Got invalid dimensions for input: {name} for the following indices{lines}\n"
                               " Please fix either the inputs/outputs or the model.")

    def _run(self, feeds: dict[str, Any], prealloc: dict[str, OrtValue],
             run_options: RunOptions | None, copy_outputs: bool = False) -> dict[str, Any] | None:
        """One user call: plain execution, or ORT's capture/replay loop (None = replayed, nothing fresh).
        ``copy_outputs``: hand over copies (numpy arrays, as ``run()`` does) and free the host's buffers.

        close() waits for calls in flight, and calls that start after it raise."""
        with self._idle:
            if self._closed:
                raise _invalid("the session is closed (closed by close(), or its EP library was unregistered)")
            self._in_flight += 1
        # like ORT, runs of an EP that does not support concurrent runs (e.g. one user_compute_stream) take turns
        serial = self._run_lock if self._ep is not None and self._ep.concurrent_run_supported is False \
            else contextlib.nullcontext()
        try:
            with serial:
                if not getattr(self, "graph_capture", None) or not self.graph_capture.enabled:
                    return self._execute(feeds, prealloc, run_options, copy_outputs)[0]
                if self._allocator is not None and annotation_id(run_options) != -1:
                    self._check_capture_bindings(feeds, prealloc)
                results = self.graph_capture.run(lambda: self._execute(feeds, prealloc, run_options, copy_outputs),
                                                 run_options, lambda: None,
                                                 self._binding_layout.bindings(feeds, prealloc), self._replay_event)
                self._check_freed_buffers()
                return results
        finally:
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()

    def _check_capture_bindings(self, feeds: dict[str, Any], prealloc: dict[str, OrtValue]) -> None:
        """With graph capture on an EP that computes in device memory, a replay reads the captured input
        addresses and writes the captured output addresses, and nothing is copied around it: every feed and
        every bound output must already be in that memory. Raises OrtStatusError (INVALID_ARGUMENT) naming the
        others (ORT would silently replay on stale buffers)."""
        memory = self._allocator.memory_info
        stray = [f"input '{n}'" for n, v in feeds.items() if not self._in_ep_memory(v)]
        stray += [f"output '{n}'" for n, v in prealloc.items() if not self._in_ep_memory(v)]
        if stray:
            raise _invalid(f"{self._ep.name} captures graphs in device memory '{memory.name}': bind every input "
                           f"and output in that memory (IOBinding with OrtValue.ortvalue_from_numpy(x, 'cuda', "
                           f"{memory.device_id}), bind_input/bind_output(..., 'cuda', ...), bind_cuda_array_input/"
                           f"output); {', '.join(stray)} are not, and a replay copies nothing (or run with "
                           "gpu_graph_id -1)")

    def _replay_event(self) -> contextlib.AbstractContextManager[None]:
        return self._profile.event(EventCategory.SESSION, "model_run")

    def _unit_event_spec(self, unit: Unit) -> tuple[str, dict[str, str]] | None:
        """The profile event of one unit's run, as ORT names a node's: ``<name>_kernel_time``."""
        ep_name = self._ep.name if self._ep is not None else ""
        if unit.copy is not None:  # ORT's Memcpy nodes: not profiled here
            return None
        if unit.group is not None:
            group = unit.group
            return f"{group.name}_kernel_time", {"op_name": group.name, "provider": ep_name,
                                                 "node_index": str(len(self.graph.nodes) + group.index)}
        if unit.kernel_node is not None:
            node = unit.kernel_node
            return f"{node.name or f'{node.op_type}_{node.id}'}_kernel_time", {
                "op_name": node.op_type, "provider": ep_name, "node_index": str(node.id)}
        label = self._cpu.profile_label(unit)
        if label is None:
            return None
        name, count = label
        op = unit.cpu_node.op_type if count == 1 and self._cpu.kind != "onnxruntime" else "cpu_partition"
        return f"{name}_kernel_time", {"op_name": op, "provider": "CPUExecutionProvider",
                                        "node_index": str(unit.cpu_node.id), "node_count": str(count)}

    def _unit_event(self, index: int) -> contextlib.AbstractContextManager[None]:
        spec = self._unit_events[index] if self._profile.enabled and index < len(self._unit_events) else None
        return _NO_EVENT if spec is None else self._profile.event(EventCategory.NODE, *spec)

    def _execute(self, feeds: dict[str, Any], prealloc: dict[str, OrtValue],
                 run_options: RunOptions | None, copy_outputs: bool = False) -> tuple[dict[str, Any], _Run]:
        """Runs the graph once: the outputs by name, and the run's state. As in ORT, the buffers the host
        allocated for the run are gone afterwards (device ones freed, host ones poisoned, see
        :meth:`_Run.free_host_buffers`), except the outputs handed to the caller. Profiled as ``model_run``."""
        with self._profile.event(EventCategory.SESSION, "model_run"):
            return self._execute_once(feeds, prealloc, run_options, copy_outputs)

    def _execute_once(self, feeds: dict[str, Any], prealloc: dict[str, OrtValue],
                      run_options: RunOptions | None, copy_outputs: bool) -> tuple[dict[str, Any], _Run]:
        if self._closed:
            raise _invalid("the session is closed (closed by close(), or its EP library was unregistered)")
        missing = [i.name for i in self._inputs if i.name not in feeds]
        if missing:
            raise _invalid(f"Required inputs ({missing}) are missing from input feed ({list(feeds)}).")
        run = _Run(dict(feeds))
        for vi in self.graph.initializers:
            run.values.setdefault(vi.name, vi.initializer)
        run_options = run_options or RunOptions()
        ep, host = self._ep, self.host
        out: dict[str, Any] = {}
        if ep is not None:
            run_options.ptr = host.handles.issue(run_options, "OrtRunOptions*")
        started = False
        try:
            if ep is not None and "OnRunStart" in ep.members:
                ep.call_status("OnRunStart", run_options.ptr)
                started = True
            try:
                if self._allocator is not None and self._groups:
                    for name in feeds:
                        if name in self._fed_to_ep:
                            self._device_value(name, run)
                with self._profile.event(EventCategory.SESSION, "SequentialExecutor::Execute"):
                    for index, unit in enumerate(self._units):
                        if run_options.terminate:  # as ORT's executor, before each node
                            _log.warning("Exiting due to terminate flag being set to true.")
                            raise OrtStatusError(OrtErrorCode.FAIL, "Exiting due to terminate flag being set to true.")
                        with self._unit_event(index):
                            if unit.cpu_node is not None:
                                self._run_cpu(unit, run)
                            elif unit.kernel_node is not None:
                                self._kernels.run(unit.kernel_node, run)
                            elif unit.copy == "from_host":
                                self._device_value(unit.inputs[0], run)
                            elif unit.copy == "to_host":
                                self._host_value(unit.inputs[0], run)
                            else:
                                self._run_fused(unit, run, prealloc)
                # the outputs reach the caller's memory inside the execution, before OnRunEnd, as in ORT
                for arg in self._outputs:
                    target = prealloc.get(arg.name)
                    result = run.values[arg.name]
                    if target is not None and result is not target:
                        self._copy_into(arg.name, result, target)
                        result = target
                    elif isinstance(result, DeviceValue) and target is None:
                        # unbound: the caller gets host memory; a CPU node's copy serves (ORT copies a value once)
                        result = OrtValue(run.on_host[arg.name] if arg.name in run.on_host else self._to_host(result))
                    # copies: an output may be a feed or an initializer passed straight through
                    out[arg.name] = _fresh(result) if copy_outputs else result
                # the run's device buffers go before OnRunEnd, as ORT's execution frame releases them
                temps, run.temps = run.temps, []
                for value in temps:
                    value.release()
            except BaseException:
                # as ORT, an EP whose OnRunStart succeeded hears OnRunEnd also after a failed run (e.g. to close
                # the capture that run opened); the run's error is the one raised
                if started and "OnRunEnd" in ep.members:
                    with contextlib.suppress(OrtStatusError, ConductError):
                        ep.call_status("OnRunEnd", run_options.ptr, True)
                raise
            if ep is not None and "OnRunEnd" in ep.members:
                ep.call_status("OnRunEnd", run_options.ptr, True)
            if self._kernels is not None:
                self._kernels.end_run()
            return out, run
        finally:
            for value in run.temps:
                value.release()
            self._free_host_buffers(run, list(out.values()))
            if ep is not None:
                host.handles.drop(run_options.ptr)
                run_options.ptr = ffi.NULL

    def _free_host_buffers(self, run: _Run, returned: list[Any]) -> None:
        """Frees the host-memory buffers the host allocated for ``run`` as ORT does (:mod:`epabi.freed_buffers`),
        except those handed to the caller (or sharing memory with one)."""
        keep = [r.array for r in returned if isinstance(r, OrtValue) and not isinstance(r, DeviceValue)]
        keep += [r for r in returned if isinstance(r, np.ndarray)]
        capture = bool(getattr(self, "graph_capture", None) and self.graph_capture.enabled)
        for value, name in run.host_allocated:
            if not any(np.shares_memory(value.array, k) for k in keep):
                self._freed.free(value.array, f"'{name}'", quarantine=capture)
        run.host_allocated = [(v, n) for v, n in run.host_allocated
                              if any(np.shares_memory(v.array, k) for k in keep)]

    def _check_freed_buffers(self) -> None:
        """Raises ConductError when the EP wrote into buffers freed after an earlier run (under ORT, memory its
        arena gave to other tensors)."""
        written = self._freed.written()
        if written:
            raise ConductError(f"{self._ep.name} wrote into host buffers freed after an earlier run "
                               f"({', '.join(written)}); under ONNX Runtime this is a use after free. A replayed "
                               "graph writes into the buffers of the run that captured it: bind outputs with "
                               "IOBinding to buffers that outlive the runs")

    def _copy_into(self, name: str, result: Any, target: OrtValue) -> None:
        """Copies a run's output into the caller's bound value, wherever each lives (host or device memory).

        Raises OrtStatusError (INVALID_ARGUMENT) when shape or dtype differ."""
        if isinstance(result, OrtValue):
            shape, dtype = result.shape(), ONNX_TO_NUMPY.get(result.element_type())
        else:
            result = np.asarray(result)
            shape, dtype = list(result.shape), result.dtype
        want = ONNX_TO_NUMPY.get(target.element_type())
        if shape != target.shape() or dtype != want:
            raise _invalid(f"bound output '{name}' is {want}{target.shape()} but the run produced {dtype}{shape}")
        if isinstance(result, DeviceValue):
            if isinstance(target, DeviceValue) and target.memory_info.device != result.memory_info.device:
                target.update_inplace(self._to_host(result))  # two devices: through the host
            else:
                (result.transfer or self._transfer).copy(result, target)  # straight into the bound buffer
        else:  # from host memory, into host or device memory (update_inplace copies through the plugin)
            target.update_inplace(result.array if isinstance(result, OrtValue) else result)

    def sync_ep(self) -> None:
        """``OrtEp::Sync`` when the EP has it (what ``IOBinding.synchronize_inputs/outputs`` call)."""
        if self._ep is not None and self._ep.ptr != ffi.NULL and "Sync" in self._ep.members:
            self._ep.call_status("Sync")

    def _to_host(self, x: DeviceValue) -> np.ndarray:
        """A host copy of a device value, through its own data transfer or the session's."""
        return x.numpy() if x.transfer is not None else self._transfer.to_host(x).array

    def _host_value(self, name: str, run: _Run) -> Any:
        x = run.values[name]
        if not isinstance(x, DeviceValue):
            return x.array if isinstance(x, OrtValue) else x
        if name not in run.on_host:
            run.on_host[name] = self._to_host(x)
        return run.on_host[name]

    def _in_ep_memory(self, x: Any) -> bool:
        """``x`` is a device value in the memory the EP computes in (same memory device)."""
        return isinstance(x, DeviceValue) and self._allocator is not None and \
            x.memory_info.device == self._allocator.memory_info.device

    def _device_value(self, name: str, run: _Run) -> OrtValue:
        x = run.values[name]
        if self._allocator is not None and name in self._host_handed:
            # as onnxruntime 1.24-1.32 hand it over: its CPU-EP MemcpyFromHost kernel copies into CPU memory, which
            # its data transfer manager first offers the EP's data transfer (CanCopy CPU -> CPU, refused)
            value = as_ortvalue(self._host_value(name, run))
            if name not in run.probed:
                run.probed.add(name)
                cpu = self.host.cpu_memory.device_ptr
                if self._transfer.can_copy(cpu, cpu):  # the EP's data transfer takes host copies too: it copies
                    copy = OrtValue(np.empty(value.shape(), dtype=ONNX_TO_NUMPY[value.element_type()]))
                    self._transfer.copy(value, copy, probed=True)
                    run.on_host[name] = copy.array
                    value = copy
            return value
        if self._in_ep_memory(x):
            return x  # bound in the EP's own memory: handed over as it is, never copied
        if isinstance(x, DeviceValue):  # another device's memory: through the host
            if name not in run.on_host:
                run.on_host[name] = self._to_host(x)
            x = run.on_host[name]
        if self._allocator is None:
            return as_ortvalue(x)
        if name in self._device_initializers:
            return self._device_initializers[name]
        if name not in run.on_device:
            dev = self._transfer.to_device(as_ortvalue(x), self._allocator)
            if name in self.graph.values and self.graph.values[name].constant_initializer:
                self._device_initializers[name] = dev  # copied once, as ORT places initializers at init
            else:
                run.temps.append(dev)
            run.on_device[name] = dev
        return run.on_device[name]

    def _run_cpu(self, unit: Unit, run: _Run) -> None:
        run.values.update(self._cpu.run(unit, lambda name: self._host_value(name, run)))

    def _run_fused(self, unit: Unit, run: _Run, prealloc: dict[str, OrtValue]) -> None:
        host, ep, group = self.host, self._ep, unit.group
        inputs = [self._device_value(name, run) for name in group.inputs]
        input_ptrs = [host.handles.issue(v, "OrtValue*") for v in inputs]
        for ptr in input_ptrs:
            host.mark_host_owned(ptr)
        types = []
        for name in group.outputs:
            info = group.subgraph.values[name].type_info
            types.append(info.tensor.elem_type if info is not None and info.tensor is not None else 0)
        # a bound output the EP can write itself: in its own device memory, or in host memory for a host-memory EP
        targets = {i: prealloc[name] for i, name in enumerate(group.outputs) if name in prealloc and
                   (self._in_ep_memory(prealloc[name]) if self._allocator is not None
                    else not isinstance(prealloc[name], DeviceValue))}
        ctx = KernelContext(inputs, input_ptrs, types, list(group.outputs), ep.logger, targets, self._allocator)
        ctx.ptr = host.handles.issue(ctx, "OrtKernelContext*")
        index = group.index
        info = self._infos[index]
        try:
            with host.calling(ep.factory.library, "OrtNodeComputeInfo::Compute"):
                status = info.Compute(info, self._states[index], ctx.ptr)
                host.raise_status(status, f"{ep.name}: Compute of {group.name}")
        finally:
            for ptr in (ctx.ptr, *input_ptrs, *ctx.output_ptrs):
                host.release_handle(ptr)
            bound = {id(v) for v in targets.values()}
            run.temps.extend(v for v in ctx.outputs if isinstance(v, DeviceValue) and id(v) not in bound)
            run.host_allocated.extend((v, n) for v, n in zip(ctx.outputs, group.outputs, strict=True)
                                      if v is not None and not isinstance(v, DeviceValue) and id(v) not in bound)
        for name, value in zip(group.outputs, ctx.outputs, strict=True):
            if value is None:
                raise ConductError(f"{ep.name}: Compute of {group.name} succeeded without producing output '{name}'")
            run.values[name] = value

    def allocator_stats(self) -> dict[str, str]:
        """The EP device allocator's statistics (``OrtAllocator::GetStats``); {} without device memory."""
        return {} if self._allocator is None else self._allocator.stats()


def _host_handed_values(graph: GraphView, units: list[Unit]) -> set[str]:
    """Fused-node inputs that onnxruntime (1.24.4 ... 1.32.0 seen) hands to a device EP in host memory.

    Its MemcpyTransformer puts a MemcpyFromHost node in front of a fused node for a value a CPU node produces,
    and for a graph input that CPU nodes read too; a compile-based plugin EP has no kernel for it, so ORT runs
    its CPU EP's fallback kernel, whose output the allocation planner places in CPU memory. The fused node
    then receives CPU memory where it declared device memory (onnxruntime PR #27272 describes the planner's
    gap). Graph inputs only fused nodes read, and initializers, are copied into device memory as declared.
    """
    cpu_units = [u for u in units if u.cpu_node is not None]
    produced_on_cpu = {name for u in cpu_units for name in u.outputs}
    read_on_cpu = {name for u in cpu_units for name in u.inputs}
    graph_inputs = {v.name for v in graph.inputs if v.required_graph_input}
    return produced_on_cpu | (graph_inputs & read_on_cpu)


class _Run:
    """State of one run: values by name, per-run copies between host and device, buffers to free."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values
        self.on_host: dict[str, np.ndarray] = {}
        self.on_device: dict[str, OrtValue] = {}
        self.temps: list[DeviceValue] = []
        self.host_allocated: list[tuple[OrtValue, str]] = []  # fused-node and kernel outputs in host memory
        self.probed: set[str] = set()  # host-handed values whose copy was offered to the EP's data transfer


def _fresh(x: Any) -> Any:
    """A caller-owned copy of a result; string tensors come back as object arrays, as from onnxruntime."""
    if isinstance(x, DeviceValue):
        return x.numpy()
    if isinstance(x, OrtValue):
        return x.array.copy()
    if isinstance(x, np.ndarray):
        return x.astype(object) if x.dtype.kind in "US" else x.copy()
    return x  # sequences, maps, optionals from the CPU fallback


def _check_run_options(run_options: Any) -> None:
    if run_options is not None and not isinstance(run_options, RunOptions):
        raise TypeError(f"run_options must be an epabi.RunOptions, not {type(run_options).__name__}")
