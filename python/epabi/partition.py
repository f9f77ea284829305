"""Partitioning as ONNX Runtime does it for a compile-based plugin EP.

``GetCapability`` claims groups of nodes (``EpGraphSupportInfo_AddNodesToFuse``); each group becomes one
fused node whose inputs are the values its nodes consume from outside the group (constant initializers
included unless the EP asked to drop them), in order of first use, and whose outputs are the values it
produces that the rest of the graph or the graph outputs need, in order of production. Units (fused nodes
and the nodes left to the CPU) are then ordered topologically.

A group must be convex: no path between two of its nodes may leave it (a node outside on such a path would have
to run both before and after the fused node). ORT checks every group so (its plugin-EP adapter splits the group
into supported partitions and finds more than one), logs "OrtEp::GetCapability() set nodes that cannot be fused
together" and uses none of the EP's claims (:func:`non_convex_groups`).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

import onnx

from .graph_view import GraphView, NodeView


@dataclass
class FusedGroup:
    """One claimed group: its nodes (graph order), fused inputs/outputs, the subgraph shown to Compile."""

    index: int
    name: str
    nodes: list[NodeView]
    inputs: list[str]
    outputs: list[str]
    constant_inputs: list[str]
    subgraph: GraphView | None = None
    proto: onnx.NodeProto | None = None


@dataclass
class Unit:
    """A step of the session's execution order: a CPU node or a fused node."""

    inputs: list[str]
    outputs: list[str]
    cpu_node: NodeView | None = None
    group: FusedGroup | None = None
    kernel_node: NodeView | None = None  # a node a kernel-registry EP runs with its own kernel
    copy: str | None = None  # "from_host"/"to_host": ORT's Memcpy node for ``inputs[0]`` (order_units)
    order_key: int = 0
    deps: set[int] = field(default_factory=set)


def _successors(node: NodeView) -> list[NodeView]:
    out: list[NodeView] = []
    for value in node.outputs:
        if value is not None:
            out += [consumer for consumer, _ in value.consumers] + list(value.implicit_consumers)
    return out


def is_convex(nodes: list[NodeView]) -> bool:
    """No path from one of ``nodes`` to another passes through a node outside them."""
    members = {n.id for n in nodes}
    stack = [s for n in nodes for s in _successors(n) if s.id not in members]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if node.id in members:
            return False
        if node.id in seen:
            continue
        seen.add(node.id)
        stack.extend(_successors(node))
    return True


def non_convex_groups(groups: list[tuple[list[NodeView], bool]]) -> list[int]:
    """Indices of the claimed groups (as ``EpGraphSupportInfo_AddNodesToFuse`` recorded them) that are not
    convex; ORT drops every claim of the EP when there is one."""
    return [i for i, (nodes, _) in enumerate(groups) if not is_convex(nodes)]


def _edges(graph: GraphView) -> tuple[list[list[tuple[int, int, int]]], list[int]]:
    """ORT's graph edges: per node its output edges as ``(consumer id, output index, input index)`` in ORT's
    order (``EdgeEndCompare``: by consumer, then output, then input index; implicit inputs numbered after the
    explicit ones), and per node how many input edges it has."""
    out: list[list[tuple[int, int, int]]] = [[] for _ in graph.nodes]
    in_degree = [0] * len(graph.nodes)
    members = {id(n) for n in graph.nodes}
    for consumer in graph.nodes:
        for dst, value in enumerate([*consumer.inputs, *consumer.implicit_inputs]):
            if value is None or value.producer is None or id(value.producer[0]) not in members:
                continue
            producer, src = value.producer
            out[producer.id].append((consumer.id, src, dst))
            in_degree[consumer.id] += 1
    for edges in out:
        edges.sort()
    return out, in_degree


def ort_partition_groups(graph: GraphView, members: set[int]) -> list[list[NodeView]]:
    """The groups ORT's plugin-EP adapter makes of the nodes an EP claimed together (``utils::
    CreateSupportedPartitions``, ORT 1.24-1.32): Kahn's topological sort in waves from the graph's roots (taken
    in ``GraphView.order``), each wave taking the claimed nodes it reaches and stopping at unclaimed nodes that
    read the wave's group. A group that comes out as more than one cannot be fused; otherwise this is the order
    ORT gives its nodes."""
    out_edges, in_degree = _edges(graph)
    ready = collections.deque(n.id for n in graph.order if in_degree[n.id] == 0)  # roots in ORT's node order
    later: collections.deque[int] = collections.deque()
    groups: list[list[NodeView]] = []
    group: list[NodeView] = []
    border: set[int] = set()
    while ready or later:
        if not ready:
            if group:
                groups.append(group)
            group, border = [], set()
            ready, later = later, collections.deque()
            continue
        i = ready.popleft()
        claimed = i in members
        if not claimed and i in border:
            later.append(i)
            continue
        if claimed:
            group.append(graph.nodes[i])
            border.discard(i)
            border.update(c for c, _, _ in out_edges[i])
        for c, _, _ in out_edges[i]:
            in_degree[c] -= 1
            if in_degree[c] == 0:
                ready.append(c)
    if group:
        groups.append(group)
    return groups


def build_groups(graph: GraphView, groups: list[tuple[list[NodeView], bool]], ep_name: str) -> list[FusedGroup]:
    """One fused node per claimed group, as ORT's ``utils::MakeComputeCapability`` makes its meta definition: the
    nodes in :func:`ort_partition_groups` order; inputs the values they read that none of them produces, in
    order of first use (constant initializers left out when the EP asked to drop them); outputs per node, first
    its graph outputs, then the values its output edges carry to other nodes, in ORT's edge order."""
    out_edges, _ = _edges(graph)
    graph_outputs = {v.name for v in graph.outputs}
    out: list[FusedGroup] = []
    for index, (claimed, drop_constants) in enumerate(groups):
        members = {n.id for n in claimed}
        ordered = ort_partition_groups(graph, members)
        nodes = ordered[0] if len(ordered) == 1 else sorted(claimed, key=lambda n: n.id)
        produced: set[str] = set()
        inputs: list[str] = []
        constants: list[str] = []
        outputs: list[str] = []
        for node in nodes:
            for value in node.inputs:
                if value is None or value.name in produced or value.name in inputs or value.name in constants:
                    continue
                if value.initializer is not None and value.constant_initializer:
                    constants.append(value.name)
                    if drop_constants:
                        continue
                inputs.append(value.name)
            names = [v.name if v is not None else "" for v in node.outputs]
            produced.update(n for n in names if n)
            outputs += [n for n in names if n in graph_outputs]
            for consumer, src, _ in out_edges[node.id]:
                name = names[src]
                if consumer not in members and name not in graph_outputs and name not in outputs:
                    outputs.append(name)
        out.append(FusedGroup(index, f"{ep_name}_{index}", nodes, inputs, outputs, constants))
    return out


def order_units(graph: GraphView, groups: list[FusedGroup], kernel_nodes: frozenset[int] = frozenset(),
                copies: bool = False) -> list[Unit]:
    """The units in ORT's execution order: the DFS order of :func:`~epabi.graph_view.ort_topological_order` over
    the partitioned graph, whose nodes are the unclaimed nodes (their own index), the fused nodes (indices after
    them, in claiming order) and, with ``copies`` (the EP computes in its own memory), ORT's copy nodes (indices
    after those): a MemcpyFromHost per value a CPU node produces, or a graph input CPU nodes read too, that a fused
    node reads, then a MemcpyToHost per fused-node output a CPU node reads, each in name order (ORT's
    ``TransformerMemcpyImpl``). Nodes whose ids are in ``kernel_nodes`` are units the EP runs with its kernels;
    with them the copies are the kernel path's own (:mod:`epabi.kernel_nodes`) and none are added here.

    Raises:
        ValueError: the units depend on each other in a cycle (claims ORT would have refused).
    """
    in_group = {node.id: g for g in groups for node in g.nodes}
    count = len(graph.nodes)
    units: list[Unit] = []
    for g in groups:
        units.append(Unit(list(g.inputs), list(g.outputs), group=g, order_key=count + g.index))
    for node in graph.nodes:
        if node.id not in in_group:
            kernel = node.id in kernel_nodes
            units.append(Unit([v.name for v in node.inputs if v is not None] +
                              [v.name for v in node.implicit_inputs],
                              [v.name for v in node.outputs if v is not None], cpu_node=None if kernel else node,
                              kernel_node=node if kernel else None, order_key=node.id))
    producer = {name: i for i, unit in enumerate(units) for name in unit.outputs}
    for unit in units:
        unit.deps = {producer[name] for name in unit.inputs if name in producer}
    if copies and not kernel_nodes:
        _add_copy_units(graph, units, producer, count + len(groups))
    by_key = sorted(range(len(units)), key=lambda i: units[i].order_key)
    position = {i: k for k, i in enumerate(by_key)}
    consumed = {d for unit in units for d in unit.deps}
    stack = [(i, False) for i in by_key if i not in consumed]
    visited: set[int] = set()
    ordered: list[Unit] = []
    while stack:
        i, leaving = stack.pop()
        if leaving:
            ordered.append(units[i])
            continue
        if i in visited:
            continue
        visited.add(i)
        stack.append((i, True))
        stack.extend((d, False) for d in sorted(units[i].deps, key=position.__getitem__))
    index = {id(u): i for i, u in enumerate(units)}
    placed: set[int] = set()
    for unit in ordered:  # a cycle lists a unit before what it reads (ORT refuses such claims before this)
        if not unit.deps <= placed:
            names = [u.group.name if u.group else (u.cpu_node or u.kernel_node).name for u in units
                     if u.copy is None]
            raise ValueError(f"the claimed node groups form a cycle with the rest of the graph: {names}")
        placed.add(index[id(unit)])
    return ordered


def _add_copy_units(graph: GraphView, units: list[Unit], producer: dict[str, int], first_key: int) -> None:
    """Adds ORT's copy nodes as units (see :func:`order_units`) and rewires the readers to them."""
    cpu = [i for i, u in enumerate(units) if u.cpu_node is not None]
    fused = [i for i, u in enumerate(units) if u.group is not None]
    produced_on_cpu = {name for i in cpu for name in units[i].outputs}
    read_on_cpu = {name for i in cpu for name in units[i].inputs}
    read_by_fused = {name for i in fused for name in units[i].inputs}
    graph_inputs = {v.name for v in graph.inputs if v.required_graph_input}
    from_host = sorted((produced_on_cpu | (graph_inputs & read_on_cpu)) & read_by_fused)
    fused_outputs = {name for i in fused for name in units[i].outputs}
    to_host = sorted(fused_outputs & read_on_cpu)
    key = first_key
    for direction, names, readers in (("from_host", from_host, fused), ("to_host", to_host, cpu)):
        for name in names:
            copy = len(units)
            units.append(Unit([name], [], copy=direction, order_key=key,
                              deps={producer[name]} if name in producer else set()))
            key += 1
            for i in readers:  # every value between the CPU and the EP passes a copy, so the copy replaces the edge
                if name in units[i].inputs:
                    units[i].deps.discard(producer.get(name, -1))
                    units[i].deps.add(copy)
