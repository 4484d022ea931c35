"""Parse human unit strings once, at the edge; everything inside is SI.

Inside simcomm every size is in bytes, every bandwidth in bytes per second and
every time in seconds, all as ``float``.  The parsers here are the only place
where strings such as ``"100MB"``, ``"100Gb/s"`` or ``"1.5us"`` are read.

Decimal prefixes (k, M, G, T) are powers of 1000 and binary ones (Ki, Mi, Gi,
Ti) powers of 1024, as in IEC 80000-13.  In bandwidths, a lower-case ``b``
means bits and an upper-case ``B`` bytes (``100Gb/s`` = 12.5e9 B/s).
"""

from __future__ import annotations

import math
import re

from simcomm.errors import UnitError

__all__ = [
    "parse_size",
    "parse_bandwidth",
    "parse_time",
    "format_size",
    "format_bandwidth",
    "format_time",
    "SIZE_UNITS",
    "BANDWIDTH_UNITS",
    "TIME_UNITS",
    "parse_nccl_tests_size",
    "format_size_iec",
    "NCCL_TESTS_SUFFIXES",
]

_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
           "KI": 1024.0, "MI": 1024.0**2, "GI": 1024.0**3, "TI": 1024.0**4}

SIZE_UNITS = ("B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB")
BANDWIDTH_UNITS = ("b/s", "Kb/s", "Mb/s", "Gb/s", "Tb/s", "B/s", "KB/s", "MB/s",
                   "GB/s", "TB/s", "KiB/s", "MiB/s", "GiB/s", "Gbps", "GBps")
TIME_UNITS = ("s", "ms", "us", "ns", "min", "h")
_TIME = {"S": 1.0, "MS": 1e-3, "US": 1e-6, "ΜS": 1e-6, "µS": 1e-6, "NS": 1e-9,
         "MIN": 60.0, "H": 3600.0}

_NUMBER = r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_SIZE_RE = re.compile(_NUMBER + r"\s*([kKMGT]i?)?(B)?\s*$")
_BW_RE = re.compile(_NUMBER + r"\s*([kKMGT]i?)?(b|B)(?:/s|ps)\s*$")
_TIME_RE = re.compile(_NUMBER + r"\s*([a-zA-Zµμ]*)\s*$")


def _check(value: float, field: str, text: object, allow_zero: bool) -> float:
    if not math.isfinite(value):
        raise UnitError(f"{field}: {text!r} is not a finite number")
    if value < 0 or (value == 0 and not allow_zero):
        need = "non-negative" if allow_zero else "positive"
        raise UnitError(f"{field}: {text!r} must be {need}")
    return value


def _number(text: object, field: str, allow_zero: bool) -> float | None:
    """Accept a bare int/float as already being in SI units."""
    if isinstance(text, bool):
        raise UnitError(f"{field}: expected a quantity, got {text!r}")
    if isinstance(text, (int, float)):
        return _check(float(text), field, text, allow_zero)
    if not isinstance(text, str):
        raise UnitError(f"{field}: expected a quantity such as a string with a unit, got {type(text).__name__}")
    return None


def parse_size(text: str | float, field: str = "size", *, allow_zero: bool = False) -> float:
    """Return bytes for strings such as ``"100MB"``, ``"1.5 GiB"`` or ``"4096"``.

    A bare number means bytes.  Raises :class:`UnitError` naming ``field``.
    """
    bare = _number(text, field, allow_zero)
    if bare is not None:
        return bare
    m = _SIZE_RE.match(str(text).strip())
    if not m or (m.group(2) and not m.group(3)):
        raise UnitError(f"{field}: cannot parse {text!r}; expected a number with one of "
                        f"{', '.join(SIZE_UNITS)}")
    value = float(m.group(1)) * _PREFIX[(m.group(2) or "").upper()]
    return _check(value, field, text, allow_zero)


def parse_bandwidth(text: str | float, field: str = "bandwidth") -> float:
    """Return bytes/s for strings such as ``"100Gb/s"``, ``"12.5GB/s"``, ``"3125 Mbps"``.

    A bare number means bytes per second.
    """
    bare = _number(text, field, False)
    if bare is not None:
        return bare
    m = _BW_RE.match(str(text).strip())
    if not m:
        raise UnitError(f"{field}: cannot parse {text!r}; expected a number with one of "
                        f"{', '.join(BANDWIDTH_UNITS)}")
    value = float(m.group(1)) * _PREFIX[(m.group(2) or "").upper()]
    if m.group(3) == "b":
        value /= 8.0
    return _check(value, field, text, False)


def parse_time(text: str | float, field: str = "time", *, allow_zero: bool = True) -> float:
    """Return seconds for strings such as ``"1.5us"``, ``"3 ms"`` or ``"0.2"`` (seconds)."""
    bare = _number(text, field, allow_zero)
    if bare is not None:
        return bare
    m = _TIME_RE.match(str(text).strip())
    unit = (m.group(2) if m else "") or "s"
    if not m or unit.upper() not in _TIME:
        raise UnitError(f"{field}: cannot parse {text!r}; expected a number with one of "
                        f"{', '.join(TIME_UNITS)}")
    return _check(float(m.group(1)) * _TIME[unit.upper()], field, text, allow_zero)


def _scaled(value: float, steps: tuple[tuple[float, str], ...], fmt: str) -> str:
    for scale, unit in steps:
        if abs(value) >= scale:
            return f"{value / scale:{fmt}} {unit}"
    scale, unit = steps[-1]
    return f"{value / scale:{fmt}} {unit}"


def format_size(nbytes: float) -> str:
    """Human string with decimal prefixes, e.g. ``100 MB``."""
    return _scaled(nbytes, ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB"), (1.0, "B")), ".4g")


def format_bandwidth(bps: float) -> str:
    """Human string in GB/s-style units, e.g. ``12.5 GB/s``."""
    return _scaled(bps, ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "KB/s"), (1.0, "B/s")), ".4g")


def format_time(seconds: float) -> str:
    """Human string, e.g. ``16.8 ms``, ``12.6 min``, ``21.04 h`` (never ``7.574e+04 s``)."""
    if seconds != seconds or abs(seconds) == float("inf"):
        return str(seconds)
    if abs(seconds) >= 3600:
        return f"{seconds / 3600:.4g} h" if abs(seconds) < 3600 * 1e4 else f"{seconds / 3600:,.0f} h"
    return _scaled(seconds, ((60.0, "min"), (1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")), ".4g")


#: nccl-tests' size suffixes (``parsesize`` in its src/common.cu): one letter, either case, powers of 1024
NCCL_TESTS_SUFFIXES = {"K": 1024.0, "M": 1024.0**2, "G": 1024.0**3}
_NCCL_TESTS_RE = re.compile(_NUMBER + r"\s*([kKmMgG])\s*$")


def parse_nccl_tests_size(text: str | float, field: str = "size", *, allow_zero: bool = False) -> float:
    """Bytes of ``text`` written either as nccl-tests writes sizes or as simcomm does.

    nccl-tests' ``-b``/``-e``/``-i`` take a number with an optional one-letter suffix K, M or G (either
    case), powers of 1024 (``8G`` = 8 GiB); simcomm's units (:func:`parse_size`) keep their meaning, so
    ``8GB`` is 8e9 bytes and ``8GiB`` is 8 GiB.
    """
    if isinstance(text, str):
        m = _NCCL_TESTS_RE.match(text.strip())
        if m:
            return _check(float(m.group(1)) * NCCL_TESTS_SUFFIXES[m.group(2).upper()], field, text, allow_zero)
    try:
        return parse_size(text, field, allow_zero=allow_zero)
    except UnitError as exc:
        if "cannot parse" not in str(exc):
            raise
        raise UnitError(f"{field}: cannot parse {text!r}; expected a number with one of {', '.join(SIZE_UNITS)} "
                        "or nccl-tests' K, M, G (powers of 1024)") from None


def format_size_iec(nbytes: float) -> str:
    """Human string with binary prefixes, as nccl-tests' K, M, G count, e.g. ``8 GiB``, ``1.5 KiB``."""
    return _scaled(nbytes, ((1024.0**4, "TiB"), (1024.0**3, "GiB"), (1024.0**2, "MiB"), (1024.0, "KiB"), (1.0, "B")),
                   ".4g")
