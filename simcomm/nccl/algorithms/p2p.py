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

from simcomm.nccl.base import Flows, NcclAlgorithm, pack, register


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
        L, N = layout.ppn, layout.n_nodes
        if N == 1 or L == 1 or not layout.uniform or layout.nics_per_node == 0 or not layout.pxn:
            return _all_pairs(np.arange(p, dtype=np.int64)[None, :], nbytes / p)
        members = np.asarray(layout.nodes, dtype=np.int64)  # node x local position
        # GPU i hands GPU j of its own node everything meant for position j of every node (N n/p), in node
        # order; then GPU j of every node sends each other node's share on its own rail (L n/p), rail by rail
        src_in, dst_in, nb_in = _all_pairs(members, N * nbytes / p)
        src_out, dst_out, nb_out = _all_pairs(members.T, L * nbytes / p)
        return (np.concatenate((src_in, src_out)), np.concatenate((dst_in, dst_out)),
                np.concatenate((nb_in, nb_out)))


def _all_pairs(groups: np.ndarray, size: float) -> Flows:
    """Every ordered pair (a, b), a != b, within each row of ``groups``: row by row, a outer, b inner."""
    rows, width = groups.shape
    other = ~np.eye(width, dtype=bool)
    src = np.broadcast_to(groups[:, :, None], (rows, width, width))[:, other]
    dst = np.broadcast_to(groups[:, None, :], (rows, width, width))[:, other]
    return src.ravel(), dst.ravel(), np.full(src.size, size)
