"""Differential runs: the same models, through epabi's host and through real onnxruntime, with our plugin behind the
tracing shim (``tests/plugins/trace_shim.c``), for ``test_differential.py``.

One driver script (:data:`DRIVER`) runs every case of a spec in one process, under either host: real onnxruntime
in the cached venv of a release (``real_ort.run_in_ort``) or epabi's host under this interpreter, emulating the
API of that release. Models travel as files, inputs and outputs as .npz files, results as one JSON file. Per case
it creates a session on the software adapter (ORT: ``ORT_DISABLE_ALL``, see :func:`normalise`), runs it, runs it
with a wrong dtype, a wrong shape and a missing input, closes it; graph-capture cases bind inputs and outputs and
make several calls with graph id 1. Under real ORT it also runs the model on ORT's CPU EP. The driver writes
marker lines (``# case NAME``, ``# session``, ``# run``, ...) into the shim's trace file between the steps, so
:func:`split_trace` can cut the trace into the plugin calls of each step.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import pytest

import epabi
from real_ort import PRELUDE, host_env, result_of, run_in_ort

#: Environment of every driver: the software adapter, no GPU of the plugin's own finding, and the shim offering
#: the plugin only the CPU, so that a machine with GPUs gives both hosts the same device.
DRIVER_ENV = {"EPABI_ALLOW_SOFTWARE_ADAPTER": "1", "EPABI_CUDA_DISCOVERY": "0", "EPABI_TRACE_HARDWARE": "cpu",
              "EPABI_SOFTWARE_DEVICE_MEMORY": None, "EPABI_CPU_FALLBACK": None}

# argv: spec.json. Spec: {"host": "ort"|"epabi", "api": N, "library": shim, "trace": path, "out": folder,
# "groups": [{"name", "env": {VAR: value|null}, "cases": [{"name", "model", "inputs", "options", "errors",
# "capture": null|{"calls": [npz...], "outputs": {name: [shape, dtype]}}}]}]}. Writes <out>/result.json.
DRIVER = r'''
import gc
import os
import re
import traceback

import numpy as np

spec = json.load(open(sys.argv[1]))
TRACE, OUT, EPABI = spec["trace"], spec["out"], spec["host"] == "epabi"


def mark(text):
    with open(TRACE, "a") as f:
        f.write("# " + text + "\n")


def error_of(exc):
    """An exception as {type, code, message}: ORT's "[ONNXRuntimeError] : code : NAME : message" (also inside
    another message), epabi's OrtStatusError (.code, .message), else the Python exception's text."""
    text = str(exc)
    found = re.search(r"\[ONNXRuntimeError\] : (\d+) : \w+ : (.*)", text, re.S)
    if found:
        return {"type": type(exc).__name__, "code": int(found.group(1)), "message": found.group(2).strip()}
    code = getattr(exc, "code", None)
    if code is not None and hasattr(exc, "message"):
        return {"type": type(exc).__name__, "code": int(code), "message": exc.message}
    return {"type": type(exc).__name__, "code": None, "message": text}


if EPABI:
    import epabi

    rt = epabi
    host = epabi.Host(api_version=spec["api"])

    def register():
        host.register_execution_provider_library("epabi", spec["library"])

    def unregister():
        host.unregister_execution_provider_library("epabi")

    def devices():
        return [d for d in host.get_ep_devices() if d.ep_name == EP_NAME]

    def session(path, options):
        so = epabi.SessionOptions()
        so.add_provider_for_devices(devices(), options)
        return epabi.InferenceSession(path, so)
else:
    rt = ort

    def register():
        ort.register_execution_provider_library("epabi", spec["library"])

    def unregister():
        ort.unregister_execution_provider_library("epabi")

    def devices():
        return [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]

    def session(path, options):
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.add_provider_for_devices(devices(), options)
        return ort.InferenceSession(path, sess_options=so, enable_fallback=0)


def load(path):
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def other_dtype(x):
    return x.astype({"float32": np.float64, "int32": np.int64, "int64": np.int32}.get(x.dtype.name, np.float32))


def bad_feeds(feeds):
    first = next(iter(feeds))
    yield "dtype", {**feeds, first: other_dtype(feeds[first])}
    yield "shape", {**feeds, first: feeds[first][None]}
    yield "missing", {k: v for k, v in feeds.items() if k != first}


def run_case(case, result):
    feeds = load(case["inputs"])
    mark("session")
    try:
        sess = session(case["model"], case["options"])
    except Exception as exc:
        result["session_error"] = error_of(exc)
        return
    result["inputs"] = [i.name for i in sess.get_inputs()]
    try:
        if case["capture"] is None:
            mark("run")
            try:
                outputs = sess.run(None, feeds)
                np.savez(os.path.join(OUT, case["name"] + ".npz"), *outputs)
                result["outputs"] = len(outputs)
            except Exception as exc:
                result["run_error"] = error_of(exc)
            if case["errors"] and "run_error" not in result:
                result["errors"] = {}
                for kind, bad in bad_feeds(feeds):
                    mark("error " + kind)
                    try:
                        sess.run(None, bad)
                        result["errors"][kind] = None
                    except Exception as exc:
                        result["errors"][kind] = error_of(exc)
        else:
            capture(sess, case, feeds, result)
    finally:
        mark("close")
        del sess
        gc.collect()


def capture(sess, case, feeds, result):
    binding = sess.io_binding()
    ins = {n: rt.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(v)) for n, v in feeds.items()}
    outs = {n: rt.OrtValue.ortvalue_from_shape_and_type(shape, np.dtype(dtype))
            for n, (shape, dtype) in case["capture"]["outputs"].items()}
    for n, v in ins.items():
        binding.bind_ortvalue_input(n, v)
    for n, v in outs.items():
        binding.bind_ortvalue_output(n, v)
    ro = rt.RunOptions()
    ro.add_run_config_entry("gpu_graph_id", "1")
    result["calls"] = 0
    for k, path in enumerate(case["capture"]["calls"]):
        if k:
            for n, v in load(path).items():
                ins[n].update_inplace(np.ascontiguousarray(v))
        mark(f"call {k}")
        try:
            sess.run_with_iobinding(binding, ro)
        except Exception as exc:
            result["run_error"] = error_of(exc)
            break
        np.savez(os.path.join(OUT, f"{case['name']}.call{k}.npz"), **{n: v.numpy() for n, v in outs.items()})
        result["calls"] += 1
    del binding, ins, outs


def cpu_reference(case, result):
    """ORT's CPU EP on the case's inputs, of every call for a capture case (real ORT only)."""
    try:
        cpu = ort.InferenceSession(case["model"], providers=["CPUExecutionProvider"])
        if case["capture"] is None:
            outputs = cpu.run(None, load(case["inputs"]))
            np.savez(os.path.join(OUT, case["name"] + ".cpu.npz"), *outputs)
            result["cpu_outputs"] = len(outputs)
            return
        feeds = load(case["inputs"])
        names = [o.name for o in cpu.get_outputs()]
        for k, path in enumerate(case["capture"]["calls"]):
            feeds.update(load(path))
            outputs = dict(zip(names, cpu.run(None, feeds)))
            np.savez(os.path.join(OUT, f"{case['name']}.cpu.call{k}.npz"), **outputs)
    except Exception as exc:
        result["cpu_error"] = error_of(exc)


results = {}
for group in spec["groups"]:
    for key, value in group["env"].items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    mark(f"group {group['name']}")
    mark("register")
    register()
    for case in group["cases"]:
        result = results.setdefault(case["name"], {})
        mark("case " + case["name"])
        try:
            run_case(case, result)
        except Exception as exc:  # the driver itself failed: reported, the next case still runs
            result["driver_error"] = traceback.format_exc()
        mark("end")
        if not EPABI:
            cpu_reference(case, result)
    mark("unregister")
    unregister()
    mark("unregistered")
if EPABI:
    results["$conduct"] = [list(entry) for entry in host.conduct_report()]
    host.close()
with open(os.path.join(OUT, "result.json"), "w") as f:
    json.dump(results, f)
emit(ok=True, version=ort.__version__ if not EPABI else f"epabi API {spec['api']}")
'''


@dataclass
class Case:
    """One differential case.

    Attributes:
        name: unique among the cases of a run (a file name stem).
        model: the model.
        feeds: inputs of the first run (and of the capture's first call).
        rtol, atol: how close outputs must be (between the hosts and to ORT's CPU EP).
        options: provider options for ``add_provider_for_devices``.
        group: registrations share an environment; cases of one group run under one registration.
        errors: also run with a wrong dtype, a wrong shape and a missing input.
        capture: graph capture with IOBinding and graph id 1: the feeds of the calls after the first.
    """

    name: str
    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    rtol: float = 1e-4
    atol: float = 1e-5
    options: dict[str, str] = field(default_factory=dict)
    group: str = "host"
    errors: bool = True
    capture: list[dict[str, np.ndarray]] | None = None


#: Registrations by group name: the environment a group's registration has.
GROUPS: dict[str, dict[str, str | None]] = {
    "host": {"EPABI_SOFTWARE_DEVICE_MEMORY": None},
    "device": {"EPABI_SOFTWARE_DEVICE_MEMORY": "device"},
}


@dataclass
class HostRun:
    """What one host made of a spec: per case the driver's result (errors, output counts), outputs by file."""

    label: str
    results: dict[str, dict]
    out: Path
    trace: dict[tuple[str, ...], list[str]]

    def outputs(self, case: str, suffix: str = "") -> list[np.ndarray]:
        """A case's outputs: ``""`` (the plugin's), ``".cpu"`` (ORT's CPU EP), in output order."""
        with np.load(self.out / f"{case}{suffix}.npz") as data:
            return [data[k] for k in sorted(data.files, key=lambda n: int(n.split("_")[1]))]

    def call_outputs(self, case: str, call: int, cpu: bool = False) -> dict[str, np.ndarray]:
        """The bound outputs after a capture case's call (``cpu``: ORT's CPU EP on that call's inputs)."""
        with np.load(self.out / f"{case}{'.cpu' if cpu else ''}.call{call}.npz") as data:
            return {k: data[k] for k in data.files}


def write_spec(cases: Sequence[Case], folder: Path, capture_outputs: Mapping[str, dict[str, tuple[list[int], str]]],
               ) -> list[dict]:
    """Writes the models and inputs of ``cases`` under ``folder``; returns the spec's groups."""
    folder.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[dict]] = {}
    for case in cases:
        model = folder / f"{case.name}.onnx"
        onnx.save(case.model, model)
        inputs = folder / f"{case.name}.in.npz"
        np.savez(inputs, **case.feeds)
        capture = None
        if case.capture is not None:
            calls = [str(inputs)]
            for k, feeds in enumerate(case.capture):
                path = folder / f"{case.name}.call{k + 1}.npz"
                np.savez(path, **feeds)
                calls.append(str(path))
            capture = {"calls": calls, "outputs": {n: [list(s), d] for n, (s, d) in capture_outputs[case.name].items()}}
        groups.setdefault(case.group, []).append({
            "name": case.name, "model": str(model), "inputs": str(inputs), "options": case.options,
            "errors": case.errors, "capture": capture})
    return [{"name": g, "env": GROUPS[g], "cases": cs} for g, cs in groups.items()]


def prepare_shim(shim: Path, folder: Path) -> Path:
    """A copy of the shim library of its own: the shim keeps one host's tables per loaded copy."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / shim.name
    shutil.copyfile(shim, copy)
    return copy


def start_driver(host: str, api: int, version: str | None, shim: Path, groups: list[dict], folder: Path,
                 timeout: float) -> Callable[[], HostRun]:
    """Starts one driver; returns a function that waits for it and returns its :class:`HostRun`.

    ``host`` is "ort" (real onnxruntime ``version``, in its venv) or "epabi" (epabi's host of API ``api`` under
    this interpreter)."""
    folder.mkdir(parents=True, exist_ok=True)
    trace = folder / "trace.txt"
    trace.unlink(missing_ok=True)
    spec = {"host": host, "api": api, "library": str(prepare_shim(shim, folder)), "trace": str(trace),
            "out": str(folder), "groups": groups}
    spec_path = folder / "spec.json"
    spec_path.write_text(json.dumps(spec))
    env = {**DRIVER_ENV, "EPABI_TRACE_PLUGIN": epabi.get_library_path(), "EPABI_TRACE_FILE": str(trace)}
    label = f"onnxruntime {version}" if host == "ort" else f"epabi's host (API {api})"
    if host == "ort":
        pool = ThreadPoolExecutor(1)
        future = pool.submit(run_in_ort, version, DRIVER, env, [str(spec_path)], timeout)

        def wait() -> HostRun:
            code, out, err = future.result()
            pool.shutdown()
            return _finish(label, code, out, err, folder, trace)
    else:
        proc = subprocess.Popen([sys.executable, "-c", PRELUDE + DRIVER, str(spec_path)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=host_env(env))

        def wait() -> HostRun:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                err += f"\n[timed out after {timeout} s]"
            return _finish(label, proc.returncode, out, err, folder, trace)
    return wait


def _finish(label: str, code: int, out: str, err: str, folder: Path, trace: Path) -> HostRun:
    if code != 0 or result_of(out) is None or not (folder / "result.json").is_file():
        pytest.fail(f"the driver under {label} exited with {code}\n--- stdout\n{out[-3000:]}\n"
                    f"--- stderr\n{err[-6000:]}", pytrace=False)
    results = json.loads((folder / "result.json").read_text())
    return HostRun(label, results, folder, split_trace(trace.read_text()))


def split_trace(text: str) -> dict[tuple[str, ...], list[str]]:
    """The trace's lines by step: ``(group, "register")``, ``(group, case, step)`` with step "session", "run",
    "error dtype", "call 0", "close", ..., and ``(group, "unregister")``."""
    steps: dict[tuple[str, ...], list[str]] = {}
    group, case, key = "", "", ("",)
    for line in text.splitlines():
        if line.startswith("# "):
            word = line[2:]
            if word.startswith("group "):
                group, case = word[6:], ""
                continue
            if word.startswith("case "):
                case = word[5:]
                continue
            if word in ("register", "unregister", "unregistered"):
                case = ""
            key = (group, case, word) if case else (group, word)
            steps.setdefault(key, [])
            continue
        steps.setdefault(key, []).append(line)
    return steps


# -- normalisation ------------------------------------------------------------------------------------------------

#: Identity getters: ORT reads them wherever it needs them (1.24.4: the factory's name, vendor and version in
#: CreateEpDevice, the OrtEp's name once after CreateEp; 1.32.0 also the factory's name before CreateEp and the
#: OrtEp's name three times; both an allocator's Info twice after creating it, and again before releasing it),
#: epabi's host once (README, intended differences). Compared by value, not by position or count.
GETTERS = frozenset({"factory.GetName", "factory.GetVendor", "factory.GetVersion", "factory.GetVendorId",
                     "ep.GetName", "alloc.Info"})

_GETTER = re.compile(r"^> (\S+)(?: (.*))?$")
#: Fused node names: epabi's host names them "<EP>_<n>", ORT "<EP>_<EP>_<model hash>_<id>_<n>" (README, intended
#: differences); a plugin sees them only as names.
_FUSED_NAME = re.compile(r"^(api Node_GetName = )(\w+?)_(?:\2_\d+_\d+_)?\d+$")


@dataclass
class Normalised:
    """The calls of one step as both hosts must make them, and what is compared apart from their order."""

    calls: list[str]
    getters: dict[str, set[str]]
    frees: int


def normalise(lines: Sequence[str], ep_name: str) -> Normalised:
    """The calls of a step as the hosts must agree on them (see :class:`Normalised`).

    What is normalised away, and why (each a README "intended differences" line):

    * getter calls (:data:`GETTERS`): their position and count; the values must agree;
    * ``OrtAllocator::Free``: where in the step the host frees a buffer (ORT's allocation planner frees a value
      after its last consumer, epabi's host after the run); how many the step frees must agree;
    * fused node names (:data:`_FUSED_NAME`): numbered in order of appearance;
    * a value's shape as the plugin reads it (``TensorTypeAndShape_HasShape``, ``GetDimensionsCount``,
      ``GetDimensions``) becomes one ``<shape>`` line, compared by :func:`lines_agree`.

    What is not normalised but made equal by the drivers: ORT runs with ``ORT_DISABLE_ALL`` (its level-1
    optimisations fuse and fold nodes before partitioning; epabi's host applies none: README, intended
    differences), and both hosts offer the plugin only the CPU (``EPABI_TRACE_HARDWARE``).
    """
    calls: list[str] = []
    getters: dict[str, set[str]] = {}
    fused: dict[str, str] = {}
    frees = 0
    lines = list(lines)
    k = 0
    while k < len(lines):
        line = lines[k]
        k += 1
        if line == "api TensorTypeAndShape_HasShape = 0":
            calls.append("api <shape> unknown")
            continue
        if line == "api TensorTypeAndShape_HasShape = 1" and k + 1 < len(lines) and \
                lines[k].startswith("api GetDimensionsCount = ") and lines[k + 1].startswith("api GetDimensions = "):
            calls.append("api <shape> " + lines[k + 1][len("api GetDimensions = "):])
            k += 2
            continue
        match = _GETTER.match(line)
        if match and match.group(1) in GETTERS:
            getters.setdefault(match.group(1), set()).add(match.group(2) or "")
            continue
        if match and match.group(1) == "alloc.Free":
            frees += 1
            continue
        named = _FUSED_NAME.match(line)
        if named and named.group(2) == ep_name:
            line = named.group(1) + fused.setdefault(line, f"<fused node {len(fused)}>")
        calls.append(line)
    return Normalised(calls, getters, frees)


_SHAPE = re.compile(r"^api (?:<shape> |GetDimensions = )(unknown|\[([-0-9,]*)\])$")


def lines_agree(a: str, b: str) -> bool:
    """Equal lines, or two shapes (``<shape>`` lines of :func:`normalise`, or a kernel context's
    ``GetDimensions``) that agree wherever both hosts know something: the same rank and the same known dimensions,
    or one side knows no shape at all.

    The host infers value shapes with ONNX's inference (no data propagation); ORT's own inference also propagates
    shape values through Shape, Gather, Unsqueeze, Concat, Reshape and more, differently per release, so one host
    may know a dimension, or a whole shape, the other does not (README, intended differences). A known dimension
    must never disagree, and what the plugin does with the shape shows in the lines that follow.
    """
    if a == b:
        return True
    sa, sb = _SHAPE.match(a), _SHAPE.match(b)
    if sa is None or sb is None:
        return False
    if sa.group(1) == "unknown" or sb.group(1) == "unknown":
        return True
    x = [int(v) for v in sa.group(2).split(",") if v]
    y = [int(v) for v in sb.group(2).split(",") if v]
    return len(x) == len(y) and all(p == q or p < 0 or q < 0 for p, q in zip(x, y, strict=True))


def first_difference(a: Sequence[str], b: Sequence[str], context: int = 6) -> str | None:
    """None when the calls agree line by line (:func:`lines_agree`), else the first differing line with some
    context from both sides."""
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if not lines_agree(x, y)), None)
    if i is None:
        if len(a) == len(b):
            return None
        i = min(len(a), len(b))
    lo = max(0, i - context)
    left = "\n".join(f"    {line}" for line in a[lo:i + context])
    right = "\n".join(f"    {line}" for line in b[lo:i + context])
    return f"first difference at line {i} (of {len(a)} and {len(b)}):\n  epabi:\n{left}\n  onnxruntime:\n{right}"


def repartitioned(session_step: Sequence[str]) -> bool:
    """ORT partitioned the graph more than once: it inlined function nodes no EP took (ORT's ``GraphPartitioner``
    expands a node that has a function body and no kernel, ``CastLike`` say, and asks every EP again). The host
    does not (README, intended differences): it runs such nodes in its CPU fallback."""
    return sum(line.startswith("> ep.GetCapability") for line in session_step) > 1


def first_partitioning(session_step: Sequence[str]) -> list[str]:
    """The session step up to the end of the first partitioning pass: the first ``GetCapability`` and the
    ``Compile`` of what it claimed (what both hosts share when ORT partitions again)."""
    for i, line in enumerate(session_step):
        if not line.startswith("< ep.GetCapability"):
            continue
        later = [j for j in range(i + 1, len(session_step)) if session_step[j].startswith(">")]
        if later and session_step[later[0]].startswith("> ep.Compile"):
            i = next((j for j in range(later[0], len(session_step)) if session_step[j].startswith("< ep.Compile")),
                     len(session_step) - 1)
        return list(session_step[:i + 1])
    return list(session_step)


