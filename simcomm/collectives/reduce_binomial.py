"""Binomial-tree reduce (MPICH ``reduce_intra_binomial``).

Round k (k = 0..⌈lg p⌉-1): every relative rank whose lowest set bit is 2^k
sends its partial result (the whole buffer) to ``rank - 2^k``, which reduces
it.  Closed form (Thakur et al. 2005)::

    T = ⌈lg p⌉·(α + n·β + n·γ)
"""

from __future__ import annotations

from simcomm.collectives._patterns import binomial_up, ceil_lg
from simcomm.collectives.base import Algorithm, CostTerms, register


def binomial_reduce_steps(p: int, n: float):
    """The reduce rounds towards relative rank 0 (also used by binomial allreduce)."""
    return binomial_up(p, lambda k, senders: n, reduce=True)


@register
class BinomialReduce(Algorithm):
    collective = "reduce"
    name = "binomial"
    summary = "binomial tree, ⌈lg p⌉ rounds of the whole buffer; MPICH's short-message reduce"
    reference = "Thakur, Rabenseifner & Gropp, IJHPCA 2005; MPICH reduce_intra_binomial.c"
    rooted = True

    def _steps(self, p, n, ppn):
        return binomial_reduce_steps(p, n)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        k = ceil_lg(p)
        return CostTerms(k * a, k * n * b, k * n * g)
