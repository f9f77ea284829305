"""The README's Python examples run as written (the first drives the onnxruntime installed with magika)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_has_its_examples() -> None:
    assert len(_blocks()) == 3  # onnxruntime, epabi's host, profiling (after the first)


def test_readme_examples_run(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    first, second, profiling = _blocks()
    code = first + "\nimport epabi, numpy as np\n" + second + "\n" + profiling
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "EpAbiExecutionProvider" in proc.stdout  # the node assignment printed by the second example
    assert proc.stdout.count("array(") >= 2
    assert "['epabi_compute']" in proc.stdout  # the profiling example, under onnxruntime >= 1.25
    assert len(list(tmp_path.glob("mlp_*.json"))) == 1


def test_readme_first_lines_are_the_two_commands() -> None:
    lines = README.read_text().splitlines()
    assert lines[0] == "# epabi"
    commands = [line for line in lines[2:7] if line.startswith("pip install")]
    assert commands[0].startswith("pip install . && python -m epabi run")
    assert commands[1].startswith('pip install ".[test]" && python -m pytest')
