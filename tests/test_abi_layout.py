"""Every member of ort_abi.h sits at the slot, and carries the since-version, that the facts sheet gives.

The facts sheet (``shared/abi/``) lies next to the repository; CI always has it. The C compiler's offsets are
also compared with cffi's, so the plugin and the host read the one header the same way.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from epabi._ffi import ffi, header_path, member_since, slot_fields

SHARED = Path(os.environ.get("EPABI_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared")) / "abi"

# struct -> the line that opens its table in ORT_EP_ABI_FACTS.md
FACTS_TABLES = {
    "OrtApiBase": "## 1. OrtApiBase",
    "OrtEpFactory": "## 2. OrtEpFactory",
    "OrtEp": "## 3. OrtEp",
    "OrtNodeComputeInfo": "OrtNodeComputeInfo (returned",
    "OrtDataTransferImpl": "OrtDataTransferImpl (from",
    "OrtSyncStreamImpl": "OrtSyncStreamImpl (from",
    "OrtSyncNotificationImpl": "OrtSyncNotificationImpl:",
    "OrtAllocator": "OrtAllocator (returned",
    "OrtEpApi": "## 5. OrtEpApi",
    "OrtKernelImpl": "OrtKernelImpl (kernel-registry",
}
# Plain data fields the facts sheet gives by byte offset in prose instead of in a table row.
DATA_FIELDS = {"OrtKernelImpl": {"ort_version_supported": 0, "flags": 4}}
# Tables the facts sheet lacks: {member: (slot, since)} from onnxruntime_ep_c_api.h (1.25 on), the slots checked on
# the 1.32.0 wheel: its plugin-EP profiler bridge calls offsets 0x10, 0x18, 0x20 and 0x28 of the table for
# StartProfiling, StartEvent, StopEvent and EndProfiling (its machine code; tests/test_real_ort_profiling.py sees
# each call arrive where the plugin expects it).
OWN_TABLES = {
    "OrtEpProfilerImpl": {"ort_version_supported": (0, 25), "Release": (1, 25), "StartProfiling": (2, 25),
                          "StartEvent": (3, 25), "StopEvent": (4, 25), "EndProfiling": (5, 25)},
}


def _facts_text(name: str) -> str:
    path = SHARED / name
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"facts sheet {path} is missing in CI")
        pytest.skip(f"facts sheet {path} not found (set EPABI_SHARED_DIR)")
    return path.read_text()


def _since(text: str) -> int:
    match = re.match(r"\s*(?:API v(\d+)|1\.(\d+))", text)
    assert match, text
    return int(match.group(1) or match.group(2))


def _table(text: str, marker: str) -> dict[str, tuple[int, int]]:
    """``{member: (slot, since)}`` from the first markdown table after ``marker``."""
    lines = text[text.index(marker):].splitlines()[1:]
    rows: dict[str, tuple[int, int]] = {}
    started = False
    for line in lines:
        if not line.startswith("|"):
            if started:
                break
            continue
        started = True
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not cells[0].isdigit():
            continue
        rows[cells[1]] = (int(cells[0]), _since(cells[3]))
    return rows


def _expected(struct: str) -> dict[str, tuple[int, int]]:
    if struct == "OrtApi":
        return _table(_facts_text("ORT_API_INDEX.md"), "| slot | name")
    return _table(_facts_text("ORT_EP_ABI_FACTS.md"), FACTS_TABLES[struct])


@pytest.mark.parametrize("struct", ["OrtApi", *FACTS_TABLES])
def test_every_declared_member_matches_the_facts_sheet(struct: str) -> None:
    expected = _expected(struct)
    since = member_since(struct)
    named = 0
    for name, slot, ctype in slot_fields(struct):
        if ctype.kind == "array":
            first, last = map(int, re.fullmatch(r"reserved_(\d+)_(\d+)", name).groups())
            assert (first, last) == (slot, slot + ctype.length - 1), f"{struct}.{name} spans the wrong slots"
            continue
        named += 1
        if name in DATA_FIELDS.get(struct, {}):
            assert ffi.offsetof(struct, name) == DATA_FIELDS[struct][name], f"{struct}.{name} is at the wrong offset"
            expected.setdefault(name, (slot, since[name]))
            continue
        assert name in expected, f"{struct}.{name} is not in the facts sheet"
        assert slot == expected[name][0], f"{struct}.{name}: slot {slot}, facts say {expected[name][0]}"
        assert since[name] == expected[name][1], f"{struct}.{name}: since {since[name]}, facts say {expected[name][1]}"
    assert named == len(since)
    if struct != "OrtApi":  # the plugin-side tables and OrtEpApi are declared in full
        assert named == len(expected)


@pytest.mark.parametrize("struct", list(OWN_TABLES))
def test_tables_missing_from_the_facts_sheet_match_the_checked_layout(struct: str) -> None:
    since = member_since(struct)
    got = {name: (slot, since[name]) for name, slot, _ in slot_fields(struct)}
    assert got == OWN_TABLES[struct]


def test_table_sizes_match_the_releases_we_declare() -> None:
    ptr = ffi.sizeof("void*")
    assert ffi.sizeof("OrtEp") // ptr == 26  # 1.29/1.30
    assert ffi.sizeof("OrtEpFactory") // ptr == 21  # 1.28-1.30
    assert ffi.sizeof("OrtEpApi") // ptr == 78  # 1.31/1.32 (74-77 as padding)
    assert ffi.sizeof("OrtApi") // ptr == 429  # 1.32 (426-428 as padding)
    assert ffi.sizeof("OrtNodeFusionOptions") == 8
    assert ffi.sizeof("OrtResourceCount") == 56
    assert ffi.sizeof("OrtEnvCreationOptions") == 48  # 1.24 (7 fields)
    assert [ffi.offsetof("OrtEnvCreationOptions", f) for f in (
        "version", "logging_severity_level", "log_id", "custom_logging_function", "custom_logging_param",
        "threading_options", "config_entries")] == [0, 4, 8, 16, 24, 32, 40]
    assert ffi.sizeof("OrtKernelImpl") // ptr == 5  # 1.24-1.30
    assert ffi.sizeof("OrtEpProfilerImpl") // ptr == 6  # 1.25-1.32


def test_c_compiler_and_cffi_agree_on_every_offset(tmp_path: Path) -> None:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    structs = ["OrtApiBase", "OrtApi", "OrtEpApi", *list(FACTS_TABLES)[1:], *OWN_TABLES, "OrtNodeFusionOptions",
               "OrtResourceCount", "OrtEnvCreationOptions"]
    lines = ['#include <stdio.h>', '#include "epabi/ort_abi.h"', "int main(void) {"]
    expected = []
    for struct in dict.fromkeys(structs):
        ctype = ffi.typeof(struct)
        lines.append(f'printf("%zu\\n", sizeof({struct}));')
        expected.append(ffi.sizeof(struct))
        for name, field in ctype.fields:
            lines.append(f'printf("%zu\\n", offsetof({struct}, {name}));')
            expected.append(field.offset)
    lines.append("return 0; }")
    src = tmp_path / "offsets.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "offsets"
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", f"-I{header_path().parent.parent}", str(src), "-o", str(exe)],
                   check=True)
    got = [int(x) for x in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()]
    assert got == expected
