"""Binomial allreduce: binomial-tree reduce to rank 0, then binomial broadcast.

The textbook composition of the two MPICH binomial trees (the
``MPIR_Allreduce`` fallback of early MPICH)::

    T = 2⌈lg p⌉·α + 2⌈lg p⌉·n·β + ⌈lg p⌉·n·γ
"""

from __future__ import annotations

from simcomm.collectives._patterns import ceil_lg
from simcomm.collectives.base import Algorithm, CostTerms, register
from simcomm.collectives.broadcast_binomial import binomial_bcast_steps
from simcomm.collectives.reduce_binomial import binomial_reduce_steps


@register
class BinomialAllreduce(Algorithm):
    collective = "allreduce"
    name = "binomial"
    summary = "binomial reduce to rank 0 then binomial broadcast, 2⌈lg p⌉ rounds of the whole buffer"
    reference = "Thakur, Rabenseifner & Gropp, IJHPCA 2005 (binomial reduce + bcast)"

    def _steps(self, p, n, ppn):
        return binomial_reduce_steps(p, n) + binomial_bcast_steps(p, n)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        k = ceil_lg(p)
        return CostTerms(2 * k * a, 2 * k * n * b, k * n * g)
