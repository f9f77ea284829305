"""SessionOptions and RunOptions against onnxruntime's binding: which values each field takes (and what it reads
back), which it refuses with TypeError, and the error of a config entry that was never set.

The same probe code runs inside onnxruntime 1.24.4 and 1.32.0 (with ``ort`` as the module) and here (with
``epabi``); the two reports must be equal.
"""

from __future__ import annotations

import pytest

import epabi
from real_ort import MIN, NEWEST, run_json

#: Defines ``probe(rt)`` -> a JSON-able report of ``rt.SessionOptions`` / ``rt.RunOptions``; ``rt`` is onnxruntime
#: or epabi. Values are tried one at a time on a fresh object; enums appear by name and value.
PROBE = r'''
import decimal
import fractions

import numpy as np


class Index:
    def __index__(self):
        return 4


class Int:
    def __int__(self):
        return 5


class Falsy:
    def __bool__(self):
        return False


VALUES = {
    "str": "2", "int": 3, "zero": 0, "negative": -1, "int_max": 2**31 - 1, "int_over": 2**31, "int_min": -2**31,
    "int_under": -2**31 - 1, "float": 2.0, "true": True, "none": None, "list": [1], "bytes": b"ab",
    "bytearray": bytearray(b"ab"), "np_int64": np.int64(2), "np_float32": np.float32(-1.5), "np_float64": np.float64(1),
    "np_bool": np.bool_(True), "np_str": np.str_("x"), "array0d": np.array(3), "array2": np.array([1, 2]),
    "fraction": fractions.Fraction(7, 2), "decimal": decimal.Decimal(3), "index": Index(), "int_method": Int(),
    "falsy": Falsy(),
}
SESSION_FIELDS = ("enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse", "enable_profiling",
                  "execution_mode", "execution_order", "graph_optimization_level", "inter_op_num_threads",
                  "intra_op_num_threads", "log_severity_level", "log_verbosity_level", "logid",
                  "optimized_model_filepath", "profile_file_prefix", "use_deterministic_compute",
                  "use_per_session_threads")
RUN_FIELDS = ("log_severity_level", "log_verbosity_level", "logid", "only_execute_path_to_fetches", "terminate")


def shown(value):
    if hasattr(type(value), "__members__"):
        return ["enum", type(value).__name__, value.name, int(value)]
    return [type(value).__name__, value]


def probe(rt):
    report = {}
    for cls, fields in ((rt.SessionOptions, SESSION_FIELDS), (rt.RunOptions, RUN_FIELDS)):
        for field in fields:
            default = getattr(cls(), field)
            tries = dict(VALUES)
            if hasattr(type(default), "__members__"):
                tries["member"] = list(type(default).__members__.values())[1]
            row = {"default": shown(default)}
            for name, value in tries.items():
                obj = cls()
                try:
                    setattr(obj, field, value)
                except TypeError:
                    row[name] = "TypeError"
                else:
                    row[name] = shown(getattr(obj, field))
            report[f"{cls.__name__}.{field}"] = row
    for obj, getter in ((rt.SessionOptions(), "get_session_config_entry"), (rt.RunOptions(), "get_run_config_entry")):
        try:
            getattr(obj, getter)("no.such.key")
        except Exception as exc:
            report[getter] = [isinstance(exc, RuntimeError), isinstance(exc, KeyError), str(exc)]
    return report
'''


def _ours() -> dict:
    scope: dict = {}
    exec(PROBE, scope)
    return scope["probe"](epabi)


@pytest.mark.real_ort
@pytest.mark.parametrize("version", [MIN, NEWEST])
def test_option_fields_convert_and_refuse_as_onnxruntime(version: str) -> None:
    theirs, _, _ = run_json(version, PROBE + "\nemit(**probe(ort))\n")
    ours = _ours()
    assert ours.keys() == theirs.keys()
    differences = {key: {name: (ours[key].get(name), shown) for name, shown in row.items()
                         if ours[key].get(name) != shown} if isinstance(row, dict) else (ours[key], row)
                   for key, row in theirs.items() if ours[key] != row}
    assert differences == {}, "epabi's value, onnxruntime's"


def test_option_fields_refuse_the_reviewers_examples() -> None:
    so = epabi.SessionOptions()
    with pytest.raises(TypeError, match="intra_op_num_threads"):
        so.intra_op_num_threads = "2"  # type: ignore[assignment]
    with pytest.raises(TypeError, match="graph_optimization_level"):
        so.graph_optimization_level = 3  # type: ignore[assignment]
    assert so.intra_op_num_threads == 0 and so.graph_optimization_level is epabi.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.graph_optimization_level = epabi.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert so.graph_optimization_level.name == "ORT_DISABLE_ALL"
    ro = epabi.RunOptions()
    with pytest.raises(TypeError, match="terminate"):
        ro.terminate = "yes"  # type: ignore[assignment]
    with pytest.raises(epabi.ConfigEntryNotFoundError, match="^RunOptions does not have configuration with key: k$"):
        ro.get_run_config_entry("k")
    ro.add_run_config_entry("k", "v")
    assert ro.get_run_config_entry("k") == "v"
