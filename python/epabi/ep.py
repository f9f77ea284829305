"""An ``OrtEp`` created by a plugin factory for one session, as ONNX Runtime's core holds it.

Creation (``Ep.create``): the factory's ``GetNumCustomOpDomains``, then ``CreateEp`` with the session options
and a session logger, then table checks, then ``IsConcurrentRunSupported`` (each optional member called only
when the host reads it: :mod:`epabi.gating`).
``close`` calls ``ReleaseEp``. Not thread-safe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._ffi import ffi
from .api_table import Logger
from .errors import ConductError, HostLimitationError, OrtErrorCode, OrtStatusError
from .gating import readable_members
from .objects import pystr

if TYPE_CHECKING:
    from .library import Factory
    from .session_options import SessionOptions

#: OrtEp members ORT calls without a NULL check.
REQUIRED_EP_MEMBERS = ("GetName", "GetCapability")


class Ep:
    """A live plugin EP: ``name``, ``members`` (readable non-NULL members), ``concurrent_run_supported``."""

    def __init__(self, factory: Factory, session_options: SessionOptions) -> None:
        self.factory = factory
        self.host = factory.library.host
        self.session_options = session_options
        self.ptr: Any = ffi.NULL
        self.concurrent_run_supported: bool | None = None
        self._so_ptr: Any = ffi.NULL
        self.logger = Logger(f"epabi.session.{factory.name}")

    @classmethod
    def create(cls, factory: Factory, session_options: SessionOptions) -> Ep:
        """Creates the EP on ``session_options.provider_devices``.

        Raises:
            OrtStatusError: CreateEp (or a query after it) failed, or the OrtEp declares a version the emulated
                release refuses (ORT_FAIL, 1.28+: below 22); nothing is left allocated.
            ConductError: the returned table breaks the contract (NULL GetName/GetCapability, Compile without
                ReleaseNodeComputeInfos, ...).
        """
        ep = cls(factory, session_options)
        try:
            ep._create()
        except BaseException:
            ep.close()
            raise
        return ep

    def _create(self) -> None:
        host, factory = self.host, self.factory
        if "GetNumCustomOpDomains" in factory.members:
            num = ffi.new("size_t*", 0)
            factory.call_status("GetNumCustomOpDomains", num)
            if num[0]:
                raise HostLimitationError(f"{factory.name} offers {num[0]} custom op domain(s); the epabi host "
                                          f"does not load custom op domains")
        devices = self.session_options.provider_devices
        hw = ffi.new("OrtHardwareDevice*[]", [d.device.ptr for d in devices])
        meta = ffi.new("OrtKeyValuePairs*[]", [d.c_metadata.ptr for d in devices])
        self.logger.ptr = host.handles.issue(self.logger, "OrtLogger*")
        self._so_ptr = host.handles.issue(self.session_options, "OrtSessionOptions*")
        out = ffi.new("OrtEp**")
        factory.call_status("CreateEp", hw, meta, len(devices), self._so_ptr, self.logger.ptr, out)
        if out[0] == ffi.NULL:
            raise ConductError(f"{factory.name}: CreateEp succeeded but returned a NULL OrtEp")
        self.ptr = out[0]
        where = f"OrtEp of {factory.name}"
        declared, minimum = int(self.ptr.ort_version_supported), host.behaviour.min_ep_version
        if declared < minimum:
            raise OrtStatusError(OrtErrorCode.FAIL, f"OrtEp has invalid ort_version_supported={declared} (expected "
                                 f"at least {minimum}).", f"{factory.name}: CreateEp")
        if declared == 0:  # ORT before 1.28 accepts it and reads only the members of API 23 and older
            host.tolerate(f"{where}: ort_version_supported is 0; a plugin must declare the API it was built for")
        self.members = readable_members("OrtEp", self.ptr, host.api_version)
        missing = [m for m in REQUIRED_EP_MEMBERS if m not in self.members]
        if missing:
            raise ConductError(f"{where}: required OrtEp members are NULL: {', '.join(missing)}")
        if ("Compile" in self.members) != ("ReleaseNodeComputeInfos" in self.members):
            raise ConductError(f"{where}: Compile and ReleaseNodeComputeInfos must be set together")
        name = pystr(self.call("GetName"))
        if name is None:
            raise ConductError(f"{where}: GetName returned NULL")
        self.name = name
        if "IsConcurrentRunSupported" in self.members:
            flag = ffi.new("bool*", False)
            self.call_status("IsConcurrentRunSupported", flag)
            self.concurrent_run_supported = bool(flag[0])

    def call(self, member: str, *args: Any) -> Any:
        """Calls a readable member (KeyError if the host would not read it)."""
        with self.host.calling(self.factory.library, f"OrtEp::{member}"):
            return self.members[member](self.ptr, *args)

    def call_status(self, member: str, *args: Any) -> None:
        with self.host.calling(self.factory.library, f"OrtEp::{member}"):
            self.host.raise_status(self.members[member](self.ptr, *args), f"{self.factory.name}: OrtEp::{member}")

    def close(self) -> None:
        """``ReleaseEp``; idempotent."""
        host = self.host
        if self.ptr != ffi.NULL:
            ptr, self.ptr = self.ptr, ffi.NULL
            with host.calling(self.factory.library, "OrtEpFactory::ReleaseEp"):
                self.factory.members["ReleaseEp"](self.factory.ptr, ptr)
        for handle in (self._so_ptr, self.logger.ptr):
            if handle != ffi.NULL:
                host.handles.drop(handle)
        self._so_ptr = self.logger.ptr = ffi.NULL

    def __enter__(self) -> Ep:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
