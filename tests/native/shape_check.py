"""Case format, ONNX reference and comparison for tests/native/shape_harness.c (used by shape_cases.py).

A Case is one node: attributes (ints, floats, strings, int lists, one-element TensorProtos), inputs as (array,
flags) pairs (flags: "s" shape-deciding, i.e. readable in run(); "c" a constant initializer; "u" rank unknown when
the kernel is chosen; "" none) or None for an absent optional input.
Its expectation is "ref" (onnx.reference on a one-node model), explicit arrays (where ONNX Runtime and the
reference differ), or an outcome: "refused" (supports() says no), "error" (run() fails), "nokernel". Outputs
are compared exactly (same dtype, shape and values; NaN equals NaN).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

DT = {
    np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int8): 3, np.dtype(np.uint16): 4,
    np.dtype(np.int16): 5, np.dtype(np.int32): 6, np.dtype(np.int64): 7, np.dtype(np.bool_): 9,
    np.dtype(np.float16): 10, np.dtype(np.float64): 11, np.dtype(np.uint32): 12, np.dtype(np.uint64): 13,
}
NP = {v: k for k, v in DT.items()}
TP = {1: TensorProto.FLOAT, 2: TensorProto.UINT8, 3: TensorProto.INT8, 4: TensorProto.UINT16, 5: TensorProto.INT16,
      6: TensorProto.INT32, 7: TensorProto.INT64, 9: TensorProto.BOOL, 10: TensorProto.FLOAT16,
      11: TensorProto.DOUBLE, 12: TensorProto.UINT32, 13: TensorProto.UINT64}

I64MAX = np.iinfo(np.int64).max
I64MIN = np.iinfo(np.int64).min
I32MAX = np.iinfo(np.int32).max


class Case:
    def __init__(self, name, op, version, inputs, attrs=None, expect="ref", nout=1, match="", may_refuse=False):
        self.name, self.op, self.version = name, op, version
        self.inputs = inputs          # list of (array, flags) or None
        self.attrs = attrs or {}
        self.expect = expect          # "ref" | "error" | "refused" | "nokernel" | list of arrays
        self.nout = nout
        self.match = match            # substring the refusal / error message must contain
        self.may_refuse = may_refuse  # a refusal also passes (a configuration the kernel leaves to others)


def fmt_values(a):
    a = np.ascontiguousarray(a)
    if a.dtype == np.float16:
        return [str(int(v)) for v in a.view(np.uint16).ravel()]
    if a.dtype == np.bool_:
        return [str(int(v)) for v in a.ravel()]
    if a.dtype == np.float32:
        return [f"{v:.9g}" for v in a.ravel()]
    if a.dtype == np.float64:
        return [repr(float(v)) for v in a.ravel()]
    return [str(int(v)) for v in a.ravel()]


def serialize(c):
    out = [f"case {c.name}", f"op {c.op} {c.version}"]
    for k, v in c.attrs.items():
        if isinstance(v, (list, tuple)):
            out.append(f"attr {k} is {len(v)} " + " ".join(str(int(x)) for x in v))
        elif isinstance(v, float):
            out.append(f"attr {k} f {v!r}")
        elif isinstance(v, (str, bytes)):
            out.append(f"attr {k} s {v.decode() if isinstance(v, bytes) else v}")
        elif isinstance(v, TensorProto):   # a one-element tensor attribute (ConstantOfShape's value)
            a = numpy_helper.to_array(v).ravel()
            out.append(f"attr {k} t {DT[a.dtype]} {fmt_values(a)[0]}")
        else:
            out.append(f"attr {k} i {int(v)}")
    for inp in c.inputs:
        if inp is None:
            out.append("in none")
            continue
        a, flags = inp
        a = np.asarray(a)
        out.append(f"in {DT[a.dtype]} {a.ndim} " + " ".join(str(d) for d in a.shape) + f" {flags or '-'} "
                   + " ".join(fmt_values(a)))
    out.append(f"nout {c.nout}")
    out.append("end")
    return "\n".join(out)


def reference(c):
    names = []
    graph_inputs = []
    feeds = {}
    for i, inp in enumerate(c.inputs):
        if inp is None:
            names.append("")
            continue
        a = np.asarray(inp[0])
        n = f"i{i}"
        names.append(n)
        graph_inputs.append(helper.make_tensor_value_info(n, TP[DT[a.dtype]], list(a.shape)))
        feeds[n] = a
    while names and names[-1] == "":
        names.pop()
    outs = [f"o{i}" for i in range(c.nout)]
    node = helper.make_node(c.op, names, outs, **c.attrs)
    g = helper.make_graph([node], "g", graph_inputs, [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None)
                                                      for o in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", c.version)])
    m.ir_version = 8
    return ReferenceEvaluator(m).run(None, feeds)


def parse(stdout):
    res = {}
    cur = None
    for line in stdout.splitlines():
        if line.startswith("case "):
            cur = line[5:]
            res[cur] = []
        elif line == "endcase":
            cur = None
        else:
            res[cur].append(line)
    return res


def decode(line):
    head, _, vals = line.partition(" : ") if " : " in line else (line.rstrip(" :"), None, "")
    parts = head.split()
    dt, rank = int(parts[1]), int(parts[2])
    dims = [int(x) for x in parts[3:3 + rank]]
    toks = vals.split()
    npdt = NP[dt]
    if npdt == np.float16:
        arr = np.array([int(t) for t in toks], dtype=np.uint16).view(np.float16)
    elif npdt == np.bool_:
        arr = np.array([int(t) for t in toks], dtype=np.uint8).astype(np.bool_)
    elif npdt in (np.float32, np.float64):
        arr = np.array([float(t) for t in toks], dtype=npdt)
    else:
        arr = np.array([int(t) for t in toks], dtype=npdt)
    return arr.reshape(dims)


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return np.array_equal(a, b, equal_nan=True)
    return np.array_equal(a, b)


def compare(c: Case, lines: list[str] | None) -> str | None:
    """Why the harness's output lines for a case do not meet its expectation; None when they do."""
    if lines is None:
        return "no result (the harness stopped)"
    if c.expect in ("error", "refused", "nokernel"):
        kind = lines[0].split()[0] if lines else "?"
        if kind != c.expect:
            return f"expected {c.expect}, got {lines[0][:200] if lines else 'nothing'!r}"
        return f"message {lines[0]!r} lacks {c.match!r}" if c.match not in lines[0] else None
    if c.may_refuse and lines and lines[0].startswith("refused "):
        return None
    if c.expect == "ref":
        try:
            exp = reference(c)
        except Exception as e:
            return f"reference raised {type(e).__name__}: {e}"
    else:
        exp = c.expect
    if not lines or not lines[0].startswith("out "):
        return f"expected output, got {lines[0][:200] if lines else 'nothing'!r}"
    outs = [decode(line) for line in lines]
    if len(outs) != len(exp) or not all(same(o, e) for o, e in zip(outs, exp)):
        return (f"mismatch: got {[(o.dtype, o.shape) for o in outs]} {outs[0].ravel()[:12] if outs else []} "
                f"expected {[(np.asarray(e).dtype, np.asarray(e).shape) for e in exp]} "
                f"{np.asarray(exp[0]).ravel()[:12] if len(exp) else []}")
    return None


def run_cases(exe: Path, cases: list[Case], env: dict[str, str] | None = None, verbose: bool = False) -> list[str]:
    """Runs the cases through a built harness (all of them on one stdin); returns one line per failure
    ("NAME: why"), the harness's own failure (a non-zero exit: a contract violation or a sanitizer report) as
    "<harness>: ...". Prints refusals and errors when verbose."""
    text = "\n".join(serialize(c) for c in cases) + "\n"
    p = subprocess.run([str(exe)], input=text, capture_output=True, text=True, env=env)
    failures = []
    got = parse(p.stdout)
    if p.returncode != 0:
        # The harness flushes after every case: the first case without a result is the one it died in.
        at = next((c.name for c in cases if c.name not in got), "?")
        failures.append(f"<harness>: exited {p.returncode} in case {at}\n{p.stderr[-4000:]}")
    for c in cases:
        lines = got.get(c.name)
        status = compare(c, lines)
        if status:
            failures.append(f"{c.name}: {status}")
        elif verbose and lines and lines[0].split()[0] in ("error", "refused", "nokernel"):
            print(f"  {c.name}: {lines[0]}")
    return failures
