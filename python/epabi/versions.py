"""ONNX Runtime releases, the API versions they speak, and how an emulated host of each behaves.

ORT 1.N serves ``OrtApi`` version N (true for N >= 11). The host emulates one API version; it reports that
version's release string as ``GetVersionString()`` and returns NULL from ``GetApi(v)`` for ``v`` above it.

Two kinds of version facts, kept apart:

* which table members exist at a version: the ``since`` marks of ``ort_abi.h``, read by
  :func:`epabi._ffi.member_since` and never restated here (the ``*_SINCE`` constants below are read from it);
* how ONNX Runtime's core behaves at a version: :data:`BEHAVIOURS`, one row per emulated API version.

Adding an emulated API version: lay out its host-side table slots in ``ort_abi.h`` (members where their
declarations are known, padding otherwise; ``EPABI_ORT_HOST_API_VERSION`` is the newest) and add its row to
:data:`BEHAVIOURS`; the import below fails until both agree. The plugin's own layouts (``EPABI_ORT_API_VERSION``)
may stay older: a host reads only the members a plugin's table declares.

How each release was established: 1.22.0-1.30.0 from their public headers (facts sheet) plus behaviour observed
on each wheel; 1.31.1 and 1.32.0 from their wheels alone (table sizes by binary analysis, the new slots' work from
their machine code, behaviour observed; see ``ort_api_slots.py``), so their new slots are served as traps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._ffi import NEWEST_HOST_API, member_since
from .errors import UnknownReleaseError


@dataclass(frozen=True)
class HostBehaviour:
    """How ONNX Runtime's core of one API version treats a plugin EP, where releases differ.

    Attributes:
        api: the API version (ORT 1.<api>).
        release: what ``GetVersionString()`` returns: the patch release of 1.<api> checked in the facts sheet.
        syncs_after_replay: the host calls ``OrtEp::Sync`` right after a successful ``ReplayGraph`` (when the
            plugin's table has ``Sync``). Observed on 1.27 and newer; 1.26.0 does not (facts sheet, section 3).
        min_ep_version: the lowest ``OrtEp::ort_version_supported`` session creation accepts (0: any). 1.28.0 and
            newer fail with ORT_FAIL "OrtEp has invalid ort_version_supported=N (expected at least 22)."; 1.24.4,
            1.26.0 and 1.27.0 accept even 0 (observed with the misbehaving test plugin on each release's wheel).
        max_onnx_opset: the newest ``ai.onnx`` opset a model may import; newer ones fail the load with ORT_FAIL
            (observed on each release's wheel; ``ai.onnx.ml`` is capped at 5 on all of them).
        max_ir_version: the newest model IR version the release loads; newer ones fail the load with ORT_FAIL
            "Unsupported model IR version: N, max supported IR version: M" (observed: 13 on 1.24.4 and 1.26.0, 14 on
            1.32.0; 1.25 lies between two releases that read 13). None: not observed, not checked.
        checks_factory_count: ``CreateEpFactories`` reporting more factories than ``max_factories`` fails the
            registration with ORT_FAIL (1.31.1, 1.32.0: "CreateEpFactories returned N factories but the supplied
            capacity was 4."); older releases abort the process on an assertion (observed).
        requeries_graph_capture: session creation asks ``OrtEp::IsGraphCaptureEnabled`` a second time, after
            ``IsStreamAware`` and before the kernels (``CreateState``). Observed on 1.32.0 (facts sheet, section 9,
            and the differential tests' traces); 1.26.0 asks once; 1.27-1.31 were not traced, and are taken to ask once.
        limits_kernel_ep_version: creating a kernel of a kernel-registry EP fails (``ORT_FAIL``) when the EP's
            ``ort_version_supported`` is 0 or above the host's API. Observed on 1.26.0 (the WebGPU plugin, which
            declares 30, runs on 1.24.4 and 1.32.0 but not there); the facts sheet finds the check in no other
            release.
        profile_name_ms: a profile file's name ends with the milliseconds of the profiling start
            (``prefix_2026-12-01_20-05-11_372.json``). Observed on 1.26.0 and 1.32.0; 1.24.4 writes none
            (``prefix_2026-12-01_20-05-11.json``); 1.25 and 1.27-1.31 were not observed (taken as their neighbours).
    """

    api: int
    release: str
    syncs_after_replay: bool
    max_onnx_opset: int
    min_ep_version: int = 0
    max_ir_version: int | None = None
    checks_factory_count: bool = False
    limits_kernel_ep_version: bool = False
    requeries_graph_capture: bool = False
    profile_name_ms: bool = True

    @property
    def max_opsets(self) -> dict[str, int]:
        """Newest opset per domain the release loads (domains it does not cap are absent)."""
        return {"ai.onnx": self.max_onnx_opset, "ai.onnx.ml": 5}


#: One row per emulated API version, oldest first.
BEHAVIOURS: tuple[HostBehaviour, ...] = (
    HostBehaviour(22, "1.22.0", syncs_after_replay=False, max_onnx_opset=22, profile_name_ms=False),
    HostBehaviour(23, "1.23.2", syncs_after_replay=False, max_onnx_opset=23, profile_name_ms=False),
    HostBehaviour(24, "1.24.4", syncs_after_replay=False, max_onnx_opset=25, max_ir_version=13,
                  profile_name_ms=False),
    HostBehaviour(25, "1.25.1", syncs_after_replay=False, max_onnx_opset=26, max_ir_version=13,
                  profile_name_ms=False),
    HostBehaviour(26, "1.26.0", syncs_after_replay=False, max_onnx_opset=26, max_ir_version=13,
                  limits_kernel_ep_version=True),
    HostBehaviour(27, "1.27.0", syncs_after_replay=True, max_onnx_opset=26),
    HostBehaviour(28, "1.28.0", syncs_after_replay=True, max_onnx_opset=26, min_ep_version=22),
    HostBehaviour(29, "1.29.0", syncs_after_replay=True, max_onnx_opset=26, min_ep_version=22),
    HostBehaviour(30, "1.30.0", syncs_after_replay=True, max_onnx_opset=26, min_ep_version=22),
    HostBehaviour(31, "1.31.1", syncs_after_replay=True, max_onnx_opset=26, min_ep_version=22,
                  checks_factory_count=True),
    HostBehaviour(32, "1.32.0", syncs_after_replay=True, max_onnx_opset=28, min_ep_version=22, max_ir_version=14,
                  checks_factory_count=True, requeries_graph_capture=True),
)
_BY_API = {b.api: b for b in BEHAVIOURS}

OLDEST_EMULATED = BEHAVIOURS[0].api
#: The newest API whose layouts ort_abi.h declares; the table must end there.
NEWEST_EMULATED = NEWEST_HOST_API
#: Every emulated API version, oldest first (tests parametrize over this).
EMULATED: tuple[int, ...] = tuple(range(OLDEST_EMULATED, NEWEST_EMULATED + 1))
if tuple(_BY_API) != EMULATED:
    raise ImportError(f"epabi.versions.BEHAVIOURS covers API {sorted(_BY_API)}, but ort_abi.h lays out host tables "
                      f"up to API {NEWEST_HOST_API}: give each API version from {OLDEST_EMULATED} on one row, in order")

#: Release string the emulated host reports per API version.
RELEASES: dict[int, str] = {b.api: b.release for b in BEHAVIOURS}

#: Plugin-table members that appeared up to this API version are read whatever ``ort_version_supported`` the
#: plugin declared; newer ones only when the declared version has them. ORT 1.24 introduced that check and
#: applies it only to members added from 1.24 on (observed on 1.24.4-1.32.0; facts sheet, section 9).
ALWAYS_READ_UP_TO = 23

#: ``OrtAllocator::GetStats``: the host calls it only on allocators whose ``version`` has it.
ALLOCATOR_STATS_SINCE = member_since("OrtAllocator")["GetStats"]
#: ``OrtEp::ReleaseCapturedGraph``: ``SessionReleaseCapturedGraph`` needs it.
RELEASE_CAPTURED_GRAPH_SINCE = member_since("OrtEp")["ReleaseCapturedGraph"]

#: The oldest API whose number is also its ONNX Runtime release's minor version (ORT 1.11 serves API 11).
_FIRST_RELEASE_NUMBERED_API = 11


def behaviour(api: int) -> HostBehaviour:
    """The :class:`HostBehaviour` row of an emulated API version. Raises KeyError outside :data:`EMULATED`."""
    return _BY_API[api]


def since_label(api: int) -> str:
    """How ort_abi.h's ``since`` marks name an API version: ``"1.24"`` for API 24, ``"v8"`` for API 8."""
    return f"1.{api}" if api >= _FIRST_RELEASE_NUMBERED_API else f"v{api}"


def parse_api_version(text: str | int) -> int:
    """API version from ``24``, ``"24"``, ``"1.24"`` or ``"1.24.4"``.

    A release with its patch number must be the one the host emulates for that API (:data:`RELEASES`:
    ``"1.24.4"``, not ``"1.24.9"`` or ``"1.24.1"``): the host behaves as that release, so another patch would be
    emulated by a release it does not name. ``"1.24"`` and ``24`` name the API and get its emulated release.

    Raises:
        UnknownReleaseError: (a ValueError) the text is none of those forms, names a patch release other than
            the emulated one, or a version outside the emulated range; the message names the known releases.
    """
    if isinstance(text, bool) or not isinstance(text, int | str):
        raise _unknown(text, "expected an API number (24) or a release (1.24, 1.24.4)")
    if isinstance(text, int):
        version = text
    else:
        match = re.fullmatch(r"\s*(?:1\.(\d+)(\.\d+)?|(\d+))\s*", text)
        if match is None:
            raise _unknown(text, "expected an API number (24) or a release (1.24, 1.24.4)")
        version = int(match.group(1) or match.group(3))
        if match.group(2) is not None and version in RELEASES and text.strip() != RELEASES[version]:
            raise _unknown(text, f"ONNX Runtime 1.{version} is emulated as release {RELEASES[version]} only "
                                 f"(pass {RELEASES[version]!r} or '1.{version}')")
    if not OLDEST_EMULATED <= version <= NEWEST_EMULATED:
        raise _unknown(text, f"this host emulates API {OLDEST_EMULATED}..{NEWEST_EMULATED}")
    return version


def _unknown(text: object, why: str) -> UnknownReleaseError:
    known = tuple(RELEASES.values())
    return UnknownReleaseError(text, known, f"host version {text!r}: {why}; known releases: {', '.join(known)}")


def read_min_onnxruntime_version() -> str:
    """The plugin's minimum host release, from ``MIN_ONNXRUNTIME_VERSION`` (installed or source copy)."""
    from .package_files import find_package_file

    found = find_package_file("MIN_ONNXRUNTIME_VERSION", "MIN_ONNXRUNTIME_VERSION")
    if found is None:
        raise FileNotFoundError("MIN_ONNXRUNTIME_VERSION not found next to the package or in the source tree")
    return found.read_text().strip()
