"""What a profile (``SessionOptions.enable_profiling``) must show of the plugin's work, on either host.

:func:`expected_events` derives, from a sequence of calls (each a ``gpu_graph_id``), the EP events the plugin
must write (native/ep_profiler.h): one ``epabi_compute`` per fused-node Compute, one ``epabi_capture`` per kept
capture, one ``epabi_replay`` per ReplayGraph, as the hosts' capture loop and the plugin's warm-up policy make them.
:func:`check_profile` compares a parsed profile with that and checks what every profile must satisfy: ORT's event
layout, positive durations, timestamps that never go back, each Compute inside its host node event and each
capture and replay inside a ``model_run``, the process and thread that ran the session.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

EP = "EpAbiExecutionProvider"
EP_EVENTS = ("epabi_compute", "epabi_capture", "epabi_replay")
#: Timestamps and durations are whole microseconds: the EP rounds durations up, the host truncates its own.
SLACK_US = 2


@dataclass
class Expected:
    """EP events in order: computes as (annotation id or None without graphs, graph_phase or None)."""

    computes: list[tuple[int | None, str | None]] = field(default_factory=list)
    captures: list[int] = field(default_factory=list)
    replays: list[int] = field(default_factory=list)
    executions: int = 0  # model_run events that executed the graph (each capture-loop run included)


def expected_events(calls: list[int], graph: bool, min_runs: int = 2) -> Expected:
    """The events of ``calls`` on one thread: with graphs, an id captures after ``min_runs`` regular runs of it,
    all inside its first call (the hosts run again until the id is captured); id -1 never captures."""
    out = Expected()
    regular: dict[int, int] = defaultdict(int)
    captured: set[int] = set()
    for gid in calls:
        if not graph:
            out.computes.append((None, None))
            out.executions += 1
            continue
        if gid != -1 and gid in captured:
            out.replays.append(gid)
            continue
        while True:
            out.executions += 1
            if gid != -1 and regular[gid] >= min_runs:
                out.computes.append((gid, "capture"))
                out.captures.append(gid)
                captured.add(gid)
                break
            out.computes.append((gid, "regular"))
            if gid == -1:
                break
            regular[gid] += 1
    return out


def _encloses(outer: dict[str, Any], inner: dict[str, Any]) -> bool:
    return outer["ts"] - SLACK_US <= inner["ts"] and \
        inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + SLACK_US


#: The EP places its events from the offset the host passes to StartProfiling, read on the host's clock a moment
#: before the EP reads its own (as onnxruntime does), so every EP event may sit earlier by that moment: a preemption
#: between the two reads (seen: 17 us on a loaded CI machine). A wrong origin is off by far more than this bound.
MAX_ORIGIN_LAG_US = 1000


def _origin_lag(ours: list[dict[str, Any]], parents: list[dict[str, Any]]) -> int:
    """The smallest shift (us, 0 .. MAX_ORIGIN_LAG_US) that puts every EP event inside exactly one event of
    ``parents`` of its parent's name; 0 when none does (the checks below then name the event that is outside)."""
    named = [(ev, [p for p in parents if p["name"] == ev["args"].get("parent_name")]) for ev in ours]
    candidates = sorted({0} | {p["ts"] - ev["ts"] for ev, ps in named for p in ps
                               if 0 < p["ts"] - ev["ts"] <= MAX_ORIGIN_LAG_US})
    for lag in candidates:
        if all(sum(_encloses(p, {**ev, "ts": ev["ts"] + lag}) for p in ps) == 1 for ev, ps in named):
            return lag
    return 0


def check_profile(profile: list[dict[str, Any]], expected: Expected, node_count: int, pid: int, tid: int,
                  replayed_at_capture: bool = False) -> None:
    """Raises AssertionError naming what in ``profile`` (the parsed JSON) differs from ``expected``.
    ``replayed_at_capture``: the EP replays a graph once right after capturing it (CUDA; the software adapter
    does not), so an id's first ReplayGraph is its graph's second replay."""
    assert isinstance(profile, list) and profile, "the profile is not a non-empty JSON array"
    for ev in profile:
        assert set(ev) == {"cat", "pid", "tid", "dur", "ts", "ph", "name", "args"}, ev
        assert ev["ph"] == "X" and isinstance(ev["ts"], int) and isinstance(ev["dur"], int), ev
    ours = [ev for ev in profile if ev["name"] in EP_EVENTS]
    assert ours == [ev for ev in profile if ev["cat"] == "Kernel"], "Kernel events other than the plugin's"
    runs = [ev for ev in profile if ev["name"] == "model_run"]
    nodes = [ev for ev in profile if ev["cat"] == "Node" and ev["args"].get("provider") == EP]
    assert len(runs) == expected.executions + len(expected.replays), [(e["ts"], e["dur"]) for e in runs]
    assert len(nodes) == expected.executions, "one host node event per Compute of the fused node"
    ts = [ev["ts"] for ev in runs]
    assert ts == sorted(ts) and len(set(ts)) == len(ts), f"model_run timestamps go back: {ts}"
    ts = [ev["ts"] for ev in ours]
    assert ts == sorted(ts), f"EP event timestamps go back: {ts}"
    for ev in ours:
        args = ev["args"]
        assert ev["pid"] == pid and ev["tid"] == tid, (ev, pid, tid)
        assert ev["dur"] >= 1 and int(args["duration_ns"]) > 0, ev
        assert args["ep_name"] == EP and args["node_count"] == str(node_count), ev
    lag = _origin_lag(ours, runs + nodes)
    ours = [{**ev, "ts": ev["ts"] + lag} for ev in ours]
    computes = [ev for ev in ours if ev["name"] == "epabi_compute"]
    captures = [ev for ev in ours if ev["name"] == "epabi_capture"]
    replays = [ev for ev in ours if ev["name"] == "epabi_replay"]
    got = [(int(c["args"]["annotation_id"]) if "annotation_id" in c["args"] else None, c["args"].get("graph_phase"))
           for c in computes]
    assert got == expected.computes
    assert [int(c["args"]["annotation_id"]) for c in captures] == expected.captures
    assert [int(r["args"]["annotation_id"]) for r in replays] == expected.replays
    names = {c["args"]["node_name"] for c in computes}
    assert len(names) == 1, names
    (fused,) = names
    assert {n["name"] for n in nodes} == {f"{fused}_kernel_time"}
    for compute in computes:  # each inside the host's event of its fused node
        assert compute["args"]["parent_name"] == f"{fused}_kernel_time", compute
        assert sum(_encloses(n, compute) for n in nodes) == 1, (compute, nodes)
    for capture in captures:
        assert capture["args"]["parent_name"] == "model_run", capture
        assert capture["args"]["fused_node_count"] == "1" and int(capture["args"]["launches"]) > 0, capture
        assert sum(_encloses(r, capture) for r in runs) == 1, capture
        inside = [c for c in computes if _encloses(capture, c)]
        assert [c["args"]["graph_phase"] for c in inside] == ["capture"], (capture, inside)
    seen: dict[int, int] = defaultdict(lambda: int(replayed_at_capture))
    for replay in replays:
        gid = int(replay["args"]["annotation_id"])
        seen[gid] += 1
        assert replay["args"]["replay"] == str(seen[gid]), replay
        assert replay["args"]["parent_name"] == "model_run", replay
        assert sum(_encloses(r, replay) for r in runs) == 1, replay
