"""Recursive-halving reduce-scatter (MPICH ``reduce_scatter_intra_recursive_halving``).

Non-powers of two are folded first: the even ranks below ``2·rem`` send the
whole buffer to ``rank+1`` (reduced there), so new rank ``j < rem`` owns two
result blocks and the others one.  Then, for mask m = p'/2 .. 1, new rank j
sends partner ``j ^ m`` the partial sums of the blocks owned by the partner's
half (an aligned window of m new ranks) and reduces what it gets back.
Finally the odd ranks below ``2·rem`` hand the even ones their block.  With
``w(m) = m + min(rem, m)`` blocks in the largest window and ``e = [rem > 0]``::

    T = e(α + n(β+γ)) + Σ_m [α + w(m)·(n/p)(β+γ)] + e(α + (n/p)β)

For ``p = 2^k`` this is ``lg p·α + (p-1)/p·n(β+γ)`` (Thakur et al. 2005).
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives._patterns import fold_map, lg, pairs
from simcomm.collectives.base import Algorithm, CostTerms, Step, register


def window_blocks(base: np.ndarray | int, m: int, rem: int):
    """Blocks owned by new ranks ``base .. base+m-1`` (new ranks below ``rem`` own two)."""
    return m + np.clip(rem - np.asarray(base), 0, m)


@register
class RecursiveHalvingReduceScatter(Algorithm):
    collective = "reduce_scatter"
    name = "recursive-halving"
    summary = "lg p exchanges of halving size; MPICH's short/medium commutative reduce-scatter"
    reference = "Thakur, Rabenseifner & Gropp, IJHPCA 2005; MPICH reduce_scatter_intra_recursive_halving.c"

    def _steps(self, p, n, ppn):
        pof2, rem, real = fold_map(p, keep_odd=True)
        drop, keep = pairs(rem, keep_odd=True)
        out = [Step.make(drop, keep, n, n)] if rem else []
        j = np.arange(pof2, dtype=np.int64)
        for k in range(lg(pof2)):
            m = pof2 >> (k + 1)
            q = j ^ m
            nb = window_blocks(q & ~(m - 1), m, rem) * (n / p)
            out.append(Step.make(real[j], real[q], nb, nb))
        if rem:
            out.append(Step.make(keep, drop, n / p))
        return out

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        pof2 = 1 << lg(p)
        rem = p - pof2
        e = 1 if rem else 0
        blocks = sum(m + min(rem, m) for m in (1 << k for k in range(lg(pof2))))
        moved = e * n + blocks * n / p
        return CostTerms((lg(pof2) + 2 * e) * a, (moved + e * n / p) * b, moved * g)
