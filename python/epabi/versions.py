"""ONNX Runtime releases and the API versions they speak.

ORT 1.N serves ``OrtApi`` version N (true for N >= 11). The host emulates one API version; it reports the
release string below as ``GetVersionString()`` and returns NULL from ``GetApi(v)`` for ``v`` above it.
"""

from __future__ import annotations

import re

from ._ffi import NEWEST_API

#: Release string the emulated host reports per API version (the releases checked in the facts sheet).
RELEASES: dict[int, str] = {
    22: "1.22.0",
    23: "1.23.2",
    24: "1.24.4",
    25: "1.25.1",
    26: "1.26.0",
    27: "1.27.0",
    28: "1.28.0",
    29: "1.29.0",
    30: "1.30.0",
}
OLDEST_EMULATED = min(RELEASES)
NEWEST_EMULATED = NEWEST_API


def parse_api_version(text: str | int) -> int:
    """API version from ``24``, ``"24"``, ``"1.24"`` or ``"1.24.4"``.

    Raises:
        ValueError: the text is none of those forms, or names a version this host cannot emulate.
    """
    if isinstance(text, int):
        version = text
    else:
        match = re.fullmatch(r"\s*(?:1\.(\d+)(?:\.\d+)?|(\d+))\s*", str(text))
        if match is None:
            raise ValueError(f"host version {text!r}: expected an API number (24) or a release (1.24, 1.24.4)")
        version = int(match.group(1) or match.group(2))
    if not OLDEST_EMULATED <= version <= NEWEST_EMULATED:
        raise ValueError(
            f"host version {text!r}: this host emulates API {OLDEST_EMULATED}..{NEWEST_EMULATED} "
            f"(ONNX Runtime {RELEASES[OLDEST_EMULATED]}..{RELEASES[NEWEST_EMULATED]})"
        )
    return version


def read_min_onnxruntime_version() -> str:
    """The plugin's minimum host release, from ``MIN_ONNXRUNTIME_VERSION`` (installed or source copy)."""
    from pathlib import Path

    here = Path(__file__).resolve().parent
    for candidate in (here / "MIN_ONNXRUNTIME_VERSION", here.parent.parent / "MIN_ONNXRUNTIME_VERSION"):
        if candidate.is_file():
            return candidate.read_text().strip()
    raise FileNotFoundError("MIN_ONNXRUNTIME_VERSION not found next to the package or in the source tree")
