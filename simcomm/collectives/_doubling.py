"""Recursive doubling / halving among a power-of-two group, with MPICH's fold.

Shared by recursive-doubling allreduce, Rabenseifner allreduce and reduce,
recursive-halving reduce-scatter and recursive-doubling allgather.  Ranks
here are *new* ranks ``0..pof2-1`` of the power-of-two group; ``real`` (from
:func:`~simcomm.collectives._patterns.fold_map`) maps them back.
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives._patterns import lg
from simcomm.collectives.base import Step

__all__ = ["exchange", "halving_sizes", "doubling_sizes"]


def exchange(real: np.ndarray, masks, sizes, reduce: bool) -> list[Step]:
    """One step per mask: new rank j swaps ``sizes[i]`` bytes with ``j ^ mask``.

    ``sizes[i]`` is either a scalar or an array indexed by new rank (the bytes
    that new rank sends).
    """
    j = np.arange(len(real), dtype=np.int64)
    out = []
    for m, sz in zip(masks, sizes, strict=False):
        nb = np.broadcast_to(np.asarray(sz, dtype=float), j.shape)
        out.append(Step.make(real[j], real[j ^ m], nb, nb if reduce else 0.0))
    return out


def halving_sizes(pof2: int, n: float) -> tuple[list[int], list[float]]:
    """Recursive halving over ``pof2`` even blocks: masks pof2/2..1, sizes n/2..n/pof2."""
    masks = [pof2 >> (k + 1) for k in range(lg(pof2))]
    return masks, [n * m / pof2 for m in masks]


def doubling_sizes(pof2: int, n: float) -> tuple[list[int], list[float]]:
    """Recursive doubling of ``pof2`` even blocks: masks 1..pof2/2, sizes n/pof2..n/2."""
    masks = [1 << k for k in range(lg(pof2))]
    return masks, [n * m / pof2 for m in masks]
