"""Neighbor-exchange allgather (Open MPI ``ompi_coll_base_allgather_intra_neighborexchange``).

Chen et al.'s algorithm for even ``p``: in step 0 each even rank ``r`` swaps
its block with ``r + 1``; in steps ``i = 1 .. p/2 - 1`` every rank swaps the
two blocks it received last with its other neighbour (even ranks alternate
``r - 1``, ``r + 1``; odd ranks ``r + 1``, ``r - 1``).  With blocks of
``b = n/p``::

    T = (p/2)·α + (1 + 2(p/2 - 1))·b·β = (p/2)·α + (p-1)/p·n·β

For odd ``p`` Open MPI switches to the ring allgather, and so does this
module: ``T = (p-1)·α + (p-1)/p·n·β``.
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives._patterns import ring
from simcomm.collectives.base import Algorithm, CostTerms, Step, register


@register
class NeighborExchangeAllgather(Algorithm):
    collective = "allgather"
    name = "neighbor-exchange"
    summary = "p/2 steps swapping 1 then 2 blocks with alternating neighbours; ring for odd p (Open MPI)"
    reference = ("Chen, Yu, Huang, Ye & Wang, 2005; Open MPI ompi/mca/coll/base/coll_base_allgather.c "
                 "(allgather_intra_neighborexchange)")
    family = "openmpi"

    def _steps(self, p, n, ppn):
        if p % 2:
            return ring(p, n / p, False, p - 1)
        r = np.arange(p, dtype=np.int64)
        even = r % 2 == 0
        right = np.where(even, (r + 1) % p, (r - 1) % p)  # neighbor[0]
        left = np.where(even, (r - 1) % p, (r + 1) % p)   # neighbor[1]
        out = [Step.make(r, right, n / p)]
        for i in range(1, p // 2):
            out.append(Step.make(r, left if i % 2 else right, 2 * n / p))
        return out

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        if p % 2:
            return CostTerms((p - 1) * a, (p - 1) / p * n * b, 0.0)
        return CostTerms(p // 2 * a, (p - 1) / p * n * b, 0.0)
