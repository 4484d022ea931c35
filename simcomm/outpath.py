"""Check an output path before any work: one ``error:`` line instead of a failure at the end.

Commands that write a file (``--out``, ``--png``, ...) call :func:`check_output_path` first, so
that a typo in the directory does not cost a ten-minute capture, and so that a path which can
never hold a result (an empty string, a directory, a device such as ``/dev/null`` that the
atomic rename of :mod:`simcomm.fileio` would replace) is refused instead of written.

Writability is tested by creating and removing a temporary file in the target directory, the
same operation :func:`simcomm.fileio.atomic_open` performs: permission bits alone would be
wrong for root, for ACLs and for read-only mounts.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from simcomm.errors import ConfigError

__all__ = ["check_output_path", "PROBE_BYTES"]

#: bytes the probe writes (and removes): a disk without room for a small result file is refused up front
PROBE_BYTES = 64 << 10


def check_output_path(path: str | os.PathLike | None, field: str) -> Path:
    """``path`` as a :class:`Path` if a file can be written there atomically, else one ConfigError.

    ``field`` names the option in the message (``out``, ``png``).  Refused: an empty path, a
    path ending in a separator, an existing directory or non-regular file, a parent that does
    not exist or is not a directory, and a directory in which no file can be created.
    """
    text = "" if path is None else os.fspath(path)
    if not str(text).strip():
        raise ConfigError(f"{field}: the output path is empty; give a file name such as result.json")
    text = str(text)
    if text.endswith(("/", os.sep)):
        raise ConfigError(f"{field}: {text!r} names a directory; give a file path such as {text}result.json")
    target = Path(text)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise ConfigError(f"{field}: cannot use {text!r}: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{field}: {text!r} is a directory; give a file path inside it, "
                          f"e.g. {os.path.join(text, 'result.json')}")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{field}: {text!r} exists and is not a regular file (a device, FIFO or socket); "
                          "give a file path")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.exists():
        raise ConfigError(f"{field}: directory {str(parent)!r} does not exist (create it first)")
    if not parent.is_dir():
        raise ConfigError(f"{field}: {str(parent)!r} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=parent)
    except OSError as exc:
        raise ConfigError(f"{field}: cannot write in directory {str(parent)!r}: {exc.strerror or exc}") from None
    try:  # room for a small result: a full disk is refused now, not after the work (nothing is kept)
        os.write(fd, bytes(PROBE_BYTES))
    except OSError as exc:
        raise ConfigError(f"{field}: cannot write in directory {str(parent)!r}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
        os.unlink(probe)
    return target
