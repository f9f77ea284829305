"""The C consumers in examples/c/, built by examples/c/run.sh against the installed package's CMake config
(find_package(epabi CONFIG)): minimal_host drives the plugin's factory without ONNX Runtime; ort_consumer runs
a model through real onnxruntime's shared library (1.24.4 and 1.32.0) with IOBinding and graph capture, and sets
process-wide EP defaults (ep_factory.EpAbiExecutionProvider.<key>) in the environment's config entries, which
onnxruntime's Python API cannot. Outputs are checked against ORT's CPU EP. Skipped without cmake or a C compiler."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

import epabi
from real_ort import MIN, NEWEST, host_env, require_ort_python, run_json

ROOT = Path(__file__).resolve().parents[1]
RUN_SH = ROOT / "examples" / "c" / "run.sh"
EP = epabi.get_ep_name()
ENV_KEY = f"ep_factory.{EP}."
OUTPUT = re.compile(r"^output (\S+) run (\d+) shape \[([\d,]*)\]:(.*)$")

# Element i of input k in run r, as ort_consumer.c writes it.
CPU_REFERENCE = '''
import numpy as np
sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
runs = []
for r in range(int(sys.argv[2])):
    feeds = {}
    for k, arg in enumerate(sess.get_inputs()):
        i = np.arange(int(np.prod(arg.shape)))
        feeds[arg.name] = ((((7 * i + 5 * k + 3 * r) % 17) - 8) / 8).astype(np.float32).reshape(arg.shape)
    runs.append({o.name: v.ravel().tolist() for o, v in zip(sess.get_outputs(), sess.run(None, feeds))})
emit(runs=runs)
'''


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("cmake") is None or (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")) is None:
        pytest.skip("examples/c needs cmake and a C compiler")
    return tmp_path_factory.mktemp("c-examples")


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("c-model") / "mlp.onnx"
    onnx.save(epabi.models.mlp(layers=2, width=8, batch=2, seed=4), str(path))
    return path


def _run_sh(build: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = host_env({"PYTHON": sys.executable, "EPABI_ALLOW_SOFTWARE_ADAPTER": "1"})
    proc = subprocess.run(["bash", str(RUN_SH), "--build-dir", str(build), *args], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    if proc.returncode == 77:
        pytest.skip(proc.stderr.strip())
    return proc


def _section(stdout: str, name: str) -> list[str]:
    lines = stdout.splitlines()
    start = lines.index(f"== {name}") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("== ")), len(lines))
    return lines[start:end]


def _ort_library(version: str) -> str:
    venv = require_ort_python(version).parent.parent
    found = sorted(venv.glob("lib/python*/site-packages/onnxruntime/capi/libonnxruntime.so.*"))
    assert found, f"no libonnxruntime.so.* in {venv}"
    return str(found[-1])


def _consumer(build: Path, version: str, model: Path, *options: str) -> tuple[subprocess.CompletedProcess[str],
                                                                            list[str]]:
    proc = _run_sh(build, "--ort", _ort_library(version), "--model", str(model), "--", "--log-level", "1", *options)
    lines = _section(proc.stdout, "ort_consumer") if "== ort_consumer" in proc.stdout else []
    return proc, lines


def _check_outputs(lines: list[str], version: str, model: Path, runs: int = 3) -> None:
    want, _, _ = run_json(version, CPU_REFERENCE, args=[str(model), str(runs)])
    got: dict[int, dict[str, list[float]]] = {}
    for line in lines:
        m = OUTPUT.match(line)
        if m:
            got.setdefault(int(m.group(2)), {})[m.group(1)] = [float(v) for v in m.group(4).split()]
    assert sorted(got) == list(range(runs)), lines
    for r in range(runs):
        assert got[r].keys() == want["runs"][r].keys()
        for name, values in want["runs"][r].items():
            assert got[r][name] == pytest.approx(values, rel=1e-5, abs=1e-6), (r, name)


def _nodes(lines: list[str]) -> dict[str, str]:
    return dict(line[len("node "):].split(": ", 1) for line in lines if line.startswith("node "))


def test_minimal_host_drives_the_factory_without_onnxruntime(build_dir: Path) -> None:
    proc = _run_sh(build_dir, "--no-ort")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = _section(proc.stdout, "minimal_host")
    assert f"factory 0: name {EP}, vendor epabi, declares API {epabi._ffi.NEWEST_API}" in out
    assert f"factory 0: vendor id 0x10de, version {epabi.__version__}" in out
    assert "ep devices: 1" in out and f"ep device 0: {EP} on CPU hardware (vendor minimal_host)" in out
    assert any(line.startswith("  ep metadata: device_kind=software blas=") for line in out), out
    assert out[-3:] == ["ReleaseEpFactory 0: OK", "library unloaded: yes", "statuses alive: 0, key-value sets alive: 0"]
    # the env config entries reach the plugin: allow_virtual_devices=1 adds its virtual device
    virtual = subprocess.run([str(build_dir / "minimal_host"), epabi.get_library_path(), "--env",
                              "allow_virtual_devices=1"], capture_output=True, text=True, timeout=60, check=False,
                             env=host_env({"EPABI_ALLOW_SOFTWARE_ADAPTER": "1"}))
    assert virtual.returncode == 0, virtual.stdout + virtual.stderr
    assert "ep devices: 2" in virtual.stdout
    assert f"  hardware metadata: is_virtual=1 DiscoveredBy={EP}" in virtual.stdout
    assert "  ep metadata: device_kind=virtual" in virtual.stdout


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_ort_consumer_runs_the_model_through_iobinding(build_dir: Path, model_path: Path, version: str) -> None:
    proc, lines = _consumer(build_dir, version, model_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert lines[0] == f"onnxruntime {version}"
    assert f"env default: {ENV_KEY}min_num_runs_before_cuda_graph_capture=1" in lines
    assert any(line.startswith("ep device ") and f": {EP} (vendor epabi)" in line for line in lines), lines
    assert set(_nodes(lines).values()) == {EP}
    _check_outputs(lines, version, model_path)
    replays = proc.stderr.count(f"Replaying the captured {EP} graph")
    if version == NEWEST:  # graph capture (1.26+), after the one warm-up run the env default asks for
        assert "provider option: enable_cuda_graph=1" in lines
        assert proc.stderr.count("capturing graph of annotation id 0 on this thread after 1 regular run(s)") == 1
        assert replays == 2
    else:
        assert not any(line.startswith("provider option:") for line in lines)
        assert "capturing graph" not in proc.stderr and replays == 0


@pytest.mark.real_ort
def test_provider_option_beats_the_env_default_under_onnxruntime(build_dir: Path, model_path: Path) -> None:
    proc, lines = _consumer(build_dir, NEWEST, model_path, "--option", "enable_cuda_graph=1",
                            "--option", "min_num_runs_before_cuda_graph_capture=2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"env default: {ENV_KEY}min_num_runs_before_cuda_graph_capture=1" in lines
    assert proc.stderr.count("capturing graph of annotation id 0 on this thread after 2 regular run(s)") == 1
    _check_outputs(lines, NEWEST, model_path)


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_env_default_places_nodes_under_onnxruntime(build_dir: Path, model_path: Path, version: str) -> None:
    proc, lines = _consumer(build_dir, version, model_path, "--env", "force_cpu_nodes=relu0",
                            "--option", "enable_cuda_graph=0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    nodes = _nodes(lines)
    assert nodes.pop("relu0") == "CPUExecutionProvider"
    assert nodes and set(nodes.values()) == {EP}
    _check_outputs(lines, version, model_path)


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_malformed_env_default_fails_session_creation(build_dir: Path, model_path: Path, version: str) -> None:
    proc, _ = _consumer(build_dir, version, model_path, "--env", "min_num_runs_before_cuda_graph_capture=x")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "error: CreateSession:" in proc.stderr
    assert f"option '{ENV_KEY}min_num_runs_before_cuda_graph_capture' has value 'x'" in proc.stderr


@pytest.mark.parametrize(("args", "message"), [(["--ort", "/nonexistent/libonnxruntime.so.1"], "no such file"),
                                               (["--model", "/nonexistent/model.onnx"], "no such file"),
                                               (["--ort"], "--ort needs a value"),
                                               (["--bogus"], "unknown argument '--bogus'")])
def test_run_sh_refuses_bad_arguments_instead_of_skipping(tmp_path: Path, args: list[str], message: str) -> None:
    # an --ort file given by name that is missing is the caller's mistake (exit 2), not a machine without
    # onnxruntime (exit 77, a skip); bash's own "unbound variable" is not the message
    proc = _run_sh(tmp_path, *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "unbound variable" not in proc.stderr
