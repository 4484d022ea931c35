"""NCCL PAT (Parallel Aggregated Trees): all-gather and reduce-scatter with one GPU per node.

PAT sends to peers at doubling distances so its latency grows with log(nodes)
while every rank still moves ``(p-1)/p n`` in and out, a ring's volume
(NCCL >= 2.23).  Modelled as a ring-shift of that volume, which loads every
NIC exactly as PAT does on a non-blocking network.  ``src/device/all_gather.h``
and ``reduce_scatter.h`` (PAT), ``src/graph/tuning.cc``.
"""

from __future__ import annotations

from simcomm.nccl.base import NcclAlgorithm, pack, register


@register
class PAT(NcclAlgorithm):
    name = "pat"
    nccl = "PAT"
    summary = "parallel aggregated trees for all-gather/reduce-scatter at one GPU per node (log latency)"
    reference = "NVIDIA/nccl 2.23+ src/device/all_gather.h, reduce_scatter.h (PAT)"
    collectives = ("allgather", "reduce_scatter")

    def missing(self, kind, layout):
        why = super().missing(kind, layout)
        if why:
            return why
        if layout.ppn != 1:
            return f"PAT runs with one GPU per node; this group has {layout.ppn} per node"
        return None

    def flows(self, kind, layout, nbytes, root):
        order = [node[0] for node in layout.nodes]
        p = len(order)
        return pack([(order[i], order[(i + 1) % p]) for i in range(p)], (p - 1) / p * nbytes)
