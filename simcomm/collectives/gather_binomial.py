"""Binomial gather (MPICH ``gather_intra_binomial``).

Round k: every relative rank whose lowest set bit is 2^k sends the blocks of
its subtree, ``min(2^k, p - rank)`` blocks of ``n/p``, to ``rank - 2^k``.  Only
the last round can be partial, so with ``K = ⌈lg p⌉`` the rounds carry
``1, 2, ..., 2^(K-2), p - 2^(K-1)`` blocks, summing to ``p - 1``::

    T = ⌈lg p⌉·α + (p-1)/p·n·β
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives._patterns import binomial_up, ceil_lg
from simcomm.collectives.base import Algorithm, CostTerms, register


def binomial_gather_steps(p: int, n: float):
    return binomial_up(p, lambda k, s: np.minimum(1 << k, p - s) * (n / p), reduce=False)


@register
class BinomialGather(Algorithm):
    collective = "gather"
    name = "binomial"
    summary = "binomial tree, subtrees forward their blocks; ⌈lg p⌉ rounds"
    reference = "Thakur, Rabenseifner & Gropp, IJHPCA 2005; MPICH gather_intra_binomial.c"
    rooted = True

    def _steps(self, p, n, ppn):
        return binomial_gather_steps(p, n)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return CostTerms(ceil_lg(p) * a, (p - 1) / p * n * b, 0.0)
