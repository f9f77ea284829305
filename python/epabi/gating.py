"""Which plugin-table members a host reads, the way ONNX Runtime 1.24.4-1.32.0 decides it.

A member is read when the host itself knows it (``since <= host API``) and, for members added after
:data:`epabi.versions.ALWAYS_READ_UP_TO`, when the plugin declared a layout that has it
(``since <= ort_version_supported``); older members are read whatever the plugin declared.
"""

from __future__ import annotations

from typing import Any

from ._ffi import ffi, member_since
from .versions import ALWAYS_READ_UP_TO


def host_reads(since: int, plugin_version: int, host_version: int) -> bool:
    """Whether a host of API ``host_version`` reads a member that appeared in API ``since`` from a plugin table
    whose ``ort_version_supported`` is ``plugin_version``."""
    if since > host_version:
        return False
    return since <= ALWAYS_READ_UP_TO or since <= plugin_version


def readable_members(struct: str, table: Any, host_version: int) -> dict[str, Any]:
    """``{member: function pointer}`` for every member the host would read and the plugin set (non-NULL)."""
    plugin_version = int(table.ort_version_supported)
    out: dict[str, Any] = {}
    for name, since in member_since(struct).items():
        if name == "ort_version_supported" or not host_reads(since, plugin_version, host_version):
            continue
        fn = getattr(table, name)
        if fn != ffi.NULL:
            out[name] = fn
    return out
