"""Ring allgather (MPICH ``allgather_intra_ring``): p-1 steps of one block to the right.

``n`` is the total gathered size; one block is ``n/p``::

    T = (p-1)·α + (p-1)/p·n·β
"""

from __future__ import annotations

from simcomm.collectives._patterns import ring
from simcomm.collectives.base import Algorithm, CostTerms, register


@register
class RingAllgather(Algorithm):
    collective = "allgather"
    name = "ring"
    summary = "p-1 steps passing one block of n/p to the right; MPICH's long-message allgather"
    reference = "Thakur, Rabenseifner & Gropp, IJHPCA 2005; MPICH allgather_intra_ring.c"

    def _steps(self, p, n, ppn):
        return ring(p, n / p, False, p - 1)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return CostTerms((p - 1) * a, (p - 1) / p * n * b, 0.0)
