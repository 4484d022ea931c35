"""Linear reduce (Open MPI ``ompi_coll_base_reduce_intra_basic_linear``).

The root posts one blocking receive at a time – from relative rank ``p-1``,
then ``p-2``, …, ``1`` – and reduces each buffer as it lands, so the
``p - 1`` transfers are sequential::

    T = (p-1)·(α + n·β + n·γ)

(Open MPI copies the first buffer and reduces its own one in the loop; the
count of reductions, ``p - 1``, is the same.)
"""

from __future__ import annotations

from simcomm.collectives.base import Algorithm, CostTerms, Step, register


def linear_reduce_steps(p: int, n: float) -> list[Step]:
    """``p - 1`` steps, rank ``p-1`` down to 1 each sending ``n`` reduced bytes to rank 0."""
    return [Step.make([i], [0], n, n) for i in range(p - 1, 0, -1)]


@register
class LinearReduce(Algorithm):
    collective = "reduce"
    name = "linear"
    summary = "the root receives and reduces every buffer in turn, p-1 steps (Open MPI basic_linear)"
    reference = "Open MPI ompi/mca/coll/base/coll_base_reduce.c (ompi_coll_base_reduce_intra_basic_linear)"
    family = "openmpi"
    rooted = True

    def _steps(self, p, n, ppn):
        return linear_reduce_steps(p, n)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return CostTerms((p - 1) * a, (p - 1) * n * b, (p - 1) * n * g)
