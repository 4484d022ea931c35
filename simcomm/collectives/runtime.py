"""What the engine asks of a runtime, and the catalogue runtime (MPI's and gloo's way of running collectives).

A *runtime* is how a transport stack runs collectives (docs/architecture.md,
"Stacks decide how collectives run").  The engine holds no list of runtimes
and names none: the caller hands it an object satisfying
:class:`CollectiveRuntime`, and the engine asks it two things per collective
op before the run starts:

* :meth:`~CollectiveRuntime.placement`: what, besides the op's kind, size,
  group size and root, the schedule depends on (the engine keys its cache of
  preparations on it);
* :meth:`~CollectiveRuntime.prepare`: the :class:`Prepared` schedule, i.e. the
  algorithm, its steps (or flows), an optional closed form and a label.

This module sits below the engine and the runtimes alike, so neither imports
the other.  :class:`CatalogueRuntime` is the runtime of MPICH, Open MPI and
gloo: run the textbook algorithm the op names, and choose one for ``auto``
by the library's rule table (:mod:`simcomm.collectives.auto`,
:mod:`simcomm.collectives.auto_openmpi`).  The registered runtimes, with their
references, are in :mod:`simcomm.runtimes`; the engine runs a plan whose
caller names no runtime on MPICH's rules (:data:`PLAIN`), which is what an op's
``auto`` means without a stack (:class:`simcomm.ops.Collective`).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from simcomm.collectives.base import Algorithm, Step

__all__ = ["Prepared", "CollectiveRuntime", "CatalogueRuntime", "PLAIN", "group_ppn", "takes_ppn",
           "algorithm_steps"]


@dataclass(frozen=True)
class Prepared:
    """A collective op's schedule: its steps (or flows), their closed form and a label.

    ``algorithm`` is the catalogue algorithm whose closed form (``algorithm.cost``) the
    analytic fidelity charges, at ``ppn`` ranks per machine; a runtime with its own
    patterns (NCCL) gives None and a ``closed_form`` (seconds) instead.  ``latency``
    (one entry per step, or None) replaces the route latency of every transfer of that
    step: NCCL's tuning-model latency for its pipelined steps (docs/nccl.md).  ``label``
    names what runs (``ring``, ``NCCL Ring/LL128``) for reports and timelines; ``key``
    names what prices the same for the same group, size and root (the algorithm's
    ``collective/name`` unless given; the engine caches closed forms on it).
    """

    algorithm: Algorithm | None
    ppn: int
    steps: tuple[Step, ...]
    latency: tuple[float | None, ...] | None = None
    closed_form: float | None = None
    label: str = ""
    key: str = ""

    def __post_init__(self) -> None:
        if self.algorithm is None:
            if self.closed_form is None or not self.label or not self.key:
                raise ValueError("Prepared: without a catalogue algorithm, give a closed form, a label and a key")
            return
        if not self.label:
            object.__setattr__(self, "label", self.algorithm.name)
        if not self.key:
            object.__setattr__(self, "key", self.algorithm.key)


@runtime_checkable
class CollectiveRuntime(Protocol):
    """How a stack runs collectives, as the engine sees it (hashable: the engine caches on it)."""

    @property
    def name(self) -> str: ...

    def placement(self, op: Any, topology: Any, ppn: int | None) -> Hashable:
        """What the op's schedule depends on beyond its kind, algorithm, size, group size and root."""
        ...

    def prepare(self, op: Any, topology: Any, ppn: int | None) -> Prepared:
        """The op's schedule on ``topology``; ``ppn`` overrides ranks per machine (None: the topology's)."""
        ...


def group_ppn(topology: Any, ranks: tuple[int, ...]) -> int:
    """Ranks per machine of a node-major, uniform group (each machine's members contiguous); 1 otherwise."""
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


@dataclass(frozen=True)
class CatalogueRuntime:
    """MPICH, Open MPI or gloo: the named textbook algorithm, or for ``auto`` the one ``rules`` picks.

    ``rules`` is a key of :data:`simcomm.collectives.auto.RULES` (``mpich``,
    ``openmpi``, ``openmpi-3.1``, ``gloo``).  A two-level algorithm gets the
    group's ranks per machine (:func:`group_ppn`) unless the engine's ``ppn``
    overrides it; nothing else about where the members sit changes the schedule.
    """

    rules: str = "mpich"

    @property
    def name(self) -> str:
        return self.rules

    def algorithm(self, kind: str, name: str, p: int, nbytes: float) -> Algorithm:
        """The algorithm that runs a ``kind`` collective called ``name``; raises UnknownNameError."""
        import simcomm.collectives  # noqa: F401  (registers the catalogue)
        from simcomm.collectives.auto import resolve
        from simcomm.collectives.base import ALGORITHMS

        if name == "auto":
            alg = resolve(kind, name, p, nbytes, rules=self.rules)
            return ALGORITHMS.get(alg) if isinstance(alg, str) else alg
        return ALGORITHMS.get(f"{kind}/{name}")

    def placement(self, op: Any, topology: Any, ppn: int | None) -> Hashable:
        return ppn or group_ppn(topology, op.ranks)

    def prepare(self, op: Any, topology: Any, ppn: int | None) -> Prepared:
        """Resolve and validate ``op`` before the run, so a user error is one line, not a failure inside it."""
        p = len(op.ranks)
        alg = self.algorithm(op.kind, op.algorithm, p, op.nbytes)
        ppn = (ppn or group_ppn(topology, op.ranks)) if takes_ppn(alg) else 1
        return Prepared(alg, ppn, tuple(s for s in algorithm_steps(alg, p, op.nbytes, op.root, ppn) if len(s)),
                        label=alg.name)


#: the runtime of a plan whose caller names none: MPICH's rules, as ``auto`` is documented in simcomm.ops
PLAIN = CatalogueRuntime()
