"""Ring allreduce: a ring reduce-scatter followed by a ring allgather.

Each of the ``2(p-1)`` steps moves one block of ``n/p`` bytes to the right
neighbour; the first ``p-1`` steps also reduce it.  Closed form (Patarasuk &
Yuan 2009; HCCL ring table; MPICH pairwise reduce-scatter + ring allgather)::

    T = 2(p-1)·α + 2(p-1)/p·n·β + (p-1)/p·n·γ
"""

from __future__ import annotations

from simcomm.collectives._patterns import ring
from simcomm.collectives.base import Algorithm, CostTerms, register


@register
class RingAllreduce(Algorithm):
    collective = "allreduce"
    name = "ring"
    summary = "ring reduce-scatter then ring allgather, 2(p-1) steps of n/p"
    reference = "Patarasuk & Yuan, JPDC 69(2) 2009; Thakur, Rabenseifner & Gropp, IJHPCA 2005"

    def _steps(self, p, n, ppn):
        return ring(p, n / p, True, p - 1) + ring(p, n / p, False, p - 1)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        f = (p - 1) / p
        return CostTerms(2 * (p - 1) * a, 2 * f * n * b, f * n * g)
