"""Linear scatter (Open MPI ``ompi_coll_base_scatter_intra_basic_linear``).

The root sends each rank its block of ``n/p`` with a blocking send, one rank
after the other, so the ``p - 1`` transfers are sequential::

    T = (p-1)·(α + (n/p)·β)
"""

from __future__ import annotations

from simcomm.collectives.base import Algorithm, CostTerms, Step, register


def linear_scatter_steps(p: int, n: float) -> list[Step]:
    return [Step.make([0], [i], n / p) for i in range(1, p)]


@register
class LinearScatter(Algorithm):
    collective = "scatter"
    name = "linear"
    summary = "the root sends every block in turn with blocking sends, p-1 steps (Open MPI basic_linear)"
    reference = "Open MPI ompi/mca/coll/base/coll_base_scatter.c (ompi_coll_base_scatter_intra_basic_linear)"
    family = "openmpi"
    rooted = True

    def _steps(self, p, n, ppn):
        return linear_scatter_steps(p, n)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return CostTerms((p - 1) * a, (p - 1) * n / p * b, 0.0)
