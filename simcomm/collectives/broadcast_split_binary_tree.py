"""Split-binary-tree broadcast (Open MPI ``ompi_coll_base_bcast_intra_split_bintree``).

The root splits the buffer in two halves of ``n/2``; half 0 flows down the
left subtree of the level-order binary tree (``build_tree(2)``: the odd
relative ranks) and half 1 down the right one (the even ranks), both
pipelined in segments of ``S`` bytes as in the binary-tree broadcast.  Then
every left rank ``v`` swaps halves with its mirror ``v + 1`` in one
``sendrecv``; for even ``p`` the last rank, which has no mirror, gets half 1
from the root in that same step.  With depth ``D = ⌊lg p⌋`` and ``k``
segments of ``s`` (last ``r``) per half::

    T = (k + D - 2)·(α + s·β) + (α + r·β) + (α + (n/2)·β)

Unsegmented (Open MPI 4.1's fixed rules): ``T = (⌊lg p⌋ + 1)·α + (⌊lg p⌋ + 1)·(n/2)·β``.
Open MPI falls back to the chain pipeline when a half is empty or shorter
than one segment (``n < 2S``); neither rule set picks the split tree there
(3.1 uses 1 KiB segments from 2 KiB up, 8 KiB ones from 362 KiB up), so this
module prices a one-segment split tree for such sizes instead.

Approximation: Open MPI forwards a segment to the two children with two
blocking ``MPI_Send`` calls; segments are eager-sized, so the sends return
at once and we price them as concurrent (as in the binary-tree broadcast).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from simcomm.collectives._patterns import lg
from simcomm.collectives._pipeline import kary_parents, tree_bcast_cost, tree_bcast_steps
from simcomm.collectives.base import Algorithm, CostTerms, Step, register, register_variant


@register
class SplitBinaryTreeBroadcast(Algorithm):
    collective = "broadcast"
    name = "split-binary-tree"
    summary = "halves down the two subtrees of a binary tree, then mirror ranks swap halves (Open MPI)"
    reference = "Open MPI ompi/mca/coll/base/coll_base_bcast.c (bcast_intra_split_bintree)"
    family = "openmpi"
    rooted = True
    segment: ClassVar[int] = 0

    def _steps(self, p, n, ppn):
        half = n / 2
        out = tree_bcast_steps(kary_parents(p, 2), half, self.segment)
        left = np.arange(1, p - 1, 2, dtype=np.int64)  # odd ranks with an even mirror v + 1
        src, dst = np.concatenate([left, left + 1]), np.concatenate([left + 1, left])
        if p % 2 == 0:  # rank p-1 has no mirror: the root sends it half 1
            src, dst = np.append(src, 0), np.append(dst, p - 1)
        out.append(Step.make(src, dst, half))
        return out

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        tree = tree_bcast_cost(lg(p), n / 2, self.segment, a, b)
        return CostTerms(tree.latency + a, tree.bandwidth + n / 2 * b, 0.0)


# Open MPI 3.1's fixed rules: 1 KiB segments for medium messages, 8 KiB for large ones on < 13 ranks.
for _kib in (1, 8):
    register_variant(SplitBinaryTreeBroadcast, f"split-binary-tree-{_kib}k", segment=_kib * 1024,
                     summary=f"split binary tree in {_kib} KiB segments (Open MPI bcast_intra_split_bintree)")
