"""ONNX backend conformance on the software adapter and (on a GPU machine) on the CUDA kernels, through the
epabi host.

Every relevant case (its graph uses an op we have a kernel for) must reproduce the expected outputs; the
nodes the plugin claims run on our kernels, the rest on the CPU fallback. The per-op table (cases,
claimed, passed) is printed at the end of the pytest run, one for each device that ran.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import pytest

import epabi
from conformance import KERNEL_OPS, Case, baseline_engine, close, relevant_cases, tolerance
from epabi.cpu_fallback import FALLBACK_ENV

TABLE: dict[str, list[int]] = {}  # op -> [cases, claimed, passed], software adapter
GPU_TABLE: dict[str, list[int]] = {}  # the same on the GPU EP device (CUDA kernels)


@pytest.fixture(scope="module")
def sw_host(library_path: str) -> Iterator[epabi.Host]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")
        with epabi.Host(hardware=[epabi.cpu_device()]) as host:
            host.register_execution_provider_library("epabi", library_path)
            yield host


@pytest.fixture(scope="module")
def gpu_host(library_path: str) -> Iterator[epabi.Host]:
    """A host listing the GPUs (sysfs, else the ones the plugin finds through the CUDA driver)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EPABI_CUDA_DISCOVERY", "1")
        mp.delenv("EPABI_ALLOW_SOFTWARE_ADAPTER", raising=False)
        with epabi.Host() as host:
            host.register_execution_provider_library("epabi", library_path)
            gpus = [d for d in host.get_ep_devices()
                    if d.ep_name == epabi.get_ep_name() and d.ep_metadata.get("device_kind") == "gpu"]
            if not gpus:
                pytest.skip("no GPU EP device (no NVIDIA GPU or driver)")
            yield host


@pytest.mark.parametrize("case", relevant_cases(), ids=lambda c: f"{c.source}:{c.name}")
def test_backend_case(case: Case, sw_host: epabi.Host) -> None:
    _check_case(case, sw_host, TABLE)


@pytest.mark.gpu
@pytest.mark.parametrize("case", relevant_cases(), ids=lambda c: f"{c.source}:{c.name}")
def test_backend_case_gpu(case: Case, gpu_host: epabi.Host) -> None:
    _check_case(case, gpu_host, GPU_TABLE)


def _check_case(case: Case, host: epabi.Host, table: dict[str, list[int]]) -> None:
    engine = baseline_engine(case.name)
    if engine is None:
        pytest.skip("no CPU fallback engine (onnxruntime, onnx.reference) alone reproduces this case")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(FALLBACK_ENV, engine)
        _run_case(case, host, table)


def _run_case(case: Case, host: epabi.Host, table: dict[str, list[int]]) -> None:
    so = epabi.SessionOptions()
    so.add_provider_for_devices([d for d in host.get_ep_devices() if d.ep_name == epabi.get_ep_name()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with epabi.InferenceSession(case.model, so) as session:
            names = [i.name for i in session.get_inputs()]
            # numpy scalars become 0-d arrays, as for onnxruntime (neither binding takes them)
            feeds = {n: np.asarray(v) if isinstance(v, np.generic) else v for n, v in zip(names, case.inputs)}
            outputs = session.run(None, feeds)
            claimed_ops = {n.op_type for n in session.graph.nodes if n.ep_name == epabi.get_ep_name()}
    problem = close(outputs, case.outputs, *tolerance(case))  # the override applies to onnxruntime only
    for op in case.ops & KERNEL_OPS:
        row = table.setdefault(op, [0, 0, 0])
        row[0] += 1
        if op in claimed_ops:
            row[1] += 1
            row[2] += problem is None
    assert problem is None, f"{problem}; ops on our EP: {sorted(claimed_ops)}"
