"""A resumable, append-only store of finished sweep points that survives damage.

Each finished point is one JSON line in ``points.jsonl``, written and fsync'd
as soon as the point completes, so killing a sweep loses at most the points
still running.

A point's *key* is a hash of everything that changes its result: its inputs,
the bytes of every file an input names (a regenerated trace gets a new key,
so a resumed sweep recomputes it instead of reporting old numbers) and the
simcomm version.  Rerunning a sweep skips every key already stored.

Every record carries a checksum of its own content (``sum``).  Loading reads
the file as bytes, line by line, and keeps every line that is UTF-8, JSON, of
the record's shape and types, and whose checksum matches; any other line is
skipped and counted with its reason (:class:`Scan`), never a crash.  A last
line without its newline is kept if it is a whole record (the writer died
between the record and nothing) and cut off before appending if it is torn.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from simcomm.errors import ConfigError

__all__ = ["FILE_INPUTS", "SWEEP_MARKERS", "PointRecord", "ResultStore", "Scan", "canonical", "check_out_dir",
           "point_key", "record_problem"]

_FIELDS = ("error", "index", "inputs", "key", "result", "sum")


def canonical(obj, *, strict: bool = True) -> str:
    """The one JSON spelling used for keys and checksums (sorted keys, no spaces).

    ``strict=False`` spells non-JSON values (a Path, say) with ``str``; keys only.
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=None if strict else str)


def _file_digest(value, cache: dict) -> str | None:
    """sha256 of the file a string input names, or None when it names no regular file."""
    if not isinstance(value, str) or not value or len(value) > 4096:
        return None
    try:
        st = os.stat(value)
        if not os.path.isfile(value):
            return None
    except (OSError, ValueError):  # no such file, a NUL in the name, ...
        return None
    ident = (os.path.abspath(value), st.st_size, st.st_mtime_ns)
    if ident not in cache:
        h = hashlib.sha256()
        try:
            with open(value, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
        except OSError:
            return None
        cache[ident] = h.hexdigest()
    return cache[ident]


#: Inputs that may name a file the point reads (what-if: a trace, a cluster TOML, a model file).
FILE_INPUTS = ("trace", "cluster", "model")


def point_key(inputs: dict, cache: dict | None = None, files: tuple[str, ...] = FILE_INPUTS) -> str:
    """Content key of a point: sha256 of its inputs, of the files they name, and of the simcomm version.

    An input listed in ``files`` whose value names an existing regular file
    contributes the file's bytes, not just its name (a regenerated trace gets
    a new key); bundled traces and presets are code, covered by the version.
    ``cache`` memoises file digests by (path, size, mtime) within one sweep.
    """
    from simcomm import __version__

    cache = {} if cache is None else cache
    digests = {k: d for k in sorted(files) if (d := _file_digest(inputs.get(k), cache)) is not None}
    blob = canonical({"inputs": inputs, "files": digests, "simcomm": __version__}, strict=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _checksum(body: dict) -> str:
    return hashlib.sha256(canonical(body).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PointRecord:
    """One evaluated grid point: its inputs and either a result or an error line."""

    index: int
    key: str
    inputs: dict
    result: dict | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def line(self) -> str:
        """The record as one JSON line with its checksum."""
        body = asdict(self)
        return canonical({**body, "sum": _checksum(body)}) + "\n"


def record_problem(obj) -> str | None:
    """Why ``obj`` (one parsed line) is not a good record, or None if it is."""
    if not isinstance(obj, dict):
        return "not a record"
    if set(obj) != set(_FIELDS):
        return "no checksum" if set(obj) == set(_FIELDS) - {"sum"} else "wrong fields"
    idx = obj["index"]
    if (isinstance(idx, bool) or not isinstance(idx, int) or idx < 0 or not isinstance(obj["key"], str)
            or not isinstance(obj["inputs"], dict) or not isinstance(obj["sum"], str)
            or not (isinstance(obj["result"], dict) and obj["error"] is None
                    or obj["result"] is None and isinstance(obj["error"], str))):
        return "wrong types"
    if obj["sum"] != _checksum({k: v for k, v in obj.items() if k != "sum"}):
        return "checksum mismatch"
    return None


@dataclass
class Scan:
    """What loading ``points.jsonl`` found: good records in file order, and the lines it skipped."""

    records: list[PointRecord] = field(default_factory=list)
    lines: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason -> number of lines
    torn_tail: bool = False  # the last line has no newline and is not a whole record

    def by_key(self) -> dict[str, PointRecord]:
        """The latest good record of every key."""
        return {r.key: r for r in self.records}

    def problem(self) -> str | None:
        """What was skipped and why (``skipped 2 of 9 line(s) (1 not JSON, 1 wrong types)``), or None."""
        n = sum(self.skipped.values())
        if not n:
            return None
        why = ", ".join(f"{c} {reason}" for reason, c in sorted(self.skipped.items(), key=lambda kv: (-kv[1], kv[0])))
        return f"skipped {n} of {self.lines} line(s) ({why})"


class ResultStore:
    """Append-only JSONL store under ``directory``."""

    FILE = "points.jsonl"

    def __init__(self, directory: str | os.PathLike, *, create: bool = True):
        self.dir = Path(directory)
        if self.dir.exists() and not self.dir.is_dir():
            raise ConfigError(f"--out: {str(self.dir)!r} exists and is not a directory")
        if create:
            try:
                self.dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"--out: cannot create {str(self.dir)!r} ({exc.strerror or exc})") from None
        self.path = self.dir / self.FILE

    def scan(self) -> Scan:
        """Read every line as bytes; keep the good records, count the rest by reason.  Read-only."""
        scan = Scan()
        try:
            fh = self.path.open("rb")
        except FileNotFoundError:
            return scan
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read the point store ({exc.strerror or exc})") from None
        with fh:
            for raw in fh:
                if not raw.strip():
                    continue
                scan.lines += 1
                whole = raw.endswith(b"\n")
                reason = None
                try:
                    obj = json.loads(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    reason = "not UTF-8"
                except (json.JSONDecodeError, RecursionError):
                    reason = "not JSON"
                else:
                    reason = record_problem(obj)
                if reason is None:
                    scan.records.append(PointRecord(**{k: v for k, v in obj.items() if k != "sum"}))
                elif not whole:
                    scan.torn_tail = True  # a write cut short by a kill: repair() drops it before appending
                    scan.skipped["cut short, no newline"] += 1
                else:
                    scan.skipped[reason] += 1
        return scan

    def load(self) -> dict[str, PointRecord]:
        """Good records by key (the latest of each); see :meth:`scan` for what was skipped."""
        return self.scan().by_key()

    def repair(self) -> bool:
        """Make the file end on a newline before appending; True when a torn line was cut off.

        A last line without a newline is either a whole record (kept: it gets
        its newline) or a write torn by a kill (cut off, its point runs again);
        otherwise the next record would be glued onto it and lost.
        """
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return False
        if size == 0:
            return False
        with self.path.open("r+b") as fh:
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return False
            # Find the start of the last line without reading the whole store.
            pos, start = size, 0
            while pos > 0:
                step = min(1 << 16, pos)
                pos -= step
                fh.seek(pos)
                chunk = fh.read(step)
                cut = chunk.rfind(b"\n")
                if cut >= 0:
                    start = pos + cut + 1
                    break
            fh.seek(start)
            tail = fh.read()
            try:
                whole = record_problem(json.loads(tail.decode("utf-8"))) is None
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                whole = False
            if whole:
                fh.seek(size)
                fh.write(b"\n")
            else:
                fh.truncate(start)
            fh.flush()
            os.fsync(fh.fileno())
        return not whole

    def append(self, rec: PointRecord) -> None:
        line = rec.line()
        # One write per line on an O_APPEND file, then fsync: a point is either stored whole or not at all.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)


#: files that mark a directory as a simcomm sweep's --out directory
SWEEP_MARKERS = ("points.jsonl", "sweep.json")


def check_out_dir(directory: str | os.PathLike, *, force: bool = False) -> None:
    """Refuse to write a sweep into a non-empty directory that holds no sweep (unless ``force``).

    A sweep writes results.csv, report.md, ... into its directory, replacing
    files of those names; a directory holding ``points.jsonl`` or
    ``sweep.json`` is a sweep's own (resumed or rewritten on purpose).
    """
    d = Path(directory)
    if not d.exists():
        return
    if not d.is_dir():
        raise ConfigError(f"--out: {str(d)!r} exists and is not a directory")
    if force or any((d / m).is_file() for m in SWEEP_MARKERS):
        return
    try:
        entries = sorted(p.name for p in d.iterdir())
    except OSError as exc:
        raise ConfigError(f"--out: cannot read {str(d)!r} ({exc.strerror or exc})") from None
    if entries:
        shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
        raise ConfigError(f"--out: {str(d)!r} is not empty ({shown}) and holds no simcomm sweep (no points.jsonl "
                          "or sweep.json); its results.csv, report.md, ... would be replaced: give a new or "
                          "empty directory, or --force to write into it")
