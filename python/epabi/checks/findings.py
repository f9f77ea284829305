"""What the host noticed about a plugin during one API version's run, sorted into the conduct checks.

Two sources: the host's conduct report (violations, tolerated deviations, limitations, host errors:
:meth:`epabi.Host.conduct_report`) and the errors the checks' calls raised (a ``ConductError`` is often raised
on the spot without entering the report). Each message goes to the first conduct check whose pattern it
matches; a violation or tolerated deviation of the report that matches none goes to ``conduct_report`` (a raised
error that matches none is the failure of the check whose call raised it, and nothing more).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: Message patterns of the host (library.py, ep.py, api_table.py traps, handles.py) -> the conduct check.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("statuses", re.compile(r"not an OrtStatus made by CreateStatus|OrtStatus object\(s\) it never returned|"
                            r"\bOrtApi::(ReleaseStatus|GetErrorCode|GetErrorMessage)\b")),
    ("api_version", re.compile(r"was called, but it appeared in API \d+")),
    ("version_sane", re.compile(r"ort_version_supported")),
    ("release_and_unload", re.compile(r"ReleaseEpFactory of '.*' failed")),
)

#: Deviations a plugin is allowed: they make a version's checks skip (with this message) instead of failing.
_ALLOWED = re.compile(r"succeeded but returned no factory")


def conduct_check_for(message: str) -> str | None:
    """The conduct check a host message belongs to, or None."""
    for check, pattern in _PATTERNS:
        if pattern.search(message):
            return check
    return None


def allowed(message: str) -> bool:
    """Whether the message reports a deviation plugins may make (zero factories for an API they do not serve)."""
    return bool(_ALLOWED.search(message))


@dataclass
class Findings:
    """Messages per conduct check (``conduct_report`` for the rest), each once, plus limitations and host errors."""

    by_check: dict[str, list[str]] = field(default_factory=dict)
    limitations: list[str] = field(default_factory=list)
    internal: list[str] = field(default_factory=list)

    def add(self, kind: str, message: str) -> None:
        """Adds one message of ``kind`` "violation", "tolerated", "limitation", "internal" or "raised"."""
        text = " ".join(message.split())
        if kind == "limitation":
            _add_once(self.limitations, text)
        elif kind == "internal":
            _add_once(self.internal, text)
        elif not allowed(text):
            check = conduct_check_for(text)
            if check is None and kind == "raised":
                return  # the check whose call raised it fails with it; the conduct report did not hold it
            _add_once(self.by_check.setdefault(check or "conduct_report", []), text)

    def add_report(self, report: list[tuple[str, str]]) -> None:
        for kind, message in report:
            self.add(kind, message)

    def add_raised(self, exc: BaseException) -> None:
        """An error a call raised (a ConductError, or a status the host made): what it names, where it happened."""
        self.add("raised", str(exc))

    def of(self, check: str) -> list[str]:
        return list(self.by_check.get(check, []))


def _add_once(messages: list[str], text: str) -> None:
    # a raised error repeats a reported violation with the call prepended ("OrtEp::Compile: <violation>"): the
    # longer text is kept, once
    for i, known in enumerate(messages):
        if text in known:
            return
        if known in text:
            messages[i] = text
            return
    messages.append(text)
