"""``epabi inspect``: what every emulated host version sees of any plugin EP library: its exports, then per
API version the registration result, factories, EP devices and the table members the host reads."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from ._ffi import member_since
from .cmd_common import PLUGIN_ERRORS, CliError, close_host, hardware, no_device_hint, one_line, plugin_logs
from .devices_cmd import ep_device_dict
from .gating import host_reads
from .host import Host
from .library import Factory
from .objects import HardwareDevice
from .session_options import SessionOptions
from .versions import EMULATED, NEWEST_EMULATED, OLDEST_EMULATED, RELEASES, since_label

#: The two symbols every plugin EP library must export.
REQUIRED_EXPORTS = ("CreateEpFactories", "ReleaseEpFactory")
#: Plugin-table structs the ``inspect`` member matrix covers.
TABLES = ("OrtEpFactory", "OrtEp")

_MAX_EXPORTS_SHOWN = 12


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Adds the ``inspect`` subcommand to the ``epabi`` parser."""
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
            # STB_LOOS is how pyelftools names binding 10, STB_GNU_UNIQUE (C++ inline statics)
            names = {
                sym.name for sym in section.iter_symbols()
                if sym.name and sym["st_shndx"] != "SHN_UNDEF"
                and not (sym["st_shndx"] == "SHN_ABS" and sym["st_value"] == 0)  # version names (GLIBC_2.2.5)
                and sym["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK", "STB_GNU_UNIQUE", "STB_LOOS")
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
        return {"created": False, "error": one_line(exc), "members": []}
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
                    echo_level: int | None = None, offered: list[HardwareDevice] | None = None) -> dict[str, Any]:
    """Registers ``library`` in an emulated host of ``version`` and reports what that host sees.

    ``offered``: the hardware devices the host offers (default: the CPU alone with ``cpu_only``, else discovery).
    Plugin errors are reported in the result (``error``), never raised; the host is always closed.
    """
    result: dict[str, Any] = {
        "api_version": version, "release": RELEASES[version], "registered": False, "error": None,
        "factories": [], "devices": [], "api_requested": [], "close_error": None, "log": [],
    }
    host = Host(api_version=version, hardware=hardware(cpu_only) if offered is None else list(offered))
    with plugin_logs(echo_level) as log:
        try:
            host.register_execution_provider_library(name, library)
            result["registered"] = True
            for lib in host.libraries:
                result["factories"] += [_factory_dict(host, f) for f in lib.factories]
            result["devices"] = [ep_device_dict(d) for d in host.get_ep_devices()]
        except PLUGIN_ERRORS as exc:
            result["error"] = one_line(exc)
        finally:
            result["api_requested"] = list(host.api_requests)
            result["close_error"] = close_host(host)
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
                    echo_level: int | None = None, injected: list[HardwareDevice] | None = None) -> dict[str, Any]:
    """The full ``inspect`` report for one library: exports, then one entry per emulated API version.

    ``injected``: the hardware devices every host offers instead of the discovered ones (``--hardware``).
    ``hint`` says what to try when versions registered the library but none listed an EP device (a version
    whose registration succeeded with no factory, as ORT accepts, needs no hint when another lists devices)."""
    exports, note = elf_exports(library)
    offered = hardware(cpu_only, injected)
    versions = [inspect_version(library, v, name, cpu_only, echo_level, offered) for v in EMULATED]
    empty = [v for v in versions if v["registered"] and not v["devices"]]
    listed = any(v["devices"] for v in versions)
    hint = no_device_hint(library, [f["name"] for f in empty[-1]["factories"]], offered) \
        if empty and not listed else None
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
        "hint": hint,
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
    blas = {d["ep_metadata"]["blas"] for v in report["versions"] for d in v["devices"] if "blas" in d["ep_metadata"]}
    lines += [f"software device BLAS (metadata 'blas'): {b}" for b in sorted(blas)]
    if report.get("hint"):
        lines.append(report["hint"])
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
            label = f"{struct}::{member} ({since_label(row['since'])})"
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
    report = inspect_library(str(path), args.name, args.cpu_only, logging.INFO if args.verbose else None,
                             args.hardware)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("\n".join(format_inspect(report)))
    versions = report["versions"]
    if all(not v["registered"] and (v["error"] or "").startswith("PluginLoadError") for v in versions):
        print(f"epabi inspect: error: {versions[-1]['error']}", file=sys.stderr)
        return 1
    return 0
