"""Replay time of one Conv on the GPU under each EPABI_CONV_FORM, through the interpreter's onnxruntime (>= 1.26).

    python bench/conv_form.py --runs 2000            # magika's conv: X [1,256,512,1], W [512,256,5,1], no bias

Each form (cudnn, gemm, timed) gets its own session (enable_cuda_graph=1, cudnn=1, IOBinding in device memory; the
variable is read when the session's stream is set up); after 20 warm-up calls (the warm-ups, the capture, replays),
`--runs` replays are timed one by one and the table gives the median and p10 in microseconds and the median's ratio
to cudnn's. The plugin's INFO line of the timed form (cuDNN's and the GEMM form's GPU time per call) is printed
with --log. Informational, not a test: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

import epabi

EP = "EpAbiExecutionProvider"


def conv_model(x: list[int], w: list[int], bias: bool) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = [onnx.numpy_helper.from_array((rng.standard_normal(w) / np.sqrt(np.prod(w[1:]))).astype(np.float32), "w")]
    if bias:
        inits.append(onnx.numpy_helper.from_array(rng.standard_normal(w[0]).astype(np.float32), "b"))
    node = helper.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["y"])
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--x", default="1,256,512,1", help="X's shape (NCHW)")
    ap.add_argument("--w", default="512,256,5,1", help="W's shape (MCkhkw)")
    ap.add_argument("--bias", action="store_true")
    ap.add_argument("--log", action="store_true", help="the plugin's INFO lines on stderr")
    args = ap.parse_args()
    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime is not installed in this interpreter")
        return 1
    os.environ.setdefault("EPABI_CUDA_DISCOVERY", "1")
    os.environ.pop("EPABI_ALLOW_SOFTWARE_ADAPTER", None)
    if args.log:
        ort.set_default_logger_severity(1)
    ort.register_execution_provider_library("epabi", epabi.get_library_path())
    gpus = [d for d in ort.get_ep_devices() if d.ep_name == EP and dict(d.ep_metadata).get("device_kind") == "gpu"]
    if not gpus:
        print("onnxruntime lists no GPU EP device of epabi")
        return 1
    xs, ws = [int(v) for v in args.x.split(",")], [int(v) for v in args.w.split(",")]
    model = conv_model(xs, ws, args.bias).SerializeToString()
    x_host = np.random.default_rng(1).standard_normal(xs).astype(np.float32)
    cpu = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    want = cpu.run(None, {"x": x_host})[0]
    rows = []
    for form in ("cudnn", "gemm", "timed"):
        os.environ["EPABI_CONV_FORM"] = form
        so = ort.SessionOptions()
        if args.log:
            so.log_severity_level = 1
        so.add_provider_for_devices(gpus[:1], {"enable_cuda_graph": "1", "cudnn": "1"})
        sess = ort.InferenceSession(model, sess_options=so, enable_fallback=0)
        x = ort.OrtValue.ortvalue_from_numpy(x_host, "cuda", 0)
        y = ort.OrtValue.ortvalue_from_shape_and_type(list(want.shape), np.float32, "cuda", 0)
        io = sess.io_binding()
        io.bind_ortvalue_input("x", x)
        io.bind_ortvalue_output("y", y)
        for _ in range(20):
            sess.run_with_iobinding(io)
        diff = float(np.max(np.abs(y.numpy() - want)))
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter_ns()
            sess.run_with_iobinding(io)
            times.append((time.perf_counter_ns() - t0) / 1000.0)
        times.sort()
        rows.append((form, statistics.median(times), times[len(times) // 10], diff))
        del sess, io, x, y
    base = rows[0][1]
    print(f"Conv X [{args.x}] W [{args.w}]{' + bias' if args.bias else ''}: replays through onnxruntime "
          f"{ort.__version__}, {args.runs} runs")
    print(f"{'EPABI_CONV_FORM':<16}{'median us':>10}{'p10 us':>9}{'/ cudnn':>9}{'max |diff|':>12}")
    for form, med, p10, diff in rows:
        print(f"{form:<16}{med:>10.1f}{p10:>9.1f}{med / base:>9.2f}{diff:>12.2e}")
    ort.unregister_execution_provider_library("epabi")
    return 0


if __name__ == "__main__":
    sys.exit(main())
