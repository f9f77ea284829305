"""The ``capture_*`` checks: the graph capture contract, on a probe model the EP takes whole, in a session made with
``ep_options`` plus ``capture_options`` (API 26+, where ``OrtEp::IsGraphCaptureEnabled`` exists).

Inputs and outputs are bound with IOBinding to buffers that outlive the runs, in the memory the EP computes in
(its device memory when it has any, else host memory), as a replay writes to the captured addresses. Every
output is compared with ORT's CPU EP for the inputs of that run. The host drives capture as ORT's core does
(:mod:`epabi.capture`): a run whose id is not captured executes again, up to 8 times, until the EP says it is.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .._ffi import member_since
from ..cmd_common import one_line
from ..device_memory import device_value_from_numpy, find_device_memory
from ..errors import ConductError, OrtStatusError
from ..models import sample_inputs
from ..run_options import RunOptions
from ..session import InferenceSession
from ..values import OrtValue, onnx_type_of
from ..versions import RELEASE_CAPTURED_GRAPH_SINCE, since_label
from .function_models import compare, reference
from .probe import CheckFailed, CheckSkipped, Probe

_CAPTURE_SINCE = member_since("OrtEp")["IsGraphCaptureEnabled"]
_RIG = "graph_capture"
_FAILED = "graph_capture.failed"
_ERRORS = (OrtStatusError, ConductError)


class Bound:
    """One set of IOBinding buffers: inputs filled from ``feeds``, outputs pre-allocated."""

    def __init__(self, rig: CaptureRig, seed: int) -> None:
        self.rig = rig
        self.feeds = sample_inputs(rig.model, seed=seed)
        self.inputs = {name: rig.value(array) for name, array in self.feeds.items()}
        self.outputs = {name: rig.value(np.zeros(shape, dtype)) for name, (shape, dtype) in rig.output_types.items()}
        self.binding = rig.session.io_binding()
        for name, value in self.inputs.items():
            self.binding.bind_ortvalue_input(name, value)
        for name, value in self.outputs.items():
            self.binding.bind_ortvalue_output(name, value)

    def update(self, seed: int) -> None:
        """New input values, written in place into the bound buffers."""
        self.feeds = sample_inputs(self.rig.model, seed=seed)
        for name, array in self.feeds.items():
            self.inputs[name].update_inplace(array)

    def run(self, graph_id: int | None, what: str) -> None:
        """Runs with ``gpu_graph_id`` (None: not set) and checks every output. Raises CheckFailed."""
        options = RunOptions()
        if graph_id is not None:
            options.add_run_config_entry("gpu_graph_id", str(graph_id))
        try:
            self.rig.session.run_with_iobinding(self.binding, options)
        except _ERRORS as exc:
            self.rig.probe.record(exc)
            raise CheckFailed(f"{what}: {one_line(exc)}") from exc
        self.check(what)

    def check(self, what: str) -> None:
        expected, _ = reference(self.rig.model, self.feeds)
        for (name, value), want in zip(self.outputs.items(), expected, strict=True):
            why, _ = compare(f"{what}: output '{name}'", _host(value), want, self.rig.rtol, self.rig.atol)
            if why:
                raise CheckFailed(why)

    def close(self) -> None:
        for value in (*self.inputs.values(), *self.outputs.values()):
            release = getattr(value, "release", None)
            if release is not None:
                release()


def _host(value: OrtValue) -> np.ndarray:
    return value.numpy()


class CaptureRig:
    """The graph-capture session of one version, made once and shared by the ``capture_*`` checks."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.rtol, self.atol = probe.spec.rtol, probe.spec.atol
        self.first: Bound | None = None
        self.first_error: str | None = None
        self.bound: list[Bound] = []
        if not probe.whole_models:
            raise CheckSkipped("the EP takes no probe model whole (see model_matches_cpu), and a graph replays only "
                               "the EP's own launches")
        self.name, self.model = probe.whole_models[0]
        options = probe.spec.capture_options
        try:
            self.session: InferenceSession = probe.session(self.model, options)
        except OrtStatusError as exc:
            if "CreateEp" in exc.where:  # the EP refuses the options here, as it may (a mode without capture)
                raise CheckSkipped(f"CreateEp refuses {_pairs(options)}: {one_line(exc)}") from exc
            raise CheckFailed(f"a session of {self.name} with {_pairs(options)} failed: {one_line(exc)}") from exc
        except ConductError as exc:
            probe.record(exc)
            raise CheckFailed(f"a session of {self.name} with {_pairs(options)} failed: {one_line(exc)}") from exc
        if not self.session.graph_capture.enabled:
            self.session.close()
            raise CheckSkipped(f"the EP does not enable graph capture with {_pairs(options)} (IsGraphCaptureEnabled "
                               "is false, or IsGraphCaptured/ReplayGraph are not set); --capture-option sets "
                               "the provider options that turn it on")
        self.memory = None
        if self.session.ep_memory_info is not None:
            self.memory = find_device_memory("", memory_info=self.session.ep_memory_info, host=probe.host)
        expected, _ = reference(self.model, sample_inputs(self.model, seed=1))
        self.output_types = {o.name: (list(a.shape), a.dtype) for o, a in
                             zip(self.session.get_outputs(), expected, strict=True)}

    def value(self, array: np.ndarray) -> OrtValue:
        """A buffer holding ``array``: in the EP's device memory when it computes there, else in host memory."""
        array = np.array(array)
        if self.memory is None:
            return OrtValue.ortvalue_from_numpy(array)
        onnx_type_of(array.dtype)  # raises TypeError early for a dtype without an ONNX type
        return device_value_from_numpy(self.memory, array)

    def bind(self, seed: int) -> Bound:
        bound = Bound(self, seed)
        self.bound.append(bound)
        return bound

    @property
    def ep(self) -> Any:
        return self.session.ep

    def replays(self) -> int:
        return int(self.session.graph_capture.replays)

    def captured(self, graph_id: int) -> bool:
        return bool(self.ep.call("IsGraphCaptured", graph_id))

    def close(self) -> None:
        for bound in self.bound:
            bound.close()
        self.bound = []
        self.session.close()


def _pairs(options: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in options.items()) or "no provider options"


def _rig(probe: Probe, need_first: bool = True) -> CaptureRig:
    """The version's capture session, made by the first check that needs it; what kept it from being made is
    raised again to the later checks (as a skip naming the first failure)."""
    if probe.api < _CAPTURE_SINCE:
        raise CheckSkipped("graph capture (OrtEp::IsGraphCaptureEnabled) appeared in ONNX Runtime "
                           f"{since_label(_CAPTURE_SINCE)}")
    probe.require_ep()
    rig = probe.shared.get(_RIG)
    if rig is None:
        failure = probe.shared.get(_FAILED)
        if failure is not None:
            raise failure
        try:
            rig = probe.shared[_RIG] = CaptureRig(probe)
        except CheckSkipped as exc:
            probe.shared[_FAILED] = exc
            raise
        except CheckFailed as exc:
            probe.shared[_FAILED] = CheckSkipped(f"the capture session failed (see capture_first_run): {exc}")
            raise
    if need_first and rig.first is None:
        raise CheckSkipped(f"the first capture failed (see capture_first_run): {rig.first_error}")
    return rig


def capture_first_run(probe: Probe) -> str:
    rig = _rig(probe, need_first=False)
    bound = rig.bind(seed=1)
    mark = len(probe.host.trace)
    try:
        bound.run(None, "the first run")
    except CheckFailed as exc:
        rig.first_error = str(exc)
        raise
    runs = probe.host.trace[mark:].count("OrtEp::OnRunStart")
    rig.first = bound
    state = "captured" if rig.captured(0) else "not yet captured"
    return (f"{rig.name}: the first run_with_iobinding (executed {runs or '?'} time(s) inside the call) is correct; "
            f"graph id 0 {state}")


def capture_replay(probe: Probe) -> str:
    rig = _rig(probe)
    bound = rig.first
    before = rig.replays()
    bound.run(None, "the second run")
    bound.update(seed=2)
    bound.run(None, "a run after update_inplace of the inputs")
    replayed = rig.replays() - before
    if replayed == 0:
        raise CheckFailed("two more runs of graph id 0 after the first were never replays: IsGraphCaptured(0) "
                          "stayed false")
    return f"{replayed} of 2 later runs replayed graph 0, correct before and after update_inplace of the inputs"


def capture_ids(probe: Probe) -> str:
    rig = _rig(probe)
    one, two = rig.bind(seed=11), rig.bind(seed=12)
    one.run(1, "graph id 1, first run")
    two.run(2, "graph id 2, first run")
    before = rig.replays()
    one.run(1, "graph id 1, second run")
    two.run(2, "graph id 2, second run")
    one.update(seed=13)
    one.run(1, "graph id 1 after update_inplace")
    two.check("graph id 2's outputs after a run of graph id 1")
    if not (rig.captured(1) and rig.captured(2)):
        raise CheckFailed(f"IsGraphCaptured: id 1 {rig.captured(1)}, id 2 {rig.captured(2)} after their runs")
    return f"ids 1 and 2 captured separately, {rig.replays() - before} replays over their own buffers, each correct"


def capture_no_graph_id(probe: Probe) -> str:
    rig = _rig(probe)
    mark = len(probe.host.trace)
    first = rig.bind(seed=21)
    first.run(-1, "gpu_graph_id -1, first run")
    second = rig.bind(seed=22)  # other buffers: a stale graph of -1 would write into the first set
    second.run(-1, "gpu_graph_id -1, run over other buffers")
    if probe.host.trace[mark:].count("OrtEp::ReplayGraph"):
        raise CheckFailed("a run with gpu_graph_id -1 was replayed")
    if rig.captured(-1):
        raise CheckFailed("IsGraphCaptured(-1) is true after runs with gpu_graph_id -1")
    return "two runs with gpu_graph_id -1 over different buffers executed (no replay, nothing captured), correct"


def capture_release_graph(probe: Probe) -> str:
    if probe.api < RELEASE_CAPTURED_GRAPH_SINCE:
        raise CheckSkipped("OrtEp::ReleaseCapturedGraph appeared in ONNX Runtime "
                           f"{since_label(RELEASE_CAPTURED_GRAPH_SINCE)}")
    rig = _rig(probe)
    if "ReleaseCapturedGraph" not in rig.ep.members:
        raise CheckSkipped("OrtEp::ReleaseCapturedGraph is NULL or not declared (graphs live as long as the session)")
    old = rig.bind(seed=31)
    old.run(3, "graph id 3, first run")
    old.run(3, "graph id 3, second run")
    try:
        rig.session.release_captured_graph(3)
    except _ERRORS as exc:
        probe.record(exc)
        raise CheckFailed(f"ReleaseCapturedGraph(3) failed: {one_line(exc)}") from exc
    if rig.captured(3):
        raise CheckFailed("IsGraphCaptured(3) is still true after ReleaseCapturedGraph(3)")
    new = rig.bind(seed=32)
    new.run(3, "graph id 3 over new buffers after ReleaseCapturedGraph")
    before = rig.replays()
    new.update(seed=33)
    new.run(3, "graph id 3, replay over the new buffers")
    if rig.replays() == before:
        raise CheckFailed("graph id 3 was not captured again after ReleaseCapturedGraph")
    return "ReleaseCapturedGraph(3) dropped the graph; id 3 captured again over new buffers and replayed correctly"


def capture_per_thread(probe: Probe) -> str:
    rig = _rig(probe)
    errors: list[BaseException] = []

    def other() -> None:
        try:
            bound = rig.bind(seed=41)
            bound.run(0, "graph id 0 on a second thread, first run")
            bound.update(seed=42)
            bound.run(0, "graph id 0 on a second thread, second run")
        except BaseException as exc:  # handed to the main thread
            errors.append(exc)

    thread = threading.Thread(target=other, name="epabi-check-capture")
    thread.start()
    thread.join()
    if errors:
        if isinstance(errors[0], CheckFailed | CheckSkipped):
            raise errors[0]
        raise CheckFailed(f"the second thread's runs failed: {one_line(errors[0])}")
    rig.first.update(seed=43)
    rig.first.run(None, "graph id 0 on the first thread after the second thread's runs")
    return "a second thread's runs of graph id 0 over its own buffers were correct; the first thread's graph still is"

