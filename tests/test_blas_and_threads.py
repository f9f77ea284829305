"""The software adapter's CPU speed machinery: the BLAS it loads at run time (metadata 'blas', EPABI_BLAS) and its
intra-op thread pool (option intra_op_num_threads), checked for the values they compute, not only that they run."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import epabi

KEY = "intra_op_num_threads"


def physical_cores() -> int:
    """ORT's default thread count, counted as the plugin counts it: distinct (package, core) ids of our CPUs."""
    cores = set()
    cpus = sorted(os.sched_getaffinity(0))
    for cpu in cpus:
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add((topo.joinpath("physical_package_id").read_text(), topo.joinpath("core_id").read_text()))
        except OSError:
            return len(cpus)
    return len(cores)


def conv_model() -> tuple[object, dict[str, np.ndarray], np.ndarray]:
    """Conv (3x3, pads 1, 8 -> 16 channels, bias, 2 images of 33x47) -> Relu -> MatMul with a [47, 24] matrix:
    several (image, tile) tasks and GEMM panels. Returns the model, its feeds and the expected output (numpy)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 8, 33, 47)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    m = rng.standard_normal((47, 24)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("MatMul", ["r", "m"], ["y"])]
    graph = helper.make_graph(nodes, "conv_matmul", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(a, n) for a, n in [(w, "w"), (b, "b"), (m, "m")]])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))).astype(np.float64)
    conv = np.zeros((2, 16, 33, 47))
    for i in range(3):
        for j in range(3):
            conv += np.einsum("nchw,mc->nmhw", xp[:, :, i:i + 33, j:j + 47], w[:, :, i, j].astype(np.float64))
    expected = np.maximum(conv + b[None, :, None, None], 0) @ m.astype(np.float64)
    return model, {"x": x}, expected.astype(np.float32)


def _session(host: epabi.Host, model: object, options: dict[str, str]) -> epabi.InferenceSession:
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), options)
    sess = epabi.InferenceSession(model, so)
    assert set(sess.node_assignment.values()) == {epabi.get_ep_name()}
    return sess


@pytest.mark.parametrize("value", ["-1", "abc", "2.5", "", " 3", "257", "99999999999"])
def test_bad_thread_count_is_refused_naming_key_and_value(host: epabi.Host, value: str) -> None:
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {KEY: value})
    with pytest.raises(epabi.OrtStatusError) as info:
        host.create_ep(so)
    assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
    assert f"'ep.epabiexecutionprovider.{KEY}' has value '{value}'" in info.value.message
    assert "from 0 (one per physical core) to 256" in info.value.message


@pytest.mark.parametrize(("value", "threads"), [(None, "cores"), ("0", "cores"), ("1", 1), ("3", 3), ("256", 256)])
def test_thread_count_and_blas_are_logged(host: epabi.Host, caplog: pytest.LogCaptureFixture, value: str | None,
                                          threads: int | str) -> None:
    want = physical_cores() if threads == "cores" else threads
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {} if value is None else {KEY: value})
    with caplog.at_level(logging.INFO, logger="epabi"):
        host.create_ep(so).close()
    lines = [r.getMessage() for r in caplog.records if "intra-op thread" in r.getMessage()]
    assert len(lines) == 1, lines
    assert f"software adapter: {want} intra-op thread(s)" in lines[0]
    assert host.get_ep_devices()[0].ep_metadata["blas"] in lines[0]


@pytest.mark.parametrize("threads", ["1", "2", "3", "8"])
def test_results_do_not_depend_on_the_thread_count(host: epabi.Host, threads: str) -> None:
    model, feeds, expected = conv_model()
    sess = _session(host, model, {KEY: threads})
    try:
        (y,) = sess.run(None, feeds)
    finally:
        sess.close()
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-3)


def test_concurrent_runs_share_one_pool(host: epabi.Host) -> None:
    """Runs on four Python threads at once: one holds the pool, the others run their loops on their own thread."""
    model, feeds, expected = conv_model()
    sess = _session(host, model, {KEY: "2"})
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(5):
                results.append(sess.run(None, feeds)[0])
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    workers = [threading.Thread(target=work) for _ in range(4)]
    try:
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    finally:
        sess.close()
    assert not errors, errors
    assert len(results) == 20
    for y in results:
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-3)


_CHILD = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import epabi, test_blas_and_threads as t
with epabi.Host(hardware=[epabi.cpu_device()]) as host:
    host.register_execution_provider_library("epabi", sys.argv[2])
    model, feeds, expected = t.conv_model()
    sess = t._session(host, model, {"intra_op_num_threads": "2"})
    (y,) = sess.run(None, feeds)
    sess.close()
    err = float(np.max(np.abs(y - expected) / (1 + np.abs(expected))))
    print(json.dumps({"blas": host.get_ep_devices()[0].ep_metadata["blas"], "err": err}))
"""


def _child(library_path: str, blas: str | None) -> dict[str, object]:
    """The software device's 'blas' metadata and the conv model's error in a fresh process (the BLAS is chosen once
    per process) with EPABI_BLAS=blas (None: unset)."""
    env = dict(os.environ, EPABI_ALLOW_SOFTWARE_ADAPTER="1", EPABI_CUDA_DISCOVERY="0")
    env.pop("EPABI_BLAS", None)
    if blas is not None:
        env["EPABI_BLAS"] = blas
    p = subprocess.run([sys.executable, "-c", _CHILD, str(Path(__file__).parent), library_path], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_the_wheel_blas_is_the_default(library_path: str) -> None:
    scipy_openblas32 = pytest.importorskip("scipy_openblas32")
    got = _child(library_path, None)
    lib = str(Path(scipy_openblas32.get_lib_dir()).resolve() / "libscipy_openblas.so")
    assert got["blas"].startswith("OpenBLAS "), got
    assert got["blas"].endswith(f"(scipy-openblas32 wheel: {lib})"), got
    assert got["err"] < 1e-4


def test_blas_none_uses_the_built_in_loop(library_path: str) -> None:
    got = _child(library_path, "none")
    assert got["blas"] == "built-in loop (EPABI_BLAS=none)"
    assert got["err"] < 1e-4


def test_blas_path_that_is_no_cblas_falls_back_with_the_reason(library_path: str) -> None:
    libm = "libm.so.6"
    got = _child(library_path, libm)
    assert got["blas"] == (f"built-in loop ({libm} has no cblas_sgemm; EPABI_BLAS={libm} is not a CBLAS library)")
    assert got["err"] < 1e-4
    missing = _child(library_path, "/nonexistent/libcblas.so")
    assert missing["blas"].startswith("built-in loop (/nonexistent/libcblas.so: cannot open shared object file")
