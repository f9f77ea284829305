"""``epabi`` command line: argument parsing and exit codes; each subcommand lives in its own module.

::

    python -m epabi devices [--host-version 1.24] [--library PATH] [--name epabi.virtual] [--json]   devices_cmd.py
    python -m epabi inspect LIBRARY [--json]                                                         inspect_cmd.py
    python -m epabi run [MODEL] [--device auto|software|cpu|gpu|npu[:N]] [--host emulated|onnxruntime]   run_cmd.py
                        [--host-version 1.24] [--library PATH] [--ep NAME]
    python -m epabi check LIBRARY [--versions 1.24..newest] [--ep NAME] [--json] [--junit FILE]     check_cmd.py
    python -m epabi bench [--runs N] [--model-runs N] [--fused-gemm 0|1] [--json]                     bench_cmd.py

Common options: --json, --cpu-only, -v, --hardware SPEC (repeatable: the hardware devices the emulated host
offers instead of the discovered ones, as ``Host(hardware=[...])``).

Exit codes: 0 when the command did its job (an empty device list included), 1 when it could not (the plugin
refused registration, the file is missing or cannot be loaded), 2 for usage errors. ``check``: 0 when no check
failed, 1 when one did, 2 for bad arguments (a missing library included). Errors are one line on
stderr. Plugin log messages go to stderr (``devices``) or into the report (``inspect``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from . import __version__, bench_cmd, check_cmd, devices_cmd, inspect_cmd, run_cmd
from .cmd_common import CliError, hardware_arg
from .versions import NEWEST_EMULATED, OLDEST_EMULATED, RELEASES


def build_parser() -> argparse.ArgumentParser:
    """The ``epabi`` argument parser (subcommands ``devices``, ``inspect``, ``run`` and ``check``)."""
    parser = argparse.ArgumentParser(
        prog="epabi",
        description="Emulated ONNX Runtime host for plugin execution providers "
                    f"(API {OLDEST_EMULATED}..{NEWEST_EMULATED}).")
    parser.add_argument("--version", action="version",
                        version=f"epabi {__version__} (emulates ONNX Runtime {RELEASES[OLDEST_EMULATED]}.."
                                f"{RELEASES[NEWEST_EMULATED]})")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    common.add_argument("--cpu-only", action="store_true",
                        help="offer the plugin only the CPU hardware device (skip GPU discovery)")
    common.add_argument("-v", "--verbose", action="store_true",
                        help="show the plugin's INFO log messages on stderr")
    common.add_argument("--hardware", type=hardware_arg, action="append", default=[],
                        metavar="TYPE[:VENDOR[:ID]][,K=V...]",
                        help="offer the plugin this hardware device instead of the discovered ones (repeatable; "
                             "emulated host only), e.g. cpu:intel, gpu:nvidia:0x2335")

    devices_cmd.add_parser(sub, common)
    inspect_cmd.add_parser(sub, common)
    run_cmd.add_parser(sub, common)
    check_cmd.add_parser(sub, common)
    bench_cmd.add_parser(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs the ``epabi`` command line; returns the exit code (0 ok, 1 failure, 2 usage error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except (CliError, run_cmd.RunError) as exc:
        print(f"epabi {args.command}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # output piped into a reader that quit early (| head)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1

