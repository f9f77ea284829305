"""CMake reads MIN_ONNXRUNTIME_VERSION strictly: missing, empty or malformed content fails configure clearly."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not on PATH")


def _configure(tmp_path: Path, content: str | None) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("CMakeLists.txt", "pyproject.toml", "version_script.lds", "symbols.def"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "native", src / "native")
    shutil.copytree(ROOT / "cmake", src / "cmake")
    if content is not None:
        (src / "MIN_ONNXRUNTIME_VERSION").write_text(content)
    return subprocess.run(["cmake", "-S", str(src), "-B", str(tmp_path / "build")],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("content", "message"), [
    (None, "is missing"),
    ("", "is empty"),
    ("  \n", "is empty"),
    ("1.24", "is not MAJOR.MINOR.PATCH"),
    ("v1.24.4", "is not MAJOR.MINOR.PATCH"),
    ("1.24.4-rc1", "is not MAJOR.MINOR.PATCH"),
])
def test_bad_minimum_version_fails_configure(tmp_path: Path, content: str | None, message: str) -> None:
    proc = _configure(tmp_path, content)
    assert proc.returncode != 0
    assert "MIN_ONNXRUNTIME_VERSION" in proc.stderr and message in proc.stderr


def test_good_minimum_version_configures(tmp_path: Path) -> None:
    proc = _configure(tmp_path, (ROOT / "MIN_ONNXRUNTIME_VERSION").read_text())
    assert proc.returncode == 0, proc.stderr
