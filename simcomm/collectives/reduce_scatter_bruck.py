"""Bruck-style reduce-scatter: the transpose of Bruck's allgather.

Rounds k = ⌈lg p⌉-1 .. 0: rank r sends ``rank + 2^k`` the partial sums of
``c_k = min(2^k, p - 2^k)`` blocks and reduces the ``c_k`` blocks it gets
from ``rank - 2^k``.  Running Bruck's allgather backwards with reductions is
the reduce-scatter/allgather duality of Chan et al. (2007); Bruck et al.
(1997) give the allgather.  Since ``Σ c_k = p - 1`` for any p::

    T = ⌈lg p⌉·α + (p-1)/p·n·(β + γ)
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives._patterns import ceil_lg
from simcomm.collectives.base import Algorithm, CostTerms, Step, register


@register
class BruckReduceScatter(Algorithm):
    collective = "reduce_scatter"
    name = "bruck"
    summary = "⌈lg p⌉ rounds at distance 2^k, any p; dual of Bruck's allgather"
    reference = "Bruck et al., IEEE TPDS 8(11) 1997; Chan et al., CCPE 19 2007 (duality)"

    def _steps(self, p, n, ppn):
        r = np.arange(p, dtype=np.int64)
        out = []
        for k in reversed(range(ceil_lg(p))):
            nb = min(1 << k, p - (1 << k)) * n / p
            out.append(Step.make(r, (r + (1 << k)) % p, nb, nb))
        return out

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        f = (p - 1) / p
        return CostTerms(ceil_lg(p) * a, f * n * b, f * n * g)
