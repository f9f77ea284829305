#!/usr/bin/env python3
"""End-to-end check of the float32 math kernels under a real onnxruntime, on the cases of kernel_cases.py.

Each case that the harness expects to compute becomes a one-node model (constant inputs as initializers,
unknown shapes as symbolic dims). It runs on a session with our EP device (software adapter) and on a plain
CPU session; the node must run on EpAbiExecutionProvider (checked in ORT's profile: no node on the CPU EP)
and the outputs must agree (rtol 1e-4). Cases the harness expects supports() to refuse must instead land on
the CPU EP when ORT's CPU EP has a kernel for them. Cases expected to fail at run time are skipped: ORT's
shape inference rejects most of those models at load.

    EPABI_ALLOW_SOFTWARE_ADAPTER=1 ~/.cache/epabi/venvs/ort-1.32.0/bin/python tests/native/ort_kernels.py \\
        /path/to/libepabi_plugin.so [-k SUBSTRING] [-v]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernel_cases

EP_NAME = "EpAbiExecutionProvider"
ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
        np.dtype(np.float64): TensorProto.DOUBLE, np.dtype(np.int32): TensorProto.INT32,
        np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8,
        np.dtype(np.uint16): TensorProto.UINT16, np.dtype(np.int16): TensorProto.INT16,
        np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.uint32): TensorProto.UINT32,
        np.dtype(np.uint64): TensorProto.UINT64}


def build_model(case):
    names = [f"i{i}" if x is not None else "" for i, x in enumerate(case.inputs)]
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node(case.op, names, list(case.outputs), name="the_node", **case.attrs)
    inputs, inits, feeds = [], [], {}
    for i, (n, x) in enumerate(zip(names, case.inputs)):
        if not n:
            continue
        if i in case.const:
            inits.append(numpy_helper.from_array(x, n))
            continue
        shape = [f"d{i}_{k}" for k in range(x.ndim)] if i in case.unknown else list(x.shape)
        inputs.append(helper.make_tensor_value_info(n, ELEM[x.dtype], shape))
        feeds[n] = x
    # Outputs have the case's dtype, else X's (a refused double case must still be a valid model); out_dtypes
    # overrides the later ones (MaxPool's int64 Indices).
    out_elem = ELEM[np.dtype(case.out_dtype or case.inputs[0].dtype)]
    outs = [helper.make_tensor_value_info(o, case.out_dtypes[i] if 0 < i < len(case.out_dtypes) else out_elem,
                                          None) for i, o in enumerate(case.outputs) if o]
    graph = helper.make_graph([node], case.name, inputs, outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model.ir_version = 10
    return model.SerializeToString(), feeds


def placements(profile_path):
    with open(profile_path) as f:
        events = json.load(f)
    return {e["name"]: e["args"]["provider"] for e in events
            if e.get("cat") == "Node" and "provider" in e.get("args", {})}


def session(model, device, profile_dir=None):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if profile_dir is not None:
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(profile_dir, "prof")
    if device is not None:
        so.add_provider_for_devices([device], {})
        return ort.InferenceSession(model, sess_options=so, enable_fallback=0)
    return ort.InferenceSession(model, sess_options=so, providers=["CPUExecutionProvider"])


def check(case, device):
    """None when the case passes, 'skip: ...' when it does not apply, else the failure."""
    if case.expect == "error":
        return "skip: run-time error case"
    if case.ort_differs:
        return f"skip: {case.ort_differs}"
    model, feeds = build_model(case)
    try:
        want = session(model, None).run(None, feeds)
    except Exception as exc:   # ORT's CPU EP lacks the op/opset, or rejects the model
        return f"skip: CPU EP cannot run it ({str(exc).splitlines()[0][:100]})"
    with tempfile.TemporaryDirectory() as tmp:
        sess = session(model, device, tmp)
        if sess.get_providers()[0] != EP_NAME:
            return f"providers {sess.get_providers()}"
        got = sess.run(None, feeds)
        again = sess.run(None, feeds)
        place = placements(sess.end_profiling())
    on_cpu = sorted(n for n, p in place.items() if p == "CPUExecutionProvider")
    on_ours = sorted(n for n, p in place.items() if p == EP_NAME)
    if case.expect == "refused":
        return None if on_cpu and not on_ours else f"expected the CPU EP to take it; ours={on_ours} cpu={on_cpu}"
    if on_cpu or not on_ours:
        return f"node not on our EP: ours={on_ours} cpu={on_cpu}"
    for i, (g, a, w) in enumerate(zip(got, again, want)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"output {i}: {g.dtype}{g.shape} vs CPU {w.dtype}{w.shape}"
        if not np.array_equal(g, a, equal_nan=True):
            return f"output {i}: second run differs from the first"
        if w.dtype.kind != "f":
            if not np.array_equal(g, w):
                return f"output {i}: values differ from the CPU EP's"
            continue
        finite = np.abs(w[np.isfinite(w)])
        atol = 1e-5 * max(1.0, float(finite.max()) if finite.size else 1.0)
        if not np.allclose(g, w, rtol=1e-4, atol=atol, equal_nan=True):
            return f"output {i}: max |diff| {np.nanmax(np.abs(g.astype(np.float64) - w)):.3g}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("library")
    ap.add_argument("-k", default="")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    ort.register_execution_provider_library("epabi", args.library)
    devices = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]
    if not devices:
        sys.exit("no EpAbiExecutionProvider device (is EPABI_ALLOW_SOFTWARE_ADAPTER=1 set?)")
    cases = [c for f in kernel_cases.ALL for c in f() if args.k in c.name]
    passed = skipped = failed = 0
    for case in cases:
        try:
            msg = check(case, devices[0])
        except Exception as exc:
            msg = f"raised {type(exc).__name__}: {str(exc)[:300]}"
        if msg is None:
            passed += 1
            if args.v:
                print(f"ok   {case.name}")
        elif msg.startswith("skip"):
            skipped += 1
            if args.v:
                print(f"SKIP {case.name}: {msg}")
        else:
            failed += 1
            print(f"FAIL {case.name}: {msg}")
    print(f"onnxruntime {ort.__version__}: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
