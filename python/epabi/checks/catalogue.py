"""The checks ``epabi check`` runs at every emulated API version, in report order.

Three categories:

* ``ort``: the invariants ONNX Runtime's own tests hold plugin EPs to (``ep_plugin_provider_test.cc``,
  ``test/autoep/``, and the shared invariants of ORT's EP conformance pull requests #28968 and #29924), read
  through the ``OrtEp``/``OrtEpFactory`` tables as ORT's ``PluginExecutionProvider`` reads them;
* ``conduct``: how the plugin treats the host (statuses, API versions, declared versions, unloading, growth);
* ``function``: models the EP claims run and match ORT's CPU EP; the graph capture contract.

Pure data: the code of each check lives in the module its category names (``invariants``, ``conduct``,
``function``, ``graph_capture``, ``growth``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    """One check: ``id`` (stable, used in JSON, JUnit and pytest ids), ``category`` and what it holds the
    plugin to (``summary``)."""

    id: str
    category: str
    summary: str


CHECKS: tuple[Check, ...] = (
    Check("required_functions", "ort",
          "exports CreateEpFactories and ReleaseEpFactory; OrtEpFactory GetName, GetVendor, GetSupportedDevices, "
          "CreateEp, ReleaseEp, GetVersion, CreateDataTransfer and OrtEp GetName, GetCapability are set (ORT "
          "calls them without a NULL check)"),
    Check("ep_created", "ort", "CreateEp succeeds on the EP's first EP device and returns an OrtEp"),
    Check("ep_type", "ort",
          "OrtEp::GetName (ORT's EP type) is non-empty and the same across calls and across EP instances"),
    Check("preferred_layout", "ort", "GetPreferredDataLayout succeeds with NCHW or NHWC (NULL: NCHW)"),
    Check("cpu_memory_types", "ort",
          "the memory ORT uses for OrtMemTypeCPUInput/CPUOutput is CPU-accessible: every host-accessible memory "
          "info of the EP device, and the Info of its allocator, is CPU or HOST_ACCESSIBLE memory"),
    Check("preferred_allocators", "ort",
          "an allocator for every memory info of the EP device (the EP's CreateAllocator, else the factory's): "
          "non-NULL, Alloc/Free/Info set, a named Info of a valid allocator type, and a second call works too"),
    Check("allocator_memory", "ort",
          "each preferred allocator hands out usable memory: 256 bytes, written and read back from the host when "
          "CPU-accessible, then freed"),
    Check("data_transfer", "ort",
          "the data transfer copies host -> device -> host (and host -> host when it says it can) byte for byte"),
    Check("metadata_queries", "ort",
          "the read-only queries succeed on a fresh EP: factory GetVendorId/GetVersion/IsStreamAware, OrtEp "
          "IsConcurrentRunSupported, GetPreferredDataLayout, ShouldConvertDataLayoutForOp, IsGraphCaptureEnabled, "
          "GetGraphCaptureNodeAssignmentPolicy, GetDefaultMemoryDevice"),
    Check("capture_policy", "ort",
          "GetGraphCaptureNodeAssignmentPolicy returns ALL_NODES_ON_EP or ALLOW_CPU_FOR_SHAPES"),
    Check("compile_or_kernels", "ort",
          "the EP runs nodes one way: Compile with ReleaseNodeComputeInfos, or a kernel registry "
          "(GetKernelRegistry returning one)"),
    Check("null_optional_members", "ort",
          "NULL optional members are ones ORT copes with: no registered memory without a CreateAllocator, no "
          "allocator without OrtEpFactory::ReleaseAllocator, no stream-aware factory without "
          "CreateSyncStreamForDevice, no graph capture without IsGraphCaptured/ReplayGraph"),
    Check("statuses", "conduct",
          "every OrtStatus the plugin returns was made by CreateStatus and is released exactly once (none forged, "
          "returned after release, or leaked)"),
    Check("api_version", "conduct",
          "the plugin calls nothing above the API version it negotiated (no slot past the emulated table)"),
    Check("version_sane", "conduct",
          "ort_version_supported of the factory, the EP and the data transfer is between 22 and 99, and the "
          "release accepts the EP's (1.28+ refuse OrtEp versions below 22)"),
    Check("version_gating", "conduct",
          "after gating by the host's and the plugin's declared versions, the members the host reads form a "
          "coherent set (graph capture with IsGraphCaptured and ReplayGraph, ReleaseCapturedGraph with graph "
          "capture)"),
    Check("release_and_unload", "conduct",
          "ReleaseEpFactory returns OK for every factory and the library is unmapped after unregistration"),
    Check("no_growth", "conduct",
          "register / create an EP / unregister N times leaves no open files, mappings or resident memory behind"),
    Check("conduct_report", "conduct",
          "the host's conduct report holds no other violation or deviation ORT merely tolerates"),
    Check("model_matches_cpu", "function",
          "models of the ops the EP claims run on it and match ORT's CPU EP"),
    Check("capture_first_run", "function",
          "with graph capture on, the first run (warm-up and capture) is correct"),
    Check("capture_replay", "function",
          "a replay is correct, and so is a replay after the bound input was updated in place"),
    Check("capture_ids", "function",
          "two annotation ids (gpu_graph_id) keep separate graphs over separate buffers"),
    Check("capture_no_graph_id", "function", "gpu_graph_id -1 runs without capture or replay, correctly"),
    Check("capture_release_graph", "function",
          "OrtEp::ReleaseCapturedGraph drops a graph; the next runs capture again over new buffers (API 27+)"),
    Check("capture_per_thread", "function",
          "a run on another thread with its own buffers is correct and leaves the first thread's graph intact"),
)

#: The checks by id.
BY_ID: dict[str, Check] = {c.id: c for c in CHECKS}
#: The ids, in report order.
CHECK_IDS: tuple[str, ...] = tuple(c.id for c in CHECKS)
