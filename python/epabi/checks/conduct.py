"""The ``conduct`` checks but ``no_growth`` (:mod:`epabi.checks.growth`): judged from what the host noticed during
the whole run of a version (:class:`~epabi.checks.findings.Findings`) and from the plugin's tables, after the
library was unregistered.
"""

from __future__ import annotations

from .probe import CheckFailed, CheckSkipped, Probe
from .tables import SET, label
from .unloading import stay_loaded_reasons

#: ``ort_version_supported`` outside this range is not an API version of any ONNX Runtime 1.x that has plugin
#: EPs (OrtEpFactory appeared in 1.22): 0, a garbage value, or a header older than plugin EPs.
SANE_VERSIONS = range(22, 100)
#: OrtAllocator::version counts from OrtApi v1.
SANE_ALLOCATOR_VERSIONS = range(1, 100)

#: Members that mean nothing without others, as the host reads them (graph capture is all or nothing).
_NEEDS = {
    "IsGraphCaptureEnabled": ("IsGraphCaptured", "ReplayGraph"),
    "ReplayGraph": ("IsGraphCaptured",),
    "ReleaseCapturedGraph": ("IsGraphCaptureEnabled", "IsGraphCaptured", "ReplayGraph"),
    "Compile": ("ReleaseNodeComputeInfos",),
}


#: Findings a failure names; more are counted.
_SHOWN = 2


def _fail_with(probe: Probe, check: str) -> None:
    messages = probe.findings.of(check)
    if messages:
        more = f" (and {len(messages) - _SHOWN} more)" if len(messages) > _SHOWN else ""
        raise CheckFailed("; ".join(messages[:_SHOWN]) + more)


def statuses(probe: Probe) -> str:
    _fail_with(probe, "statuses")
    if not probe.registered:
        raise CheckSkipped(probe.blocked or "not registered")
    return "no OrtStatus returned was forged, returned after its release, or leaked"


def api_version(probe: Probe) -> str:
    _fail_with(probe, "api_version")
    asked = probe.info.get("api_requested", [])
    if not asked:
        raise CheckSkipped("the plugin asked for no API table (GetApi was not called)")
    above = sorted({v for v in asked if v > probe.api})
    note = f"; GetApi({', '.join(map(str, above))}) answered NULL, as ORT does" if above else ""
    return f"GetApi({', '.join(map(str, dict.fromkeys(asked)))}); no call past API {probe.api}{note}"


def version_sane(probe: Probe) -> str:
    problems = probe.findings.of("version_sane")
    seen: list[str] = []
    for factory in probe.info.get("factories", []):
        declared = factory["ort_version_supported"]
        seen.append(f"factory {factory['name']} {declared}")
        if declared not in SANE_VERSIONS:
            problems.append(f"OrtEpFactory {factory['name']} declares ort_version_supported {declared}")
    if probe.first_ep:
        declared = probe.first_ep["ort_version_supported"]
        seen.append(f"OrtEp {declared}")
        if declared not in SANE_VERSIONS:
            problems.append(f"OrtEp declares ort_version_supported {declared}")
    if probe.data_transfer_version is not None:
        seen.append(f"data transfer {probe.data_transfer_version}")
        if probe.data_transfer_version not in SANE_VERSIONS:
            problems.append(f"OrtDataTransferImpl declares ort_version_supported {probe.data_transfer_version}")
    for name, version in probe.allocator_versions.items():
        seen.append(f"allocator '{name}' {version}")
        if version not in SANE_ALLOCATOR_VERSIONS:
            problems.append(f"the OrtAllocator for '{name}' declares version {version}")
    if problems:
        raise CheckFailed("; ".join(dict.fromkeys(problems)) + f" (sane: {SANE_VERSIONS.start}.."
                          f"{SANE_VERSIONS.stop - 1})")
    if not seen:
        raise CheckSkipped(probe.blocked or "no table was obtained")
    return "ort_version_supported: " + ", ".join(seen)


def version_gating(probe: Probe) -> str:
    if not probe.first_ep:
        raise CheckSkipped(probe.blocked or f"no OrtEp (see ep_created): {probe.ep_error}")
    states = probe.first_ep["states"]
    broken = [f"{label('OrtEp', m)} is read but {', '.join(label('OrtEp', n) for n in needs if states[n] != SET)} "
              "is not (NULL or gated away)" for m, needs in _NEEDS.items()
              if states.get(m) == SET and any(states[n] != SET for n in needs)]
    if broken:
        raise CheckFailed("; ".join(broken))
    unread = [label("OrtEpFactory", m) for m in probe.factory_beyond_host] + \
        [label("OrtEp", m) for m in probe.first_ep["beyond_host"]]
    probe.info["unread_members"] = unread
    read = sum(1 for s in states.values() if s == SET)
    return (f"this API reads {read} OrtEp members the plugin set"
            + (f"; set but newer than this API, so never called here: {', '.join(unread)}" if unread else ""))


def release_and_unload(probe: Probe) -> str:
    _fail_with(probe, "release_and_unload")
    if not probe.registered:
        raise CheckSkipped(probe.blocked or "not registered")
    count = len(probe.info.get("factories", []))
    factories = f"{count} factor{'y' if count == 1 else 'ies'}"
    if probe.mapped_after_close:
        reasons = stay_loaded_reasons(probe.spec.library)
        why = f": {'; '.join(reasons)}" if reasons else " (something else holds a reference to it)"
        raise CheckFailed(f"ReleaseEpFactory returned OK for {factories}, but the library stays mapped after "
                          f"unregistration{why}; a plugin that cannot be unloaded keeps its state between "
                          "registrations")
    if probe.mapped_after_close is None:
        return f"ReleaseEpFactory returned OK for {factories} (mappings not inspected)"
    return f"ReleaseEpFactory returned OK for {factories}; the library was unmapped"


def conduct_report(probe: Probe) -> str:
    problems = probe.findings.of("conduct_report")
    problems += [f"epabi host error (a bug in epabi, please report it): {m}" for m in probe.findings.internal]
    if problems:
        raise CheckFailed("; ".join(problems))
    if probe.host is None:
        raise CheckSkipped("no host")
    if probe.findings.limitations:
        return f"nothing else; functions epabi does not serve were asked for: {'; '.join(probe.findings.limitations)}"
    return "nothing else in the host's conduct report"

