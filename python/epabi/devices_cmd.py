"""``epabi devices``: register one plugin EP library in an emulated host and list its EP devices."""

from __future__ import annotations

import argparse
import json
import logging
from enum import IntEnum
from pathlib import Path
from typing import Any

from . import get_library_path
from .cmd_common import (
    PLUGIN_ERRORS,
    CliError,
    add_host_version_option,
    close_host,
    hardware,
    no_device_hint,
    one_line,
    plugin_logs,
    release_label,
)
from .host import Host
from .objects import EpDevice, MemoryInfo, OrtAllocatorType
from .versions import NEWEST_EMULATED, RELEASES


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Adds the ``devices`` subcommand to the ``epabi`` parser."""
    dev = sub.add_parser("devices", parents=[common], help="list the EP devices a plugin library offers",
                         description="Register a plugin EP library (default: epabi's own) in an emulated "
                                     "host and list its EP devices.")
    add_host_version_option(dev)
    dev.add_argument("--library", default=None, metavar="PATH",
                     help="plugin EP library to register (default: the epabi plugin of this package)")
    dev.add_argument("--name", default="epabi",
                     help="registration name; one ending in '.virtual' allows virtual devices "
                          "(default: epabi)")
    dev.set_defaults(func=cmd_devices)


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


def cmd_devices(args: argparse.Namespace) -> int:
    """``devices``: registers one library in an emulated host and prints its EP devices."""
    version = NEWEST_EMULATED if args.host_version is None else args.host_version
    try:
        library = args.library if args.library is not None else get_library_path()
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from exc
    if not Path(library).is_file():
        raise CliError(f"library not found: {library}")
    offered = hardware(args.cpu_only, args.hardware)
    host = Host(api_version=version, hardware=offered)
    try:
        with plugin_logs(logging.INFO if args.verbose else logging.WARNING):
            try:
                host.register_execution_provider_library(args.name, library)
            except PLUGIN_ERRORS as exc:
                raise CliError(f"registering {library} as '{args.name}' in an emulated {release_label(version)} "
                               f"failed: {one_line(exc)}") from exc
            devices = [ep_device_dict(d) for d in host.get_ep_devices()]
            factories = [f.name for lib in host.libraries for f in lib.factories]
    finally:
        leak = close_host(host)
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
    print(f"host: emulated {release_label(version)}")
    print(f"library: {Path(library).resolve()} (registered as '{args.name}')")
    if not devices:
        print("no EP devices.")
        print(no_device_hint(library, factories, offered))
        return 0
    print(f"{len(devices)} EP device{'s' if len(devices) != 1 else ''}:")
    for line in format_devices(devices):
        print(line)
    return 0
