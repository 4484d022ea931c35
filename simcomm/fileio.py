"""Atomic file output: a result file is either complete or not there at all.

Every command that writes a file (traces, timelines, plots, reports, link
files) goes through :func:`atomic_open`: the data goes to a temporary file in
the same directory, which is renamed over the target only once it is fully
written (and, optionally, verified).  On any error the temporary file is
removed, so a crash never leaves a partial file behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_open", "write_text", "write_bytes", "check_room"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", *,
                verify: Callable[[Path], None] | None = None) -> Iterator:
    """Yield a file handle whose content replaces ``path`` when the block ends without error.

    ``mode`` is ``"w"`` (UTF-8 text, ``\\n`` newlines) or ``"wb"``.  ``verify(tmp)``
    may inspect the finished temporary file and raise to abort the write.
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    try:
        kwargs = {"encoding": "utf-8", "newline": "\n"} if "b" not in mode else {}
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
        if verify is not None:
            verify(Path(tmp))
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; results are ordinary files
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike, text: str, *, verify: Callable[[Path], None] | None = None) -> Path:
    """Write ``text`` to ``path`` atomically."""
    with atomic_open(path, "w", verify=verify) as fh:
        fh.write(text)
    return Path(path)


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def check_room(directory: str | os.PathLike, field: str, then: str) -> None:
    """Refuse, before long work whose result goes to ``directory``, a disk with no byte free (``field``: the
    option named; ``then``: what was not done, e.g. "nothing measured").  A disk with some room left may still
    fill up: the writes are atomic (:func:`atomic_open`) and say so then."""
    from simcomm.errors import ConfigError

    if not hasattr(os, "statvfs"):  # Windows: the write itself says it
        return
    try:
        room = os.statvfs(directory)
    except OSError:
        return  # an unreadable directory: the write says why
    if room.f_bavail == 0:
        raise ConfigError(f"{field}: cannot write to {str(directory)!r}: No space left on device (the disk is "
                          f"full; {then})")
