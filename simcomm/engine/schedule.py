"""From a Collective op to what the engine runs: algorithm, ppn and routed steps.

* :func:`resolve_algorithm` maps ``(kind, algorithm)`` to an
  :class:`~simcomm.collectives.base.Algorithm` (``auto`` asks
  :mod:`simcomm.collectives.auto`, which mirrors MPICH's choice by size).
* :func:`group_ppn` derives the ranks-per-machine of a group for hierarchical
  algorithms: the group must be node-major (each machine's members contiguous)
  with the same count on every machine, else 1.
* :class:`RoutedStep` is one step mapped to global ranks, with its routes as a
  flat incidence list, per-transfer route latency and the per-receiver data
  needed to price reductions.  It is built once per step and reused by every
  repeat, by the coalescing shortcut and by link-byte accounting.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simcomm.collectives.base import ALGORITHMS, Algorithm, Step
from simcomm.topologies.base import Topology

__all__ = ["Prepared", "Runtime", "prepare", "resolve_algorithm", "group_ppn", "takes_ppn", "algorithm_steps", "algorithm_cost",
           "RoutedStep", "route_step"]


def resolve_algorithm(kind: str, name: str, p: int, nbytes: float, rules: str = "mpich") -> Algorithm:
    """The algorithm object that runs a ``kind`` collective; raises UnknownNameError.

    ``rules`` is how ``auto`` chooses (the stack's :attr:`~simcomm.stacks.Stack.collectives`):
    ``mpich``, ``openmpi`` or ``gloo`` here; ``nccl`` is handled by :mod:`simcomm.nccl`.
    """
    import simcomm.collectives  # noqa: F401  (registers the catalogue)

    if name == "auto":
        from simcomm.collectives.auto import resolve

        alg = resolve(kind, name, p, nbytes) if rules == "mpich" else resolve(kind, name, p, nbytes, rules=rules)
        return ALGORITHMS.get(alg) if isinstance(alg, str) else alg
    return ALGORITHMS.get(f"{kind}/{name}")


def group_ppn(topology: Topology, ranks: tuple[int, ...]) -> int:
    """Ranks per machine of a node-major, uniform group; 1 otherwise."""
    machines = [topology.machine_of(r) for r in ranks]
    if any(m is None for m in machines) or len(ranks) < 2:
        return 1
    runs: list[int] = []
    seen: set = set()
    prev = object()
    for m in machines:
        if m != prev:
            if m in seen:  # a machine's members are not contiguous
                return 1
            seen.add(m)
            runs.append(0)
            prev = m
        runs[-1] += 1
    return runs[0] if len(set(runs)) == 1 else 1


def takes_ppn(alg: Algorithm) -> bool:
    """Whether the algorithm's schedule depends on ranks per machine (two-level ones)."""
    return bool(getattr(alg, "hierarchical", False))


def algorithm_steps(alg: Algorithm, p: int, nbytes: float, root: int, ppn: int) -> list[Step]:
    """``alg.steps`` through the Algorithm contract (every algorithm takes ``ppn``; flat ones ignore it)."""
    return alg.steps(p, nbytes, root, ppn=ppn)


def algorithm_cost(alg: Algorithm, p: int, nbytes: float, alpha: float, beta: float, gamma: float,
                   ppn: int, alpha_inter: float | None = None, beta_inter: float | None = None) -> float:
    """``alg.cost(...).total`` through the Algorithm contract (``ppn`` and internode α/β for every algorithm)."""
    return alg.cost(p, nbytes, alpha, beta, gamma, ppn=ppn, alpha_inter=alpha_inter, beta_inter=beta_inter).total


@dataclass(frozen=True)
class Prepared:
    """A collective op's resolved algorithm, ranks per machine and schedule.

    ``latency`` (one entry per step, or None) replaces the route latency of every
    transfer of that step: NCCL's tuning-model latency for its pipelined steps
    (docs/nccl.md).  ``closed_form`` (seconds), when set, is what the analytic
    fidelity charges instead of ``algorithm.cost``.  ``label`` names what runs
    (``ring``, ``NCCL Ring/LL128 x8 channels``) for reports and timelines.
    """

    algorithm: Algorithm
    ppn: int
    steps: tuple[Step, ...]
    latency: tuple[float | None, ...] | None = None
    closed_form: float | None = None
    label: str = ""


@dataclass(frozen=True)
class Runtime:
    """How collectives run: the stack's rule family and NCCL_ALGO/NCCL_PROTO-like overrides."""

    rules: str = "mpich"
    nccl_algo: str | None = None
    nccl_proto: str | None = None
    #: GPUs one host thread drives (nccl-tests' -g); 1 for PyTorch DDP/FSDP, one process per GPU
    gpus_per_thread: int = 1


def prepare(op, topology: Topology, ppn_override: int | None, runtime: Runtime | None = None) -> Prepared:
    """Resolve and validate a Collective op before the simulation starts.

    Doing this up front makes every user error (unknown algorithm, unsupported
    group size) a clean one-line error instead of a failure inside a process.
    """
    runtime = runtime or Runtime()
    if runtime.rules == "nccl":
        from simcomm.nccl import prepare_nccl

        nccl = prepare_nccl(op, topology, runtime)
        if nccl is not None:
            return nccl
    p = len(op.ranks)
    rules = "mpich" if runtime.rules == "nccl" else runtime.rules
    alg = resolve_algorithm(op.kind, op.algorithm, p, op.nbytes, rules)
    ppn = (ppn_override or group_ppn(topology, op.ranks)) if takes_ppn(alg) else 1
    return Prepared(alg, ppn, tuple(s for s in algorithm_steps(alg, p, op.nbytes, op.root, ppn) if len(s)),
                    label=alg.name)


@dataclass(frozen=True, eq=False)
class RoutedStep:
    """One step in global ranks, routed (arrays are per transfer unless noted)."""

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    latency: np.ndarray          # summed per-hop latency of each route
    route_len: np.ndarray        # links per route
    links: np.ndarray            # concatenated routes (directed link ids)
    repeat: int
    red_ranks: np.ndarray        # receivers that reduce (per receiver)
    red_seconds: np.ndarray      # gamma x reduced bytes (per receiver)
    red_slot: np.ndarray         # per transfer: its receiver's slot in red_ranks, -1 if none

    def __len__(self) -> int:
        return len(self.src)

    def end_time(self, t_start: float, finish: np.ndarray) -> float:
        """Step end: last transfer, or a receiver's last arrival plus its reduction."""
        if len(self.src) == 0:
            return t_start
        end = float(finish.max())
        if len(self.red_ranks):
            arrive = np.full(len(self.red_ranks), -np.inf)
            on = self.red_slot >= 0
            np.maximum.at(arrive, self.red_slot[on], finish[on])
            end = max(end, float((arrive + self.red_seconds).max()))
        return end

    def family_bytes(self, family_of_link: np.ndarray, n_families: int) -> np.ndarray:
        """Bytes carried per link family by one run of this step."""
        per_link = np.repeat(self.nbytes, self.route_len)
        return np.bincount(family_of_link[self.links], weights=per_link, minlength=n_families)


def route_step(topology: Topology, group: np.ndarray, step: Step, gamma: np.ndarray,
               cache: dict | None = None, group_key: bytes | None = None) -> RoutedStep:
    """Map a group-local step to global ranks and route every transfer.

    ``cache`` (a dict owned by the caller, one per topology) keeps the routes
    of each (group, src, dst) pattern, so a pattern seen again with other byte
    counts (the same all-to-all on another layer) is not routed again.
    """
    src = group[step.src]
    dst = group[step.dst]
    key = None
    if cache is not None:
        key = (group.tobytes() if group_key is None else group_key, step.src.tobytes(), step.dst.tobytes())
    hit = cache.get(key) if cache is not None and key is not None else None
    if hit is None:
        route_len, links = topology.routes(src, dst)
        owner = np.repeat(np.arange(len(src)), route_len)
        latency = np.bincount(owner, weights=topology.latency[links], minlength=len(src))
        if cache is not None and key is not None:
            cache[key] = (latency, route_len, links)
    else:
        latency, route_len, links = hit
    red = step.reduce > 0
    if red.any():
        ranks, slot = np.unique(dst[red], return_inverse=True)
        red_bytes = np.bincount(slot, weights=step.reduce[red], minlength=len(ranks))
        red_slot = np.full(len(src), -1, dtype=np.int64)
        # Every transfer into a reducing receiver counts for its arrival time,
        # including those that carry nothing to reduce (as in ideal_time()).
        pos = np.searchsorted(ranks, dst)
        hit = (pos < len(ranks)) & (ranks[np.minimum(pos, len(ranks) - 1)] == dst)
        red_slot[hit] = pos[hit]
        red_seconds = gamma[ranks] * red_bytes
    else:
        ranks = np.zeros(0, dtype=np.int64)
        red_seconds = np.zeros(0)
        red_slot = np.full(len(src), -1, dtype=np.int64)
    return RoutedStep(src, dst, step.nbytes.astype(float), latency, route_len, links, step.repeat,
                      ranks, red_seconds, red_slot)
