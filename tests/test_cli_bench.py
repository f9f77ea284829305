"""``epabi bench`` (python/epabi/bench_cmd.py): exits 1 with a reason without a GPU, finds and runs the checkout's
bench/graph_replay.py with its options otherwise. The table itself needs the GPU (bench/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import epabi
from epabi import bench_cmd, cli


def test_bench_without_a_gpu_says_so_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    if epabi.hardware.cuda_gpu_count() > 0:
        pytest.skip("this machine has a GPU: the bench would run")
    assert cli.main(["bench", "--runs", "3"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("epabi bench: error: no NVIDIA GPU with a working driver"), err
    assert "bench/software_replay.py" in err


def test_bench_runs_the_script_with_its_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_cmd.hardware, "cuda_gpu_count", lambda: 1)
    script = tmp_path / "graph_replay.py"
    record = tmp_path / "argv.json"
    script.write_text(f"import json, sys\nopen({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\nsys.exit(3)\n")
    rc = cli.main(["bench", "--script", str(script), "--runs", "7", "--model-runs", "5", "--fused-gemm", "0",
                   "--json", "--keep-build", str(tmp_path / "build")])
    assert rc == 3  # the script's exit status
    assert json.loads(record.read_text()) == ["--runs", "7", "--model-runs", "5", "--fused-gemm", "0", "--json",
                                              "--keep-build", str(tmp_path / "build")]


def test_bench_finds_the_checkout_script_from_a_subfolder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "graph_replay.py").write_text("")
    (tmp_path / "docs" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "docs" / "deep")
    assert bench_cmd.find_script(None) == tmp_path.resolve() / "bench" / "graph_replay.py"


def test_bench_with_a_missing_script_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(bench_cmd.hardware, "cuda_gpu_count", lambda: 1)
    assert cli.main(["bench", "--script", str(tmp_path / "nope.py")]) == 1
    assert "nope.py: no such file" in capsys.readouterr().err


def test_the_bench_script_alone_skips_without_a_gpu() -> None:
    """bench/graph_replay.py run directly prints why nothing ran and exits 0 (it is informational, not a test)."""
    if epabi.hardware.cuda_gpu_count() > 0:
        pytest.skip("this machine has a GPU: the bench would run")
    script = Path(__file__).resolve().parents[1] / "bench" / "graph_replay.py"
    proc = subprocess.run([sys.executable, str(script), "--runs", "3"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "[skip] graph_replay: no NVIDIA GPU" in proc.stdout
