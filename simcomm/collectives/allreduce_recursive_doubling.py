"""Recursive-doubling allreduce (MPICH ``allreduce_intra_recursive_doubling``).

With ``p' = 2^⌊lg p⌋`` and ``rem = p - p'``: the even ranks below ``2·rem``
first send their whole buffer to ``rank+1``, which reduces it (fold); the
``p'`` remaining ranks exchange and reduce full buffers with partners at
distance 1, 2, 4, ...; finally the odd ranks below ``2·rem`` return the result
to ``rank-1`` (unfold).  Closed form (Thakur et al. 2005, with the fold)::

    T = (lg p' + 2e)·α + (lg p' + 2e)·n·β + (lg p' + e)·n·γ,   e = [p not a power of 2]
"""

from __future__ import annotations

from simcomm.collectives._doubling import exchange
from simcomm.collectives._patterns import fold_map, lg, pairs
from simcomm.collectives.base import Algorithm, CostTerms, Step, register


@register
class RecursiveDoublingAllreduce(Algorithm):
    collective = "allreduce"
    name = "recursive-doubling"
    summary = "lg p exchanges of the whole buffer; MPICH's short-message allreduce"
    reference = "Thakur, Rabenseifner & Gropp, IJHPCA 19(1) 2005; MPICH allreduce_intra_recursive_doubling.c"

    def _steps(self, p, n, ppn):
        pof2, rem, real = fold_map(p, keep_odd=True)
        drop, keep = pairs(rem, keep_odd=True)
        out = [Step.make(drop, keep, n, n)] if rem else []
        out += exchange(real, [1 << k for k in range(lg(pof2))], [n] * lg(pof2), reduce=True)
        if rem:
            out.append(Step.make(keep, drop, n))
        return out

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        k = lg(p)
        e = 1 if p & (p - 1) else 0
        return CostTerms((k + 2 * e) * a, (k + 2 * e) * n * b, (k + e) * n * g)
