"""Synchronised linear gather (Open MPI ``ompi_coll_base_gather_intra_linear_sync``).

For each rank ``i`` in turn the root sends a zero-byte "go" message, then
``i`` sends the first ``f`` bytes of its block (the root waits for them
before moving on) and the remaining ``q = b - f`` bytes, which the root
collects at the end, so they travel while the root deals with rank ``i+1``.
With blocks of ``b = n/p`` and first segment ``f = min(S, b)`` (``S = 0``:
the whole block, as Open MPI 4.1's fixed rules run it)::

    T = (p-1)·α                              (go messages)
      + (α + f·β) + (p-2)·(α + max(f, q)·β)  (first segments; rank i-1's rest overlaps rank i's first)
      + [q > 0]·(α + q·β)                    (the last rank's rest)

So ``S = 0`` gives ``T = (p-1)·(2α + b·β)``.  The variants with ``S`` in the
name are Open MPI 3.1's choices (1 KiB for blocks over 6000 B, 32 KiB over
92160 B).
"""

from __future__ import annotations

from typing import ClassVar

from simcomm.collectives.base import Algorithm, CostTerms, Step, register, register_variant


@register
class LinearSyncGather(Algorithm):
    collective = "gather"
    name = "linear-sync"
    summary = "root asks each rank in turn (0-byte message), then receives its block (Open MPI linear_sync)"
    reference = "Open MPI ompi/mca/coll/base/coll_base_gather.c (ompi_coll_base_gather_intra_linear_sync)"
    family = "openmpi"
    rooted = True
    #: first-segment size in bytes; 0 sends the whole block at once
    segment: ClassVar[int] = 0

    def _split(self, p: int, n: float) -> tuple[float, float]:
        b = n / p
        f = b if self.segment <= 0 or self.segment >= b else float(self.segment)
        return f, b - f

    def _steps(self, p, n, ppn):
        f, q = self._split(p, n)
        out = []
        for i in range(1, p):
            out.append(Step.make([0], [i], 0.0))
            src, nb = [i], [f]
            if q > 0 and i > 1:  # rank i-1's second segment overlaps rank i's first one
                src, nb = [i, i - 1], [f, q]
            out.append(Step.make(src, [0] * len(src), nb))
        if q > 0:
            out.append(Step.make([p - 1], [0], q))
        return out

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        f, q = self._split(p, n)
        lat = (p - 1) * a + (p - 1) * a + (a if q > 0 else 0.0)
        bw = f + (p - 2) * max(f, q) + q
        return CostTerms(lat, bw * b, 0.0)


for _kib in (1, 32):
    register_variant(LinearSyncGather, f"linear-sync-{_kib}k", segment=_kib * 1024,
                     summary=f"synchronised linear gather, {_kib} KiB first segment (Open MPI linear_sync)")
