"""``no_growth``: registering, creating an EP and unregistering, over and over, leaves nothing behind.

One cycle: register the library, create and release an OrtEp on the EP device under check (when there is
one), unregister. After a warm-up (first-use caches of cffi, libc and the plugin) the process's open files,
mappings and resident memory are read, ``cycles`` cycles run, they are read again, ``cycles`` more run, and
they are read a third time. A leak grows in both halves; a one-time allocation (a plugin's thread pool or
arena, made in the first cycles: onnxruntime-ggml 0.2.0 takes about 530 kB once) grows only the first. So
open files must not grow in the second half, mappings not in both halves, and resident memory by less than
:data:`RSS_SLACK` in the second half.
Linux only (``/proc/self``). Under AddressSanitizer (preloaded), whose allocator keeps freed memory mapped in
quarantine by design, only open files and file-backed mappings are compared.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

from ..cmd_common import PLUGIN_ERRORS, one_line
from ..host import Host
from ..objects import HardwareDevice
from ..session_options import SessionOptions
from .probe import CheckFailed, CheckSkipped, Probe

#: Resident-memory growth allowed over the second half of the cycles: allocator and list-growth noise (the leak
#: this guards against, cffi keeping every dlopen wrapper, grew 33 kB a cycle; the host's conduct report grows
#: by a line a cycle for a plugin it tolerates something of).
RSS_SLACK = 256 << 10
WARM_UP = 3
_UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _maps() -> int:
    lines = Path("/proc/self/maps").read_text().splitlines()
    return sum(1 for line in lines if not _UNDER_ASAN or len(line.split(None, 5)) == 6)


def _rss() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _measure() -> tuple[int, int, int]:
    gc.collect()
    return _fds(), _maps(), _rss()


def no_growth(probe: Probe) -> str:
    if not Path("/proc/self/maps").exists():
        raise CheckSkipped("needs Linux /proc/self to count open files, mappings and resident memory")
    if not probe.registered:
        raise CheckSkipped(probe.blocked or "not registered")
    spec = probe.spec
    cycles = max(1, spec.cycles)
    hardware = [HardwareDevice(hw.type, hw.vendor_id, hw.vendor, hw.device_id, dict(hw.metadata))
                for hw in probe.host.hardware]  # a device object belongs to one host at a time
    host = Host(api_version=probe.api, hardware=hardware)
    with_ep = probe.device is not None and probe.ep_error is None

    def cycle() -> None:
        host.register_execution_provider_library(spec.name, spec.library)
        try:
            if with_ep:
                devices = [d for lib in host.libraries for f in lib.factories if f.name == probe.factory.name
                           for d in f.ep_devices if d.ep_name == probe.device.ep_name]
                if not devices:
                    raise CheckFailed(f"a later registration lists no EP device of {probe.device.ep_name}")
                options = SessionOptions()
                options.add_provider_for_devices(devices[:1], dict(spec.ep_options))
                host.create_ep(options).close()
        finally:
            host.unregister_execution_provider_library(spec.name)

    try:
        for _ in range(WARM_UP):
            cycle()
        base = _measure()
        for _ in range(cycles):
            cycle()
        half = _measure()
        for _ in range(cycles):
            cycle()
        end = _measure()
    except PLUGIN_ERRORS as exc:
        probe.record(exc)
        raise CheckFailed(f"a register/unregister cycle failed: {one_line(exc)}") from exc
    finally:
        try:
            host.close()
        except PLUGIN_ERRORS as exc:
            probe.record(exc)
        probe.findings.add_report(host.conduct_report())
    total = 2 * cycles
    what = f"{total} cycles of register{', CreateEp/ReleaseEp' if with_ep else ''}, unregister"
    problems = []
    if end[0] > half[0]:
        problems.append(f"open files {base[0]} -> {half[0]} -> {end[0]}")
    if half[1] > base[1] and end[1] > half[1]:
        problems.append(f"mappings {base[1]} -> {half[1]} -> {end[1]}")
    grown = end[2] - half[2]
    if grown >= RSS_SLACK and not _UNDER_ASAN:
        problems.append(f"resident memory +{grown >> 10} kB over the last {cycles} ({grown / cycles / 1024:.1f} kB a "
                        "cycle)")
    if problems:
        raise CheckFailed(f"{what}: {'; '.join(problems)}")
    first = half[2] - base[2]
    return (f"{what}: open files {base[0]} -> {half[0]} -> {end[0]}, mappings {base[1]} -> {half[1]} -> {end[1]}, "
            f"resident memory {first >> 10:+d} kB then {grown >> 10:+d} kB"
            + (" (AddressSanitizer: RSS not compared)" if _UNDER_ASAN else ""))
