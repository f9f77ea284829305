"""Real models on the software adapter under real onnxruntime wheels (MIN and NEWEST, see ``real_ort.py``).

Models: magika's standard_v3_3 (``magika_model.py``: real files as input) and epabi's built-in MLP
(4 x (MatMul, Add, Relu), width 32, batch 2). Each runs in the venv of an onnxruntime release with our
software-adapter device chosen by ``add_provider_for_devices`` and ``enable_fallback=0``, both with ORT's
default graph optimizations and with ``ORT_DISABLE_ALL``. The venvs hold only onnxruntime (and its numpy), so
models travel as files, inputs and outputs as .npy files.

Observed with onnxruntime 1.24.4 and 1.32.0 (CPU-only Linux):

* Every node is on our EP, in one fused group: ORT moves no shape computation to its CPU EP (magika's
  Shape/Slice/Concat/Expand chain stays with us) and its layout optimizer leaves magika's Conv alone, since we
  claim it (NCHW) before any CPU-EP-specific rewrite could apply.
* ORT_DISABLE_ALL: the graph ORT partitions is the model's own (magika: 95 nodes, MLP: 11 nodes).
* Default optimizations: ORT's level-1 MatMulAddFusion, which runs before partitioning and for every EP, turns
  each MatMul + Add with a 2-D input into one Gemm node ("<MatMul name>/MatMulAddFusion"). magika: its final
  Dense layer (94 nodes, one Gemm); MLP: 4 Gemm + 3 Relu. Nothing else changes (Gemm + Relu fusion and
  NCHWc are CPU-EP-only transformations).
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

import epabi
from epabi.models import mlp, sample_inputs
from magika_model import batch
from magika_model import model_path as magika_path
from real_ort import MIN, NEWEST, run_json

pytestmark = pytest.mark.real_ort

EP_NAME = "EpAbiExecutionProvider"
HOSTS = [MIN, NEWEST]
LEVELS = ["default", "disable_all"]
SOFTWARE = {"EPABI_ALLOW_SOFTWARE_ADAPTER": "1"}

# Runs a model file on our software-adapter device; argv: library, model, optimization level, output folder,
# then NAME=FILE.npy per input. Writes output i to <folder>/out<i>.npy and reports placement.
RUN_MODEL_SCRIPT = """
import gc
import os

import numpy as np

lib, model_path, level, out_dir, *inputs = sys.argv[1:]
ort.register_execution_provider_library("epabi", lib)
ours = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
kinds = [d.ep_metadata.get("device_kind") for d in ours]
so = ort.SessionOptions()
so.log_severity_level = 1  # INFO: our GetCapability summary goes to stderr
so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
if level == "disable_all":
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
so.add_provider_for_devices(ours, {})
sess = ort.InferenceSession(model_path, sess_options=so, enable_fallback=0)
providers = sess.get_providers()
placement = [{"ep": sub.ep_name, "name": node.name, "op_type": node.op_type, "domain": node.domain}
             for sub in sess.get_provider_graph_assignment_info() for node in sub.get_nodes()]
feeds = {name: np.load(path) for name, path in (arg.split("=", 1) for arg in inputs)}
first = sess.run(None, feeds)
second = sess.run(None, feeds)
repeatable = all(np.array_equal(a, b) for a, b in zip(first, second))
for i, value in enumerate(first):
    np.save(os.path.join(out_dir, f"out{i}.npy"), value)
output_names = [o.name for o in sess.get_outputs()]
del sess, so, ours  # nothing of the session may outlive the library (REAL_HOST_NOTES trap 2)
gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(ort_version=ort.__version__, kinds=kinds, providers=providers, placement=placement,
     output_names=output_names, repeatable=repeatable)
"""


def run_on_real_ort(version: str, library_path: str, model: Path, feeds: dict[str, np.ndarray], level: str,
                    tmp: Path) -> tuple[dict, list[np.ndarray], str]:
    """Runs ``model`` on our EP in onnxruntime ``version``; returns (result, outputs, stderr)."""
    tmp.mkdir(parents=True, exist_ok=True)
    args = [library_path, str(model), level, str(tmp)]
    for name, value in feeds.items():
        path = tmp / f"in_{len(args)}.npy"
        np.save(path, value)
        args.append(f"{name}={path}")
    result, _, err = run_json(version, RUN_MODEL_SCRIPT, SOFTWARE, args, timeout=300)
    outputs = [np.load(tmp / f"out{i}.npy") for i in range(len(result["output_names"]))]
    return result, outputs, err


def assert_all_on_our_ep(result: dict, version: str, err: str) -> list[dict]:
    """The session leads with our EP and ORT reports every node of the partitioned graph on it."""
    assert result["ort_version"] == version
    assert result["kinds"] == ["software"]
    assert result["providers"][0] == EP_NAME, f"silent CPU fallback: {result['providers']}"
    placement = result["placement"]
    assert placement, "ORT recorded no graph assignment"
    off_ep = [(n["name"], n["op_type"], n["ep"]) for n in placement if n["ep"] != EP_NAME]
    assert off_ep == [], f"nodes not on our EP: {off_ep}"
    count = len(placement)
    assert f"{EP_NAME}: claimed {count} of {count} nodes in 1 fused group(s)" in err
    assert result["repeatable"], "two runs of the same session gave different outputs"
    return placement


def expected_placement(model: onnx.ModelProto, level: str) -> collections.Counter:
    """(op_type, name) of the nodes ORT partitions: the model's own, or after MatMulAddFusion (default level).

    The fusion is modelled as observed on our two models: a MatMul whose inputs are both 2-D and whose only
    consumer is an Add becomes one Gemm named "<MatMul name>/MatMulAddFusion".
    """
    nodes = collections.Counter((n.op_type, n.name) for n in model.graph.node)
    if level != "default":
        return nodes
    inferred = onnx.shape_inference.infer_shapes(model).graph
    rank = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in [*inferred.value_info, *inferred.input]}
    rank.update({t.name: len(t.dims) for t in model.graph.initializer})
    producers = {out: n for n in model.graph.node for out in n.output}
    consumers = collections.Counter(i for n in model.graph.node for i in n.input)
    for add in (n for n in model.graph.node if n.op_type == "Add"):
        for mm in (producers[i] for i in add.input if i in producers):
            if (mm.op_type == "MatMul" and consumers[mm.output[0]] == 1
                    and rank.get(mm.input[0]) == rank.get(mm.input[1]) == 2):
                nodes -= collections.Counter([("MatMul", mm.name), ("Add", add.name)])
                nodes[("Gemm", f"{mm.name}/MatMulAddFusion")] += 1
                break
    return nodes


def placed(placement: list[dict]) -> collections.Counter:
    return collections.Counter((n["op_type"], n["name"]) for n in placement)


def run_emulated(host: epabi.Host, model: str | onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices())
    with epabi.InferenceSession(model, so) as session:
        off_ep = {n: ep for n, ep in session.node_assignment.items() if ep != EP_NAME}
        assert off_ep == {}, f"emulated host: nodes left to the CPU: {off_ep}"
        return session.run(None, feeds)


# -- magika ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def magika_feeds() -> dict[str, np.ndarray]:
    return {"bytes": batch()}


@pytest.fixture(scope="module")
def magika_cpu(magika_feeds: dict[str, np.ndarray]) -> np.ndarray:
    """magika's scores from the in-process onnxruntime's CPU EP (onnxruntime comes with magika)."""
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(magika_path()), providers=["CPUExecutionProvider"])
    return session.run(None, magika_feeds)[0]


@pytest.fixture
def magika_emulated(host: epabi.Host, magika_feeds: dict[str, np.ndarray]) -> np.ndarray:
    (scores,) = run_emulated(host, str(magika_path()), magika_feeds)
    return scores


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("version", HOSTS)
def test_magika_all_nodes_on_our_ep(version: str, level: str, library_path: str, tmp_path: Path,
                                    magika_feeds: dict[str, np.ndarray], magika_cpu: np.ndarray,
                                    magika_emulated: np.ndarray) -> None:
    result, (scores,), err = run_on_real_ort(version, library_path, magika_path(), magika_feeds, level, tmp_path)
    placement = assert_all_on_our_ep(result, version, err)
    model = onnx.load(str(magika_path()))
    assert placed(placement) == expected_placement(model, level)
    assert len(placement) == {"default": 94, "disable_all": 95}[level]
    assert scores.shape == magika_cpu.shape == (len(magika_feeds["bytes"]), 214)
    assert scores.dtype == np.float32
    np.testing.assert_allclose(scores, magika_cpu, rtol=0, atol=1e-4)
    assert (scores.argmax(1) == magika_cpu.argmax(1)).all()
    # The emulated host runs the same plugin to the same result.
    np.testing.assert_allclose(magika_emulated, scores, rtol=0, atol=1e-5)


# -- built-in MLP ----------------------------------------------------------------------------------------

MLP_SIZES = {"layers": 4, "width": 32, "batch": 2}


@pytest.fixture(scope="module")
def mlp_model() -> onnx.ModelProto:
    model = mlp(**MLP_SIZES)
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="module")
def mlp_file(mlp_model: onnx.ModelProto, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mlp") / "mlp.onnx"
    path.write_bytes(mlp_model.SerializeToString())
    return path


@pytest.fixture(scope="module")
def mlp_feeds(mlp_model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return sample_inputs(mlp_model)


@pytest.fixture(scope="module")
def mlp_reference(mlp_model: onnx.ModelProto, mlp_feeds: dict[str, np.ndarray]) -> np.ndarray:
    return ReferenceEvaluator(mlp_model).run(None, mlp_feeds)[0]


@pytest.fixture
def mlp_emulated(host: epabi.Host, mlp_model: onnx.ModelProto, mlp_feeds: dict[str, np.ndarray]) -> np.ndarray:
    (y,) = run_emulated(host, mlp_model, mlp_feeds)
    return y


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("version", HOSTS)
def test_mlp_all_nodes_on_our_ep(version: str, level: str, library_path: str, tmp_path: Path,
                                 mlp_model: onnx.ModelProto, mlp_file: Path, mlp_feeds: dict[str, np.ndarray],
                                 mlp_reference: np.ndarray, mlp_emulated: np.ndarray) -> None:
    result, (y,), err = run_on_real_ort(version, library_path, mlp_file, mlp_feeds, level, tmp_path)
    placement = assert_all_on_our_ep(result, version, err)
    assert placed(placement) == expected_placement(mlp_model, level)
    layers = MLP_SIZES["layers"]
    ops = collections.Counter(n["op_type"] for n in placement)
    assert ops == ({"Gemm": layers, "Relu": layers - 1} if level == "default"
                   else {"MatMul": layers, "Add": layers, "Relu": layers - 1})
    assert result["output_names"] == ["y"]
    assert y.shape == (MLP_SIZES["batch"], MLP_SIZES["width"]) and y.dtype == np.float32
    np.testing.assert_allclose(y, mlp_reference, rtol=0, atol=1e-5)
    np.testing.assert_allclose(mlp_emulated, y, rtol=0, atol=1e-5)

