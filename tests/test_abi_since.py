"""native/abi_since.h restates since marks of ort_abi.h (EPABI_SINCE_<struct>_<member> = N): each must match."""

from __future__ import annotations

import re
from pathlib import Path

from epabi._ffi import member_since

HEADER = Path(__file__).resolve().parents[1] / "native" / "abi_since.h"


def test_every_since_fact_matches_the_abi_header() -> None:
    facts = re.findall(r"EPABI_SINCE_(Ort[A-Za-z]+)_(\w+) = (\d+)", HEADER.read_text())
    assert len(facts) >= 7, "abi_since.h lists no facts"
    for struct, member, version in facts:
        assert member_since(struct).get(member) == int(version), f"{struct}::{member}: abi_since.h says {version}"
