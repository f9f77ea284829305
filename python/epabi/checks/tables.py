"""How one host version sees a plugin's table: per member, set, NULL, or not read (and why).

Only members the host reads are looked at: a member past the plugin's declared ``ort_version_supported`` may
lie beyond the end of the plugin's struct, so its bytes mean nothing (:mod:`epabi.gating`).
"""

from __future__ import annotations

from typing import Any

from .._ffi import ffi, member_since
from ..gating import host_reads
from ..versions import since_label

SET = "set"
NULL = "null"
#: Not read: the host's API predates the member.
NOT_IN_HOST = "host"
#: Not read: the plugin's declared version predates the member (and it is newer than API 23).
NOT_DECLARED = "declared"


def member_states(struct: str, table: Any, host_api: int) -> dict[str, str]:
    """``{member: SET | NULL | NOT_IN_HOST | NOT_DECLARED}`` for every member of ``struct`` but the version."""
    declared = int(table.ort_version_supported)
    states: dict[str, str] = {}
    for name, since in member_since(struct).items():
        if name == "ort_version_supported":
            continue
        if since > host_api:
            states[name] = NOT_IN_HOST
        elif not host_reads(since, declared, host_api):
            states[name] = NOT_DECLARED
        else:
            states[name] = SET if getattr(table, name) != ffi.NULL else NULL
    return states


def label(struct: str, member: str) -> str:
    """``"OrtEp::Sync (1.25)"``."""
    return f"{struct}::{member} ({since_label(member_since(struct)[member])})"


def set_beyond_host(struct: str, table: Any, host_api: int) -> list[str]:
    """Members the plugin set that this host does not read because its API predates them (the plugin's declared
    version has them, so their slots exist and may be read here)."""
    declared = int(table.ort_version_supported)
    return [name for name, since in member_since(struct).items()
            if name != "ort_version_supported" and host_api < since <= declared and getattr(table, name) != ffi.NULL]
