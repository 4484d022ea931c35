"""Pairwise-exchange reduce-scatter (MPICH ``reduce_scatter_block_intra_pairwise``).

In step i = 1..p-1 rank r sends block ``(r+i) mod p`` (``n/p`` bytes) to rank
``r+i`` and reduces the block it receives from ``r-i``::

    T = (p-1)·α + (p-1)/p·n·β + (p-1)/p·n·γ

Same cost as the ring on a full mesh, but every step talks to a different peer.
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives.base import Algorithm, CostTerms, Step, register


def shifted_steps(p: int, block: float, reduce: bool) -> list[Step]:
    """Step i = 1..p-1: rank r sends ``block`` bytes to ``(r + i) mod p``."""
    r = np.arange(p, dtype=np.int64)
    return [Step.make(r, (r + i) % p, block, block if reduce else 0.0) for i in range(1, p)]


@register
class PairwiseReduceScatter(Algorithm):
    collective = "reduce_scatter"
    name = "pairwise"
    summary = "p-1 steps, step i sends block r+i to rank r+i; MPICH's long-message reduce-scatter"
    reference = "Thakur, Rabenseifner & Gropp, IJHPCA 2005; MPICH reduce_scatter_block_intra_pairwise.c"

    def _steps(self, p, n, ppn):
        return shifted_steps(p, n / p, True)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        f = (p - 1) / p
        return CostTerms((p - 1) * a, f * n * b, f * n * g)
