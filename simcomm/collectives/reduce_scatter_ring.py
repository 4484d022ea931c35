"""Ring reduce-scatter: p-1 steps, each rank passes one partially reduced block right.

``n`` is the total buffer; one block is ``n/p``.  Closed form (Thakur et al.
2005; HCCL ring table; NCCL's ring reduce-scatter)::

    T = (p-1)·α + (p-1)/p·n·β + (p-1)/p·n·γ
"""

from __future__ import annotations

from simcomm.collectives._patterns import ring
from simcomm.collectives.base import Algorithm, CostTerms, register


@register
class RingReduceScatter(Algorithm):
    collective = "reduce_scatter"
    name = "ring"
    summary = "p-1 steps passing one reduced block of n/p to the right neighbour"
    reference = "Thakur, Rabenseifner & Gropp, IJHPCA 2005; NCCL ring reduce-scatter"

    def _steps(self, p, n, ppn):
        return ring(p, n / p, True, p - 1)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        f = (p - 1) / p
        return CostTerms((p - 1) * a, f * n * b, f * n * g)
