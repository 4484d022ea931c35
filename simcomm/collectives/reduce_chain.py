"""Chain reduce, whole or in segments (Open MPI ``reduce_intra_chain`` / ``reduce_intra_pipeline``).

One chain p-1 -> p-2 -> ... -> 0 (``build_chain`` with fanout 1; Open MPI
4.1's fixed rules pass fanout 0, forced to 1, so "chain" and "pipeline" are
the same chain).  Relative rank ``i`` sends segment ``j`` of its partial
result in step ``j + p - 1 - i``; rank ``i - 1`` reduces it in that step
(``ompi_coll_base_reduce_generic``).  With ``k`` segments of ``s`` bytes
(the last ``r``)::

    T = (k + p - 3)·(α + s·β + s·γ) + (α + r·β + r·γ)

Unsegmented (4.1's fixed rules): ``T = (p-1)(α + n·β + n·γ)``.  Segmented
variants (Open MPI 3.1's choices) carry the segment size in their name.
"""

from __future__ import annotations

from typing import ClassVar

from simcomm.collectives._pipeline import chain_parents, tree_reduce_cost, tree_reduce_steps
from simcomm.collectives.base import Algorithm, register, register_variant


@register
class ChainReduce(Algorithm):
    collective = "reduce"
    name = "chain"
    summary = "one chain p-1 -> ... -> 0 reducing on the way, whole buffer (Open MPI chain/pipeline, segsize 0)"
    reference = ("Open MPI ompi/mca/coll/base/coll_base_reduce.c (reduce_intra_chain, reduce_intra_pipeline, "
                 "reduce_generic)")
    family = "openmpi"
    rooted = True
    segment: ClassVar[int] = 0

    def _steps(self, p, n, ppn):
        return tree_reduce_steps(chain_parents(p), n, self.segment)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return tree_reduce_cost(chain_parents(p), n, self.segment, a, b, g)


for _kib in (1, 32, 64):
    register_variant(ChainReduce, f"pipeline-{_kib}k", segment=_kib * 1024,
                     summary=f"chain pipeline in {_kib} KiB segments (Open MPI reduce_intra_pipeline)")
