"""NCCL point-to-point collectives: all-to-all, gather, scatter and send/recv as grouped sends.

NCCL has no all-to-all algorithm: nccl-tests' ``alltoall_perf`` posts one send
and one receive per peer inside a group, and NCCL moves them all at once.
Across nodes NCCL routes a message to GPU j of another node through the local
GPU j's NIC when PXN is on (NCCL >= 2.12, the default): GPU i first hands GPU j
over NVLink everything meant for position j of every node (``N n/p``), then
GPU j sends each remote node's share on its own rail (``L n/p`` per node).
PXN needs NVLink between the two GPUs (``src/graph/paths.cc``, ``ncclTopoComputePaths``: the GPU
local to the NIC must reach the sender ``<= PATH_NVL``), so a PCIe-only machine sends every
message from its own GPU through its own NIC.
One GPU per node, one node, or no NVLink: every pair is its own flow of ``n/p``
(``n`` = the data one rank sends in total).  Gather and scatter are the
root's receives or sends; ``p2p`` is one message.
``src/enqueue.cc`` (p2p scheduling), ``src/graph/paths.cc`` (PXN).
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives.pairs import PairBlocks, all_pairs
from simcomm.nccl.base import NcclAlgorithm, pack, register


@register
class P2P(NcclAlgorithm):
    name = "p2p"
    nccl = "P2P"
    summary = "grouped sends and receives (all-to-all, gather, scatter, send/recv), PXN across nodes"
    reference = "NVIDIA/nccl src/enqueue.cc (p2p), src/graph/paths.cc (PXN); nccl-tests alltoall.cu"
    collectives = ("alltoall", "gather", "scatter", "p2p")

    def flows(self, kind, layout, nbytes, root):
        p = layout.n_ranks
        if kind == "p2p":
            return pack([(0, 1)], nbytes)
        if kind in ("gather", "scatter"):
            pairs = [(i, root) if kind == "gather" else (root, i) for i in range(p) if i != root]
            return pack(pairs, nbytes / p)
        src, dst, n_in, relayed = self._kept(layout)
        if not relayed:
            return src, dst, np.full(len(src), nbytes / p)
        L, N = layout.ppn, layout.n_nodes
        return src, dst, np.concatenate((np.full(n_in, N * nbytes / p), np.full(len(src) - n_in, L * nbytes / p)))

    def blocks(self, kind, layout, nbytes) -> PairBlocks | None:
        """The PXN all-to-all of :meth:`flows` as blocks of pairs (the in-node relays of each node, then each
        rail's messages), the same transfers in the same order; None for anything else."""
        if kind != "alltoall" or not self._relays(layout):
            return None
        members = np.asarray(layout.nodes, dtype=np.int64)  # node x local position
        p, L, N = layout.n_ranks, layout.ppn, layout.n_nodes
        # (if its transfers are ever built, they are the layout's pattern, shared with every size)
        return PairBlocks((members, members.T), (N * nbytes / p, L * nbytes / p),
                          pairs=lambda: self._kept(layout)[:2])

    def _kept(self, layout) -> tuple[np.ndarray, np.ndarray, int, bool]:
        """:meth:`_pattern` of ``layout``, built once per layout (read-only); each call brings its own bytes
        (an all-to-all over 2 048 nodes x 8 is 3.4 x 10^7 pairs, one per conv unit of pcnn)."""
        kept = layout.__dict__.setdefault("_p2p_patterns", {})
        if "alltoall" not in kept:
            kept["alltoall"] = self._pattern(layout)
        return kept["alltoall"]

    @staticmethod
    def _relays(layout) -> bool:
        """Whether an all-to-all on ``layout`` relays through PXN (several nodes of several GPUs on NVLink)."""
        return not (layout.n_nodes == 1 or layout.ppn == 1 or not layout.uniform or layout.nics_per_node == 0
                    or not layout.pxn)

    @staticmethod
    def _pattern(layout) -> tuple[np.ndarray, np.ndarray, int, bool]:
        """(src, dst, in-node relays first, whether PXN relays) of an all-to-all on ``layout``, read-only."""
        p, L, N = layout.n_ranks, layout.ppn, layout.n_nodes
        if not P2P._relays(layout):
            src, dst = all_pairs(np.arange(p, dtype=np.int64)[None, :])
            relayed = False
        else:
            members = np.asarray(layout.nodes, dtype=np.int64)  # node x local position
            # GPU i hands GPU j of its own node everything meant for position j of every node (N n/p), in
            # node order; then GPU j of every node sends each other node's share on its own rail (L n/p)
            src_in, dst_in = all_pairs(members)
            src_out, dst_out = all_pairs(members.T)
            src, dst = np.concatenate((src_in, src_out)), np.concatenate((dst_in, dst_out))
            relayed = True
        src.flags.writeable = dst.flags.writeable = False
        n_in = len(src) - (L * N * (N - 1) if relayed else len(src))
        return src, dst, n_in, relayed

