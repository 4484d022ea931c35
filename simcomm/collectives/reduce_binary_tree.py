"""Binary-tree reduce (Open MPI ``ompi_coll_base_reduce_intra_binary``).

Partial results flow up the level-order binary tree of ``build_tree(2)``
(children of ``v`` on level ``L``: ``v + 2^L``, ``v + 2^(L+1)``) as early
as they exist: a node of height ``h`` (leaves 0) sends segment ``j`` in step
``j + h`` and its parent reduces what arrives (``ompi_coll_base_reduce_generic``
posts the receives from both children together).  Unsegmented, with
``c_h`` the most children of height ``h`` that one rank reduces (1 or 2) and
root height ``H = ⌊lg p⌋``::

    T = Σ_{h=0}^{H-1} (α + n·β + c_h·n·γ)

With ``k`` segments the steady state moves one segment per edge per step and
the closed form is summed step by step over fill and drain
(:func:`~simcomm.collectives._pipeline.tree_reduce_cost`).
"""

from __future__ import annotations

from typing import ClassVar

from simcomm.collectives._pipeline import kary_parents, tree_reduce_cost, tree_reduce_steps
from simcomm.collectives.base import Algorithm, register, register_variant


@register
class BinaryTreeReduce(Algorithm):
    collective = "reduce"
    name = "binary-tree"
    summary = "reduce up a level-order binary tree, data-driven (Open MPI reduce binary, segsize 0)"
    reference = "Open MPI ompi/mca/coll/base/coll_base_reduce.c (reduce_intra_binary, reduce_generic)"
    family = "openmpi"
    rooted = True
    segment: ClassVar[int] = 0

    def _steps(self, p, n, ppn):
        return tree_reduce_steps(kary_parents(p, 2), n, self.segment)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return tree_reduce_cost(kary_parents(p, 2), n, self.segment, a, b, g)


# Open MPI 3.1's fixed rules use 32 KiB segments on this tree.
register_variant(BinaryTreeReduce, "binary-tree-32k", segment=32 * 1024,
                 summary="binary-tree reduce in 32 KiB segments (Open MPI reduce_intra_binary)")
