"""Broadcast as binomial scatter + recursive-doubling allgather.

MPICH ``bcast_intra_scatter_recursive_doubling_allgather`` (medium messages,
power-of-two p)::

    T = 2 lg p·α + 2(p-1)/p·n·β

For other p the allgather phase is our folded recursive doubling (see
:mod:`simcomm.collectives.allgather_recursive_doubling`), so the cost is the
binomial-scatter cost plus that allgather's cost.
"""

from __future__ import annotations

from simcomm.collectives.allgather_recursive_doubling import rd_allgather_cost, rd_allgather_steps
from simcomm.collectives.base import Algorithm, CostTerms, register
from simcomm.collectives.scatter_binomial import binomial_scatter_cost, binomial_scatter_steps


@register
class ScatterRecursiveDoublingBroadcast(Algorithm):
    collective = "broadcast"
    name = "scatter-recursive-doubling"
    summary = "binomial scatter + recursive-doubling allgather; MPICH's medium-message bcast"
    reference = "Thakur, Rabenseifner & Gropp, IJHPCA 2005; MPICH bcast_intra_scatter_recursive_doubling_allgather.c"
    rooted = True

    def _steps(self, p, n, ppn):
        return binomial_scatter_steps(p, n) + rd_allgather_steps(p, n)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        s, t = binomial_scatter_cost(p, n, a, b), rd_allgather_cost(p, n, a, b)
        return CostTerms(s.latency + t.latency, s.bandwidth + t.bandwidth, 0.0)
