"""The CPU fallback: what runs the nodes no plugin EP claimed.

With ``onnxruntime`` importable (the optional ``epabi[onnxruntime]`` extra), the unclaimed nodes run on ORT's own
CPU EP: they are grouped into partitions (each a maximal connected set of CPU nodes between fused nodes of the execution
order, control-flow nodes with their subgraphs included) and each partition becomes one
``onnxruntime.InferenceSession`` on ``CPUExecutionProvider``, built once at session creation with the model's IR
version, opsets, local functions and the value types shape inference found. A run feeds each partition the values
it reads from outside and keeps the values the rest of the graph needs. Without onnxruntime, each unclaimed node
runs alone through ``onnx.reference.ReferenceEvaluator`` (slower, and it differs from ORT on some operators).
``EPABI_CPU_FALLBACK=onnx.reference`` (or ``onnxruntime``) chooses explicitly.

Thread-safety: :meth:`CpuFallback.run` may be called from concurrent runs (ORT sessions and reference evaluators
are re-entrant; a partition whose input types are only known at run time is built once, under a lock).
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from .errors import OrtErrorCode, OrtStatusError
from .graph_view import GraphView, NodeView
from .partition import Unit

#: ``InferenceSession.cpu_fallback`` values.
ONNXRUNTIME = "onnxruntime"
ONNX_REFERENCE = "onnx.reference"
#: Environment variable choosing the fallback (unset: onnxruntime when installed).
FALLBACK_ENV = "EPABI_CPU_FALLBACK"

_ONNX_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")


def import_onnxruntime() -> ModuleType | None:
    """The ``onnxruntime`` module, or None when it is not installed (or cannot be imported)."""
    try:
        return importlib.import_module("onnxruntime")
    except ImportError:
        return None


def fallback_kind() -> str:
    """What a session created now runs its unclaimed nodes on: :data:`ONNXRUNTIME` or :data:`ONNX_REFERENCE`.

    ``EPABI_CPU_FALLBACK`` (``onnxruntime`` or ``onnx.reference``) chooses; unset, onnxruntime when it is
    installed. Raises OrtStatusError (INVALID_ARGUMENT) for another value, or ``onnxruntime`` without it.
    """
    chosen = os.environ.get(FALLBACK_ENV, "")
    if chosen not in ("", ONNXRUNTIME, ONNX_REFERENCE):
        raise OrtStatusError(OrtErrorCode.INVALID_ARGUMENT, f"{FALLBACK_ENV}={chosen!r}: expected "
                             f"{ONNXRUNTIME} or {ONNX_REFERENCE}")
    if chosen == ONNX_REFERENCE:
        return ONNX_REFERENCE
    if import_onnxruntime() is not None:
        return ONNXRUNTIME
    if chosen == ONNXRUNTIME:
        raise OrtStatusError(OrtErrorCode.INVALID_ARGUMENT, f"{FALLBACK_ENV}={ONNXRUNTIME}, but onnxruntime cannot "
                             "be imported (pip install onnxruntime, or epabi's [onnxruntime] extra)")
    return ONNX_REFERENCE


@dataclass
class CpuPartition:
    """CPU units run together: the values they read from the run (first-use order) and those they hand back."""

    index: int
    units: list[Unit]
    inputs: list[str]
    outputs: list[str]
    constants: list[str] = field(default_factory=list)  # constant initializers, part of the partition's model
    constant_nodes: list[NodeView] = field(default_factory=list)  # Constant nodes elsewhere whose value it reads
    session: Any = None
    values: dict[str, Any] | None = None  # the outputs of a partition of Constant nodes only, computed once

    @property
    def nodes(self) -> list[NodeView]:
        return [u.cpu_node for u in self.units]


def cpu_partitions(graph: GraphView, units: list[Unit]) -> list[CpuPartition]:
    """Groups the CPU units of a topologically ordered ``units`` into partitions.

    A run of consecutive CPU units (between two fused units) is split into its connected components; each
    component reads only values produced before the run began, so it can run where its first unit stands.
    """
    segments: list[list[Unit]] = [[]]
    for unit in units:
        if unit.cpu_node is None:
            if segments[-1]:
                segments.append([])
        else:
            segments[-1].append(unit)
    parts: list[CpuPartition] = []
    for segment in (s for s in segments if s):
        for component in _components(segment):
            parts.append(_partition(graph, len(parts), component))
    owner = {id(u): p.index for p in parts for u in p.units}
    readers: dict[str, set[int | None]] = {}  # value -> partitions reading it (None: a fused node)
    for unit in units:
        for name in unit.inputs:
            readers.setdefault(name, set()).add(owner.get(id(unit)))
    graph_outputs = {v.name for v in graph.outputs}
    for p in parts:
        produced = [n for u in p.units for n in u.outputs]
        wanted = [n for n in produced if n in graph_outputs or readers.get(n, set()) - {p.index}]
        p.outputs = wanted or produced  # dead nodes still run (and fail) as in ORT
    return parts


def _components(segment: list[Unit]) -> list[list[Unit]]:
    """Connected components of a run of CPU units (linked by values one produces and another reads)."""
    parent = list(range(len(segment)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    producer = {name: i for i, u in enumerate(segment) for name in u.outputs}
    for i, unit in enumerate(segment):
        for name in unit.inputs:
            if name in producer:
                parent[root(i)] = root(producer[name])
    groups: dict[int, list[Unit]] = {}
    for i, unit in enumerate(segment):
        groups.setdefault(root(i), []).append(unit)
    return list(groups.values())


def _partition(graph: GraphView, index: int, units: list[Unit]) -> CpuPartition:
    produced: set[str] = set()
    inputs: list[str] = []
    constants: list[str] = []
    constant_nodes: list[NodeView] = []
    for unit in units:
        for name in unit.inputs:
            if name in produced or name in inputs or name in constants:
                continue
            value = graph.values.get(name)
            producer = value.producer[0] if value is not None and value.producer is not None else None
            if value is not None and value.constant_initializer:
                constants.append(name)
            elif producer is not None and producer.op_type == "Constant" and (producer.domain or "") == "":
                # ORT turns Constant nodes into initializers when it loads a model; a copy in the partition
                # lets its inference and constant folding see the value (Unsqueeze axes in a Scan body, say)
                constants.append(name)
                constant_nodes.append(producer)
            else:
                inputs.append(name)
        produced.update(unit.outputs)
    return CpuPartition(index, units, inputs, [], constants, constant_nodes)


class CpuFallback:
    """Runs a session's CPU units on onnxruntime's CPU EP (when importable) or onnx.reference.

    Args:
        model: the shape-inferred model (opsets, IR version, functions, value types, initializers).
        graph: its main graph's view; ``units``: the session's execution order.

    Raises:
        OrtStatusError: a CPU node has no CPU implementation (NOT_IMPLEMENTED), onnxruntime refused a
            partition (its error code: FAIL, INVALID_GRAPH, NOT_IMPLEMENTED...), or ``EPABI_CPU_FALLBACK`` is
            not valid here (INVALID_ARGUMENT).
    """

    def __init__(self, model: onnx.ModelProto, graph: GraphView, units: list[Unit]) -> None:
        self._model = model
        self._lock = threading.Lock()
        has_cpu_nodes = any(u.cpu_node is not None for u in units)
        # without CPU nodes, onnxruntime is imported only when someone asks which fallback the session has
        self._kind = fallback_kind() if has_cpu_nodes else None
        self._ort = import_onnxruntime() if self._kind == ONNXRUNTIME else None
        self.partitions: list[CpuPartition] = []
        self._first: dict[int, CpuPartition] = {}  # id of a partition's first unit -> the partition
        self._evaluators: dict[int, ReferenceEvaluator] = {}
        if self._ort is None:
            for unit in units:
                if unit.cpu_node is not None:
                    self._evaluators[id(unit)] = _evaluator(model, unit.cpu_node)
            return
        self._types = {vi.name: vi.type for vi in (*model.graph.input, *model.graph.value_info,
                                                   *model.graph.output)}
        self._tensors = {t.name: t for t in model.graph.initializer}
        self.partitions = cpu_partitions(graph, units)
        for part in self.partitions:
            self._first[id(part.units[0])] = part
            if all(self._input_type(name) is not None for name in part.inputs):
                part.session = self._session(part, {})
            if not part.inputs and all(n.op_type == "Constant" for n in part.nodes):
                # as ORT folds Constant nodes into initializers when it loads the model: no kernel at run time
                part.values = dict(zip(part.outputs, self._run_session(part, {}), strict=True))
                part.session = None

    @property
    def kind(self) -> str:
        """:data:`ONNXRUNTIME` or :data:`ONNX_REFERENCE`: what the CPU nodes run on (or would, for a session
        without any)."""
        if self._kind is None:
            self._kind = fallback_kind()
        return self._kind

    # -- onnxruntime partitions -----------------------------------------------------------------------

    def _input_type(self, name: str) -> onnx.TypeProto | None:
        """The type a partition declares for an input it is fed, as shape inference found it: ORT's own
        inference through the partition (a Scan body's output shapes, say) needs the ranks and dims it had in
        the whole model."""
        tp = self._types.get(name)
        if tp is None or tp.WhichOneof("value") is None:
            return None
        if tp.WhichOneof("value") == "tensor_type" and tp.tensor_type.elem_type == 0:
            return None
        return tp

    def _output_type(self, name: str) -> onnx.TypeProto:
        tp = self._types.get(name)
        if tp is None:
            return onnx.TypeProto()
        if tp.WhichOneof("value") == "tensor_type":  # ORT infers the shape itself (a differing one only warns)
            return onnx.helper.make_tensor_type_proto(tp.tensor_type.elem_type, None)
        return tp

    def partition_model(self, part: CpuPartition, runtime_types: dict[str, onnx.TypeProto]) -> onnx.ModelProto:
        """The partition as a model of its own (the original opsets, IR version and local functions)."""
        inputs = [onnx.helper.make_value_info(n, runtime_types.get(n) or self._input_type(n)) for n in part.inputs]
        outputs = [onnx.helper.make_value_info(n, self._output_type(n)) for n in part.outputs]
        nodes = [n.proto for n in (*part.constant_nodes, *part.nodes)]
        graph = onnx.helper.make_graph(nodes, f"epabi_cpu_partition_{part.index}", inputs, outputs,
                                       [self._tensors[n] for n in part.constants if n in self._tensors])
        model = onnx.ModelProto()
        model.ir_version = self._model.ir_version
        model.opset_import.extend(self._model.opset_import)
        model.functions.extend(self._model.functions)
        model.graph.CopyFrom(graph)
        return model

    def _session(self, part: CpuPartition, runtime_types: dict[str, onnx.TypeProto]) -> Any:
        ort = self._ort
        options = ort.SessionOptions()
        options.logid = f"epabi_cpu_partition_{part.index}"
        if len(self.partitions) > 1:
            # one intra-op pool per partition session: threads spinning after one partition's work would
            # compete with the next partition's pool for the same cores
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            model = self.partition_model(part, runtime_types).SerializeToString()
            return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises one exception type per OrtErrorCode
            raise _status_error(exc, f"onnxruntime's CPU EP refused the nodes no EP claimed "
                                     f"({_describe(part)})") from exc

    def profile_label(self, unit: Unit) -> tuple[str, int] | None:
        """How a profile names the work :meth:`run` does for ``unit``: (name, ONNX nodes); None when it does
        nothing (a later unit of an onnxruntime partition, or a partition of Constant nodes computed at load)."""
        if self._ort is None:
            node = unit.cpu_node
            return (node.name or f"{node.op_type}_{node.id}", 1)
        part = self._first.get(id(unit))
        if part is None or part.values is not None:
            return None
        return (f"cpu_partition_{part.index}", len(part.units))

    def run(self, unit: Unit, fetch: Callable[[str], Any]) -> dict[str, Any]:
        """Runs ``unit``'s CPU work; returns the values produced by name (nothing for a unit whose partition
        ran at its first unit). ``fetch(name)`` gives a value the unit's partition reads, in host memory.

        Raises:
            OrtStatusError: the CPU kernel failed (onnxruntime's code; RUNTIME_EXCEPTION from onnx.reference).
        """
        if self._ort is None:
            return self._run_reference(unit, fetch)
        part = self._first.get(id(unit))
        if part is None:
            return {}
        if part.values is not None:  # copies: a caller may write into an output it was handed
            return {n: v.copy() if isinstance(v, np.ndarray) else v for n, v in part.values.items()}
        # onnxruntime's binding takes arrays, not numpy scalars
        feeds = {name: _array_or_value(fetch(name)) for name in part.inputs}
        if part.session is None:
            with self._lock:
                if part.session is None:
                    part.session = self._session(part, {n: _runtime_type(v) for n, v in feeds.items()})
        return dict(zip(part.outputs, self._run_session(part, feeds), strict=True))

    @staticmethod
    def _run_session(part: CpuPartition, feeds: dict[str, Any]) -> list[Any]:
        try:
            return part.session.run(part.outputs, feeds)
        except Exception as exc:
            raise _status_error(exc, f"CPU fallback failed ({_describe(part)})") from exc

    # -- onnx.reference, one node at a time -----------------------------------------------------------

    def _run_reference(self, unit: Unit, fetch: Callable[[str], Any]) -> dict[str, Any]:
        node = unit.cpu_node
        feeds = {v.name: fetch(v.name) for v in (*node.inputs, *node.implicit_inputs) if v is not None}
        try:
            results = self._evaluators[id(unit)].run(None, feeds)
        except Exception as exc:
            raise OrtStatusError(OrtErrorCode.RUNTIME_EXCEPTION, f"CPU fallback failed on node '{node.name}' "
                                 f"({node.op_type}): {exc}") from exc
        # the evaluator's outputs are the node's wired ones (an unwired output in between has no result)
        return {v.name: r for v, r in zip([v for v in node.outputs if v is not None], results, strict=False)}

    def close(self) -> None:
        """Releases the partition sessions and evaluators. Idempotent."""
        for part in self._first.values():
            part.session = None
            part.values = None
        self._evaluators = {}


def _evaluator(model: onnx.ModelProto, node: NodeView) -> ReferenceEvaluator:
    domain = node.domain or ""
    if domain not in _ONNX_DOMAINS:
        raise OrtStatusError(OrtErrorCode.NOT_IMPLEMENTED, f"node '{node.name}' ({domain}:{node.op_type}) was not "
                             "claimed by any EP and has no CPU implementation")
    try:
        # One node wrapped as a model with the original opsets, so the evaluator picks the operator
        # version the model means; subgraphs see their outer-scope values as extra graph inputs.
        names = [v.name for v in (*node.inputs, *node.implicit_inputs) if v is not None]
        graph = onnx.helper.make_graph(
            [node.proto], "cpu_node", [onnx.helper.make_value_info(n, onnx.TypeProto()) for n in names],
            [onnx.helper.make_value_info(v.name, onnx.TypeProto()) for v in node.outputs if v is not None])
        wrapped = onnx.helper.make_model(graph, ir_version=model.ir_version,
                                          opset_imports=list(model.opset_import))
        return ReferenceEvaluator(wrapped)
    except Exception as exc:
        raise OrtStatusError(OrtErrorCode.NOT_IMPLEMENTED, f"no CPU implementation for node '{node.name}' "
                             f"({node.op_type}): {exc}") from exc


def _describe(part: CpuPartition) -> str:
    names = [n.name or f"{n.op_type}_{n.id}" for n in part.nodes]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"CPU partition {part.index}: {shown}"


_ORT_ERROR_CODES = {
    "Fail": OrtErrorCode.FAIL, "InvalidArgument": OrtErrorCode.INVALID_ARGUMENT,
    "NoSuchFile": OrtErrorCode.NO_SUCHFILE, "NoModel": OrtErrorCode.NO_MODEL,
    "EngineError": OrtErrorCode.ENGINE_ERROR, "RuntimeException": OrtErrorCode.RUNTIME_EXCEPTION,
    "InvalidProtobuf": OrtErrorCode.INVALID_PROTOBUF, "ModelLoaded": OrtErrorCode.MODEL_LOADED,
    "NotImplemented": OrtErrorCode.NOT_IMPLEMENTED, "InvalidGraph": OrtErrorCode.INVALID_GRAPH,
    "EPFail": OrtErrorCode.EP_FAIL, "NotFound": OrtErrorCode.NOT_FOUND,
}


def _status_error(exc: Exception, where: str) -> OrtStatusError:
    """onnxruntime's exception as an OrtStatusError with the code its class stands for (FAIL otherwise)."""
    code = _ORT_ERROR_CODES.get(type(exc).__name__, OrtErrorCode.FAIL)
    return OrtStatusError(code, f"{where}: {' '.join(str(exc).split())}")


def _array_or_value(value: Any) -> Any:
    return np.asarray(value) if isinstance(value, np.generic) else value


def _runtime_type(value: Any) -> onnx.TypeProto:
    """The type of a value a partition is fed, for an input shape inference left untyped."""
    if isinstance(value, list | tuple):
        elem = _runtime_type(value[0]) if value else onnx.helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, None)
        return onnx.helper.make_sequence_type_proto(elem)
    array = np.asarray(value)
    dtype = np.dtype(object) if array.dtype.kind in "US" else array.dtype
    elem = onnx.TensorProto.STRING if dtype == np.dtype(object) else onnx.helper.np_dtype_to_tensor_dtype(dtype)
    return onnx.helper.make_tensor_type_proto(elem, [None] * array.ndim)
