"""Runs every check at one API version in this process: registers the library, runs the ``ort`` and
``function`` checks on it, unregisters, runs ``no_growth``, then judges the ``conduct`` checks from what the
host noticed throughout.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..cmd_common import one_line
from ..errors import ConductError, HostLimitationError, OrtStatusError, PluginLoadError
from . import conduct, function, graph_capture, growth, invariants
from .catalogue import CHECK_IDS
from .outcome import Outcome, Status, VersionReport
from .probe import CheckFailed, CheckSkipped, Probe
from .spec import CheckSpec

_log = logging.getLogger("epabi.check")

CheckFn = Callable[[Probe], str]

#: Checks run while the library is registered, in this order.
WHILE_REGISTERED: dict[str, CheckFn] = {
    "required_functions": invariants.required_functions,
    "ep_created": invariants.ep_created,
    "ep_type": invariants.ep_type,
    "preferred_layout": invariants.preferred_layout,
    "cpu_memory_types": invariants.cpu_memory_types,
    "preferred_allocators": invariants.preferred_allocators,
    "allocator_memory": invariants.allocator_memory,
    "data_transfer": invariants.data_transfer,
    "metadata_queries": invariants.metadata_queries,
    "capture_policy": invariants.capture_policy,
    "compile_or_kernels": invariants.compile_or_kernels,
    "null_optional_members": invariants.null_optional_members,
    "model_matches_cpu": function.model_matches_cpu,
    "capture_first_run": graph_capture.capture_first_run,
    "capture_replay": graph_capture.capture_replay,
    "capture_ids": graph_capture.capture_ids,
    "capture_no_graph_id": graph_capture.capture_no_graph_id,
    "capture_release_graph": graph_capture.capture_release_graph,
    "capture_per_thread": graph_capture.capture_per_thread,
}
#: Checks run after unregistration, in this order (``no_growth`` first: its host's findings count too).
AFTER_CLOSE: dict[str, CheckFn] = {
    "no_growth": growth.no_growth,
    "statuses": conduct.statuses,
    "api_version": conduct.api_version,
    "version_sane": conduct.version_sane,
    "version_gating": conduct.version_gating,
    "release_and_unload": conduct.release_and_unload,
    "conduct_report": conduct.conduct_report,
}
if set(WHILE_REGISTERED) | set(AFTER_CLOSE) != set(CHECK_IDS):
    raise ImportError("epabi.checks.version_run does not run exactly the checks of the catalogue")


def _run_one(probe: Probe, check: str, fn: CheckFn, report: VersionReport,
             finished: Callable[[Outcome], None]) -> None:
    try:
        _judge(probe, check, fn, report)
    finally:
        if check in report.outcomes:
            finished(report.outcomes[check])


def _judge(probe: Probe, check: str, fn: CheckFn, report: VersionReport) -> None:
    try:
        report.set(check, Status.PASS, fn(probe))
    except CheckFailed as exc:
        report.set(check, Status.FAIL, str(exc))
    except CheckSkipped as exc:
        report.set(check, Status.SKIP, str(exc))
    except (OrtStatusError, ConductError) as exc:
        probe.record(exc)
        report.set(check, Status.FAIL, one_line(exc))
    except HostLimitationError as exc:
        report.set(check, Status.SKIP, f"epabi host limitation: {one_line(exc)}")
    except PluginLoadError as exc:
        report.set(check, Status.FAIL, one_line(exc))
    except Exception as exc:  # a bug of the checker: reported as a failure, never a traceback
        _log.debug("epabi check: %s raised", check, exc_info=True)
        report.set(check, Status.FAIL, f"epabi check error (a bug in epabi, please report it): {one_line(exc)}")


def run_version(spec: CheckSpec, api: int, started: Callable[[str], None] | None = None,
                finished: Callable[[Outcome], None] | None = None) -> VersionReport:
    """Every check at API ``api``; ``started(check)`` is called as each begins and ``finished(outcome)`` as it
    ends (the isolated worker reports both, so a crash is pinned on the check that was running and the verdicts
    before it are kept). Never raises for what the plugin does."""
    begin = time.monotonic()
    report = VersionReport(api)
    probe = Probe(spec, api)
    note = started or (lambda check: None)
    done = finished or (lambda outcome: None)
    note("register")
    try:
        try:
            probe.open()
        except Exception as exc:  # a bug of the checker: every check fails with it
            _log.debug("epabi check: registration raised", exc_info=True)
            reason = f"epabi check error (a bug in epabi, please report it): {one_line(exc)}"
            for check in CHECK_IDS:
                report.set(check, Status.FAIL, reason)
                done(report.outcomes[check])
            return report
        for check, fn in WHILE_REGISTERED.items():
            note(check)
            _run_one(probe, check, fn, report, done)
    finally:
        note("unregister")
        probe.close()
    if len(report.outcomes) == len(CHECK_IDS):  # failed before the checks ran
        return report
    for check, fn in AFTER_CLOSE.items():
        note(check)
        _run_one(probe, check, fn, report, done)
    report.info.update(probe.info)
    report.info["registered"] = probe.registered
    report.info["seconds"] = round(time.monotonic() - begin, 3)
    return report
