"""The sweep grammar: ``--vary KEY=VALUES`` read naturally on the command line.

VALUES is one of:

* a comma list: ``inter=ib-edr,ib-hdr,eth-100g`` or ``density=0.01,0.1``;
* a geometric range: ``nodes=4..64x2`` (4, 8, 16, 32, 64);
* an arithmetic range: ``nodes=4..16+4`` (4, 8, 12, 16) or ``nodes=1..4`` (step 1).

Ranges are inclusive and integer when both ends are integers.  One axis holds
one kind of value: a list mixing numbers and text (``dataload=0,20ms``,
``straggler_scale=1,fast``) is refused before a point runs, since its values
cannot be ordered for the tables and plots (write ``dataload=0ms,20ms``).  The grid is
the Cartesian product of all ``--vary`` axes in the order given, so results
come out in a stable, documented order.  Keys are checked against the
parameters the point function knows; unknown keys list the valid ones.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from simcomm.errors import ConfigError

__all__ = ["parse_scalar", "Grid", "parse_vary", "parse_values", "typed_axis"]

_RANGE = re.compile(r"^\s*([0-9.eE+-]+)\s*\.\.\s*([0-9.eE+-]+?)\s*(?:([x*+])\s*([0-9.eE+-]+))?\s*$")
_MAX_POINTS = 100_000


def _num(text: str, key: str) -> int | float:
    try:
        f = float(text)
    except ValueError:
        raise ConfigError(f"--vary {key}: {text!r} is not a number") from None
    if not math.isfinite(f):
        raise ConfigError(f"--vary {key}: {text!r} is not finite")
    return int(f) if f.is_integer() and re.fullmatch(r"[+-]?\d+", text.strip()) else f


def parse_scalar(text: str) -> object:
    """A list item: int, float, bool or string, in that order of preference."""
    t = text.strip()
    if re.fullmatch(r"[+-]?\d+", t):
        return int(t)
    try:
        return float(t) if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", t) else t
    except ValueError:  # pragma: no cover - regex guarantees a float
        return t


def _kind(v: object) -> str:
    if isinstance(v, bool):
        return "true/false"
    if isinstance(v, (int, float)):
        return "number"
    return "text" if isinstance(v, str) else type(v).__name__


def typed_axis(key: str, values, where: str = "--vary") -> tuple:
    """One axis's values, refused unless all are numbers, all text or all true/false."""
    vals = tuple(values)
    kinds: dict[str, object] = {}
    for v in vals:
        kinds.setdefault(_kind(v), v)
    if len(kinds) > 1:
        shown = " and ".join(f"{v!r} is {'a ' if k == 'number' else ''}{k}" for k, v in kinds.items())
        unit = isinstance(kinds.get("text"), str) and kinds["text"][:1].isdigit()  # 20ms: a quantity
        raise ConfigError(f"{where} {key}: one axis takes one kind of value, but {shown}; give every value "
                          "the same way" + (" (with its unit: 0ms,20ms)" if unit else ""))
    return vals


def parse_values(key: str, text: str) -> tuple:
    """Expand one VALUES string into a tuple of values."""
    if not text.strip():
        raise ConfigError(f"--vary {key}: no values given; expected a list a,b,c or a range 4..64x2")
    m = _RANGE.match(text)
    if m and ".." in text:
        lo, hi = _num(m.group(1), key), _num(m.group(2), key)
        op, step = m.group(3), m.group(4)
        if hi < lo:
            raise ConfigError(f"--vary {key}: range {text!r} runs backwards")
        if op in ("x", "*"):
            f = _num(step, key)
            if not f > 1:
                raise ConfigError(f"--vary {key}: geometric factor must be > 1, got {step}")
            out, v = [], lo
            if not lo > 0:
                raise ConfigError(f"--vary {key}: a geometric range must start above 0")
            while v <= hi * (1 + 1e-12):
                out.append(v)
                v = v * f
                if len(out) > _MAX_POINTS:
                    break
        else:
            s = _num(step, key) if op == "+" else 1
            if not s > 0:
                raise ConfigError(f"--vary {key}: step must be > 0, got {step}")
            n = int(math.floor((hi - lo) / s + 1e-9)) + 1
            if n > _MAX_POINTS:
                raise ConfigError(f"--vary {key}: range {text!r} has too many values ({n})")
            out = [lo + i * s for i in range(n)]
        if all(isinstance(x, int) or float(x).is_integer() for x in out) and isinstance(lo, int):
            out = [int(round(x)) for x in out]
        return tuple(out)
    if ".." in text:
        raise ConfigError(f"--vary {key}: cannot parse range {text!r}; expected A..B, A..BxF or A..B+S")
    items = [parse_scalar(v) for v in text.split(",")]
    if any(v == "" for v in items):
        raise ConfigError(f"--vary {key}: empty item in {text!r}")
    return typed_axis(key, items)


def parse_vary(specs: Iterable[str], known: Mapping[str, str] | None = None) -> Grid:
    """Parse ``KEY=VALUES`` strings into a :class:`Grid`.

    ``known`` maps valid keys to their help text; ``None`` accepts any key.
    """
    axes: dict[str, tuple] = {}
    for spec in specs:
        if "=" not in spec:
            raise ConfigError(f"--vary {spec!r}: expected KEY=VALUES, e.g. nodes=4..64x2 or inter=ib-edr,ib-hdr")
        key, _, values = spec.partition("=")
        key = key.strip().replace("-", "_")
        if not key:
            raise ConfigError(f"--vary {spec!r}: missing key before '='")
        if known is not None and key not in known:
            raise ConfigError(f"--vary: unknown parameter {key!r}; valid choices: {', '.join(sorted(known))}")
        if key in axes:
            raise ConfigError(f"--vary: parameter {key!r} given twice")
        axes[key] = parse_values(key, values)
    return Grid(tuple(axes.items()))


@dataclass(frozen=True)
class Grid:
    """The Cartesian product of named axes, in the order given."""

    axes: tuple[tuple[str, tuple], ...]

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.axes)

    def __len__(self) -> int:
        return math.prod(len(v) for _, v in self.axes) if self.axes else 0

    def points(self) -> Iterator[dict]:
        """Every grid point as a dict, last axis varying fastest."""
        if not self.axes:
            return iter(())
        keys = self.keys
        return (dict(zip(keys, combo, strict=False)) for combo in itertools.product(*(v for _, v in self.axes)))

    def check_nonempty(self) -> Grid:
        if len(self) == 0:
            raise ConfigError("sweep grid is empty: give at least one --vary KEY=VALUES (or a [sweep] table)")
        if len(self) > _MAX_POINTS:
            raise ConfigError(f"sweep grid has {len(self)} points; the limit is {_MAX_POINTS}")
        return self
