"""EP options: prefixes in order of precedence, and clear errors naming the key and the value."""

from __future__ import annotations

import logging
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import epabi

KEY = "min_num_runs_before_cuda_graph_capture"
INT_MAX = 2**31 - 1


def _create(host: epabi.Host, config: dict[str, str]) -> epabi.Ep:
    so = epabi.SessionOptions()
    for key, value in config.items():
        so.add_session_config_entry(key, value)
    so.add_provider_for_devices(host.get_ep_devices())
    return host.create_ep(so)


@pytest.mark.parametrize("prefix", ["ep.epabiexecutionprovider.", "ep.cuda.", ""])
@pytest.mark.parametrize("value", ["-1", "abc", "2.5", "", "99999999999", " 3"])
def test_bad_integer_is_refused_naming_key_and_value(host: epabi.Host, prefix: str, value: str) -> None:
    with pytest.raises(epabi.OrtStatusError) as info:
        _create(host, {prefix + KEY: value})
    assert info.value.code == epabi.OrtErrorCode.INVALID_ARGUMENT
    assert f"'{prefix}{KEY}'" in info.value.message
    assert f"'{value}'" in info.value.message


@pytest.mark.parametrize("value", ["2", "yes", "on", "TRUEISH"])
def test_bad_bool_is_refused(host: epabi.Host, value: str) -> None:
    key = "ep.epabiexecutionprovider.enable_cuda_graph"
    with pytest.raises(epabi.OrtStatusError, match=f"'{key}' has value '{value}'"):
        _create(host, {"ep.epabiexecutionprovider.enable_cuda_graph": value})


def test_provider_options_arrive_with_the_ep_prefix(host: epabi.Host) -> None:
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices(), {KEY: "-4"})
    assert so.config == {f"ep.epabiexecutionprovider.{KEY}": "-4"}
    with pytest.raises(epabi.OrtStatusError, match=f"'ep.epabiexecutionprovider.{KEY}' has value '-4'"):
        host.create_ep(so)


def test_precedence_first_prefix_wins(host: epabi.Host) -> None:
    # the higher-precedence spelling is read; the malformed lower ones are never looked at
    with _create(host, {f"ep.epabiexecutionprovider.{KEY}": "3", f"ep.cuda.{KEY}": "x", KEY: "-1"}) as ep:
        assert ep.name == epabi.get_ep_name()
    with pytest.raises(epabi.OrtStatusError, match=f"'ep.cuda.{KEY}'"):
        _create(host, {f"ep.cuda.{KEY}": "x", KEY: "3"})


def test_enable_cuda_graph_precedence_is_visible_in_the_log(host: epabi.Host,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    def warned(config: dict[str, str]) -> bool:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="epabi"):  # graph capture on: an INFO line names the option
            _create(host, config).close()
        return any("enable_cuda_graph=1" in r.getMessage() for r in caplog.records)

    assert warned({"ep.cuda.enable_cuda_graph": "1"})
    assert warned({"enable_cuda_graph": "true"})
    assert not warned({"ep.epabiexecutionprovider.enable_cuda_graph": "0", "ep.cuda.enable_cuda_graph": "1"})
    assert not warned({})


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.integers(min_value=-(2**40), max_value=2**40).map(str),
                 st.text(alphabet="0123456789-+ .ex", max_size=12)))
def test_integer_option_accepts_exactly_decimal_ints_in_range(library_path: str, text: str) -> None:
    # a GPU device instead of the software adapter: no environment change inside hypothesis' loop
    with epabi.Host(hardware=[epabi.cpu_device(), epabi.nvidia_gpu_device()]) as host:
        host.register_execution_provider_library("epabi", library_path)
        expected_ok = re.fullmatch(r"\d+", text) is not None and 0 <= int(text) <= INT_MAX
        try:
            _create(host, {KEY: text}).close()
            accepted = True
        except epabi.OrtStatusError as exc:
            assert exc.code == epabi.OrtErrorCode.INVALID_ARGUMENT
            assert f"'{KEY}' has value '{text}'" in exc.message
            accepted = False
    assert accepted == expected_ok, text
