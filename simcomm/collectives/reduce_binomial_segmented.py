"""Segmented binomial reduce (Open MPI ``ompi_coll_base_reduce_intra_binomial`` with segments).

The tree is ``build_in_order_bmtree`` – relative rank ``v`` sends to
``v - lowbit(v)`` – and the message moves in segments of ``S`` bytes, each
flowing up as early as it exists: a node of height ``h`` sends segment ``j``
in step ``j + h`` and its parent reduces what arrives
(``ompi_coll_base_reduce_generic``).  In the steady state a rank with ``c``
children reduces ``c`` segments per step; the closed form is summed step by
step over fill and drain (:func:`~simcomm.collectives._pipeline.tree_reduce_cost`)::

    T = Σ_t (α + s_t·β + γ·Σ_{segments reduced by the busiest rank in step t})

Only the segmented variant Open MPI 3.1's fixed rules use (1 KiB) is
registered; unsegmented, Open MPI's binomial reduce is priced by
``reduce/binomial`` (MPICH's rounds on the same tree).
"""

from __future__ import annotations

from typing import ClassVar

from simcomm.collectives._pipeline import in_order_bmtree_parents, tree_reduce_cost, tree_reduce_steps
from simcomm.collectives.base import Algorithm, register_variant


class SegmentedBinomialReduce(Algorithm):
    collective = "reduce"
    reference = ("Open MPI ompi/mca/coll/base/coll_base_reduce.c (reduce_intra_binomial, reduce_generic) and "
                 "coll_base_topo.c (build_in_order_bmtree)")
    family = "openmpi"
    rooted = True
    segment: ClassVar[int] = 1024

    def _steps(self, p, n, ppn):
        return tree_reduce_steps(in_order_bmtree_parents(p), n, self.segment)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return tree_reduce_cost(in_order_bmtree_parents(p), n, self.segment, a, b, g)


register_variant(SegmentedBinomialReduce, "binomial-1k", segment=1024,
                 summary="binomial tree reduce in 1 KiB segments, data-driven (Open MPI reduce_intra_binomial)")
