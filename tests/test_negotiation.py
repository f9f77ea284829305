"""Version negotiation with every emulated host version: refusals, requested API versions, gated members."""

from __future__ import annotations

import pytest

import epabi
from epabi._ffi import NEWEST_API, NEWEST_HOST_API, member_since
from epabi.versions import BEHAVIOURS, EMULATED, parse_api_version

#: The plugin refuses hosts older than its minimum release and negotiates with the others.
MIN_API = parse_api_version(epabi.read_min_onnxruntime_version())
REFUSED = [api for api in EMULATED if api < MIN_API]
NEGOTIATED = [api for api in EMULATED if api >= MIN_API]

GRAPH_MEMBERS = {"IsGraphCaptureEnabled", "IsGraphCaptured", "ReplayGraph", "GetGraphCaptureNodeAssignmentPolicy"}


def _ep_members(api: int, library_path: str) -> tuple[set[str], list[int], epabi.Host]:
    host = epabi.Host(api_version=api, hardware=[epabi.cpu_device()])
    host.register_execution_provider_library("epabi", library_path)
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices())
    with host.create_ep(so) as ep:
        members = set(ep.members)
    return members, list(host.api_requests), host


@pytest.mark.parametrize("api", REFUSED)
def test_old_hosts_are_refused_with_both_versions_named(api: int, library_path: str, software_adapter: None) -> None:
    minimum = epabi.read_min_onnxruntime_version()
    with epabi.Host(api_version=api) as host:
        with pytest.raises(epabi.OrtStatusError) as info:
            host.register_execution_provider_library("epabi", library_path)
        assert info.value.code == epabi.OrtErrorCode.FAIL
        assert f'"{epabi.RELEASES[api]}"' in info.value.message
        assert f'"{minimum}"' in info.value.message
        assert f"1.{api}" in str(info.value)
        assert host.get_ep_devices() == []
        # refused before negotiation: only the v1 table (for CreateStatus) was asked for
        assert host.api_requests == [1]


@pytest.mark.parametrize("api", NEGOTIATED)
def test_members_follow_the_negotiated_version(api: int, library_path: str, software_adapter: None) -> None:
    members, requests, host = _ep_members(api, library_path)
    try:
        assert max(requests) <= api, "the plugin asked for an API above the host's"
        assert requests[-1] == min(api, NEWEST_API)  # the plugin declares what it knows: API 30
        assert {"GetName", "GetCapability"} <= members
        assert ("Sync" in members) == (api >= 25)
        assert ("CreateProfiler" in members) == (api >= 25)
        assert (GRAPH_MEMBERS <= members) == (api >= 26)
        assert not (GRAPH_MEMBERS & members) or api >= 26
        assert ("IsConcurrentRunSupported" in members) == (api >= 28)
        # whatever it set, the host read nothing newer than itself
        since = member_since("OrtEp")
        assert all(since[m] <= api for m in members)
    finally:
        host.close()


def test_concurrent_run_answer_is_read_only_from_28(library_path: str, software_adapter: None) -> None:
    for api, expected in ((27, None), (28, True)):
        with epabi.Host(api_version=api, hardware=[epabi.cpu_device()]) as host:
            host.register_execution_provider_library("epabi", library_path)
            so = epabi.SessionOptions()
            so.add_provider_for_devices(host.get_ep_devices())
            with host.create_ep(so) as ep:
                assert ep.concurrent_run_supported is expected
                assert ("OrtEp::IsConcurrentRunSupported" in host.trace) == (expected is not None)


def test_factory_identity(host: epabi.Host) -> None:
    (device,) = host.get_ep_devices()
    factory = device.factory
    assert (factory.name, factory.vendor, factory.vendor_id) == ("EpAbiExecutionProvider", "epabi", 0x10DE)
    assert factory.plugin_version == epabi.__version__
    assert factory.version == NEWEST_API  # the plugin's own layouts, whatever newer host runs it
    assert device.ep_metadata["version"] == epabi.__version__
    assert device.ep_metadata["library_path"] == epabi.get_library_path()


@pytest.mark.parametrize("text", ["1.24", "1.24.4", "24", 24])
def test_host_version_spellings(text: str | int) -> None:
    assert epabi.Host(api_version=text, hardware=[]).api_version == 24


@pytest.mark.parametrize("text", [f"1.{epabi.OLDEST_EMULATED - 1}", str(epabi.NEWEST_EMULATED + 1), "2.0", "latest",
                                  ""])
def test_bad_host_versions_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="host version"):
        epabi.Host(api_version=text, hardware=[])


@pytest.mark.parametrize("text", ["1.24.9", "1.24.1", "1.32.1", "1.26.00"])
def test_patch_releases_other_than_the_emulated_one_are_refused(text: str) -> None:
    # each API version is emulated as one release (RELEASES); another patch number is not silently that release
    with pytest.raises(epabi.UnknownReleaseError, match=r"known releases: 1\.22\.0, .*1\.24\.4, .*1\.32\.0") as info:
        epabi.Host(api_version=text, hardware=[])
    assert info.value.value == text and info.value.known == tuple(epabi.RELEASES.values())
    assert repr(text) in str(info.value)
    assert isinstance(info.value, ValueError)


def test_get_api_above_host_returns_null() -> None:
    host = epabi.Host(api_version=25, hardware=[])
    base = host.served.base
    assert base.GetApi(25) == host.served.api
    assert base.GetApi(26) == epabi._ffi.ffi.NULL
    assert base.GetApi(0) == epabi._ffi.ffi.NULL
    assert epabi._ffi.ffi.string(base.GetVersionString()) == b"1.25.1"


def test_behaviour_table_has_one_row_per_emulated_version() -> None:
    # the table ends at the newest API whose host tables ort_abi.h lays out, with no gap
    assert [b.api for b in BEHAVIOURS] == list(range(epabi.OLDEST_EMULATED, NEWEST_HOST_API + 1)) == list(EMULATED)
    assert NEWEST_HOST_API >= NEWEST_API
    for b in BEHAVIOURS:
        assert b.release.startswith(f"1.{b.api}.") and epabi.RELEASES[b.api] == b.release
