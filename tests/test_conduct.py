"""The host notices a plugin that breaks the plugin-EP contract, and says what broke."""

from __future__ import annotations

from pathlib import Path

import pytest

import epabi
from plugin_builder import build_plugin


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("plugins")


def _host(api: int | None = None) -> epabi.Host:
    return epabi.Host(api_version=api, hardware=[epabi.cpu_device()])


def test_well_behaved_test_plugin_registers_and_creates_an_ep(plugin_dir: Path) -> None:
    lib = build_plugin(plugin_dir, None)
    with _host() as host:
        host.register_execution_provider_library("good", lib)
        devices = host.get_ep_devices()
        assert [d.ep_name for d in devices] == ["MisbehavingEp"]
        assert devices[0].ep_metadata == {"version": "0.0.1", "library_path": str(lib)}
        so = epabi.SessionOptions()
        so.add_provider_for_devices(devices)
        with host.create_ep(so) as ep:
            assert ep.name == "MisbehavingEp"
            # declared 24: members since 25+ are not read even on the newest host
            assert "Sync" not in ep.members and "IsGraphCaptureEnabled" not in ep.members


@pytest.mark.parametrize(
    ("flag", "error", "text"),
    [
        ("NO_RELEASE_EXPORT", epabi.PluginLoadError, "Failed to get symbol ReleaseEpFactory"),
        ("FACTORY_VERSION_ZERO", epabi.ConductError, "ort_version_supported is 0"),
        ("NULL_GET_VERSION", epabi.ConductError, "GetVersion"),
        ("NULL_DATA_TRANSFER", epabi.ConductError, "CreateDataTransfer"),
        ("FORGED_STATUS", epabi.ConductError, "not an OrtStatus made by CreateStatus"),
        ("TOO_MANY_FACTORIES", epabi.ConductError, "at most 4 were allowed"),
    ],
)
def test_registration_misconduct_is_reported(plugin_dir: Path, flag: str, error: type, text: str) -> None:
    lib = build_plugin(plugin_dir, flag)
    with _host() as host:
        with pytest.raises(error, match=text):
            host.register_execution_provider_library("bad", lib)
        assert host.get_ep_devices() == []


def test_leaked_status_is_reported_at_unregister(plugin_dir: Path) -> None:
    lib = build_plugin(plugin_dir, "LEAK_STATUS")
    host = _host()
    host.register_execution_provider_library("leaky", lib)
    with pytest.raises(epabi.ConductError, match=r"leaked 1 OrtStatus.*never released"):
        host.unregister_execution_provider_library("leaky")
    assert host.get_ep_devices() == []


def test_call_to_api_newer_than_host_is_misconduct(plugin_dir: Path) -> None:
    lib = build_plugin(plugin_dir, "CALL_NEWER_API")
    with _host(24) as host:
        with pytest.raises(epabi.ConductError, match=r"GetOpSchema.*appeared in API 25.*1\.24\.4"):
            host.register_execution_provider_library("newer", lib)
    with _host(25) as host:  # the same call is fine on a host that has it... but epabi does not serve it
        with pytest.raises(epabi.HostLimitationError, match="GetOpSchema is not implemented"):
            host.register_execution_provider_library("newer", lib)


@pytest.mark.parametrize(
    ("flag", "text"),
    [("EP_VERSION_ZERO", "ort_version_supported is 0"), ("EP_NULL_CAPABILITY", "GetCapability")],
)
def test_ep_table_misconduct_is_reported(plugin_dir: Path, flag: str, text: str) -> None:
    lib = build_plugin(plugin_dir, flag)
    with _host() as host:
        host.register_execution_provider_library("bad-ep", lib)
        so = epabi.SessionOptions()
        so.add_provider_for_devices(host.get_ep_devices())
        with pytest.raises(epabi.ConductError, match=text):
            host.create_ep(so)
