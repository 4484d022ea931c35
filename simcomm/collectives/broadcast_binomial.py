"""Binomial-tree broadcast (MPICH ``bcast_intra_binomial``).

Round for mask m = 2^(⌈lg p⌉-1) .. 1: every relative rank that is a multiple
of 2m and already holds the data sends the whole buffer to ``rank + m``.
Closed form (Thakur et al. 2005)::

    T = ⌈lg p⌉·(α + n·β)
"""

from __future__ import annotations

from simcomm.collectives._patterns import binomial_down, ceil_lg
from simcomm.collectives.base import Algorithm, CostTerms, register


def binomial_bcast_steps(p: int, n: float):
    """The broadcast rounds from relative rank 0 (also used by binomial allreduce)."""
    return binomial_down(p, lambda m, receivers: n)


@register
class BinomialBroadcast(Algorithm):
    collective = "broadcast"
    name = "binomial"
    summary = "binomial tree, ⌈lg p⌉ rounds of the whole buffer; MPICH's short-message bcast"
    reference = "Thakur, Rabenseifner & Gropp, IJHPCA 2005; MPICH bcast_intra_binomial.c"
    rooted = True

    def _steps(self, p, n, ppn):
        return binomial_bcast_steps(p, n)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        k = ceil_lg(p)
        return CostTerms(k * a, k * n * b, 0.0)
