#!/usr/bin/env python3
"""End-to-end check of the data-movement kernels (shape_cases.py's ops) under a real onnxruntime.

One-node models per op, dtype (float, int32, int64, bool) and opset, shape inputs both as graph inputs and as
initializers, plus a magika-like chain of runtime shape computations. Each runs on a session with our EP
device (software adapter) and on ORT's CPU EP (tests/ort_smoke.py's run_case): every node must be placed on
EpAbiExecutionProvider and the outputs must agree. Then run-time errors (bad Reshape/Expand/Slice/Unsqueeze/
Squeeze/Gather inputs) must come back as statuses that name the op and our EP, not as crashes.

    EPABI_ALLOW_SOFTWARE_ADAPTER=1 ~/.cache/epabi/venvs/ort-1.32.0/bin/python tests/native/ort_shape_kernels.py \\
        /path/to/libepabi_plugin.so [-v]
"""

import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ort_smoke as S

F, I32, I64, B = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL
NPT = {F: np.float32, I32: np.int32, I64: np.int64, B: np.bool_}
TN = {F: "f32", I32: "i32", I64: "i64", B: "bool"}
rng = np.random.default_rng(7)


def make_model(nodes, inputs, outputs, inits=(), opset=17):
    """Like ort_smoke.make_model, without the checker (outputs here carry no shape)."""
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


S.make_model = make_model
cases = []


def data(shape, t):
    if t == F:
        return rng.standard_normal(shape).astype(np.float32)
    if t == B:
        return rng.integers(0, 2, shape).astype(np.bool_)
    return rng.integers(-100, 100, shape).astype(NPT[t])


def one_node(name, op, inputs, attrs=None, opset=17, as_init=(), out_type=None, expect_ours=1, symbolic=False):
    """inputs: list of (name, onnx type, array or None for absent). Names in as_init become initializers."""
    vis, feeds, inits, names = [], {}, [], []
    for nm, t, a in inputs:
        if a is None:
            names.append("")
            continue
        names.append(nm)
        if nm in as_init:
            inits.append(S.init(nm, a))
        else:
            shape = list(np.asarray(a).shape)
            # ORT folds Shape of a fully known shape into a constant; symbolic dims keep the node.
            vis.append(S.vi(nm, t, [f"d{k}" for k in range(len(shape))] if symbolic else shape))
            feeds[nm] = a
    while names and names[-1] == "":
        names.pop()
    ot = out_type if out_type is not None else inputs[0][1]
    node = helper.make_node(op, names, ["y"], name=f"n_{name}", **(attrs or {}))
    m = S.make_model([node], vis, [S.vi("y", ot, None)], inits, opset=opset)
    cases.append((name, m, feeds, {"expect_ours": expect_ours}))


for t in (F, I32, I64, B):
    tn = {F: "f32", I32: "i32", I64: "i64", B: "bool"}[t]
    x = data((2, 3, 4), t)
    for opset in (11, 13, 21):
        one_node(f"transpose_{tn}_o{opset}", "Transpose", [("x", t, x)], {"perm": [1, 2, 0]}, opset)
    one_node(f"transpose_default_{tn}", "Transpose", [("x", t, x)])
    for sh in ([4, -1], [0, -1], [-1], [2, 0, 2, 2]):
        for init in ((), ("s",)):
            one_node(f"reshape_{tn}_{sh}_{'init' if init else 'rt'}", "Reshape",
                     [("x", t, x), ("s", I64, np.array(sh, np.int64))], opset=14, as_init=init)
    one_node(f"reshape_allowzero_{tn}", "Reshape", [("x", t, data((0, 3), t)), ("s", I64, np.array([3, 0]))],
             {"allowzero": 1}, opset=14)
    x1 = data((1, 3, 1, 2), t)
    one_node(f"squeeze_o11_{tn}", "Squeeze", [("x", t, x1)], {"axes": [0, -2]}, opset=11)
    one_node(f"squeeze_o13_rt_{tn}", "Squeeze", [("x", t, x1), ("a", I64, np.array([2]))], opset=13)
    one_node(f"squeeze_o13_noaxes_{tn}", "Squeeze", [("x", t, x1)], opset=13)
    one_node(f"unsqueeze_o11_{tn}", "Unsqueeze", [("x", t, x)], {"axes": [0, -1]}, opset=11)
    one_node(f"unsqueeze_o13_rt_{tn}", "Unsqueeze", [("x", t, x), ("a", I64, np.array([-1, 1]))], opset=13)
    one_node(f"unsqueeze_o21_init_{tn}", "Unsqueeze", [("x", t, x), ("a", I64, np.array([0]))], opset=21,
             as_init=("a",))
    one_node(f"identity_{tn}", "Identity", [("x", t, x)], opset=21)
    for shp in ([2, 1, 3, 1], [3, 1, 1], [1], [2, 2, 3, 4]):
        xe = data((3, 1), t)
        for init in ((), ("s",)):
            one_node(f"expand_{tn}_{shp}_{'init' if init else 'rt'}", "Expand",
                     [("x", t, xe), ("s", I64, np.array(shp, np.int64))], opset=13, as_init=init)
    for ax in (0, 1, -1):
        ins = []
        for k in range(3):
            s = [2, 3, 4]
            s[ax] = k + 1
            ins.append((f"c{k}", t, data(tuple(s), t)))
        one_node(f"concat_{tn}_ax{ax}", "Concat", ins, {"axis": ax}, opset=13)
    xs = data((5, 6, 7), t)
    for st, en, ax, sp in [([1], [-1], [0], [1]), ([-1, 5], [-2**63, 0], [0, 1], [-1, -2]),
                           ([0, 2], [2**62, 4], [-1, -2], [3, 1]), ([100], [-100], [2], [-3]),
                           ([4], [2**63 - 1], [0], [-1]), ([3], [1], [1], [1])]:
        for init in ((), ("st", "en", "ax", "sp")):
            one_node(f"slice_{tn}_{st}_{en}_{ax}_{sp}_{'init' if init else 'rt'}", "Slice",
                     [("x", t, xs), ("st", I64, np.array(st, np.int64)), ("en", I64, np.array(en, np.int64)),
                      ("ax", I64, np.array(ax, np.int64)), ("sp", I64, np.array(sp, np.int64))], opset=13,
                     as_init=init)
    one_node(f"slice_i32params_{tn}", "Slice",
             [("x", t, xs), ("st", I32, np.array([1, -3], np.int32)), ("en", I32, np.array([2**31 - 1, -1], np.int32)),
              ("ax", I32, np.array([1, 2], np.int32)), ("sp", I32, np.array([2, 1], np.int32))], opset=13)
    one_node(f"slice_noaxes_{tn}", "Slice",
             [("x", t, xs), ("st", I64, np.array([1, 1])), ("en", I64, np.array([3, 4]))], opset=13)
    one_node(f"slice_o1_{tn}", "Slice", [("x", t, xs)], {"starts": [1, -3], "ends": [100, -1], "axes": [0, 2]},
             opset=9)
    for ax in (0, 1, -1):
        one_node(f"gather_{tn}_ax{ax}", "Gather", [("x", t, x), ("i", I64, np.array([[1, -1], [0, 1]]))],
                 {"axis": ax}, opset=13)
        one_node(f"gather_i32_{tn}_ax{ax}", "Gather", [("x", t, x), ("i", I32, np.array(-1, np.int32))],
                 {"axis": ax}, opset=13)
    one_node(f"shape_{tn}", "Shape", [("x", t, x)], opset=13, out_type=I64, symbolic=True)
    one_node(f"shape15_{tn}", "Shape", [("x", t, x)], {"start": -2}, opset=15, out_type=I64, symbolic=True)
    one_node(f"shape15b_{tn}", "Shape", [("x", t, x)], {"start": 1, "end": -1}, opset=21, out_type=I64, symbolic=True)


def multi_out(name, op, inputs, n_out, attrs=None, opset=18, as_init=()):
    """one_node for ops with several outputs (Split)."""
    vis, feeds, inits, names = [], {}, [], []
    for nm, t, a in inputs:
        names.append(nm)
        if nm in as_init:
            inits.append(S.init(nm, a))
        else:
            vis.append(S.vi(nm, t, list(np.asarray(a).shape)))
            feeds[nm] = a
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, name=f"n_{name}", **(attrs or {}))
    m = S.make_model([node], vis, [S.vi(o, inputs[0][1], None) for o in outs], inits, opset=opset)
    cases.append((name, m, feeds, {"expect_ours": 1}))


def copy_ops():
    """Split, Flatten, Tile and Pad: one-node models, their shape inputs at run time and as initializers."""
    value = {F: 1.5, I32: -7, I64: 2 ** 40, B: True}
    for t in (F, I32, I64, B):
        tn = TN[t]
        x = data((2, 6, 4), t)
        multi_out(f"split13_{tn}", "Split", [("x", t, x), ("s", I64, np.array([1, 5]))], 2, {"axis": 1}, opset=13)
        multi_out(f"split13_init_{tn}", "Split", [("x", t, x), ("s", I64, np.array([3, 1]))], 2, {"axis": -1},
                  opset=13, as_init=("s",))
        multi_out(f"split18_{tn}", "Split", [("x", t, x)], 3, {"axis": 1, "num_outputs": 3})
        multi_out(f"split11_{tn}", "Split", [("x", t, x)], 2, {"split": [2, 4], "axis": 1}, opset=11)
        for ax in (0, 2, -1):
            one_node(f"flatten_{tn}_ax{ax}", "Flatten", [("x", t, x)], {"axis": ax}, opset=13)
        for init in ((), ("r",)):
            tag = "init" if init else "rt"
            one_node(f"tile_{tn}_{tag}", "Tile", [("x", t, x), ("r", I64, np.array([2, 1, 3]))], opset=13,
                     as_init=init)
            one_node(f"pad_{tn}_{tag}", "Pad", [("x", t, x), ("p", I64, np.array([0, 1, 2, 1, 0, 3]))], opset=18,
                     as_init=init)
            for mode in ("edge", "reflect"):
                one_node(f"pad_{mode}_{tn}_{tag}", "Pad", [("x", t, x), ("p", I64, np.array([1, 2, 0, 0, 3, 1]))],
                         {"mode": mode}, opset=18, as_init=init)
        for init in ((), ("v",)):
            one_node(f"pad_value_axes_{tn}_{'init' if init else 'rt'}", "Pad",
                     [("x", t, x), ("p", I64, np.array([1, -1])), ("v", t, np.array(value[t], NPT[t])),
                      ("a", I64, np.array([-2]))], opset=18, as_init=init)
        # pads within the axis lengths: ORT before 1.32 wraps a longer pre-pad wrongly (shape_cases.py checks those)
        one_node(f"pad_wrap_{tn}", "Pad", [("x", t, x), ("p", I64, np.array([0, 2, 3, 0, 5, 1]))], {"mode": "wrap"},
                 opset=19)


copy_ops()


def generator_ops():
    """ConstantOfShape of every dtype here and Range of its five dtypes, their inputs at run time."""
    value = {F: 1.5, I32: -7, I64: 2 ** 40, B: True}
    for t in (F, I32, I64, B):
        v = helper.make_tensor("value", t, [1], [value[t]])
        one_node(f"constantofshape_{TN[t]}", "ConstantOfShape", [("s", I64, np.array([2, 3, 1]))], {"value": v},
                 opset=20, out_type=t)
    for t, npt, (a, b, d) in [(F, np.float32, (0.5, 7.25, 0.75)), (TensorProto.DOUBLE, np.float64, (1.0, -2.0, -0.3)),
                              (TensorProto.INT16, np.int16, (-4, 9, 3)), (I32, np.int32, (9, -9, -2)),
                              (I64, np.int64, (0, 10, 1))]:
        one_node(f"range_{np.dtype(npt).name}", "Range", [("a", t, np.array(a, npt)), ("b", t, np.array(b, npt)),
                                                          ("d", t, np.array(d, npt))], opset=11)


generator_ops()


def reduction_ops():
    """ArgMax / ArgMin with ties on float, int32, int64; ReduceMin / Prod / L2 with axes as an input."""
    for t in (F, I32, I64):
        for op in ("ArgMax", "ArgMin"):
            xa = rng.integers(0, 4, (3, 5, 4)).astype(NPT[t])   # ties
            one_node(f"{op.lower()}_{TN[t]}", op, [("x", t, xa)], {"axis": 1}, opset=13, out_type=I64)
            one_node(f"{op.lower()}_last_{TN[t]}", op, [("x", t, xa)], {"axis": -1, "select_last_index": 1,
                                                                    "keepdims": 0}, opset=13, out_type=I64)
    for op in ("ReduceMin", "ReduceProd", "ReduceL2"):
        one_node(f"{op.lower()}_18", op, [("x", F, data((2, 3, 4), F)), ("a", I64, np.array([1, -1]))], opset=18)


reduction_ops()


def resize_ops():
    """Nearest Resize on float and int32 (scales as an initializer, sizes at run time) and linear Resize."""
    for t in (F, I32):
        xr = data((1, 2, 3, 5), t)
        sc = np.array([1, 1, 2, 1.5], np.float32)
        one_node(f"resize_nearest_{TN[t]}", "Resize", [("x", t, xr), ("roi", F, None), ("sc", F, sc)],
                 {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
                 opset=13, as_init=("sc",))
        one_node(f"resize_nearest_sizes_{TN[t]}", "Resize",
                 [("x", t, xr), ("roi", F, None), ("sc", F, None), ("sz", I64, np.array([1, 2, 7, 3]))], opset=19)
    xr = data((1, 3, 4, 6), F)
    one_node("resize_linear_half_pixel", "Resize",
             [("x", F, xr), ("roi", F, None), ("sc", F, np.array([1, 1, 2, 0.5], np.float32))],
             {"mode": "linear"}, opset=13, as_init=("sc",))
    one_node("resize_linear_align_corners_sizes", "Resize",
             [("x", F, xr), ("roi", F, None), ("sc", F, None), ("sz", I64, np.array([1, 3, 9, 4]))],
             {"mode": "linear", "coordinate_transformation_mode": "align_corners"}, opset=13)


resize_ops()


def detector_chain():
    """A detector-style neck: Split along channels, an upsampling Resize, a Tile, a Pad, Concat and ArgMax, with a
    Range over a runtime dim and a ConstantOfShape of a runtime shape (the host-step shape plumbing)."""
    n = helper.make_node
    f1 = helper.make_tensor("one", F, [1], [1.0])
    nodes = [
        n("Split", ["x", "halves"], ["a", "b"], axis=1, name="split"),
        n("Resize", ["a", "", "up2"], ["a2"], mode="nearest", coordinate_transformation_mode="asymmetric",
          nearest_mode="floor", name="resize"),
        n("Tile", ["b", "rep"], ["b2"], name="tile"),
        n("Concat", ["a2", "b2"], ["c"], axis=1, name="concat"),
        n("Pad", ["c", "pads"], ["cp"], mode="edge", name="pad"),
        n("ArgMax", ["cp"], ["am"], axis=1, keepdims=0, name="argmax"),
        n("Shape", ["cp"], ["shp"], name="shape"),
        n("Gather", ["shp", "two"], ["h"], axis=0, name="gather_h"),
        n("Range", ["zero", "h", "one_i"], ["rows"], name="range"),
        n("ConstantOfShape", ["shp"], ["ones"], value=f1, name="cos"),
        n("Flatten", ["ones"], ["flat"], axis=2, name="flatten"),
    ]
    inits = [S.init("halves", np.array([2, 2], np.int64)), S.init("up2", np.array([1, 1, 2, 2], np.float32)),
             S.init("rep", np.array([1, 1, 2, 2], np.int64)), S.init("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1])),
             S.init("two", np.array(2, np.int64)), S.init("zero", np.array(0, np.int64)),
             S.init("one_i", np.array(1, np.int64))]
    outs = [S.vi("am", I64, None), S.vi("rows", I64, None), S.vi("flat", F, None), S.vi("cp", F, None)]
    m = S.make_model(nodes, [S.vi("x", F, ["N", 4, "H", "W"])], outs, inits, opset=18)
    cases.append(("detector_like_chain", m, {"x": data((2, 4, 3, 5), F)}, {"expect_ours": 1}))


detector_chain()


def chain():
    """Magika-style shape plumbing: everything runtime-computed, int64 and int32 mixed."""
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["shp"], name="shape"),
        n("Gather", ["shp", "zero"], ["batch"], axis=0, name="gather_b"),
        n("Unsqueeze", ["batch", "ax0"], ["batch1"], name="unsq_b"),
        n("Concat", ["batch1", "m1", "four"], ["newshape"], axis=0, name="concat_shape"),
        n("Reshape", ["x", "newshape"], ["r"], name="reshape"),
        n("Transpose", ["r"], ["rt"], perm=[0, 2, 1], name="transpose"),
        n("Shape", ["rt"], ["rts"], start=1, name="shape_tail"),
        n("Slice", ["rt", "st", "rts_last", "ax2"], ["sl"], name="slice"),
        n("Concat", ["batch1", "rts"], ["exshape"], axis=0, name="concat_ex"),
        n("Expand", ["bias", "exshape"], ["bx"], name="expand"),
        n("Squeeze", ["bx", "ax0"], ["bxs"], name="squeeze") if False else n("Identity", ["bx"], ["bxs"], name="id"),
        n("Unsqueeze", ["sl", "ax0"], ["slu"], name="unsq_sl"),
        n("Squeeze", ["slu", "ax0"], ["y1"], name="squeeze"),
        n("Gather", ["rts", "zero"], ["d4"], axis=0, name="gather_d"),
        n("Unsqueeze", ["d4", "ax0"], ["rts_last"], name="unsq_d"),
    ]
    inits = [S.init("zero", np.array(0, np.int64)), S.init("ax0", np.array([0], np.int64)),
             S.init("m1", np.array([-1], np.int64)), S.init("four", np.array([4], np.int64)),
             S.init("st", np.array([1], np.int64)), S.init("ax2", np.array([2], np.int64)),
             S.init("bias", rng.standard_normal((1, 4, 1)).astype(np.float32))]
    m = S.make_model(nodes, [S.vi("x", F, ["N", 12])], [S.vi("y1", F, None), S.vi("bxs", F, None)], inits, opset=17)
    cases.append(("magika_like_chain", m, {"x": data((5, 12), F)}, {"expect_ours": 1}))


chain()


def errors():
    """Run-time errors must come back as statuses naming the value, not crashes."""
    out = []
    n = helper.make_node
    m = S.make_model([n("Reshape", ["x", "s"], ["y"], name="rs")], [S.vi("x", F, [2, 3]), S.vi("s", I64, [2])],
                     [S.vi("y", F, None)], opset=14)
    out.append(("reshape_count", m, {"x": data((2, 3), F), "s": np.array([4, -1], np.int64)}, "Reshape"))
    m = S.make_model([n("Expand", ["x", "s"], ["y"], name="ex")], [S.vi("x", F, [2, 3]), S.vi("s", I64, [1])],
                     [S.vi("y", F, None)], opset=13)
    out.append(("expand_clash", m, {"x": data((2, 3), F), "s": np.array([4], np.int64)}, "Expand"))
    m = S.make_model([n("Slice", ["x", "a", "b", "c", "d"], ["y"], name="sl")],
                     [S.vi("x", F, [2, 3])] + [S.vi(k, I64, [1]) for k in "abcd"], [S.vi("y", F, None)], opset=13)
    out.append(("slice_step0", m, {"x": data((2, 3), F), "a": np.array([0]), "b": np.array([1]), "c": np.array([0]),
                                   "d": np.array([0])}, "Slice"))
    m = S.make_model([n("Unsqueeze", ["x", "a"], ["y"], name="us")], [S.vi("x", F, [2, 3]), S.vi("a", I64, [2])],
                     [S.vi("y", F, None)], opset=13)
    out.append(("unsqueeze_dup", m, {"x": data((2, 3), F), "a": np.array([0, 0])}, "Unsqueeze"))
    m = S.make_model([n("Squeeze", ["x", "a"], ["y"], name="sq")], [S.vi("x", F, [2, 3]), S.vi("a", I64, [1])],
                     [S.vi("y", F, None)], opset=13)
    out.append(("squeeze_not1", m, {"x": data((2, 3), F), "a": np.array([1])}, "Squeeze"))
    m = S.make_model([n("Gather", ["x", "i"], ["y"], name="ga")], [S.vi("x", F, [2, 3]), S.vi("i", I64, [2])],
                     [S.vi("y", F, None)], opset=13)
    out.append(("gather_oob", m, {"x": data((2, 3), F), "i": np.array([1, 2])}, "Gather"))
    m = S.make_model([n("Pad", ["x", "p"], ["y"], mode="reflect", name="pd")],
                     [S.vi("x", F, [2, 3]), S.vi("p", I64, [4])], [S.vi("y", F, None)], opset=18)
    out.append(("pad_reflect_too_far", m, {"x": data((2, 3), F), "p": np.array([0, 3, 0, 0])}, "Pad"))
    m = S.make_model([n("Tile", ["x", "r"], ["y"], name="tl")], [S.vi("x", F, [2, 3]), S.vi("r", I64, [2])],
                     [S.vi("y", F, None)], opset=13)
    out.append(("tile_negative", m, {"x": data((2, 3), F), "r": np.array([1, -2])}, "Tile"))
    m = S.make_model([n("Range", ["a", "b", "d"], ["y"], name="ra")], [S.vi(k, I64, []) for k in "abd"],
                     [S.vi("y", I64, None)], opset=11)
    out.append(("range_delta0", m, {"a": np.array(0), "b": np.array(5), "d": np.array(0)}, "Range"))
    m = S.make_model([n("Split", ["x", "s"], ["y0", "y1"], name="sp")], [S.vi("x", F, [5]), S.vi("s", I64, [2])],
                     [S.vi("y0", F, None), S.vi("y1", F, None)], opset=13)
    out.append(("split_sum", m, {"x": data((5,), F), "s": np.array([2, 2])}, "Split"))
    fails = 0
    for name, m, feeds, word in out:
        sess = S.session(m, True)
        assert sess.get_providers()[0] == S.EP_NAME
        try:
            sess.run(None, feeds)
            print(f"FAIL error_{name}: no error")
            fails += 1
        except Exception as e:
            msg = str(e)
            ok = word in msg and S.EP_NAME in msg
            print(f"{'ok  ' if ok else 'FAIL'} error_{name}: {msg.splitlines()[-1][-200:]}")
            fails += not ok
    return fails


def main():
    lib = sys.argv[1]
    ort.register_execution_provider_library("epabi", lib)
    dev = [d for d in ort.get_ep_devices() if d.ep_name == S.EP_NAME]
    assert dev, "no EpAbiExecutionProvider device"
    fails = 0
    for name, m, feeds, kw in cases:
        try:
            ok, detail = S.run_case(m, feeds, **kw)
        except Exception as e:
            ok, detail = False, f"{type(e).__name__}: {e}"
        if not ok:
            fails += 1
            print(f"FAIL {name}: {detail}")
        elif "-v" in sys.argv:
            print(f"ok   {name}: {detail}")
    print(f"{len(cases) - fails}/{len(cases)} one-node/chain cases match the CPU EP on {S.EP_NAME}")
    fails += errors()
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
