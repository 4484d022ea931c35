"""Rabenseifner allreduce: recursive-halving reduce-scatter + recursive-doubling allgather.

MPICH ``allreduce_intra_reduce_scatter_allgather``.  Non-powers of two use the
same fold/unfold as recursive doubling (whole buffer, one extra step each
way).  With ``p' = 2^⌊lg p⌋`` and ``e = [p not a power of 2]``::

    T = (2 lg p' + 2e)·α + (2(p'-1)/p' + 2e)·n·β + ((p'-1)/p' + e)·n·γ

which is Thakur et al. (2005)'s ``2 lg p·α + 2(p-1)/p·nβ + (p-1)/p·nγ`` for
``p = 2^k``.
"""

from __future__ import annotations

from simcomm.collectives._doubling import doubling_sizes, exchange, halving_sizes
from simcomm.collectives._patterns import fold_map, lg, pairs
from simcomm.collectives.base import Algorithm, CostTerms, Step, register


@register
class RabenseifnerAllreduce(Algorithm):
    collective = "allreduce"
    name = "rabenseifner"
    summary = "recursive-halving reduce-scatter + recursive-doubling allgather; MPICH's long-message allreduce"
    reference = "Rabenseifner, ICCS 2004; Thakur, Rabenseifner & Gropp, IJHPCA 2005; MPICH allreduce_intra_reduce_scatter_allgather.c"

    def _steps(self, p, n, ppn):
        pof2, rem, real = fold_map(p, keep_odd=True)
        drop, keep = pairs(rem, keep_odd=True)
        out = [Step.make(drop, keep, n, n)] if rem else []
        out += exchange(real, *halving_sizes(pof2, n), reduce=True)
        out += exchange(real, *doubling_sizes(pof2, n), reduce=False)
        if rem:
            out.append(Step.make(keep, drop, n))
        return out

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        pof2 = 1 << lg(p)
        e = 1 if p != pof2 else 0
        f = (pof2 - 1) / pof2
        return CostTerms((2 * lg(pof2) + 2 * e) * a, (2 * f + 2 * e) * n * b, (f + e) * n * g)
