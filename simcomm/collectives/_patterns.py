"""Schedule building blocks shared by the algorithm modules (vectorised with numpy).

Every helper returns plain :class:`~simcomm.collectives.base.Step` lists on
group-local ranks, so an algorithm module composes them and the closed forms
stay next to the algorithm that owns them.  Blocks are fractional: with ``p``
ranks one block is ``nbytes / p`` bytes even when ``p`` does not divide
``nbytes``, the usual convention of the α-β literature (Thakur et al. 2005).
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives.base import Step

__all__ = [
    "floor_pof2", "ceil_lg", "lg", "ring", "remap", "fold_map", "pairs",
    "binomial_up", "binomial_down", "bits_set_count",
]


def lg(x: int) -> int:
    """log2 of a power of two (or floor log2 of anything ≥ 1)."""
    return int(x).bit_length() - 1


def floor_pof2(p: int) -> int:
    """Largest power of two ≤ p (MPICH's ``pof2``)."""
    return 1 << lg(p)


def ceil_lg(p: int) -> int:
    """⌈log2 p⌉: rounds of a binomial tree or of Bruck's algorithm."""
    return (int(p) - 1).bit_length() if p > 1 else 0


def ring(p: int, nbytes: float, reduce: bool, repeat: int, ranks: np.ndarray | None = None) -> list[Step]:
    """``repeat`` identical steps in which rank i sends ``nbytes`` to rank i+1 (mod p).

    ``ranks`` optionally lists several disjoint rings as rows of a 2-D array
    (ring order along each row), all advancing in the same steps.
    """
    if repeat < 1 or p < 2:
        return []
    if ranks is None:
        ranks = np.arange(p, dtype=np.int64)[None, :]
    src = ranks.ravel()
    dst = np.roll(ranks, -1, axis=1).ravel()
    return [Step.make(src, dst, nbytes, nbytes if reduce else 0.0, repeat=repeat)]


def remap(steps: list[Step], perm: np.ndarray) -> list[Step]:
    """Rename ranks: index ``i`` of a schedule becomes ``perm[i]``."""
    return [Step(perm[s.src], perm[s.dst], s.nbytes, s.reduce, s.repeat) for s in steps]


def fold_map(p: int, keep_odd: bool = True) -> tuple[int, int, np.ndarray]:
    """MPICH's non-power-of-two fold: ``(pof2, rem, real)``.

    Of the first ``2·rem`` ranks only the odd ones (``keep_odd``; allreduce)
    or the even ones (reduce) stay; ``real[j]`` is the rank acting as new
    rank ``j`` of the power-of-two group.
    """
    pof2 = floor_pof2(p)
    rem = p - pof2
    j = np.arange(pof2, dtype=np.int64)
    real = np.where(j < rem, 2 * j + (1 if keep_odd else 0), j + rem)
    return pof2, rem, real


def pairs(rem: int, keep_odd: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(dropped, kept) rank pairs of the fold, as two arrays of length ``rem``."""
    i = np.arange(rem, dtype=np.int64)
    even, odd = 2 * i, 2 * i + 1
    return (even, odd) if keep_odd else (odd, even)


def bits_set_count(p: int, k: int) -> int:
    """How many of 0..p-1 have bit ``k`` set (blocks moved in Bruck alltoall round k)."""
    full, part = divmod(p, 1 << (k + 1))
    return full * (1 << k) + max(0, part - (1 << k))


def binomial_up(p: int, size_of, reduce: bool) -> list[Step]:
    """Rounds of a binomial tree towards relative rank 0 (reduce, gather).

    Round k: every rank whose lowest set bit is ``2^k`` sends to ``rank - 2^k``;
    ``size_of(k, senders)`` gives the bytes each sender sends.
    """
    out = []
    r = np.arange(p, dtype=np.int64)
    for k in range(ceil_lg(p)):
        m = 1 << k
        senders = r[(r & (2 * m - 1)) == m]
        nb = size_of(k, senders)
        out.append(Step.make(senders, senders - m, nb, nb if reduce else 0.0))
    return out


def binomial_down(p: int, size_of) -> list[Step]:
    """Rounds of a binomial tree away from relative rank 0 (broadcast, scatter).

    Round for mask ``m`` (from the top down): every rank that is a multiple of
    ``2m`` sends to ``rank + m`` if that exists; ``size_of(m, receivers)``
    gives the bytes.
    """
    out = []
    r = np.arange(p, dtype=np.int64)
    for k in reversed(range(ceil_lg(p))):
        m = 1 << k
        senders = r[((r % (2 * m)) == 0) & (r + m < p)]
        out.append(Step.make(senders, senders + m, size_of(m, senders + m)))
    return out
