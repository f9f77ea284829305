"""Real-ONNX-Runtime smoke check of the software adapter: run inside a venv that has onnxruntime and onnx.

    EPABI_ALLOW_SOFTWARE_ADAPTER=1 python tests/ort_smoke.py /path/to/libepabi_plugin.so [case ...]

Each case builds a small model with the onnx helper API, runs it once on a session that uses our EP
device (software adapter) and once on ORT's CPU EP, and compares the outputs (1e-5). Which nodes ran on
which provider is read from ORT's profile. Prints one line per case and a final JSON summary line
("SMOKE-RESULT-JSON: {...}"); the exit status is 0 only when every case passed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

EP_NAME = "EpAbiExecutionProvider"
OPSET = 17
RNG = np.random.default_rng(0)


def make_model(nodes, inputs, outputs, inits=(), opset=OPSET):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def our_device():
    devs = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
    if not devs:
        raise RuntimeError("no EpAbiExecutionProvider device (EPABI_ALLOW_SOFTWARE_ADAPTER=1 set?)")
    return devs[0]


def session(model, ours, options=None, profile_dir=None):
    so = ort.SessionOptions()
    so.log_severity_level = int(os.environ.get("SMOKE_LOG_LEVEL", "3"))
    if profile_dir is not None:
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(profile_dir, "prof")
    if ours:
        so.add_provider_for_devices([our_device()], options or {})
    return ort.InferenceSession(model.SerializeToString(), sess_options=so)


def placements(profile_path):
    """node name -> provider, from the profile's Node events."""
    with open(profile_path) as f:
        events = json.load(f)
    out = {}
    for e in events:
        if e.get("cat") != "Node":
            continue
        args = e.get("args", {})
        name = e.get("name", "")
        for suffix in ("_kernel_time", "_fence_before", "_fence_after"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
        if "provider" in args:
            out[name] = args["provider"]
    return out


def run_case(model, feeds, options=None, expect_ours=None, expect_cpu=()):
    """Runs on both sessions, compares, and checks node placement. Returns (ok, detail)."""
    with tempfile.TemporaryDirectory() as tmp:
        sess = session(model, True, options, profile_dir=tmp)
        providers = sess.get_providers()
        if providers[0] != EP_NAME:
            return False, f"providers {providers}: silent CPU fallback"
        got = sess.run(None, feeds)
        prof = sess.end_profiling()
        place = placements(prof)
    want = session(model, False).run(None, feeds)
    for i, (g, w) in enumerate(zip(got, want)):
        if g.dtype != w.dtype or g.shape != w.shape:
            return False, f"output {i}: {g.dtype}{g.shape} vs CPU {w.dtype}{w.shape}"
        if g.dtype.kind == "f":
            if not np.allclose(g, w, rtol=1e-5, atol=1e-5, equal_nan=True):
                return False, f"output {i}: max diff {np.nanmax(np.abs(g - w))}"
        elif not np.array_equal(g, w):
            return False, f"output {i}: values differ\n{g}\n{w}"
    ep_nodes = sorted(n for n, p in place.items() if p == EP_NAME)
    cpu_nodes = sorted(n for n, p in place.items() if p == "CPUExecutionProvider")
    if expect_ours is not None and len(ep_nodes) != expect_ours:
        return False, f"expected {expect_ours} fused nodes on our EP, got {ep_nodes} (CPU: {cpu_nodes})"
    for n in expect_cpu:
        if n not in cpu_nodes:
            return False, f"expected node {n} on CPU; CPU has {cpu_nodes}, ours {ep_nodes}"
    return True, f"ours={ep_nodes} cpu={cpu_nodes}"


F = TensorProto.FLOAT
I32 = TensorProto.INT32
I64 = TensorProto.INT64
B = TensorProto.BOOL


def case_mlp():
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
        helper.make_node("Add", ["h1", "b1"], ["h2"], name="add1"),
        helper.make_node("Relu", ["h2"], ["h3"], name="relu1"),
        helper.make_node("MatMul", ["h3", "w2"], ["h4"], name="mm2"),
        helper.make_node("Add", ["h4", "b2"], ["y"], name="add2"),
    ]
    inits = [
        init("w1", RNG.standard_normal((8, 16), dtype=np.float32)),
        init("b1", RNG.standard_normal(16, dtype=np.float32)),
        init("w2", RNG.standard_normal((16, 4), dtype=np.float32)),
        init("b2", RNG.standard_normal(4, dtype=np.float32)),
    ]
    m = make_model(nodes, [vi("x", F, ["N", 8])], [vi("y", F, ["N", 4])], inits)
    return m, {"x": RNG.standard_normal((5, 8), dtype=np.float32)}, {}


def case_chain():
    nodes = [
        helper.make_node("Add", ["a", "b"], ["t1"], name="n_add"),
        helper.make_node("Mul", ["t1", "c"], ["t2"], name="n_mul"),
        helper.make_node("Sub", ["t2", "a"], ["t3"], name="n_sub"),
        helper.make_node("Div", ["t3", "two"], ["t4"], name="n_div"),
        helper.make_node("Pow", ["t4", "two"], ["t5"], name="n_pow"),
        helper.make_node("Max", ["t5", "b", "c"], ["t6"], name="n_max"),
        helper.make_node("Min", ["t6", "a"], ["t7"], name="n_min"),
        helper.make_node("Sigmoid", ["t7"], ["t8"], name="n_sig"),
        helper.make_node("Tanh", ["t8"], ["t9"], name="n_tanh"),
        helper.make_node("Exp", ["t9"], ["t10"], name="n_exp"),
        helper.make_node("Sqrt", ["t10"], ["t11"], name="n_sqrt"),
        helper.make_node("Reciprocal", ["t11"], ["t12"], name="n_rec"),
        helper.make_node("Erf", ["t12"], ["y"], name="n_erf"),
        helper.make_node("Pow", ["t5", "k"], ["y2"], name="n_powi"),
    ]
    inits = [init("two", np.array(2.0, np.float32)), init("k", np.array([1, 2, 3, 1], np.int64))]
    m = make_model(
        nodes,
        [vi("a", F, [2, 3, 4]), vi("b", F, [4]), vi("c", F, [3, 1])],
        [vi("y", F, [2, 3, 4]), vi("y2", F, [2, 3, 4]), vi("t6", F, [2, 3, 4])],
        inits,
    )
    feeds = {
        "a": RNG.standard_normal((2, 3, 4), dtype=np.float32),
        "b": RNG.standard_normal(4, dtype=np.float32),
        "c": RNG.standard_normal((3, 1), dtype=np.float32),
    }
    return m, feeds, {"expect_ours": 1}


def case_where_equal():
    nodes = [
        helper.make_node("Equal", ["i", "j"], ["eq"], name="n_eq"),
        helper.make_node("Where", ["eq", "x", "y"], ["w"], name="n_where"),
        helper.make_node("Equal", ["bi", "bj"], ["beq"], name="n_beq"),
        helper.make_node("Where", ["beq", "li", "lj"], ["w2"], name="n_where64"),
    ]
    m = make_model(
        nodes,
        [vi("i", I32, [3, 4]), vi("j", I32, [4]), vi("x", F, [3, 4]), vi("y", F, [1]),
         vi("bi", B, [2, 1]), vi("bj", B, [1, 3]), vi("li", I64, [2, 3]), vi("lj", I64, [])],
        [vi("w", F, [3, 4]), vi("eq", B, [3, 4]), vi("w2", I64, [2, 3])],
    )
    feeds = {
        "i": RNG.integers(0, 3, (3, 4)).astype(np.int32),
        "j": RNG.integers(0, 3, (4,)).astype(np.int32),
        "x": RNG.standard_normal((3, 4), dtype=np.float32),
        "y": np.array([7.0], np.float32),
        "bi": np.array([[True], [False]]),
        "bj": np.array([[True, False, True]]),
        "li": RNG.integers(-9, 9, (2, 3)).astype(np.int64),
        "lj": np.array(42, np.int64),
    }
    return m, feeds, {"expect_ours": 1}


def case_cast():
    nodes = [
        helper.make_node("Cast", ["x"], ["i32"], to=I32, name="c1"),
        helper.make_node("Cast", ["i32"], ["i64"], to=I64, name="c2"),
        helper.make_node("Cast", ["i64"], ["b"], to=B, name="c3"),
        helper.make_node("Cast", ["b"], ["f"], to=F, name="c4"),
        helper.make_node("Cast", ["x"], ["d"], to=TensorProto.DOUBLE, name="c5"),
        helper.make_node("Cast", ["d"], ["u8"], to=TensorProto.UINT8, name="c6"),
        helper.make_node("Cast", ["i64"], ["f2"], to=F, name="c7"),
        helper.make_node("Add", ["i64", "i64"], ["s64"], name="add64"),
        helper.make_node("Div", ["s64", "three"], ["q64"], name="div64"),
    ]
    m = make_model(
        nodes,
        [vi("x", F, [4, 5])],
        [vi("f", F, [4, 5]), vi("u8", TensorProto.UINT8, [4, 5]), vi("f2", F, [4, 5]), vi("q64", I64, [4, 5])],
        [init("three", np.array(-3, np.int64))],
    )
    x = (RNG.standard_normal((4, 5)) * 50).astype(np.float32)
    x[0, 0] = 0.0
    x[0, 1] = -0.7
    return m, {"x": x}, {"expect_ours": 1}


def case_partition():
    """Abs (no kernel) sits between supported nodes: a diamond that must not become one fused node."""
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a1"], name="add_a"),
        helper.make_node("Abs", ["a1"], ["ab"], name="abs_cpu"),
        helper.make_node("Add", ["a1", "ab"], ["a3"], name="add_b"),
        helper.make_node("Mul", ["a3", "x"], ["y"], name="mul_c"),
        helper.make_node("Relu", ["x"], ["r"], name="relu_side"),
    ]
    m = make_model(nodes, [vi("x", F, [2, 3])], [vi("y", F, [2, 3]), vi("r", F, [2, 3])])
    return m, {"x": RNG.standard_normal((2, 3), dtype=np.float32)}, {"expect_ours": 2, "expect_cpu": ["abs_cpu"]}


def case_edges():
    """Zero-size tensors, an overridable initializer (a graph input with a default), a scalar broadcast."""
    nodes = [
        helper.make_node("Add", ["z", "row"], ["z2"], name="zero_add"),
        helper.make_node("Mul", ["x", "scale"], ["xs"], name="mul_override"),
        helper.make_node("Sub", ["xs", "half"], ["y"], name="sub_scalar"),
        helper.make_node("Relu", ["xs"], ["dead"], name="dead_relu"),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [vi("z", F, [0, 3]), vi("row", F, [3]), vi("x", F, [2, 3]), vi("scale", F, [3])],
        [vi("z2", F, [0, 3]), vi("y", F, [2, 3])],
        initializer=[init("scale", np.array([1.0, 2.0, 3.0], np.float32)), init("half", np.array(0.5, np.float32))],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    feeds = {
        "z": np.zeros((0, 3), np.float32),
        "row": RNG.standard_normal(3, dtype=np.float32),
        "x": RNG.standard_normal((2, 3), dtype=np.float32),
        "scale": np.array([4.0, 5.0, 6.0], np.float32),
    }
    return m, feeds, {"expect_ours": 1}


def case_force_cpu():
    m, feeds, _ = case_chain()
    return m, feeds, {"options": {"force_cpu_nodes": "n_sig, n_max"}, "expect_cpu": ["n_sig", "n_max"]}


def case_dtype_error():
    """A wrong input dtype must surface as an error, never a crash."""
    m, feeds, _ = case_chain()
    sess = session(m, True)
    bad = dict(feeds)
    bad["a"] = feeds["a"].astype(np.int32)
    try:
        sess.run(None, bad)
    except Exception as e:  # any ORT error is the expected outcome
        return True, f"refused: {str(e).splitlines()[0][:160]}"
    return False, "ran with an int32 input compiled for float"


def case_concurrent():
    m, feeds, _ = case_chain()
    sess = session(m, True)
    want = session(m, False).run(None, feeds)
    errors = []

    def worker():
        for _ in range(50):
            got = sess.run(None, feeds)
            for g, w in zip(got, want):
                if not np.allclose(g, w, rtol=1e-5, atol=1e-5):
                    errors.append("mismatch")
                    return

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (not errors), f"8 threads x 50 runs, {len(errors)} mismatches"


def case_int_div_zero():
    nodes = [helper.make_node("Div", ["a", "b"], ["y"], name="idiv")]
    m = make_model(nodes, [vi("a", I32, [4]), vi("b", I32, [4])], [vi("y", I32, [4])])
    sess = session(m, True)
    y = sess.run(None, {"a": np.array([7, -7, 5, -2147483648], np.int32), "b": np.array([2, 2, 0, -1], np.int32)})[0]
    return True, f"no crash: {y.tolist()}"


CASES = {
    "mlp": case_mlp,
    "chain": case_chain,
    "where_equal": case_where_equal,
    "cast": case_cast,
    "partition": case_partition,
    "edges": case_edges,
    "force_cpu": case_force_cpu,
}
SPECIAL = {"dtype_error": case_dtype_error, "concurrent": case_concurrent, "int_div_zero": case_int_div_zero}


def main():
    lib = sys.argv[1]
    wanted = sys.argv[2:] or list(CASES) + list(SPECIAL)
    ort.register_execution_provider_library("epabi_smoke", lib)
    results = {}
    for name in wanted:
        try:
            if name in CASES:
                model, feeds, kw = CASES[name]()
                ok, detail = run_case(model, feeds, **kw)
            else:
                ok, detail = SPECIAL[name]()
        except Exception as e:  # report and continue
            ok, detail = False, f"{type(e).__name__}: {e}"
        results[name] = ok
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)
    print("SMOKE-RESULT-JSON: " + json.dumps({"ort": ort.__version__, "results": results}), flush=True)
    sys.exit(0 if all(results.values()) else 1)


if __name__ == "__main__":
    main()
