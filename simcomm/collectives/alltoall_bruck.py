"""Bruck alltoall (MPICH ``alltoall_intra_brucks``), for short messages.

After a local rotation, round k = 0..⌈lg p⌉-1 sends to ``rank + 2^k`` every
block whose index has bit k set, ``c_k = #{j < p : j & 2^k}`` blocks of
``n/p``; for ``p = 2^k``, ``c_k = p/2`` (Bruck et al. 1997; Thakur et al. 2005)::

    T = ⌈lg p⌉·α + Σ_k c_k·(n/p)·β        (= lg p·α + (lg p / 2)·n·β for p = 2^k)
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives._patterns import bits_set_count, ceil_lg
from simcomm.collectives.base import Algorithm, CostTerms, Step, register


@register
class BruckAlltoall(Algorithm):
    collective = "alltoall"
    name = "bruck"
    summary = "⌈lg p⌉ rounds, round k forwards the blocks with bit k set; MPICH's short-message alltoall"
    reference = "Bruck et al., IEEE TPDS 8(11) 1997; MPICH alltoall_intra_brucks.c"

    def _steps(self, p, n, ppn):
        r = np.arange(p, dtype=np.int64)
        return [Step.make(r, (r + (1 << k)) % p, bits_set_count(p, k) * n / p) for k in range(ceil_lg(p))]

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        blocks = sum(bits_set_count(p, k) for k in range(ceil_lg(p)))
        return CostTerms(ceil_lg(p) * a, blocks * n / p * b, 0.0)
