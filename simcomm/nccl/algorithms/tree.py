"""NCCL Tree: pipelined reduce up and broadcast down a double binary tree (all-reduce only).

Across nodes the channels alternate between NCCL's two complementary binary
trees (:func:`simcomm.nccl.channels.dtree_parents`); inside a node each
channel is a chain from the GPU wired to its NIC.  The reduction flows up
while the result flows down, both pipelined, so every tree edge carries the
channel's share once in each direction: about ``2n`` bytes per node, like a
ring, which is why NCCL's model prices Tree at half its bus bandwidth
(``src/graph/tuning.cc``).  ``src/graph/trees.cc``, ``src/device/all_reduce.h``.
"""

from __future__ import annotations

import numpy as np

from simcomm.nccl.base import NcclAlgorithm, pack, register
from simcomm.nccl.channels import chain, dtree_parents, tree_edges


@register
class Tree(NcclAlgorithm):
    name = "tree"
    nccl = "Tree"
    summary = "double binary tree across nodes, chain inside a node; reduce up and broadcast down, pipelined"
    reference = "NVIDIA/nccl src/graph/trees.cc (ncclGetDtree), src/device/all_reduce.h"
    collectives = ("allreduce",)

    def flows(self, kind, layout, nbytes, root):
        # The pattern depends on the layout alone (layouts are kept per topology and group): built once
        # per layout, each call carrying its own share, as pack() would (a 2 048-node tree is 0.5 M pairs).
        kept = layout.__dict__.get("_tree_pattern")
        if kept is None:
            src, dst, _ = self._flows(layout, 1.0)
            kept = layout.__dict__["_tree_pattern"] = (src, dst, self._channels(layout))
        src, dst, channels = kept
        return src.copy(), dst.copy(), np.full(len(src), nbytes / channels)

    @staticmethod
    def _channels(layout) -> int:
        return 1 if layout.n_nodes == 1 else 2 * max(1, layout.nics_per_node)

    def _flows(self, layout, nbytes):
        n_nodes = layout.n_nodes
        nics = max(1, layout.nics_per_node)
        # Every NIC carries a channel of each tree (NCCL duplicates its channels), so the NIC of
        # a node that is interior in one tree is a leaf's in the other: the load evens out.
        channels = self._channels(layout)
        trees = dtree_parents(n_nodes) if n_nodes > 1 else ([-1], [-1])
        share = nbytes / channels
        pairs = []
        by_nic: dict[int, list] = {}  # channels c and c + nics share their NIC, hence their chains
        for c in range(channels):
            chains = by_nic.get(c % nics)
            if chains is None:
                chains = by_nic[c % nics] = [chain(layout, node, c % nics) for node in layout.nodes]
            for ch in chains:
                for a, b in zip(ch, ch[1:], strict=False):
                    pairs += [(b, a), (a, b)]  # up toward the head, down from it
            for child, parent in tree_edges(trees[(c // nics) % 2]):
                head_c, head_p = chains[child][0], chains[parent][0]
                pairs += [(head_c, head_p), (head_p, head_c)]
        return pack(pairs, share)
