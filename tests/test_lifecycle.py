"""Register/unregister cycles leave no file descriptors, mappings or handles behind."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

import epabi
from epabi.handles import PROCESS_HANDLES, TOMBSTONES
from epabi.models import mlp
from epabi.objects import KeyValuePairs, Status

pytestmark = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc (Linux)")


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _mappings(path: str) -> int:
    return sum(1 for line in Path("/proc/self/maps").read_text().splitlines() if line.endswith(path))


def _rss() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _maps(files_only: bool) -> int:
    """Mappings of this process; ``files_only``: those backed by a file (libraries), not anonymous memory."""
    lines = Path("/proc/self/maps").read_text().splitlines()
    return sum(1 for line in lines if not files_only or len(line.split(None, 5)) == 6)


#: RSS growth allowed over 200 cycles: allocator and list-growth noise. The leak this guards against (cffi kept
#: every dlopen wrapper) grew 33 kB per cycle, 6.6 MB over 200.
RSS_SLACK = 512 << 10
#: CI's sanitizer pass preloads AddressSanitizer, whose allocator keeps freed memory in quarantine (mapped, up to
#: 256 MB): there, RSS and anonymous mappings grow by design, so only files and mapped libraries are compared.
_UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")


def test_register_unregister_200_times_without_growth(library_path: str, software_adapter: None) -> None:
    host = epabi.Host(hardware=[epabi.cpu_device(), epabi.nvidia_gpu_device()])
    handles_before = len(host.handles.live(object))

    def cycle() -> None:
        host.register_execution_provider_library("epabi", library_path)
        assert len(host.get_ep_devices()) == 1
        assert _mappings(library_path) > 0
        so = epabi.SessionOptions()
        so.add_provider_for_devices(host.get_ep_devices())
        host.create_ep(so).close()
        host.unregister_execution_provider_library("epabi")

    # warm-up: first-use caches of cffi and libc, and the handle table's bounded tombstones filled
    for _ in range(2000):
        cycle()
        if PROCESS_HANDLES.tombstone_count() >= TOMBSTONES:
            break
    for _ in range(20):
        cycle()
    gc.collect()
    fds, maps, rss = _fds(), _maps(_UNDER_ASAN), _rss()
    for _ in range(200):
        cycle()
    gc.collect()
    assert _fds() <= fds
    assert _maps(_UNDER_ASAN) <= maps
    if not _UNDER_ASAN:
        assert _rss() - rss < RSS_SLACK, f"RSS grew {(_rss() - rss) >> 10} kB over 200 cycles"
    assert _mappings(library_path) == 0, "the plugin stayed mapped after unregister"
    assert host.get_ep_devices() == []
    # everything the plugin made was released: no statuses or key-value pairs beyond the host's own
    assert host.handles.live(Status) == []
    assert len(host.handles.live(object)) == handles_before
    assert all(k in {h.c_metadata for h in host.hardware} for k in host.handles.live(KeyValuePairs))


def test_unregister_unknown_name_and_double_register(host: epabi.Host, library_path: str) -> None:
    with pytest.raises(ValueError, match="already registered under epabi"):
        host.register_execution_provider_library("epabi", library_path)
    with pytest.raises(ValueError, match="nope was not registered"):
        host.unregister_execution_provider_library("nope")
    # the same file under a second name is accepted, as in onnxruntime
    host.register_execution_provider_library("epabi-2", library_path)
    assert len(host.get_ep_devices()) == 2
    host.unregister_execution_provider_library("epabi-2")
    assert len(host.get_ep_devices()) == 1


def test_an_empty_registration_name_is_a_name_as_in_onnxruntime(library_path: str, software_adapter: None) -> None:
    # onnxruntime 1.24.4 and 1.32.0 register, refuse a second registration and unregister under ""
    with epabi.Host(hardware=[epabi.cpu_device()]) as host:
        host.register_execution_provider_library("", library_path)
        assert len(host.get_ep_devices()) == 1
        with pytest.raises(ValueError, match="already registered"):
            host.register_execution_provider_library("", library_path)
        host.unregister_execution_provider_library("")
        assert host.get_ep_devices() == []
        with pytest.raises(TypeError, match="registration name"):
            host.register_execution_provider_library(None, library_path)  # type: ignore[arg-type]


def test_missing_file_is_a_load_error(tmp_path: Path) -> None:
    # the loader's own message, as ORT reports it (dlerror is read before any other dl* call resets it)
    with epabi.Host(hardware=[]) as host:
        with pytest.raises(epabi.PluginLoadError, match="Failed to load library .*missing.so.*: cannot open shared "
                                                        "object file: No such file or directory"):
            host.register_execution_provider_library("x", tmp_path / "missing.so")
        not_elf = tmp_path / "text.so"
        not_elf.write_text("not a shared library, but long enough for an ELF header" * 4)
        with pytest.raises(epabi.PluginLoadError, match="text.so: invalid ELF header"):
            host.register_execution_provider_library("y", not_elf)


def test_library_without_exports_is_a_load_error(tmp_path: Path) -> None:
    import ctypes.util

    libm = ctypes.util.find_library("m")
    assert libm is not None
    with epabi.Host(hardware=[]) as host:
        with pytest.raises(epabi.PluginLoadError, match="Failed to get symbol CreateEpFactories"):
            host.register_execution_provider_library("libm", libm)


def test_devices_of_an_unregistered_library_are_refused_after_it_is_registered_again(
        library_path: str, software_adapter: None) -> None:
    # the old devices belong to a factory released by ReleaseEpFactory (its library was unloaded): CreateEp on it
    # would call into freed memory, even when the same name is registered again
    with epabi.Host(hardware=[epabi.cpu_device()]) as host:
        host.register_execution_provider_library("epabi", library_path)
        stale = host.get_ep_devices()
        host.unregister_execution_provider_library("epabi")
        host.register_execution_provider_library("epabi", library_path)
        so = epabi.SessionOptions()
        so.add_provider_for_devices(stale, {})
        mark = len(host.trace)
        with pytest.raises(ValueError, match="registered library"):
            epabi.InferenceSession(mlp(), so)
        assert "OrtEpFactory::CreateEp" not in host.trace[mark:]
        so = epabi.SessionOptions()
        so.add_provider_for_devices(host.get_ep_devices(), {})  # the current devices work
        with epabi.InferenceSession(mlp(), so) as session:
            assert session.get_providers()[0] == epabi.get_ep_name()
