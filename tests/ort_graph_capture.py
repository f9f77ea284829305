"""Manual tool: graph capture and replay of the software adapter driven by real ONNX Runtime (1.26+).

    EPABI_ALLOW_SOFTWARE_ADAPTER=1 python tests/ort_graph_capture.py /path/to/libepabi_plugin.so

Needs a Python with onnxruntime >= 1.30 AND onnx (it builds its models in process; before 1.30 the software adapter
captures only in its own memory, README "Graph capture", and this tool binds CPU values): the project's test venv
has both (onnxruntime comes with magika); the cached real_ort venvs (~/.cache/epabi/venvs/ort-*) have no onnx.
Checked on 1.26.0 and 1.32.0.

Not run by pytest. tests/test_real_ort_capture.py automates, in the real_ort venvs of 1.26.0 and NEWEST, what
this script's phases 1-3 check (one id with update_inplace, two ids plus id -1, the min=0 detector) and the
order of ORT's OrtEp calls. Phases 4-8 run under real ORT only here: tests/test_graph_capture.py covers user
streams and threads on the emulated host, tests/native/graph_capture_unit.c a failed capture at the OrtEp-callback
level; releasing a session while another thread idles is checked here under real ORT.

ORT itself calls OnRunStart/OnRunEnd/IsGraphCaptured/ReplayGraph here. Phases: one id with IOBinding and
update_inplace (first call correct, later calls replays); two ids with different shapes plus id -1; the
allocation-during-capture detector (min=0); user_compute_stream adoption and refusal; capture off; threads
(each captures its own graph); freeing a released session's per-thread contexts; a capture that fails
mid-way and the capture that follows. The session logger writes to stderr, which is redirected to a file per
phase so the EP's log phrases (graph_capture.h) can be counted. Prints ok/FAIL lines and a SUMMARY line; the
exit status is 0 only when every check passed.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

EP = "EpAbiExecutionProvider"
RNG = np.random.default_rng(1)
W = RNG.standard_normal((4, 8)).astype(np.float32)
B = RNG.standard_normal((8,)).astype(np.float32)
FAILED = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILED.append(what)


def model_bytes():
    # y = Softmax(Reshape(t, Shape(t))) with t = Transpose(Transpose(Relu(x @ W + b))): Reshape's shape is
    # data that an earlier launch (Shape) of the same run produces
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
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
                          initializer=[numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m.SerializeToString()


def ref(x):
    r = np.maximum(x @ W + B, 0)
    e = np.exp(r - r.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@contextlib.contextmanager
def stderr_to(path):
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def device():
    return [d for d in ort.get_ep_devices() if d.ep_name == EP][0]


def session(options):
    so = ort.SessionOptions()
    so.log_severity_level = 0
    so.add_provider_for_devices([device()], options)
    return ort.InferenceSession(model_bytes(), sess_options=so, enable_fallback=0)


class Bound:
    def __init__(self, sess, n):
        self.x = ort.OrtValue.ortvalue_from_numpy(RNG.standard_normal((n, 4)).astype(np.float32))
        self.y = ort.OrtValue.ortvalue_from_numpy(np.zeros((n, 8), np.float32))
        self.b = sess.io_binding()
        self.b.bind_ortvalue_input("x", self.x)
        self.b.bind_ortvalue_output("y", self.y)

    def run(self, sess, ro, new_x=None):
        if new_x is not None:
            self.x.update_inplace(new_x)
        sess.run_with_iobinding(self.b, ro)
        return self.y.numpy()


def run_options(gid):
    ro = ort.RunOptions()
    if gid is not None:
        ro.add_run_config_entry("gpu_graph_id", str(gid))
    return ro


def count(log, phrase):
    return sum(phrase in line for line in log.splitlines())


def main(lib):
    ort.set_default_logger_severity(0)
    ort.register_execution_provider_library("epabi", lib)
    tmp = tempfile.mkdtemp()

    # 1. one id, default warm-up (2): first call correct, later calls are replays following update_inplace
    path = os.path.join(tmp, "one.log")
    with stderr_to(path):
        sess = session({"enable_cuda_graph": "1"})
        bound = Bound(sess, 2)
        ro = run_options(1)
        outs = [(bound.x.numpy().copy(), bound.run(sess, ro).copy())]
        for _ in range(4):
            x = RNG.standard_normal((2, 4)).astype(np.float32)
            outs.append((x, bound.run(sess, ro, x).copy()))
        del sess
    log = open(path).read()
    for i, (x, y) in enumerate(outs):
        check(np.allclose(y, ref(x), atol=1e-5), f"one id: call {i + 1} output correct")
    check(count(log, "capturing graph of annotation id 1 on this thread after 2 regular run(s)") == 1,
          "one id: captured once, after 2 regular runs")
    check(count(log, "ReplayGraph replayed annotation id 1") == 4, "one id: 4 ReplayGraph replays for calls 2-5")
    check(count(log, "replayed annotation id 1 once right after capture") == 0,
          "one id: no replay right after capture (the host stream executed the launches while recording)")
    check(count(log, "allocated memory during graph capture") == 0, "one id: no allocation warning after warm-up")
    check(count(log, "Start another run for necessary memory allocation or graph capture") == 2,
          "one id: ORT ran 2 extra internal runs in call 1")
    print("    log lines from the EP:", count(log, EP + ":"), "in", path)

    # 2. two ids, different shapes; id -1 never captures
    path = os.path.join(tmp, "two.log")
    with stderr_to(path):
        sess = session({"enable_cuda_graph": "1", "min_num_runs_before_cuda_graph_capture": "1"})
        b1, b2, bn = Bound(sess, 2), Bound(sess, 3), Bound(sess, 5)
        ok = True
        for _ in range(4):
            for b, gid, n in ((b1, 1, 2), (b2, 2, 3), (bn, -1, 5)):
                x = RNG.standard_normal((n, 4)).astype(np.float32)
                ok &= np.allclose(b.run(sess, run_options(gid), x), ref(x), atol=1e-5)
        del sess
    log = open(path).read()
    check(ok, "two ids + id -1: every output correct")
    check(count(log, "capturing graph of annotation id 1 ") == 1
          and count(log, "capturing graph of annotation id 2 ") == 1, "two ids: each captured once")
    check(count(log, "capturing graph of annotation id -1") == 0, "id -1: never captured")
    check(count(log, "ReplayGraph replayed annotation id 1") == 3
          and count(log, "ReplayGraph replayed annotation id 2") == 3, "two ids: 3 replays each")

    # 3. min=0: the first run captures; the detector fires (the arena grows during capture)
    path = os.path.join(tmp, "min0.log")
    with stderr_to(path):
        sess = session({"enable_cuda_graph": "1", "min_num_runs_before_cuda_graph_capture": "0"})
        b = Bound(sess, 3000)   # a size no earlier phase used: the shared arena has no such chunks yet
        x = b.x.numpy().copy()
        y = b.run(sess, run_options(7)).copy()
        del sess
    log = open(path).read()
    check(np.allclose(y, ref(x), atol=1e-5), "min=0: first call correct")
    check(count(log, "capturing graph of annotation id 7 on this thread after 0 regular run(s)") == 1,
          "min=0: first run captures")
    check(count(log, "Start another run for necessary memory allocation or graph capture") == 0, "min=0: no extra run")
    warn = [line for line in log.splitlines() if "allocated memory during graph capture" in line]
    check(len(warn) == 1 and "min_num_runs_before_cuda_graph_capture" in warn[0],
          "min=0: detector warns, naming the option")
    print("    ", warn[0][:300] if warn else "")

    # 4. user_compute_stream: adopted (incl. 0), never a concurrency claim; bad value refused
    for value, shown in (("0x1234", "0x1234"), ("0", "0x0"), ("4096", "0x1000")):
        path = os.path.join(tmp, "us.log")
        with stderr_to(path):
            sess = session({"enable_cuda_graph": "1", "user_compute_stream": value})
            b = Bound(sess, 2)
            x = b.x.numpy().copy()
            y = b.run(sess, run_options(0)).copy()
            del sess
        log = open(path).read()
        check(np.allclose(y, ref(x), atol=1e-5), f"user_compute_stream={value}: output correct")
        check(count(log, f"adopts the user's stream user_compute_stream={shown} ") == 1,
              f"user_compute_stream={value}: adopted as {shown}")
    try:
        with stderr_to(os.path.join(tmp, "bad.log")):
            session({"enable_cuda_graph": "1", "user_compute_stream": "0xZZ"})
        check(False, "bad user_compute_stream refused")
    except Exception as e:
        check("user_compute_stream" in str(e) and "0xZZ" in str(e), f"bad user_compute_stream refused: {str(e)[:160]}")

    # 5. capture off: nothing graph-related happens
    path = os.path.join(tmp, "off.log")
    with stderr_to(path):
        sess = session({})
        b = Bound(sess, 2)
        for _ in range(3):
            x = RNG.standard_normal((2, 4)).astype(np.float32)
            y = b.run(sess, run_options(1), x)
        del sess
    log = open(path).read()
    check(np.allclose(y, ref(x), atol=1e-5) and count(log, "capturing graph") == 0 and count(log, "ReplayGraph") == 0,
          "capture off: plain runs")

    # 6. threads: each thread captures its own graph of the same id; thread exit frees its context
    import threading
    path = os.path.join(tmp, "threads.log")
    with stderr_to(path):
        shared = {"s": session({"enable_cuda_graph": "1"})}
        results = {}

        def worker(k):
            sess = shared["s"]
            b = Bound(sess, 2 + k)
            ok = True
            for _ in range(6):
                x = RNG.standard_normal((2 + k, 4)).astype(np.float32)
                ok &= bool(np.allclose(b.run(sess, run_options(1), x), ref(x), atol=1e-5))
            results[k] = ok

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # main thread too, after the workers exited
        worker(9)
        del shared["s"]
    log = open(path).read()
    check(all(results.values()) and len(results) == 4, "threads: every thread's outputs correct")
    check(count(log, "capturing graph of annotation id 1 ") == 4, "threads: each of 4 threads captured id 1 once")
    check(count(log, "ReplayGraph replayed annotation id 1") == 4 * 5, "threads: 5 replays per thread")

    # 7. releasing a session frees its contexts on every thread, idle ones included; the idle thread then
    #    goes on with another session
    path = os.path.join(tmp, "release.log")
    with stderr_to(path):
        opts = {"enable_cuda_graph": "1", "min_num_runs_before_cuda_graph_capture": "0"}
        sessions = {"a": session(opts), "b": session(opts)}
        go_b, done_a = threading.Event(), threading.Event()
        ok = []

        def use(name):
            b = Bound(sessions[name], 2)
            x = RNG.standard_normal((2, 4)).astype(np.float32)
            ok.append(bool(np.allclose(b.run(sessions[name], run_options(3), x), ref(x), atol=1e-5)))

        def holder():
            use("a")
            done_a.set()
            go_b.wait()
            use("b")

        t = threading.Thread(target=holder)
        t.start()
        done_a.wait()
        del sessions["a"]   # released on the main thread: the holder's context for it is freed right here
        go_b.set()
        t.join()
        del sessions["b"]
    check(ok == [True, True], "release: outputs correct before and after another session's release")

    # 8. a capture that fails mid-way keeps nothing; the next call captures
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "s"], ["y"], name="reshape")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                                       helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = os.path.join(tmp, "fail.log")
    with stderr_to(path):
        so = ort.SessionOptions()
        so.log_severity_level = 0
        so.add_provider_for_devices([device()], {"enable_cuda_graph": "1",
                                                  "min_num_runs_before_cuda_graph_capture": "0"})
        sess = ort.InferenceSession(m.SerializeToString(), sess_options=so, enable_fallback=0)
        x = ort.OrtValue.ortvalue_from_numpy(RNG.standard_normal((2, 6)).astype(np.float32))
        sv = ort.OrtValue.ortvalue_from_numpy(np.array([5, 5], np.int64))   # 25 != 12 elements: Reshape fails
        y = ort.OrtValue.ortvalue_from_numpy(np.zeros((3, 4), np.float32))
        b = sess.io_binding()
        b.bind_ortvalue_input("x", x)
        b.bind_ortvalue_input("s", sv)
        b.bind_ortvalue_output("y", y)
        errors = []
        try:
            sess.run_with_iobinding(b, run_options(4))
        except Exception as e:
            errors.append(str(e))
        sv.update_inplace(np.array([3, 4], np.int64))
        outs = []
        for _ in range(3):
            xv = RNG.standard_normal((2, 6)).astype(np.float32)
            x.update_inplace(xv)
            sess.run_with_iobinding(b, run_options(4))
            outs.append(np.allclose(y.numpy(), np.maximum(xv, 0).reshape(3, 4)))
        del sess, b
    log = open(path).read()
    check(len(errors) == 1, "failed capture: the first call fails: " + (errors[0][-120:] if errors else ""))
    check(count(log, "graph capture of annotation id 4 failed") == 1, "failed capture: logged, nothing kept")
    check(count(log, "capturing graph of annotation id 4") == 2, "failed capture: the next call captures again")
    check(all(outs) and count(log, "ReplayGraph replayed annotation id 4") == 2, "failed capture: then correct replays")

    print("SUMMARY:", "FAILED " + str(FAILED) if FAILED else "all passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
