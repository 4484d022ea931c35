"""``simcomm bench``: a collective's time over a range of sizes, as nccl-tests reports it.

One collective over every rank of a cluster, simulated alone at each size on
the flow engine with the cluster's stack (NCCL's algorithm and protocol
choice on the ``nccl`` stacks), reported in the columns of nccl-tests'
``*_perf`` binaries so a prediction can be laid beside a measurement:

* ``size``: bytes as nccl-tests prints them: the buffer per rank for
  all-reduce, broadcast, reduce and send/recv; the whole gathered
  (scattered) buffer for all-gather and reduce-scatter; what one rank sends
  in total for all-to-all.  These are simcomm's own size conventions.
* ``algbw = size / time``; ``busbw = algbw x factor``, the factor depending
  only on the collective: ``2(n-1)/n`` for all-reduce, ``(n-1)/n`` for
  all-gather, reduce-scatter and all-to-all, 1 otherwise (nccl-tests
  doc/PERFORMANCE.md; issue 366).

nccl-tests times back-to-back iterations of one collective; simcomm prices
one, which is the same when nothing else runs.  ``sendrecv`` is nccl-tests'
ring of send/receive pairs: every rank sends ``size`` to the next (on the NCCL
stacks through NCCL's point-to-point path, as ``sendrecv_perf``'s grouped
ncclSend/ncclRecv run).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from simcomm.errors import ConfigError
from simcomm.nccl.measured import PER_RANK_COUNT, TYPE_BYTES, Measured, what_rows_say
from simcomm.units import format_size_iec, parse_nccl_tests_size

__all__ = ["BenchRow", "COLLECTIVES", "bench", "parse_sizes", "busbw_factor", "canonical", "Comparison",
           "against_measured", "P2P_COLLECTIVES", "nccl_tests_sweep", "whole_elements", "check_measured",
           "describe_sizes"]
#: collectives nccl-tests runs as grouped ncclSend/ncclRecv: NCCL runs them even at count 0
P2P_COLLECTIVES = ("alltoall", "sendrecv")

#: nccl-tests binary name -> simcomm collective kind
COLLECTIVES = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reduce_scatter",
               "broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall", "sendrecv": "sendrecv"}
#: largest sweep a user may ask for (sizes), and largest size (bytes): bounded work, bounded output
MAX_SIZES, MAX_BYTES = 64, 2.0 ** 44


def canonical(name: str) -> str:
    """``allreduce``, ``all_reduce`` or ``all-reduce`` -> simcomm's kind (unknown names list the choices)."""
    key = name.strip().lower().replace("-", "_")
    key = {v: k for k, v in COLLECTIVES.items()}.get(key, key)
    if key not in COLLECTIVES:
        raise ConfigError(f"collective: {name!r} is not valid; valid choices: {', '.join(COLLECTIVES)}")
    return COLLECTIVES[key]


def busbw_factor(kind: str, n: int) -> float:
    if kind == "allreduce":
        return 2.0 * (n - 1) / n
    if kind in ("allgather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0


def parse_sizes(text: str) -> list[float]:
    """``8B..8GB`` (doubling, like nccl-tests -f 2), ``1KB..1GBx4`` (factor 4) or ``8,1MB,1GB``.

    Sizes are simcomm's units (``GB`` = 1e9 B, ``GiB`` = 2^30 B) or nccl-tests' suffixes (``8G`` = 8 GiB).
    """
    text = str(text).strip()
    m = re.fullmatch(r"(.+?)\.\.(.+?)(?:x(\d+))?", text)
    if m:
        lo, hi = parse_nccl_tests_size(m.group(1), "--sizes"), parse_nccl_tests_size(m.group(2), "--sizes")
        step = int(m.group(3) or 2)
        if step < 2:
            raise ConfigError(f"--sizes: step x{step} must be at least 2")
        if hi < lo:
            raise ConfigError(f"--sizes: {text!r} ends below where it starts")
        n = int(math.floor(math.log(hi / lo, step) + 1e-9)) + 1
        if n > MAX_SIZES:
            raise ConfigError(f"--sizes: {text!r} has {n} sizes; at most {MAX_SIZES}")
        out = [lo * step ** i for i in range(n)]
    else:
        out = [parse_nccl_tests_size(x, "--sizes") for x in text.split(",") if x.strip()]
        if not out:
            raise ConfigError(f"--sizes: {text!r} names no size; e.g. 8B..8GB or 1MB,1GB")
        if len(out) > MAX_SIZES:
            raise ConfigError(f"--sizes: {len(out)} sizes; at most {MAX_SIZES}")
    if max(out) > MAX_BYTES:
        raise ConfigError(f"--sizes: {max(out):.0f} bytes is more than the {MAX_BYTES:.0f} simcomm sweeps")
    return out


def nccl_tests_sweep(minbytes: str | None, maxbytes: str | None, stepfactor: int | None,
                     stepbytes: str | None) -> list[float]:
    """The sizes nccl-tests' ``-b``, ``-e``, ``-f``, ``-i`` give (its ``src/common.cu``).

    Its defaults: ``-b 32M -e 32M -i 1M -f 1``; the loop multiplies by the step factor when it is above 1 and
    otherwise adds the step bytes, from ``minbytes`` while the size is at most ``maxbytes``.
    """
    lo = parse_nccl_tests_size(minbytes if minbytes is not None else "32M", "-b/--minbytes")
    hi = parse_nccl_tests_size(maxbytes if maxbytes is not None else "32M", "-e/--maxbytes")
    step = parse_nccl_tests_size(stepbytes if stepbytes is not None else "1M", "-i/--stepbytes")
    factor = 1 if stepfactor is None else stepfactor
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
        raise ConfigError(f"-f/--stepfactor: {stepfactor!r} must be a whole number, at least 1 (1: add -i)")
    lo, hi, step = float(math.floor(lo)), float(math.floor(hi)), float(math.floor(step))
    if hi < lo:
        raise ConfigError(f"-e/--maxbytes: {hi:.0f} bytes is below -b/--minbytes, {lo:.0f} bytes")
    if factor > 1:
        if lo <= 0:
            raise ConfigError("-b/--minbytes: 0 bytes never grows by a step factor; start at 1 element or more")
        n = int(math.floor(math.log(hi / lo, factor) + 1e-9)) + 1
    else:
        if step <= 0:
            raise ConfigError("-i/--stepbytes: must be at least 1 byte when -f is 1")
        n = int((hi - lo) // step) + 1
    if n > MAX_SIZES:
        raise ConfigError(f"-b/-e/-f/-i: the sweep has {n} sizes; at most {MAX_SIZES} (nccl-tests adds -i "
                          "1M per size unless -f is given: try -f 2)")
    out = [lo * factor ** i if factor > 1 else lo + step * i for i in range(n)]
    if max(out) > MAX_BYTES:
        raise ConfigError(f"-e/--maxbytes: {max(out):.0f} bytes is more than the {MAX_BYTES:.0f} simcomm sweeps")
    return out


def whole_elements(kind: str, sizes: list[float], dtype: str, ranks: int,
                   field: str = "--sizes") -> tuple[list[float], list[str]]:
    """Sizes as nccl-tests runs them (whole elements), and one note per size that moved.

    nccl-tests' ``setupArgs`` takes ``count = size / width`` (integer division); all-gather, reduce-scatter
    and all-to-all then split it over the ranks (``count / nranks`` each), so their buffer is a whole number
    of elements per rank.  A size that leaves no element (per rank) is refused.
    """
    width = TYPE_BYTES[dtype]
    per = width * (ranks if canonical_test(kind) in PER_RANK_COUNT else 1)
    out, notes = [], []
    for size in sizes:
        whole = math.floor(size / per + 1e-9) * per
        if whole <= 0:
            unit = f"one {dtype} element ({width} B)" + (f" per rank ({ranks} ranks: {per} B)" if per != width else "")
            raise ConfigError(f"{field}: {size:g} bytes is below {unit}; nccl-tests would move nothing")
        if whole != size:
            notes.append(f"{size:g} B -> {whole:g} B")
        out.append(float(whole))
    return out, notes


def canonical_test(kind: str) -> str:
    """simcomm's kind -> the nccl-tests test name (``allreduce`` -> ``all_reduce``)."""
    return next(k for k, v in COLLECTIVES.items() if v == kind)


def describe_sizes(sizes: list[float]) -> str:
    """The sweep in both units: ``8 B .. 8 GiB (8.59e+09 B), 31 sizes``."""
    lo, hi = min(sizes), max(sizes)
    ends = f"{format_size_iec(lo)}" + ("" if hi == lo else f" .. {format_size_iec(hi)}")
    return f"{ends} ({hi:,.0f} B at most), {len(sizes)} size{'s' if len(sizes) != 1 else ''}"


def check_measured(kind: str, measured: Measured, ranks: int) -> str | None:
    """Refuse a table of another collective or rank count; a warning when the file cannot say its ranks.

    The test's name (recent nccl-tests' header), else its columns (:func:`~simcomm.nccl.measured.what_rows_say`:
    redop, root, size over count), must be ``kind``'s; its ``# Rank`` lines, else the ranks its per-rank
    sizes imply, must be the cluster's.
    """
    big = max(r.size for r in measured.rows)
    if big > MAX_BYTES:
        raise ConfigError(f"--measured: a row of {big:,} bytes is more than the {MAX_BYTES:,.0f} simcomm sweeps")
    ours = canonical_test(kind)
    if measured.test is not None and COLLECTIVES.get(measured.test, kind) != kind:
        raise ConfigError(f"--measured: the file is {measured.test}_perf's output, not {ours}_perf's: run "
                          f"simcomm bench {measured.test}")
    tests, implied, words = what_rows_say(measured)
    if measured.test is None and ours not in tests:
        said = " or ".join(f"{t}_perf's" for t in tests) if tests else "no nccl-tests test's"
        hint = f": run simcomm bench {tests[0]}" if tests else ""
        raise ConfigError(f"--measured: the file's rows ({words}) are {said}, not {ours}_perf's{hint}")
    said_ranks, where = (measured.ranks, "its '# Rank' lines") if measured.ranks is not None else (
        implied, "its per-rank sizes")
    if said_ranks is not None and said_ranks != ranks:
        raise ConfigError(f"--measured: the file lists {said_ranks} ranks ({where}); the cluster has "
                          f"{ranks}: set --nodes and --gpus-per-node to the measured run's")
    if said_ranks is None:
        return (f"--measured: the file has no '# Rank' lines, so the rank count it ran on is unknown; compared "
                f"on the cluster's {ranks} ranks")
    return None


@dataclass(frozen=True)
class BenchRow:
    """One line of an nccl-tests-style table."""

    size: float
    count: int
    type: str
    redop: str
    root: int
    time_us: float
    algbw: float   # GB/s
    busbw: float   # GB/s
    algorithm: str
    #: the paths the engine run took (``Timeline.paths``, as ``simcomm run --json``'s kinds' ``engine``); in
    #: ``--json`` only, beside the row (:meth:`to_dict` is the nccl-tests row, CSV's columns)
    engine: dict = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict:
        size = int(self.size) if float(self.size).is_integer() else self.size  # bytes, as nccl-tests prints them
        return {"size": size, "count": self.count, "type": self.type, "redop": self.redop, "root": self.root,
                "time_us": self.time_us, "algbw": self.algbw, "busbw": self.busbw, "algorithm": self.algorithm}


def bench(kind: str, topology, runtime, sizes: list[float], *, dtype: str = "float", root: int = 0,
          fidelity: str = "flow", gpus_per_thread: int = 1, progress=None) -> list[BenchRow]:
    """Simulate ``kind`` over every rank of ``topology`` at each size; rows in the nccl-tests layout.

    ``gpus_per_thread`` is nccl-tests' ``-g``: how many GPUs one host thread
    launches each call on (NCCL calls only; see simcomm.nccl.execution.launch_s).
    """
    from collections import Counter

    from simcomm import engine
    from simcomm.ops import PlanBuilder

    if dtype not in TYPE_BYTES:
        raise ConfigError(f"--dtype: {dtype!r} is not valid; valid choices: {', '.join(TYPE_BYTES)}")
    n = topology.n_ranks
    if n < 2:
        raise ConfigError(f"bench: {kind} needs at least 2 ranks; the cluster has {n}")
    if kind in ("broadcast", "reduce") and not 0 <= root < n:
        raise ConfigError(f"--root: {root} is not a rank of {n} (0..{n - 1})")
    # a thread's GPUs sit in its process, on one machine
    gpn = max(Counter(topology.machine_of(r) for r in range(n)).values())
    if isinstance(gpus_per_thread, bool) or not isinstance(gpus_per_thread, int) or not 1 <= gpus_per_thread <= gpn:
        raise ConfigError(f"--gpus-per-thread: {gpus_per_thread!r} must be an integer from 1 to {gpn}, the GPUs per "
                          "node (nccl-tests' -g: the GPUs one host thread drives)")
    runtime = runtime.with_gpus_per_thread(gpus_per_thread)
    width = TYPE_BYTES[dtype]
    rows = []
    for size in sizes:
        b = PlanBuilder(n)
        if kind == "sendrecv" and runtime.grouped_p2p:
            # nccl-tests' sendrecv_perf: grouped ncclSend/ncclRecv, NCCL's point-to-point path (launch, protocol step)
            for r in range(n):
                b.collective("p2p", (r, (r + 1) % n), size, stream=f"send{r}")
        elif kind == "sendrecv":
            for r in range(n):
                b.transfer(r, (r + 1) % n, size, stream=f"send{r}")
        else:
            b.collective(kind, range(n), size, root=root if kind in ("broadcast", "reduce") else 0)
        tl = engine.simulate(b.build(), topology, fidelity=fidelity, runtime=runtime)
        t = float(tl.makespan)
        alg = size / t / 1e9 if t > 0 else math.inf
        ran = ", ".join(sorted({x[2] for x in tl.meta.get("algorithms", ())})) or "p2p"
        count = int(size // width) // (n if canonical_test(kind) in PER_RANK_COUNT else 1)  # as nccl-tests prints it
        rows.append(BenchRow(size, count, dtype,
                             "sum" if kind in ("allreduce", "reduce", "reduce_scatter") else "none",
                             root if kind in ("broadcast", "reduce") else -1, t * 1e6, alg,
                             alg * busbw_factor(kind, n), ran, tl.paths))
        if progress is not None:
            progress()
    return rows


@dataclass(frozen=True)
class Comparison:
    """A measured nccl-tests row beside simcomm's prediction (None: a collective of count 0, which NCCL
    returns from without launching anything, so the row timed nccl-tests' own loop)."""

    measured_size: int
    measured_count: int
    measured_us: float
    measured_busbw: float  # GB/s, from the measured time by nccl-tests' factor
    predicted: BenchRow | None
    unsettled: bool = False  # in-place and out-of-place times disagree (nccl.measured.UNSETTLED)

    @property
    def error(self) -> float | None:
        """(predicted - measured) / measured, or None for a no-op row or a zero measurement."""
        if self.predicted is None or self.measured_us <= 0:
            return None
        return (self.predicted.time_us - self.measured_us) / self.measured_us


def against_measured(kind: str, topology, runtime, measured: Measured, *, root: int = 0, fidelity: str = "flow",
                     gpus_per_thread: int = 1, progress=None) -> list[Comparison]:
    """Predict every row of a measured nccl-tests table (its sizes and type) and pair them up."""
    n = topology.n_ranks
    check_measured(kind, measured, n)
    runs = [r.size > 0 or kind in P2P_COLLECTIVES for r in measured.rows]  # count 0: only p2p reaches NCCL
    predicted = iter(bench(kind, topology, runtime, [float(r.size) for r, ok in zip(measured.rows, runs, strict=False) if ok],
                           dtype=measured.rows[0].type, root=root, fidelity=fidelity,
                           gpus_per_thread=gpus_per_thread, progress=progress))
    factor = busbw_factor(kind, n)
    return [Comparison(r.size, r.count, r.time_us, r.size / r.time_us / 1e3 * factor if r.time_us > 0 else 0.0,
                       next(predicted) if ok else None, r.unsettled)
            for r, ok in zip(measured.rows, runs, strict=False)]
