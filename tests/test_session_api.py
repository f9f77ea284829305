"""InferenceSession's get_modelmeta(), run_async() and set_providers() against onnxruntime 1.24.4 and 1.32.0: the
same probe runs inside each release (the plugin registered, its software adapter selected) and on epabi's host of
that release, and the reports must be equal."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import epabi
from real_ort import MIN, NEWEST, run_json

#: ``probe(rt, new_options, make)``: ``rt`` is onnxruntime or epabi, ``new_options()`` session options with the
#: plugin's device added, ``make(options, **kw)`` a session of the test model. Returns a JSON-able report.
PROBE = r'''
import queue
import threading
import warnings

import numpy as np


def shown_warnings(caught):
    return [str(w.message)[:60] for w in caught]


def probe(rt, new_options, make):
    report = {}
    session = make(new_options())
    meta = session.get_modelmeta()
    report["meta"] = [meta.producer_name, meta.graph_name, meta.domain, meta.description, meta.graph_description,
                      meta.version, dict(sorted(meta.custom_metadata_map.items()))]
    report["meta_cached"] = session.get_modelmeta() is meta

    answers = queue.Queue()

    def callback(outputs, user_data, err):
        answers.put(([np.asarray(o).tolist() for o in outputs], user_data, err,
                     threading.current_thread() is threading.main_thread()))

    def run_async(*args, **kwargs):
        try:
            returned = session.run_async(*args, **kwargs)
        except Exception as exc:
            return ["raised", type(exc).__name__, str(exc)]
        outputs, user_data, err, on_main = answers.get(timeout=30)
        return ["called back", returned, outputs, user_data, err.splitlines()[0] if err else err, on_main]

    x = np.array([-1, 2], np.float32)
    report["async"] = run_async(None, {"x": x}, callback, "user data")
    report["async_named"] = run_async(["y"], {"x": x}, callback, 42)
    report["async_bad_shape"] = run_async(None, {"x": np.zeros(3, np.float32)}, callback, None)
    report["async_missing_input"] = run_async(None, {}, callback, None)
    terminate = rt.RunOptions()
    terminate.terminate = True
    report["async_terminate"] = run_async(None, {"x": x}, callback, None, terminate)
    report["async_not_callable"] = run_async(None, {"x": x}, "not callable", None)[:2]
    single = new_options()
    single.intra_op_num_threads = 1
    one_thread = make(single)
    try:
        one_thread.run_async(None, {"x": x}, callback, None)
        report["async_one_thread"] = "called"
    except Exception as exc:
        report["async_one_thread"] = "intra op thread pool must have at least one thread for RunAsync" in str(exc)

    for label, args in (("none", ()), ("cpu", (["CPUExecutionProvider"],)), ("plugin", ([EP_NAME],)),
                        ("plugin_cpu", ([EP_NAME, "CPUExecutionProvider"],)), ("unknown", (["Bogus"],)),
                        ("tuples", ([("CPUExecutionProvider", {})],)), ("not_a_list", (3,))):
        session = make(new_options())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                session.set_providers(*args)
                report["set_" + label] = [session.get_providers(), session.run(None, {"x": x})[0].tolist(),
                                          shown_warnings(caught)]
            except Exception as exc:
                report["set_" + label] = ["raised", str(exc).splitlines()[0][-40:], shown_warnings(caught)]
    return report
'''

ORT_SCRIPT = PROBE + r'''
import os

library, model = sys.argv[1], sys.argv[2]
ort.register_execution_provider_library("epabi", library)
device = next(d for d in ort.get_ep_devices() if d.ep_name == EP_NAME)


def new_options():
    so = ort.SessionOptions()
    so.add_provider_for_devices([device], {})
    return so


emit(**probe(ort, new_options, lambda so: ort.InferenceSession(model, so, enable_fallback=0)))
'''


def _model(folder: Path) -> Path:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu_graph",
                              [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2])], doc_string="graph doc")
    model = helper.make_model(graph, producer_name="mends", domain="test.domain", doc_string="model doc",
                              model_version=7, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    for key, value in (("a", "1"), ("b", "2"), ("a", "3")):
        model.metadata_props.add(key=key, value=value)
    path = folder / "relu.onnx"
    onnx.save(model, path)
    return path


def _ours(version: str, library_path: str, model: Path) -> dict:
    scope: dict = {"EP_NAME": epabi.get_ep_name()}
    exec(PROBE, scope)
    with epabi.Host(api_version=version, hardware=[epabi.cpu_device()]) as host:
        host.register_execution_provider_library("epabi", library_path)
        device = next(d for d in host.get_ep_devices() if d.ep_name == epabi.get_ep_name())

        def new_options() -> epabi.SessionOptions:
            so = epabi.SessionOptions()
            so.add_provider_for_devices([device], {})
            return so

        return scope["probe"](epabi, new_options, lambda so: epabi.InferenceSession(str(model), so, host=host))


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_modelmeta_run_async_and_set_providers_as_onnxruntime(version: str, library_path: str, tmp_path: Path,
                                                              software_adapter: None) -> None:
    model = _model(tmp_path)
    theirs, _, _ = run_json(version, ORT_SCRIPT, {"EPABI_ALLOW_SOFTWARE_ADAPTER": "1"}, [library_path, str(model)])
    ours = _ours(version, library_path, model)
    differences = {key: (ours.get(key), value) for key, value in theirs.items() if ours.get(key) != value}
    assert differences == {}, "epabi's, onnxruntime's"
    assert ours.keys() == theirs.keys()
