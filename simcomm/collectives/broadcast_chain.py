"""Chain broadcast, whole or in segments (Open MPI ``bcast_intra_chain`` / ``bcast_intra_pipeline``).

Ranks form one chain 0 -> 1 -> ... -> p-1 (``build_chain`` with fanout 1;
Open MPI 4.1's fixed rules pass fanout 0, which ``build_chain`` forces to 1,
so its "chain" and "pipeline" are the same single chain).  The buffer moves
in ``k`` segments (``s = S`` bytes, the last ``r``); rank ``i`` forwards
segment ``j`` in step ``i + j`` while it receives segment ``j + 1``
(``ompi_coll_base_bcast_intra_generic``)::

    T = (k + p - 3)·(α + s·β) + (α + r·β)

Unsegmented (``S = 0``, what 4.1's fixed rules use): ``T = (p - 1)(α + n·β)``.
Segmented variants carry the segment size in their name (``pipeline-128k``:
``S = 128 KiB``, Open MPI 3.1's large-message choice).
"""

from __future__ import annotations

from typing import ClassVar

from simcomm.collectives._pipeline import chain_parents, tree_bcast_cost, tree_bcast_steps
from simcomm.collectives.base import Algorithm, register, register_variant

REFERENCE = ("Open MPI ompi/mca/coll/base/coll_base_bcast.c (bcast_intra_chain, bcast_intra_pipeline, "
             "bcast_intra_generic) and coll_base_topo.c (build_chain)")


@register
class ChainBroadcast(Algorithm):
    collective = "broadcast"
    name = "chain"
    summary = "one chain 0 -> 1 -> ... -> p-1, whole buffer (Open MPI chain/pipeline with segsize 0)"
    reference = REFERENCE
    family = "openmpi"
    rooted = True
    #: segment size in bytes; 0 sends the buffer whole
    segment: ClassVar[int] = 0

    def _steps(self, p, n, ppn):
        return tree_bcast_steps(chain_parents(p), n, self.segment)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return tree_bcast_cost(p - 1, n, self.segment, a, b)


# Open MPI 3.1's fixed rules pick these pipelines for large broadcasts.
for _kib in (8, 16, 64, 128):
    register_variant(ChainBroadcast, f"pipeline-{_kib}k", segment=_kib * 1024,
                     summary=f"chain pipeline in {_kib} KiB segments (Open MPI bcast_intra_pipeline)")
