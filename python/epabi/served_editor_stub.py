"""A stand-in ``OrtApi::GetModelEditorApi`` until the host serves the model editor API.

Plugins built on ONNX Runtime's C++ helpers (the WebGPU plugin EP) fetch the model editor table when they load
and refuse to load when it is NULL, though they call none of it to run models. This answers with a table whose
every entry is a trap: a plugin that calls one gets NULL back and the call into it fails with a
:class:`HostLimitationError` naming the entry. Mixed in last, so a real implementation anywhere else wins.
"""

from __future__ import annotations

from typing import Any

from ._ffi import ffi

#: Entries of the stand-in table: more than any ORT release's OrtModelEditorApi has (traps past its end are unused).
_ENTRIES = 64


class EditorApiStub:
    """Mixin of ``_OrtApiImpl``: needs ``self.s`` (ServedApi)."""

    s: Any

    def GetModelEditorApi(self) -> Any:
        table = self.__dict__.get("_editor_table")
        if table is None:
            conduct = self.s.host.conduct
            traps = []
            for slot in range(_ENTRIES):
                def trap(slot: int = slot) -> Any:
                    conduct.limitation(f"OrtModelEditorApi slot {slot} is not served by the epabi host")
                    return ffi.NULL

                traps.append(ffi.callback("void*(*)(void)", trap))
            table = ffi.new("void*[]", [ffi.cast("void*", t) for t in traps])
            self.__dict__["_editor_traps"] = traps  # the callbacks live as long as the table
            self.__dict__["_editor_table"] = table
        return ffi.cast("const OrtModelEditorApi*", table)
