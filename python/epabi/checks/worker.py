"""The process that runs the API versions of an isolated ``epabi check`` (``python -m epabi.checks.worker``).

It is started fresh (it never loads the plugin itself), imports epabi once, then forks one child per API
version, ``jobs`` at a time: each child gets a clean copy of a process in which no plugin was ever loaded, so
versions cannot see each other's plugin state, and a child that crashes or hangs takes only its version with
it. Forking saves a Python start and an import of epabi per version.

Reads ``{"spec": CheckSpec.to_json(), "apis": [...], "jobs": N, "verbose": bool}`` from stdin. Writes one line
per event to stdout, ``EPABI-CHECK `` followed by JSON with the ``api`` and one of: ``started`` (a check, or
``register`` / ``unregister``, begins), ``outcome`` (``[check, status, reason]`` of a check that ended),
``report`` (the version's outcomes and facts), ``died`` (how the child ended without a report) with ``stderr``
(its last lines). A child's stdout and stderr (the plugin's prints, log records of WARNING and above, INFO too
with ``verbose``) are collected; with ``verbose`` every child's output is passed on as ``stderr`` events.
POSIX only (``os.fork``).
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

#: Marks the worker's lines on stdout.
PREFIX = "EPABI-CHECK "
#: Lines of a dead child's stderr that reach its report.
STDERR_LINES = 4
_CHILD_FAILED = 70
_PR_SET_PDEATHSIG = 1


def emit(stream: Any, event: dict[str, Any]) -> None:
    stream.write(PREFIX + json.dumps(event) + "\n")
    stream.flush()


@dataclass
class _Child:
    api: int
    pid: int
    events: int
    output: int
    deadline: float
    buffer: bytes = b""
    stderr: bytearray = field(default_factory=bytearray)
    open_fds: int = 2
    status: int | None = None
    reported: bool = False
    killed: bool = False


def _child_main(spec: Any, api: int, verbose: bool, events_fd: int) -> None:
    """In the forked child: run the version, write its events to ``events_fd``; never returns."""
    code = 0
    try:
        from ..cmd_common import plugin_logs
        from .version_run import run_version

        stream = os.fdopen(events_fd, "w", buffering=1)
        with plugin_logs(logging.INFO if verbose else logging.WARNING):
            report = run_version(spec, api, started=lambda check: emit(stream, {"started": check}),
                                 finished=lambda o: emit(stream, {"outcome": [o.check, o.status.value, o.reason]}))
        emit(stream, {"report": {"api": report.api, "info": report.info,
                                 "outcomes": [[o.check, o.status.value, o.reason] for o in report.ordered()]}})
        stream.close()
    except BaseException:  # a bug of the checker: its traceback goes to the report's stderr lines
        traceback.print_exc()
        code = _CHILD_FAILED
    finally:
        sys.stderr.flush()
        os._exit(code)


def _die_with_parent() -> None:
    """Linux: the child gets SIGKILL when the worker dies (a worker stopped for overrunning leaves no orphans)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _spawn(spec: Any, api: int, verbose: bool, timeout: float) -> _Child:
    events_r, events_w = os.pipe()
    output_r, output_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(events_r)
        os.close(output_r)
        os.dup2(output_w, 1)  # the plugin's prints and log records: collected, never mixed with the events
        os.dup2(output_w, 2)
        os.close(output_w)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        _die_with_parent()
        _child_main(spec, api, verbose, events_w)
    os.close(events_w)
    os.close(output_w)
    return _Child(api, pid, events_r, output_r, time.monotonic() + timeout)


def run(spec: Any, apis: list[int], jobs: int, verbose: bool, out: Any) -> None:
    """Runs every version in its own forked child, ``jobs`` at once; writes the events to ``out``."""
    queue = list(apis)
    running: dict[int, _Child] = {}
    selector = selectors.DefaultSelector()
    while queue or running:
        while queue and len(running) < jobs:
            child = _spawn(spec, queue.pop(0), verbose, spec.timeout)
            running[child.pid] = child
            selector.register(child.events, selectors.EVENT_READ, (child, "events"))
            selector.register(child.output, selectors.EVENT_READ, (child, "output"))
        for key, _ in selector.select(timeout=0.2):
            child, kind = key.data
            chunk = os.read(key.fd, 65536)
            if not chunk:
                selector.unregister(key.fd)
                os.close(key.fd)
                child.open_fds -= 1
            elif kind == "output":
                child.stderr += chunk
            else:
                child.buffer += chunk
                *lines, child.buffer = child.buffer.split(b"\n")
                for line in lines:
                    text = line.decode("utf-8", "replace")
                    if text.startswith(PREFIX):
                        event = json.loads(text[len(PREFIX):])
                        child.reported = child.reported or "report" in event
                        emit(out, {"api": child.api, **event})
        now = time.monotonic()
        for pid, child in list(running.items()):
            if child.status is None:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    child.status = status
                elif now > child.deadline and not child.killed:
                    os.kill(pid, signal.SIGKILL)
                    child.killed = True
            if child.status is not None and child.open_fds == 0:
                del running[pid]
                _finish(child, spec.timeout, verbose, out)


def _finish(child: _Child, timeout: float, verbose: bool, out: Any) -> None:
    text = child.stderr.decode("utf-8", "replace")
    if verbose and text:
        emit(out, {"api": child.api, "stderr": text})
    if child.reported and os.WIFEXITED(child.status) and os.WEXITSTATUS(child.status) == 0:
        return
    if child.killed:
        how = f"was stopped after {timeout:g} s"
    elif os.WIFSIGNALED(child.status):
        number = os.WTERMSIG(child.status)
        try:
            how = f"died of {signal.Signals(number).name}"
        except ValueError:
            how = f"died of signal {number}"
    else:
        how = f"exited with code {os.WEXITSTATUS(child.status)} without a report"
    emit(out, {"api": child.api, "died": how, "stderr": " | ".join(_last_words(text))})


def _last_words(text: str) -> list[str]:
    """What a dead child's output says about its end: with a faulthandler dump, the lines before it, its headline
    and the innermost frame (faulthandler lists the most recent call first); else the last lines."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    fatal = next((i for i, line in enumerate(lines) if line.startswith("Fatal Python error")), None)
    if fatal is None:
        return lines[-STDERR_LINES:]
    frame = next((line for line in lines[fatal + 1:] if line.startswith("File ")), None)
    return lines[max(0, fatal - 2):fatal + 1] + ([frame] if frame else [])


def main() -> int:
    from . import version_run  # noqa: F401 - imported once here, so that no child imports anything
    from .spec import CheckSpec

    request = json.loads(sys.stdin.read())
    spec = CheckSpec.from_json(request["spec"])
    run(spec, [int(a) for a in request["apis"]], max(1, int(request.get("jobs", 1))), bool(request.get("verbose")),
        sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
