"""Butterfly reduce-scatter (Open MPI ``ompi_coll_base_reduce_scatter_intra_butterfly``, Träff 2005).

Non-powers of two fold first as MPICH does (the even ranks below ``2·rem``
send their whole buffer to ``rank + 1``, which reduces it).  The ``p'``
remaining ranks then halve the vector with the distance *doubling*: for mask
``m = 1, 2, …, p'/2`` new rank ``j`` keeps one half of its window and sends
the other (``p'/2m`` of the ``p'`` virtual blocks; a virtual block of a new
rank below ``rem`` is two real blocks) to ``j ^ m``, which reduces it.  The
results end up bit-reversed, so a final permutation step sends each block to
its owner: first the blocks of the folded-away ranks (one step), then a swap
with the mirror rank (one step, when ``p' ≥ 4``).  With ``b = n/p``,
``e = [p ≠ p']`` and ``w(x) = x + min(rem, x)``::

    T = e·(α + n·β + n·γ)
      + Σ_{x = p'/2, …, 2, 1} (α + w(x)·b·β + w(x)·b·γ)
      + e·(α + b·β) + [p' ≥ 4]·(α + b·β)

That is ``reduce_scatter/recursive-halving`` plus the permutation step.
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives._patterns import fold_map, lg, pairs
from simcomm.collectives.base import Algorithm, CostTerms, Step, register


def mirror(j: np.ndarray, bits: int) -> np.ndarray:
    """Bit reversal of ``j`` over ``bits`` bits (``ompi_mirror_perm``)."""
    out = np.zeros_like(j)
    for i in range(bits):
        out |= ((j >> i) & 1) << (bits - 1 - i)
    return out


@register
class ButterflyReduceScatter(Algorithm):
    collective = "reduce_scatter"
    name = "butterfly"
    summary = "fold, recursive halving with distance doubling, then a mirror permutation (Open MPI butterfly)"
    reference = ("Träff, EuroPVM/MPI 2005; Open MPI ompi/mca/coll/base/coll_base_reduce_scatter.c "
                 "(reduce_scatter_intra_butterfly)")
    family = "openmpi"

    def _steps(self, p, n, ppn):
        pof2, rem, real = fold_map(p, keep_odd=True)
        b = n / p
        out = []
        if rem:
            drop, keep = pairs(rem, keep_odd=True)
            out.append(Step.make(drop, keep, n, n))
        j = np.arange(pof2, dtype=np.int64)
        weight = np.where(j < rem, 2.0, 1.0)  # real blocks per virtual block
        cum = np.concatenate([[0.0], np.cumsum(weight)])
        send_index = np.zeros(pof2, dtype=np.int64)
        recv_index = np.zeros(pof2, dtype=np.int64)
        nblocks = pof2
        m = 1
        while m < pof2:
            nblocks //= 2
            low = (j & m) == 0
            send_index = np.where(low, send_index + nblocks, send_index)
            recv_index = np.where(low, recv_index, recv_index + nblocks)
            nb = (cum[send_index + nblocks] - cum[send_index]) * b
            out.append(Step.make(real[j], real[j ^ m], nb, nb))
            send_index = recv_index.copy()
            m <<= 1
        peer = mirror(j, lg(pof2))
        if rem:  # blocks of the folded-away (even) ranks go to them first
            owner = peer < rem
            out.append(Step.make(real[j[owner]], 2 * peer[owner], b))
        swap = peer != j
        if swap.any():
            out.append(Step.make(real[j[swap]], real[peer[swap]], b))
        return out

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        pof2 = 1 << lg(p)
        rem = p - pof2
        e = 1 if rem else 0
        blk = n / p
        halving = [x + min(rem, x) for x in (pof2 >> (i + 1) for i in range(lg(pof2)))]
        tail = e + (1 if pof2 >= 4 else 0)
        lat = (e + len(halving) + tail) * a
        bw = (e * n + sum(halving) * blk + tail * blk) * b
        red = (e * n + sum(halving) * blk) * g
        return CostTerms(lat, bw, red)
