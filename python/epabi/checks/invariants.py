"""The ``ort`` checks: the invariants ONNX Runtime holds plugin EPs to, read as its ``PluginExecutionProvider``
reads the tables (onnxruntime ``core/session/plugin_ep/ep_plugin_provider_interfaces.cc``; the invariants of
``test/util/include/ep_conformance_invariants.h`` in ORT's EP conformance pull requests #28968 and #29924).

Each check takes the version's :class:`~epabi.checks.probe.Probe`, returns what passed and raises
:class:`~epabi.checks.probe.CheckFailed` / :class:`~epabi.checks.probe.CheckSkipped` otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._ffi import ffi, member_since
from ..capture import ALL_NODES_ON_EP
from ..device_memory import DataTransfer, DeviceAllocator
from ..ep import REQUIRED_EP_MEMBERS, Ep
from ..errors import OrtStatusError
from ..kernel_nodes import KernelNodes
from ..library import REQUIRED_FACTORY_MEMBERS
from ..objects import MemoryInfo, OrtAllocatorType, OrtDeviceMemoryType, OrtMemoryInfoDeviceType, pystr
from ..values import OrtValue
from ..versions import since_label
from .probe import CheckFailed, CheckSkipped, Probe, device_label
from .tables import NULL, SET, member_states

#: OrtEpDataLayout values (ort_abi.h).
_LAYOUTS = {0: "NCHW", 1: "NHWC"}
#: OrtGraphCaptureNodeAssignmentPolicy values (ort_abi.h).
_POLICIES = {0: "ALL_NODES_ON_EP", 1: "ALLOW_CPU_FOR_SHAPES"}
#: What ORT's conformance invariant allocates from each CPU-accessible allocator.
_ALLOC_BYTES = 256
#: ORT 1.31 and newer refuse plugin allocators that report OrtArenaAllocator (string evidence in their wheels).
_ARENA_REFUSED_FROM = 31


def cpu_accessible(info: MemoryInfo) -> bool:
    """ORT's ``OrtDevice::UsesCpuMemory``: CPU memory, or another device's host-accessible memory."""
    return info.device_type == OrtMemoryInfoDeviceType.CPU or info.mem_type == OrtDeviceMemoryType.HOST_ACCESSIBLE


def _describe(info: MemoryInfo) -> str:
    return (f"'{info.name}' ({OrtMemoryInfoDeviceType(info.device_type).name} "
            f"{OrtDeviceMemoryType(info.mem_type).name})")


# -- ort.required_functions, ep_created, ep_type ------------------------------------------------------------


def required_functions(probe: Probe) -> str:
    if probe.load_error is not None and "Failed to get symbol" in probe.load_error:
        raise CheckFailed(probe.load_error)
    error = probe.registration_error or ""
    if "required OrtEpFactory members are NULL" in error:
        raise CheckFailed(error)
    if probe.ep_error is not None and "required OrtEp members are NULL" in probe.ep_error:
        raise CheckFailed(probe.ep_error)
    if probe.factory is None:
        raise CheckSkipped(probe.blocked or "no factory")
    since = member_since("OrtEpFactory")
    needed = [m for m in REQUIRED_FACTORY_MEMBERS if since[m] <= probe.api]
    done = f"exports CreateEpFactories and ReleaseEpFactory; OrtEpFactory sets {', '.join(needed)}"
    if not probe.first_ep:
        raise CheckSkipped(f"{done}; the OrtEp was not checked: {probe.blocked or probe.ep_error}")
    return f"{done}; OrtEp sets {', '.join(REQUIRED_EP_MEMBERS)}"


def ep_created(probe: Probe) -> str:
    if probe.blocked is not None:
        raise CheckSkipped(probe.blocked)
    if probe.ep_error is not None:
        raise CheckFailed(f"CreateEp on {device_label(probe.device)} failed: {probe.ep_error}")
    ep = probe.first_ep
    return (f"CreateEp on {device_label(probe.device)} returned OrtEp '{ep['name']}' (declares API "
            f"{ep['ort_version_supported']}, {len(ep['members'])} members read)")


def ep_type(probe: Probe) -> str:
    probe.require_ep()
    with probe.ep() as first, probe.ep() as second:
        names = [first.name, pystr(first.call("GetName")), pystr(first.call("GetName")), second.name]
    if not names[0]:
        raise CheckFailed("OrtEp::GetName returned an empty string")
    if len(set(names)) != 1:
        raise CheckFailed(f"OrtEp::GetName is not stable: {names[0]!r}, then {names[1]!r} and {names[2]!r}; a "
                          f"second OrtEp says {names[3]!r}")
    note = "" if names[0] == probe.factory.name else \
        f" (the factory is named {probe.factory.name!r}: EP devices carry that name, sessions the EP's)"
    return f"{names[0]!r} from every GetName call and from a second OrtEp{note}"


# -- ort.preferred_layout, cpu_memory_types ---------------------------------------------------------------


def _layout(ep: Ep) -> int | None:
    if "GetPreferredDataLayout" not in ep.members:
        return None
    out = ffi.new("OrtEpDataLayout*", 0)
    ep.call_status("GetPreferredDataLayout", out)
    return int(out[0])


def preferred_layout(probe: Probe) -> str:
    probe.require_ep()
    with probe.ep() as ep:
        try:
            layouts = [_layout(ep), _layout(ep)]
        except OrtStatusError as exc:
            raise CheckFailed(f"GetPreferredDataLayout failed (ORT throws at session initialization): {exc}") from exc
    if layouts[0] is None:
        return "GetPreferredDataLayout is NULL or not read at this API: ORT uses NCHW"
    bad = [v for v in layouts if v not in _LAYOUTS]
    if bad:
        raise CheckFailed(f"GetPreferredDataLayout returned {bad[0]}, not NCHW (0) or NHWC (1): ORT fails the "
                          "session ('returned an invalid data layout')")
    if layouts[0] != layouts[1]:
        raise CheckFailed(f"GetPreferredDataLayout returned {_LAYOUTS[layouts[0]]}, then {_LAYOUTS[layouts[1]]}")
    return f"GetPreferredDataLayout returns {_LAYOUTS[layouts[0]]}"


def _allocator_info(probe: Probe, allocator: DeviceAllocator) -> MemoryInfo:
    """The memory info the allocator's ``Info`` returns. Raises CheckFailed when it is no memory info."""
    host = probe.host
    with host.calling(allocator.factory.library, "OrtAllocator::Info"):
        ptr = allocator.ptr.Info(allocator.ptr)
    info = host.handles.lookup(ptr, MemoryInfo)
    if info is None:
        raise CheckFailed(f"the OrtAllocator for '{allocator.memory_info.name}' returned from Info() "
                          f"{hex(int(ffi.cast('uintptr_t', ptr)))}, which is not an OrtMemoryInfo "
                          f"({host.handles.explain(ptr, MemoryInfo)})")
    return info


def cpu_memory_types(probe: Probe) -> str:
    probe.require_ep()
    device = probe.device
    host_side = [m for m in device.memory_infos if m.mem_type == OrtDeviceMemoryType.HOST_ACCESSIBLE]
    default = device.memory_info(OrtDeviceMemoryType.DEFAULT)
    if not host_side:
        where = "host memory" if default is None or cpu_accessible(default) else f"device memory {_describe(default)}"
        return (f"the EP device registers no host-accessible memory (it computes in {where}): OrtMemTypeCPUInput "
                "and CPUOutput are ORT's own CPU memory")
    with probe.ep() as ep:
        for info in host_side:
            allocator = DeviceAllocator(probe.host, ep.factory, info, ep)
            try:
                reported = _allocator_info(probe, allocator)
            finally:
                allocator.close()
            if not cpu_accessible(reported):
                raise CheckFailed(f"the allocator of host-accessible memory {_describe(info)} reports "
                                  f"{_describe(reported)} from Info(): ORT stages CPU inputs and outputs there and "
                                  "the host cannot reach it")
    return (f"host-accessible memory {', '.join(_describe(m) for m in host_side)}, and its allocator's Info, is "
            "CPU-accessible")


# -- ort.preferred_allocators, allocator_memory -----------------------------------------------------------


def _allocators_needed(probe: Probe) -> list[MemoryInfo]:
    probe.require_ep()
    infos = list(probe.device.memory_infos)
    if not infos:
        raise CheckSkipped("the EP device registers no memory info: ORT gives the EP no allocator of its own "
                           "(it computes in ORT's CPU memory)")
    return infos


def preferred_allocators(probe: Probe) -> str:
    infos = _allocators_needed(probe)
    notes: list[str] = []
    with probe.ep() as ep:
        for info in infos:
            pair = [DeviceAllocator(probe.host, ep.factory, info, ep)]
            try:
                pair.append(DeviceAllocator(probe.host, ep.factory, info, ep))  # repeatable: a stateless factory
                for allocator in pair:
                    reported = _allocator_info(probe, allocator)
                    probe.allocator_versions[info.name] = int(allocator.ptr.version)
                    if not reported.name:
                        raise CheckFailed(f"the allocator for {_describe(info)} reports a memory info with an "
                                          "empty name")
                    kind = OrtAllocatorType(reported.allocator_type)
                    if kind == OrtAllocatorType.INVALID:
                        raise CheckFailed(f"the allocator for {_describe(info)} reports OrtInvalidAllocator")
                    if kind == OrtAllocatorType.ARENA:
                        text = (f"the allocator for {_describe(info)} reports OrtArenaAllocator, which ORT keeps "
                                "for its own arenas")
                        if probe.api >= _ARENA_REFUSED_FROM:
                            raise CheckFailed(f"{text}: ONNX Runtime 1.{_ARENA_REFUSED_FROM}+ refuse it")
                        if text not in notes:
                            notes.append(text + f" (refused from 1.{_ARENA_REFUSED_FROM})")
            finally:
                for allocator in pair:
                    allocator.close()
    who = "OrtEp::CreateAllocator" if "CreateAllocator" in probe.first_ep.get("members", []) else \
        "OrtEpFactory::CreateAllocator"
    return (f"{who} gave two usable allocators for each of {', '.join(_describe(i) for i in infos)}"
            + (f"; note: {'; '.join(notes)}" if notes else ""))


def allocator_memory(probe: Probe) -> str:
    infos = _allocators_needed(probe)
    done: list[str] = []
    with probe.ep() as ep:
        for info in infos:
            allocator = DeviceAllocator(probe.host, ep.factory, info, ep)
            try:
                reported = _allocator_info(probe, allocator)
                try:
                    pointer = allocator.alloc(_ALLOC_BYTES)
                except MemoryError as exc:
                    raise CheckFailed(str(exc)) from exc
                try:
                    if cpu_accessible(reported) and cpu_accessible(info):
                        buffer = ffi.buffer(ffi.cast("unsigned char*", pointer), _ALLOC_BYTES)
                        buffer[:] = b"\xab" * _ALLOC_BYTES
                        if bytes(buffer) != b"\xab" * _ALLOC_BYTES:
                            raise CheckFailed(f"{_ALLOC_BYTES} bytes written to memory of {_describe(info)} did "
                                              "not read back")
                        done.append(f"{_describe(info)} written and read back")
                    else:
                        done.append(f"{_describe(info)} allocated and freed (device memory: not touched)")
                finally:
                    allocator.free(pointer)
            finally:
                allocator.close()
    return f"{_ALLOC_BYTES} bytes from each allocator: {'; '.join(done)}"


# -- ort.data_transfer ------------------------------------------------------------------------------------


def _patterns() -> list[np.ndarray]:
    rng = np.random.default_rng(12)
    return [np.array([[1.0, -2.0, 3.5], [4.0, 5.0, -6.25]], np.float32),
            rng.integers(0, 256, 1031, dtype=np.uint8),
            np.array([np.nan, -0.0, np.inf, -np.inf, 1e-45], np.float32)]


def data_transfer(probe: Probe) -> str:
    probe.require_ep()
    factory, host = probe.factory, probe.host
    if factory.data_transfer == ffi.NULL:
        raise CheckSkipped("CreateDataTransfer returned no OrtDataTransferImpl (allowed: ORT then copies nothing "
                           "for the EP)")
    impl = factory.data_transfer
    done: list[str] = []
    cpu = host.cpu_memory.device_ptr
    with host.calling(factory.library, "OrtDataTransferImpl::CanCopy"):
        host_to_host = bool(impl.CanCopy(impl, cpu, cpu))
    with probe.ep() as ep:
        device_memory = probe.device.memory_info(OrtDeviceMemoryType.DEFAULT)
        if device_memory is not None and not cpu_accessible(device_memory):
            transfer = DataTransfer(host, factory, device_memory)
            allocator = DeviceAllocator(host, factory, device_memory, ep)
            try:
                for array in _patterns():
                    value = transfer.to_device(OrtValue(array), allocator)
                    try:
                        back = transfer.to_host(value).array
                    finally:
                        value.release()
                    if back.tobytes() != array.tobytes():
                        raise CheckFailed(f"host -> {_describe(device_memory)} -> host changed the bytes of a "
                                          f"{array.dtype}{list(array.shape)} tensor")
            finally:
                allocator.close()
            done.append(f"host -> {_describe(device_memory)} -> host")
        if host_to_host:
            transfer = DataTransfer(host, factory, None)
            for array in _patterns():
                target = OrtValue(np.zeros_like(array))
                transfer.copy(OrtValue(array), target)
                if target.array.tobytes() != array.tobytes():
                    raise CheckFailed(f"a host -> host CopyTensors changed the bytes of a {array.dtype}"
                                      f"{list(array.shape)} tensor")
            done.append("host -> host")
    if not done:
        raise CheckSkipped("the data transfer copies no memory of this EP device (no device memory, and "
                           "CanCopy(CPU, CPU) is false)")
    return f"{', '.join(done)}: {len(_patterns())} tensors (float32, uint8, NaN/-0/inf) byte for byte"


# -- ort.metadata_queries, capture_policy -----------------------------------------------------------------


def metadata_queries(probe: Probe) -> str:
    probe.require_ep()
    factory = probe.factory
    asked: list[str] = []
    for member in ("GetVendorId", "GetVersion", "IsStreamAware"):
        if member in factory.members:
            factory.call(member)
            asked.append(f"OrtEpFactory::{member}")
    with probe.ep() as ep:
        if "IsConcurrentRunSupported" in ep.members:
            flag = ffi.new("bool*", False)
            _query(ep, "IsConcurrentRunSupported", lambda: ep.call_status("IsConcurrentRunSupported", flag))
            asked.append("IsConcurrentRunSupported")
        layout = 0
        if "GetPreferredDataLayout" in ep.members:
            layout = _query(ep, "GetPreferredDataLayout", lambda: _layout(ep)) or 0
            asked.append("GetPreferredDataLayout")
        if "ShouldConvertDataLayoutForOp" in ep.members:
            out = ffi.new("int*", -1)
            _query(ep, "ShouldConvertDataLayoutForOp",
                   lambda: ep.call_status("ShouldConvertDataLayoutForOp", ffi.new("char[]", b""),
                                          ffi.new("char[]", b"Conv"), layout if layout in _LAYOUTS else 0, out))
            asked.append("ShouldConvertDataLayoutForOp('', 'Conv')")
        for member in ("IsGraphCaptureEnabled", "GetGraphCaptureNodeAssignmentPolicy"):
            if member in ep.members:
                ep.call(member)
                asked.append(member)
        if "GetDefaultMemoryDevice" in ep.members:
            out_device = ffi.new("OrtMemoryDevice**")
            _query(ep, "GetDefaultMemoryDevice", lambda: ep.call_status("GetDefaultMemoryDevice", out_device))
            asked.append("GetDefaultMemoryDevice")
    return f"callable on a fresh EP: {', '.join(asked) if asked else '(no optional query is set)'}"


def _query(ep: Ep, member: str, call: Any) -> Any:
    try:
        return call()
    except OrtStatusError as exc:
        raise CheckFailed(f"OrtEp::{member} failed on a fresh EP: {exc}") from exc


def capture_policy(probe: Probe) -> str:
    probe.require_ep()
    since = member_since("OrtEp")["GetGraphCaptureNodeAssignmentPolicy"]
    if probe.api < since:
        raise CheckSkipped(f"GetGraphCaptureNodeAssignmentPolicy appeared in ONNX Runtime {since_label(since)}")
    with probe.ep() as ep:
        if "GetGraphCaptureNodeAssignmentPolicy" not in ep.members:
            return f"NULL or not declared: ORT uses {_POLICIES[ALL_NODES_ON_EP]}"
        policies = [int(ep.call("GetGraphCaptureNodeAssignmentPolicy")) for _ in range(2)]
    if any(p not in _POLICIES for p in policies):
        raise CheckFailed(f"GetGraphCaptureNodeAssignmentPolicy returned {policies[0]}, not ALL_NODES_ON_EP (0) "
                          "or ALLOW_CPU_FOR_SHAPES (1)")
    if policies[0] != policies[1]:
        raise CheckFailed(f"GetGraphCaptureNodeAssignmentPolicy returned {policies[0]}, then {policies[1]}")
    return f"GetGraphCaptureNodeAssignmentPolicy returns {_POLICIES[policies[0]]}"


# -- ort.compile_or_kernels, null_optional_members --------------------------------------------------------


def compile_or_kernels(probe: Probe) -> str:
    if probe.ep_error is not None and "Compile and ReleaseNodeComputeInfos" in probe.ep_error:
        raise CheckFailed(probe.ep_error)
    probe.require_ep()
    with probe.ep() as ep:
        compiles = "Compile" in ep.members
        kernels = KernelNodes.for_ep(ep)
        if kernels is not None:
            count = len(kernels.registry.entries)
            kernels.close()
        registry_set = member_states("OrtEp", ep.ptr, probe.api).get("GetKernelRegistry") == SET
    if kernels is None and not compiles:
        why = " (GetKernelRegistry is set but returned no registry)" if registry_set else ""
        raise CheckFailed(f"the EP has neither Compile nor a kernel registry{why}: it can run no node")
    if kernels is not None and compiles:
        return f"Compile with ReleaseNodeComputeInfos, and a kernel registry of {count} kernels"
    return "Compile with ReleaseNodeComputeInfos" if compiles else f"a kernel registry of {count} kernels"


def null_optional_members(probe: Probe) -> str:
    probe.require_ep()
    factory = probe.factory
    problems: list[str] = []
    with probe.ep() as ep:
        ep_states = member_states("OrtEp", ep.ptr, probe.api)
        factory_states = member_states("OrtEpFactory", factory.ptr, probe.api)
        allocates = "CreateAllocator" in ep.members or "CreateAllocator" in factory.members
        if probe.device.memory_infos and not allocates:
            problems.append("the EP device registers memory infos but neither OrtEp::CreateAllocator nor "
                            "OrtEpFactory::CreateAllocator is set: ORT fails the session ('requires the EP library "
                            "to implement an allocator')")
        if probe.device.memory_infos and allocates and "ReleaseAllocator" not in factory.members:
            problems.append("allocators are created but OrtEpFactory::ReleaseAllocator is NULL: ORT calls it "
                            "without a NULL check when it releases them")
        if "IsStreamAware" in factory.members:
            with probe.host.calling(factory.library, "OrtEpFactory::IsStreamAware"):
                aware = bool(factory.members["IsStreamAware"](factory.ptr))
            if aware and "CreateSyncStreamForDevice" not in ep.members and \
                    "CreateSyncStreamForDevice" not in factory.members:
                problems.append("the factory is stream aware but no CreateSyncStreamForDevice is set: ORT fails "
                                "the session")
        capture = "IsGraphCaptureEnabled" in ep.members and bool(ep.call("IsGraphCaptureEnabled"))
        missing = [m for m in ("IsGraphCaptured", "ReplayGraph") if m not in ep.members]
        if capture and missing:
            problems.append(f"IsGraphCaptureEnabled is true but {', '.join(missing)} is NULL: ORT ignores graph "
                            "capture for this EP (with a warning)")
    if problems:
        raise CheckFailed("; ".join(problems))
    nulls = [f"OrtEp::{m}" for m, s in ep_states.items() if s == NULL] + \
        [f"OrtEpFactory::{m}" for m, s in factory_states.items() if s == NULL]
    return (f"{len(nulls)} optional members are NULL, each one ORT has a default for"
            + (f" ({', '.join(nulls[:8])}{', ...' if len(nulls) > 8 else ''})" if nulls else ""))
