"""Where the package's non-Python files lie: the plugin library, the ABI header, the CMake package config and
``MIN_ONNXRUNTIME_VERSION``.

A wheel install keeps them next to ``epabi/__init__.py``. A scikit-build-core editable install
(``pip install -e .``) does not: the Python files stay in ``python/epabi/`` of the checkout while CMake
installs the built files into ``site-packages/epabi/``, and the package's ``__path__`` lists both folders.
So every lookup walks the package's ``__path__``, then (for files a source checkout has without a build) the
checkout itself. Thread-safe: reads only.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
#: The checkout root when the package is imported from a source tree (``python/epabi`` -> the root).
_SOURCE_ROOT = _HERE.parent.parent


def package_dirs() -> list[Path]:
    """The package's folders, in import order (``epabi.__path__``), each resolved, without duplicates."""
    package = sys.modules.get(__package__ or "epabi")
    paths = list(getattr(package, "__path__", None) or [_HERE])
    out: list[Path] = []
    for entry in paths:
        path = Path(entry).resolve()
        if path not in out:
            out.append(path)
    if _HERE not in out:
        out.append(_HERE)
    return out


def find_package_file(relative: str, source_fallback: str | None = None) -> Path | None:
    """The first ``<package dir>/relative`` that exists, else ``<checkout>/source_fallback`` when given and
    present, else None."""
    for folder in package_dirs():
        candidate = folder / relative
        if candidate.exists():
            return candidate
    if source_fallback is not None and (_SOURCE_ROOT / source_fallback).exists():
        return _SOURCE_ROOT / source_fallback
    return None


def searched(relative: str, source_fallback: str | None = None) -> list[str]:
    """The places :func:`find_package_file` looks, for error messages."""
    places = [str(folder / relative) for folder in package_dirs()]
    if source_fallback is not None:
        places.append(str(_SOURCE_ROOT / source_fallback))
    return places
