"""Host-memory buffers a session allocated for one run, after the run: ONNX Runtime frees them, and so does the
host, in a way that shows a plugin still using one.

ORT returns the buffers of a run (fused-node outputs it allocated, outputs it handed out and the caller dropped)
to its arena, which gives them to the next allocations: a plugin that keeps writing into one, typically a graph
replay on the buffers of the run that captured it, corrupts memory. The host fills each freed buffer with 0xFF
bytes (NaN for floats, -1 for ints), so a plugin reading one sees garbage at once, and keeps the most recent
ones in a bounded quarantine (never reused, so nothing else is corrupted); :meth:`FreedBuffers.written` names
each that was written after it was freed. Not thread-safe: the session calls it under its run lock or per run.
"""

from __future__ import annotations

from collections import deque

import numpy as np

POISON = 0xFF

#: Bytes of freed buffers kept in quarantine per session; older ones are dropped (and really freed).
QUARANTINE_BYTES = 64 << 20


class FreedBuffers:
    """The quarantine of one session: ``(buffer, what)`` of the freed buffers, newest last."""

    def __init__(self, limit: int = QUARANTINE_BYTES) -> None:
        self._buffers: deque[tuple[np.ndarray, str]] = deque()
        self._bytes = 0
        self._limit = limit

    def free(self, buffer: np.ndarray, what: str, quarantine: bool) -> None:
        """Poisons ``buffer``; keeps it (when ``quarantine``) to check later that nothing wrote into it."""
        if not buffer.size:
            return
        raw = buffer.reshape(-1).view(np.uint8)
        raw.fill(POISON)
        if not quarantine:
            return
        self._buffers.append((raw, what))
        self._bytes += raw.nbytes
        while self._bytes > self._limit and self._buffers:
            old, _ = self._buffers.popleft()
            self._bytes -= old.nbytes

    def written(self) -> list[str]:
        """What the buffers written since they were freed were (each reported once, then dropped)."""
        hits = [(raw, what) for raw, what in self._buffers if not np.all(raw == POISON)]
        if hits:
            ids = {id(raw) for raw, _ in hits}
            self._buffers = deque((raw, what) for raw, what in self._buffers if id(raw) not in ids)
            self._bytes = sum(raw.nbytes for raw, _ in self._buffers)
        return [what for _, what in hits]
