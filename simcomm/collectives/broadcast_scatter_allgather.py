"""Van de Geijn broadcast: binomial scatter then ring allgather.

MPICH ``bcast_intra_scatter_ring_allgather``: the root scatters ``n`` in p
blocks down a binomial tree (⌈lg p⌉ rounds, ``(p-1)/p·n`` on the critical
path) and a ring allgather (p-1 steps of ``n/p``) reassembles it
(Barnett, van de Geijn et al. 1994; Thakur et al. 2005)::

    T = (⌈lg p⌉ + p - 1)·α + 2(p-1)/p·n·β
"""

from __future__ import annotations

from simcomm.collectives._patterns import ceil_lg, ring
from simcomm.collectives.base import Algorithm, CostTerms, register
from simcomm.collectives.scatter_binomial import binomial_scatter_steps


@register
class ScatterAllgatherBroadcast(Algorithm):
    collective = "broadcast"
    name = "scatter-allgather"
    summary = "binomial scatter + ring allgather (van de Geijn); MPICH's long-message bcast"
    reference = "Barnett et al., SHPCC 1994; Thakur, Rabenseifner & Gropp, IJHPCA 2005; MPICH bcast_intra_scatter_ring_allgather.c"
    rooted = True

    def _steps(self, p, n, ppn):
        return binomial_scatter_steps(p, n) + ring(p, n / p, False, p - 1)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return CostTerms((ceil_lg(p) + p - 1) * a, 2 * (p - 1) / p * n * b, 0.0)
