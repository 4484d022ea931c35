"""k-nomial tree broadcast (Open MPI ``ompi_coll_base_bcast_intra_knomial``, radix 4).

``build_kmtree``: relative rank ``v``'s parent is ``v`` with its lowest
non-zero base-4 digit cleared, and a node sends to all its children at once
(``ompi_coll_base_bcast_intra_generic``).  So ``v`` receives in step
``nz4(v)`` (its count of non-zero base-4 digits) and the tree depth is
``D = max nz4(v)`` over ``v < p`` (``≤ ⌈log4 p⌉``)::

    T = D·(α + n·β)            (unsegmented, as Open MPI 4.1's fixed rules run it)

Radix 4 is the default of ``coll_tuned_bcast_algorithm_knomial_radix``.  With
radix 2 this is ``broadcast/gloo``'s cost (the same wave count).  A node of a
radix-4 tree sends up to ``3·⌈log4 p⌉`` messages at once; the flow engine
charges them sharing its link.
"""

from __future__ import annotations

from typing import ClassVar

from simcomm.collectives._pipeline import kmtree_parents, max_nonzero_digits, tree_bcast_cost, tree_bcast_steps
from simcomm.collectives.base import Algorithm, register


@register
class KnomialBroadcast(Algorithm):
    collective = "broadcast"
    name = "knomial"
    summary = "radix-4 k-nomial tree, each node sends to all its children at once (Open MPI knomial)"
    reference = ("Open MPI ompi/mca/coll/base/coll_base_bcast.c (bcast_intra_knomial) and "
                 "coll_base_topo.c (build_kmtree)")
    family = "openmpi"
    rooted = True
    radix: ClassVar[int] = 4
    segment: ClassVar[int] = 0

    def _steps(self, p, n, ppn):
        return tree_bcast_steps(kmtree_parents(p, self.radix), n, self.segment)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return tree_bcast_cost(max_nonzero_digits(p, self.radix), n, self.segment, a, b)
