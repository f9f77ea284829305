"""The plugin library under real, pip-installed onnxruntime wheels (one cached venv per release).

Every test runs one short script in the venv of an onnxruntime release (see ``real_ort.py``) and checks the
JSON it reports. Releases: MIN (the plugin's MIN_ONNXRUNTIME_VERSION), NEWEST, and TOO_OLD (must be refused).

Observed with onnxruntime 1.24.4 and 1.32.0 on a CPU-only Linux box (see also REAL_HOST_NOTES.md):

* The CPU is the only hardware device ORT discovers, so our EP device is either the software adapter (on the
  CPU hardware device, with EPABI_ALLOW_SOFTWARE_ADAPTER=1) or the virtual GPU device we create ourselves.
* When our CreateEp fails, 1.24.4 wraps the plugin's status in a generic RuntimeError ("... Error creating
  execution provider: [ONNXRuntimeError] : 2 : INVALID_ARGUMENT : <our message>"), which InferenceSession
  catches: it prints an "EP Error" banner on stdout and silently retries with CPU only (providers ==
  ["CPUExecutionProvider"]). 1.32.0 raises onnxruntime's InvalidArgument instead, which InferenceSession's
  fallback does not catch, so it raises even with the default enable_fallback. With enable_fallback=0 both
  raise with our message. The session config entry session.disable_cpu_ep_fallback=1 does NOT help on
  1.24.4: the CPU-only retry then fails with "Conflicting session configuration: explicitly added the CPU
  EP to the session, but also disabled fallback to the CPU EP ...", which hides our message.
* Hence the session tests create sessions with enable_fallback=0 and assert the real error; the default path
  is checked too, accepting either outcome as long as our message reaches the user and no session runs on
  our EP.
"""

from __future__ import annotations

import importlib.metadata
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import epabi
from real_ort import MIN, NEWEST, TOO_OLD, run_json

pytestmark = pytest.mark.real_ort

EP_NAME = epabi.get_ep_name()
HOSTS = [MIN, NEWEST]
SOFTWARE = {"EPABI_ALLOW_SOFTWARE_ADAPTER": "1"}
NO_SOFTWARE = {"EPABI_ALLOW_SOFTWARE_ADAPTER": None}
SOFTWARE_WARNING = f"{EP_NAME}: no NVIDIA GPU found; offering the CPU software adapter"
VIRTUAL_REFUSAL = (f"{EP_NAME}: the selected EP device is virtual (is_virtual=1): it has no hardware to run on "
                   "and serves only compile-only sessions (session.compile_only=1)")
BAD_OPTION_KEY = "ep.epabiexecutionprovider.min_num_runs_before_cuda_graph_capture"
BAD_OPTION_ERROR = f"{EP_NAME}: option '{BAD_OPTION_KEY}' has value '-1'; expected an integer from 0 to 2147483647"


# -- scripts run inside the onnxruntime venv (after real_ort.PRELUDE) -------------------------------------

LIST_SCRIPT = """
lib, name = sys.argv[1:3]
try:
    ort.register_execution_provider_library(name, lib)
    register_error = None
except Exception as exc:
    register_error = {"type": type(exc).__name__, "message": str(exc)}
emit(ort_version=ort.__version__, register_error=register_error,
     devices=[describe(d) for d in ort.get_ep_devices()])
"""

# try_session(options, **kwargs): builds a session on our EP devices and reports what happened, including
# what InferenceSession printed on stdout (its "EP Error ... Falling back" banner).
TRY_SESSION = """
import contextlib
import gc
import io


def try_session(model, devices, options, **kwargs):
    so = ort.SessionOptions()
    so.add_provider_for_devices(devices, options)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            sess = ort.InferenceSession(model, sess_options=so, **kwargs)
        except Exception as exc:
            return {"raised": True, "type": type(exc).__name__, "message": str(exc), "printed": printed.getvalue()}
    providers = sess.get_providers()
    del sess
    gc.collect()
    return {"raised": False, "providers": providers, "printed": printed.getvalue()}
"""

VIRTUAL_SCRIPT = TRY_SESSION + """
lib, model_path = sys.argv[1:3]
ort.register_execution_provider_library("epabi.virtual", lib)
model = open(model_path, "rb").read()
ours = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
strict = try_session(model, ours, {}, enable_fallback=0)
default = try_session(model, ours, {})
emit(ort_version=ort.__version__, devices=[describe(d) for d in ours], strict=strict, default=default)
"""

COMPILE_SCRIPT = """
import os

lib, model_path, compiled_path = sys.argv[1:4]
ort.register_execution_provider_library("epabi.virtual", lib)
ours = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
so = ort.SessionOptions()
so.add_provider_for_devices(ours, {})
try:
    ort.ModelCompiler(so, open(model_path, "rb").read()).compile_to_file(compiled_path)
    error = None
except Exception as exc:
    error = str(exc)
emit(ort_version=ort.__version__, kinds=[d.ep_metadata.get("device_kind") for d in ours], error=error,
     compiled=os.path.isfile(compiled_path))
"""

BAD_OPTION_SCRIPT = TRY_SESSION + """
lib, model_path = sys.argv[1:3]
ort.register_execution_provider_library("epabi", lib)
model = open(model_path, "rb").read()
ours = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
options = {"min_num_runs_before_cuda_graph_capture": "-1"}
strict = try_session(model, ours, options, enable_fallback=0)
default = try_session(model, ours, options)
emit(ort_version=ort.__version__, kinds=[d.ep_metadata.get("device_kind") for d in ours], strict=strict,
     default=default)
"""

RUN_SCRIPT = """
import gc

import numpy as np

lib, model_path, feeds_json = sys.argv[1:4]
ort.register_execution_provider_library("epabi", lib)
ours = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
kinds = [d.ep_metadata.get("device_kind") for d in ours]
so = ort.SessionOptions()
so.log_severity_level = 1  # INFO: ORT's log then shows our GetCapability message on stderr
so.add_provider_for_devices(ours, {})
sess = ort.InferenceSession(open(model_path, "rb").read(), sess_options=so, enable_fallback=0)
feeds = {k: np.asarray(v, dtype=np.float32) for k, v in json.loads(feeds_json).items()}
outputs = [sess.run(None, feeds)[0] for _ in range(2)]
providers = sess.get_providers()
# Nothing of the session may outlive the library (REAL_HOST_NOTES trap 2), and the OrtEpDevice wrappers
# point into it: reading one after unregistering reads freed memory.
del sess, so, ours
gc.collect()
ort.unregister_execution_provider_library("epabi")
emit(ort_version=ort.__version__, kinds=kinds, providers=providers,
     outputs=[o.tolist() for o in outputs], dtypes=[str(o.dtype) for o in outputs],
     left=[d.ep_name for d in ort.get_ep_devices()])
"""

UNREGISTER_SCRIPT = """
lib = sys.argv[1]


def ours():
    return sum(d.ep_name == EP_NAME for d in ort.get_ep_devices())


def error_of(call, *args):
    try:
        call(*args)
    except Exception as exc:
        return str(exc)
    return None


steps = {}
ort.register_execution_provider_library("epabi", lib)
steps["registered"] = ours()
steps["register_twice"] = error_of(ort.register_execution_provider_library, "epabi", lib)
ort.unregister_execution_provider_library("epabi")
steps["unregistered"] = ours()
steps["all_after_unregister"] = [d.ep_name for d in ort.get_ep_devices()]
steps["unregister_twice"] = error_of(ort.unregister_execution_provider_library, "epabi")
ort.register_execution_provider_library("epabi", lib)
steps["registered_again"] = ours()
ort.unregister_execution_provider_library("epabi")
steps["unregistered_again"] = ours()
emit(ort_version=ort.__version__, **steps)
"""


# -- fixtures ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """c = a + b over float[2, 3], opset 17, serialized to a file the host scripts read."""
    shape = [2, 3]
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["c"])], "add",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, shape),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by every onnxruntime release we test
    onnx.checker.check_model(model)
    path = tmp_path_factory.mktemp("model") / "add.onnx"
    path.write_bytes(model.SerializeToString())
    return str(path)


@pytest.fixture(scope="module")
def package_version() -> str:
    version = importlib.metadata.version("epabi")
    assert version == epabi.__version__
    return version


def ours(devices: list[dict]) -> list[dict]:
    return [d for d in devices if d["ep_name"] == EP_NAME]


def assert_refused(attempt: dict, message: str) -> None:
    """A session attempt with enable_fallback=0: it must raise, with our status message inside."""
    assert attempt["raised"], f"session was created on providers {attempt.get('providers')}"
    assert message in attempt["message"]
    assert "INVALID_ARGUMENT" in attempt["message"]


def assert_refused_or_fell_back(attempt: dict, message: str) -> None:
    """A session attempt with InferenceSession's default fallback: either it raised with our message, or it
    fell back to CPU only after printing our message in its "EP Error" banner; never a session on our EP."""
    if attempt["raised"]:
        assert message in attempt["message"]
    else:
        assert attempt["providers"] == ["CPUExecutionProvider"]
        assert "EP Error" in attempt["printed"] and message in attempt["printed"]
        assert "Falling back to ['CPUExecutionProvider']" in attempt["printed"]


# -- tests ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", HOSTS)
def test_software_adapter_lists_one_cpu_device(version: str, library_path: str, package_version: str) -> None:
    result, _, err = run_json(version, LIST_SCRIPT, SOFTWARE, [library_path, "epabi"])
    assert result["ort_version"] == version
    assert result["register_error"] is None
    [dev] = ours(result["devices"])
    assert dev["ep_vendor"] == "epabi"
    assert dev["type"] == "CPU"
    # version and library_path are added by ONNX Runtime itself; device_kind and blas are ours. The plugin finds
    # the scipy-openblas32 wheel next to itself (our venv), whatever the host's venv holds.
    blas = dev["ep_metadata"].pop("blas")
    assert blas.startswith("OpenBLAS ") and blas.endswith("/scipy_openblas32/lib/libscipy_openblas.so)"), blas
    assert dev["ep_metadata"] == {"version": package_version, "library_path": library_path,
                                  "device_kind": "software"}
    assert dev["ep_options"] == {}
    # It sits on the very CPU hardware device the host discovered (the one the CPU EP uses).
    [cpu] = [d for d in result["devices"] if d["ep_name"] == "CPUExecutionProvider"]
    hw_keys = ("type", "vendor", "vendor_id", "device_id", "hw_metadata")
    assert {k: dev[k] for k in hw_keys} == {k: cpu[k] for k in hw_keys}
    # Our warning went through the host's logger (ORT's default level is WARNING).
    assert SOFTWARE_WARNING in err


@pytest.mark.parametrize("version", HOSTS)
def test_no_device_without_software_adapter_switch(version: str, library_path: str) -> None:
    result, _, err = run_json(version, LIST_SCRIPT, NO_SOFTWARE, [library_path, "epabi"])
    assert result["ort_version"] == version
    assert result["register_error"] is None
    assert ours(result["devices"]) == []
    assert [d["ep_name"] for d in result["devices"]] == ["CPUExecutionProvider"]
    assert "software adapter" not in err


def test_too_old_host_is_refused(library_path: str) -> None:
    result, _, _ = run_json(TOO_OLD, LIST_SCRIPT, SOFTWARE, [library_path, "epabi"])
    assert result["ort_version"] == TOO_OLD
    error = result["register_error"]
    assert error is not None, f"onnxruntime {TOO_OLD} accepted the plugin"
    assert f'"{TOO_OLD}"' in error["message"] and f'"{MIN}"' in error["message"]
    assert (f'{EP_NAME}: ORT runtime version "{TOO_OLD}" is below the minimum required version "{MIN}".'
            in error["message"])
    assert error["type"] == "Fail"  # ORT_FAIL, surfaced by register_execution_provider_library
    assert ours(result["devices"]) == []


@pytest.mark.parametrize("version", HOSTS)
def test_virtual_device_refuses_a_normal_session(version: str, library_path: str, model_path: str) -> None:
    result, _, _ = run_json(version, VIRTUAL_SCRIPT, NO_SOFTWARE, [library_path, model_path])
    assert result["ort_version"] == version
    # Without the software adapter switch the virtual device is the only one we list.
    [dev] = result["devices"]
    assert dev["ep_name"] == EP_NAME
    assert dev["type"] == "GPU"
    assert dev["hw_metadata"]["is_virtual"] == "1"
    assert dev["vendor_id"] == 0
    assert dev["ep_metadata"]["device_kind"] == "virtual"
    # enable_fallback=0 gives the real error on both releases (observed: RuntimeError on 1.24.4,
    # InvalidArgument on 1.32.0, both containing our message).
    assert_refused(result["strict"], VIRTUAL_REFUSAL)
    # Default fallback: 1.24.4 silently falls back to CPU (banner only), 1.32.0 raises.
    assert_refused_or_fell_back(result["default"], VIRTUAL_REFUSAL)


# onnxruntime 1.24.4 knows no session.compile_only key (not even in its binary); its ModelCompiler marks a
# compile session only with ep.context_enable=1, which our CreateEp accepts as the compile-only signal on
# hosts older than API 27 (observed).
@pytest.mark.parametrize("version", HOSTS)
def test_virtual_device_serves_model_compiler(version: str, library_path: str, model_path: str, tmp_path) -> None:
    compiled = tmp_path / "compiled.onnx"
    result, _, _ = run_json(version, COMPILE_SCRIPT, NO_SOFTWARE, [library_path, model_path, str(compiled)])
    assert result["ort_version"] == version
    assert result["kinds"] == ["virtual"]
    assert result["error"] is None
    assert result["compiled"]
    # We claim no nodes, so ORT writes the model back unchanged: still a valid Add model.
    out = onnx.load(str(compiled))
    assert [n.op_type for n in out.graph.node] == ["Add"]


@pytest.mark.parametrize("version", HOSTS)
def test_session_runs_on_software_adapter(version: str, library_path: str, model_path: str) -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((2, 3)).astype(np.float32)
    feeds = json.dumps({"a": a.tolist(), "b": b.tolist()})
    result, _, err = run_json(version, RUN_SCRIPT, SOFTWARE, [library_path, model_path, feeds])
    assert result["ort_version"] == version
    assert result["kinds"] == ["software"]
    # CreateEp succeeded: our EP leads the session (the CPU EP is always listed after it).
    assert result["providers"] == [EP_NAME, "CPUExecutionProvider"]
    # GetCapability was called by the real host and claimed the Add for the software adapter (logged
    # through the session logger at INFO); Compile and Compute then produced the outputs checked below.
    assert f"{EP_NAME}: claimed 1 of 1 nodes in 1 fused group(s)" in err
    assert result["dtypes"] == ["float32", "float32"]
    for out in result["outputs"]:
        np.testing.assert_array_equal(np.asarray(out, dtype=np.float32), a + b)
    # Session released (ReleaseEp), then the library unregistered, and the process exited 0 (run_json).
    assert result["left"] == ["CPUExecutionProvider"]


@pytest.mark.parametrize("version", HOSTS)
def test_bad_provider_option_fails_session_creation(version: str, library_path: str, model_path: str) -> None:
    result, _, _ = run_json(version, BAD_OPTION_SCRIPT, SOFTWARE, [library_path, model_path])
    assert result["ort_version"] == version
    assert result["kinds"] == ["software"]
    assert_refused(result["strict"], BAD_OPTION_ERROR)
    assert BAD_OPTION_KEY in result["strict"]["message"] and "'-1'" in result["strict"]["message"]
    assert_refused_or_fell_back(result["default"], BAD_OPTION_ERROR)


@pytest.mark.parametrize("version", HOSTS)
def test_unregister_removes_our_devices(version: str, library_path: str) -> None:
    result, _, _ = run_json(version, UNREGISTER_SCRIPT, SOFTWARE, [library_path])
    assert result["ort_version"] == version
    assert result["registered"] == 1
    assert "already registered under epabi" in result["register_twice"]
    assert result["unregistered"] == 0
    assert result["all_after_unregister"] == ["CPUExecutionProvider"]
    assert "was not registered" in result["unregister_twice"]
    assert result["registered_again"] == 1
    assert result["unregistered_again"] == 0
