"""``epabi check``: checks a plugin EP library against the invariants ONNX Runtime holds plugin EPs to, the
conduct its host expects, and function (models matching ORT's CPU EP, the graph capture contract), at every
emulated API version.

::

    result = epabi.check("libmy_ep.so", versions="1.24..newest")
    assert result.ok, [f"{o.check}@{o.release}: {o.reason}" for o in result.failed]

The checks are listed in :mod:`epabi.checks.catalogue`; :func:`check` (:mod:`epabi.checks.runner`) runs them;
the CLI is ``python -m epabi check`` (:mod:`epabi.check_cmd`); ``pytest_plugins = ["epabi.pytest_plugin"]``
turns them into tests of an EP author's suite.
"""

from __future__ import annotations

from .catalogue import CHECK_IDS, CHECKS, Check
from .outcome import CheckResult, Outcome, Status, VersionReport
from .report import format_table, junit_xml
from .runner import check
from .version_range import parse_versions

__all__ = ["CHECKS", "CHECK_IDS", "Check", "CheckResult", "Outcome", "Status", "VersionReport", "check",
           "format_table", "junit_xml", "parse_versions"]
