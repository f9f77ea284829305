"""``epabi check``: checks any plugin EP library at every emulated API version (:mod:`epabi.checks`); prints the
check x version table (``--json``: the whole result), writes JUnit XML (``--junit FILE``).

Exit codes: 0 when no check failed (passes and skips only), 1 when one did, 2 for bad arguments (no such
library, a bad ``--versions`` range, an ``--ep`` no factory has).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from .checks import check, format_table, junit_xml, parse_versions
from .checks.spec import (
    DEFAULT_ATOL,
    DEFAULT_CAPTURE_OPTIONS,
    DEFAULT_CYCLES,
    DEFAULT_RTOL,
    DEFAULT_TIMEOUT,
    QUICK_CYCLES,
)
from .checks.version_range import DEFAULT_VERSIONS
from .errors import CheckArgumentError

#: Exit code for arguments ``check`` cannot work with.
USAGE_ERROR = 2


def _versions_arg(text: str) -> str:
    try:
        parse_versions(text)
    except CheckArgumentError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return text


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE")
    return key, value


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Adds the ``check`` subcommand to the ``epabi`` parser."""
    chk = sub.add_parser(
        "check", parents=[common], help="check a plugin EP library against ORT's invariants, at every API version",
        description="Check any plugin EP library at every emulated ONNX Runtime API version: the invariants ORT "
                    "holds plugin EPs to, the plugin's conduct towards the host, and function (models of the ops "
                    "it claims against ORT's CPU EP, the graph capture contract). Prints a table of check x "
                    "version; exit code 1 when a check fails.")
    chk.add_argument("library", metavar="LIBRARY", help="path of the plugin EP shared library")
    chk.add_argument("--versions", type=_versions_arg, default=DEFAULT_VERSIONS, metavar="RANGE",
                     help="API versions: FROM..TO and/or single versions, comma-separated (24, 1.24, 1.24.4, "
                          f"oldest, newest); default {DEFAULT_VERSIONS}")
    chk.add_argument("--ep", default=None, metavar="NAME", help="the factory (EP) to check (default: the first)")
    chk.add_argument("--name", default=None,
                     help="registration name (default: the --ep name, else epabi; onnxruntime-ggml names its EP "
                          "after it)")
    chk.add_argument("--junit", default=None, metavar="FILE", help="also write JUnit XML to FILE")
    chk.add_argument("--ep-option", type=_pair, action="append", default=[], metavar="KEY=VALUE",
                     help="provider option of every EP and session (repeatable)")
    chk.add_argument("--capture-option", type=_pair, action="append", default=[], metavar="KEY=VALUE",
                     help="provider options that turn graph capture on, for the capture checks (repeatable; they "
                          f"replace the default {', '.join(f'{k}={v}' for k, v in DEFAULT_CAPTURE_OPTIONS.items())}"
                          "; WebGPU: enableGraphCapture=1)")
    chk.add_argument("--model", action="append", default=[], metavar="FILE",
                     help="an ONNX model the function check runs besides its probe models (repeatable)")
    chk.add_argument("--quick", action="store_true",
                     help=f"{QUICK_CYCLES} growth cycles instead of {DEFAULT_CYCLES}, three probe models")
    chk.add_argument("--cycles", type=int, default=None, metavar="N", help="register/unregister cycles of no_growth")
    chk.add_argument("--rtol", type=float, default=DEFAULT_RTOL, help=f"relative tolerance (default {DEFAULT_RTOL})")
    chk.add_argument("--atol", type=float, default=DEFAULT_ATOL, help=f"absolute tolerance (default {DEFAULT_ATOL})")
    chk.add_argument("--in-process", action="store_true",
                     help="run every version in this process, in turn (default: each in its own process)")
    chk.add_argument("--jobs", type=int, default=None, metavar="N",
                     help="versions checked at once in their own processes (default: the CPU count)")
    chk.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                     help=f"time one version may take in its own process (default {DEFAULT_TIMEOUT:g})")
    chk.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    """``check``: runs :func:`epabi.check` and reports; 0 all passed or skipped, 1 a check failed, 2 bad input."""
    os.environ.setdefault("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")  # epabi's own plugin without a GPU, as `run` does
    try:
        result = check(args.library, args.versions, args.ep, name=args.name,
                       hardware=_hardware(args), ep_options=dict(args.ep_option),
                       capture_options=dict(args.capture_option) if args.capture_option else None,
                       models=args.model, quick=args.quick, cycles=args.cycles, rtol=args.rtol, atol=args.atol,
                       isolate=not args.in_process, jobs=args.jobs, timeout=args.timeout,
                       verbose=args.verbose)
    except CheckArgumentError as exc:
        print(f"epabi check: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return USAGE_ERROR
    if args.junit:
        Path(args.junit).write_text(junit_xml(result))
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print("\n".join(format_table(result, verbose=args.verbose)))
    return 0 if result.ok else 1


def _hardware(args: argparse.Namespace) -> Any:
    from .cmd_common import CliError, hardware

    if not args.hardware and not args.cpu_only:
        return None  # discovered in each version's process
    try:
        return hardware(args.cpu_only, args.hardware)
    except CliError as exc:
        raise CheckArgumentError(str(exc)) from exc

