"""Binomial scatter (MPICH ``scatter_intra_binomial``; also bcast's scatter phase).

Round for mask m (from 2^(⌈lg p⌉-1) down to 1): every relative rank that is a
multiple of 2m sends ``rank + m`` the blocks of that rank's subtree,
``min(m, p - rank - m)`` blocks of ``n/p``.  Only the first round can be
partial (``p - 2^(K-1)`` blocks), the others carry ``2^(K-2), ..., 1``::

    T = ⌈lg p⌉·α + (p-1)/p·n·β
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives._patterns import binomial_down, ceil_lg
from simcomm.collectives.base import Algorithm, CostTerms, register


def binomial_scatter_steps(p: int, n: float):
    return binomial_down(p, lambda m, recv: np.minimum(m, p - recv) * (n / p))


def binomial_scatter_cost(p: int, n: float, a: float, b: float) -> CostTerms:
    return CostTerms(ceil_lg(p) * a, (p - 1) / p * n * b, 0.0)


@register
class BinomialScatter(Algorithm):
    collective = "scatter"
    name = "binomial"
    summary = "binomial tree, the root hands each subtree its blocks; ⌈lg p⌉ rounds"
    reference = "Thakur, Rabenseifner & Gropp, IJHPCA 2005; MPICH scatter_intra_binomial.c"
    rooted = True

    def _steps(self, p, n, ppn):
        return binomial_scatter_steps(p, n)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return binomial_scatter_cost(p, n, a, b)
