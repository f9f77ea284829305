"""``model_matches_cpu``: the EP runs what it claims of the probe models (and ``--model`` files) and its outputs
match ORT's CPU EP (onnx.reference without onnxruntime), within the spec's tolerances.

A model of which the EP claims no node is not counted; models the EP takes whole are remembered for the
graph-capture checks (``probe.whole_models``).
"""

from __future__ import annotations

import onnx

from ..cmd_common import one_line
from ..errors import ConductError, HostLimitationError, OrtStatusError
from ..models import sample_inputs
from .function_models import compare, probe_models, reference
from .probe import CheckFailed, CheckSkipped, Probe

#: Failures a reason names; more are counted.
_SHOWN = 2


def _node_ops(model: onnx.ModelProto) -> dict[str, str]:
    return {(node.name or f"{node.op_type}_{i}"): node.op_type for i, node in enumerate(model.graph.node)}


def model_matches_cpu(probe: Probe) -> str:
    probe.require_ep()
    spec = probe.spec
    models = probe_models(spec.quick) + [(path, onnx.load(path)) for path in spec.models]
    ep_name = probe.first_ep["name"]
    ran: list[str] = []
    failures: list[str] = []
    unclaimed: list[str] = []
    worst = 0.0
    against = ""
    probe.whole_models = []
    for name, model in models:
        feeds = sample_inputs(model, seed=7)
        try:
            session = probe.session(model)
        except (OrtStatusError, ConductError) as exc:
            probe.record(exc)
            failures.append(f"{name}: session creation failed: {one_line(exc)}")
            continue
        except HostLimitationError as exc:
            unclaimed.append(f"{name} (epabi host limitation: {one_line(exc)})")
            continue
        try:
            ops = _node_ops(session.model)
            claimed = [node for node, where in session.node_assignment.items() if where == ep_name]
            if not claimed:
                unclaimed.append(name)
                continue
            try:
                outputs = session.run(None, feeds)
            except (OrtStatusError, ConductError) as exc:
                probe.record(exc)
                failures.append(f"{name}: run failed: {one_line(exc)}")
                continue
            expected, against = reference(model, feeds)
            names = [o.name for o in session.get_outputs()]
            bad = []
            for out_name, got, want in zip(names, outputs, expected, strict=True):
                why, diff = compare(f"{name}: output '{out_name}'", got, want, spec.rtol, spec.atol)
                worst = max(worst, diff)
                if why:
                    bad.append(why)
            if bad:
                failures.extend(bad)
                continue
            claimed_ops = sorted({ops.get(node, node) for node in claimed})
            ran.append(f"{name} ({len(claimed)}/{len(session.node_assignment)} nodes: {', '.join(claimed_ops)})")
            if len(claimed) == len(session.node_assignment):
                probe.whole_models.append((name, model))
        finally:
            session.close()
    if failures:
        more = f" (and {len(failures) - _SHOWN} more)" if len(failures) > _SHOWN else ""
        raise CheckFailed("; ".join(failures[:_SHOWN]) + more + (f"; matched: {', '.join(ran)}" if ran else ""))
    if not ran:
        raise CheckSkipped(f"{ep_name} claims no node of the probe models ({', '.join(unclaimed)}); add models of "
                           "its ops with --model")
    return (f"{', '.join(ran)} match {against} (max |diff| {worst:.2g}; rtol {spec.rtol:g}, atol {spec.atol:g})"
            + (f"; not claimed: {', '.join(unclaimed)}" if unclaimed else ""))
