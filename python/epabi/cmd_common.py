"""What the ``epabi`` subcommands share: the one-line error they exit with, the plugin errors they report,
a host's hardware, collecting plugin log records."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import ConductError, HostLimitationError, OrtStatusError, PluginLoadError
from .hardware import cpu_device, discover_hardware
from .host import Host
from .objects import HardwareDevice
from .versions import RELEASES

#: Errors a plugin (or the host checking it) can raise during registration or EP creation.
PLUGIN_ERRORS = (OrtStatusError, ConductError, PluginLoadError, HostLimitationError)

_LOG = logging.getLogger("epabi")


class CliError(Exception):
    """A failure the CLI reports as one line on stderr with exit code 1."""


def one_line(exc: BaseException) -> str:
    """``"TypeName: message"`` on one line (whitespace runs collapsed), for error lines and reports."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


def release_label(version: int) -> str:
    """``"ONNX Runtime 1.24.4 (API 24)"`` for an emulated API version."""
    return f"ONNX Runtime {RELEASES[version]} (API {version})"


def hardware(cpu_only: bool) -> list[HardwareDevice]:
    """The hardware devices a command's host offers: the CPU alone, or what discovery finds (CPU + GPUs)."""
    return [cpu_device()] if cpu_only else discover_hardware()


def close_host(host: Host) -> str | None:
    """Closes the host; returns the leak report the close raised, if any."""
    try:
        host.close()
    except ConductError as exc:
        return one_line(exc)
    return None


@contextmanager
def plugin_logs(echo_level: int | None) -> Iterator[list[str]]:
    """Collects every plugin log record under ``epabi`` into a list; echoes those >= echo_level to stderr."""
    records: list[str] = []
    formatter = logging.Formatter("%(levelname)s %(name)s: %(message)s")

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(formatter.format(record))

    collect = _Collect(logging.DEBUG)
    handlers: list[logging.Handler] = [collect]
    if echo_level is not None:
        echo = logging.StreamHandler(sys.stderr)
        echo.setLevel(echo_level)
        echo.setFormatter(formatter)
        handlers.append(echo)
    old_level = _LOG.level
    _LOG.setLevel(min(logging.INFO, echo_level or logging.INFO))
    for handler in handlers:
        _LOG.addHandler(handler)
    try:
        yield records
    finally:
        for handler in handlers:
            _LOG.removeHandler(handler)
        _LOG.setLevel(old_level)
