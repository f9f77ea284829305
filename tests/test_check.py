"""``epabi check`` (``epabi.check``, ``python -m epabi check``, ``epabi.pytest_plugin``): our plugin passes every check
at every API version it accepts; each misbehaviour of the test plugins fails the check it should, with its reason;
a crash or hang fails the check that was running; table, JSON and JUnit XML are well-formed; exit codes; the pytest
plugin in a small pytester suite; and runs to completion on the third-party plugins of tests/third_party.py."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

import epabi
from epabi import cli
from epabi.checks import CHECK_IDS, CheckResult, Status, format_table, junit_xml
from epabi.versions import EMULATED, RELEASES
from plugin_builder import build_kernel_plugin, build_plugin
from third_party import PLUGINS, require_plugin

pytest_plugins = ["pytester"]

CPU = [epabi.cpu_device()]
INTEL_CPU = [epabi.HardwareDevice(epabi.OrtHardwareDeviceType.CPU, 0x8086, "Intel")]
#: Checks our plugin passes at every version it accepts (the rest pass from the version their members appeared,
#: or skip: it computes in host memory, so it registers no allocator or data transfer).
ALWAYS_PASS = ("required_functions", "ep_created", "ep_type", "preferred_layout", "cpu_memory_types",
               "metadata_queries", "compile_or_kernels", "null_optional_members", "statuses", "api_version",
               "version_sane", "version_gating", "release_and_unload", "no_growth", "conduct_report",
               "model_matches_cpu")
CAPTURE = ("capture_first_run", "capture_replay", "capture_ids", "capture_no_graph_id", "capture_per_thread")


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("check-plugins")


@pytest.fixture(scope="module")
def adapter_env() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EPABI_ALLOW_SOFTWARE_ADAPTER", "1")
        mp.setenv("EPABI_CUDA_DISCOVERY", "0")
        mp.delenv("EPABI_SOFTWARE_DEVICE_MEMORY", raising=False)
        yield


@pytest.fixture(scope="module")
def ours(adapter_env: None, library_path: str) -> CheckResult:
    return epabi.check(library_path, hardware=CPU, quick=True)


def _status(result: CheckResult, check: str, api: int) -> Status:
    return result.outcome(check, api).status


def test_our_plugin_passes_every_check_at_every_version_it_accepts(ours: CheckResult) -> None:
    assert ours.versions == list(EMULATED)
    assert ours.ok, [f"{o.check}@{o.api}: {o.reason}" for o in ours.failed]
    assert len(ours.outcomes) == len(CHECK_IDS) * len(EMULATED)
    for api in (22, 23):  # below its minimum, 1.24.4: it refuses with an error status, so nothing can be checked
        outcome = ours.outcome("ep_created", api)
        assert outcome.status is Status.SKIP
        assert f'ORT runtime version "{RELEASES[api]}" is below the minimum required version "1.24.4"' in outcome.reason
        assert _status(ours, "api_version", api) is Status.PASS
    for api in range(24, max(EMULATED) + 1):
        for check in ALWAYS_PASS:
            assert _status(ours, check, api) is Status.PASS, (check, api, ours.outcome(check, api).reason)
        # graph capture in host memory needs API 30 (KernelContext_GetPreallocatedOutput; README "Graph capture"):
        # on 26-29 CreateEp refuses it, so the capture checks skip there
        for check in CAPTURE:
            assert _status(ours, check, api) is (Status.PASS if api >= 30 else Status.SKIP), (check, api)
        assert _status(ours, "capture_policy", api) is (Status.PASS if api >= 26 else Status.SKIP)
        assert _status(ours, "capture_release_graph", api) is (Status.PASS if api >= 30 else Status.SKIP)
        if 26 <= api < 30:
            assert "KernelContext_GetPreallocatedOutput" in ours.outcome("capture_first_run", api).reason
        assert _status(ours, "data_transfer", api) is Status.SKIP  # host memory: no OrtDataTransferImpl
    newest = ours.reports[max(EMULATED)]
    declared = newest.info["ep"]["ort_version_supported"]
    assert f"OrtEp {declared}" in ours.outcome("version_sane", max(EMULATED)).reason
    matched = ours.outcome("model_matches_cpu", 24).reason
    assert "mlp (5/5 nodes: Add, MatMul, Relu)" in matched and "ORT's CPU EP" in matched
    assert "the library was unmapped" in ours.outcome("release_and_unload", 24).reason
    assert "graph id 0 captured" in ours.outcome("capture_first_run", 30).reason


def test_table_json_and_junit_of_a_result(ours: CheckResult, tmp_path: Path) -> None:
    lines = format_table(ours)
    header = next(line for line in lines if line.startswith("check "))
    assert header.split()[1:] == [str(api) for api in EMULATED]
    row = next(line for line in lines if line.startswith("capture_release_graph "))
    assert row.split()[1:] == ["-"] * 8 + ["ok"] * (max(EMULATED) - 29)
    assert lines[-1].endswith(": OK") and f"{len(ours.outcomes)} outcomes" in lines[-1]
    assert any(line.startswith("  18 checks (required_functions ... model_matches_cpu) (API 22):") for line in lines)

    doc = json.loads(json.dumps(ours.to_json()))
    assert doc["ok"] is True and doc["counts"] == ours.counts()
    assert [c["id"] for c in doc["checks"]] == list(CHECK_IDS)
    again = CheckResult.from_json(doc)
    assert [(o.check, o.api, o.status, o.reason) for o in again.outcomes] == \
        [(o.check, o.api, o.status, o.reason) for o in ours.outcomes]

    root = ET.fromstring(junit_xml(ours))
    assert root.tag == "testsuites" and int(root.get("tests")) == len(ours.outcomes)
    assert int(root.get("failures")) == 0 and int(root.get("skipped")) == ours.counts()["skip"]
    suites = root.findall("testsuite")
    assert [s.find("properties/property[@name='api_version']").get("value") for s in suites] == \
        [str(api) for api in EMULATED]
    case = root.find(f"testsuite/testcase[@name='capture_ids[{RELEASES[30]}]']")
    assert case is not None and case.get("classname") == "epabi.check.function"
    assert "captured separately" in case.find("system-out").text
    skipped = root.find(f"testsuite/testcase[@name='capture_ids[{RELEASES[24]}]']/skipped")
    assert "appeared in ONNX Runtime 1.26" in skipped.get("message")


def test_device_memory_mode_checks_allocators_and_data_transfer(adapter_env: None, library_path: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EPABI_SOFTWARE_DEVICE_MEMORY", "device")
    result = epabi.check(library_path, "24,32", hardware=CPU, quick=True, cycles=2)
    assert result.ok, [f"{o.check}@{o.api}: {o.reason}" for o in result.failed]
    for api in (24, 32):
        for check in ("preferred_allocators", "allocator_memory", "data_transfer", "model_matches_cpu"):
            assert _status(result, check, api) is Status.PASS, (check, api, result.outcome(check, api).reason)
        assert "host -> 'EpAbi_Software' (GPU DEFAULT) -> host" in result.outcome("data_transfer", api).reason
    for check in CAPTURE:  # device memory: graphs hold the blocks of the adapter's allocator
        assert _status(result, check, 32) is Status.PASS, (check, result.outcome(check, 32).reason)


def test_kernel_registry_plugin_passes(plugin_dir: Path) -> None:
    result = epabi.check(build_kernel_plugin(plugin_dir), "24,32", hardware=CPU, quick=True, cycles=2)
    assert result.ok, [f"{o.check}@{o.api}: {o.reason}" for o in result.failed]
    for api in (24, 32):
        assert result.outcome("compile_or_kernels", api).reason == "a kernel registry of 7 kernels"
        assert "host -> 'KregDev' (GPU DEFAULT) -> host, host -> host" in result.outcome("data_transfer", api).reason
        assert _status(result, "preferred_allocators", api) is Status.PASS
        assert "mlp (5/5 nodes: Add, MatMul, Relu)" in result.outcome("model_matches_cpu", api).reason


def test_in_process_gives_the_verdicts_of_isolated_runs(adapter_env: None, library_path: str) -> None:
    isolated = epabi.check(library_path, "32", hardware=CPU, quick=True, cycles=2)
    here = epabi.check(library_path, "32", hardware=CPU, quick=True, cycles=2, isolate=False)
    assert [(o.check, o.status) for o in here.outcomes] == [(o.check, o.status) for o in isolated.outcomes]
    assert here.ok


#: flag -> (versions, {check: reason pattern}): exactly these checks fail, at every version checked.
MISBEHAVIOURS: dict[str, tuple[str, dict[str, str]]] = {
    "NO_RELEASE_EXPORT": ("32", {"required_functions": "Failed to get symbol ReleaseEpFactory"}),
    "NULL_GET_VERSION": ("32", {"required_functions": "required OrtEpFactory members are NULL: GetVersion"}),
    "NULL_DATA_TRANSFER": ("32", {"required_functions": "required OrtEpFactory members are NULL: CreateDataTransfer"}),
    "EP_NULL_CAPABILITY": ("32", {"required_functions": "required OrtEp members are NULL: GetCapability",
                                  "ep_created": "CreateEp on MisbehavingEp .* failed"}),
    "NO_COMPILE": ("32", {"compile_or_kernels": "neither Compile nor a kernel registry: it can run no node"}),
    "COMPILE_WITHOUT_RELEASE": ("32", {"ep_created": "Compile and ReleaseNodeComputeInfos must be set together",
                                       "compile_or_kernels": "Compile and ReleaseNodeComputeInfos must be set"}),
    "EP_EMPTY_NAME": ("32", {"ep_type": "OrtEp::GetName returned an empty string"}),
    "EP_NAME_UNSTABLE": ("32", {"ep_type": "OrtEp::GetName is not stable: 'MisbehavingEp2', then"}),
    "BAD_LAYOUT": ("32", {"preferred_layout": r"GetPreferredDataLayout returned 7, not NCHW \(0\) or NHWC \(1\)"}),
    "BAD_CAPTURE_POLICY": ("32", {"capture_policy": "GetGraphCaptureNodeAssignmentPolicy returned 5"}),
    "CAPTURE_WITHOUT_REPLAY": ("32", {
        "null_optional_members": "IsGraphCaptureEnabled is true but IsGraphCaptured, ReplayGraph is NULL",
        "version_gating": r"OrtEp::IsGraphCaptureEnabled \(1.26\) is read but OrtEp::IsGraphCaptured"}),
    "STREAM_AWARE_NO_STREAM": ("32", {"null_optional_members": "stream aware but no CreateSyncStreamForDevice"}),
    "DATA_TRANSFER_FLIPS_BYTE": ("32", {"data_transfer": r"a host -> host CopyTensors changed the bytes of a "
                                                         r"float32\[2, 3\] tensor"}),
    "RELEASED_STATUS": ("32", {"statuses": "GetCapability returned 0x[0-9a-f]+, which is not an OrtStatus made by "
                                           "CreateStatus: it was a Status and has been released",
                               "model_matches_cpu": "mlp: session creation failed"}),
    "FORGED_STATUS": ("32", {"statuses": "GetSupportedDevices returned 0x[0-9a-f]+, which is not an OrtStatus made "
                                         "by CreateStatus: it is not a live Status"}),
    "LEAK_STATUS": ("32", {"statuses": r"leaked 1 OrtStatus object\(s\) it never returned or released"}),
    "CALL_NEWER_API": ("24", {"api_version": r"OrtEpApi::GetOpSchema \(slot 50, since 1.25\) was called, but it "
                                             r"appeared in API 25 and this host is ONNX Runtime 1.24.4"}),
    "FACTORY_VERSION_ZERO": ("32", {"version_sane": "OrtEpFactory MisbehavingEp declares ort_version_supported 0"}),
    "FACTORY_VERSION_21": ("32", {"version_sane": "OrtEpFactory MisbehavingEp declares ort_version_supported 21"}),
    "EP_VERSION_21": ("24", {"version_sane": "OrtEp declares ort_version_supported 21"}),
    "TOO_MANY_FACTORIES": ("24,32", {"conduct_report": "reported 5 factories; at most 4|returned 5 factories but "
                                                       "the supplied capacity was 4"}),
    "RELEASE_FACTORY_FAILS": ("32", {"release_and_unload": "ReleaseEpFactory failed on purpose"}),
    "NODELETE": ("32", {"release_and_unload": "stays mapped after unregistration: it is linked with -z nodelete"}),
    "LEAK_FD": ("32", {"no_growth": r"open files \d+ -> \d+ -> \d+"}),
    "CLAIM_NON_CONVEX": ("32", {"conduct_report": "set nodes that cannot be fused together",
                                "model_matches_cpu": "Compile must not be called"}),
    "ZERO_FACTORIES": ("32", {}),
    "ABORT_IN_CAPABILITY": ("32", {"model_matches_cpu": "the check process died of SIGABRT during model_matches_cpu"}),
}


@pytest.mark.parametrize("flag", sorted(MISBEHAVIOURS))
def test_each_misbehaviour_fails_its_check_with_the_reason(plugin_dir: Path, flag: str) -> None:
    versions, expected = MISBEHAVIOURS[flag]
    result = epabi.check(build_plugin(plugin_dir, flag), versions, hardware=CPU, quick=True, cycles=2)
    for api in result.versions:
        failed = {o.check: o.reason for o in result.reports[api].ordered() if o.status is Status.FAIL}
        assert set(failed) == set(expected), (api, failed)
        for check, pattern in expected.items():
            assert re.search(pattern, failed[check]), (api, check, failed[check])
        assert len(result.reports[api].outcomes) == len(CHECK_IDS)
    assert result.ok is not bool(expected)


def test_ep_version_refused_from_1_28_fails_creation_and_version_sane(plugin_dir: Path) -> None:
    result = epabi.check(build_plugin(plugin_dir, "EP_VERSION_21"), "28", hardware=CPU, quick=True, cycles=2)
    assert {o.check for o in result.failed} == {"ep_created", "version_sane"}
    assert "OrtEp has invalid ort_version_supported=21 (expected at least 22)." in \
        result.outcome("version_sane", 28).reason


def test_zero_factories_skip_with_the_reason(plugin_dir: Path) -> None:
    result = epabi.check(build_plugin(plugin_dir, "ZERO_FACTORIES"), "32", hardware=CPU, quick=True, cycles=2)
    assert result.outcome("ep_created", 32).reason == "the library created no EP factory for API 32 (1.32.0) (it " \
                                                      "may need a newer API)"


def test_a_hanging_plugin_is_stopped_and_fails_the_running_check(plugin_dir: Path) -> None:
    result = epabi.check(build_plugin(plugin_dir, "HANG_IN_CAPABILITY"), "32", hardware=CPU, quick=True, cycles=2,
                         timeout=4)
    outcome = result.outcome("model_matches_cpu", 32)
    assert outcome.status is Status.FAIL
    assert outcome.reason.startswith("the check process was stopped after 4 s during model_matches_cpu")
    later = result.outcome("capture_first_run", 32)
    assert later.status is Status.SKIP and "not run" in later.reason
    assert _status(result, "ep_created", 32) is Status.PASS  # what ran before the hang is kept


# -- the command line ----------------------------------------------------------------------------------------


def test_cli_exit_codes_table_json_and_junit(plugin_dir: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    good = build_plugin(plugin_dir, None)
    assert cli.main(["check", str(good), "--versions", "32", "--quick", "--cycles", "2", "--cpu-only"]) == 0
    table = capsys.readouterr().out
    assert re.search(r"^ep_type\s+ok$", table, re.M) and "26 outcomes:" in table and table.rstrip().endswith("OK")

    bad = build_plugin(plugin_dir, "EP_EMPTY_NAME")
    junit = tmp_path / "check.xml"
    assert cli.main(["check", str(bad), "--versions", "24,32", "--quick", "--cycles", "2", "--cpu-only", "--json",
                     "--junit", str(junit)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["counts"]["fail"] == 2
    assert [(o["check"], o["api_version"]) for o in doc["outcomes"] if o["status"] == "fail"] == \
        [("ep_type", 24), ("ep_type", 32)]
    root = ET.parse(junit).getroot()
    assert int(root.get("failures")) == 2 and len(root.findall("testsuite")) == 2
    failure = root.find(f"testsuite/testcase[@name='ep_type[{RELEASES[24]}]']/failure")
    assert failure.get("message") == "OrtEp::GetName returned an empty string"


@pytest.mark.parametrize(("args", "message"), [
    (["/nonexistent/libnothing.so"], "no such library file: /nonexistent/libnothing.so"),
    (["{good}", "--model", "{good}"], "libmisbehaving_good.so is not an ONNX model"),
    (["{good}", "--ep", "Nope"], "no factory of libmisbehaving_good.so is named 'Nope' at any checked version "
                                 "(its factories: MisbehavingEp)"),
])
def test_cli_bad_arguments_exit_2_with_one_line(plugin_dir: Path, capsys: pytest.CaptureFixture[str],
                                                args: list[str], message: str) -> None:
    good = str(build_plugin(plugin_dir, None))
    argv = ["check", *[a.format(good=good) for a in args], "--versions", "32", "--cpu-only", "--quick", "--cycles",
            "1"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("epabi check: error: ") and message in err and err.count("\n") == 1, err


@pytest.mark.parametrize(("versions", "message"), [
    ("32..24", "the range '32..24' starts at API 32 (1.32.0), after its end, API 24 (1.24.4)"),
    ("1.99", "this host emulates API 22..32"),
    (",", "names no API version"),
])
def test_cli_bad_version_ranges_are_usage_errors(plugin_dir: Path, capsys: pytest.CaptureFixture[str],
                                                 versions: str, message: str) -> None:
    assert cli.main(["check", str(build_plugin(plugin_dir, None)), "--versions", versions]) == 2
    assert message in capsys.readouterr().err
    with pytest.raises(epabi.CheckArgumentError, match=re.escape(message)):
        epabi.check(build_plugin(plugin_dir, None), versions)


# -- the pytest plugin ---------------------------------------------------------------------------------------


def test_pytest_plugin_makes_one_test_per_check_and_version(pytester: pytest.Pytester, plugin_dir: Path) -> None:
    good, bad = build_plugin(plugin_dir, None), build_plugin(plugin_dir, "BAD_LAYOUT")
    pytester.makeconftest('pytest_plugins = ["epabi.pytest_plugin"]\n')
    common = '"versions": "24,32", "quick": True, "cycles": 2, "hardware": [epabi.cpu_device()]'
    pytester.makepyfile(
        test_good=f"import epabi\nEPABI_CHECK = {{'library': {str(good)!r}, {common}}}\n\n"
                  "def test_epabi(epabi_check):\n    epabi_check.assert_ok()\n",
        test_bad=f"import epabi\nEPABI_CHECK = {{'library': {str(bad)!r}, {common}}}\n\n"
                 "def test_epabi(epabi_check):\n    epabi_check.assert_ok()\n\n"
                 "def test_whole(epabi_check_result):\n    assert not epabi_check_result.ok\n",
        test_unconfigured="def test_epabi(epabi_check):\n    epabi_check.assert_ok()\n")
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", "-v")
    expected = epabi.check(good, "24,32", hardware=CPU, quick=True, cycles=2).counts()
    outcomes = run.parseoutcomes()
    assert outcomes.get("failed") == 2, run.stdout.str()[-3000:]  # BAD_LAYOUT at 1.24.4 and 1.32.0
    assert outcomes["passed"] == 2 * expected["pass"] - 2 + 1  # the bad plugin's passes, less its layout, + whole
    assert outcomes["skipped"] == 2 * expected["skip"] + 1  # + the module without a library
    run.stdout.fnmatch_lines(["*test_bad.py::test_epabi[[]preferred_layout-1.24.4[]] FAILED*",
                              "*test_good.py::test_epabi[[]statuses-1.32.0[]] PASSED*",
                              "*no plugin library to check*"])
    assert "GetPreferredDataLayout returned 7" in run.stdout.str()


def test_pytest_plugin_reads_the_command_line(pytester: pytest.Pytester, plugin_dir: Path) -> None:
    pytester.makeconftest('pytest_plugins = ["epabi.pytest_plugin"]\n')
    pytester.makepyfile(test_it="def test_epabi(epabi_check):\n    epabi_check.assert_ok()\n")
    library = str(build_plugin(plugin_dir, None))
    # KEY=VALUE form: pytest looks for conftest files in the command line's paths before it knows these options
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--epabi-library={library}", "--epabi-versions=32",
                                        "--epabi-quick", "--epabi-hardware=cpu")
    outcomes = run.parseoutcomes()
    assert "failed" not in outcomes and outcomes["passed"] + outcomes["skipped"] == len(CHECK_IDS)


# -- third-party plugins -------------------------------------------------------------------------------------


def _completed(result: CheckResult) -> None:
    """Every check has a verdict at every version, and none is a bug of the checker or a crash."""
    assert len(result.outcomes) == len(CHECK_IDS) * len(result.versions)
    assert not [o for o in result.outcomes if "epabi check error" in o.reason or "check process" in o.reason]


def test_openvino_runs_to_completion() -> None:
    result = epabi.check(require_plugin("openvino"), hardware=INTEL_CPU, quick=True)
    _completed(result)
    assert result.ep_name == PLUGINS["openvino"].ep_name
    assert "is below the minimum supported version 23" in result.outcome("ep_created", 22).reason
    for api in range(23, max(EMULATED) + 1):
        for check in ("ep_created", "statuses", "api_version", "data_transfer", "preferred_allocators", "no_growth"):
            assert _status(result, check, api) is Status.PASS, (check, api, result.outcome(check, api).reason)
        unload = result.outcome("release_and_unload", api)  # C++ unique symbols keep it loaded (found on 1.8.1)
        assert unload.status is Status.FAIL and "STB_GNU_UNIQUE symbols" in unload.reason
        model = result.outcome("model_matches_cpu", api)  # bfloat16 MatMul/Conv on CPUs with AMX or AVX-512 BF16
        assert model.status is Status.PASS or "differs from the reference" in model.reason, model.reason


def test_ggml_runs_to_completion() -> None:
    result = epabi.check(require_plugin("ggml"), name="ggml", hardware=CPU, quick=True)
    _completed(result)
    for api in EMULATED:
        if api < 29:  # onnxruntime-ggml 0.2.0 needs API 29: it returns no factory below, as ORT accepts
            assert "created no EP factory" in result.outcome("ep_created", api).reason
        else:
            assert _status(result, "model_matches_cpu", api) is Status.PASS, result.outcome("model_matches_cpu", api)
            assert result.outcome("ep_type", api).reason.startswith("'ggml'")
        unload = result.outcome("release_and_unload", api)
        assert unload.status is Status.FAIL and "thread-local destructors" in unload.reason


def test_webgpu_runs_to_completion(monkeypatch: pytest.MonkeyPatch) -> None:
    from webgpu_env import require_webgpu

    lib = require_plugin("webgpu")
    for key, value in require_webgpu(lib).items():
        monkeypatch.setenv(key, value)
    result = epabi.check(lib, "24,32", quick=True, capture_options={"enableGraphCapture": "1"})
    _completed(result)
    for api in (24, 32):
        assert result.outcome("compile_or_kernels", api).reason.startswith("a kernel registry of")
        assert _status(result, "ep_created", api) is Status.PASS


@pytest.mark.gpu
def test_our_plugin_passes_on_the_gpu(library_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if epabi.hardware.cuda_gpu_count() == 0:
        pytest.skip("no NVIDIA GPU with a working driver")
    monkeypatch.setenv("EPABI_CUDA_DISCOVERY", "1")
    monkeypatch.setenv("EPABI_ALLOW_SOFTWARE_ADAPTER", "0")
    result = epabi.check(library_path, "24,26,32", quick=True)
    assert result.ok, [f"{o.check}@{o.api}: {o.reason}" for o in result.failed]
    for api in (24, 26, 32):
        assert result.reports[api].info["ep_device"].startswith("GPU")
        for check in ("preferred_allocators", "allocator_memory", "data_transfer", "cpu_memory_types",
                      "model_matches_cpu"):
            assert _status(result, check, api) is Status.PASS, (check, api, result.outcome(check, api).reason)
        assert "host -> 'EpAbi_GPU' (GPU DEFAULT) -> host" in result.outcome("data_transfer", api).reason
        assert "written and read back" in result.outcome("allocator_memory", api).reason  # the pinned memory
    for api in (26, 32):  # device-memory graph capture over device buffers, on its own stream per thread
        for check in CAPTURE:
            assert _status(result, check, api) is Status.PASS, (check, api, result.outcome(check, api).reason)
    assert _status(result, "capture_release_graph", 32) is Status.PASS
