"""epabi: a C plugin execution provider for ONNX Runtime and a Python host that loads any plugin EP.

Quick use (same calls as onnxruntime's Python API)::

    import epabi
    host = epabi.Host()
    host.register_execution_provider_library("epabi", epabi.get_library_path())
    print(host.get_ep_devices())

    result = epabi.check("libmy_ep.so", versions="1.24..newest")   # an EP author's conformance check
"""

from __future__ import annotations

from . import models
from .ep import Ep
from .errors import (
    CheckArgumentError,
    ConductError,
    ConfigEntryNotFoundError,
    HostLimitationError,
    OrtErrorCode,
    OrtStatusError,
    PluginLoadError,
    StaleReplayError,
    UnknownProviderError,
    UnknownReleaseError,
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
from .option_fields import ExecutionMode, ExecutionOrder, GraphOptimizationLevel
from .package_files import find_package_file, package_dirs
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
        FileNotFoundError: the package was installed without its native library (or is imported from a source
            tree that was never installed).
    """
    for name in _LIBRARY_NAMES:
        found = find_package_file(name)
        if found is not None and found.is_file():
            return str(found)
    raise FileNotFoundError(f"the epabi plugin library ({' / '.join(_LIBRARY_NAMES)}) is not in "
                            f"{' or '.join(str(d) for d in package_dirs())}; install the package with "
                            f"'pip install .' (or 'pip install -e .')")


def get_include() -> str:
    """Folder to put on a C compiler's include path for ``#include "epabi/ort_abi.h"`` (the ABI header the
    plugin was built with: ONNX Runtime's plugin-EP C ABI as epabi declares it).

    Raises:
        FileNotFoundError: the package was installed without its header.
    """
    found = find_package_file("include/epabi/ort_abi.h")
    if found is None:
        raise FileNotFoundError("epabi/ort_abi.h is not installed with this package; reinstall with 'pip install .'")
    return str(found.parent.parent)


def get_cmake_dir() -> str:
    """Folder holding ``epabiConfig.cmake``: pass it as ``-Depabi_DIR=...`` to CMake, then
    ``find_package(epabi CONFIG REQUIRED)`` gives the targets ``epabi::headers`` (the ABI header) and
    ``epabi::plugin`` (the plugin library, to load at run time).

    Raises:
        FileNotFoundError: the package was installed without its CMake files.
    """
    found = find_package_file("cmake/epabiConfig.cmake")
    if found is None:
        raise FileNotFoundError("epabiConfig.cmake is not installed with this package; reinstall with 'pip install .'")
    return str(found.parent)


def get_ep_name() -> str:
    """The EP name the plugin registers: ``EpAbiExecutionProvider``."""
    return EP_NAME


# last: the checks' modules import names defined above (EP_NAME, get_library_path)
from .checks import CheckResult, check  # noqa: E402

__all__ = [
    "CheckArgumentError", "CheckResult", "check",
    "ConductError", "Ep", "EpDevice", "HardwareDevice", "Host", "HostLimitationError", "MemoryInfo",
    "NEWEST_EMULATED", "OLDEST_EMULATED", "OrtAllocatorType", "OrtDeviceMemoryType", "OrtErrorCode",
    "OrtHardwareDeviceType", "OrtMemoryInfoDeviceType", "OrtStatusError", "PluginLoadError", "RELEASES",
    "StaleReplayError", "ConfigEntryNotFoundError", "UnknownProviderError", "UnknownReleaseError",
    "ExecutionMode", "ExecutionOrder", "GraphOptimizationLevel",
    "SessionOptions", "InferenceSession", "RunOptions", "OrtValue", "IOBinding", "NodeArg",
    "cpu_device", "discover_hardware", "get_cmake_dir", "get_ep_name", "get_include", "get_library_path",
    "nvidia_gpu_device", "read_min_onnxruntime_version", "models",
]
