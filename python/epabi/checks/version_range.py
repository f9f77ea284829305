"""``--versions``: which emulated API versions ``epabi check`` runs at.

Comma-separated items, each a version or a range ``FROM..TO`` (both ends included); a version is anything
:func:`epabi.versions.parse_api_version` reads (``24``, ``1.24``, ``1.24.4``) or ``oldest`` / ``newest``; a
range end left out is ``oldest`` (before ``..``) or ``newest`` (after it). Examples: ``1.24..newest``,
``24,26,32``, ``..1.26``, ``newest``.
"""

from __future__ import annotations

from ..errors import CheckArgumentError
from ..versions import EMULATED, NEWEST_EMULATED, OLDEST_EMULATED, RELEASES, parse_api_version

#: What ``epabi check`` runs at when no range is given.
DEFAULT_VERSIONS = "oldest..newest"


def _version(text: str, whole: str) -> int:
    word = text.strip().lower()
    if word == "oldest":
        return OLDEST_EMULATED
    if word == "newest":
        return NEWEST_EMULATED
    try:
        return parse_api_version(word)
    except ValueError as exc:
        raise CheckArgumentError(f"--versions {whole!r}: {exc}") from exc


def parse_versions(text: str | list[int] | tuple[int, ...] | None) -> list[int]:
    """The API versions ``text`` names, oldest first, without repeats (a list of ints is checked and sorted).

    Raises:
        CheckArgumentError: an unknown version, a range whose start is after its end, or nothing named.
    """
    if text is None:
        text = DEFAULT_VERSIONS
    if not isinstance(text, str):
        return sorted({_version(str(v), str(list(text))) for v in text}) or _empty(str(list(text)))
    chosen: set[int] = set()
    for item in text.split(","):
        if not item.strip():
            continue
        if ".." in item:
            start_text, _, end_text = item.partition("..")
            start = _version(start_text or "oldest", text)
            end = _version(end_text or "newest", text)
            if start > end:
                raise CheckArgumentError(f"--versions {text!r}: the range {item.strip()!r} starts at API {start} "
                                         f"({RELEASES[start]}), after its end, API {end} ({RELEASES[end]})")
            chosen.update(v for v in EMULATED if start <= v <= end)
        else:
            chosen.add(_version(item, text))
    return sorted(chosen) or _empty(text)


def _empty(text: str) -> list[int]:
    raise CheckArgumentError(f"--versions {text!r} names no API version; epabi emulates {OLDEST_EMULATED}.."
                             f"{NEWEST_EMULATED} (ONNX Runtime {RELEASES[OLDEST_EMULATED]}.."
                             f"{RELEASES[NEWEST_EMULATED]})")
