"""Graph capture and replay of the software adapter driven by REAL onnxruntime's capture loop.

Hosts: onnxruntime 1.26.0 (the first release with the OrtEp graph-capture members) and NEWEST (``real_ort.py``).
Each test runs a script in the host's venv (onnxruntime + numpy only): the model travels as a file built here
with onnx, inputs and outputs as .npy files. The script registers the plugin with
EPABI_ALLOW_SOFTWARE_ADAPTER=1, adds our device with ``{"enable_cuda_graph": "1", ...}`` and
``enable_fallback=0``, binds pre-allocated CPU OrtValues with IOBinding and calls ``run_with_iobinding`` with
the run option ``gpu_graph_id``. Before every call it overwrites the bound outputs with NaN (so a replay that
writes nothing shows) and may ``update_inplace`` inputs; it marks each call's start and end on stderr, where
the session logger (``log_severity_level=0``) writes, so the plugin's log phrases (native/graph_capture.h)
are counted per call.

How ORT drives the loop (observed through the tracing shim of ``test_call_order``, both hosts):

* First call of an id, min_num_runs_before_cuda_graph_capture=2: ORT runs the session three times in one
  call ("Start another run for necessary memory allocation or graph capture" twice). Each run is
  IsGraphCaptured(id) -> false, OnRunStart, Compute, OnRunEnd(sync_stream=1), IsGraphCaptured(id); the third
  OnRunStart opens the capture, its OnRunEnd closes it (the software adapter's host stream executed the
  launches while recording them, so it does not replay: a replay would execute the run twice), and the
  IsGraphCaptured after it answers true.
* Later calls: IsGraphCaptured(id) -> true, ReplayGraph(id), [Sync], IsGraphCaptured(id) -> true. No Compute,
  no OnRunStart/OnRunEnd. onnxruntime 1.26.0 does NOT call OrtEp::Sync after ReplayGraph (although our EP sets
  Sync there: API 26 >= 25); 1.32.0 does, exactly once per replay. Neither host calls Sync on a regular run.
* Id -1: IsGraphCaptured(-1) -> false, then one plain run (OnRunStart, Compute, OnRunEnd(sync_stream=1)); no
  IsGraphCaptured after it, never a second run in the same call, never a capture.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from epabi._ffi import header_path
from magika_model import batch
from magika_model import model_path as magika_path
from real_ort import NEWEST, run_json, run_json_on_gpu

pytestmark = pytest.mark.real_ort

EP_NAME = "EpAbiExecutionProvider"
#: 1.26.0: the first release whose OrtEp has IsGraphCaptureEnabled/IsGraphCaptured/ReplayGraph.
CAPTURE_HOSTS = ["1.26.0", NEWEST]
SOFTWARE = {"EPABI_ALLOW_SOFTWARE_ADAPTER": "1"}
CAPTURE = {"enable_cuda_graph": "1"}
ATOL = 1e-5

ANOTHER_RUN = "Start another run for necessary memory allocation or graph capture"
ALLOC_WARNING = "allocated memory during graph capture"

# argv: library, model, spec.json, output folder. spec: {"options": {...}, "device": bool, "cpu_arena": bool
# (SessionOptions.enable_cpu_mem_arena), "bindings": {name:
# {"inputs": {input: npy}, "outputs": {output: shape}}}, "calls": [{"binding": name, "id": gid, "update": {input:
# npy}} or {"plain": {input: npy}, "id": gid} or {"drop": name}]}. "device": the bound OrtValues are in the EP
# device's memory (ortvalue_from_numpy(..., "cuda", 0), through our allocator). A binding and its values are made
# at its first call. A binding call writes call<k>_<output>.npy after call k, and every binding still alive at the
# end writes final_<binding>_<output>.npy; a plain call (run() with fresh arrays, dropped right after) writes
# call<k>_plain<i>.npy for its i-th result and keeps the results, which are written again as final<k>_plain<i>.npy
# after the last call (a replay writing into them shows there); a drop call deletes a binding and its values.
# stderr carries EPABI-CALL <k> / EPABI-CALL-END <k> around call k.
CAPTURE_SCRIPT = """
import gc
import os

import numpy as np

lib, model_path, spec_path, out_dir = sys.argv[1:]
with open(spec_path) as f:
    spec = json.load(f)
place = ("cuda", 0) if spec.get("device") else ()
ort.register_execution_provider_library("epabi", lib)
ours = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
if not ours:
    emit(skip="onnxruntime lists no EP device of ours", devices=[describe(d) for d in ort.get_ep_devices()])
    sys.exit(0)
so = ort.SessionOptions()
so.log_severity_level = 0  # VERBOSE: ReplayGraph lines are VERBOSE
so.enable_cpu_mem_arena = spec.get("cpu_arena", True)
so.add_provider_for_devices(ours[:1], spec["options"])  # CreateEp takes one device
try:
    sess = ort.InferenceSession(model_path, sess_options=so, enable_fallback=0)
except Exception as exc:
    emit(ort_version=ort.__version__, session_error=str(exc))
    sys.exit(0)
providers = sess.get_providers()
bound = {}


def binding(name):
    # the binding and its values, made at its first call (so its buffers are allocated then)
    if name not in bound:
        b = spec["bindings"][name]
        io = sess.io_binding()
        ins = {k: ort.OrtValue.ortvalue_from_numpy(np.load(p), *place) for k, p in b["inputs"].items()}
        outs = {k: ort.OrtValue.ortvalue_from_numpy(np.zeros(shape, np.float32), *place)
                for k, shape in b["outputs"].items()}
        for k, v in ins.items():
            io.bind_ortvalue_input(k, v)
        for k, v in outs.items():
            io.bind_ortvalue_output(k, v)
        bound[name] = (io, ins, outs)
    return bound[name]


kept = {}
plain_counts = {}
errors = {}
for k, call in enumerate(spec["calls"]):
    if "drop" in call:
        del bound[call["drop"]]
        gc.collect()
        continue
    ro = ort.RunOptions()
    ro.add_run_config_entry("gpu_graph_id", str(call["id"]))
    if "plain" in call:
        feeds = {name: np.load(path) for name, path in call["plain"].items()}
        sys.stderr.write(f"\\nEPABI-CALL {k}\\n")
        sys.stderr.flush()
        results = sess.run(None, feeds, ro)
        sys.stderr.write(f"\\nEPABI-CALL-END {k}\\n")
        sys.stderr.flush()
        del feeds
        gc.collect()
        kept[k] = results
        plain_counts[k] = len(results)
        for i, r in enumerate(results):
            np.save(os.path.join(out_dir, f"call{k}_plain{i}.npy"), r)
        continue
    io, ins, outs = binding(call["binding"])
    for name, path in call.get("update", {}).items():
        ins[name].update_inplace(np.load(path))
    for v in outs.values():
        v.update_inplace(np.full(v.shape(), np.nan, np.float32))
    sys.stderr.write(f"\\nEPABI-CALL {k}\\n")
    sys.stderr.flush()
    try:
        sess.run_with_iobinding(io, ro)
    except Exception as exc:  # the test expects it (errors found during a replay)
        errors[k] = str(exc)
    sys.stderr.write(f"\\nEPABI-CALL-END {k}\\n")
    sys.stderr.flush()
    for name, v in outs.items():
        np.save(os.path.join(out_dir, f"call{k}_{name}.npy"), v.numpy())
for k, results in kept.items():
    for i, r in enumerate(results):
        np.save(os.path.join(out_dir, f"final{k}_plain{i}.npy"), r)
for name, (io, ins, outs) in bound.items():
    for k, v in outs.items():
        np.save(os.path.join(out_dir, f"final_{name}_{k}.npy"), v.numpy())
del sess, so, ours, bound, kept
io = ins = outs = v = None  # no value of our allocator may outlive the library (REAL_HOST_NOTES trap 2)
gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(ort_version=ort.__version__, providers=providers, plain_counts=plain_counts, errors=errors)
"""


# -- models ----------------------------------------------------------------------------------------------

RNG = np.random.default_rng(7)
W = RNG.standard_normal((4, 8)).astype(np.float32)
B = RNG.standard_normal((8,)).astype(np.float32)


def _model(nodes: list, inputs: list, outputs: list, initializer: list = ()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializer))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def chain_model() -> onnx.ModelProto:
    """y = Softmax(Reshape(t, Shape(t))), t = Transpose(Transpose(Relu(x @ W + B))); x: [N, 4], y: [N, 8].

    Reshape's shape is data that an earlier launch (Shape) of the same run produces.
    """
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
        helper.make_node("Add", ["m", "B"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node("Transpose", ["r"], ["t1"], name="tr1", perm=[1, 0]),
        helper.make_node("Transpose", ["t1"], ["t"], name="tr2", perm=[1, 0]),
        helper.make_node("Shape", ["t"], ["s"], name="shape"),
        helper.make_node("Reshape", ["t", "s"], ["rs"], name="reshape"),
        helper.make_node("Softmax", ["rs"], ["y"], name="softmax", axis=-1),
    ]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
                  [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")])


def chain_ref(x: np.ndarray) -> np.ndarray:
    r = np.maximum(x @ W + B, 0)
    e = np.exp(r - r.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def matmul_model() -> onnx.ModelProto:
    """C = A @ B with symbolic dims: A [M, K], B [K, N]."""
    return _model([helper.make_node("MatMul", ["A", "B"], ["C"], name="mm")],
                  [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["M", "K"]),
                   helper.make_tensor_value_info("B", TensorProto.FLOAT, ["K", "N"])],
                  [helper.make_tensor_value_info("C", TensorProto.FLOAT, ["M", "N"])])


#: The capture-safety tests' tensors: 16 KiB, above numpy's cache of small buffers (a dropped feed is really freed,
#: so AddressSanitizer sees a replay that reads it).
ADD_SHAPE = (64, 64)


def add_model() -> onnx.ModelProto:
    """z = x + y, all ADD_SHAPE: the capture-safety tests' model (one launch, so every buffer a replay touches is a
    fused-node input or output)."""
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(ADD_SHAPE)) for n in ("x", "y", "z")]
    return _model([helper.make_node("Add", ["x", "y"], ["z"], name="add")], info[:2], info[2:])


@pytest.fixture(scope="module")
def add_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "add.onnx"
    onnx.save(add_model(), str(path))
    return path


GATHER_DATA = np.arange(12, dtype=np.float32).reshape(4, 3)


def checked_model() -> onnx.ModelProto:
    """y = Gather(D, idx) (D = GATHER_DATA, idx int64 [2]) and q = float(a / b) (int32 Div, a and b [3]): an index
    and a divisor the kernels check, both graph inputs (their values are not at hand when a graph replays)."""
    nodes = [helper.make_node("Gather", ["D", "idx"], ["y"], name="gather", axis=0),
             helper.make_node("Div", ["a", "b"], ["qi"], name="div"),
             helper.make_node("Cast", ["qi"], ["q"], name="cast", to=TensorProto.FLOAT)]
    return _model(nodes, [helper.make_tensor_value_info("idx", TensorProto.INT64, [2]),
                          helper.make_tensor_value_info("a", TensorProto.INT32, [3]),
                          helper.make_tensor_value_info("b", TensorProto.INT32, [3])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
                   helper.make_tensor_value_info("q", TensorProto.FLOAT, [3])],
                  [numpy_helper.from_array(GATHER_DATA, "D")])


def checked_ref(idx: np.ndarray, a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    return {"y": GATHER_DATA[idx], "q": np.trunc(a / b).astype(np.float32)}


@pytest.fixture(scope="module")
def checked_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "checked.onnx"
    onnx.save(checked_model(), str(path))
    return path


@pytest.fixture(scope="module")
def chain_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "chain.onnx"
    onnx.save(chain_model(), str(path))
    return path


@pytest.fixture(scope="module")
def matmul_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "matmul.onnx"
    onnx.save(matmul_model(), str(path))
    return path


# -- driving the script ----------------------------------------------------------------------------------

@dataclass
class Call:
    binding: str | None            # None: a plain run() (feeds in ``update``), or a drop (``drop``)
    id: int
    update: dict[str, np.ndarray]
    drop: str | None = None


@dataclass
class Outcome:
    result: dict
    outputs: list[dict[str, np.ndarray]]   # per call: output name (plain: "plain<i>") -> value after the call
    final: dict[int, list[np.ndarray]]     # per plain call: its results as they were after the last call
    final_bound: dict[str, dict[str, np.ndarray]]   # per binding alive at the end: its outputs then
    logs: list[str]                        # per call: stderr between its markers ("" for drops)
    stderr: str
    errors: dict[int, str]                 # per binding call that raised: its message


def memory_for(version: str) -> str:
    """Where the bound values live for a capture on this host: host memory needs onnxruntime 1.30 (API 30,
    OrtApi::KernelContext_GetPreallocatedOutput); older hosts capture only in the software adapter's device
    memory (EPABI_SOFTWARE_DEVICE_MEMORY=device), which graphs hold."""
    return "host" if tuple(int(p) for p in version.split(".")[:2]) >= (1, 30) else "device"


class Plan:
    """Bindings (initial inputs, output shapes) and the calls to make, turned into files for the script.
    ``memory``: "host" (CPU OrtValues) or "device" (the software adapter's own memory, EPABI_SOFTWARE_DEVICE_MEMORY
    =device, values made with ortvalue_from_numpy(..., "cuda", 0))."""

    def __init__(self, options: dict[str, str], memory: str = "host", cpu_arena: bool = True) -> None:
        self.options = options
        self.memory = memory
        self.cpu_arena = cpu_arena
        self.bindings: dict[str, tuple[dict[str, np.ndarray], dict[str, list[int]]]] = {}
        self.calls: list[Call] = []

    def bind(self, name: str, inputs: dict[str, np.ndarray], outputs: dict[str, list[int]]) -> None:
        self.bindings[name] = (inputs, outputs)

    def call(self, binding: str, gid: int, **update: np.ndarray) -> int:
        self.calls.append(Call(binding, gid, update))
        return len(self.calls) - 1

    def plain(self, gid: int, **feeds: np.ndarray) -> int:
        """A plain ``run(None, feeds)`` with annotation id gid."""
        self.calls.append(Call(None, gid, feeds))
        return len(self.calls) - 1

    def drop(self, binding: str) -> None:
        """Deletes a binding and its values (ORT frees them) before the next call."""
        self.calls.append(Call(None, 0, {}, drop=binding))

    def inputs_at(self, k: int) -> dict[str, np.ndarray]:
        """The inputs call k saw: the binding's initial inputs with every update up to call k applied."""
        binding = self.calls[k].binding
        if binding is None:
            return dict(self.calls[k].update)
        inputs = dict(self.bindings[binding][0])
        for call in self.calls[:k + 1]:
            if call.binding == binding:
                inputs.update(call.update)
        return inputs

    def spec(self, tmp: Path) -> dict:
        files = itertools.count()

        def npy(value: np.ndarray) -> str:
            path = tmp / f"in{next(files)}.npy"
            np.save(path, value)
            return str(path)

        def one(c: Call) -> dict:
            if c.drop is not None:
                return {"drop": c.drop}
            if c.binding is None:
                return {"plain": {k: npy(v) for k, v in c.update.items()}, "id": c.id}
            return {"binding": c.binding, "id": c.id, "update": {k: npy(v) for k, v in c.update.items()}}

        return {
            "options": self.options,
            "device": self.memory == "device",
            "cpu_arena": self.cpu_arena,
            "bindings": {name: {"inputs": {k: npy(v) for k, v in ins.items()}, "outputs": outs}
                         for name, (ins, outs) in self.bindings.items()},
            "calls": [one(c) for c in self.calls],
        }

    def run_raw(self, version: str, library: str, model: Path, tmp: Path,
                env: dict[str, str] | None = None) -> tuple[dict, str]:
        """Runs the script; returns its result and stderr (a session that failed to build: ``session_error``)."""
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "spec.json").write_text(json.dumps(self.spec(tmp)))
        memory = {"EPABI_SOFTWARE_DEVICE_MEMORY": "device"} if self.memory == "device" else {}
        result, _, err = run_json(version, CAPTURE_SCRIPT, {**SOFTWARE, **memory, **(env or {})},
                                  [library, str(model), str(tmp / "spec.json"), str(tmp)], timeout=300)
        assert result["ort_version"] == version
        return result, err

    def run(self, version: str, library: str, model: Path, tmp: Path, env: dict[str, str] | None = None,
            expect_errors: bool = False) -> Outcome:
        """Runs the plan; a call that raises fails the test unless ``expect_errors`` (then see Outcome.errors)."""
        result, err = self.run_raw(version, library, model, tmp, env)
        return self.outcome(result, err, tmp, expect_errors)

    def run_on_gpu(self, library: str, model: Path, tmp: Path, expect_errors: bool = False) -> Outcome:
        """The plan under this interpreter's own onnxruntime on our GPU EP device (real_ort.run_json_on_gpu: no
        software adapter); skips when ORT lists no GPU EP device of ours."""
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "spec.json").write_text(json.dumps(self.spec(tmp)))
        result, err = run_json_on_gpu(CAPTURE_SCRIPT, [library, str(model), str(tmp / "spec.json"), str(tmp)])
        return self.outcome(result, err, tmp, expect_errors)

    def outcome(self, result: dict, err: str, tmp: Path, expect_errors: bool) -> Outcome:
        assert "session_error" not in result, result["session_error"]
        assert result["providers"][0] == EP_NAME, f"silent CPU fallback: {result['providers']}"
        counts = {int(k): n for k, n in result["plain_counts"].items()}
        outputs: list[dict[str, np.ndarray]] = []
        final: dict[int, list[np.ndarray]] = {}
        logs = []
        for k, c in enumerate(self.calls):
            if c.drop is not None:
                outputs.append({})
                logs.append("")
                continue
            if c.binding is None:
                outputs.append({f"plain{i}": np.load(tmp / f"call{k}_plain{i}.npy") for i in range(counts[k])})
                final[k] = [np.load(tmp / f"final{k}_plain{i}.npy") for i in range(counts[k])]
            else:
                outputs.append({name: np.load(tmp / f"call{k}_{name}.npy") for name in self.bindings[c.binding][1]})
            match = re.search(rf"^EPABI-CALL {k}$(.*?)^EPABI-CALL-END {k}$", err, re.S | re.M)
            assert match, f"no log markers for call {k} in stderr:\n{err[-4000:]}"
            logs.append(match.group(1))
        alive = {c.binding for c in self.calls if c.binding is not None} - {c.drop for c in self.calls}
        final_bound = {b: {name: np.load(tmp / f"final_{b}_{name}.npy") for name in self.bindings[b][1]}
                       for b in alive}
        errors = {int(k): m for k, m in result["errors"].items()}
        assert expect_errors or not errors, f"calls failed: {errors}"
        return Outcome(result, outputs, final, final_bound, logs, err, errors)


def count(log: str, phrase: str) -> int:
    return sum(phrase in line for line in log.splitlines())


def replays(log: str, gid: int) -> list[int]:
    """The replay numbers n of the "ReplayGraph replayed annotation id <gid> (replay <n> ...)" lines in log."""
    return [int(n) for n in re.findall(rf"ReplayGraph replayed annotation id {gid} \(replay (\d+) ", log)]


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def claimed(err: str) -> tuple[int, int, int]:
    """(claimed, total, fused groups) from our GetCapability summary (INFO)."""
    match = re.search(rf"{EP_NAME}: claimed (\d+) of (\d+) nodes in (\d+) fused group", err)
    assert match, f"no GetCapability summary in stderr:\n{err[-4000:]}"
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def assert_claimed_all(err: str) -> None:
    """Every node of the graph ORT partitions (after its default optimizations) is ours, in one group."""
    mine, total, groups = claimed(err)
    assert mine == total and groups == 1, (mine, total, groups)


# -- tests -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", CAPTURE_HOSTS)
def test_one_id_captures_then_replays_with_update_inplace(version: str, library_path: str, chain_file: Path,
                                                          tmp_path: Path) -> None:
    """Call 1 captures (after ORT's 2 warm-up runs inside it) and is correct; calls 2..6 are ReplayGraph
    replays, one each, whose outputs follow the inputs changed with update_inplace."""
    plan = Plan(CAPTURE, memory_for(version))
    plan.bind("b", {"x": rand(2, 4)}, {"y": [2, 8]})
    plan.call("b", 1)
    later = [plan.call("b", 1, x=rand(2, 4)) for _ in range(5)]
    out = plan.run(version, library_path, chain_file, tmp_path)
    assert_claimed_all(out.stderr)

    for k in range(len(plan.calls)):
        np.testing.assert_allclose(out.outputs[k]["y"], chain_ref(plan.inputs_at(k)["x"]), rtol=0, atol=ATOL,
                                   err_msg=f"call {k}")
    # the updates changed the outputs (a stale replay could not pass the check above)
    assert not np.allclose(out.outputs[0]["y"], out.outputs[1]["y"])

    first = out.logs[0]
    assert count(first, ANOTHER_RUN) == 2, first
    assert count(first, "capturing graph of annotation id 1 on this thread after 2 regular run(s)") == 1, first
    assert count(first, "captured graph of annotation id 1: ") == 1, first
    assert count(first, "replayed annotation id 1 once right after capture") == 0, first  # executed while recording
    assert replays(first, 1) == [] and count(first, ALLOC_WARNING) == 0, first
    # every later call is exactly one ReplayGraph, numbered from 1 (no replay right after capture)
    assert [replays(out.logs[k], 1) for k in later] == [[1 + i] for i in range(len(later))], out.stderr[-4000:]
    assert sum(len(replays(out.logs[k], 1)) for k in later) == len(later)
    for k in later:
        assert count(out.logs[k], "capturing graph") == 0 and count(out.logs[k], ANOTHER_RUN) == 0, out.logs[k]


@pytest.mark.parametrize("version", CAPTURE_HOSTS)
def test_two_ids_with_different_shapes_and_id_minus_one(version: str, library_path: str, matmul_file: Path,
                                                        tmp_path: Path) -> None:
    """Id 1 ([2,3]@[3,4]) and id 2 ([4,5]@[5,6]) of one session with symbolic dims each capture once and
    replay with new data; id -1 ([3,2]@[2,5]) runs normally every time and never captures or replays."""
    plan = Plan(CAPTURE, memory_for(version))
    shapes = {1: ((2, 3), (3, 4)), 2: ((4, 5), (5, 6)), -1: ((3, 2), (2, 5))}
    for gid, (a, b) in shapes.items():
        plan.bind(f"id{gid}", {"A": rand(*a), "B": rand(*b)}, {"C": [a[0], b[1]]})
    calls: dict[int, list[int]] = {gid: [] for gid in shapes}
    for rnd in range(4):
        for gid, (a, b) in shapes.items():
            update = {} if rnd == 0 else {"A": rand(*a), "B": rand(*b)}
            calls[gid].append(plan.call(f"id{gid}", gid, **update))
    out = plan.run(version, library_path, matmul_file, tmp_path)
    assert_claimed_all(out.stderr)

    for k in range(len(plan.calls)):
        ins = plan.inputs_at(k)
        np.testing.assert_allclose(out.outputs[k]["C"], ins["A"] @ ins["B"], rtol=0, atol=ATOL, err_msg=f"call {k}")
    for gid in (1, 2):
        first, *later = calls[gid]
        assert count(out.logs[first], f"capturing graph of annotation id {gid} on this thread after 2 ") == 1
        assert count(out.logs[first], ANOTHER_RUN) == 2
        assert [replays(out.logs[k], gid) for k in later] == [[1], [2], [3]]
        assert count(out.stderr, f"capturing graph of annotation id {gid} ") == 1
    # id -1: one plain run per call; nothing captured or replayed, not even by ORT's warm-up loop
    for k in calls[-1]:
        assert count(out.logs[k], ANOTHER_RUN) == 0, out.logs[k]
        assert count(out.logs[k], "ReplayGraph") == 0 and count(out.logs[k], "Replaying") == 0, out.logs[k]
    assert count(out.stderr, "annotation id -1") == 0
    assert len(replays(out.stderr, 1)) == len(replays(out.stderr, 2)) == 3


@pytest.mark.parametrize("min_runs", [0, 2])
@pytest.mark.parametrize("version", CAPTURE_HOSTS)
def test_allocation_during_capture_warning(version: str, min_runs: int, library_path: str, chain_file: Path,
                                           tmp_path: Path) -> None:
    """min_num_runs_before_cuda_graph_capture=0: the first run of a fresh process captures while the arena
    still grows, and the detector warns (naming the option); with 2 warm-up runs it does not."""
    plan = Plan({**CAPTURE, "min_num_runs_before_cuda_graph_capture": str(min_runs)}, memory_for(version))
    plan.bind("b", {"x": rand(3, 4)}, {"y": [3, 8]})
    plan.call("b", 5)
    plan.call("b", 5, x=rand(3, 4))
    out = plan.run(version, library_path, chain_file, tmp_path)
    for k in range(2):
        np.testing.assert_allclose(out.outputs[k]["y"], chain_ref(plan.inputs_at(k)["x"]), rtol=0, atol=ATOL)
    first = out.logs[0]
    assert count(first, ANOTHER_RUN) == min_runs, first
    assert count(first, f"capturing graph of annotation id 5 on this thread after {min_runs} regular run(s)") == 1
    assert replays(out.logs[1], 5) == [1]
    warnings = [line for line in out.stderr.splitlines() if ALLOC_WARNING in line]
    if min_runs == 0:
        assert len(warnings) == 1, out.stderr[-4000:]
        assert "[W:" in warnings[0] and "annotation id 5" in warnings[0]
        assert "min_num_runs_before_cuda_graph_capture (now 0)" in warnings[0]
    else:
        assert warnings == []


# -- replays never touch freed memory ------------------------------------------------------------------------

#: (host, memory) for the safety tests: host memory from 1.30 on, device memory on every capture host.
SAFETY_CASES = [(NEWEST, "host"), ("1.26.0", "device"), (NEWEST, "device")]


@pytest.mark.parametrize(("version", "memory"), SAFETY_CASES)
def test_plain_runs_between_replays_keep_their_results(version: str, memory: str, library_path: str,
                                                       add_file: Path, tmp_path: Path) -> None:
    """Id 0 is captured from a plain run() whose feeds are dropped right after; then, five times, a
    gpu_graph_id=-1 plain run, a replay of id 0 (a plain run: ORT returns nothing) and a call of id 1 on a binding
    made after the capture (so, if the capture's buffers had gone back to an allocator, its buffers could be
    them). Every result stays what it was when its call returned, up to the end: no replay writes into a buffer
    ORT freed (host memory: the capture keeps ORT's output buffers and the feeds in its own memory; device memory:
    the graph holds the blocks of our allocator that ORT frees after the capturing call). Under the ASan job
    (EPABI_REAL_ORT_SANITIZER) a write into freed memory also fails the run."""
    plan = Plan(CAPTURE, memory, cpu_arena=False)  # ORT's CPU buffers then come from malloc: ASan sees frees
    plan.bind("late", {"x": rand(*ADD_SHAPE), "y": rand(*ADD_SHAPE)}, {"z": list(ADD_SHAPE)})
    first = plan.plain(0, x=rand(*ADD_SHAPE), y=rand(*ADD_SHAPE))
    minus, again, late = [], [], []
    for _ in range(5):
        minus.append(plan.plain(-1, x=rand(*ADD_SHAPE), y=rand(*ADD_SHAPE)))
        again.append(plan.plain(0, x=rand(*ADD_SHAPE), y=rand(*ADD_SHAPE)))
        late.append(plan.call("late", 1, x=rand(*ADD_SHAPE)))
    out = plan.run(version, library_path, add_file, tmp_path)
    assert_claimed_all(out.stderr)

    def want(k: int) -> np.ndarray:
        ins = plan.inputs_at(k)
        return ins["x"] + ins["y"]

    for k in [first, *minus]:
        np.testing.assert_allclose(out.outputs[k]["plain0"], want(k), rtol=0, atol=ATOL, err_msg=f"call {k}")
        np.testing.assert_allclose(out.final[k][0], want(k), rtol=0, atol=ATOL, err_msg=f"call {k}, at the end")
    assert all(out.outputs[k] == {} for k in again)  # replays hand a plain run() nothing
    for k in late:
        np.testing.assert_allclose(out.outputs[k]["z"], want(k), rtol=0, atol=ATOL, err_msg=f"call {k}")
    np.testing.assert_allclose(out.final_bound["late"]["z"], want(late[-1]), rtol=0, atol=ATOL)
    assert count(out.logs[first], "capturing graph of annotation id 0 on this thread after 2 regular run(s)") == 1
    # the software adapter does not replay right after the capture: ReplayGraph's replays count from 1
    assert [replays(out.logs[k], 0) for k in again] == [[1 + i] for i in range(len(again))]
    assert count(out.stderr, "capturing graph of annotation id -1") == 0


@pytest.mark.parametrize("version", CAPTURE_HOSTS)
def test_freed_device_buffers_stay_held_by_their_graph(version: str, library_path: str, add_file: Path,
                                                       tmp_path: Path) -> None:
    """Rebinding in device memory: id 3 is captured on binding "a", which is then deleted (ORT frees its values
    through our allocator); binding "b", made afterwards, captures id 4 and runs id -1. A replay of id 3 called
    with b (ORT hands a replay no bindings) still writes a's addresses, which the graph holds, so b's outputs keep
    the NaN the script wrote before the call, and b's own id 4 replays stay correct."""
    plan = Plan(CAPTURE, "device")
    plan.bind("a", {"x": rand(*ADD_SHAPE), "y": rand(*ADD_SHAPE)}, {"z": list(ADD_SHAPE)})
    plan.bind("b", {"x": rand(*ADD_SHAPE), "y": rand(*ADD_SHAPE)}, {"z": list(ADD_SHAPE)})
    a_calls = [plan.call("a", 3), plan.call("a", 3, x=rand(*ADD_SHAPE))]
    plan.drop("a")
    b_calls = [plan.call("b", 4), plan.call("b", -1, x=rand(*ADD_SHAPE))]
    stale = plan.call("b", 3, x=rand(*ADD_SHAPE))
    b_calls.append(plan.call("b", 4, y=rand(*ADD_SHAPE)))
    out = plan.run(version, library_path, add_file, tmp_path)
    for k in a_calls + b_calls:
        ins = plan.inputs_at(k)
        np.testing.assert_allclose(out.outputs[k]["z"], ins["x"] + ins["y"], rtol=0, atol=ATOL, err_msg=f"call {k}")
    assert np.isnan(out.outputs[stale]["z"]).all()  # the replay of id 3 wrote only a's (held) buffers
    assert replays(out.logs[stale], 3) == [2]
    last = plan.inputs_at(b_calls[-1])
    np.testing.assert_allclose(out.final_bound["b"]["z"], last["x"] + last["y"], rtol=0, atol=ATOL)


def test_host_memory_capture_is_refused_before_1_30(library_path: str, add_file: Path, tmp_path: Path) -> None:
    """onnxruntime 1.26.0 (API 26) has no KernelContext_GetPreallocatedOutput: in host memory the session is
    refused at CreateEp, naming why and the remedies."""
    plan = Plan(CAPTURE, "host")
    plan.plain(0, x=rand(*ADD_SHAPE), y=rand(*ADD_SHAPE))
    result, _ = plan.run_raw("1.26.0", library_path, add_file, tmp_path)
    message = result.get("session_error", "")
    assert "KernelContext_GetPreallocatedOutput" in message and "speaks API 26" in message, result
    assert "EPABI_SOFTWARE_DEVICE_MEMORY=device" in message and "IOBinding" in message


# -- errors found during a replay ---------------------------------------------------------------------------

@pytest.mark.parametrize(("version", "memory"), SAFETY_CASES)
def test_errors_found_in_a_replay_fail_that_run(version: str, memory: str, library_path: str, checked_file: Path,
                                                tmp_path: Path) -> None:
    """A replay runs no host code that could look at the data, so the kernels check it themselves: an
    out-of-range Gather index or an integer division by zero bound in place before a replay fails that run with
    ORT_INVALID_ARGUMENT naming the node (never zero-filled output; ORT's run_with_iobinding raises it as
    RuntimeError), and the next replay with good data is correct again."""
    good = {"idx": np.array([3, 0], np.int64), "a": np.array([7, -9, 4], np.int32), "b": np.array([2, 4, -3], np.int32)}
    plan = Plan(CAPTURE, memory)
    plan.bind("b", good, {"y": [2, 3], "q": [3]})
    calls = [plan.call("b", 1), plan.call("b", 1, idx=np.array([1, 2], np.int64))]
    bad_index = plan.call("b", 1, idx=np.array([1, 4], np.int64))
    calls.append(plan.call("b", 1, idx=np.array([-1, 2], np.int64)))
    bad_divisor = plan.call("b", 1, b=np.array([2, 0, 1], np.int32))
    calls.append(plan.call("b", 1, b=np.array([5, 3, 1], np.int32)))
    out = plan.run(version, library_path, checked_file, tmp_path, expect_errors=True)
    assert sorted(out.errors) == [bad_index, bad_divisor], out.errors
    assert "node 'gather' (Gather)" in out.errors[bad_index] and "index is out of range" in out.errors[bad_index]
    assert "node 'div' (Div)" in out.errors[bad_divisor] and "integer division by zero" in out.errors[bad_divisor]
    for k in (bad_index, bad_divisor):  # run_with_iobinding raises RuntimeError("Error in execution: ...") for any code
        assert "replaying a captured graph" in out.errors[k], out.errors[k]
    for k in calls:
        want = checked_ref(**plan.inputs_at(k))
        for name in ("y", "q"):
            np.testing.assert_array_equal(out.outputs[k][name], want[name], err_msg=f"call {k}, {name}")
    # the failing calls were replays too (ORT's own line), whose ReplayGraph failed before its success line
    assert [len(replays(out.logs[k], 1)) for k in range(len(plan.calls))] == [0, 1, 0, 1, 0, 1]
    for k in (bad_index, bad_divisor):
        assert count(out.logs[k], "Replaying the captured") == 1 and count(out.logs[k], "capturing graph") == 0


# -- call order through a tracing shim -------------------------------------------------------------------

# A plugin library that loads the real one (EPABI_TRACE_REAL), hands its factories to ORT and, in every OrtEp
# and OrtNodeComputeInfo it creates, wraps the members ORT drives the capture loop with: one stderr line each.
TRACE_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "epabi/ort_abi.h"

#define EXPORT __attribute__((visibility("default")))
static OrtStatus* (*real_create)(const char*, const OrtApiBase*, const OrtLogger*, OrtEpFactory**, size_t, size_t*);
static OrtStatus* (*real_release)(OrtEpFactory*);
static struct OrtEpFactory real_factory;   /* the real members (the plugin's are the same for every instance) */
static struct OrtEp real_ep;
static struct OrtNodeComputeInfo real_info;

static void trace(const char* fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nEPABI-TRACE %s\n", line);
    fflush(stderr);
}
static OrtStatus* on_run_start(OrtEp* ep, const OrtRunOptions* ro) {
    OrtStatus* st = real_ep.OnRunStart(ep, ro);
    trace("OnRunStart%s", st ? " failed" : "");
    return st;
}
static OrtStatus* on_run_end(OrtEp* ep, const OrtRunOptions* ro, bool sync_stream) {
    OrtStatus* st = real_ep.OnRunEnd(ep, ro, sync_stream);
    trace("OnRunEnd sync_stream=%d%s", (int)sync_stream, st ? " failed" : "");
    return st;
}
static OrtStatus* sync_ep(OrtEp* ep) {
    OrtStatus* st = real_ep.Sync(ep);
    trace("Sync%s", st ? " failed" : "");
    return st;
}
static bool is_captured(const OrtEp* ep, int id) {
    bool r = real_ep.IsGraphCaptured(ep, id);
    trace("IsGraphCaptured %d -> %d", id, (int)r);
    return r;
}
static OrtStatus* replay(OrtEp* ep, int id) {
    OrtStatus* st = real_ep.ReplayGraph(ep, id);
    trace("ReplayGraph %d%s", id, st ? " failed" : "");
    return st;
}
static OrtStatus* compute(OrtNodeComputeInfo* info, void* state, OrtKernelContext* ctx) {
    OrtStatus* st = real_info.Compute(info, state, ctx);
    trace("Compute%s", st ? " failed" : "");
    return st;
}
static OrtStatus* compile(OrtEp* ep, const OrtGraph** graphs, const OrtNode** fused, size_t count,
                          OrtNodeComputeInfo** infos, OrtNode** ep_context_nodes) {
    OrtStatus* st = real_ep.Compile(ep, graphs, fused, count, infos, ep_context_nodes);
    for (size_t i = 0; st == NULL && i < count; ++i) {
        if (real_info.Compute == NULL) real_info = *infos[i];
        infos[i]->Compute = compute;
    }
    return st;
}
static OrtStatus* create_ep(OrtEpFactory* f, const OrtHardwareDevice* const* devices,
                            const OrtKeyValuePairs* const* metadata, size_t n, const OrtSessionOptions* so,
                            const OrtLogger* logger, OrtEp** out) {
    OrtStatus* st = real_factory.CreateEp(f, devices, metadata, n, so, logger, out);
    if (st != NULL || *out == NULL) return st;
    OrtEp* ep = *out;
    if (real_ep.Compile == NULL) real_ep = *ep;
    ep->Compile = compile;
    if (ep->OnRunStart) ep->OnRunStart = on_run_start;
    if (ep->OnRunEnd) ep->OnRunEnd = on_run_end;
    if (ep->Sync) ep->Sync = sync_ep;
    if (ep->IsGraphCaptured) ep->IsGraphCaptured = is_captured;
    if (ep->ReplayGraph) ep->ReplayGraph = replay;
    trace("CreateEp Sync=%d ReplayGraph=%d", ep->Sync != NULL, ep->ReplayGraph != NULL);
    return NULL;
}
EXPORT OrtStatus* CreateEpFactories(const char* name, const OrtApiBase* base, const OrtLogger* logger,
                                    OrtEpFactory** factories, size_t max, size_t* num) {
    if (real_create == NULL) {
        void* lib = dlopen(getenv("EPABI_TRACE_REAL"), RTLD_NOW | RTLD_LOCAL);
        if (lib == NULL) { fprintf(stderr, "trace shim: %s\n", dlerror()); abort(); }
        *(void**)&real_create = dlsym(lib, "CreateEpFactories");
        *(void**)&real_release = dlsym(lib, "ReleaseEpFactory");
    }
    OrtStatus* st = real_create(name, base, logger, factories, max, num);
    for (size_t i = 0; st == NULL && i < *num; ++i) {
        if (real_factory.CreateEp == NULL) real_factory = *factories[i];
        factories[i]->CreateEp = create_ep;
    }
    return st;
}
EXPORT OrtStatus* ReleaseEpFactory(OrtEpFactory* f) { return real_release(f); }
"""


@pytest.fixture(scope="module")
def trace_shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc/gcc/clang) to build the tracing shim")
    out = tmp_path_factory.mktemp("trace_shim")
    (out / "trace_shim.c").write_text(TRACE_SHIM)
    lib = out / "libepabi_trace_shim.so"
    p = subprocess.run([cc, "-std=c11", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror",
                        f"-I{header_path().parent.parent}", str(out / "trace_shim.c"), "-o", str(lib), "-ldl"],
                       capture_output=True, text=True)
    assert p.returncode == 0, f"the tracing shim does not build:\n{p.stderr}"
    return lib


def trace_of(log: str) -> list[str]:
    return [line[len("EPABI-TRACE "):] for line in log.splitlines() if line.startswith("EPABI-TRACE ")]


def regular_run(captured_after: bool, gid: int = 1) -> list[str]:
    return [f"IsGraphCaptured {gid} -> 0", "OnRunStart", "Compute", "OnRunEnd sync_stream=1",
            f"IsGraphCaptured {gid} -> {int(captured_after)}"]


#: What each host calls for a call whose graph is captured (observed): 1.26.0 calls no Sync after ReplayGraph.
REPLAY_CALL = {
    "1.26.0": ["IsGraphCaptured 1 -> 1", "ReplayGraph 1", "IsGraphCaptured 1 -> 1"],
    "1.32.0": ["IsGraphCaptured 1 -> 1", "ReplayGraph 1", "Sync", "IsGraphCaptured 1 -> 1"],
}


@pytest.mark.parametrize("version", CAPTURE_HOSTS)
def test_call_order(version: str, library_path: str, trace_shim: Path, matmul_file: Path, tmp_path: Path) -> None:
    """The OrtEp calls real ORT makes per run_with_iobinding call, recorded by the shim (see the module doc)."""
    plan = Plan(CAPTURE, memory_for(version))
    plan.bind("b", {"A": rand(2, 3), "B": rand(3, 4)}, {"C": [2, 4]})
    plan.bind("skip", {"A": rand(2, 3), "B": rand(3, 4)}, {"C": [2, 4]})
    plan.call("b", 1)
    plan.call("b", 1, A=rand(2, 3))
    plan.call("b", 1, B=rand(3, 4))
    plan.call("skip", -1)
    out = plan.run(version, str(trace_shim), matmul_file, tmp_path, {"EPABI_TRACE_REAL": library_path})
    for k in range(len(plan.calls)):
        ins = plan.inputs_at(k)
        np.testing.assert_allclose(out.outputs[k]["C"], ins["A"] @ ins["B"], rtol=0, atol=ATOL)
    # our EP offers Sync and ReplayGraph to both hosts (API 26 and 30 negotiated)
    assert "CreateEp Sync=1 ReplayGraph=1" in trace_of(out.stderr)
    calls = [trace_of(log) for log in out.logs]
    assert calls[0] == regular_run(False) + regular_run(False) + regular_run(True), calls[0]
    assert calls[1] == calls[2] == REPLAY_CALL[version], calls[1:3]
    # id -1: one plain run; ORT asks once before it, not after it (no warm-up loop for -1)
    assert calls[3] == ["IsGraphCaptured -1 -> 0", "OnRunStart", "Compute", "OnRunEnd sync_stream=1"], calls[3]
    assert count(out.stderr, "replayed annotation id 1 once right after capture") == 0  # executed while recording
    assert replays(out.stderr, 1) == [1, 2]


# -- a real model ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", CAPTURE_HOSTS)
def test_magika_captures_and_replays(version: str, library_path: str, tmp_path: Path) -> None:
    """magika's standard_v3_3 (94 nodes after ORT's default optimizations: Conv, LayerNormalization, shape
    chains) captured and replayed on real files; replays of other batches written into the bound input match the
    in-process onnxruntime's CPU EP. Skipped if our EP does not claim the whole model in one group."""
    ort = pytest.importorskip("onnxruntime")
    cpu = ort.InferenceSession(str(magika_path()), providers=["CPUExecutionProvider"])
    first = batch()
    second = np.ascontiguousarray(first[::-1])   # other rows in the same buffer shape
    second[0, :16] = np.arange(16, dtype=np.int32)
    plan = Plan(CAPTURE, memory_for(version))
    plan.bind("b", {"bytes": first}, {cpu.get_outputs()[0].name: [len(first), 214]})
    plan.call("b", 1)
    plan.call("b", 1, bytes=second)
    plan.call("b", 1, bytes=first)
    out = plan.run(version, library_path, magika_path(), tmp_path)
    mine, total, groups = claimed(out.stderr)
    if mine != total or groups != 1:
        pytest.skip(f"magika is not fully claimed in one group under {version}: {mine} of {total}, {groups} group(s)")
    name = cpu.get_outputs()[0].name
    for k, feed in enumerate([first, second, first]):
        (expected,) = cpu.run(None, {"bytes": feed})
        np.testing.assert_allclose(out.outputs[k][name], expected, rtol=0, atol=1e-4, err_msg=f"call {k}")
    assert not np.allclose(out.outputs[0][name], out.outputs[1][name])
    assert count(out.logs[0], "capturing graph of annotation id 1 on this thread after 2 regular run(s)") == 1
    assert [replays(out.logs[k], 1) for k in (1, 2)] == [[1], [2]]
    assert count(out.stderr, ALLOC_WARNING) == 0
