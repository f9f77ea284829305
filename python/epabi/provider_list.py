"""The ``providers`` argument of ``InferenceSession`` and ``InferenceSession.set_providers``, as onnxruntime's
Python API reads it (``check_and_normalize_provider_args`` and ``initialize_session``, observed on 1.24.4, 1.26.0
and 1.32.0).

* None or empty: the session options' own selection (``add_provider_for_devices``), else the CPU alone.
* A sequence of names or ``(name, options)`` tuples (or names plus ``provider_options``, a sequence of dicts of
  the same length): it replaces the session options' selection, with a UserWarning when they had one.
  ``CPUExecutionProvider`` is the CPU; a plugin EP's name selects every EP device of that EP the host lists,
  with the options as provider options, on hosts 1.26 and newer (1.24.4: "Unknown Provider Type: NAME"; 1.25 was
  not observed and is taken as 1.24). Other names warn that they are not available and fail.

Pure functions; thread-safe.
"""

from __future__ import annotations

import collections.abc
import warnings
from typing import Any

from .errors import UnknownProviderError
from .session_options import SessionOptions

CPU = "CPUExecutionProvider"
#: The oldest API whose ``initialize_session`` selects a registered plugin EP by name (observed on 1.26.0 and
#: 1.32.0; 1.24.4 refuses the name).
SELECTS_PLUGIN_BY_NAME = 26

_REPLACED = ("Specified 'providers'/'provider_options' when creating InferenceSession but SessionOptions has "
             "already been configured with providers. InferenceSession will only use the providers passed to "
             "InferenceSession().")


def normalize(providers: Any, provider_options: Any) -> list[tuple[str, dict[str, str]]]:
    """``[(name, options)]`` from onnxruntime's two argument forms, repeats dropped with a warning.

    Raises:
        ValueError: the messages of onnxruntime's ``check_and_normalize_provider_args`` (not a sequence, lengths
            that differ, tuples mixed with ``provider_options``, ...).
    """
    if providers is None:
        return []
    # onnxruntime lists the names before it checks the argument: a non-iterable fails with Python's TypeError
    [p[0] if isinstance(p, tuple) else p for p in providers]  # noqa: B018
    if not isinstance(providers, collections.abc.Sequence):
        raise ValueError("'providers' should be a sequence.")
    pairs: list[tuple[str, Any]] = []
    if provider_options is not None:
        if not isinstance(provider_options, collections.abc.Sequence):
            raise ValueError("'provider_options' should be a sequence.")
        if len(providers) != len(provider_options):
            raise ValueError("'providers' and 'provider_options' should be the same length if both are given.")
        if not all(isinstance(p, str) for p in providers):
            raise ValueError("Only string values for 'providers' are supported if 'provider_options' is given.")
        if not all(isinstance(o, dict) for o in provider_options):
            raise ValueError("'provider_options' values must be dicts.")
        pairs = list(zip(providers, provider_options, strict=True))
    else:
        for entry in providers:
            if isinstance(entry, str):
                pairs.append((entry, {}))
            elif isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str) and \
                    isinstance(entry[1], dict):
                pairs.append((entry[0], entry[1]))
            else:
                raise ValueError("'providers' values must be either strings or (string, dict) tuples.")
    result: dict[str, dict[str, str]] = {}
    for name, options in pairs:
        if name in result:
            warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.", stacklevel=4)
            continue
        result[name] = {str(k): str(v) for k, v in options.items()}
    return list(result.items())


def session_options_for(providers: Any, provider_options: Any, options: SessionOptions, host: Any
                        ) -> SessionOptions:
    """The session options a session is created with: ``options`` itself when ``providers`` is None or empty,
    else a copy whose EP selection is the named providers' (see the module docstring). ``host`` lists the
    plugin EP devices (None: no plugin EP can be named).

    Raises:
        ValueError: a malformed ``providers``/``provider_options`` (see :func:`normalize`).
        TypeError: ``providers`` is not iterable (Python's message, as onnxruntime's).
        UnknownProviderError: (a RuntimeError) "Unknown Provider Type: NAME" for a name the host cannot select.
        HostLimitationError: several plugin EPs named (the host runs one, as :meth:`epabi.Host.create_ep`).
    """
    named = normalize(providers, provider_options)
    if not named:
        return options
    devices = host.get_ep_devices() if host is not None else []
    available = [CPU, *dict.fromkeys(d.ep_name for d in devices)] \
        if host is not None and host.api_version >= SELECTS_PLUGIN_BY_NAME else [CPU]
    for name, _ in named:
        if name not in available:
            warnings.warn(f"Specified provider '{name}' is not in available provider names."
                          f"Available providers: '{', '.join(available)}'", stacklevel=3)
    if options.provider_devices:
        warnings.warn(_REPLACED, stacklevel=3)
    chosen = options.copy_without_providers()
    for name, values in named:
        if name == CPU:
            continue
        if name not in available:
            raise UnknownProviderError(f"Unknown Provider Type: {name}")
        chosen.add_provider_for_devices([d for d in devices if d.ep_name == name], values)
    return chosen
