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

import itertools

import numpy as np

from simcomm.nccl.base import NcclAlgorithm, register
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
        """Each channel's chains (up toward the head, down from it, pair by pair), then its tree over the
        chain heads (child to parent, parent to child), as arrays: a 2 048-node tree is 0.5 M pairs."""
        n_nodes = layout.n_nodes
        nics = max(1, layout.nics_per_node)
        # Every NIC carries a channel of each tree (NCCL duplicates its channels), so the NIC of
        # a node that is interior in one tree is a leaf's in the other: the load evens out.
        channels = self._channels(layout)
        trees = dtree_parents(n_nodes) if n_nodes > 1 else ([-1], [-1])
        edges = [np.array(tree_edges(t), dtype=np.int64).reshape(-1, 2) for t in trees]
        share = nbytes / channels
        srcs, dsts = [], []
        by_nic: dict[int, tuple] = {}  # channels c and c + nics share their NIC, hence their chains
        for c in range(channels):
            chains = by_nic.get(c % nics)
            if chains is None:
                chains = by_nic[c % nics] = _node_chains(layout, c % nics)
            up_src, up_dst, heads = chains
            tree = edges[(c // nics) % 2]
            head_c, head_p = heads[tree[:, 0]], heads[tree[:, 1]]
            srcs += [up_src, _interleave(head_c, head_p)]
            dsts += [up_dst, _interleave(head_p, head_c)]
        src, dst = np.concatenate(srcs), np.concatenate(dsts)
        return src, dst, np.full(len(src), share)


def _interleave(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a[0], b[0], a[1], b[1], ...``."""
    return np.stack([a, b], axis=1).reshape(-1)


def _node_chains(layout, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_chain_pairs` of ``chain(layout, node, c)`` for every node of the layout.

    A node's chain is a reordering of its members that depends only on their NICs' local indices, position by
    position (:func:`~simcomm.nccl.channels.chain`), so nodes of equal size are reordered once per pattern of
    NICs (a 16 384-rank tree over 2 048 machines: one pattern, not 2 048 chains per NIC); the same chains.
    """
    nodes = layout.nodes
    width = len(nodes[0]) if nodes else 0
    if width < 2 or any(len(node) != width for node in nodes):
        return _chain_pairs([chain(layout, node, c) for node in nodes])
    members = np.array(nodes, dtype=np.int64)
    patterns, first, which = np.unique(np.asarray(layout.nic_local)[members], axis=0, return_index=True,
                                       return_inverse=True)
    order = np.empty((len(patterns), width), dtype=np.int64)  # each pattern's chain as positions in its node
    for k, i in enumerate(first.tolist()):
        node = nodes[i]
        order[k] = [node.index(m) for m in chain(layout, node, c)]
    walked = np.take_along_axis(members, order[which.reshape(-1)], axis=1)
    return _chain_pairs_flat(np.full(len(nodes), width, dtype=np.int64), walked.reshape(-1))


def _chain_pairs(chains: list[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, heads) of the chains: for each chain in turn, each link ``a -> b`` of it as ``(b, a)`` (up
    toward the head) then ``(a, b)`` (down from it); and each chain's head."""
    lengths = np.fromiter(map(len, chains), dtype=np.int64, count=len(chains))
    flat = np.fromiter(itertools.chain.from_iterable(chains), dtype=np.int64, count=int(lengths.sum()))
    return _chain_pairs_flat(lengths, flat)


def _chain_pairs_flat(lengths: np.ndarray, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_chain_pairs` of the chains given as their lengths and their members concatenated."""
    starts = np.cumsum(lengths) - lengths
    linked = np.ones(len(flat), dtype=bool)  # position i is joined to i + 1 in its chain
    linked[starts + lengths - 1] = False
    a, b = flat[:-1][linked[:-1]], flat[1:][linked[:-1]]
    return _interleave(b, a), _interleave(a, b), flat[starts]
