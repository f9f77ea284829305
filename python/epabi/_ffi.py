"""The cffi view of ``native/include/epabi/ort_abi.h`` - the same file the C plugin compiles against.

There is no second copy of any layout: this module strips the header's preprocessor lines and hands the
rest to ``cffi.FFI.cdef``. It also reads each member's ``since 1.N`` mark, which the host uses to decide
which table members a host of a given API version may touch (``member_since``).
"""

from __future__ import annotations

import functools
import re
from enum import IntEnum
from pathlib import Path
from typing import Any

import cffi

from .package_files import find_package_file, searched

_HEADER = "include/epabi/ort_abi.h"  # installed with the package (wheel, or site-packages of an editable install)
_HEADER_IN_SOURCE = "native/include/epabi/ort_abi.h"  # a source checkout's copy


def header_path() -> Path:
    """Path of the ABI header this package was built with.

    Raises:
        FileNotFoundError: neither the installed copy nor a source checkout's copy exists.
    """
    found = find_package_file(_HEADER, _HEADER_IN_SOURCE)
    if found is None:
        raise FileNotFoundError(f"ort_abi.h not found; looked in: {', '.join(searched(_HEADER, _HEADER_IN_SOURCE))}")
    return found


def _cdef_source(text: str) -> str:
    # cffi understands declarations but no preprocessor; the header keeps all of those on '#' lines.
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


HEADER_TEXT = header_path().read_text()
ffi = cffi.FFI()
ffi.cdef(_cdef_source(HEADER_TEXT))

#: The newest API whose plugin-side layouts the header declares (``EPABI_ORT_API_VERSION``).
NEWEST_API: int = int(re.search(r"EPABI_ORT_API_VERSION\s*=\s*(\d+)", HEADER_TEXT).group(1))
#: The newest API whose host-side tables (OrtApi, OrtEpApi) the header lays out (``EPABI_ORT_HOST_API_VERSION``).
NEWEST_HOST_API: int = int(re.search(r"EPABI_ORT_HOST_API_VERSION\s*=\s*(\d+)", HEADER_TEXT).group(1))

_SINCE = re.compile(r"since (?:1\.(\d+)|v(\d+))")
_MEMBER = re.compile(r"\(\*(\w+)\)|\b(\w+)\s*(?:\[\d+\])?;")


@functools.cache
def member_since(struct: str) -> dict[str, int]:
    """``{member: API version it appeared in}`` for one struct of the header, from its ``since`` marks.

    Raises:
        KeyError: the header has no ``struct <struct> {`` block.
    """
    match = re.search(r"^struct " + re.escape(struct) + r" \{\n(.*?)^\};", HEADER_TEXT, re.S | re.M)
    if match is None:
        raise KeyError(struct)
    out: dict[str, int] = {}
    for line in match.group(1).splitlines():
        since = _SINCE.search(line)
        name = _MEMBER.search(line)
        if since and name:
            out[name.group(1) or name.group(2)] = int(since.group(1) or since.group(2))
    return out


def enum_value(enum: str, member: str) -> int:
    """The value ort_abi.h gives ``member`` of ``enum`` (e.g. ``enum_value("OrtOpAttrType", "ORT_OP_ATTR_INT")``)."""
    return int(ffi.typeof(enum).relements[member])


def header_enum(name: str, doc: str, prefix: str = "", rename: dict[str, str] | None = None) -> type[IntEnum]:
    """An IntEnum with the members and values the header declares for ``enum <name>`` (so Python never
    restates them): member names lose ``prefix``, or are looked up in ``rename``, and stay in value order."""
    members = sorted(ffi.typeof(name).relements.items(), key=lambda kv: kv[1])
    names = {c: (rename or {}).get(c, c[len(prefix):] if c.startswith(prefix) else c) for c, _ in members}
    enum = IntEnum(name, [(names[c], v) for c, v in members])  # type: ignore[misc]
    enum.__doc__ = doc
    enum.__module__ = "epabi"
    return enum


def slot_fields(struct: str) -> list[tuple[str, int, object]]:
    """``(member, slot index, cffi type)`` for every member of a function table, padding included."""
    return [(name, field.offset // ffi.sizeof("void*"), field.type) for name, field in ffi.typeof(struct).fields]


@functools.cache
def function_pointer_type(name: str) -> Any:
    """The cffi pointer type of a function the header declares (``CreateEpFactories``, ``ReleaseEpFactory``),
    read from its one declaration there, for calling a symbol found with ``dlsym``.

    Raises:
        KeyError: the header declares no such function.
    """
    match = re.search(r"^([\w\s*]+?)\s*\b" + re.escape(name) + r"\((.*?)\);", HEADER_TEXT, re.M | re.S)
    if match is None:
        raise KeyError(name)
    return ffi.typeof(f"{match.group(1).strip()}(*)({match.group(2)})")
