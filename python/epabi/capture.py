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
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from ._ffi import enum_value
from .errors import OrtErrorCode, OrtStatusError
from .versions import RELEASE_CAPTURED_GRAPH_SINCE

if TYPE_CHECKING:
    from .ep import Ep
    from .graph_view import GraphView
    from .run_options import RunOptions

_log = logging.getLogger("epabi.session")

MAX_CAPTURE_RUNS = 8
_POLICY = "OrtGraphCaptureNodeAssignmentPolicy"
ALL_NODES_ON_EP = enum_value(_POLICY, f"{_POLICY}_ALL_NODES_ON_EP")
_CONTROL_FLOW = {"If", "Loop", "Scan"}


_INT = re.compile(r"-?[0-9]+")


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

    Raises:
        OrtStatusError: the EP enables graph capture but the model cannot use it (control flow, or nodes on
            the CPU under ALL_NODES_ON_EP).
    """

    def __init__(self, ep: Ep | None, graph: GraphView, node_assignment: dict[str, str]) -> None:
        self.ep = ep
        self.enabled = False
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

    def run(self, execute: Callable[[], tuple[dict[str, Any], object]], run_options: RunOptions | None,
            replayed: Callable[[], dict[str, Any]],
            around_replay: Callable[[], AbstractContextManager[None]] = nullcontext) -> dict[str, Any]:
        """``execute`` runs the graph once and returns its outputs and the run's state; ``replayed`` gives the
        outputs after a replay; ``around_replay()`` is entered around ``ReplayGraph`` and its ``Sync`` (the
        session's ``model_run`` profile event). As in ORT, nothing of a capturing run outlives it but the caller's
        buffers: a replay may only use what the caller bound and the session's initializers."""
        ep = self.ep
        graph_id = annotation_id(run_options)
        executions = 0
        while True:
            if graph_id != -1 and ep.call("IsGraphCaptured", graph_id):
                with around_replay():
                    ep.call_status("ReplayGraph", graph_id)
                    if self._sync_after_replay:
                        ep.call_status("Sync")
                ep.call("IsGraphCaptureEnabled")
                ep.call("IsGraphCaptured", graph_id)
                self.replays += 1
                return replayed()
            outputs, _ = execute()
            executions += 1
            if graph_id == -1 or not ep.call("IsGraphCaptureEnabled"):
                return outputs
            if ep.call("IsGraphCaptured", graph_id):
                return outputs
            if executions >= MAX_CAPTURE_RUNS:
                raise OrtStatusError(OrtErrorCode.FAIL, f"Graph capture did not complete after {MAX_CAPTURE_RUNS} "
                                     f"internal runs for {ep.name} (annotation id {graph_id})")
            _log.info("Start another run for necessary memory allocation or graph capture.")
