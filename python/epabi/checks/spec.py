"""What ``epabi check`` was asked to do: :class:`CheckSpec`, shared by every API version's run and sent as JSON to
the child process that runs a version when runs are isolated."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..objects import HardwareDevice, OrtHardwareDeviceType

#: Provider options a graph-capture check adds to ``ep_options``: the key ORT's CUDA EP, its CUDA plugin EP and
#: epabi read. WebGPU reads ``enableGraphCapture`` instead (``--capture-option enableGraphCapture=1``).
DEFAULT_CAPTURE_OPTIONS = {"enable_cuda_graph": "1"}
#: Register/unregister cycles of ``no_growth`` (and with ``quick``). The handle table's tombstones, the only
#: bounded growth of the host itself, fill within the warm-up cycles.
DEFAULT_CYCLES = 40
QUICK_CYCLES = 8
#: ``model_matches_cpu`` tolerances: |ep - cpu| <= atol + rtol * |cpu|, elementwise. Loose enough for EPs that
#: keep float32 weights as float16/bfloat16 on the way (ggml, OpenVINO on some CPUs), tight enough for a wrong
#: kernel to show.
DEFAULT_RTOL = 1e-2
DEFAULT_ATOL = 1e-3
#: Seconds one API version may take in its own process before it is stopped and its running check failed.
DEFAULT_TIMEOUT = 600.0


@dataclass
class CheckSpec:
    """The arguments of one ``epabi check``.

    Attributes:
        library: absolute path of the plugin library.
        ep: the EP (factory name) to check; None is the first factory of each version.
        name: the registration name (ggml names its EP after it).
        hardware: the hardware devices the host offers; None discovers them.
        ep_options: provider options of every session and EP (``add_provider_for_devices``).
        capture_options: provider options added for the graph-capture checks.
        models: ONNX files ``model_matches_cpu`` runs besides its own probe models.
        cycles: register/unregister cycles of ``no_growth``.
        quick: fewer cycles and probe models (the checks themselves are the same).
        rtol, atol: ``model_matches_cpu`` and graph-capture tolerances against ORT's CPU EP.
        timeout: seconds per API version (isolated runs only).
    """

    library: str
    ep: str | None = None
    name: str = "epabi"
    hardware: list[HardwareDevice] | None = None
    ep_options: dict[str, str] = field(default_factory=dict)
    capture_options: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_CAPTURE_OPTIONS))
    models: list[str] = field(default_factory=list)
    cycles: int = DEFAULT_CYCLES
    quick: bool = False
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    timeout: float = DEFAULT_TIMEOUT

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["hardware"] = None if self.hardware is None else [
            {"type": hw.type.name, "vendor_id": hw.vendor_id, "vendor": hw.vendor, "device_id": hw.device_id,
             "metadata": dict(hw.metadata)} for hw in self.hardware]
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> CheckSpec:
        doc = dict(doc)
        if doc.get("hardware") is not None:
            doc["hardware"] = [HardwareDevice(OrtHardwareDeviceType[hw["type"]], int(hw["vendor_id"]), hw["vendor"],
                                              int(hw["device_id"]), dict(hw["metadata"])) for hw in doc["hardware"]]
        return cls(**doc)
