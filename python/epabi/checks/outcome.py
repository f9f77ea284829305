"""What ``epabi check`` found: one :class:`Outcome` per check and API version, gathered in a :class:`CheckResult`.

Plain data, JSON-serialisable through :meth:`CheckResult.to_json` (the ``--json`` document) and back through
:meth:`CheckResult.from_json`; the text table and JUnit XML are in :mod:`epabi.checks.report`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..versions import RELEASES
from .catalogue import BY_ID, CHECK_IDS


class Status(str, Enum):
    """A check's verdict at one API version."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class Outcome:
    """The verdict of one check at one API version, with the reason (always set: what passed, what failed and
    where, or why the check could not run)."""

    check: str
    api: int
    status: Status
    reason: str

    @property
    def category(self) -> str:
        return BY_ID[self.check].category

    @property
    def release(self) -> str:
        return RELEASES[self.api]

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "category": self.category, "api_version": self.api, "release": self.release,
                "status": self.status.value, "reason": self.reason}


@dataclass
class VersionReport:
    """Everything one API version produced: the outcomes in catalogue order and facts about the run
    (``info``: registration, factories, EP, the API versions the plugin asked for, ...)."""

    api: int
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def set(self, check: str, status: Status, reason: str) -> None:
        self.outcomes[check] = Outcome(check, self.api, status, reason)

    def ordered(self) -> list[Outcome]:
        return [self.outcomes[c] for c in CHECK_IDS if c in self.outcomes]


@dataclass
class CheckResult:
    """The result of :func:`epabi.check`: every outcome, per version facts, and the arguments it ran with.

    ``ok`` is False when any check failed (the CLI then exits 1)."""

    library: str
    ep_name: str | None
    registration_name: str
    versions: list[int]
    reports: dict[int, VersionReport]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def outcomes(self) -> list[Outcome]:
        """Every outcome: versions in order, checks in catalogue order within each."""
        return [o for api in self.versions for o in self.reports[api].ordered()]

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status is Status.FAIL]

    @property
    def ok(self) -> bool:
        return not self.failed

    def outcome(self, check: str, api: int) -> Outcome:
        """The outcome of ``check`` at ``api``. Raises KeyError for a check or version that was not run."""
        return self.reports[api].outcomes[check]

    def counts(self) -> dict[str, int]:
        """How many outcomes passed, failed and were skipped."""
        out = {s.value: 0 for s in Status}
        for o in self.outcomes:
            out[o.status.value] += 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "library": self.library,
            "ep_name": self.ep_name,
            "registration_name": self.registration_name,
            "versions": [{"api_version": api, "release": RELEASES[api], **self.reports[api].info}
                         for api in self.versions],
            "options": self.options,
            "checks": [{"id": c, "category": BY_ID[c].category, "summary": BY_ID[c].summary} for c in CHECK_IDS],
            "outcomes": [o.to_json() for o in self.outcomes],
            "counts": self.counts(),
            "ok": self.ok,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> CheckResult:
        """The result a :meth:`to_json` document describes. Raises KeyError/ValueError for another document."""
        reports: dict[int, VersionReport] = {}
        for v in doc["versions"]:
            info = {k: val for k, val in v.items() if k not in ("api_version", "release")}
            reports[int(v["api_version"])] = VersionReport(int(v["api_version"]), info=info)
        for o in doc["outcomes"]:
            reports[int(o["api_version"])].set(o["check"], Status(o["status"]), o["reason"])
        return cls(doc["library"], doc["ep_name"], doc["registration_name"], sorted(reports), reports,
                   dict(doc.get("options", {})))
