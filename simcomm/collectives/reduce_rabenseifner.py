"""Rabenseifner reduce: recursive-halving reduce-scatter + binomial gather to the root.

MPICH ``reduce_intra_reduce_scatter_gather``.  Ranks are taken relative to the
root.  For non-powers of two the *odd* ranks below ``2·rem`` first send their
whole buffer to ``rank-1`` (reduced there) and sit out, so the root (relative
rank 0) always stays in.  The ``p' = 2^⌊lg p⌋`` remaining ranks reduce-scatter
``n`` in p' blocks by recursive halving and gather the blocks to the root
along a binomial tree.  With ``e = [p not a power of 2]``::

    T = (2 lg p' + e)·α + (2(p'-1)/p' + e)·n·β + ((p'-1)/p' + e)·n·γ

matching Thakur et al. (2005)'s ``2 lg p·α + 2(p-1)/p·nβ + (p-1)/p·nγ`` for
``p = 2^k`` and MPICH's "2⌊lg p⌋+1" rounds otherwise.
"""

from __future__ import annotations

from simcomm.collectives._doubling import exchange, halving_sizes
from simcomm.collectives._patterns import binomial_up, fold_map, lg, pairs, remap
from simcomm.collectives.base import Algorithm, CostTerms, Step, register


@register
class RabenseifnerReduce(Algorithm):
    collective = "reduce"
    name = "rabenseifner"
    summary = "recursive-halving reduce-scatter + binomial gather; MPICH's long-message reduce"
    reference = "Rabenseifner, ICCS 2004; Thakur, Rabenseifner & Gropp, IJHPCA 2005; MPICH reduce_intra_reduce_scatter_gather.c"
    rooted = True

    def _steps(self, p, n, ppn):
        pof2, rem, real = fold_map(p, keep_odd=False)
        drop, keep = pairs(rem, keep_odd=False)
        out = [Step.make(drop, keep, n, n)] if rem else []
        out += exchange(real, *halving_sizes(pof2, n), reduce=True)
        out += remap(binomial_up(pof2, lambda k, s: (1 << k) * n / pof2, reduce=False), real)
        return out

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        pof2 = 1 << lg(p)
        e = 1 if p != pof2 else 0
        f = (pof2 - 1) / pof2
        return CostTerms((2 * lg(pof2) + e) * a, (2 * f + e) * n * b, (f + e) * n * g)
