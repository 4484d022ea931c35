"""A resumable, append-only store of finished sweep points.

Each finished point is one JSON line in ``points.jsonl``, written and flushed
to disk as soon as the point completes, so killing a sweep loses at most the
points still running.  A point's key is a hash of its full inputs; rerunning
the same sweep skips every key already stored.  A torn last line (the process
died mid-write) is ignored on load and the point is simply run again.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from simcomm.errors import ConfigError

__all__ = ["PointRecord", "ResultStore", "point_key"]


def point_key(inputs: dict) -> str:
    """Stable key of a point: sha256 of its canonical JSON inputs."""
    blob = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


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


class ResultStore:
    """Append-only JSONL store under ``directory``."""

    FILE = "points.jsonl"

    def __init__(self, directory: str | os.PathLike):
        self.dir = Path(directory)
        if self.dir.exists() and not self.dir.is_dir():
            raise ConfigError(f"--out: {str(self.dir)!r} exists and is not a directory")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / self.FILE

    def load(self) -> dict[str, PointRecord]:
        """Finished points by key (a torn last line is skipped)."""
        done: dict[str, PointRecord] = {}
        self.repair()
        if not self.path.exists():
            return done
        with self.path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    rec = PointRecord(**json.loads(line))
                except (json.JSONDecodeError, TypeError):
                    continue
                done[rec.key] = rec
        return done

    def repair(self) -> None:
        """Cut a torn last line (no newline: the writer was killed mid-write).

        Otherwise the next record would be glued onto it and lost on every resume.
        """
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            keep = data.rfind(b"\n") + 1
            with self.path.open("r+b") as fh:
                fh.truncate(keep)

    def append(self, rec: PointRecord) -> None:
        line = json.dumps(asdict(rec), sort_keys=True, separators=(",", ":")) + "\n"
        # One write per line on an O_APPEND file, then fsync: a point is either stored whole or not at all.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
