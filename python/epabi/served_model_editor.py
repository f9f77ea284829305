"""The served ``OrtModelEditorApi`` (``OrtApi::GetModelEditorApi``, ORT 1.22+).

Plugin EPs ask for the table at registration (ONNX Runtime's kernel-based plugin EPs, WebGPU among them, keep it
beside ``OrtApi`` and ``OrtEpApi``) but build no models through it while a host runs them, so the table is
served and each member is a trap that names itself (``OrtModelEditorApi::CreateModel (slot 12, since 1.22) is not
served by the epabi host``) and answers ``ORT_NOT_IMPLEMENTED``, as ``ServedApi`` fills every unserved slot. A
member a plugin turns out to need is implemented here, named as in ONNX Runtime.
"""

from __future__ import annotations

from typing import Any


class ModelEditorApi:
    """Served ``OrtModelEditorApi`` members (none yet: see the module docstring); ``self.s`` is the ServedApi."""

    def __init__(self, served: Any) -> None:
        self.s = served
