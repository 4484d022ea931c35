"""Open MPI's scatter + recursive-doubling broadcast (``ompi_coll_base_bcast_intra_scatter_allgather``).

A binomial scatter of ``p`` blocks of ``b = n/p`` (``⌈lg p⌉`` rounds,
``(p-1)·b`` on the critical path, as ``scatter/binomial``), then an
allgather by recursive doubling on relative ranks: for mask ``m = 1, 2, 4,
… < p`` every ``v`` with ``v ^ m < p`` swaps everything it holds (the blocks
of its aligned group of ``m``) with ``v ^ m``.  For ``p`` not a power of two
the last group of ``2m`` ranks is cut short: only ``a_m = p - G_m - m`` ranks
of its upper half exist (``G_m = 2m·⌊(p-1)/2m⌋``), and if ``1 ≤ a_m < m`` the
lower-half ranks without a partner get those ``a_m`` blocks by recursive
halving inside the lower half – one step for each ``rh = m/2, m/4, …, 1``
with ``rh > a_m/2``.  With ``K = ⌈lg p⌉``::

    T = K·α + (p-1)·b·β                                   (scatter)
      + Σ_{m=2^i<p} (α + m·b·β)                           (exchanges)
      + Σ_m Σ_{rh ≤ m/2, 2rh > a_m, 1 ≤ a_m < m} (α + a_m·b·β)   (halving fix-ups)

For ``p = 2^K`` this is ``2K·α + 2(p-1)/p·n·β``, the same as
``broadcast/scatter-recursive-doubling``; the non-power-of-two handling is
Open MPI's (MPICH-style folding is what the other module does).  Open MPI
falls back to the linear broadcast when ``count < p``; ``auto`` applies that.
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives._patterns import ceil_lg
from simcomm.collectives.base import Algorithm, CostTerms, Step, register
from simcomm.collectives.scatter_binomial import binomial_scatter_steps


def _masks(p: int):
    m = 1
    while m < p:
        yield m
        m <<= 1


def _fixup(p: int, m: int) -> tuple[int, int]:
    """``(G, a)``: start of the last group of ``2m`` ranks and how many of its upper half exist."""
    g = (p - 1) // (2 * m) * (2 * m)
    return g, p - g - m


def allgather_plan(p: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The allgather phase as ``(src, dst, blocks)`` per step, following the C code's conditions."""
    v = np.arange(p, dtype=np.int64)
    held = np.ones(p)  # blocks each rank holds after the scatter
    plan = []
    for m in _masks(p):
        peer = v ^ m
        ok = peer < p
        plan.append((v[ok], peer[ok], held[v[ok]].copy()))
        held[v[ok]] += held[peer[ok]]
        g, a = _fixup(p, m)
        if not 1 <= a < m:
            continue
        low = v[g:g + m]
        rh = m >> 1
        while rh:
            root = low // (2 * rh) * (2 * rh)
            send = ((low ^ rh) > low) & (low < root + a) & ((low ^ rh) >= root + a)
            if send.any():
                s = low[send]
                plan.append((s, s ^ rh, np.full(len(s), float(a))))
                held[s ^ rh] += a
            rh >>= 1
    return plan


@register
class OmpiScatterRecursiveDoublingBroadcast(Algorithm):
    collective = "broadcast"
    name = "scatter-recursive-doubling-ompi"
    summary = "binomial scatter + recursive-doubling allgather with Open MPI's non-power-of-two fix-up"
    reference = "Open MPI ompi/mca/coll/base/coll_base_bcast.c (bcast_intra_scatter_allgather)"
    family = "openmpi"
    rooted = True

    def _steps(self, p, n, ppn):
        b = n / p
        return binomial_scatter_steps(p, n) + [Step.make(s, d, k * b) for s, d, k in allgather_plan(p)]

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        blk = n / p
        steps, blocks = ceil_lg(p), p - 1.0
        for m in _masks(p):
            steps, blocks = steps + 1, blocks + m
            _, am = _fixup(p, m)
            if 1 <= am < m:
                fix = sum(1 for i in range(m.bit_length() - 1) if 2 * (1 << i) > am)
                steps, blocks = steps + fix, blocks + fix * am
        return CostTerms(steps * a, blocks * blk * b, 0.0)
