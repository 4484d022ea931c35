"""A measured nccl-tests table (``all_reduce_perf`` and friends) read back, for ``simcomm bench --measured``.

nccl-tests prints one row per size: ``size count type redop root time algbw busbw #wrong`` for the
out-of-place call, then the same three timing columns and ``#wrong`` for the in-place one
(``src/common.cu``; versions before 2.10 have no ``root`` column and call the last column ``error``).
Comment lines start with ``#``; the header among them names ``nGpus`` (the GPUs one thread drives,
``-g``) and lists one ``Rank`` line per rank.  Everything else (NCCL's ``INFO`` lines, a launcher's
output) is ignored, so a whole log can be given.  What is read:

* each row's size (bytes), count, type and out-of-place time (us), and its in-place time when printed;
* ``nGpus`` and the number of ``Rank`` lines, when the header is there, and the test's name
  (``# Collective test starting: all_gather_perf``, printed by recent nccl-tests, e.g. 2.20).

A file without a single row is an error naming what a row looks like.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from simcomm.errors import ConfigError

__all__ = ["MeasuredRow", "Measured", "read_measured", "parse_measured", "TYPE_BYTES", "UNSETTLED", "BANDS",
           "unsettled", "PER_RANK_COUNT", "what_rows_say"]

#: nccl-tests' type names and their widths in bytes (``test_typenames`` in src/common.cu)
TYPE_BYTES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
              "double": 8, "bfloat16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}
_OPS = {"sum", "prod", "max", "min", "avg", "mulsum", "none"}
_INT = re.compile(r"-?\d+\Z")
#: a row whose in-place and out-of-place times (the same operation, measured back to back) differ by more than
#: this factor is *unsettled*: the source itself does not say what the time is (docs/accuracy.md)
UNSETTLED = 1.5
#: size bands errors are summarised over (label, lowest, highest bytes): docs/accuracy.md and ``bench --measured``
BANDS = (("<= 64 KiB", 0, 65536), ("1-16 MiB", 1 << 20, 16 << 20), (">= 128 MiB", 128 << 20, float("inf")))
#: a measured file may hold a whole log; more rows (or bytes) than this is not one sweep
MAX_ROWS, MAX_BYTES = 4096, 64 << 20


@dataclass(frozen=True)
class MeasuredRow:
    """One printed row: bytes, elements, type, and the out-of-place (and in-place) time in microseconds."""

    size: int
    count: int
    type: str
    time_us: float
    inplace_us: float | None
    redop: str = ""          # the redop column: ``sum`` for reductions, ``none`` otherwise
    root: int | None = None  # the root column (-1: no root); None in layouts before nccl-tests 2.10

    @property
    def unsettled(self) -> bool:
        """In-place and out-of-place times differ by more than :data:`UNSETTLED` x."""
        return unsettled(self.time_us, self.inplace_us)


def unsettled(out_of_place_us: float | None, in_place_us: float | None) -> bool:
    """Whether a row's two times (the same operation, back to back) differ by more than :data:`UNSETTLED` x."""
    a, b = out_of_place_us, in_place_us
    return bool(a and b and a > 0 and b > 0 and max(a, b) / min(a, b) > UNSETTLED)


@dataclass(frozen=True)
class Measured:
    """A parsed nccl-tests output: its rows and what its header says of the run."""

    rows: tuple[MeasuredRow, ...]
    gpus_per_thread: int | None  # the header's nGpus (-g)
    ranks: int | None            # the header's Rank lines
    test: str | None = None      # the test recent nccl-tests name: "all_gather" from "... starting: all_gather_perf"


#: nccl-tests' tests whose printed count is per rank: size = count x ranks x type width (their
#: ``*GetCollByteCount``: paramcount = count / nranks, the size printed the whole buffer)
PER_RANK_COUNT = ("all_gather", "reduce_scatter", "alltoall")
#: what each test prints in its redop and root columns (``print_line_header`` of src/*.cu)
_COLUMNS = {"all_reduce": ("op", -1), "reduce_scatter": ("op", -1), "sendrecv": ("op", -1), "reduce": ("op", 0),
            "all_gather": ("none", -1), "alltoall": ("none", -1), "broadcast": ("none", 0)}


def what_rows_say(measured: Measured) -> tuple[tuple[str, ...], int | None, str]:
    """(nccl-tests tests the rows can come from, ranks the sizes imply or None, what the rows say in words).

    Read from the columns alone: a reduction prints its redop (``sum``), the others ``none``; broadcast and
    reduce print their root, the others -1; all-gather, reduce-scatter and all-to-all print a per-rank count,
    so their size is ``count x ranks x width``, while the others' is ``count x width``.
    """
    first = measured.rows[0]
    reduces = first.redop != "none"
    roots = [r.root for r in measured.rows]
    root = None if any(x is None for x in roots) else max(x for x in roots if x is not None)
    sized = next((r for r in measured.rows if r.count > 0), None)
    width = TYPE_BYTES[first.type]  # one type per table (parse_measured)
    ratio = None if sized is None else sized.size / (sized.count * width)
    ranks = int(round(ratio)) if ratio is not None and ratio >= 1.5 and abs(ratio - round(ratio)) < 1e-9 else None
    tests = []
    for test, (op, test_root) in _COLUMNS.items():
        if (op == "op") != reduces:
            continue
        if root is not None and (root >= 0) != (test_root >= 0):
            continue
        if ratio is not None and (test in PER_RANK_COUNT) != (ranks is not None):
            continue
        tests.append(test)
    words = [f"redop {first.redop}"] + ([] if root is None else [f"root {root}"])
    if ratio is not None:
        words.append(f"size = count x {ranks} ranks x {width} B" if ranks is not None
                     else f"size = count x {width} B")
    return tuple(tests), ranks, ", ".join(words)


def _float(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _row(tokens: list[str]) -> MeasuredRow | None:
    """A data row, or None when ``tokens`` are not one."""
    if len(tokens) < 7 or not (tokens[0].isdigit() and tokens[1].isdigit()):  # size and count: >= 0
        return None
    if tokens[2] not in TYPE_BYTES or tokens[3] not in _OPS:
        return None
    k = 5 if "." not in tokens[4] and _INT.match(tokens[4]) else 4  # the root column (nccl-tests >= 2.10)
    t = _float(tokens[k])
    if t is None or t < 0 or len(tokens) < k + 3:
        return None
    inplace = _float(tokens[k + 4]) if len(tokens) > k + 4 else None
    return MeasuredRow(int(tokens[0]), int(tokens[1]), tokens[2], t, inplace if inplace and inplace > 0 else None,
                       tokens[3], int(tokens[4]) if k == 5 else None)


def parse_measured(text: str, where: str = "--measured") -> Measured:
    """Rows and header facts of nccl-tests output ``text`` (see the module docstring)."""
    rows: list[MeasuredRow] = []
    gpus, ranks, test = None, 0, None
    for line in text.splitlines():
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0] == "#":
            if tokens[1:4] == ["Collective", "test", "starting:"] and len(tokens) > 4:
                test = tokens[4].removesuffix("_perf")
            elif "nGpus" in tokens and tokens.index("nGpus") + 1 < len(tokens):
                value = tokens[tokens.index("nGpus") + 1]
                gpus = int(value) if value.isdigit() and int(value) > 0 else gpus
            elif len(tokens) > 2 and tokens[1] == "Rank" and tokens[2].isdigit():
                ranks += 1
            continue
        row = _row(tokens)
        if row is not None:
            rows.append(row)
            if len(rows) > MAX_ROWS:
                raise ConfigError(f"{where}: more than {MAX_ROWS} nccl-tests rows; give one sweep")
    if not rows:
        raise ConfigError(f"{where}: no nccl-tests rows found (lines like '1048576 262144 float sum -1 "
                          "52.1 20.13 37.74 0 ...' from all_reduce_perf)")
    types = {r.type for r in rows}
    if len(types) > 1:
        raise ConfigError(f"{where}: rows of several types ({', '.join(sorted(types))}); give one sweep")
    return Measured(tuple(rows), gpus, ranks or None, test)


def read_measured(path: str | Path) -> Measured:
    """:func:`parse_measured` of a file (``-``: standard input), with one ``error:`` line when it cannot be read.

    Only a regular file is opened: a FIFO or a device could block forever (``-`` reads a pipe on purpose).
    """
    where = f"--measured {str(path)!r}"
    if str(path) == "-":
        import sys

        raw = sys.stdin.buffer.read(MAX_BYTES + 1)
    else:
        p = Path(path)
        try:
            if p.exists() and not p.is_file():
                raise ConfigError(f"{where}: not a regular file (give a saved nccl-tests output, or - for "
                                  "standard input)")
            if p.exists() and p.stat().st_size > MAX_BYTES:  # before reading it into memory
                raise ConfigError(f"{where}: more than {MAX_BYTES >> 20} MiB is not an nccl-tests table")
            raw = p.read_bytes()
        except OSError as exc:
            raise ConfigError(f"{where}: cannot read ({exc.strerror or exc})") from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"{where}: more than {MAX_BYTES >> 20} MiB is not an nccl-tests table")
    return parse_measured(raw.decode("utf-8", errors="replace"), where)
