"""The host notices a plugin that breaks the plugin-EP contract, and says what broke.

It is as strict as ONNX Runtime: what ORT would crash on or refuses raises; what ORT accepts (observed on the
1.24.4-1.32.0 wheels with this test plugin) is reported and accepted, unless the host is ``strict``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import epabi
from plugin_builder import build_plugin


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("plugins")


def _host(api: int | None = None, strict: bool = False) -> epabi.Host:
    return epabi.Host(api_version=api, hardware=[epabi.cpu_device()], strict=strict)


def _tolerated(host: epabi.Host) -> list[str]:
    return [message for kind, message in host.conduct_report() if kind == "tolerated"]


def _mapped(lib: Path) -> bool:
    return any(line.endswith(str(lib)) for line in Path("/proc/self/maps").read_text().splitlines())


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
        ("NULL_GET_VERSION", epabi.ConductError, "GetVersion"),
        ("NULL_DATA_TRANSFER", epabi.ConductError, "CreateDataTransfer"),
        ("FORGED_STATUS", epabi.ConductError, "not an OrtStatus made by CreateStatus"),
    ],
)
def test_registration_misconduct_is_reported(plugin_dir: Path, flag: str, error: type, text: str) -> None:
    lib = build_plugin(plugin_dir, flag)
    with _host() as host:
        with pytest.raises(error, match=text):
            host.register_execution_provider_library("bad", lib)
        assert host.get_ep_devices() == []


@pytest.mark.parametrize(("api", "error", "text"), [
    (30, epabi.ConductError, "reported 5 factories; at most 4 were allowed"),  # 1.24.4-1.30.0 abort (observed)
    (31, epabi.OrtStatusError, r"\[FAIL\] CreateEpFactories returned 5 factories but the supplied capacity was 4\."),
])
def test_too_many_factories(plugin_dir: Path, api: int, error: type, text: str) -> None:
    lib = build_plugin(plugin_dir, "TOO_MANY_FACTORIES")
    with _host(api) as host:
        with pytest.raises(error, match=text):
            host.register_execution_provider_library("bad", lib)
        assert host.get_ep_devices() == []


@pytest.mark.parametrize(
    ("flag", "text"),
    [("FACTORY_VERSION_ZERO", "ort_version_supported is 0"),
     ("ZERO_FACTORIES", "succeeded but returned no factory")],
)
def test_registration_oddities_ort_accepts_are_reported_and_accepted(plugin_dir: Path, flag: str,
                                                                     text: str) -> None:
    lib = build_plugin(plugin_dir, flag)
    with _host() as host:
        host.register_execution_provider_library("odd", lib)  # ORT 1.24.4-1.32.0 register both
        devices = host.get_ep_devices()
        assert len(devices) == (0 if flag == "ZERO_FACTORIES" else 1)
        assert any(text in m for m in _tolerated(host)), host.conduct_report()
        host.unregister_execution_provider_library("odd")
    with _host(strict=True) as host:
        with pytest.raises(epabi.ConductError, match=text):
            host.register_execution_provider_library("odd", lib)
        assert host.get_ep_devices() == []


def test_leaked_status_is_reported_at_unregister(plugin_dir: Path) -> None:
    lib = build_plugin(plugin_dir, "LEAK_STATUS")
    host = _host()
    host.register_execution_provider_library("leaky", lib)
    host.unregister_execution_provider_library("leaky")  # ORT does not notice the leak
    assert any(re.search(r"leaked 1 OrtStatus.*never released", m) for m in _tolerated(host))
    strict = _host(strict=True)
    strict.register_execution_provider_library("leaky", lib)
    with pytest.raises(epabi.ConductError, match=r"leaked 1 OrtStatus.*never released"):
        strict.unregister_execution_provider_library("leaky")
    assert strict.get_ep_devices() == []
    assert not _mapped(lib)


def test_failing_release_factory_still_unloads_the_library(plugin_dir: Path) -> None:
    # ORT logs the error, treats the factory as released and unloads the library (ep_library_plugin.cc)
    lib = build_plugin(plugin_dir, "RELEASE_FACTORY_FAILS")
    with _host() as host:
        host.register_execution_provider_library("rf", lib)
        assert _mapped(lib)
        host.unregister_execution_provider_library("rf")
        assert not _mapped(lib)
        assert any("ReleaseEpFactory of 'rf' failed" in m and "on purpose" in m for m in _tolerated(host))
        host.register_execution_provider_library("rf", lib)  # the name is free again
        assert len(host.get_ep_devices()) == 1
        host.unregister_execution_provider_library("rf")
    with _host(strict=True) as host:
        host.register_execution_provider_library("rf", lib)
        with pytest.raises(epabi.ConductError, match="ReleaseEpFactory of 'rf' failed"):
            host.unregister_execution_provider_library("rf")
        assert not _mapped(lib)
        assert host.libraries == []


def test_call_to_api_newer_than_host_is_misconduct(plugin_dir: Path) -> None:
    lib = build_plugin(plugin_dir, "CALL_NEWER_API")
    with _host(24) as host:
        with pytest.raises(epabi.ConductError,
                           match=r"OrtEpApi::GetOpSchema \(slot 50, since 1\.25\) was called, but it appeared in "
                                 r"API 25.*1\.24\.4"):
            host.register_execution_provider_library("newer", lib)
    with _host(25) as host:  # the same call is fine on a host that has it... but epabi does not serve it
        with pytest.raises(epabi.HostLimitationError,
                           match=r"OrtEpApi::GetOpSchema \(slot 50, since 1\.25\) is not served by the epabi host"):
            host.register_execution_provider_library("newer", lib)


def test_ep_version_below_22_is_refused_from_1_28_as_ort_refuses_it(plugin_dir: Path) -> None:
    for flag, declared in (("EP_VERSION_ZERO", 0), ("EP_VERSION_21", 21)):
        lib = build_plugin(plugin_dir, flag)
        for api in (28, epabi.NEWEST_EMULATED):
            with _host(api) as host:
                host.register_execution_provider_library("old-ep", lib)
                so = epabi.SessionOptions()
                so.add_provider_for_devices(host.get_ep_devices())
                with pytest.raises(epabi.OrtStatusError) as err:
                    host.create_ep(so)
                assert err.value.code == epabi.OrtErrorCode.FAIL
                assert f"OrtEp has invalid ort_version_supported={declared} (expected at least 22)." in str(err.value)
        with _host(27) as host:  # 1.24.4-1.27.0 create the EP (observed)
            host.register_execution_provider_library("old-ep", lib)
            so = epabi.SessionOptions()
            so.add_provider_for_devices(host.get_ep_devices())
            with host.create_ep(so) as ep:
                assert ep.name == "MisbehavingEp"
            assert any("ort_version_supported is 0" in m for m in _tolerated(host)) == (declared == 0)
    with _host(27, strict=True) as host:
        host.register_execution_provider_library("old-ep", build_plugin(plugin_dir, "EP_VERSION_ZERO"))
        so = epabi.SessionOptions()
        so.add_provider_for_devices(host.get_ep_devices())
        with pytest.raises(epabi.ConductError, match="ort_version_supported is 0"):
            host.create_ep(so)


@pytest.mark.parametrize(
    ("flag", "text"),
    [("EP_NULL_CAPABILITY", "GetCapability")],
)
def test_ep_table_misconduct_is_reported(plugin_dir: Path, flag: str, text: str) -> None:
    lib = build_plugin(plugin_dir, flag)
    with _host() as host:
        host.register_execution_provider_library("bad-ep", lib)
        so = epabi.SessionOptions()
        so.add_provider_for_devices(host.get_ep_devices())
        with pytest.raises(epabi.ConductError, match=text):
            host.create_ep(so)
