"""Binary-tree broadcast (Open MPI ``ompi_coll_base_bcast_intra_bintree``).

The tree is ``build_tree(2)``: level-order, children of relative rank ``v``
on level ``L`` are ``v + 2^L`` and ``v + 2^(L+1)``, so its depth is
``D = ⌊lg p⌋``.  A node sends each segment to both children at once
(``ompi_coll_base_bcast_intra_generic``); with ``k`` segments of ``s`` bytes
(last ``r``)::

    T = (k + D - 2)·(α + s·β) + (α + r·β)

Open MPI 4.1's fixed rules run it unsegmented: ``T = ⌊lg p⌋·(α + n·β)``.
"""

from __future__ import annotations

from typing import ClassVar

from simcomm.collectives._patterns import lg
from simcomm.collectives._pipeline import kary_parents, tree_bcast_cost, tree_bcast_steps
from simcomm.collectives.base import Algorithm, register


@register
class BinaryTreeBroadcast(Algorithm):
    collective = "broadcast"
    name = "binary-tree"
    summary = "level-order binary tree, each node sends to both children at once (Open MPI bintree)"
    reference = "Open MPI ompi/mca/coll/base/coll_base_bcast.c (bcast_intra_bintree) and coll_base_topo.c (build_tree)"
    family = "openmpi"
    rooted = True
    segment: ClassVar[int] = 0

    def _steps(self, p, n, ppn):
        return tree_bcast_steps(kary_parents(p, 2), n, self.segment)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return tree_bcast_cost(lg(p), n, self.segment, a, b)
