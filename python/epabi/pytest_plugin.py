"""pytest plugin: ``epabi check`` as tests of an EP author's own suite, one test per check and API version.

::

    # conftest.py
    pytest_plugins = ["epabi.pytest_plugin"]

    # test_my_ep.py
    EPABI_CHECK = {"library": "build/libmy_ep.so", "versions": "1.24..newest"}   # or --epabi-library ...

    def test_epabi(epabi_check):
        epabi_check.assert_ok()        # fails with the reason; a skipped check is skipped

Every test that takes the ``epabi_check`` fixture is parametrized over the catalogue's checks x the versions
(ids ``<check>-<release>``, e.g. ``statuses-1.24.4``). The whole matrix is run once per session and
configuration (:func:`epabi.check`, each version in its own process), the first time a test needs it.

Configuration: a module-level ``EPABI_CHECK`` dict of :func:`epabi.check` keyword arguments (``library`` is
required; ``versions``, ``ep``, ``hardware``, ``ep_options``, ``quick``, ...), else the command-line options
``--epabi-library``, ``--epabi-versions``, ``--epabi-ep``, ``--epabi-hardware`` (repeatable), ``--epabi-quick``
or the ini keys ``epabi_library``, ``epabi_versions``, ``epabi_ep``. Without a library the tests are skipped.
Give the options as ``--epabi-library=PATH`` (one word) when the plugin comes from a conftest: pytest reads the
command line for test paths before the conftest has declared them (``-p epabi.pytest_plugin`` avoids that).
``epabi_check_result`` gives the whole :class:`epabi.CheckResult` (session-scoped, same configuration).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from .checks import CHECK_IDS, CheckResult, Outcome, Status, check, parse_versions
from .errors import CheckArgumentError
from .hardware import parse_hardware
from .versions import RELEASES

_RESULTS = pytest.StashKey[dict[str, CheckResult]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("epabi", "epabi check of a plugin EP library")
    group.addoption("--epabi-library", default=None, metavar="PATH", help="the plugin EP library to check")
    group.addoption("--epabi-versions", default=None, metavar="RANGE", help="API versions, e.g. 1.24..newest")
    group.addoption("--epabi-ep", default=None, metavar="NAME", help="the factory (EP) to check")
    group.addoption("--epabi-hardware", action="append", default=[], metavar="SPEC",
                    help="a hardware device the host offers (epabi --hardware syntax, repeatable)")
    group.addoption("--epabi-quick", action="store_true", help="fewer growth cycles and probe models")
    parser.addini("epabi_library", "the plugin EP library to check")
    parser.addini("epabi_versions", "API versions to check, e.g. 1.24..newest")
    parser.addini("epabi_ep", "the factory (EP) to check")


@dataclass(frozen=True)
class CheckCase:
    """One check at one API version, as the ``epabi_check`` fixture hands it to a test."""

    outcome: Outcome

    @property
    def check(self) -> str:
        return self.outcome.check

    @property
    def api(self) -> int:
        return self.outcome.api

    @property
    def passed(self) -> bool:
        return self.outcome.status is Status.PASS

    @property
    def reason(self) -> str:
        return self.outcome.reason

    def assert_ok(self) -> None:
        """Fails the test with the reason when the check failed (a skipped check never gets here)."""
        if self.outcome.status is Status.FAIL:
            pytest.fail(f"{self.check} at {RELEASES[self.api]} (API {self.api}): {self.reason}", pytrace=False)


def _arguments(config: pytest.Config, module: Any) -> dict[str, Any] | None:
    """The :func:`epabi.check` arguments for tests of ``module``; None when no library is configured."""
    given = getattr(module, "EPABI_CHECK", None)
    if given is not None:
        return dict(given)
    library = config.getoption("epabi_library") or config.getini("epabi_library") or None
    if not library:
        return None
    args: dict[str, Any] = {"library": library,
                            "versions": config.getoption("epabi_versions") or config.getini("epabi_versions") or None,
                            "ep": config.getoption("epabi_ep") or config.getini("epabi_ep") or None,
                            "quick": bool(config.getoption("epabi_quick"))}
    specs = config.getoption("epabi_hardware")
    if specs:
        args["hardware"] = [parse_hardware(s) for s in specs]
    return args


def _key(args: dict[str, Any]) -> str:
    return json.dumps(args, sort_keys=True, default=repr)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "epabi_check" not in metafunc.fixturenames:
        return
    args = _arguments(metafunc.config, metafunc.module)
    if args is None:
        metafunc.parametrize("epabi_check", [pytest.param(None, marks=pytest.mark.skip(
            reason="no plugin library to check: set EPABI_CHECK = {'library': ...} in the module, --epabi-library "
                   "or the epabi_library ini key"))], indirect=True, ids=["no-library"])
        return
    try:
        apis = parse_versions(args.get("versions"))
    except CheckArgumentError as exc:
        raise pytest.UsageError(f"epabi check: {exc}") from exc
    params = [(check_id, api) for api in apis for check_id in CHECK_IDS]
    metafunc.parametrize("epabi_check", params, indirect=True,
                         ids=[f"{check_id}-{RELEASES[api]}" for check_id, api in params])


def _result(config: pytest.Config, args: dict[str, Any]) -> CheckResult:
    results = config.stash.setdefault(_RESULTS, {})
    key = _key(args)
    if key not in results:
        try:
            results[key] = check(**args)
        except CheckArgumentError as exc:
            raise pytest.UsageError(f"epabi check: {exc}") from exc
    return results[key]


@pytest.fixture
def epabi_check(request: pytest.FixtureRequest) -> CheckCase:
    """One check at one API version (parametrized by this plugin); skips the test when the check was skipped."""
    check_id, api = request.param
    args = _arguments(request.config, request.module)
    assert args is not None  # pytest_generate_tests parametrized this test only with a library
    outcome = _result(request.config, args).outcome(check_id, api)
    if outcome.status is Status.SKIP:
        pytest.skip(outcome.reason)
    return CheckCase(outcome)


@pytest.fixture
def epabi_check_result(request: pytest.FixtureRequest) -> CheckResult:
    """The whole result for the module's configuration (run once per session and configuration)."""
    args = _arguments(request.config, request.module)
    if args is None:
        pytest.skip("no plugin library to check: set EPABI_CHECK or --epabi-library")
    return _result(request.config, args)
