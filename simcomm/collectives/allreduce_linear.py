"""Linear allreduce (Open MPI ``ompi_coll_base_allreduce_intra_basic_linear``).

A linear reduce to rank 0 (the root receives and reduces every buffer in
turn, ``reduce/linear``) followed by a linear broadcast from rank 0 (one
step of ``isend`` s, ``broadcast/linear``)::

    T = (p-1)·(α + n·β + n·γ) + (α + n·β)

Open MPI's Rabenseifner allreduce falls back to this when ``count < p'``.
"""

from __future__ import annotations

from simcomm.collectives._compose import sequence_cost, sequence_steps
from simcomm.collectives.base import ALGORITHMS, Algorithm, register


def _parts():
    return [ALGORITHMS.get("reduce/linear"), ALGORITHMS.get("broadcast/linear")]


@register
class LinearAllreduce(Algorithm):
    collective = "allreduce"
    name = "linear"
    summary = "linear reduce to rank 0, then linear broadcast (Open MPI basic_linear)"
    reference = "Open MPI ompi/mca/coll/base/coll_base_allreduce.c (ompi_coll_base_allreduce_intra_basic_linear)"
    family = "openmpi"

    def _steps(self, p, n, ppn):
        return sequence_steps(_parts(), p, n)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return sequence_cost(_parts(), p, n, a, b, g)
