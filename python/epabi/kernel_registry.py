"""Kernel registries of kernel-registry plugin EPs, as ONNX Runtime's core keeps and searches them.

A kernel-registry EP (``OrtEp::GetKernelRegistry``, no ``Compile``) builds kernel definitions with
``OrtKernelDefBuilder`` (op type, domain, since-version range, EP name, type constraints, input/output memory
types, aliases), adds each to an ``OrtKernelRegistry`` with its ``OrtKernelCreateFunc``, and hands the registry to
the host once per session. The host looks kernels up the way ORT's ``KernelRegistry::TryFindKernel`` does:

* same op type, domain and EP name;
* the kernel's start version equals the node's since-version, or the kernel covers it with a bounded range
  (``start < since <= end`` and ``end`` is not ``INT_MAX``);
* every type constraint resolves, through the node's op schema, to the first present argument of a formal
  parameter of that type string (the formal parameter's name when its type is not a type parameter), and that
  argument's element type is one the constraint allows.

Registration refuses a definition that conflicts with one already there (same key, overlapping versions, no
common constraint with disjoint types, same aliases and memory types), as ORT does (``ORT_FAIL``).
Objects are immutable after ``Build``; lookups are thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import onnx

from ._ffi import enum_value, ffi
from .objects import cstr

INT_MAX = 2**31 - 1
#: ``OrtMemType`` values (ort_abi.h).
MEM_CPU_INPUT = enum_value("OrtMemType", "OrtMemTypeCPUInput")
MEM_CPU_OUTPUT = enum_value("OrtMemType", "OrtMemTypeCPUOutput")
MEM_DEFAULT = enum_value("OrtMemType", "OrtMemTypeDefault")

#: ORT's internal NHWC domain: layout-transformed nodes take the ONNX op's schema there.
NHWC_DOMAIN = "com.ms.internal.nhwc"
#: Schemas of ORT-internal ops that ``onnx`` does not know: op -> (input type strings, output type strings).
_INTERNAL_SCHEMAS = {("", "MemcpyFromHost"): (["T"], ["T"]), ("", "MemcpyToHost"): (["T"], ["T"])}


class DataType:
    """``OrtDataType`` of a tensor element type (``OrtEpApi::GetTensorDataType``); one per type per process."""

    def __init__(self, elem_type: int) -> None:
        self.elem_type = elem_type
        self.ptr: Any = ffi.NULL


@dataclass
class KernelDefBuilder:
    """``OrtKernelDefBuilder``: the fields of a kernel definition before ``Build``."""

    op_type: str = ""
    domain: str = ""
    since: tuple[int, int] = (1, INT_MAX)
    ep_name: str = ""
    input_mem: dict[int, int] = field(default_factory=dict)
    output_mem: dict[int, int] = field(default_factory=dict)
    type_constraints: dict[str, list[int]] = field(default_factory=dict)
    aliases: list[tuple[int, int]] = field(default_factory=list)
    mutable_aliases: list[tuple[int, int]] = field(default_factory=list)
    ptr: Any = ffi.NULL

    def build(self) -> KernelDef:
        return KernelDef(self.op_type, self.domain, self.since, self.ep_name, dict(self.input_mem),
                         dict(self.output_mem), {k: list(v) for k, v in self.type_constraints.items()},
                         list(self.aliases), list(self.mutable_aliases))


class KernelDef:
    """``OrtKernelDef``: one kernel definition; the C strings its getters return live as long as it does."""

    def __init__(self, op_type: str, domain: str, since: tuple[int, int], ep_name: str, input_mem: dict[int, int],
                 output_mem: dict[int, int], type_constraints: dict[str, list[int]], aliases: list[tuple[int, int]],
                 mutable_aliases: list[tuple[int, int]]) -> None:
        self.op_type = op_type
        self.domain = domain
        self.since = since
        self.ep_name = ep_name
        self.input_mem = input_mem
        self.output_mem = output_mem
        self.type_constraints = type_constraints
        self.aliases = aliases
        self.mutable_aliases = mutable_aliases
        self.c_op_type, self.c_domain, self.c_ep_name = cstr(op_type), cstr(domain), cstr(ep_name)
        self.ptr: Any = ffi.NULL

    @property
    def key(self) -> tuple[str, str, str]:
        return self.op_type, self.domain, self.ep_name

    def input_on_cpu(self, index: int) -> bool:
        """Whether input ``index`` is read from host memory: either CPU memory type counts, as in ORT."""
        return self.input_mem_type(index) in (MEM_CPU_INPUT, MEM_CPU_OUTPUT)

    def output_on_cpu(self, index: int) -> bool:
        return self.output_mem_type(index) in (MEM_CPU_INPUT, MEM_CPU_OUTPUT)

    def input_mem_type(self, index: int) -> int:
        """``OrtMemType`` of input ``index`` (``OrtMemTypeDefault`` unless the plugin set it)."""
        return self.input_mem.get(index, MEM_DEFAULT)

    def output_mem_type(self, index: int) -> int:
        return self.output_mem.get(index, MEM_DEFAULT)

    def copy(self) -> KernelDef:
        """An independent copy (ORT copies the registry it is handed, so the plugin keeps ownership)."""
        return KernelDef(self.op_type, self.domain, self.since, self.ep_name, dict(self.input_mem),
                         dict(self.output_mem), {k: list(v) for k, v in self.type_constraints.items()},
                         list(self.aliases), list(self.mutable_aliases))

    def conflicts_with(self, other: KernelDef) -> bool:
        if self.key != other.key:
            return False
        if self.since[0] > other.since[1] or self.since[1] < other.since[0]:
            return False
        for name, types in self.type_constraints.items():
            theirs = other.type_constraints.get(name)
            if theirs is not None and not set(types) & set(theirs):
                return False
        return (self.aliases, self.mutable_aliases, self.input_mem, self.output_mem) == \
            (other.aliases, other.mutable_aliases, other.input_mem, other.output_mem)

    def version_matches(self, node_since: int) -> bool:
        start, end = self.since
        return start == node_since or (start < node_since and end != INT_MAX and end >= node_since)

    def mismatch(self, node: Any) -> str | None:
        """Why this definition does not fit ``node`` (a :class:`epabi.graph_view.NodeView`), or None when it does."""
        if not self.version_matches(node.since_version):
            return (f"version mismatch: node since-version {node.since_version}, kernel versions "
                    f"{self.since[0]}..{self.since[1]}")
        for name, allowed in self.type_constraints.items():
            elem = _bound_type(node, name)
            if elem is not None and elem not in allowed:
                return f"type constraint '{name}' allows {allowed}, the node has element type {elem}"
        return None

    def __repr__(self) -> str:
        return f"KernelDef({self.domain or 'ai.onnx'}:{self.op_type} {self.since} {self.ep_name})"


@dataclass
class KernelEntry:
    """A registered kernel: its definition and the plugin's create function with its state."""

    kernel_def: KernelDef
    create_func: Any
    state: Any


class KernelRegistry:
    """``OrtKernelRegistry``: kernel definitions by (op type, domain, EP name), in registration order."""

    def __init__(self) -> None:
        self.entries: list[KernelEntry] = []
        self.ptr: Any = ffi.NULL

    def add(self, kernel_def: KernelDef, create_func: Any, state: Any) -> str | None:
        """Registers a copy of ``kernel_def``; returns ORT's refusal message on a conflict (nothing is added)."""
        for entry in self.entries:
            if entry.kernel_def.conflicts_with(kernel_def):
                op, domain, ep = kernel_def.key
                return f"Failed to add kernel for {op} {domain} {ep}: Conflicting with a registered kernel with op " \
                       "versions."
        self.entries.append(KernelEntry(kernel_def.copy(), create_func, state))
        return None

    def copy(self) -> KernelRegistry:
        """The session's own copy (ORT's ``CopyEpKernelRegistry``): the plugin may release its registry after."""
        out = KernelRegistry()
        out.entries = [KernelEntry(e.kernel_def.copy(), e.create_func, e.state) for e in self.entries]
        return out

    def lookup(self, node: Any, ep_name: str) -> KernelEntry | None:
        """The first kernel whose definition fits ``node`` for EP ``ep_name``; None when there is none."""
        for entry in self.entries:
            kdef = entry.kernel_def
            if kdef.key == (node.op_type, node.domain or "", ep_name) and kdef.mismatch(node) is None:
                return entry
        return None

    def find(self, op_type: str, domain: str, ep_name: str) -> KernelEntry | None:
        """The first kernel registered for an op by name alone (the Memcpy kernels ORT looks for)."""
        return next((e for e in self.entries if e.kernel_def.key == (op_type, domain, ep_name)), None)


def _formal_params(node: Any) -> tuple[list[tuple[str, str, bool]], list[tuple[str, str]], set[str]] | None:
    """The node's schema: ``[(input name, type string, variadic)]``, ``[(output name, type string)]`` and its type
    parameters; None when no schema is known."""
    domain = node.domain or ""
    internal = _INTERNAL_SCHEMAS.get((domain, node.op_type))
    if internal is not None:
        return [(t, t, False) for t in internal[0]], [(t, t) for t in internal[1]], set(internal[0] + internal[1])
    if domain == NHWC_DOMAIN:
        domain = ""
    try:
        schema = onnx.defs.get_schema(node.op_type, node.since_version, domain)
    except Exception:  # no schema: ORT would have to know the op; nothing to resolve against
        return None
    variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
    return ([(p.name, p.type_str, p.option == variadic) for p in schema.inputs],
            [(p.name, p.type_str) for p in schema.outputs], {c.type_param_str for c in schema.type_constraints})


def default_attribute(node: Any, name: str) -> onnx.AttributeProto | None:
    """The schema default of attribute ``name`` for ``node`` (ORT adds every defaulted attribute a node leaves out
    when it resolves the graph, so kernels read it); None when the schema has no default for it."""
    domain = node.domain or ""
    if domain == NHWC_DOMAIN:
        domain = ""
    try:
        schema = onnx.defs.get_schema(node.op_type, node.since_version, domain)
    except Exception:  # no schema known: no defaults
        return None
    attr = schema.attributes.get(name)
    if attr is None or not attr.default_value.name:
        return None
    value = onnx.AttributeProto()
    value.CopyFrom(attr.default_value)
    value.name = name
    return value


def _bound_type(node: Any, constraint: str) -> int | None:
    """Element type of the first present argument bound to a type constraint; None when none is (or no schema).

    A constraint names a type parameter of the schema, or a formal parameter whose type is a fixed one."""
    params = _formal_params(node)
    if params is None:
        return None
    inputs, outputs, type_params = params

    def key(name: str, type_str: str) -> str:
        return type_str if type_str in type_params else name

    for i, (name, type_str, _variadic) in enumerate(inputs):
        if key(name, type_str) != constraint or i >= len(node.inputs):
            continue
        elem = _elem_type(node.inputs[i])
        if elem is not None:
            return elem
    for i, (name, type_str) in enumerate(outputs):
        if key(name, type_str) != constraint or i >= len(node.outputs):
            continue
        elem = _elem_type(node.outputs[i])
        if elem is not None:
            return elem
    return None


def _elem_type(value: Any) -> int | None:
    if value is None or value.type_info is None or value.type_info.tensor is None:
        return None
    return int(value.type_info.tensor.elem_type)
