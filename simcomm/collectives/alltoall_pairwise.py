"""Pairwise-exchange alltoall (MPICH ``alltoall_intra_pairwise``).

``n`` is the total data one rank sends, including its own block, so one
block is ``n/p``.  In step i = 1..p-1 rank r sends its block for
``r ^ i`` (p a power of two) or ``r + i mod p`` (otherwise)::

    T = (p-1)·α + (p-1)/p·n·β
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives.base import Algorithm, CostTerms, Step, register


@register
class PairwiseAlltoall(Algorithm):
    collective = "alltoall"
    name = "pairwise"
    summary = "p-1 steps, one block of n/p to a different peer each step; MPICH's long-message alltoall"
    reference = "Thakur, Rabenseifner & Gropp, IJHPCA 2005; MPICH alltoall_intra_pairwise.c"

    def _steps(self, p, n, ppn):
        r = np.arange(p, dtype=np.int64)
        pof2 = (p & (p - 1)) == 0
        return [Step.make(r, (r ^ i) if pof2 else (r + i) % p, n / p) for i in range(1, p)]

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return CostTerms((p - 1) * a, (p - 1) / p * n * b, 0.0)
