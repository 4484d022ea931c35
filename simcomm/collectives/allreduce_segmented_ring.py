"""Open MPI's segmented ring allreduce (``ompi_coll_base_allreduce_intra_ring_segmented``).

The ring reduce-scatter runs in ``P`` phases, each a full ring reduce-scatter
over one ``1/P``-th of every block (``p - 1`` steps of ``n/(pP)``), and then
one ring allgather of whole blocks (``p - 1`` steps of ``n/p``).  Open MPI
sets ``P = ⌊count/(p·c)⌋`` plus one if the remainder is at least ``p`` elements
and more than half of ``p·c`` (``c = S/4`` elements per segment, 4-byte
elements assumed), and falls back to the plain ring when ``n < p·S``::

    T = (P + 1)(p - 1)·α + 2(p-1)/p·n·β + (p-1)/p·n·γ

So it is *not* the ring in the step model: each extra phase costs
``(p - 1)·α``.  Registered with ``S = 1 MiB``, the only segment size Open MPI
3.1's fixed rules use (4.1's rules pass ``S = 0``, which always falls back to
the plain ring).
"""

from __future__ import annotations

import math
from typing import ClassVar

from simcomm.collectives._patterns import ring
from simcomm.collectives.base import Algorithm, CostTerms, register

ELEMENT_BYTES = 4  # as simcomm.runtimes.mpi: the tool has no datatype


def phases(p: int, n: float, seg: int) -> int:
    """Open MPI's ``num_phases``; 0 means the plain ring runs."""
    count, segcount = n / ELEMENT_BYTES, seg // ELEMENT_BYTES
    if seg <= 0 or count < p * segcount:
        return 0
    full = p * segcount
    num = math.floor(count / full)
    rest = count - num * full
    return num + (1 if rest >= p and rest > full // 2 else 0)


@register
class SegmentedRingAllreduce(Algorithm):
    collective = "allreduce"
    name = "segmented-ring"
    summary = "ring reduce-scatter in phases of 1 MiB segments, then one ring allgather (Open MPI)"
    reference = "Open MPI ompi/mca/coll/base/coll_base_allreduce.c (allreduce_intra_ring_segmented)"
    family = "openmpi"
    segment: ClassVar[int] = 1 << 20

    def _steps(self, p, n, ppn):
        ph = phases(p, n, self.segment) or 1
        return ring(p, n / (p * ph), True, ph * (p - 1)) + ring(p, n / p, False, p - 1)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        ph = phases(p, n, self.segment) or 1
        f = (p - 1) / p
        return CostTerms((ph + 1) * (p - 1) * a, 2 * f * n * b, f * n * g)
