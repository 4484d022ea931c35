"""Binary-tree allreduce: reduce up NCCL's binary tree, then broadcast down it.

Unpipelined, level by level: with tree depth ``D`` and ``c_d ∈ {1, 2}`` the
most children any rank reduces in reduce round ``d``::

    T = 2D·α + 2D·n·β + Σ_d c_d·n·γ          (D = ⌊lg p⌋ + O(1))

A parent receives from both children at once (each over its own link) and
then reduces both buffers.  The tree is NCCL's ``ncclGetBtree``.
"""

from __future__ import annotations

from simcomm.collectives._trees import reduce_fan_in, tree_steps
from simcomm.collectives.base import Algorithm, CostTerms, register


@register
class BinaryTreeAllreduce(Algorithm):
    collective = "allreduce"
    name = "binary-tree"
    summary = "reduce up then broadcast down one binary tree (NCCL's btree), whole buffer per level"
    reference = "NCCL src/graph/trees.cc (ncclGetBtree); Thakur, Rabenseifner & Gropp, IJHPCA 2005"

    def _steps(self, p, n, ppn):
        return tree_steps(p, n, double=False)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        depth, fan = reduce_fan_in(p, double=False)
        return CostTerms(2 * depth * a, 2 * depth * n * b, sum(fan) * n * g)
