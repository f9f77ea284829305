"""``OrtModelMetadata`` and ``OrtExternalInitializerInfo``: what a plugin may ask about the model behind a graph.

:class:`ModelMetadata` holds the model's producer, graph name, domain, description, graph description, version and
custom metadata map (``metadata_props``), as ``Graph_GetModelMetadata`` hands them to a plugin (ORT 1.23+);
:class:`ExternalInitializerInfo` is where an initializer's data lives in an external file. Read-only after
construction; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import onnx

from ._ffi import ffi


@dataclass(eq=False)
class ModelMetadata:
    """Model-level facts of an ONNX model (ONNX names: ``producer_name``, ``domain``, ``model_version``, ...)."""

    producer_name: str = ""
    graph_name: str = ""
    domain: str = ""
    description: str = ""
    graph_description: str = ""
    version: int = 0
    custom: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ptr: Any = ffi.NULL

    @property
    def custom_metadata_map(self) -> dict[str, str]:
        """``custom`` under onnxruntime's Python name (``InferenceSession.get_modelmeta()``)."""
        return self.custom

    @custom_metadata_map.setter
    def custom_metadata_map(self, value: dict[str, str]) -> None:
        self.custom = value

    @classmethod
    def of(cls, model: onnx.ModelProto) -> ModelMetadata:
        """The metadata of ``model``; the custom map keeps the last value of a repeated key."""
        return cls(model.producer_name, model.graph.name, model.domain, model.doc_string, model.graph.doc_string,
                   int(model.model_version), {p.key: p.value for p in model.metadata_props})

    def copy(self) -> ModelMetadata:
        """An independent copy (each ``Graph_GetModelMetadata`` hands the plugin its own, to release)."""
        return ModelMetadata(self.producer_name, self.graph_name, self.domain, self.description,
                             self.graph_description, self.version, dict(self.custom))


@dataclass(eq=False)
class ExternalInitializerInfo:
    """Location of an initializer's data in an external file: path (as the model names it), offset, size."""

    path: str
    offset: int
    size: int

    def __post_init__(self) -> None:
        self.c_path = ffi.new("char[]", self.path.encode())
        self.ptr: Any = ffi.NULL

    @classmethod
    def of(cls, tensor: onnx.TensorProto) -> ExternalInitializerInfo | None:
        """The external location of ``tensor``'s data, or None when its data is inside the model."""
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            return None
        entries = {e.key: e.value for e in tensor.external_data}
        return cls(entries.get("location", ""), int(entries.get("offset", 0) or 0), int(entries.get("length", 0) or 0))
