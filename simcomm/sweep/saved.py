"""Read a finished (or interrupted, or damaged) sweep directory back, for ``simcomm report``.

The directory holds ``sweep.json`` (the question, the axes and the fixed
inputs: the grid) and ``points.jsonl`` (the store, :mod:`simcomm.sweep.store`).
The grid is rebuilt from ``sweep.json`` and every grid point takes the latest
good stored record with exactly its inputs; records of other sweeps written
into the same directory are ignored.  What is left out is said, never guessed:

* ``sweep.json`` unreadable, not JSON, or of the wrong shape: one
  :class:`~simcomm.errors.ConfigError` (the grid is unknown without it);
* damaged lines of ``points.jsonl``: skipped and counted by reason;
* grid points with no stored result (an interrupted sweep): counted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from simcomm.errors import ConfigError
from simcomm.sweep.grammar import Grid, typed_axis
from simcomm.sweep.store import PointRecord, ResultStore, Scan, canonical

__all__ = ["SWEEP_FILE", "Saved", "check_sweep", "read_saved", "read_sweep_file", "sweep_problem"]

SWEEP_FILE = "sweep.json"
_SCALARS = (str, int, float, bool, type(None))
_MAX_BYTES = 64 << 20


def sweep_problem(sweep) -> str | None:
    """Why a parsed sweep description cannot describe a grid, or None."""
    if not isinstance(sweep, dict):
        return "not a JSON object"
    q = sweep.get("question")
    if q is not None and not isinstance(q, str):
        return "question is not a string"
    axes, base = sweep.get("axes", []), sweep.get("base", {})
    if not isinstance(axes, list) or not isinstance(base, dict):
        return "axes is not a list or base is not an object"
    seen = set()
    for axis in axes:
        if (not isinstance(axis, list) or len(axis) != 2 or not isinstance(axis[0], str) or axis[0] in seen
                or not isinstance(axis[1], list) or not axis[1] or not all(isinstance(v, _SCALARS) for v in axis[1])):
            return f"axis {axis!r:.60} is not [name, [values...]]"
        seen.add(axis[0])
        try:
            typed_axis(axis[0], axis[1], where="axis")
        except ConfigError as exc:
            return str(exc)
    for k, v in base.items():
        if not (isinstance(v, _SCALARS) or isinstance(v, list) and all(isinstance(x, _SCALARS) for x in v)):
            return f"base {k} is not a value"
    try:
        Grid(tuple((k, tuple(v)) for k, v in axes)).check_nonempty()
    except ConfigError as exc:
        return str(exc)
    return None


def check_sweep(sweep, where: str) -> dict:
    """``sweep`` if it is a well-formed sweep description, else a one-line ConfigError naming ``where``."""
    problem = sweep_problem(sweep)
    if problem is not None:
        raise ConfigError(f"RESULTS_DIR: {where} is damaged ({problem}); rerun the same simcomm whatif with "
                          "this --out to rewrite it")
    return sweep


def read_sweep_file(directory: str | Path) -> dict:
    """The checked ``sweep.json`` of a sweep directory (a ConfigError when missing or damaged)."""
    path = Path(directory) / SWEEP_FILE
    try:
        if path.stat().st_size > _MAX_BYTES:
            raise ConfigError(f"RESULTS_DIR: {str(path)!r} is too large to be a sweep description")
        blob = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"RESULTS_DIR: {str(path)!r} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"RESULTS_DIR: cannot read {str(path)!r} ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        what = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else "not complete JSON"
        raise ConfigError(f"RESULTS_DIR: {str(path)!r} is damaged ({what}); rerun the same simcomm whatif with "
                          "this --out to rewrite it") from None
    return check_sweep(blob, repr(str(path)))


@dataclass
class Saved:
    """A sweep read back: its description, the stored records in grid order, and what was left out."""

    sweep: dict
    records: list[PointRecord]
    total: int  # grid points
    scan: Scan

    @property
    def missing(self) -> int:
        return self.total - len(self.records)

    def warning(self, store_path: Path) -> str | None:
        """One sentence on skipped lines and points without a result, or None when nothing is missing."""
        parts = []
        if (problem := self.scan.problem()) is not None:
            parts.append(f"{store_path}: {problem}")
        if self.missing:
            parts.append(f"{self.missing} of {self.total} point(s) of the sweep have no stored result and are left "
                         "out (rerun the same simcomm whatif with this --out to compute them)")
        return "; ".join(parts) or None


def read_saved(directory: str | Path) -> Saved:
    """Read ``sweep.json`` and the records of its grid from ``points.jsonl``; never modifies the directory."""
    d = Path(directory)
    sweep = read_sweep_file(d)
    base = sweep.get("base", {})
    grid = Grid(tuple((k, tuple(v)) for k, v in sweep.get("axes", [])))
    scan = ResultStore(d, create=False).scan()
    latest = {canonical(r.inputs, strict=False): r for r in scan.records}  # file order: the last one wins
    records = []
    for i, point in enumerate(grid.points()):
        inputs = {**base, **point}
        rec = latest.get(canonical(inputs, strict=False))
        if rec is not None:
            records.append(PointRecord(i, rec.key, rec.inputs, rec.result, rec.error))
    return Saved(sweep, records, len(grid), scan)
