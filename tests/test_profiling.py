"""Profiling on epabi's host (``SessionOptions.enable_profiling``, ``InferenceSession.end_profiling()``):
the host's own chrome-trace events and the plugin's, obtained through ``OrtEpProfilerImpl`` as onnxruntime 1.25+
obtains them (python/epabi/profiling.py, ep_profiler.py; native/ep_profiler.h).

The same calls and checks as tests/test_real_ort_profiling.py (tests/profile_checks.py) on the software adapter,
graphs off on API 25+ and on on API 26+; API 24 neither sees ``CreateProfiler`` nor writes EP events. Also: the
order of the profiler calls, profiles written at close, threads, the served ``OrtEpApi`` profiling functions'
errors, and profilers a host must refuse. GPU variants are marked ``gpu``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import epabi
from epabi import call_context
from epabi._ffi import ffi
from epabi.ep_profiler import EpProfiler
from epabi.models import mlp
from epabi.objects import Status
from profile_checks import EP, EP_EVENTS, check_profile, expected_events

CALLS = [0, 0, 0, 1, 1, -1, 0]  # as tests/test_real_ort_profiling.py
MLP_NODES = 8


def _host(api: int | None, library_path: str) -> epabi.Host:
    host = epabi.Host(api_version=api, hardware=[epabi.cpu_device()])
    host.register_execution_provider_library("epabi", library_path)
    return host


def _session(host: epabi.Host, folder: Path, graph: bool = False, profile: bool = True,
             device: epabi.EpDevice | None = None) -> epabi.InferenceSession:
    so = epabi.SessionOptions()
    so.enable_profiling = profile
    so.profile_file_prefix = str(folder / "profile")
    so.add_provider_for_devices([device] if device is not None else host.get_ep_devices(),
                                {"enable_cuda_graph": "1"} if graph else {})
    return epabi.InferenceSession(mlp(), so)


def _calls(session: epabi.InferenceSession, graph: bool, device: str | None = None) -> None:
    """Runs CALLS, checking every output against onnx.reference (with graphs: IOBinding, inputs in place)."""
    reference = ReferenceEvaluator(mlp())
    rng = np.random.default_rng(3)
    kw: dict[str, Any] = {"host": session} if device else {}
    x = epabi.OrtValue.ortvalue_from_numpy(np.zeros((1, 64), np.float32), *([device, 0] if device else []), **kw)
    y = epabi.OrtValue.ortvalue_from_shape_and_type([1, 64], np.float32, *([device, 0] if device else []), **kw)
    io = session.io_binding()
    io.bind_ortvalue_input("x", x)
    io.bind_ortvalue_output("y", y)
    for k, gid in enumerate(CALLS):
        feed = rng.standard_normal((1, 64)).astype(np.float32)
        if graph:
            x.update_inplace(feed)
            ro = epabi.RunOptions()
            ro.add_run_config_entry("gpu_graph_id", str(gid))
            session.run_with_iobinding(io, ro)
            out = y.numpy()
        else:
            (out,) = session.run(None, {"x": feed})
        (want,) = reference.run(None, {"x": feed})
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5, err_msg=f"call {k}")


def _profile(session: epabi.InferenceSession, folder: Path) -> list[dict[str, Any]]:
    path = Path(session.end_profiling())
    assert path.parent == folder and re.fullmatch(r"profile_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d(_\d{3})?\.json",
                                                  path.name), path
    assert session.end_profiling() == ""  # ended: nothing more to write, as in onnxruntime
    return json.loads(path.read_text())


@pytest.mark.parametrize("api", [25, 26, None])
def test_each_compute_is_an_ep_event(api: int | None, library_path: str, software_adapter: None,
                                     tmp_path: Path) -> None:
    with _host(api, library_path) as host, _session(host, tmp_path) as session:
        _calls(session, graph=False)
        profile = _profile(session, tmp_path)
    check_profile(profile, expected_events(CALLS, graph=False), MLP_NODES, os.getpid(), threading.get_native_id())
    assert [ev["name"] for ev in profile[:2]] == ["model_loading_array", "session_initialization"]


@pytest.mark.parametrize("api", [26, 27, None])
def test_captures_and_replays_are_ep_events(api: int | None, library_path: str, software_adapter: None,
                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # before API 30 the software adapter captures only in its own memory (README "Graph capture")
    device = "cuda" if api is not None and api < 30 else None
    if device:
        monkeypatch.setenv("EPABI_SOFTWARE_DEVICE_MEMORY", "device")
    with _host(api, library_path) as host, _session(host, tmp_path, graph=True) as session:
        _calls(session, graph=True, device=device)
        profile = _profile(session, tmp_path)
    check_profile(profile, expected_events(CALLS, graph=True), MLP_NODES, os.getpid(), threading.get_native_id())


def test_a_wrong_expectation_fails_the_check(library_path: str, software_adapter: None, tmp_path: Path) -> None:
    with _host(None, library_path) as host, _session(host, tmp_path, graph=True) as session:
        _calls(session, graph=True)
        profile = _profile(session, tmp_path)
    with pytest.raises(AssertionError):
        check_profile(profile, expected_events(CALLS, graph=True, min_runs=1), MLP_NODES, os.getpid(),
                      threading.get_native_id())
    with pytest.raises(AssertionError):
        check_profile(profile, expected_events(CALLS, graph=True), MLP_NODES - 1, os.getpid(),
                      threading.get_native_id())


def test_an_origin_lag_is_tolerated_but_not_a_wrong_origin(library_path: str, software_adapter: None,
                                                            tmp_path: Path) -> None:
    """The EP's events may all sit earlier by the moment between the host's offset and the EP's clock read (17 us
    seen on a loaded machine): the check accepts one such shift, not an origin off by milliseconds."""
    with _host(None, library_path) as host, _session(host, tmp_path, graph=True) as session:
        _calls(session, graph=True)
        profile = _profile(session, tmp_path)
    expected = expected_events(CALLS, graph=True)

    def shifted(us: int) -> list[dict]:
        return [{**ev, "ts": ev["ts"] - us} if ev["cat"] == "Kernel" else ev for ev in profile]

    check_profile(shifted(17), expected, MLP_NODES, os.getpid(), threading.get_native_id())
    with pytest.raises(AssertionError):
        check_profile(shifted(5000), expected, MLP_NODES, os.getpid(), threading.get_native_id())


def test_api_24_sees_no_create_profiler(library_path: str, software_adapter: None, tmp_path: Path) -> None:
    """The plugin fills OrtEp::CreateProfiler only for hosts >= 1.25; a 1.24 session profiles its own events."""
    for api, filled in ((24, False), (25, True)):
        with _host(api, library_path) as host, _session(host, tmp_path) as session:
            assert (session.ep.ptr.CreateProfiler != ffi.NULL) == filled
            assert ("OrtEp::CreateProfiler" in host.trace) == filled
            _calls(session, graph=False)
            profile = _profile(session, tmp_path)
        assert bool([ev for ev in profile if ev["name"] in EP_EVENTS]) == filled
        assert len([ev for ev in profile if ev["cat"] == "Node"]) == len(CALLS)


def test_profiler_calls_follow_onnxruntime(library_path: str, software_adapter: None, tmp_path: Path) -> None:
    """As onnxruntime 1.32.0 calls them (seen under gdb): CreateProfiler right after CreateEp, profiling on or off,
    StartProfiling at once when the session profiles, StartEvent/StopEvent only then, EndProfiling at
    end_profiling(), Release before ReleaseEp."""
    for profile in (False, True):
        with _host(None, library_path) as host:
            mark = len(host.trace)
            session = _session(host, tmp_path, profile=profile)
            session.run(None, {"x": np.ones((1, 64), np.float32)})
            assert (session.end_profiling() != "") == profile
            session.close()
            kinds = ("OrtEp::", "OrtEpProfilerImpl::", "OrtEpFactory::CreateEp", "OrtEpFactory::ReleaseEp")
            trace = [t for t in host.trace[mark:] if t.startswith(kinds)]
            profiler = [t for t in trace if t.startswith("OrtEpProfilerImpl::")]
            start = trace.index("OrtEp::CreateProfiler")
            assert trace.index("OrtEpFactory::CreateEp") < start < trace.index("OrtEp::GetCapability")
            assert trace.index("OrtEpProfilerImpl::Release") < trace.index("OrtEpFactory::ReleaseEp")
            if profile:
                assert trace[start + 1] == "OrtEpProfilerImpl::StartProfiling"
                assert profiler.count("OrtEpProfilerImpl::StartEvent") == profiler.count("OrtEpProfilerImpl::StopEvent")
                # session_initialization, model_run, SequentialExecutor::Execute, the fused node
                assert profiler.count("OrtEpProfilerImpl::StartEvent") == 4
                assert profiler[-2:] == ["OrtEpProfilerImpl::EndProfiling", "OrtEpProfilerImpl::Release"]
            else:
                assert profiler == ["OrtEpProfilerImpl::Release"]


def test_closing_a_profiling_session_writes_its_profile(library_path: str, software_adapter: None,
                                                        tmp_path: Path) -> None:
    with _host(None, library_path) as host:
        session = _session(host, tmp_path)
        session.run(None, {"x": np.ones((1, 64), np.float32)})
        started = session.get_profiling_start_time_ns()
        session.close()
    (path,) = tmp_path.glob("profile_*.json")
    names = [ev["name"] for ev in json.loads(path.read_text())]
    assert names.count("model_run") == 1 and names.count("epabi_compute") == 1
    assert started > 0


def test_no_profile_without_enable_profiling(library_path: str, software_adapter: None, tmp_path: Path,
                                            caplog: pytest.LogCaptureFixture) -> None:
    with _host(None, library_path) as host, _session(host, tmp_path, profile=False) as session:
        session.run(None, {"x": np.ones((1, 64), np.float32)})
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="epabi"):
            assert session.end_profiling() == ""
        # onnxruntime logs "Profiler is disabled." at VERBOSE: nothing at the default WARNING level
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
        assert "Profiler is disabled." in [r.getMessage() for r in caplog.records]
        assert session.get_profiling_start_time_ns() == 0
    assert list(tmp_path.iterdir()) == []


def test_session_options_profiling_fields_are_typed() -> None:
    so = epabi.SessionOptions()
    assert so.enable_profiling is False and so.profile_file_prefix == "onnxruntime_profile_"
    # as onnxruntime 1.32.0's binding converts (pybind11's bool): None and numbers, not strings or lists
    for value, expected in ((1, True), (0, False), (None, False), (2.5, True), (np.int64(0), False),
                            (np.bool_(True), True)):
        so.enable_profiling = value  # type: ignore[assignment]
        assert so.enable_profiling is expected, value
    for wrong in ("yes", [1], b"1"):
        with pytest.raises(TypeError):
            so.enable_profiling = wrong  # type: ignore[assignment]
    with pytest.raises(TypeError):
        so.profile_file_prefix = Path("p")  # type: ignore[assignment]


def test_two_threads_profile_their_own_computes(library_path: str, software_adapter: None, tmp_path: Path) -> None:
    """Concurrent runs: each Compute event carries the thread that ran it and sits inside that thread's node
    event."""
    runs = 20
    with _host(None, library_path) as host, _session(host, tmp_path) as session:
        tids: list[int] = []

        def work() -> None:
            tids.append(threading.get_native_id())
            for _ in range(runs):
                session.run(None, {"x": np.ones((1, 64), np.float32)})

        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        profile = _profile(session, tmp_path)
    computes = [ev for ev in profile if ev["name"] == "epabi_compute"]
    nodes = [ev for ev in profile if ev["cat"] == "Node"]
    assert sorted({ev["tid"] for ev in computes}) == sorted(tids) and len(computes) == 2 * runs
    for c in computes:
        assert c["args"]["parent_name"] == nodes[0]["name"]
        mine = [n for n in nodes if n["tid"] == c["tid"] and n["ts"] - 2 <= c["ts"] and
                c["ts"] + c["dur"] <= n["ts"] + n["dur"] + 2]
        assert len(mine) == 1, c


# -- the served OrtEpApi profiling functions -------------------------------------------------------------------

def _status(host: epabi.Host, ptr: Any) -> tuple[int, str] | None:
    status = host.handles.lookup(ptr, Status)
    if status is None:
        return None
    host.handles.drop(ptr)
    return int(status.code), status.message


def test_served_profiling_event_functions_answer_as_onnxruntime() -> None:
    host = epabi.Host(hardware=[])
    api = host.served.ep_api
    keys = [ffi.new("char[]", b"k"), ffi.new("char[]", b"k")]
    values = [ffi.new("char[]", b"first"), ffi.new("char[]", b"second")]
    c_keys, c_values = ffi.new("char*[]", keys), ffi.new("char*[]", values)
    name = ffi.new("char[]", b"ev")
    out = ffi.new("OrtProfilingEvent**")
    bad = epabi.OrtErrorCode.INVALID_ARGUMENT
    with call_context.calling(host, "test"):
        assert _status(host, api.CreateProfilingEvent(2, 1, 2, ffi.NULL, 0, 0, ffi.NULL, ffi.NULL, 0, out)) == \
            (bad, "Event name argument is NULL")
        assert _status(host, api.CreateProfilingEvent(4, 1, 2, name, 0, 0, ffi.NULL, ffi.NULL, 0, out)) == \
            (bad, "OrtProfilingEventCategory value '4' is out of the expected range: [0 ... 4)")
        assert _status(host, api.CreateProfilingEvent(2, 1, 2, name, 0, 0, ffi.NULL, ffi.NULL, 1, out)) == \
            (bad, "`arg_keys` and `arg_values` must be non-null when `num_args` > 0")
        assert api.CreateProfilingEvent(2, 7, 8, name, 10, 20, c_keys, c_values, 2, out) == ffi.NULL
        event = out[0]
        cat, ts, dur = ffi.new("OrtProfilingEventCategory*"), ffi.new("int64_t*"), ffi.new("int64_t*")
        text = ffi.new("const char**")
        assert api.ProfilingEvent_GetCategory(event, cat) == ffi.NULL and cat[0] == 2
        assert api.ProfilingEvent_GetTimestampUs(event, ts) == ffi.NULL and ts[0] == 10
        assert api.ProfilingEvent_GetDurationUs(event, dur) == ffi.NULL and dur[0] == 20
        assert api.ProfilingEvent_GetName(event, text) == ffi.NULL and ffi.string(text[0]) == b"ev"
        assert api.ProfilingEvent_GetArgValue(event, keys[0], text) == ffi.NULL and ffi.string(text[0]) == b"first"
        assert api.ProfilingEvent_GetArgValue(event, name, text) == ffi.NULL and text[0] == ffi.NULL
        assert _status(host, api.ProfilingEvent_GetName(ffi.NULL, text)) == (bad, "OrtProfilingEvent is NULL")
        assert _status(host, api.ProfilingEventsContainer_AddEvents(ffi.NULL, ffi.new("OrtProfilingEvent*[]", [event]),
                                                                    1)) == \
            (bad, "OrtProfilingEventsContainer instance is NULL")
        api.ReleaseProfilingEvent(event)
        api.ReleaseProfilingEvent(ffi.NULL)
    assert host.conduct_report() == []
    host.close()


def test_a_profiler_older_than_1_25_is_not_used(library_path: str, software_adapter: None, tmp_path: Path) -> None:
    """As onnxruntime 1.32: a profiler declaring ort_version_supported < 25, or lacking Release/StartProfiling/
    EndProfiling, gives the session no EP profiler (an error logged, and a tolerated deviation reported); the
    session still runs. Checked with a table made here in place of the plugin's."""
    with _host(None, library_path) as host, _session(host, tmp_path, profile=False) as session:
        ep = session.ep
        impl = ffi.new("OrtEpProfilerImpl*")
        released: list[int] = []

        @ffi.callback("void(OrtEpProfilerImpl*)")
        def release(this: Any) -> None:
            released.append(1)

        @ffi.callback("OrtStatus*(OrtEp*, OrtEpProfilerImpl**)")
        def create(this: Any, out: Any) -> Any:
            out[0] = impl
            return ffi.NULL

        real = ep.members["CreateProfiler"]
        ep.members["CreateProfiler"] = create
        try:
            impl.ort_version_supported = 24
            assert EpProfiler.create(ep) is None and released == []
            impl.ort_version_supported = 25
            impl.Release = release
            assert EpProfiler.create(ep) is None and released == [1]  # released: it lacks StartProfiling
        finally:
            ep.members["CreateProfiler"] = real
        report = [m for kind, m in host.conduct_report() if kind == "tolerated"]
        assert any("ort_version_supported (24)" in m and "expected to be >= 25" in m for m in report), report
        assert any("missing one or more required function implementations" in m for m in report), report
        session.run(None, {"x": np.ones((1, 64), np.float32)})


# -- GPU -----------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("graph", [False, True])
def test_profile_on_the_gpu(graph: bool, library_path: str, monkeypatch: pytest.MonkeyPatch,
                            tmp_path: Path) -> None:
    """The GPU EP device: inputs and outputs in its memory; a Compute's duration covers the GPU work (the Compute
    ends with a stream synchronize outside captures), a replay's its synchronize."""
    if epabi.hardware.cuda_gpu_count() == 0:
        pytest.skip("no NVIDIA GPU with a working driver")
    monkeypatch.setenv("EPABI_CUDA_DISCOVERY", "1")
    monkeypatch.delenv("EPABI_ALLOW_SOFTWARE_ADAPTER", raising=False)
    with epabi.Host() as host:
        host.register_execution_provider_library("epabi", library_path)
        gpus = [d for d in host.get_ep_devices() if d.ep_name == EP and d.ep_metadata.get("device_kind") == "gpu"]
        assert gpus, host.get_ep_devices()
        with _session(host, tmp_path, graph=graph, device=gpus[0]) as session:
            _calls(session, graph=graph, device="cuda")
            profile = _profile(session, tmp_path)
    check_profile(profile, expected_events(CALLS, graph=graph), MLP_NODES, os.getpid(), threading.get_native_id(),
                  replayed_at_capture=True)


@pytest.mark.parametrize("fallback", ["onnxruntime", "onnx.reference"])
def test_cpu_partitions_and_fused_nodes_each_have_events(fallback: str, library_path: str, software_adapter: None,
                                                         monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A node kept on the CPU splits the MLP into two fused nodes around it: each fused node's Compute is an EP
    event inside its own node event; the CPU work is one node event (a partition through onnxruntime, the node
    through onnx.reference)."""
    if fallback == "onnxruntime":
        pytest.importorskip("onnxruntime")
    monkeypatch.setenv("EPABI_CPU_FALLBACK", fallback)
    with _host(None, library_path) as host:
        so = epabi.SessionOptions()
        so.enable_profiling = True
        so.profile_file_prefix = str(tmp_path / "profile")
        so.add_provider_for_devices(host.get_ep_devices(), {"force_cpu_nodes": "relu0"})
        with epabi.InferenceSession(mlp(), so) as session:
            assert session.cpu_fallback == fallback
            feed = np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32)
            (out,) = session.run(None, {"x": feed})
            np.testing.assert_allclose(out, ReferenceEvaluator(mlp()).run(None, {"x": feed})[0], rtol=1e-4, atol=1e-5)
            profile = _profile(session, tmp_path)
    nodes = [ev for ev in profile if ev["cat"] == "Node"]
    cpu = [ev for ev in nodes if ev["args"]["provider"] == "CPUExecutionProvider"]
    ours = [ev for ev in nodes if ev["args"]["provider"] == EP]
    expected = ("cpu_partition_0_kernel_time", "cpu_partition") if fallback == "onnxruntime" else \
        ("relu0_kernel_time", "Relu")
    assert [(ev["name"], ev["args"]["op_name"], ev["args"]["node_count"]) for ev in cpu] == [(*expected, "1")]
    computes = [ev for ev in profile if ev["name"] == "epabi_compute"]
    assert [c["args"]["node_count"] for c in computes] == ["2", "5"]  # matmul0+add0; the 5 nodes after relu0
    assert [c["args"]["parent_name"] for c in computes] == [n["name"] for n in ours]
    assert [n["name"] for n in ours] == [f"{c['args']['node_name']}_kernel_time" for c in computes]
    assert ours[0]["ts"] + ours[0]["dur"] <= cpu[0]["ts"] + 2 and cpu[0]["ts"] + cpu[0]["dur"] <= ours[1]["ts"] + 2


def test_the_plugins_profiler_answers_unusual_calls(library_path: str, software_adapter: None,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """Through the host's wrapper, on an EP made without a session: a second CreateProfiler is refused (the EP's
    events go to its first profiler); a negative start offset is an error; host events started and never stopped
    (an error path) neither grow without bound nor break the events that follow; an empty profile adds nothing."""
    from epabi.served_profiling import EventCategory, ProfilingEvent

    with _host(None, library_path) as host:
        so = epabi.SessionOptions()
        so.add_provider_for_devices(host.get_ep_devices())
        with host.create_ep(so) as ep:
            profiler = EpProfiler.create(ep)
            assert profiler is not None
            with caplog.at_level("ERROR", logger="epabi.session"):
                assert EpProfiler.create(ep) is None
                profiler.start(-1)
            messages = [r.getMessage() for r in caplog.records]
            assert any("CreateProfiler was called a second time" in m for m in messages), messages
            assert any("StartProfiling got a negative offset (-1 ns)" in m for m in messages), messages
            profiler.start(0)
            for i in range(1000):
                profiler.start_event(i)
            event = ProfilingEvent(EventCategory.NODE, os.getpid(), threading.get_native_id(), "n_kernel_time", 0, 1)
            profiler.stop_event(999, event)
            assert profiler.end() == []
            profiler.close()
        assert [kind for kind, _ in host.conduct_report()] == []


@pytest.mark.parametrize(("ms", "suffix"), [(7, "_007"), (60, "_060"), (999, "_999")])
def test_profile_file_names_end_with_three_millisecond_digits(ms: int, suffix: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # onnxruntime 1.32.0 writes the milliseconds zero-padded (..._21-04-02_060.json, seen for starts below 100 ms)
    import epabi.profiling as profiling

    monkeypatch.setattr(profiling.time, "time_ns", lambda: 1_796_157_325 * 10**9 + ms * 10**6 + 123)
    profiler = profiling.SessionProfiler(True, str(tmp_path / "p"), millisecond_names=True)
    path = Path(profiler.end_profiling())
    assert path.name.endswith(f"{suffix}.json"), path.name
    assert json.loads(path.read_text()) == []
