"""Typed fields of ``SessionOptions`` and ``RunOptions``, converted as onnxruntime's pybind11 binding converts them.

onnxruntime's options objects are pybind11 classes whose properties take a C++ ``bool``, ``int``, ``std::string``
or enum; a value pybind11 cannot convert raises TypeError and leaves the field as it was. Observed on the 1.24.4
and 1.32.0 wheels (the same on both):

* **bool** (``enable_mem_pattern``, ``terminate``, ...): True/False; None is False; any object with ``__bool__``
  (int, float, numpy scalars and 0-d arrays, Decimal) its truth value; anything else (str, list, bytes) TypeError.
* **int** (``intra_op_num_threads``, ``log_severity_level``, ...): a C ``int``. Python floats (and ``np.float64``,
  a float subclass) are refused; other objects with ``__index__`` or ``__int__`` (bool, numpy integers and other
  numpy scalars, Fraction, Decimal) convert, truncating; a result outside -2**31 .. 2**31-1 raises TypeError, as
  does anything without either method (str, None).
* **str** (``logid``, ``optimized_model_filepath``, ``profile_file_prefix``): str (and subclasses such as
  ``np.str_``), bytes or bytearray, whose bytes are kept; reading them back decodes them as UTF-8 (invalid
  UTF-8 raises UnicodeDecodeError on read, as in onnxruntime). Numbers and None raise TypeError.
* **enum** (``graph_optimization_level``, ``execution_mode``, ``execution_order``): only a member of the enum
  (:class:`GraphOptimizationLevel`, ...); an int, even a valid value, raises TypeError.

The fields are data descriptors over a ``_<name>`` slot of the owning class. Setting and reading is thread-safe
to the extent of one attribute store (RunOptions' ``terminate`` is set from other threads during a run).
"""

from __future__ import annotations

import enum
from typing import Any

from .errors import ConfigEntryNotFoundError

_INT_MIN, _INT_MAX = -(2 ** 31), 2 ** 31 - 1


class GraphOptimizationLevel(enum.IntEnum):
    """onnxruntime's ``GraphOptimizationLevel`` (``ort.GraphOptimizationLevel``), the same names and values."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    """onnxruntime's ``ExecutionMode``."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(enum.IntEnum):
    """onnxruntime's ``ExecutionOrder``."""

    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


def config_entry(config: dict[str, str], key: object, owner: str, method: str) -> str:
    """``config[key]`` as onnxruntime's get_*_config_entry answers it (1.24.4 and 1.32.0): TypeError for a key that is
    not a str, ConfigEntryNotFoundError (a RuntimeError) naming ``owner`` ("SessionOptions", "RunOptions") and the
    key for a missing one."""
    if not isinstance(key, str):
        raise TypeError(f"{method}: key must be a str, not {type(key).__name__}")
    try:
        return config[key]
    except KeyError:
        raise ConfigEntryNotFoundError(f"{owner} does not have configuration with key: {key}") from None


def _refuse(owner: str, name: str, kind: str, value: object) -> TypeError:
    return TypeError(f"{owner}.{name} must be {kind}, not {type(value).__name__} {value!r} "
                     "(onnxruntime's binding refuses it too)")


def to_bool(value: object, where: str = "value") -> bool:
    """``value`` as pybind11 converts it to a C++ bool. Raises TypeError where it refuses it."""
    if value is None:
        return False
    # numpy's str scalar has a __bool__ but no number protocol's bool slot, which is what pybind11 asks for
    if isinstance(value, str) or not hasattr(type(value), "__bool__"):
        raise TypeError(f"{where} must be a bool, not {type(value).__name__}")
    try:
        return bool(value)
    except Exception as exc:  # an array of several elements: pybind11 reports the failed conversion as TypeError
        raise TypeError(f"{where}: {type(value).__name__} has no truth value ({exc})") from exc


def to_int(value: object, where: str = "value") -> int:
    """``value`` as pybind11 converts it to a C ``int``. Raises TypeError where it refuses it."""
    kind = type(value)
    if isinstance(value, float) or not (hasattr(kind, "__index__") or hasattr(kind, "__int__")):
        raise TypeError(f"{where} must be an int, not {kind.__name__}")
    number: Any = None
    for convert in (getattr(kind, "__index__", None), getattr(kind, "__int__", None)):
        if convert is None:
            continue
        try:  # as pybind11: __index__ first, then int() (np.bool_ refuses __index__ but converts)
            number = convert(value)
            break
        except Exception:
            continue
    if not isinstance(number, int):
        raise TypeError(f"{where}: {kind.__name__} {value!r} does not convert to an int")
    if not _INT_MIN <= number <= _INT_MAX:
        raise TypeError(f"{where}: {number} does not fit a C int ({_INT_MIN}..{_INT_MAX})")
    return int(number)


class _Field:
    """One typed field stored in the owner's ``_<name>`` slot."""

    kind = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.slot = "_" + name
        self.owner = owner.__name__

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(obj, self.slot)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj, self.slot, self.convert(value))

    def convert(self, value: Any) -> Any:
        raise NotImplementedError


class BoolField(_Field):
    """A C++ ``bool`` property."""

    def convert(self, value: Any) -> bool:
        return to_bool(value, f"{self.owner}.{self.name}")


class IntField(_Field):
    """A C ``int`` property."""

    def convert(self, value: Any) -> int:
        return to_int(value, f"{self.owner}.{self.name}")


class StrField(_Field):
    """A ``std::string`` property: str, or bytes (bytearray) kept as given and decoded as UTF-8 when read."""

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = getattr(obj, self.slot)
        return value.decode() if isinstance(value, bytes) else value

    def convert(self, value: Any) -> str | bytes:
        if isinstance(value, str):
            return str(value)
        if isinstance(value, bytes | bytearray):
            return bytes(value)
        raise _refuse(self.owner, self.name, "a str", value)


class EnumField(_Field):
    """An enum property: only members of ``enum_type``."""

    def __init__(self, enum_type: type[enum.IntEnum]) -> None:
        self.enum_type = enum_type

    def convert(self, value: Any) -> enum.IntEnum:
        if not isinstance(value, self.enum_type):
            raise _refuse(self.owner, self.name, f"an epabi.{self.enum_type.__name__}", value)
        return value
