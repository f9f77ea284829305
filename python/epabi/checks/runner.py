"""``epabi.check(...)``: every check at every chosen API version, each version in its own process by default.

A plugin keeps process-wide state (the first host's API table, its globals when it cannot be unloaded), so
versions checked one after another in one process would see each other; and a plugin that crashes would end
the whole check. Each version therefore runs in a process of its own, forked from a fresh worker process that
never loaded the plugin (:mod:`epabi.checks.worker`), several at once; a child that dies or overruns
``timeout`` fails the check it was running. ``isolate=False`` runs them in this process, one after another
(what a debugger wants).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import onnx

from ..cmd_common import plugin_logs
from ..errors import CheckArgumentError
from ..objects import HardwareDevice
from .catalogue import BY_ID, CHECK_IDS
from .outcome import CheckResult, Status, VersionReport
from .spec import (
    DEFAULT_ATOL,
    DEFAULT_CAPTURE_OPTIONS,
    DEFAULT_CYCLES,
    DEFAULT_RTOL,
    DEFAULT_TIMEOUT,
    QUICK_CYCLES,
    CheckSpec,
)
from .version_range import parse_versions
from .version_run import run_version
from .worker import PREFIX

#: Function and capture checks whose failure at an older API, while they pass at the newest, points at members
#: the older API does not read (``version_gating``).
_VERSION_SENSITIVE = tuple(c for c in CHECK_IDS if BY_ID[c].category == "function")
_STDERR_TAIL = 3
#: Seconds the worker may take beyond the versions' own timeouts (its start, the last reports).
_WORKER_SLACK = 120


def check(library: str | os.PathLike[str], versions: str | list[int] | None = None, ep: str | None = None, *,
          name: str | None = None, hardware: list[HardwareDevice] | None = None,
          ep_options: dict[str, str] | None = None, capture_options: dict[str, str] | None = None,
          models: list[str] | None = None, quick: bool = False, cycles: int | None = None,
          rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL, isolate: bool = True, jobs: int | None = None,
          timeout: float = DEFAULT_TIMEOUT, verbose: bool = False) -> CheckResult:
    """Checks a plugin EP library at every API version of ``versions``; see :mod:`epabi.checks` for the checks.

    Args:
        library: the plugin library (a path).
        versions: ``"1.24..newest"``, ``"24,26,32"``, a list of API numbers, or None (every emulated version;
            :mod:`epabi.checks.version_range`).
        ep: the factory (EP) to check when the library has several; None: the first.
        name: the registration name (default: ``ep``, else ``"epabi"``; onnxruntime-ggml names its EP after it).
        hardware: the hardware devices the host offers (None: discovered). OpenVINO offers devices only on an
            Intel CPU: ``[epabi.HardwareDevice(epabi.OrtHardwareDeviceType.CPU, 0x8086, "Intel")]``.
        ep_options: provider options of every EP and session.
        capture_options: provider options the graph-capture checks add (default ``enable_cuda_graph=1``).
        models: ONNX files the function check runs besides its probe models.
        quick: fewer growth cycles (:data:`~epabi.checks.spec.QUICK_CYCLES`) and probe models.
        cycles: register/unregister cycles of ``no_growth`` (overrides ``quick``).
        rtol, atol: tolerances of outputs against ORT's CPU EP.
        isolate: run each version in its own process (default); False runs them here, in turn.
        jobs: versions checked at once when isolated (default: the CPU count).
        timeout: seconds one version may take when isolated.
        verbose: show the plugin's log messages (INFO) on stderr.

    Returns:
        A :class:`~epabi.checks.outcome.CheckResult`; ``result.ok`` is False when a check failed.

    Raises:
        CheckArgumentError: no such library file, a bad version range or option, or an ``ep`` no factory of the
            library has at any version where it registered.

    Thread-safety: runs hosts of its own; call it from one thread at a time when ``isolate`` is False.
    """
    path = Path(library)
    if not path.exists():
        raise CheckArgumentError(f"no such library file: {library}")
    if not path.is_file():
        raise CheckArgumentError(f"not a file: {library}")
    apis = parse_versions(versions)
    if cycles is not None and cycles < 1:
        raise CheckArgumentError(f"cycles={cycles}: at least 1 register/unregister cycle is needed")
    if rtol < 0 or atol < 0:
        raise CheckArgumentError(f"rtol={rtol}, atol={atol}: tolerances cannot be negative")
    if timeout <= 0:
        raise CheckArgumentError(f"timeout={timeout}: seconds must be positive")
    spec = CheckSpec(library=str(path.resolve()), ep=ep, name=name or ep or "epabi",
                     hardware=None if hardware is None else list(hardware), ep_options=dict(ep_options or {}),
                     capture_options=dict(DEFAULT_CAPTURE_OPTIONS if capture_options is None else capture_options),
                     models=[str(Path(m).resolve()) for m in models or []],
                     cycles=cycles if cycles is not None else (QUICK_CYCLES if quick else DEFAULT_CYCLES),
                     quick=quick, rtol=rtol, atol=atol, timeout=timeout)
    for model in spec.models:
        if not Path(model).is_file():
            raise CheckArgumentError(f"no such model file: {model}")
        try:
            onnx.load(model, load_external_data=False)
        except Exception as exc:  # protobuf raises several types
            raise CheckArgumentError(f"{model} is not an ONNX model: {exc}") from exc
    if isolate and hasattr(os, "fork"):
        reports = _run_isolated(spec, apis, max(1, min(len(apis), jobs or os.cpu_count() or 1)), verbose)
    else:
        reports = {}
        with plugin_logs(logging.INFO if verbose else None):
            for api in apis:
                reports[api] = run_version(spec, api)
    _judge_gating(reports)
    seen = {f["name"] for r in reports.values() for f in r.info.get("factories", [])}
    if ep is not None and ep not in seen and any(r.info.get("factories") for r in reports.values()):
        raise CheckArgumentError(f"no factory of {path.name} is named {ep!r} at any checked version (its "
                                 f"factories: {', '.join(sorted(seen))})")
    ep_name = ep or next((r.info["ep_name"] for r in reports.values() if "ep_name" in r.info), None)
    options = {k: v for k, v in spec.to_json().items() if k not in ("library", "ep", "name")}
    return CheckResult(spec.library, ep_name, spec.name, apis, reports, options)


def _run_isolated(spec: CheckSpec, apis: list[int], jobs: int, verbose: bool) -> dict[int, VersionReport]:
    """Every version in a child of a fresh worker process (:mod:`epabi.checks.worker`); a child that dies or
    overruns ``spec.timeout`` fails the check it was running."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parent.parent.parent)  # the epabi this process runs, also there
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env.setdefault("PYTHONFAULTHANDLER", "1")  # a crash leaves the Python stack in the child's output
    request = json.dumps({"spec": spec.to_json(), "apis": apis, "jobs": jobs, "verbose": verbose})
    rounds = -(-len(apis) // jobs)
    try:
        proc = subprocess.run([sys.executable, "-m", "epabi.checks.worker"], input=request, capture_output=True,
                              text=True, env=env, timeout=spec.timeout * rounds + _WORKER_SLACK, check=False)
        stdout, stderr, code = proc.stdout, proc.stderr, f"exited with code {proc.returncode}"
    except subprocess.TimeoutExpired as exc:  # the children die with the worker (PR_SET_PDEATHSIG)
        stdout, stderr = (_text(exc.stdout), _text(exc.stderr))
        code = f"was stopped after {exc.timeout:g} s"
    started: dict[int, list[str]] = {api: [] for api in apis}
    finished: dict[int, list[list[str]]] = {api: [] for api in apis}
    reports: dict[int, VersionReport] = {}
    for line in stdout.splitlines():
        if not line.startswith(PREFIX):
            continue
        event = json.loads(line[len(PREFIX):])
        api = int(event["api"])
        if "started" in event:
            started[api].append(event["started"])
        elif "outcome" in event:
            finished[api].append(event["outcome"])
        elif "report" in event:
            report = reports[api] = VersionReport(api, info=event["report"]["info"])
            for check_id, status, reason in event["report"]["outcomes"]:
                report.set(check_id, Status(status), reason)
        elif "died" in event:
            reports[api] = _died(api, started[api], finished[api], event["died"], event.get("stderr", ""))
        elif "stderr" in event and verbose:
            sys.stderr.write(f"--- API {api} ---\n{event['stderr']}")
    for api in apis:
        if api not in reports:  # the worker itself failed
            tail = " | ".join(stderr.strip().splitlines()[-_STDERR_TAIL:])
            reports[api] = _died(api, started[api], finished[api], f"was lost: the worker {code}", tail)
    return reports


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", "replace")


def _died(api: int, started: list[str], finished: list[list[str]], how: str, tail: str) -> VersionReport:
    """The report of a version whose process ended early: the verdicts it reported, the check it was running
    failed with how it ended, the rest skipped."""
    report = VersionReport(api, info={"crashed": how})
    for check_id, status, reason in finished:
        report.set(check_id, Status(status), reason)
    last = started[-1] if started else "register"
    culprit = {"register": "required_functions", "unregister": "release_and_unload"}.get(last, last)
    where = {"register": "registration", "unregister": "unregistration"}.get(last, last)
    report.set(culprit, Status.FAIL, f"the check process {how} during {where}" + (f" (output: {tail})" if tail else ""))
    for check_id in CHECK_IDS:
        if check_id not in report.outcomes:
            report.set(check_id, Status.SKIP, f"not run: the check process {how} during {where}")
    return report


def _judge_gating(reports: dict[int, VersionReport]) -> None:
    """``version_gating`` across versions: a function check failing at an older API that passes at the newest
    checked one fails there too when the older API leaves members of the plugin unread."""
    registered = [api for api, r in reports.items() if r.info.get("registered")]
    if len(registered) < 2:
        return
    newest = reports[max(registered)]
    for api in sorted(registered)[:-1]:
        report = reports[api]
        gating = report.outcomes.get("version_gating")
        unread = report.info.get("unread_members") or []
        if gating is None or gating.status is not Status.PASS or not unread:
            continue
        broken = [c for c in _VERSION_SENSITIVE if report.outcomes.get(c) is not None
                  and report.outcomes[c].status is Status.FAIL and newest.outcomes.get(c) is not None
                  and newest.outcomes[c].status is Status.PASS]
        if broken:
            report.set("version_gating", Status.FAIL,
                       f"{', '.join(broken)} fail here but pass at API {newest.api}; this API does not read "
                       f"{', '.join(unread)}, which the plugin set: it seems to depend on them")

