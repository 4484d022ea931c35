"""What the engine asks of a runtime, and the pieces a runtime that runs catalogue algorithms uses.

A *runtime* is how a transport stack runs collectives (docs/architecture.md,
"Stacks decide how collectives run").  The engine holds no list of runtimes,
names none and has no default: the caller (setup, from the stack) hands it an
object satisfying :class:`CollectiveRuntime`, and the engine asks it two things
per collective op before the run starts:

* :meth:`~CollectiveRuntime.placement`: what, besides the op's kind, size,
  group size and root, the schedule depends on (the engine keys its cache of
  preparations on it);
* :meth:`~CollectiveRuntime.prepare`: the :class:`Prepared` schedule, i.e. the
  algorithm, its steps (or flows), an optional closed form and a label.

This module sits below the engine and the runtimes alike, so neither imports
the other.  The registered runtimes, with their references, are in
:mod:`simcomm.runtimes` (MPICH, Open MPI and gloo with their rule tables:
:mod:`simcomm.runtimes.mpi`; NCCL: :mod:`simcomm.runtimes.nccl`).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from simcomm.collectives.base import Algorithm, Step

__all__ = ["Prepared", "CollectiveRuntime", "group_ppn", "takes_ppn", "algorithm_steps"]


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
        """What the op's schedule depends on beyond its kind, algorithm, size, group size and root: a function of
        the op's ranks, ``topology`` and ``ppn`` alone (the engine asks once per group in a run)."""
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
