"""``epabi`` command line: list a plugin's EP devices, or inspect any plugin EP library across host versions.

::

    python -m epabi devices [--host-version 1.24] [--library PATH] [--name epabi.virtual] [--json]
    python -m epabi inspect LIBRARY [--json]

Exit codes: 0 when the command did its job (an empty device list included), 1 when it could not (the plugin
refused registration, the file is missing or cannot be loaded), 2 for usage errors. Errors are one line on
stderr. Plugin log messages go to stderr (``devices``) or into the report (``inspect``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum
from pathlib import Path
from typing import Any

from . import __version__, get_library_path, run_cmd
from ._ffi import member_since
from .errors import ConductError, HostLimitationError, OrtStatusError, PluginLoadError
from .gating import host_reads
from .hardware import cpu_device, discover_hardware
from .host import Host
from .library import Factory
from .objects import EpDevice, HardwareDevice, MemoryInfo, OrtAllocatorType
from .session_options import SessionOptions
from .versions import NEWEST_EMULATED, OLDEST_EMULATED, RELEASES, parse_api_version

#: Errors a plugin (or the host checking it) can raise during registration or EP creation.
PLUGIN_ERRORS = (OrtStatusError, ConductError, PluginLoadError, HostLimitationError)
#: The two symbols every plugin EP library must export.
REQUIRED_EXPORTS = ("CreateEpFactories", "ReleaseEpFactory")
#: Plugin-table structs the ``inspect`` member matrix covers.
TABLES = ("OrtEpFactory", "OrtEp")

NO_DEVICE_HINT = (
    "hint: set EPABI_ALLOW_SOFTWARE_ADAPTER=1 to let the epabi plugin offer its CPU software adapter, or "
    "register with a name ending in '.virtual' (--name epabi.virtual) to list its virtual device"
)

_LOG = logging.getLogger("epabi")
_MAX_EXPORTS_SHOWN = 12


class CliError(Exception):
    """A failure the CLI reports as one line on stderr with exit code 1."""


# -- helpers -----------------------------------------------------------------------------------------------


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


def _api_version_arg(text: str) -> int:
    try:
        return parse_api_version(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _release(version: int) -> str:
    return f"ONNX Runtime {RELEASES[version]} (API {version})"


def _hardware(cpu_only: bool) -> list[HardwareDevice]:
    return [cpu_device()] if cpu_only else discover_hardware()


def _close_host(host: Host) -> str | None:
    """Closes the host; returns the leak report the close raised, if any."""
    try:
        host.close()
    except ConductError as exc:
        return _one_line(exc)
    return None


@contextmanager
def _plugin_logs(echo_level: int | None) -> Iterator[list[str]]:
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


def _enum_name(enum: type[IntEnum], value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return str(int(value))


def memory_info_dict(info: MemoryInfo) -> dict[str, Any]:
    """JSON view of one memory info: name, device type, memory type, allocator type and its device ids."""
    return {
        "name": info.name,
        "device_type": info.device.device_type.name,
        "memory_type": info.device.mem_type.name,
        "allocator_type": _enum_name(OrtAllocatorType, info.allocator_type),
        "vendor_id": f"{info.vendor_id:#06x}",
        "device_id": info.device_id,
    }


def ep_device_dict(device: EpDevice) -> dict[str, Any]:
    """JSON view of one EP device: EP identity, options, the hardware device and its memory infos."""
    hw = device.device
    return {
        "ep_name": device.ep_name,
        "ep_vendor": device.ep_vendor,
        "ep_metadata": device.ep_metadata,
        "ep_options": device.ep_options,
        "device": {
            "type": hw.type.name,
            "vendor": hw.vendor,
            "vendor_id": f"{hw.vendor_id:#06x}",
            "device_id": hw.device_id,
            "metadata": dict(hw.c_metadata.as_dict()),
        },
        "memory_infos": [memory_info_dict(m) for m in device.memory_infos],
    }


def _pairs(items: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in items.items()) if items else "(none)"


def format_devices(devices: list[dict[str, Any]]) -> list[str]:
    """Human-readable lines for :func:`ep_device_dict` results (no header)."""
    lines: list[str] = []
    for i, dev in enumerate(devices):
        hw = dev["device"]
        lines.append(f"[{i}] {dev['ep_name']} (vendor {dev['ep_vendor']})")
        lines.append(f"    device:        {hw['type']}  vendor {hw['vendor']} ({hw['vendor_id']})  "
                     f"device_id {hw['device_id']:#x}")
        lines.append(f"    device meta:   {_pairs(hw['metadata'])}")
        lines.append(f"    ep_metadata:   {_pairs(dev['ep_metadata'])}")
        lines.append(f"    ep_options:    {_pairs(dev['ep_options'])}")
        if not dev["memory_infos"]:
            lines.append("    memory infos:  (none)")
        for j, info in enumerate(dev["memory_infos"]):
            label = "memory infos: " if j == 0 else "              "
            lines.append(f"    {label} {info['name']}: {info['device_type']} memory {info['memory_type']}, "
                         f"{info['allocator_type']} allocator, vendor {info['vendor_id']} "
                         f"device {info['device_id']}")
    return lines


# -- devices -----------------------------------------------------------------------------------------------


def cmd_devices(args: argparse.Namespace) -> int:
    """``devices``: registers one library in an emulated host and prints its EP devices."""
    version = NEWEST_EMULATED if args.host_version is None else args.host_version
    try:
        library = args.library if args.library is not None else get_library_path()
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from exc
    if not Path(library).is_file():
        raise CliError(f"library not found: {library}")
    host = Host(api_version=version, hardware=_hardware(args.cpu_only))
    try:
        with _plugin_logs(logging.INFO if args.verbose else logging.WARNING):
            try:
                host.register_execution_provider_library(args.name, library)
            except PLUGIN_ERRORS as exc:
                raise CliError(f"registering {library} as '{args.name}' in an emulated {_release(version)} "
                               f"failed: {_one_line(exc)}") from exc
            devices = [ep_device_dict(d) for d in host.get_ep_devices()]
    finally:
        leak = _close_host(host)
    if leak is not None:
        raise CliError(f"unregistering '{args.name}' failed: {leak}")
    if args.json:
        doc = {
            "host": {"api_version": version, "release": RELEASES[version]},
            "registration_name": args.name,
            "library": str(Path(library).resolve()),
            "devices": devices,
        }
        print(json.dumps(doc, indent=2))
        return 0
    print(f"host: emulated {_release(version)}")
    print(f"library: {Path(library).resolve()} (registered as '{args.name}')")
    if not devices:
        print("no EP devices.")
        print(NO_DEVICE_HINT)
        return 0
    print(f"{len(devices)} EP device{'s' if len(devices) != 1 else ''}:")
    for line in format_devices(devices):
        print(line)
    return 0


# -- inspect -----------------------------------------------------------------------------------------------


def elf_exports(path: str) -> tuple[list[str] | None, str | None]:
    """Names of the dynamic symbols ``path`` defines and exports (sorted), or ``(None, reason)``.

    Reads ``.dynsym`` with pyelftools; needs no loader and works for any ELF shared object.
    """
    try:
        from elftools.common.exceptions import ELFError
        from elftools.elf.elffile import ELFFile
        from elftools.elf.sections import SymbolTableSection
    except ImportError:
        return None, "unavailable: pyelftools is not installed (pip install pyelftools)"
    try:
        with open(path, "rb") as stream:
            elf = ELFFile(stream)
            section = elf.get_section_by_name(".dynsym")
            if not isinstance(section, SymbolTableSection):
                return [], None
            names = {
                sym.name for sym in section.iter_symbols()
                if sym.name and sym["st_shndx"] != "SHN_UNDEF"
                and not (sym["st_shndx"] == "SHN_ABS" and sym["st_value"] == 0)  # version names (GLIBC_2.2.5)
                and sym["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK", "STB_GNU_UNIQUE")
                and sym["st_other"]["visibility"] in ("STV_DEFAULT", "STV_PROTECTED")
            }
    except (ELFError, OSError) as exc:
        return None, f"unavailable: not a readable ELF file ({exc})"
    return sorted(names), None


def _probe_ep(host: Host, factory: Factory) -> dict[str, Any] | None:
    """Creates an EP on the factory's first device, reads its table, releases it. None without a device."""
    if not factory.ep_devices:
        return None
    options = SessionOptions()
    options.add_provider_for_devices([factory.ep_devices[0]])
    try:
        ep = host.create_ep(options)
    except PLUGIN_ERRORS as exc:
        return {"created": False, "error": _one_line(exc), "members": []}
    try:
        return {
            "created": True,
            "error": None,
            "name": ep.name,
            "ort_version_supported": int(ep.ptr.ort_version_supported),
            "concurrent_run_supported": ep.concurrent_run_supported,
            "members": sorted(ep.members, key=list(member_since("OrtEp")).index),
        }
    finally:
        ep.close()


def _factory_dict(host: Host, factory: Factory) -> dict[str, Any]:
    return {
        "name": factory.name,
        "vendor": factory.vendor,
        "vendor_id": None if factory.vendor_id is None else f"{factory.vendor_id:#06x}",
        "version": factory.plugin_version,
        "ort_version_supported": factory.version,
        "members": sorted(factory.members, key=list(member_since("OrtEpFactory")).index),
        "num_ep_devices": len(factory.ep_devices),
        "ep": _probe_ep(host, factory),
    }


def inspect_version(library: str, version: int, name: str, cpu_only: bool,
                    echo_level: int | None = None) -> dict[str, Any]:
    """Registers ``library`` in an emulated host of ``version`` and reports what that host sees.

    Plugin errors are reported in the result (``error``), never raised; the host is always closed.
    """
    result: dict[str, Any] = {
        "api_version": version, "release": RELEASES[version], "registered": False, "error": None,
        "factories": [], "devices": [], "api_requested": [], "close_error": None, "log": [],
    }
    host = Host(api_version=version, hardware=_hardware(cpu_only))
    with _plugin_logs(echo_level) as log:
        try:
            host.register_execution_provider_library(name, library)
            result["registered"] = True
            for lib in host._libraries.values():
                result["factories"] += [_factory_dict(host, f) for f in lib.factories]
            result["devices"] = [ep_device_dict(d) for d in host.get_ep_devices()]
        except PLUGIN_ERRORS as exc:
            result["error"] = _one_line(exc)
        finally:
            result["api_requested"] = list(host.api_requests)
            result["close_error"] = _close_host(host)
    result["log"] = log
    return result


def _member_table(versions: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per struct and member: its since-version and, per API, whether the host reads it and whether it is set.

    ``read`` applies :func:`epabi.gating.host_reads` to the API the plugin's table declares; both ``read`` and
    ``set`` are None for versions where no such table was obtained (registration failed, no EP created).
    """
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for struct in TABLES:
        rows: dict[str, dict[str, Any]] = {}
        for member, since in member_since(struct).items():
            if member == "ort_version_supported":
                continue
            read: dict[str, bool | None] = {}
            cells: dict[str, bool | None] = {}
            for v in versions:
                api = v["api_version"]
                if struct == "OrtEpFactory":
                    tables = [(f["members"], f["ort_version_supported"]) for f in v["factories"]]
                else:
                    tables = [(f["ep"]["members"], f["ep"]["ort_version_supported"]) for f in v["factories"]
                              if f["ep"] and f["ep"]["created"]]
                key = str(api)
                reads = [host_reads(since, declared, api) for _, declared in tables]
                read[key] = any(reads) if tables else None
                cells[key] = any(member in members for members, _ in tables) if tables else None
            rows[member] = {"since": since, "read": read, "set": cells}
        out[struct] = rows
    return out


def inspect_library(library: str, name: str = "inspect", cpu_only: bool = False,
                    echo_level: int | None = None) -> dict[str, Any]:
    """The full ``inspect`` report for one library: exports, then one entry per emulated API version."""
    exports, note = elf_exports(library)
    versions = [inspect_version(library, v, name, cpu_only, echo_level)
                for v in range(OLDEST_EMULATED, NEWEST_EMULATED + 1)]
    return {
        "library": str(Path(library).resolve()),
        "registration_name": name,
        "exports": exports,
        "exports_note": note,
        "missing_required_exports": None if exports is None
        else [s for s in REQUIRED_EXPORTS if s not in exports],
        "member_since": {s: {m: n for m, n in member_since(s).items() if m != "ort_version_supported"}
                         for s in TABLES},
        "members": _member_table(versions),
        "versions": versions,
    }


def _version_line(v: dict[str, Any]) -> str:
    head = f"API {v['api_version']:>2} ({RELEASES[v['api_version']]}):"
    if not v["registered"]:
        return f"{head} registration failed: {v['error']}"
    facts = v["factories"]
    parts = [f"{len(facts)} factor{'y' if len(facts) == 1 else 'ies'}", f"{len(v['devices'])} device(s)"]
    for f in facts:
        parts.append(f"{f['name']} {f['version'] or '?'} (vendor {f['vendor']}, declares API "
                     f"{f['ort_version_supported']}): {len(f['members'])} factory members")
        ep = f["ep"]
        if ep is None:
            parts.append("no device, EP not created")
        elif ep["created"]:
            parts.append(f"EP {ep['name']}: {len(ep['members'])} members")
        else:
            parts.append(f"CreateEp failed: {ep['error']}")
    line = f"{head} registered; " + "; ".join(parts)
    if v["close_error"]:
        line += f"; on close: {v['close_error']}"
    return line


def format_inspect(report: dict[str, Any]) -> list[str]:
    """Human-readable lines of an :func:`inspect_library` report: exports, one line per version, members."""
    lines = [f"library: {report['library']}"]
    if report["exports"] is None:
        lines.append(f"exports: {report['exports_note']}")
    else:
        exports = report["exports"]
        shown = ", ".join(exports[:_MAX_EXPORTS_SHOWN]) or "(none)"
        more = len(exports) - _MAX_EXPORTS_SHOWN
        lines.append(f"exports: {shown}" + (f", ... ({more} more; --json lists all)" if more > 0 else ""))
        if report["missing_required_exports"]:
            lines.append(f"  missing required exports: {', '.join(report['missing_required_exports'])}")
    lines.append("")
    lines += [_version_line(v) for v in report["versions"]]
    apis = [str(v["api_version"]) for v in report["versions"]]
    if not any(v["registered"] for v in report["versions"]):
        lines += ["", "members: no emulated host version could register the library"]
        return lines
    width = max(len(f"{s}::{m}") for s in TABLES for m in report["members"][s]) + 7
    lines.append("")
    lines.append("members set and read by the host ('x' set, '.' NULL or not read, ' ' not known: "
                 "registration failed or no EP)")
    lines.append(f"{'member (since)':<{width}} " + " ".join(f"{a:>2}" for a in apis))
    for struct in TABLES:
        for member, row in report["members"][struct].items():
            label = f"{struct}::{member} (1.{row['since']})" if row["since"] >= 11 else \
                f"{struct}::{member} (v{row['since']})"
            cells = [" x" if row["set"][a] else (" ." if row["set"][a] is False else "  ") for a in apis]
            lines.append(f"{label:<{width}} " + " ".join(cells))
    return lines


def cmd_inspect(args: argparse.Namespace) -> int:
    """``inspect``: reports what every emulated host version sees of a plugin EP library."""
    path = Path(args.library)
    if not path.exists():
        raise CliError(f"no such file: {args.library}")
    if not path.is_file():
        raise CliError(f"not a file: {args.library}")
    report = inspect_library(str(path), args.name, args.cpu_only, logging.INFO if args.verbose else None)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("\n".join(format_inspect(report)))
    versions = report["versions"]
    if all(not v["registered"] and (v["error"] or "").startswith("PluginLoadError") for v in versions):
        print(f"epabi inspect: error: {versions[-1]['error']}", file=sys.stderr)
        return 1
    return 0


# -- entry point -------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The ``epabi`` argument parser (subcommands ``devices``, ``inspect`` and ``run``)."""
    parser = argparse.ArgumentParser(
        prog="epabi",
        description="Emulated ONNX Runtime host for plugin execution providers "
                    f"(API {OLDEST_EMULATED}..{NEWEST_EMULATED}).")
    parser.add_argument("--version", action="version",
                        version=f"epabi {__version__} (emulates ONNX Runtime {RELEASES[OLDEST_EMULATED]}.."
                                f"{RELEASES[NEWEST_EMULATED]})")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    common.add_argument("--cpu-only", action="store_true",
                        help="offer the plugin only the CPU hardware device (skip GPU discovery)")
    common.add_argument("-v", "--verbose", action="store_true",
                        help="show the plugin's INFO log messages on stderr")

    dev = sub.add_parser("devices", parents=[common], help="list the EP devices a plugin library offers",
                         description="Register a plugin EP library (default: epabi's own) in an emulated "
                                     "host and list its EP devices.")
    dev.add_argument("--host-version", type=_api_version_arg, default=None, metavar="VERSION",
                     help=f"ONNX Runtime release or API to emulate: 1.24, 1.24.4 or 24 "
                          f"(default: newest, {RELEASES[NEWEST_EMULATED]})")
    dev.add_argument("--library", default=None, metavar="PATH",
                     help="plugin EP library to register (default: the epabi plugin of this package)")
    dev.add_argument("--name", default="epabi",
                     help="registration name; one ending in '.virtual' allows virtual devices "
                          "(default: epabi)")
    dev.set_defaults(func=cmd_devices)

    ins = sub.add_parser("inspect", parents=[common],
                         help="report exports, factories, devices and table members of any plugin EP library "
                              "for every emulated host version",
                         description="Inspect any plugin EP library: its exported symbols, then for each "
                                     f"emulated API {OLDEST_EMULATED}..{NEWEST_EMULATED} the registration "
                                     "result, factories, EP devices and the OrtEpFactory/OrtEp members the "
                                     "host reads.")
    ins.add_argument("library", metavar="LIBRARY", help="path of the plugin EP shared library")
    ins.add_argument("--name", default="inspect",
                     help="registration name (a name ending in '.virtual' allows virtual devices)")
    ins.set_defaults(func=cmd_inspect)
    run_cmd.add_parser(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs the ``epabi`` command line; returns the exit code (0 ok, 1 failure, 2 usage error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except (CliError, run_cmd.RunError) as exc:
        print(f"epabi {args.command}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # output piped into a reader that quit early (| head)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1

