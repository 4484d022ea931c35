"""Algorithms built from other collectives run one after the other.

Open MPI's ``nonoverlapping`` allreduce and reduce-scatter (and its linear
allreduce) call a reduce to rank 0 and then a broadcast or a scatter from
rank 0.  The schedule is the concatenation of the parts' schedules (all with
root 0) and the closed form the sum of their closed forms, which is exact
because steps never overlap across parts.
"""

from __future__ import annotations

from simcomm.collectives.base import Algorithm, CostTerms, Step

__all__ = ["sequence_steps", "sequence_cost"]


def sequence_steps(parts: list[Algorithm], p: int, n: float) -> list[Step]:
    out: list[Step] = []
    for alg in parts:
        out += alg.steps(p, n)
    return out


def sequence_cost(parts: list[Algorithm], p: int, n: float, a: float, b: float, g: float) -> CostTerms:
    terms = [alg.cost(p, n, a, b, g) for alg in parts]
    return CostTerms(sum(t.latency for t in terms), sum(t.bandwidth for t in terms),
                     sum(t.reduction for t in terms))
