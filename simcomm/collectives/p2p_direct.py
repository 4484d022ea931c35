"""Point-to-point: one message from the root (rank 0) to the next rank.

The Hockney model itself (Hockney 1994)::

    T = α + n·β
"""

from __future__ import annotations

from simcomm.collectives.base import Algorithm, CostTerms, Step, register


@register
class DirectP2P(Algorithm):
    collective = "p2p"
    name = "direct"
    summary = "one message of n bytes from the root to root+1"
    reference = "Hockney, Parallel Computing 20(3) 1994"
    rooted = True

    def _steps(self, p, n, ppn):
        return [Step.make([0], [1], n)]

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return CostTerms(a, n * b, 0.0)
