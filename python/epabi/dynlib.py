"""Loading plugin libraries with the C library's ``dlopen``/``dlsym``/``dlclose``, as ONNX Runtime does.

``cffi.FFI.dlopen`` keeps every library object and its function cache in the FFI instance for the life of the
process, even after ``dlclose``: about 33 kB per register/unregister cycle. Here the handle is a plain pointer
and each symbol is cast to the type ort_abi.h declares for it, so nothing accumulates. Thread-safe (``dlerror``
is per thread in glibc).
"""

from __future__ import annotations

import os
from typing import Any

import cffi

from ._ffi import ffi, function_pointer_type

_dl = cffi.FFI()
_dl.cdef("void* dlopen(const char* file, int mode); void* dlsym(void* handle, const char* name);"
         "int dlclose(void* handle); char* dlerror(void);")
try:
    _libc: Any = _dl.dlopen(None)  # glibc 2.34+ keeps dl* in libc itself
    _libc.dlopen  # noqa: B018 - probes that the symbol exists
except (OSError, AttributeError):  # older glibc: libdl
    _libc = _dl.dlopen("libdl.so.2")
# Each function is looked up now: cffi resolves a lib attribute with dlsym on first use, and a dlsym between a
# failed dlopen and dlerror would clear the loader's message.
_dlopen, _dlsym, _dlclose, _dlerror = _libc.dlopen, _libc.dlsym, _libc.dlclose, _libc.dlerror

#: glibc's RTLD_NOW | RTLD_LOCAL, the flags ORT's Env::LoadDynamicLibrary uses on Linux.
_MODE = getattr(os, "RTLD_NOW", 2) | getattr(os, "RTLD_LOCAL", 0)


def _error() -> str:
    message = _dlerror()
    return "unknown dlerror" if message == _dl.NULL else _dl.string(message).decode("utf-8", "replace")


class SharedLibrary:
    """One ``dlopen`` handle; :meth:`function` returns a callable cffi function pointer for a symbol.

    Raises OSError (the loader's message) when the file cannot be loaded."""

    def __init__(self, path: str) -> None:
        handle = _dlopen(path.encode(), _MODE)
        if handle == _dl.NULL:
            raise OSError(_error())
        self._handle: Any = handle
        self.path = path

    def function(self, name: str) -> Any:
        """The symbol ``name`` as the function ort_abi.h declares. Raises AttributeError when it is missing."""
        if self._handle is None:
            raise AttributeError(f"{name}: {self.path} was closed")
        _dlerror()
        address = _dlsym(self._handle, name.encode())
        if address == _dl.NULL:
            raise AttributeError(f"{name}: {_error()}")
        return ffi.cast(function_pointer_type(name), int(_dl.cast("uintptr_t", address)))

    def close(self) -> None:
        """``dlclose``; idempotent. The loader may keep the library mapped while other references exist."""
        handle, self._handle = self._handle, None
        if handle is not None:
            _dlclose(handle)
