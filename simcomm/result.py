"""Results of a simulated run: iteration time, its breakdown, traffic, epoch and speedup (pure data).

Breakdown of one iteration on the *critical rank* (the training rank with the
most local compute, i.e. the straggler that sets a synchronous step):

* ``compute``: union of its compute intervals (forward, backward, update,
  server work);
* ``compression``: compression/sketching/selection work not overlapping compute;
* ``dataload``: data loading not overlapping either;
* ``server``: time the rank waits while a parameter server computes
  (server reduce and update, ops of category ``server`` on any rank), not
  overlapping the rank's own work;
* ``comm_exposed``: the rest of the iteration, i.e. time the rank spends
  communicating or waiting for others with nothing to compute;
* ``comm_hidden``: time its communication overlaps its own local work.

compute + compression + dataload + server + comm_exposed is the iteration time
exactly; ``comm_hidden`` is extra.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from simcomm.ops import Collective, Compute, Transfer

__all__ = ["Breakdown", "IterationKind", "Result", "breakdown", "iteration_time", "critical_rank"]

_COMPRESSION = {"compression", "reduce", "sketch", "selection"}


@dataclass(frozen=True)
class Breakdown:
    """Seconds per iteration, see the module docstring."""

    compute: float = 0.0
    dataload: float = 0.0
    comm_exposed: float = 0.0
    comm_hidden: float = 0.0
    compression: float = 0.0
    server: float = 0.0

    @property
    def total(self) -> float:
        return self.compute + self.dataload + self.comm_exposed + self.compression + self.server

    def scaled(self, k: float) -> Breakdown:
        return Breakdown(*(k * v for v in asdict(self).values()))

    def plus(self, other: Breakdown) -> Breakdown:
        return Breakdown(*(a + b for a, b in zip(asdict(self).values(), asdict(other).values(), strict=False)))


@dataclass(frozen=True)
class IterationKind:
    """One kind of iteration of a (possibly periodic) strategy."""

    label: str
    weight: float
    time_s: float
    breakdown: Breakdown
    link_bytes: dict = field(default_factory=dict)
    analytic_s: float | None = None
    rank_mean_s: float | None = None  # mean over training ranks of each rank's finish (heterogeneous compute)
    #: (from, to, link class, utilisation over the iteration) of the busiest directed links, when asked for
    busiest_links: tuple = ()
    #: exposed time by parallelism (tensor, pipeline, data, expert) and waiting, for layouts that name them
    exposed_by: dict = field(default_factory=dict)
    #: the engine paths its simulation took (``Timeline.paths``: driver, pricing, scaled steps, fluid core, ...,
    #: ``taken``) and the planning paths of its plan (``rank_fold``, ``IterationInfo.paths``)
    engine: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Result:
    """Everything ``simcomm run`` reports for one strategy on one setting."""

    strategy: str
    options: dict
    nodes: int
    gpus_per_node: int
    n_ranks: int
    cluster: str
    model: str
    batch: int
    fidelity: str
    stack: str
    kinds: tuple[IterationKind, ...] = ()
    mean_s: float = float("nan")
    breakdown: Breakdown = Breakdown()
    link_bytes: dict = field(default_factory=dict)
    analytic_mean_s: float | None = None
    iterations_per_epoch: int | None = None
    epoch_s: float | None = None
    samples_per_s: float = float("nan")
    baseline_s: float | None = None
    speedup: float | None = None
    baseline: str | None = None  # what "speedup vs" compares with, in words
    assumed: tuple[str, ...] = ()
    not_applicable: str | None = None
    #: mean over training ranks of the time each finishes its iteration (set with per-node compute scales:
    #: a synchronous step makes every rank finish late, a gossip step only the slow one)
    rank_mean_s: float | None = None
    #: the busiest directed links of the most frequent kind of iteration: (from, to, class, utilisation)
    busiest_links: tuple = ()
    #: exposed time by parallelism and the remaining wait (pipeline bubble), weighted over the kinds
    exposed_by: dict = field(default_factory=dict)
    #: samples per iteration when the strategy sets its own global batch (a large-model layout); None:
    #: the workload's batch × ranks
    samples_per_iteration: int | None = None
    #: the peak GPU memory and its breakdown (simcomm.memory.fit.Peak.to_dict); empty when not estimated
    memory: dict = field(default_factory=dict)
    #: the network overrides the run's preset was built with, as given (``{"inter": "ib-ndr"}``); empty: none
    network: dict = field(default_factory=dict)

    @property
    def where(self) -> str:
        """The cluster as headers name it, with its network overrides: ``gb200-nvl72 (inter=roce-400g)``."""
        given = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.network.items())
        return f"{self.cluster} ({given})" if given else self.cluster

    @property
    def global_batch(self) -> int:
        return self.samples_per_iteration or self.batch * self.n_ranks

    def to_dict(self) -> dict:
        d = asdict(self)
        d["global_batch"] = self.global_batch
        # Only heterogeneous runs have per-rank means; other outputs keep their shape.
        for row in (d, *d["kinds"]):
            if row.get("rank_mean_s") is None:
                row.pop("rank_mean_s", None)
            if not row.get("busiest_links"):
                row.pop("busiest_links", None)
            if not row.get("exposed_by"):
                row.pop("exposed_by", None)
        if d.get("samples_per_iteration") is None:
            d.pop("samples_per_iteration", None)
        if not d.get("memory"):
            d.pop("memory", None)
        if not d.get("network"):
            d.pop("network", None)
        return d


def _union(iv: np.ndarray) -> np.ndarray:
    """Merge intervals (rows of [start, end]) into disjoint sorted ones."""
    if len(iv) == 0:
        return iv.reshape(0, 2)
    iv = iv[np.lexsort((iv[:, 1], iv[:, 0]))]
    out = [list(iv[0])]
    for s, e in iv[1:]:
        if s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return np.array(out, dtype=float)


def _measure(iv: np.ndarray) -> float:
    return float((iv[:, 1] - iv[:, 0]).sum()) if len(iv) else 0.0


def _intersect(a: np.ndarray, b: np.ndarray) -> float:
    """Measure of the intersection of two disjoint-interval sets."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i, 0], b[j, 0]), min(a[i, 1], b[j, 1])
        if hi > lo:
            total += hi - lo
        if a[i, 1] < b[j, 1]:
            i += 1
        else:
            j += 1
    return total


def iteration_time(plan, timeline) -> tuple[float, tuple[float, float]]:
    """(seconds, window) of one iteration: the plan's period if it declares one, else the makespan."""
    per = plan.info.period_ranks
    if per:
        a, b = max(per.values(), key=lambda ab: (timeline.end[ab[1]] - timeline.end[ab[0]]))
        return float(timeline.end[b] - timeline.end[a]), (float(timeline.end[a]), float(timeline.end[b]))
    if plan.info.period:
        a, b = plan.info.period
        return float(timeline.end[b] - timeline.end[a]), (float(timeline.end[a]), float(timeline.end[b]))
    return float(timeline.makespan), (0.0, float(timeline.makespan))


def critical_rank(plan, n_train: int) -> int:
    """Training rank with the most compute seconds (lowest id on ties), among the plan's measured ranks if it names them."""
    secs = np.zeros(plan.n_ranks)
    for op in plan.ops:
        if isinstance(op, Compute) and op.category != "dataload":
            secs[op.rank] += op.seconds
    measured = plan.info.measured_ranks
    if measured is not None:
        ranks = np.array(sorted(r for r in measured if r < n_train) or [min(measured)], dtype=np.int64)
        return int(ranks[np.argmax(secs[ranks])])
    return int(np.argmax(secs[:max(1, n_train)]))


def breakdown(plan, timeline, n_train: int, window: tuple[float, float] | None = None) -> Breakdown:
    """Breakdown of one iteration on the critical rank (see the module docstring)."""
    r = critical_rank(plan, n_train)
    lo, hi = window if window is not None else (0.0, float(timeline.makespan))
    groups: dict[str, list] = {"c": [], "z": [], "d": [], "m": [], "s": []}
    start, end = np.asarray(timeline.start), np.asarray(timeline.end)
    for op in plan.ops:
        # messages first, read field by field: they are most of a gossip plan's ops (crossover-sgd at 16 384
        # GPUs: 294 912 of 294 951), and few are the rank's; ``Transfer.ranks`` would make a tuple of each
        if isinstance(op, Transfer):
            if op.src != r and op.dst != r:
                continue
            key = "m"
        elif isinstance(op, Compute):
            if op.category == "server" and op.rank != r:
                key = "s"  # a server's work the rank waits on (its own server work is its compute)
            elif op.rank != r:
                continue
            else:
                key = "d" if op.category == "dataload" else "z" if op.category in _COMPRESSION else "c"
        elif isinstance(op, Collective):
            if r not in op.ranks:
                continue
            key = "m"
        else:
            continue
        s, e = max(lo, start[op.id]), min(hi, end[op.id])
        if e > s:
            groups[key].append((s, e))
    u = {k: _union(np.array(v, dtype=float).reshape(-1, 2)) for k, v in groups.items()}
    cz = _union(np.vstack([u["c"], u["z"]]))
    czd = _union(np.vstack([cz, u["d"]]))
    compute = _measure(u["c"])
    compression = _measure(cz) - compute
    dataload = _measure(czd) - _measure(cz)
    server = _measure(_union(np.vstack([czd, u["s"]]))) - _measure(czd)
    exposed = max(0.0, (hi - lo) - _measure(czd) - server)
    hidden = _intersect(u["m"], czd)
    return Breakdown(float(compute), float(dataload), float(exposed), float(hidden), float(compression),
                     float(server))


def exposed_by(plan, timeline, n_train: int, window: tuple[float, float], streams: dict[str, str]) -> dict[str, float]:
    """The critical rank's exposed time split by what it waited on (layouts whose streams name a parallelism).

    ``streams`` maps an op's stream to a parallelism (``{"tp": "tensor", "pp": "pipeline", ...}``).
    Communication of each kind not hidden behind the rank's compute is charged to the first kind
    (in ``streams``' order) that covers it; what remains of the exposed time, with no transfer of
    the rank in flight, is ``waiting``: the pipeline bubble and waits for other ranks.
    """
    r = critical_rank(plan, n_train)
    lo, hi = window
    start, end = np.asarray(timeline.start), np.asarray(timeline.end)
    busy: list = []
    comm: dict[str, list] = {kind: [] for kind in dict.fromkeys(streams.values())}
    seen: set[str] = set()  # kinds the rank takes part in (reported even when they cost nothing)
    for op in plan.ops:
        s, e = max(lo, start[op.id]), min(hi, end[op.id])
        if isinstance(op, Compute):
            if op.rank == r and e > s:
                busy.append((s, e))
        elif isinstance(op, (Collective, Transfer)) and r in op.ranks and op.stream in streams:
            seen.add(streams[op.stream])
            if e > s:
                comm[streams[op.stream]].append((s, e))
    covered = _union(np.array(busy, dtype=float).reshape(-1, 2))
    out: dict[str, float] = {}
    for kind, iv in comm.items():
        both = _union(np.vstack([covered, np.array(iv, dtype=float).reshape(-1, 2)]))
        if kind in seen:
            out[kind] = float(_measure(both) - _measure(covered))
        covered = both
    out["waiting"] = float(max(0.0, (hi - lo) - _measure(covered)))
    return out
