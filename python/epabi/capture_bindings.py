"""One call's bound inputs and outputs as graph capture sees them (epabi's host; ONNX Runtime checks neither).

**Binding key** (the stale-replay check). A captured graph reads the input addresses and writes the output
addresses its capturing run used, with the shapes that run had; nothing is re-derived at a replay. The key of a
call is one tuple: per session input and output, ``(address, shape, dtype)`` of the value the call binds (None
for an output the host would allocate afresh: plain ``run()``, an output bound without a buffer), then the bytes
of each graph input that feeds a shape input (:mod:`epabi.shape_inputs`: the graph keeps the values its
capturing run read there). :class:`~epabi.capture.GraphCapture` keeps the capturing run's key per thread and
annotation id and compares it with the key of every replaying call (a tuple build and one comparison: a few
words per binding); :meth:`BindingLayout.stale_error` names each difference.

**Aliased inputs** (state advanced once per call). ORT's run loop executes a run up to 8 times inside one call
while it waits for the EP to capture (:mod:`epabi.capture`); an input whose memory overlaps a bound output
(``state_out`` bound to ``state``'s buffer) would advance once per hidden execution.
:meth:`CallBindings.snapshot_aliased` copies such inputs before the call's first execution, and
:meth:`AliasSnapshot.restore` writes the copies back in place (same addresses: a capture still records the
caller's buffers) before each further execution.

Thread-safety: a :class:`CallBindings` belongs to one call; a :class:`BindingLayout` is immutable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .device_memory import DeviceValue
from .errors import StaleReplayError
from .values import OrtValue

_Entry = tuple[int, tuple[int, ...], Any] | None


def _entry(value: Any) -> _Entry:
    """(address, shape, dtype) of a tensor value (host OrtValue, DeviceValue or numpy array); None otherwise."""
    if isinstance(value, OrtValue):
        return value.binding_key()
    if isinstance(value, np.ndarray):
        return value.__array_interface__["data"][0], value.shape, value.dtype
    return None


def _value_bytes(value: Any) -> bytes | None:
    """The data of a (small) tensor, read from the host or copied from device memory."""
    if isinstance(value, OrtValue):
        return value.numpy().tobytes()
    if isinstance(value, np.ndarray):
        return value.tobytes()
    return None


def _space(value: Any) -> Any:
    """Where an address lives: the memory device of a DeviceValue, None for host memory."""
    return value.memory_info.device if isinstance(value, DeviceValue) else None


class BindingLayout:
    """What a session's binding keys hold: its input and output names, and the inputs compared by value.

    Args:
        inputs: the session's inputs, in order.
        outputs: the session's outputs, in order.
        by_value: inputs that feed shape inputs (:func:`epabi.shape_inputs.inputs_feeding_shape_inputs`).
    """

    def __init__(self, inputs: Sequence[str], outputs: Sequence[str], by_value: Sequence[str]) -> None:
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.by_value = tuple(by_value)

    def bindings(self, feeds: Mapping[str, Any], outputs: Mapping[str, OrtValue]) -> CallBindings:
        """One call's bindings: its feeds and its outputs bound to buffers (name -> value)."""
        return CallBindings(self, feeds, outputs)

    def _labels(self) -> list[tuple[str, str]]:
        return ([(f"input '{n}'", "tensor") for n in self.inputs] + [(f"output '{n}'", "tensor") for n in self.outputs]
                + [(f"input '{n}'", "value") for n in self.by_value])

    def changes(self, captured: tuple, now: tuple) -> list[tuple[str, str, object, object]]:
        """Each difference between two keys: ``(value, what, captured, now)``, what = address/shape/dtype/value."""
        found: list[tuple[str, str, object, object]] = []
        labels = self._labels()
        was = {label: e for (label, kind), e in zip(labels, captured, strict=True) if kind == "tensor"}
        is_ = {label: e for (label, kind), e in zip(labels, now, strict=True) if kind == "tensor"}
        for (label, kind), old, new in zip(labels, captured, now, strict=True):
            if old == new:
                continue
            if kind == "value":
                found.append((label, "value", _show_value(old, was.get(label)), _show_value(new, is_.get(label))))
                continue
            if old is None or new is None:
                is_input = label.startswith("input")
                found.append((label, "address", _show_address(old, is_input), _show_address(new, is_input)))
                continue
            for what, i, show in (("address", 0, hex), ("shape", 1, list), ("dtype", 2, str)):
                if old[i] != new[i]:
                    found.append((label, what, show(old[i]), show(new[i])))
        return found

    def stale_error(self, graph_id: int, captured: tuple, now: tuple, note: str = "") -> StaleReplayError:
        """The error refusing a replay of ``graph_id`` whose key changed from ``captured`` to ``now``."""
        changes = self.changes(captured, now)
        by_value: dict[str, list[str]] = {}
        for value, what, old, new in changes:
            shown = "value (it feeds a shape input, read on the host)" if what == "value" else what
            by_value.setdefault(value, []).append(f"{shown} {old} -> {new}")
        listed = "; ".join(f"{value}: {', '.join(parts)}" for value, parts in by_value.items())
        return StaleReplayError(graph_id, changes, (
            f"stale replay refused: the graph of annotation id {graph_id} was captured with other bindings "
            f"({listed}); a replay reads and writes only the captured addresses, with the captured shapes and "
            "shape-input values. Bind the captured buffers again (update inputs in place), use one gpu_graph_id "
            "per shape or buffer set, release the graph (release_captured_graph), or set "
            f"epabi.graph_capture.on_binding_change=recapture{note}"))


def _show_address(entry: _Entry, is_input: bool = False) -> str:
    if entry is None and is_input:  # only an overridable initializer may be left unfed
        return "none (not fed: the initializer's own value)"
    if entry is None:
        return "none (the host allocates a fresh buffer: plain run() or an output bound without a buffer)"
    return f"{hex(entry[0])} ({entry[2]}{list(entry[1])})"


def _show_value(data: bytes | None, meta: _Entry) -> object:
    if data is None or meta is None or meta[2] is None:
        return data
    try:
        return np.frombuffer(data, dtype=meta[2]).reshape(meta[1]).tolist()
    except ValueError:  # not a plain fixed-size tensor: show the bytes
        return data.hex()


class CallBindings:
    """The feeds and bound outputs of one call (values are referenced, not copied)."""

    __slots__ = ("feeds", "layout", "outputs")

    def __init__(self, layout: BindingLayout, feeds: Mapping[str, Any], outputs: Mapping[str, OrtValue]) -> None:
        self.layout = layout
        self.feeds = feeds
        self.outputs = outputs

    def key(self, produced: Mapping[str, Any] | None = None) -> tuple:
        """The binding key (module doc). ``produced``: the values a capturing run made for outputs the call did
        not bind (their buffers are what its graph writes); None at a replay, where such outputs have none."""
        layout, feeds, outputs = self.layout, self.feeds, self.outputs
        outs = outputs if produced is None else {**produced, **outputs}
        entry = _entry
        if not layout.by_value:  # the usual case, kept short: it runs before every replay
            return (*[entry(feeds.get(n)) for n in layout.inputs], *[entry(outs.get(n)) for n in layout.outputs])
        return (*[entry(feeds.get(n)) for n in layout.inputs], *[entry(outs.get(n)) for n in layout.outputs],
                *[_value_bytes(feeds.get(n)) for n in layout.by_value])

    def snapshot_aliased(self) -> AliasSnapshot | None:
        """Copies of the feeds whose memory overlaps a bound output (same memory device); None when none do."""
        ranges = [(_space(v), v.data_ptr(), v.data_ptr() + v.nbytes) for v in self.outputs.values()
                  if isinstance(v, OrtValue) and v.nbytes]
        if not ranges:
            return None
        saved: list[tuple[Any, np.ndarray]] = []
        for value in self.feeds.values():
            if isinstance(value, OrtValue):
                space, start, size = _space(value), value.data_ptr(), value.nbytes
            elif isinstance(value, np.ndarray):
                space, start, size = None, value.__array_interface__["data"][0], value.nbytes
            else:
                continue
            if size and any(s == space and lo < start + size and start < hi for s, lo, hi in ranges):
                saved.append((value, np.array(value.numpy() if isinstance(value, OrtValue) else value, copy=True)))
        return AliasSnapshot(saved) if saved else None


class AliasSnapshot:
    """Host copies of aliased feeds, written back in place by :meth:`restore`."""

    def __init__(self, saved: list[tuple[Any, np.ndarray]]) -> None:
        self._saved = saved

    def restore(self) -> None:
        """Writes every copy back into its value's buffer (device values through the plugin's data transfer)."""
        for value, copy in self._saved:
            if isinstance(value, OrtValue):
                value.update_inplace(copy)
            else:
                np.copyto(value, copy)
