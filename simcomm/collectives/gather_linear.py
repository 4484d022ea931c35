"""Linear gather (Open MPI ``ompi_coll_base_gather_intra_basic_linear``).

The root posts one blocking receive at a time, rank by rank, so the ``p - 1``
blocks of ``n/p`` arrive in ``p - 1`` sequential steps::

    T = (p-1)·(α + (n/p)·β)
"""

from __future__ import annotations

from simcomm.collectives.base import Algorithm, CostTerms, Step, register


@register
class LinearGather(Algorithm):
    collective = "gather"
    name = "linear"
    summary = "the root receives every block in turn, p-1 steps (Open MPI basic_linear)"
    reference = "Open MPI ompi/mca/coll/base/coll_base_gather.c (ompi_coll_base_gather_intra_basic_linear)"
    family = "openmpi"
    rooted = True

    def _steps(self, p, n, ppn):
        return [Step.make([i], [0], n / p) for i in range(1, p)]

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return CostTerms((p - 1) * a, (p - 1) * n / p * b, 0.0)
