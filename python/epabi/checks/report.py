"""How a :class:`~epabi.checks.outcome.CheckResult` is shown: the text table (check x version, then the reasons),
and JUnit XML (one test suite per API version, one test case per check; CI systems read it).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..versions import RELEASES
from .catalogue import BY_ID, CHECK_IDS
from .outcome import CheckResult, Status

_CELL = {Status.PASS: "ok", Status.FAIL: "FAIL", Status.SKIP: "-"}
#: Checks named in one reason line; more are counted.
_NAMED = 4


def api_ranges(apis: list[int]) -> str:
    """``"22..24, 26"`` for [22, 23, 24, 26]."""
    parts: list[str] = []
    start = prev = None
    for api in sorted(apis):
        if prev is not None and api == prev + 1:
            prev = api
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}..{prev}")
        start = prev = api
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}..{prev}")
    return ", ".join(parts)


def format_table(result: CheckResult, verbose: bool = False) -> list[str]:
    """The text report: header, the check x version table, the reasons of failures and skips (and passes with
    ``verbose``), grouped by check and reason, and a summary line."""
    lines = [f"epabi check: {result.library}",
             f"EP: {result.ep_name or '(none found)'} (registered as '{result.registration_name}'); API "
             f"{api_ranges(result.versions)}"]
    crashed = [f"API {api}: the check process {r.info['crashed']}" for api, r in result.reports.items()
               if r.info.get("crashed")]
    lines += crashed
    width = max(len(c) for c in CHECK_IDS) + 2
    lines.append("")
    lines.append(f"{'check':<{width}}" + "".join(f"{api:>5}" for api in result.versions))
    for check in CHECK_IDS:
        cells = []
        for api in result.versions:
            outcome = result.reports[api].outcomes.get(check)
            cells.append(f"{_CELL[outcome.status] if outcome else '?':>5}")
        lines.append(f"{check:<{width}}" + "".join(cells))
    shown = (Status.FAIL, Status.SKIP, Status.PASS) if verbose else (Status.FAIL, Status.SKIP)
    for status in shown:
        groups = _groups(result, status)
        if not groups:
            continue
        lines.append("")
        lines.append({Status.FAIL: "failed:", Status.SKIP: "skipped:", Status.PASS: "passed:"}[status])
        for checks, apis, reason in groups:
            lines.append(f"  {checks} (API {api_ranges(apis)}): {reason}")
    counts = result.counts()
    lines.append("")
    lines.append(f"{len(result.outcomes)} outcomes: {counts['pass']} passed, {counts['fail']} failed, "
                 f"{counts['skip']} skipped: {'OK' if result.ok else 'FAILED'}")
    return lines


def _groups(result: CheckResult, status: Status) -> list[tuple[str, list[int], str]]:
    """``(checks, versions, reason)`` lines: the outcomes of ``status`` with the same reason at the same versions
    share a line (a version the plugin refuses is one line, not one per check)."""
    by_reason: dict[str, dict[str, list[int]]] = {}
    for check in CHECK_IDS:
        for api in result.versions:
            outcome = result.reports[api].outcomes.get(check)
            if outcome is not None and outcome.status is status:
                by_reason.setdefault(outcome.reason, {}).setdefault(check, []).append(api)
    lines: list[tuple[int, str, list[int], str]] = []
    for reason, checks in by_reason.items():
        by_versions: dict[tuple[int, ...], list[str]] = {}
        for check, apis in checks.items():
            by_versions.setdefault(tuple(apis), []).append(check)
        for apis, names in by_versions.items():
            label = ", ".join(names) if len(names) <= _NAMED else f"{len(names)} checks ({names[0]} ... {names[-1]})"
            lines.append((CHECK_IDS.index(names[0]), label, list(apis), reason))
    return [(label, apis, reason) for _, label, apis, reason in sorted(lines, key=lambda x: (x[0], x[2]))]


def junit_xml(result: CheckResult) -> str:
    """JUnit XML of the result: a ``<testsuite>`` per API version, a ``<testcase>`` per check (classname
    ``epabi.check.<category>``, name ``<check>[<release>]``) with ``<failure>`` or ``<skipped>`` carrying the
    reason, and the reason of a pass in ``<system-out>``."""
    counts = result.counts()
    root = ET.Element("testsuites", name="epabi check", tests=str(len(result.outcomes)),
                      failures=str(counts["fail"]), skipped=str(counts["skip"]), errors="0")
    for api in result.versions:
        report = result.reports[api]
        outcomes = report.ordered()
        suite = ET.SubElement(root, "testsuite", name=f"epabi check {RELEASES[api]} (API {api})",
                              tests=str(len(outcomes)),
                              failures=str(sum(o.status is Status.FAIL for o in outcomes)),
                              skipped=str(sum(o.status is Status.SKIP for o in outcomes)), errors="0",
                              time=f"{float(report.info.get('seconds', 0.0)):.3f}")
        properties = ET.SubElement(suite, "properties")
        for key, value in (("library", result.library), ("ep", result.ep_name or ""), ("api_version", str(api)),
                           ("release", RELEASES[api])):
            ET.SubElement(properties, "property", name=key, value=value)
        for outcome in outcomes:
            case = ET.SubElement(suite, "testcase", classname=f"epabi.check.{BY_ID[outcome.check].category}",
                                 name=f"{outcome.check}[{outcome.release}]", time="0")
            if outcome.status is Status.FAIL:
                failure = ET.SubElement(case, "failure", message=outcome.reason, type="epabi.check")
                failure.text = outcome.reason
            elif outcome.status is Status.SKIP:
                ET.SubElement(case, "skipped", message=outcome.reason)
            else:
                ET.SubElement(case, "system-out").text = outcome.reason
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
