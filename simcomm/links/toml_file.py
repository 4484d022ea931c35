"""User link classes from a TOML file.

Format (one table per class under ``[links]``)::

    [links.my-ib]
    bandwidth = "90Gb/s"     # per direction; a bare number is bytes/s
    latency = "1.5us"        # per hop; a bare number is seconds
    family = "infiniband"    # optional, default "custom"
    summary = "..."          # optional
    socket-latency = true    # optional: the latency was measured through TCP sockets end to end, so a
                             # TCP stack's per-message overhead is already in it (docs/links.md)

A user class may not reuse a preset's name (that would silently change every
topology built from the preset).  Every problem is one :class:`ConfigError`
line naming the file and the class.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

import tomllib

from simcomm.errors import ConfigError
from simcomm.links.base import LINKS, LinkClass
from simcomm.units import parse_bandwidth, parse_time

__all__ = ["load_link_file", "parse_link_table", "FAMILIES"]

FAMILIES = ("nvlink", "nvswitch", "pcie", "infiniband", "roce", "ethernet", "aries", "shm", "custom")
_KEYS = ("bandwidth", "latency", "family", "summary", "socket-latency")
MAX_BANDWIDTH = 1e16
MAX_LATENCY = 1.0


def parse_link_table(table: object, where: str, *, allow_preset_names: bool = False) -> dict[str, LinkClass]:
    """Turn a ``{name: {bandwidth, latency, ...}}`` mapping into link classes."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: [links] must be a table of link classes")
    out: dict[str, LinkClass] = {}
    for name, spec in table.items():
        field = f"{where}: link {name!r}"
        if not name or not all(c.isalnum() or c in "-_." for c in name):
            raise ConfigError(f"{field}: name must be letters, digits, '-', '_' or '.'")
        if not allow_preset_names and name in LINKS:
            raise ConfigError(f"{field} redefines a preset; choose another name")
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{field} must be a table with bandwidth and latency")
        unknown = sorted(set(spec) - set(_KEYS))
        if unknown:
            raise ConfigError(f"{field}: unknown key {unknown[0]!r}; valid keys: {', '.join(_KEYS)}")
        for key in ("bandwidth", "latency"):
            if key not in spec:
                raise ConfigError(f"{field}: missing key {key!r}")
        bw = parse_bandwidth(spec["bandwidth"], f"{field} bandwidth")
        lat = parse_time(spec["latency"], f"{field} latency")
        # physical bounds: 1 B/s .. 10 PB/s and at most 1 s per hop (1e308 s would make every time inf)
        if not 1.0 <= bw <= MAX_BANDWIDTH:
            raise ConfigError(f"{field}: bandwidth {bw:.4g} B/s is out of range (1 B/s to 10 PB/s)")
        if not 0.0 <= lat <= MAX_LATENCY:
            raise ConfigError(f"{field}: latency {lat:.4g} s is out of range (0 to 1 s per hop)")
        family = spec.get("family", "custom")
        if family not in FAMILIES:
            raise ConfigError(f"{field}: family {family!r} is not one of {', '.join(FAMILIES)}")
        summary = spec.get("summary", f"user link class from {where}")
        if not isinstance(summary, str):
            raise ConfigError(f"{field}: summary must be a string")
        sockets = spec.get("socket-latency", False)
        if not isinstance(sockets, bool):
            raise ConfigError(f"{field}: socket-latency must be true or false")
        out[name] = LinkClass(name, bw, lat, family, summary, f"user file {where}", socket_latency=sockets)
    return out


def load_link_file(path: str | Path) -> dict[str, LinkClass]:
    """Read ``path`` and return its link classes by name (``ConfigError`` on any problem)."""
    p = Path(path)
    try:
        st = os.stat(p)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 1 << 20:
            raise ConfigError(f"link file {str(p)!r}: not a regular file of at most 1 MiB")
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"link file {str(p)!r}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"link file {str(p)!r}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"link file {str(p)!r}: malformed TOML ({exc})") from None
    if "links" not in data:
        raise ConfigError(f"link file {str(p)!r}: missing [links] table")
    extra = sorted(set(data) - {"links"})
    if extra:
        raise ConfigError(f"link file {str(p)!r}: unknown top-level key {extra[0]!r}; valid keys: links")
    return parse_link_table(data["links"], f"link file {str(p)!r}")
