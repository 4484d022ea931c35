"""NCCL NVLS-Tree: NVLS inside each node, a double binary tree across nodes on every rail (all-reduce).

Each node reduces in its NVSwitch (``n(1 + 1/L)`` through every GPU port, as
:mod:`~simcomm.nccl.algorithms.nvls`); each of the node's NVLS heads (one per
NVLS channel, at most 32: ``NCCL_MAX_NVLS_ARITY``, ``src/graph/search.cc``)
then carries its 1/H of the result up and down the trees over its own rail,
half in each of NCCL's two complementary trees: only the heads join the trees
(``connectNvls``, ``src/graph/connect.cc``), so on a 72-GPU NVL72 rack 32 of its
72 NICs carry them.  The heads are taken as the node's first H GPUs in ring
order.  NVLink domains of unequal size run it too: NCCL's nodes are the
NVLink cliques, each node reduces over all of its GPUs (its multicast group
is its local ranks, ``nvlsAllocateMem``), and every node keeps the heads of
the node with the fewest (``minHeadNum`` in ``ncclTopoPostset``,
``src/graph/connect.cc``): GB200 racks of 18 + 14 trays (72 + 56 GPUs) both
run 32 heads.  ``src/device/all_reduce.h`` (NVLS_TREE), ``src/graph/trees.cc``.
"""

from __future__ import annotations

from simcomm.nccl.base import NcclAlgorithm, pack, register
from simcomm.nccl.channels import dtree_parents, tree_edges
from simcomm.nccl.tuning import nvls_heads


@register
class NVLSTree(NcclAlgorithm):
    name = "nvls-tree"
    nccl = "NVLSTree"
    summary = "NVLS inside each node, double binary tree across nodes on every rail"
    reference = "NVIDIA/nccl src/device/all_reduce.h (NVLS_TREE), src/graph/trees.cc"
    collectives = ("allreduce",)

    def missing(self, kind, layout):
        why = super().missing(kind, layout)
        if why:
            return why
        if not layout.nvls:
            return (f"NVLS-Tree needs an NVSwitch with NVLink SHARP (Hopper or later); this fabric's GPUs are "
                    f"joined by {layout.intra} (sm{layout.arch})")
        if min(len(node) for node in layout.nodes) <= 2:
            return (f"NVLS-Tree needs at least 3 GPUs in each NVLink domain (ncclNvlsInit, src/transport/nvls.cc: "
                    f"no NVLS when the node's GPU count is <= 2); the smallest here has "
                    f"{min(len(node) for node in layout.nodes)}")
        if layout.n_nodes < 2:
            return "NVLS-Tree spans several nodes; inside one NVLink domain NCCL uses NVLS"
        return None

    def flows(self, kind, layout, nbytes, root):
        pairs, size = [], []
        for node in layout.nodes:  # each node reduces in its own switch, over all of its GPUs
            L = len(node)
            pairs += [(node[i], node[(i + 1) % L]) for i in range(L)] if L > 1 else []
            size += [nbytes * (1.0 + 1.0 / L)] * (L if L > 1 else 0)
        heads = nvls_heads(layout)  # the smallest node's head count, the same on every node
        for tree in dtree_parents(layout.n_nodes):
            for child, parent in tree_edges(tree):
                for j in range(heads):  # head j's rail: the j-th GPU of each node
                    a, b = layout.nodes[child][j], layout.nodes[parent][j]
                    pairs += [(a, b), (b, a)]
                    size += [nbytes / heads / 2.0] * 2
        return pack(pairs, size)
