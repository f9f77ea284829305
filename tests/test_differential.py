"""Differential tests: our test models and the ONNX backend cases our EP claims, through epabi's host and through
real onnxruntime (1.24.4 and 1.32.0) with our plugin behind the tracing shim (``plugins/trace_shim.c``); outputs,
errors and the plugin's call sequence must agree.

Per release one driver process runs every case (``differential.py``): epabi's host emulating that release's API
and real onnxruntime of that release, four processes at once. Checked per case:

* outputs: the plugin's under both hosts, and ORT's CPU EP's, agree within the case's tolerance;
* errors: a session or run that fails under one host fails under the other with the same ``OrtErrorCode`` (or
  Python exception class); runs with a wrong dtype, a wrong shape (one more dimension) and a missing input fail
  alike;
* calls: every step (registration, session creation, run, each bad run, graph-capture call, close,
  unregistration) makes the same plugin calls and the plugin the same host calls, after
  :func:`differential.normalise` (what it removes, each an "intended difference" of the README).

Graph capture (``enable_cuda_graph=1``, hosts >= 1.26, so 1.32.0 only): IOBinding with graph id 1, four calls with
the inputs updated in place; the outputs of each call and the capture/replay calls must agree.

Not compared (README, intended differences): the calls of cases with control-flow nodes (ORT offers their
subgraphs to the EP) and, past the first partitioning pass, of cases ORT partitions again after inlining function
nodes; the errors of the cases onnxruntime 1.24.4 fails with its float16 cast insertion. Every model case (MLP,
magika, the boundary models in host and device memory, the real models, the capture cases) is compared in full.

About 1050 cases per release; the four drivers take 2.5 to 5 minutes on two shared cores (measured).
``EPABI_CONFORMANCE_LIMIT=N`` (``conformance.py``) takes the ONNX backend cases from the first N only.
"""

from __future__ import annotations

import collections
import warnings

import numpy as np
import onnx
import pytest

import epabi
import real_models
from boundary_models import cases as boundary_cases
from conformance import baseline_engine, close, relevant_cases, tolerance
from differential import (
    Case,
    HostRun,
    first_difference,
    first_partitioning,
    normalise,
    repartitioned,
    start_driver,
    write_spec,
)
from epabi.cpu_fallback import ONNXRUNTIME
from magika_model import batch
from magika_model import model_path as magika_path
from plugin_builder import build_trace_shim
from real_ort import MIN, NEWEST

pytestmark = pytest.mark.real_ort

EP_NAME = epabi.get_ep_name()
PAIRS = {MIN: int(MIN.split(".")[1]), NEWEST: min(int(NEWEST.split(".")[1]), epabi.NEWEST_EMULATED)}
#: Releases whose host runs the graph-capture cases (capture needs 1.26+).
CAPTURE_RELEASES = [NEWEST]
CAPTURE_CALLS = 4
DRIVER_TIMEOUT_S = 900
#: How many differing cases a failure lists.
SHOWN = 8


def _model_cases() -> list[Case]:
    out = []
    mlp = epabi.models.mlp(layers=3, width=32, batch=2)
    out.append(Case("mlp", mlp, epabi.models.sample_inputs(mlp)))
    out.append(Case("magika", onnx.load(str(magika_path())), {"bytes": batch()}, rtol=1e-4, atol=1e-4))
    for b in boundary_cases():
        for group in ("host", "device"):
            out.append(Case(f"boundary_{b.name}_{group}", b.model, b.feeds,
                            options={"force_cpu_nodes": b.force_cpu_nodes}, group=group))
    for name, (model, feeds) in REAL_MODELS.items():
        out.append(Case(f"real_{name}", model, feeds(3), rtol=1e-4, atol=1e-4))
    return out


def _image(seed: int, size: int = 64) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).uniform(0, 1, (1, 3, size, size)).astype(np.float32)}


def _audio(seed: int, batch: int = 2, samples: int = 1600, hidden: int = 16) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": (rng.standard_normal((batch, samples)) * 0.3).astype(np.float32),
            "state": (rng.standard_normal((2, batch, hidden)) * 0.1).astype(np.float32)}


#: The real models (``real_models.py``) at small sizes, as ``test_real_models.py`` builds them, with input makers.
REAL_MODELS = {
    "yolo": (real_models.yolo_detector(batch=1, size=64, width=8, classes=4), _image),
    "ocr": (real_models.ocr_detector(batch=1, size=64, scale=0.35, neck=16), _image),
    "vad": (real_models.vad_model(), _audio),
}


def _conformance_cases() -> list[Case]:
    """The ONNX backend cases with an op our EP has a kernel for that ORT's CPU EP reproduces (so both hosts'
    CPU fallback is ORT's), with numeric tensor inputs only (the drivers pass .npz files)."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in relevant_cases():
            if not all(isinstance(x, np.ndarray) and x.dtype != object for x in case.inputs) or \
                    baseline_engine(case.name) != ONNXRUNTIME:
                continue
            initializers = {t.name for t in case.model.graph.initializer}
            names = [i.name for i in case.model.graph.input if i.name not in initializers]
            rtol, atol = tolerance(case)
            out.append(Case(f"onnx_{case.name}", case.model, dict(zip(names, case.inputs, strict=True)), rtol, atol,
                            errors=bool(names)))
    return out


def _capture_cases() -> list[Case]:
    rng = np.random.default_rng(11)
    mlp = epabi.models.mlp(layers=3, width=32, batch=2)
    first = epabi.models.sample_inputs(mlp)
    later = [{"x": rng.standard_normal(first["x"].shape).astype(np.float32)} for _ in range(CAPTURE_CALLS - 1)]
    out = [Case("capture_mlp", mlp, first, options={"enable_cuda_graph": "1"}, errors=False, capture=later)]
    files = batch()
    later = [{"bytes": np.roll(files, k + 1, axis=0)} for k in range(CAPTURE_CALLS - 1)]
    out.append(Case("capture_magika", onnx.load(str(magika_path())), {"bytes": files}, 1e-4, 1e-4,
                    options={"enable_cuda_graph": "1"}, errors=False, capture=later))
    yolo, feeds = REAL_MODELS["yolo"]
    later = [feeds(20 + k) for k in range(CAPTURE_CALLS - 1)]
    out.append(Case("capture_yolo", yolo, feeds(3), 1e-4, 1e-4, options={"enable_cuda_graph": "1"},
                    errors=False, capture=later))
    return out


def _output_specs(cases: list[Case]) -> dict[str, dict[str, tuple[list[int], str]]]:
    """Output shapes and dtypes of the capture cases (bound before the first call), from onnxruntime's CPU EP."""
    ort = pytest.importorskip("onnxruntime")
    specs = {}
    for case in cases:
        cpu = ort.InferenceSession(case.model.SerializeToString(), providers=["CPUExecutionProvider"])
        outputs = cpu.run(None, case.feeds)
        specs[case.name] = {o.name: (list(v.shape), str(v.dtype)) for o, v in zip(cpu.get_outputs(), outputs,
                                                                                   strict=True)}
    return specs


class Pair:
    """One release under both hosts."""

    def __init__(self, release: str, cases: list[Case], epabi_run: HostRun, ort_run: HostRun) -> None:
        self.release = release
        self.cases = cases
        self.epabi = epabi_run
        self.ort = ort_run


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Pair]:
    root = tmp_path_factory.mktemp("differential")
    try:
        shim = build_trace_shim(root)
    except RuntimeError as exc:
        pytest.skip(str(exc))
    base = _model_cases() + _conformance_cases()
    capture = _capture_cases()
    specs = _output_specs(capture)
    waits = {}
    cases_of = {}
    for release, api in PAIRS.items():
        cases = base + (capture if release in CAPTURE_RELEASES else [])
        cases_of[release] = cases
        groups = write_spec(cases, root / f"cases-{release}", specs)
        waits[release] = (start_driver("epabi", api, None, shim, groups, root / f"epabi-{api}", DRIVER_TIMEOUT_S),
                          start_driver("ort", api, release, shim, groups, root / f"ort-{release}", DRIVER_TIMEOUT_S))
    return {release: Pair(release, cases_of[release], ours(), theirs()) for release, (ours, theirs) in waits.items()}


RELEASES = list(PAIRS)


def _report(what: str, problems: list[str]) -> str:
    shown = "\n".join(problems[:SHOWN])
    more = f"\n... and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
    return f"{len(problems)} case(s) where {what}:\n{shown}{more}"


def _error_key(error: dict | None) -> tuple | None:
    return None if error is None else (error["code"],) if error["code"] is not None else (error["type"],)


@pytest.mark.parametrize("release", RELEASES)
def test_outputs_agree(pairs: dict[str, Pair], release: str) -> None:
    """The plugin's outputs under epabi's host equal those under onnxruntime, and both equal ORT's CPU EP's."""
    pair = pairs[release]
    problems = []
    for case in pair.cases:
        if case.capture is not None:
            continue
        ours, theirs = pair.epabi.results[case.name], pair.ort.results[case.name]
        if "outputs" not in ours or "outputs" not in theirs:
            continue  # a failing session or run: test_errors_agree
        a, b = pair.epabi.outputs(case.name), pair.ort.outputs(case.name)
        problem = close(a, b, case.rtol, case.atol)
        if problem is not None:
            problems.append(f"{case.name}: epabi vs onnxruntime: {problem}")
        if "cpu_outputs" in theirs:
            problem = close(b, pair.ort.outputs(case.name, ".cpu"), case.rtol, case.atol)
            if problem is not None:
                problems.append(f"{case.name}: onnxruntime with our EP vs its CPU EP: {problem}")
    assert not problems, _report(f"outputs differ under {release}", problems)


@pytest.mark.parametrize("release", RELEASES)
def test_errors_agree(pairs: dict[str, Pair], release: str) -> None:
    """Sessions and runs fail under both hosts or neither, with the same error code (or exception class); so do
    runs with a wrong dtype, a wrong shape and a missing input."""
    pair = pairs[release]
    problems = []
    for case in pair.cases:
        ours, theirs = pair.epabi.results[case.name], pair.ort.results[case.name]
        if _ort_cast_insertion_failure(theirs):
            continue
        for key in ("driver_error",):
            for who, result in (("epabi", ours), ("onnxruntime", theirs)):
                if key in result:
                    problems.append(f"{case.name}: the driver failed under {who}:\n{result[key]}")
        for key in ("session_error", "run_error"):
            a, b = ours.get(key), theirs.get(key)
            if _error_key(a) != _error_key(b):
                problems.append(f"{case.name}: {key}: epabi {a}, onnxruntime {b}")
        for kind in sorted(set(ours.get("errors", {})) | set(theirs.get("errors", {}))):
            a, b = ours.get("errors", {}).get(kind), theirs.get("errors", {}).get(kind)
            if _error_key(a) != _error_key(b):
                problems.append(f"{case.name}: {kind} error: epabi {a}, onnxruntime {b}")
    assert not problems, _report(f"errors differ under {release}", problems)


def _ort_cast_insertion_failure(result: dict) -> bool:
    """ORT 1.24.4 failed the session where float16 values cross between its CPU EP, for which it inserts Casts to
    float, and our EP (README, intended differences: the host's CPU partitions are sessions of their own; 1.32.0
    creates these sessions)."""
    error = result.get("session_error") or {}
    return "InsertedPrecisionFreeCast" in error.get("message", "")


def _compare_steps(pair: Pair, keys: list[tuple[str, ...]]) -> list[str]:
    problems = []
    for key in keys:
        ours, theirs = pair.epabi.trace.get(key, []), pair.ort.trace.get(key, [])
        if key[-1] == "session" and repartitioned(theirs):
            ours, theirs = first_partitioning(ours), first_partitioning(theirs)
        a, b = normalise(ours, EP_NAME), normalise(theirs, EP_NAME)
        where = "/".join(key)
        diff = first_difference(a.calls, b.calls)
        if diff is not None:
            problems.append(f"{where}: {diff}")
        if a.frees != b.frees:
            problems.append(f"{where}: epabi's host freed {a.frees} buffer(s), onnxruntime {b.frees}")
        for getter in sorted(set(a.getters) & set(b.getters)):
            if a.getters[getter] != b.getters[getter]:
                problems.append(f"{where}: {getter} answered {sorted(a.getters[getter])} under epabi's host, "
                                f"{sorted(b.getters[getter])} under onnxruntime")
    return problems


def _repartitioned_cases(pair: Pair) -> set[str]:
    """Cases ORT partitioned a second time after inlining function nodes (:func:`differential.repartitioned`)."""
    return {case.name for case in pair.cases
            if repartitioned(pair.ort.trace.get((case.group, case.name, "session"), []))}


def _has_control_flow(graph: onnx.GraphProto) -> bool:
    return any(n.op_type in CONTROL_FLOW or any(_has_control_flow(a.g) for a in n.attribute if a.HasField("g"))
               for n in graph.node)


#: ORT offers the subgraphs of these nodes to the EP (GetCapability and Compile per subgraph, before the main
#: graph); the host runs them with their subgraphs in its CPU fallback (README, intended differences).
CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})


@pytest.mark.parametrize("release", RELEASES)
def test_calls_agree(pairs: dict[str, Pair], release: str) -> None:
    """Every step of every case makes the same plugin calls under both hosts, and the plugin the same host calls
    (after :func:`differential.normalise`). Where ORT inlined function nodes and partitioned again
    (:func:`differential.repartitioned`), the session step is compared up to the first partitioning pass and the
    case's later steps are not compared; cases with control-flow nodes (:data:`CONTROL_FLOW`) are not compared.
    None of our model cases may be such a case."""
    pair = pairs[release]
    again = _repartitioned_cases(pair)
    assert not {n for n in again if not n.startswith("onnx_")}, again
    subgraphs = {case.name for case in pair.cases if _has_control_flow(case.model.graph)}
    assert not {n for n in subgraphs if not n.startswith("onnx_")}, subgraphs
    keys = sorted(set(pair.epabi.trace) | set(pair.ort.trace))
    keys = [k for k in keys if k != ("",) and not (len(k) == 3 and (k[1] in subgraphs or
                                                                     (k[1] in again and k[2] != "session")))]
    problems = _compare_steps(pair, keys)
    assert not problems, _report(f"the calls differ under {release}", problems)


@pytest.mark.parametrize("release", CAPTURE_RELEASES)
def test_graph_capture_agrees(pairs: dict[str, Pair], release: str) -> None:
    """Graph capture with IOBinding: every call's outputs agree between the hosts and with ORT's CPU EP, every
    call after the capturing one is a replay under both hosts (ReplayGraph, no Compute), and the calls agree."""
    pair = pairs[release]
    problems = []
    captured = collections.Counter()
    for case in (c for c in pair.cases if c.capture is not None):
        ours, theirs = pair.epabi.results[case.name], pair.ort.results[case.name]
        if ours.get("calls") != CAPTURE_CALLS or theirs.get("calls") != CAPTURE_CALLS:
            problems.append(f"{case.name}: calls made: epabi {ours}, onnxruntime {theirs}")
            continue
        for k in range(CAPTURE_CALLS):
            a, b = pair.epabi.call_outputs(case.name, k), pair.ort.call_outputs(case.name, k)
            cpu = pair.ort.call_outputs(case.name, k, cpu=True)
            for name in b:
                for label, x, y in (("epabi vs onnxruntime", a[name], b[name]),
                                    ("onnxruntime vs its CPU EP", b[name], cpu[name])):
                    problem = close([x], [y], case.rtol, case.atol)
                    if problem is not None:
                        problems.append(f"{case.name} call {k} output {name}: {label}: {problem}")
            for who, run in (("epabi", pair.epabi), ("onnxruntime", pair.ort)):
                steps = run.trace.get((case.group, case.name, f"call {k}"), [])
                replayed = any(line.startswith("> ep.ReplayGraph id=1") for line in steps)
                computed = any(line.startswith("> nci.Compute") for line in steps)
                if k > 0 and (not replayed or computed):
                    problems.append(f"{case.name} call {k} under {who}: replayed={replayed} computed={computed}")
                captured[who] += replayed
    problems += _compare_steps(pair, [k for k in pair.epabi.trace if len(k) == 3 and k[1].startswith("capture_")])
    assert not problems, _report(f"graph capture differs under {release}", problems)
    assert captured["epabi"] == captured["onnxruntime"] > 0


def test_the_cases_cover_what_the_ep_claims(pairs: dict[str, Pair]) -> None:
    """The differential set is not vacuous: our EP claims nodes in most cases, some fully, some partly, and
    each model case runs to the end under every host."""
    for pair in pairs.values():
        claims = collections.Counter()
        for case in pair.cases:
            steps = pair.ort.trace.get((case.group, case.name, "session"), [])
            claimed = sum(int(line.split("nodes=")[1].split()[0]) for line in steps
                          if line.startswith("api EpGraphSupportInfo_AddNodesToFuse"))
            total = next((int(line.split("nodes=")[1]) for line in steps if line.startswith("> ep.GetCapability")), 0)
            claims["all" if claimed and claimed == total else "some" if claimed else "none"] += 1
        assert claims["all"] > 500 and claims["some"] > 5, claims
        for case in pair.cases:
            if not case.name.startswith("onnx_"):
                assert "outputs" in pair.ort.results[case.name] or "calls" in pair.ort.results[case.name], \
                    (case.name, pair.ort.results[case.name])


def test_shim_sees_the_same_plugin(pairs: dict[str, Pair]) -> None:
    """The shim forwards to our plugin under every host: the registration negotiates the release's API."""
    for pair in pairs.values():
        for run in (pair.epabi, pair.ort):
            lines = run.trace.get(("host", "register"), [])
            assert "api GetVersionString = " + pair.release in lines, (run.label, lines[:12])
            assert any(line.startswith("< factory.GetSupportedDevices ok ep_devices=1") for line in lines), run.label

