"""Recursive-doubling allgather, with a fold for non-powers of two.

For ``p = 2^k`` this is MPICH's ``allgather_intra_recursive_doubling``: for
mask m = 1, 2, .., p/2 rank r swaps everything it holds (m blocks) with
``r ^ m``, so ``T = lg p·α + (p-1)/p·n·β``.  MPICH only allows powers of two
here; for other p we fold as MPICH's allreduce does: the even ranks below
``2·rem`` first give their block to ``rank+1``, the ``p'`` remaining ranks
double (new rank j < rem holds two blocks, so the largest window of m new
ranks holds ``w(m) = m + min(rem, m)`` blocks), and the odd ranks below
``2·rem`` finally send the ``p-1`` blocks their even neighbour lacks.  With
``e = [rem > 0]``::

    T = e(α + (n/p)β) + Σ_m [α + w(m)·(n/p)·β] + e(α + (p-1)/p·n·β)
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives._patterns import fold_map, lg, pairs
from simcomm.collectives.base import Algorithm, CostTerms, Step, register
from simcomm.collectives.reduce_scatter_recursive_halving import window_blocks


def rd_allgather_steps(p: int, n: float) -> list[Step]:
    pof2, rem, real = fold_map(p, keep_odd=True)
    drop, keep = pairs(rem, keep_odd=True)
    out = [Step.make(drop, keep, n / p)] if rem else []
    j = np.arange(pof2, dtype=np.int64)
    for k in range(lg(pof2)):
        m = 1 << k
        nb = window_blocks(j & ~(m - 1), m, rem) * (n / p)
        out.append(Step.make(real[j], real[j ^ m], nb))
    if rem:
        out.append(Step.make(keep, drop, (p - 1) / p * n))
    return out


def rd_allgather_cost(p: int, n: float, a: float, b: float) -> CostTerms:
    pof2 = 1 << lg(p)
    rem = p - pof2
    e = 1 if rem else 0
    blocks = sum(m + min(rem, m) for m in (1 << k for k in range(lg(pof2))))
    return CostTerms((lg(pof2) + 2 * e) * a, (e * (1 + (p - 1)) + blocks) * (n / p) * b, 0.0)


@register
class RecursiveDoublingAllgather(Algorithm):
    collective = "allgather"
    name = "recursive-doubling"
    summary = "lg p exchanges of doubling size; MPICH's power-of-two allgather (folded otherwise)"
    reference = "Thakur, Rabenseifner & Gropp, IJHPCA 2005; MPICH allgather_intra_recursive_doubling.c"

    def _steps(self, p, n, ppn):
        return rd_allgather_steps(p, n)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return rd_allgather_cost(p, n, a, b)
