"""What the ``epabi`` subcommands share: the one-line error they exit with, the plugin errors they report,
a host's hardware (discovered or injected with ``--hardware``), the emulated release (``--host-version``), the
hint for a plugin without devices, collecting plugin log records."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from . import EP_NAME
from .errors import ConductError, HostLimitationError, OrtStatusError, PluginLoadError
from .hardware import cpu_device, discover_hardware, parse_hardware
from .host import Host
from .objects import HardwareDevice
from .versions import NEWEST_EMULATED, RELEASES, parse_api_version

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


def hardware(cpu_only: bool, injected: list[HardwareDevice] | None = None) -> list[HardwareDevice]:
    """The hardware devices a command's host offers: those ``--hardware`` injected, else the CPU alone
    (``--cpu-only``), else what discovery finds (CPU + GPUs). Raises CliError for both options at once."""
    if injected:
        if cpu_only:
            raise CliError("--cpu-only and --hardware exclude each other: --hardware lists every device the host "
                           "offers")
        return list(injected)
    return [cpu_device()] if cpu_only else discover_hardware()


def add_host_version_option(parser: argparse.ArgumentParser) -> None:
    """``--host-version VERSION``: the ONNX Runtime release (or API) the emulated host emulates; None: newest."""
    parser.add_argument("--host-version", type=host_version_arg, default=None, metavar="VERSION",
                        help=f"ONNX Runtime release or API to emulate: 1.24, 1.24.4 or 24 (default: newest, "
                             f"{RELEASES[NEWEST_EMULATED]}); a patch release must be the one epabi emulates")


def host_version_arg(text: str) -> int:
    """argparse type of ``--host-version``: :func:`epabi.versions.parse_api_version`, errors as usage errors."""
    try:
        return parse_api_version(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def hardware_arg(text: str) -> HardwareDevice:
    """argparse type of ``--hardware``: :func:`epabi.hardware.parse_hardware`, errors as usage errors."""
    try:
        return parse_hardware(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


#: The hint for the epabi plugin without devices: its own switches.
OUR_NO_DEVICE_HINT = (
    "hint: set EPABI_ALLOW_SOFTWARE_ADAPTER=1 to let the epabi plugin offer its CPU software adapter, or "
    "register with a name ending in '.virtual' (--name epabi.virtual) to list its virtual device"
)


def describe_hardware(offered: list[HardwareDevice]) -> str:
    """The hardware devices a host offered, for messages: ``"CPU GenuineIntel (0x8086), NPU Intel (0x8086)"``."""
    return ", ".join(f"{hw.type.name} {hw.vendor} ({hw.vendor_id:#06x})" for hw in offered) or "none"


def no_device_hint(library: str, factory_names: list[str], offered: list[HardwareDevice]) -> str:
    """What to try when a registered plugin library lists no EP device, naming the plugin (its factories, else
    the library file) and the hardware the host offered it."""
    if EP_NAME in factory_names:
        kinds = {hw.type.name for hw in offered}
        if "CPU" not in kinds and not any(hw.type.name == "GPU" and hw.vendor_id == 0x10DE for hw in offered):
            # the software adapter sits on the CPU hardware device: without one, the switch alone does nothing
            return (f"hint: the epabi plugin offers EP devices on NVIDIA GPUs and its software adapter on the CPU "
                    f"(with EPABI_ALLOW_SOFTWARE_ADAPTER=1); this host offered neither ({describe_hardware(offered)})"
                    ": add --hardware cpu (or --hardware gpu:nvidia:DEVICE_ID), or register with a name ending in "
                    "'.virtual' (--name epabi.virtual) to list its virtual device")
        return OUR_NO_DEVICE_HINT
    if not factory_names:
        return (f"hint: {Path(library).name} created no EP factory for this host; run with -v for the plugin's "
                "messages (epabi inspect LIBRARY tries every emulated API version)")
    plugin = (f"the plugin's factory {factory_names[0]} offers" if len(factory_names) == 1 else
              f"the plugin's factories {', '.join(factory_names)} offer")
    devices = describe_hardware(offered)
    return (f"hint: {plugin} no EP device for the hardware this host offered ({devices}); plugins often "
            "list devices only for their vendor's hardware (OpenVINO: an Intel CPU): inject one with --hardware "
            "(e.g. --hardware cpu:intel), or run with -v for the plugin's messages")


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
