"""epabi: a C plugin execution provider for ONNX Runtime and a Python host that loads any plugin EP.

Quick use (same calls as onnxruntime's Python API)::

    import epabi
    host = epabi.Host()
    host.register_execution_provider_library("epabi", epabi.get_library_path())
    print(host.get_ep_devices())
"""

from __future__ import annotations

from pathlib import Path

from . import models
from .ep import Ep
from .errors import (
    ConductError,
    HostLimitationError,
    OrtErrorCode,
    OrtStatusError,
    PluginLoadError,
    StaleReplayError,
)
from .hardware import cpu_device, discover_hardware, nvidia_gpu_device
from .host import Host
from .io_binding import IOBinding
from .objects import (
    EpDevice,
    HardwareDevice,
    MemoryInfo,
    OrtAllocatorType,
    OrtDeviceMemoryType,
    OrtHardwareDeviceType,
    OrtMemoryInfoDeviceType,
)
from .run_options import RunOptions
from .session import InferenceSession, NodeArg
from .session_options import SessionOptions
from .values import OrtValue
from .versions import NEWEST_EMULATED, OLDEST_EMULATED, RELEASES, read_min_onnxruntime_version

__version__ = "0.1.0"

EP_NAME = "EpAbiExecutionProvider"
_LIBRARY_NAMES = ("libepabi_plugin.so", "libepabi_plugin.dylib", "epabi_plugin.dll")


def get_library_path() -> str:
    """Absolute path of the epabi plugin EP library shipped in this package.

    Raises:
        FileNotFoundError: the package was installed without its native library.
    """
    here = Path(__file__).resolve().parent
    for name in _LIBRARY_NAMES:
        if (here / name).is_file():
            return str(here / name)
    raise FileNotFoundError(f"the epabi plugin library ({' / '.join(_LIBRARY_NAMES)}) is not in {here}; "
                            f"reinstall with 'pip install .'")


def get_ep_name() -> str:
    """The EP name the plugin registers: ``EpAbiExecutionProvider``."""
    return EP_NAME


__all__ = [
    "ConductError", "Ep", "EpDevice", "HardwareDevice", "Host", "HostLimitationError", "MemoryInfo",
    "NEWEST_EMULATED", "OLDEST_EMULATED", "OrtAllocatorType", "OrtDeviceMemoryType", "OrtErrorCode",
    "OrtHardwareDeviceType", "OrtMemoryInfoDeviceType", "OrtStatusError", "PluginLoadError", "RELEASES",
    "StaleReplayError",
    "SessionOptions", "InferenceSession", "RunOptions", "OrtValue", "IOBinding", "NodeArg",
    "cpu_device", "discover_hardware", "get_ep_name", "get_library_path",
    "nvidia_gpu_device", "read_min_onnxruntime_version", "models",
]
