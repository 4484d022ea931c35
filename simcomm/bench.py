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
from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.nccl.measured import TYPE_BYTES, Measured
from simcomm.units import parse_size

__all__ = ["BenchRow", "COLLECTIVES", "bench", "parse_sizes", "busbw_factor", "canonical", "Comparison",
           "against_measured", "P2P_COLLECTIVES"]
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
    """``8B..8GB`` (doubling, like nccl-tests -f 2), ``1KB..1GBx4`` (factor 4) or ``8,1MB,1GB``."""
    text = str(text).strip()
    m = re.fullmatch(r"(.+?)\.\.(.+?)(?:x(\d+))?", text)
    if m:
        lo, hi = parse_size(m.group(1), "--sizes"), parse_size(m.group(2), "--sizes")
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
        out = [parse_size(x, "--sizes") for x in text.split(",") if x.strip()]
        if not out:
            raise ConfigError(f"--sizes: {text!r} names no size; e.g. 8B..8GB or 1MB,1GB")
        if len(out) > MAX_SIZES:
            raise ConfigError(f"--sizes: {len(out)} sizes; at most {MAX_SIZES}")
    if max(out) > MAX_BYTES:
        raise ConfigError(f"--sizes: {max(out):.0f} bytes is more than the {MAX_BYTES:.0f} simcomm sweeps")
    return out


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
        rows.append(BenchRow(size, int(size // width), dtype,
                             "sum" if kind in ("allreduce", "reduce", "reduce_scatter") else "none",
                             root if kind in ("broadcast", "reduce") else -1, t * 1e6, alg,
                             alg * busbw_factor(kind, n), ran))
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
    if measured.test is not None and COLLECTIVES.get(measured.test, kind) != kind:
        ours = next(k for k, v in COLLECTIVES.items() if v == kind)
        raise ConfigError(f"--measured: the file is {measured.test}_perf's output, not {ours}_perf's: run "
                          f"simcomm bench {measured.test}")
    big = max(r.size for r in measured.rows)
    if big > MAX_BYTES:
        raise ConfigError(f"--measured: a row of {big:,} bytes is more than the {MAX_BYTES:,.0f} simcomm sweeps")
    if measured.ranks is not None and measured.ranks != n:
        raise ConfigError(f"--measured: the file lists {measured.ranks} ranks (its '# Rank' lines); the cluster has "
                          f"{n}: set --nodes and --gpus-per-node to the measured run's")
    runs = [r.size > 0 or kind in P2P_COLLECTIVES for r in measured.rows]  # count 0: only p2p reaches NCCL
    predicted = iter(bench(kind, topology, runtime, [float(r.size) for r, ok in zip(measured.rows, runs) if ok],
                           dtype=measured.rows[0].type, root=root, fidelity=fidelity,
                           gpus_per_thread=gpus_per_thread, progress=progress))
    factor = busbw_factor(kind, n)
    return [Comparison(r.size, r.count, r.time_us, r.size / r.time_us / 1e3 * factor if r.time_us > 0 else 0.0,
                       next(predicted) if ok else None, r.unsettled)
            for r, ok in zip(measured.rows, runs)]
