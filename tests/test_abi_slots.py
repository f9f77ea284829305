"""python/epabi/ort_api_slots.py (the names the host's traps give padded slots) agrees with the facts sheet's
slot index and with every member ort_abi.h names."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from epabi._ffi import ffi, member_since, slot_fields
from epabi.ort_api_slots import (
    ORT_API_SLOTS,
    ORT_EP_API_SLOTS,
    RESULT_POINTER,
    RESULT_STATUS,
    RESULT_VALUE,
    RESULT_VOID,
)

SHARED = Path(os.environ.get("EPABI_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared")) / "abi"


def _index() -> str:
    path = SHARED / "ORT_API_INDEX.md"
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"facts sheet {path} is missing in CI")
        pytest.skip(f"facts sheet {path} not found (set EPABI_SHARED_DIR)")
    return path.read_text()


def _since(text: str) -> int:
    match = re.match(r"\s*(?:API v(\d+)|1\.(\d+))", text)
    assert match, text
    return int(match.group(1) or match.group(2))


def _kind(result: object) -> str:
    if result.kind == "void":
        return RESULT_VOID
    if result.kind == "pointer":
        return RESULT_STATUS if result.item.cname == "OrtStatus" else RESULT_POINTER
    return RESULT_VALUE


def test_slots_up_to_api_30_match_the_facts_index() -> None:
    rows = {}
    for line in _index().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].isdigit():
            rows[int(cells[0])] = (cells[1], _since(cells[3]), cells[2].split("(")[0].strip())
    assert sorted(rows) == list(range(426))
    for slot, (name, since, result) in rows.items():
        assert ORT_API_SLOTS[slot][:2] == (name, since), slot
        kind = RESULT_VOID if result == "void" else RESULT_STATUS if result == "OrtStatus*" else \
            RESULT_POINTER if result.endswith("*") or result == "OrtExperimentalFnPtr" else RESULT_VALUE
        assert ORT_API_SLOTS[slot][2] == kind, (slot, name)


def test_named_members_and_padding_agree_with_the_slot_tables() -> None:
    since = member_since("OrtApi")
    for name, slot, ctype in slot_fields("OrtApi"):
        if ctype.kind == "array":
            continue
        assert ORT_API_SLOTS[slot][0] == name
        assert ORT_API_SLOTS[slot][1] == since[name]
        if ctype.kind == "pointer" and ctype.item.kind == "function":
            assert ORT_API_SLOTS[slot][2] == _kind(ctype.item.result), name
    assert len(ORT_API_SLOTS) == ffi.sizeof("OrtApi") // ffi.sizeof("void*")  # 1.32's 429 slots
    padded = [slot + i for name, slot, ctype in slot_fields("OrtEpApi") if ctype.kind == "array"
              for i in range(ctype.length)]
    assert padded == sorted(ORT_EP_API_SLOTS)


def test_slots_of_1_31_and_1_32_say_their_names_are_unverified() -> None:
    for name, since, _ in [*ORT_API_SLOTS[426:], *ORT_EP_API_SLOTS.values()]:
        assert since in (31, 32) and re.search(r"\[name UNVERIFIED\]$", name), name
