"""In-order binary-tree reduce (Open MPI ``ompi_coll_base_reduce_intra_in_order_binary``).

The tree of ``build_in_order_bintree`` is rooted at rank ``p - 1`` (left
subtree: the upper ranks, right subtree: the lower ``⌊p/2⌋`` ranks,
recursively), which keeps the operand order for non-commutative operations.
Partial results flow up as in ``reduce/binary-tree`` (a node of height ``h``
sends in step ``h``), then rank ``p - 1`` sends the result to the root – an
extra ``α + n·β`` whenever the root is not ``p - 1``.  Unsegmented, with
``c_h`` the most children of height ``h`` one rank reduces::

    T = Σ_{h=0}^{H-1} (α + n·β + c_h·n·γ) + (α + n·β)

Approximation: we build the tree on ranks relative to the root (root 0), so
the extra hop is always paid; Open MPI saves it when the root is ``p - 1``.
"""

from __future__ import annotations

from simcomm.collectives._pipeline import in_order_bintree_parents, tree_reduce_cost, tree_reduce_steps
from simcomm.collectives.base import Algorithm, CostTerms, Step, register


@register
class InOrderBinaryReduce(Algorithm):
    collective = "reduce"
    name = "in-order-binary"
    summary = "reduce up the in-order binary tree rooted at p-1, then p-1 sends to the root (Open MPI)"
    reference = ("Open MPI ompi/mca/coll/base/coll_base_reduce.c (reduce_intra_in_order_binary) and "
                 "coll_base_topo.c (build_in_order_bintree)")
    family = "openmpi"
    rooted = True

    def _steps(self, p, n, ppn):
        return tree_reduce_steps(in_order_bintree_parents(p), n, 0) + [Step.make([p - 1], [0], n)]

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        up = tree_reduce_cost(in_order_bintree_parents(p), n, 0, a, b, g)
        return CostTerms(up.latency + a, up.bandwidth + n * b, up.reduction)
