"""Model checks ONNX Runtime makes when it loads a model, with its error codes and messages.

* Opset imports above what the release supports (:attr:`epabi.versions.HostBehaviour.max_opsets`): ORT_FAIL
  "... Current official support for domain ai.onnx is till opset N." (ORT's ``ValidateOpsetForDomain``; the
  maxima were read off each release's wheel).
* An IR version above what the release reads (:attr:`epabi.versions.HostBehaviour.max_ir_version`): ORT_FAIL
  "... Unsupported model IR version: N, max supported IR version: M" (ORT's ``Model::Model``).
* A node input that nothing provides (not a graph input, an initializer or a node output): ORT_INVALID_ARGUMENT
  "Invalid model. Node input 'x' is not a graph input, initializer, or output of a previous node."
"""

from __future__ import annotations

import onnx

from .errors import OrtErrorCode, OrtStatusError
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
