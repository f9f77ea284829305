"""Shared fixtures: the installed plugin library, hosts (the GPU tests' too), the software-adapter switch."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import epabi

# A CPU-only host on a GPU machine would otherwise get the GPUs the CUDA driver sees, as hardware devices the
# plugin creates itself, instead of the software adapter most tests use; GPU tests turn discovery back on.
os.environ.setdefault("EPABI_CUDA_DISCOVERY", "0")


@pytest.fixture(scope="session")
def library_path() -> str:
    return epabi.get_library_path()


@pytest.fixture
def software_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lets the plugin offer its CPU software adapter (EPABI_ALLOW_SOFTWARE_ADAPTER=1).

    EPABI_CUDA_DISCOVERY=0 keeps it that way on a GPU machine: a CPU-only host would otherwise get the GPUs the
    CUDA driver sees, as hardware devices the plugin creates itself."""
    monkeypatch.setenv("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")
    monkeypatch.setenv("EPABI_CUDA_DISCOVERY", "0")


@pytest.fixture
def no_software_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EPABI_ALLOW_SOFTWARE_ADAPTER", raising=False)


@pytest.fixture
def cpu_only() -> list[epabi.HardwareDevice]:
    return [epabi.cpu_device()]


@pytest.fixture
def host(software_adapter: None, library_path: str) -> Iterator[epabi.Host]:
    """Newest emulated host, CPU-only hardware, our library registered as 'epabi'."""
    with epabi.Host(hardware=[epabi.cpu_device()]) as h:
        h.register_execution_provider_library("epabi", library_path)
        yield h


@pytest.fixture
def gpu_host(library_path: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[epabi.Host]:
    """The newest emulated host listing the GPUs (sysfs, else the ones the plugin finds through the CUDA driver),
    without the software adapter, our library registered as 'epabi' (the GPU tests' host; their device:
    gpu_devices.gpu_ep_device)."""
    monkeypatch.setenv("EPABI_CUDA_DISCOVERY", "1")
    monkeypatch.delenv("EPABI_ALLOW_SOFTWARE_ADAPTER", raising=False)
    with epabi.Host() as host:
        host.register_execution_provider_library("epabi", library_path)
        yield host


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Prints the conformance tables (op, cases, claimed, passed) of the devices whose conformance tests ran."""
    import sys

    module = sys.modules.get("test_conformance")  # only when the conformance tests were collected
    for attr, title in (("TABLE", "the software adapter"), ("GPU_TABLE", "the GPU (CUDA kernels)")):
        table = getattr(module, attr, None)
        if not table:
            continue
        tr = terminalreporter
        tr.section(f"ONNX backend conformance on {title}")
        tr.write_line(f"{'op':<22}{'cases':>7}{'claimed':>9}{'passed':>8}")
        for op in sorted(table):
            cases, claimed, passed = table[op]
            tr.write_line(f"{op:<22}{cases:>7}{claimed:>9}{passed:>8}")
