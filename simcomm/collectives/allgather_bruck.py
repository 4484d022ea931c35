"""Bruck allgather (MPICH ``allgather_intra_brucks``), any p in ⌈lg p⌉ rounds.

Round k: rank r sends the ``c_k = min(2^k, p - 2^k)`` blocks it holds to
``rank - 2^k`` and receives as many from ``rank + 2^k``; a local rotation
(free here) puts the blocks in order.  ``Σ c_k = p - 1``::

    T = ⌈lg p⌉·α + (p-1)/p·n·β
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives._patterns import ceil_lg
from simcomm.collectives.base import Algorithm, CostTerms, Step, register


@register
class BruckAllgather(Algorithm):
    collective = "allgather"
    name = "bruck"
    summary = "⌈lg p⌉ rounds at distance 2^k for any p; MPICH's short-message non-power-of-two allgather"
    reference = "Bruck et al., IEEE TPDS 8(11) 1997; MPICH allgather_intra_brucks.c"

    def _steps(self, p, n, ppn):
        r = np.arange(p, dtype=np.int64)
        return [Step.make(r, (r - (1 << k)) % p, min(1 << k, p - (1 << k)) * n / p)
                for k in range(ceil_lg(p))]

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return CostTerms(ceil_lg(p) * a, (p - 1) / p * n * b, 0.0)
