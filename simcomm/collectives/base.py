"""The collective-algorithm contract: step schedules and closed forms.

Every algorithm is one module defining a subclass of :class:`Algorithm` and
registering an instance in :data:`ALGORITHMS` under ``"<collective>/<name>"``
(e.g. ``allreduce/ring``).  It provides two views of the same schedule:

``steps(p, nbytes, root=0, *, ppn=1)``
    The point-to-point transfers as the algorithm really runs them, as a list
    of bulk-synchronous :class:`Step` s.  Ranks are *group-local* indices
    ``0..p-1`` (the engine maps them to global ranks).  The flow engine runs
    these on a topology.
``cost(p, nbytes, alpha, beta, gamma=0.0, *, ppn=1, alpha_inter=None, beta_inter=None)``
    The Hockney α-β-γ closed form as :class:`CostTerms`.  ``ppn`` (ranks per
    node, group-local ranks node-major) matters only to hierarchical
    algorithms, which price intranode stages with ``alpha``/``beta`` and
    internode stages with ``alpha_inter``/``beta_inter`` (default: the same).

Step semantics (shared by the engine and the closed forms):

* all transfers of a step start together; a transfer of ``n`` bytes on an
  uncontended route finishes after ``α + n·β`` (α = summed per-hop latency);
* after its incoming transfers arrive, a receiving rank reduces
  ``Σ reduce`` bytes, costing ``γ`` s/byte;
* the step ends when every transfer and every reduction has finished; the next
  step starts then.  ``repeat = r`` means the identical step runs r times in a row.

So on a contention-free network a step lasts
``max_t(α + n_t β)`` joined with ``max_r(max_{t→r}(α + n_t β) + γ Σ_{t→r} reduce_t)``.

Size conventions (``nbytes``), following MPICH and nccl-tests:
allreduce, broadcast, reduce, p2p: the message (buffer) size per rank;
reduce_scatter, allgather, gather, scatter: the total (gathered) size;
alltoall: the total data one process sends.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from simcomm.errors import ConfigError
from simcomm.registry import Registry

__all__ = ["Step", "CostTerms", "Algorithm", "ALGORITHMS", "COLLECTIVES", "ideal_time", "default_ppn", "register",
           "register_variant"]

#: collective kind -> (one-line summary, nbytes convention)
COLLECTIVES: dict[str, tuple[str, str]] = {
    "allreduce": ("every rank ends with the element-wise reduction of all buffers", "buffer per rank"),
    "reduce_scatter": ("every rank ends with 1/p of the reduced buffer", "total buffer"),
    "allgather": ("every rank ends with the concatenation of all blocks", "total gathered size"),
    "broadcast": ("the root's buffer is copied to every rank", "buffer"),
    "reduce": ("the root ends with the reduction of all buffers", "buffer per rank"),
    "gather": ("the root ends with every rank's block", "total gathered size"),
    "scatter": ("every rank gets its block of the root's buffer", "total scattered size"),
    "alltoall": ("every rank sends a distinct block to every other", "total data sent by one rank"),
    "p2p": ("one message between two ranks", "message size"),
}


@dataclass(frozen=True, eq=False)
class Step:
    """One bulk-synchronous step of a collective (arrays of equal length)."""

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    reduce: np.ndarray
    repeat: int = 1

    @classmethod
    def make(cls, src, dst, nbytes, reduce=0.0, repeat: int = 1) -> Step:
        """Build a step, broadcasting scalar ``nbytes``/``reduce`` over the transfers."""
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        n = len(src)
        nb = np.broadcast_to(np.asarray(nbytes, dtype=float), (n,)).copy()
        rd = np.broadcast_to(np.asarray(reduce, dtype=float), (n,)).copy()
        if len(dst) != n:
            raise ValueError("src and dst differ in length")
        if repeat < 1:
            raise ValueError("repeat must be >= 1")
        return cls(src, dst, nb, rd, int(repeat))

    def __len__(self) -> int:
        return len(self.src)


@dataclass(frozen=True)
class CostTerms:
    """A closed form split into its α (latency), β (bandwidth) and γ (reduction) parts."""

    latency: float
    bandwidth: float
    reduction: float = 0.0

    @property
    def total(self) -> float:
        return self.latency + self.bandwidth + self.reduction


class Algorithm:
    """Base class of every collective algorithm (one subclass per module).

    Subclasses set the class attributes and implement :meth:`steps` and
    :meth:`cost`; :meth:`supports` says whether a group size is allowed.
    """

    collective: ClassVar[str] = ""
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    reference: ClassVar[str] = ""

    #: True for algorithms whose schedule depends on ``ppn`` (two-level ones).
    hierarchical: ClassVar[bool] = False

    #: ``"openmpi"`` for Open MPI's own implementations (added for ``rules="openmpi"``);
    #: ``simcomm.runtimes.mpi.algorithms_for`` lists them only for the Open MPI rules, so MPICH-rule
    #: comparisons (``simcomm cost --algo all``) keep their catalogue.
    family: ClassVar[str] = ""

    def supports(self, p: int, ppn: int = 1) -> bool:
        return p >= 1

    def check(self, p: int, nbytes: float, ppn: int = 1, root: int = 0) -> None:
        if p < 1:
            raise ConfigError(f"ranks: {p} is impossible; a collective needs at least 1 rank")
        if not nbytes >= 0:
            raise ConfigError(f"size: {nbytes} must be non-negative")
        if ppn < 1:
            raise ConfigError(f"ppn: {ppn} must be at least 1")
        if not 0 <= root < p:
            raise ConfigError(f"root: {root} is not a rank of a {p}-rank group (0..{p - 1})")
        if not self.supports(p, ppn):
            raise ConfigError(f"algorithm {self.collective}/{self.name} does not support {p} ranks "
                              f"with ppn={ppn}")

    #: Rooted collectives build their schedule for root 0 and are relabelled
    #: ``r -> (r + root) mod p``; the cost is therefore independent of the root.
    rooted: ClassVar[bool] = False

    def steps(self, p: int, nbytes: float, root: int = 0, *, ppn: int = 1) -> list[Step]:
        """The schedule on group-local ranks; empty for ``p == 1``."""
        self.check(p, nbytes, ppn, root)
        if p == 1:
            return []
        out = self._steps(int(p), float(nbytes), int(ppn))
        if self.rooted and root:
            perm = (np.arange(p, dtype=np.int64) + root) % p
            out = [Step(perm[s.src], perm[s.dst], s.nbytes, s.reduce, s.repeat) for s in out]
        return out

    def cost(self, p: int, nbytes: float, alpha: float, beta: float, gamma: float = 0.0, *,
             ppn: int = 1, alpha_inter: float | None = None, beta_inter: float | None = None) -> CostTerms:
        """Hockney closed form; zero for ``p == 1``."""
        self.check(p, nbytes, ppn)
        if p == 1:
            return CostTerms(0.0, 0.0, 0.0)
        ai = alpha if alpha_inter is None else alpha_inter
        bi = beta if beta_inter is None else beta_inter
        return self._cost(int(p), float(nbytes), float(alpha), float(beta), float(gamma), int(ppn), ai, bi)

    # Subclasses implement these two for p >= 2 (arguments already validated).
    def _steps(self, p: int, n: float, ppn: int) -> list[Step]:
        raise NotImplementedError

    def _cost(self, p: int, n: float, a: float, b: float, g: float, ppn: int,
              a_inter: float, b_inter: float) -> CostTerms:
        raise NotImplementedError

    @property
    def key(self) -> str:
        return f"{self.collective}/{self.name}"


ALGORITHMS: Registry[Algorithm] = Registry("collective algorithm", "simcomm.collectives")


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Class decorator: register one instance of ``cls`` under ``collective/name``."""
    inst = cls()
    ALGORITHMS.add(inst.key, inst, summary=cls.summary, reference=cls.reference)
    return cls


def register_variant(cls: type[Algorithm], name: str, *, summary: str, **params) -> type[Algorithm]:
    """Register a subclass of ``cls`` under ``name`` with other class-level parameters.

    For one algorithm run with several settings (Open MPI's segment sizes):
    the variant lives in ``cls``'s module, so it shares the schedule, the
    closed form and the module docstring.  It is bound there under an
    identifier so that its instances pickle (the sweep runner spawns workers).
    """
    module = sys.modules[cls.__module__]
    clsname = cls.__name__ + "_" + re.sub(r"\W", "_", name)
    attrs = {"name": name, "summary": summary, "__module__": cls.__module__, "__qualname__": clsname, **params}
    sub = type(clsname, (cls,), attrs)
    setattr(module, clsname, sub)
    return register(sub)


def default_ppn(p: int) -> int:
    """A non-trivial ranks-per-node for tests: the smallest divisor of ``p`` in (1, p), else 1."""
    for d in range(2, int(p**0.5) + 1):
        if p % d == 0:
            return d
    return 1


def ideal_time(steps: list[Step], alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Price a step list assuming every transfer has its own uncontended link.

    This is the step semantics above with a single α, β and γ; tests use it
    to cross-check each closed form against its own schedule.
    """
    total = 0.0
    for s in steps:
        if len(s) == 0:
            continue
        fin = alpha + s.nbytes * beta
        t = float(fin.max())
        if gamma and s.reduce.any():
            p = int(max(s.dst.max(), s.src.max())) + 1
            arrive = np.zeros(p)
            np.maximum.at(arrive, s.dst, fin)
            red = np.bincount(s.dst, weights=s.reduce, minlength=p)
            t = max(t, float((arrive + gamma * red)[red > 0].max()))
        total += t * s.repeat
    return total
