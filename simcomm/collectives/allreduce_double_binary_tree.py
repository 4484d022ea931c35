"""Double-binary-tree allreduce: half the buffer on each of two complementary trees.

Tree 1 is NCCL's ``ncclGetBtree``; tree 2 is its mirror (even p) or its shift
by one rank (odd p), as in ``ncclGetDtree``; the two-tree idea is Sanders,
Speck & Träff (2009).  Both trees run at once, level by level and
unpipelined, each on ``n/2`` bytes.  With depth ``D`` and ``c_d`` the most
half-buffers a rank reduces in reduce round ``d`` (it may be a parent in
both trees, so ``c_d ≤ 4``)::

    T = 2D·α + D·n·β + Σ_d c_d·(n/2)·γ

NCCL pipelines the trees in chunks, which brings the bandwidth term down to
about ``n·β``; this unpipelined form is the latency-optimal end of that range.
"""

from __future__ import annotations

from simcomm.collectives._trees import reduce_fan_in, tree_steps
from simcomm.collectives.base import Algorithm, CostTerms, register


@register
class DoubleBinaryTreeAllreduce(Algorithm):
    collective = "allreduce"
    name = "double-binary-tree"
    summary = "two complementary binary trees (NCCL's dtree), n/2 each, reduce up then broadcast down"
    reference = "NCCL src/graph/trees.cc (ncclGetDtree); Sanders, Speck & Träff, Parallel Computing 35(12) 2009"

    def _steps(self, p, n, ppn):
        return tree_steps(p, n / 2, double=True)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        depth, fan = reduce_fan_in(p, double=True)
        return CostTerms(2 * depth * a, depth * n * b, sum(fan) * (n / 2) * g)
