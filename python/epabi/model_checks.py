"""Model checks ONNX Runtime makes when it loads a model, with its error codes and messages.

* Opset imports above what the release supports (:attr:`epabi.versions.HostBehaviour.max_opsets`): ORT_FAIL
  "... Current official support for domain ai.onnx is till opset N." (ORT's ``ValidateOpsetForDomain``; the
  maxima were read off each release's wheel).
* An IR version above what the release reads (:attr:`epabi.versions.HostBehaviour.max_ir_version`): ORT_FAIL
  "... Unsupported model IR version: N, max supported IR version: M" (ORT's ``Model::Model``).
* A node input that nothing provides (not a graph input, an initializer or a node output): ORT_INVALID_ARGUMENT
  "Invalid model. Node input 'x' is not a graph input, initializer, or output of a previous node."
* What ORT's ``Graph::Resolve`` refuses in the main graph, ORT_FAIL "This is an invalid model. Error: ...": two
  nodes of one (non-empty) name, a value defined twice (by two nodes, or a node output that is a graph input or
  an initializer), a cycle. Nodes out of topological order are accepted and ordered, as ORT orders them.

Observed on onnxruntime 1.24.4 and 1.32.0 (tests/test_value_semantics.py compares the messages).
"""

from __future__ import annotations

import heapq

import onnx

from .errors import OrtErrorCode, OrtStatusError
from .graph_view import outer_scope_names
from .versions import HostBehaviour


def check_opsets(model: onnx.ModelProto, behaviour: HostBehaviour, where: str) -> None:
    """Raises OrtStatusError (FAIL) for an opset import above the release's maximum for its domain."""
    for opset in model.opset_import:
        domain = opset.domain or "ai.onnx"
        maximum = behaviour.max_opsets.get(domain)
        if maximum is not None and opset.version > maximum:
            raise OrtStatusError(
                OrtErrorCode.FAIL,
                f"Load model from {where} failed: ONNX Runtime only *guarantees* support for models stamped with "
                f"official released onnx opset versions. Opset {opset.version} is under development and support "
                "for this is limited. The operator schemas and or other functionality may change before next ONNX "
                "release and in this case ONNX Runtime will not guarantee backward compatibility. Current official "
                f"support for domain {domain} is till opset {maximum}.")


def check_ir_version(model: onnx.ModelProto, behaviour: HostBehaviour, where: str) -> None:
    """Raises OrtStatusError (FAIL) for an IR version above the release's maximum (when it is known)."""
    maximum = behaviour.max_ir_version
    if maximum is not None and model.ir_version > maximum:
        raise OrtStatusError(OrtErrorCode.FAIL, f"Load model from {where} failed:Unsupported model IR version: "
                                                f"{model.ir_version}, max supported IR version: {maximum}")


def check_node_inputs(model: onnx.ModelProto, where: str) -> None:
    """Raises OrtStatusError (INVALID_ARGUMENT) for a main-graph node input nothing provides."""
    g = model.graph
    known = {i.name for i in g.input} | {t.name for t in g.initializer} | \
        {t.values.name for t in g.sparse_initializer} | {o for n in g.node for o in n.output}
    for node in g.node:
        for name in node.input:
            if name and name not in known:
                raise OrtStatusError(OrtErrorCode.INVALID_ARGUMENT,
                                     f"Load model from {where} failed:Invalid model. Node input '{name}' is not a "
                                     "graph input, initializer, or output of a previous node.")


def _invalid_model(where: str, error: str) -> OrtStatusError:
    return OrtStatusError(OrtErrorCode.FAIL, f"Load model from {where} failed:This is an invalid model. Error: {error}")


def topological_order(model: onnx.ModelProto, where: str) -> list[int] | None:
    """Checks the main graph as ORT's ``Graph::Resolve`` does and returns its nodes' indices in a topological order
    (stable: among ready nodes the earliest first), or None when the model's own order already is one.

    A node depends on the producers of its inputs and of the outer-scope values its subgraphs read.

    Raises:
        OrtStatusError: FAIL for two nodes of one name, a value defined twice, a cycle (ORT's messages).
    """
    g = model.graph
    names: set[str] = set()
    for node in g.node:
        if node.name:
            if node.name in names:
                raise _invalid_model(where, f"two nodes with same node name ({node.name}).")
            names.add(node.name)
    defined = {i.name for i in g.input} | {t.name for t in g.initializer} | \
        {t.values.name for t in g.sparse_initializer}
    producer: dict[str, int] = {}
    for index, node in enumerate(g.node):
        for name in node.output:
            if name and (name in defined or name in producer):
                raise _invalid_model(where, f"Duplicate definition of name ({name}).")
            if name:
                producer[name] = index
    waiting = [0] * len(g.node)
    users: list[list[int]] = [[] for _ in g.node]
    for index, node in enumerate(g.node):
        sources = {producer[n] for n in (*node.input, *outer_scope_names(node)) if n in producer}
        waiting[index] = len(sources)
        for source in sources:
            users[source].append(index)
    ready = [i for i, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        for user in users[index]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, user)
    if len(order) != len(g.node):
        raise _invalid_model(where, "the graph is not acyclic.")
    return None if order == list(range(len(g.node))) else order
