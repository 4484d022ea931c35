"""Unit parsing: exact conversions, and property tests that bad input only ever raises UnitError."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.errors import ConfigError, UnitError
from simcomm.units import format_bandwidth, format_size, format_time, parse_bandwidth, parse_size, parse_time


@pytest.mark.parametrize(("text", "expected"), [
    ("100MB", 100e6), ("100 MB", 100e6), ("1.5GiB", 1.5 * 1024**3), ("4096", 4096.0), ("2KiB", 2048.0),
    ("1e3B", 1000.0), ("7B", 7.0), ("1kB", 1000.0), ("3TB", 3e12), (512, 512.0), (0.5, 0.5),
])
def test_parse_size_exact(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("100Gb/s", 12.5e9), ("12.5GB/s", 12.5e9), ("3125 Mb/s", 390.625e6), ("1Gbps", 125e6),
    ("25GBps", 25e9), ("8b/s", 1.0), ("1MiB/s", 1024.0**2), (1e9, 1e9),
])
def test_parse_bandwidth_exact(text, expected):
    assert parse_bandwidth(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("1.5us", 1.5e-6), ("3 ms", 3e-3), ("200ns", 2e-7), ("2s", 2.0), ("0.25", 0.25), ("1min", 60.0),
    ("0us", 0.0), ("4µs", 4e-6),
])
def test_parse_time_exact(text, expected):
    assert parse_time(text) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("text", ["", "MB", "12 parsecs", "1.2.3MB", "-5MB", "0MB", "nan", "inf", "1e999MB",
                                  "100Mb", "abc", "5 GiB/s"])
def test_bad_sizes_raise_unit_error_naming_field(text):
    with pytest.raises(UnitError) as info:
        parse_size(text, "--size")
    msg = str(info.value)
    assert msg.startswith("--size:") and "\n" not in msg


def test_unit_error_lists_valid_units():
    with pytest.raises(UnitError, match="KiB"):
        parse_size("3 bananas")
    with pytest.raises(UnitError, match="Gb/s"):
        parse_bandwidth("3 bananas")
    with pytest.raises(UnitError, match="ms"):
        parse_time("3 bananas")


def test_zero_size_allowed_only_when_asked():
    assert parse_size("0B", allow_zero=True) == 0.0
    with pytest.raises(UnitError):
        parse_size("0B")
    with pytest.raises(UnitError):
        parse_bandwidth("0Gb/s")
    with pytest.raises(UnitError):
        parse_time("-1ms")


def test_bool_and_foreign_types_rejected():
    for bad in (True, None, [1], {"a": 1}):
        with pytest.raises(UnitError):
            parse_size(bad)


def test_unit_error_is_config_error():
    assert issubclass(UnitError, ConfigError)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=20), st.floats(allow_nan=True, allow_infinity=True), st.integers(),
                 st.none(), st.booleans()))
def test_parsers_never_crash_otherwise(value):
    for parse in (parse_size, parse_bandwidth, parse_time):
        try:
            out = parse(value)
        except UnitError as exc:
            assert "\n" not in str(exc)
        else:
            assert isinstance(out, float) and math.isfinite(out) and out >= 0


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=1e-3, max_value=1e15), st.sampled_from(["B", "KB", "MB", "GB", "KiB", "MiB", "GiB"]))
def test_size_round_trip_scales(value, unit):
    scale = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}[unit]
    assert parse_size(f"{value!r}{unit}") == pytest.approx(value * scale, rel=1e-12)


def test_formatters():
    assert format_size(100e6) == "100 MB"
    assert format_bandwidth(12.5e9) == "12.5 GB/s"
    assert format_time(0.0168) == "16.8 ms"
    assert format_time(2.5e-6) == "2.5 us"
