"""Graph capture as ONNX Runtime's core drives it (``InferenceSession::Initialize`` and ``Run``, API 26+).

At session creation, when the EP says ``IsGraphCaptureEnabled`` (and implements ``IsGraphCaptured`` and
``ReplayGraph``): models with control-flow nodes are refused, and ``GetGraphCaptureNodeAssignmentPolicy``
decides whether nodes left to the CPU are tolerated (ALLOW_CPU_FOR_SHAPES) or fail the session
(ALL_NODES_ON_EP). A run: when ``IsGraphCaptured(id)`` the host only calls ``ReplayGraph(id)`` (then ``Sync``
on hosts whose :class:`~epabi.versions.HostBehaviour` says ``syncs_after_replay``); otherwise it executes
normally and, while the graph of ``id`` is not captured, executes again inside the same call, at most 8
times, then fails with ORT's message. ``id`` comes from the run option
``gpu_graph_id`` (0 when absent or unparsable, -1 = never capture or replay). ORT itself counts no warm-up
runs: the EP decides when it captures. When the EP computes in device memory, the session requires every
feed and bound output of a capturing or replaying run to be in that memory (IOBinding on device values), since
a replay copies nothing; ORT does not check this and replays on stale buffers.

Two things epabi's host adds to ORT's loop (:mod:`epabi.capture_bindings`): before a replay it compares the
call's bindings with those of the run that captured the id on this thread, and refuses a stale replay
(:class:`~epabi.errors.StaleReplayError`) or, with the policy ``recapture``, releases the graph
(``OrtEp::ReleaseCapturedGraph``) and lets the loop capture again; and inputs bound to the same memory as an output
are written back to their values at the call's start before every execution after the first, so hidden warm-up
and capture executions do not advance such state. The policy is the session config entry or run option
``epabi.graph_capture.on_binding_change``: ``error`` (default), ``recapture``, or ``replay`` (no check, as ORT).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from ._ffi import enum_value
from .errors import OrtErrorCode, OrtStatusError
from .versions import RELEASE_CAPTURED_GRAPH_SINCE

if TYPE_CHECKING:
    from .capture_bindings import CallBindings
    from .ep import Ep
    from .graph_view import GraphView
    from .run_options import RunOptions

_log = logging.getLogger("epabi.session")

MAX_CAPTURE_RUNS = 8
_POLICY = "OrtGraphCaptureNodeAssignmentPolicy"
ALL_NODES_ON_EP = enum_value(_POLICY, f"{_POLICY}_ALL_NODES_ON_EP")
_CONTROL_FLOW = {"If", "Loop", "Scan"}


_INT = re.compile(r"-?[0-9]+")

#: Session config entry / run option: what a run of a captured id does when its bindings changed.
ON_BINDING_CHANGE = "epabi.graph_capture.on_binding_change"
BINDING_POLICIES = ("error", "recapture", "replay")


def binding_policy(text: str | None, default: str = "error") -> str:
    """The policy ``text`` names (None: ``default``). Raises OrtStatusError (INVALID_ARGUMENT) naming the key,
    the value and the accepted ones."""
    if text is None:
        return default
    if text not in BINDING_POLICIES:
        raise OrtStatusError(OrtErrorCode.INVALID_ARGUMENT, f"{ON_BINDING_CHANGE}={text!r}: expected one of "
                             f"{', '.join(BINDING_POLICIES)}")
    return text


def annotation_id(run_options: RunOptions | None) -> int:
    """The run's graph annotation id, read as ORT core reads ``gpu_graph_id``: absent or empty is 0; an
    optional '-' and digits within int range is the id. Raises OrtStatusError for anything else ('+5', ' 5',
    '0x10', 'abc', 2**31), as onnxruntime 1.26-1.32 fail such runs."""
    text = None if run_options is None else run_options.config.get("gpu_graph_id")
    if not text:
        return 0
    if not _INT.fullmatch(text) or not -(2**31) <= int(text) < 2**31:
        raise OrtStatusError(OrtErrorCode.FAIL, f"Failed to parse the cuda graph annotation id: {text}")
    return int(text)


class GraphCapture:
    """Whether a session uses graph capture, and the run loop that does.

    Args:
        ep: the session's EP (None: every node runs on the CPU, no graph capture).
        graph: the session's model graph (control-flow nodes refuse graph capture).
        node_assignment: node name -> the EP name running it ("CPUExecutionProvider" for the CPU).
        config: the session config entries (``epabi.graph_capture.on_binding_change``).

    Raises:
        OrtStatusError: the EP enables graph capture but the model cannot use it (control flow, or nodes on
            the CPU under ALL_NODES_ON_EP); INVALID_ARGUMENT for an unknown on_binding_change policy.

    Thread-safety: ``run`` may be called from several threads at once (graphs are per thread, and so are the
    binding keys kept here).
    """

    def __init__(self, ep: Ep | None, graph: GraphView, node_assignment: dict[str, str],
                 config: Mapping[str, str] | None = None) -> None:
        self.ep = ep
        self.enabled = False
        self.policy = binding_policy((config or {}).get(ON_BINDING_CHANGE))
        # (thread ident, annotation id) -> the binding key of the run that captured it (capture_bindings)
        self._captured: dict[tuple[int, int], tuple] = {}
        if ep is None or "IsGraphCaptureEnabled" not in ep.members or not ep.call("IsGraphCaptureEnabled"):
            return
        if not {"IsGraphCaptured", "ReplayGraph"} <= set(ep.members):
            _log.warning("%s did not implement IsGraphCaptured and ReplayGraph; ORT will not use this EP for "
                         "graph capture/replay", ep.name)
            return
        if any(n.op_type in _CONTROL_FLOW for n in graph.nodes):
            raise OrtStatusError(OrtErrorCode.FAIL, "This session cannot use the graph capture feature as requested "
                                 f"by the user as the model has control flow nodes which can't be supported by "
                                 f"{ep.name}")
        policy = ep.call("GetGraphCaptureNodeAssignmentPolicy") \
            if "GetGraphCaptureNodeAssignmentPolicy" in ep.members else ALL_NODES_ON_EP
        on_cpu = [n for n, where in node_assignment.items() if where != ep.name]
        if on_cpu and policy == ALL_NODES_ON_EP:
            raise OrtStatusError(OrtErrorCode.FAIL, "This session cannot use the graph capture feature as requested "
                                 f"by the user as all the graph nodes have not been assigned to {ep.name}")
        if on_cpu:
            _log.warning("Some nodes were not assigned to the preferred execution providers which may or may not "
                         "have an negative impact on performance. e.g. ORT explicitly assigns shape related ops "
                         "to CPU to improve perf. (on the CPU: %s)", ", ".join(on_cpu))
        _log.info("This session will use the graph capture feature as requested by the user with %s", ep.name)
        self.enabled = True
        self.replays = 0
        self._sync_after_replay = ep.host.behaviour.syncs_after_replay and "Sync" in ep.members

    def release(self, graph_id: int) -> None:
        """``OrtApi::SessionReleaseCapturedGraph``: the EP drops the calling thread's graph of the id, which the
        next runs capture again. Raises OrtStatusError (NOT_IMPLEMENTED without graph capture or without
        ``OrtEp::ReleaseCapturedGraph``, which hosts older than its since-version do not read)."""
        ep = self.ep
        if not self.enabled or "ReleaseCapturedGraph" not in ep.members:
            raise OrtStatusError(OrtErrorCode.NOT_IMPLEMENTED, "releasing a captured graph needs graph capture "
                                 "on an EP that implements OrtEp::ReleaseCapturedGraph "
                                 f"(API {RELEASE_CAPTURED_GRAPH_SINCE} and newer)")
        ep.call_status("ReleaseCapturedGraph", graph_id)
        self._captured.pop((threading.get_ident(), graph_id), None)

    def run(self, execute: Callable[[], tuple[dict[str, Any], Any]], run_options: RunOptions | None,
            replayed: Callable[[], dict[str, Any]], bindings: CallBindings | None = None,
            around_replay: Callable[[], AbstractContextManager[None]] = nullcontext) -> dict[str, Any]:
        """``execute`` runs the graph once and returns its outputs and the run's state (its ``values`` by name);
        ``replayed`` gives the outputs after a replay; ``bindings`` are the call's feeds and bound outputs (None:
        no binding check, no aliasing undone); ``around_replay()`` is entered around ``ReplayGraph`` and its
        ``Sync`` (the session's ``model_run`` profile event). As in ORT, nothing of a capturing run outlives it but
        the caller's buffers: a replay may only use what the caller bound and the session's initializers.

        Raises:
            StaleReplayError: the id's graph was captured with other bindings (policy ``error``, or
                ``recapture`` on an EP without ``OrtEp::ReleaseCapturedGraph``).
            OrtStatusError: ORT's loop errors, the EP's errors, an unknown policy in the run options.
        """
        ep = self.ep
        graph_id = annotation_id(run_options)
        policy = self.policy if run_options is None else \
            binding_policy(run_options.config.get(ON_BINDING_CHANGE), self.policy)
        slot = (threading.get_ident(), graph_id)
        executions = 0
        snapshot = None
        try:
            while True:
                if graph_id != -1 and ep.call("IsGraphCaptured", graph_id):
                    if bindings is not None and policy != "replay" and self._stale(slot, bindings, policy):
                        continue  # released: IsGraphCaptured now says no, and the loop captures again
                    with around_replay():
                        ep.call_status("ReplayGraph", graph_id)
                        if self._sync_after_replay:
                            ep.call_status("Sync")
                    ep.call("IsGraphCaptureEnabled")
                    ep.call("IsGraphCaptured", graph_id)
                    self.replays += 1
                    return replayed()
                if snapshot is not None:
                    snapshot.restore()  # undo the previous hidden execution on state bound as input and output
                elif executions == 0 and graph_id != -1 and bindings is not None:
                    snapshot = bindings.snapshot_aliased()
                outputs, state = execute()
                executions += 1
                if graph_id == -1 or not ep.call("IsGraphCaptureEnabled"):
                    return outputs
                if ep.call("IsGraphCaptured", graph_id):
                    if bindings is not None:
                        self._captured[slot] = bindings.key(state.values)
                    snapshot = None
                    return outputs
                if executions >= MAX_CAPTURE_RUNS:
                    raise OrtStatusError(OrtErrorCode.FAIL, f"Graph capture did not complete after "
                                         f"{MAX_CAPTURE_RUNS} internal runs for {ep.name} (annotation id {graph_id})")
                _log.info("Start another run for necessary memory allocation or graph capture.")
        except BaseException:
            if snapshot is not None and executions:
                snapshot.restore()  # a failed call leaves bound state as it found it
            raise

    def _stale(self, slot: tuple[int, int], bindings: CallBindings, policy: str) -> bool:
        """Compares the call's binding key with the capturing run's: False when they match (or nothing was
        recorded); True after releasing the graph (policy ``recapture``). Raises StaleReplayError otherwise."""
        captured = self._captured.get(slot)
        if captured is None:
            return False
        now = bindings.key()
        if now == captured:
            return False
        graph_id = slot[1]
        if policy == "recapture" and "ReleaseCapturedGraph" in self.ep.members:
            self.ep.call_status("ReleaseCapturedGraph", graph_id)
            del self._captured[slot]
            _log.info("annotation id %d: bindings changed since its capture (%s); released the graph to capture "
                      "again (%s=recapture)", graph_id,
                      "; ".join(f"{v} {w}" for v, w, _, _ in bindings.layout.changes(captured, now)),
                      ON_BINDING_CHANGE)
            return True
        note = "" if policy == "error" else (f" (recapture needs OrtEp::ReleaseCapturedGraph, hosts of API "
                                             f"{RELEASE_CAPTURED_GRAPH_SINCE} and newer)")
        raise bindings.layout.stale_error(graph_id, captured, now, note)
