"""NCCL Ring: pipelined rings, one per channel, every rail in use.

All-reduce is a reduce-scatter then an all-gather around the ring
(``nsteps = 2(p-1)``), so each ring hop carries ``2(p-1)/p`` of its channel's
share; all-gather and reduce-scatter carry ``(p-1)/p``; broadcast and reduce
pipeline the whole share along the ring from (to) the root, leaving one hop
unused.  ``src/device/all_reduce.h``, ``all_gather.h``, ``broadcast.h``;
``src/graph/tuning.cc`` (nsteps).
"""

from __future__ import annotations

from simcomm.nccl.base import NcclAlgorithm, pack, register
from simcomm.nccl.channels import rings

#: share of a channel's bytes each ring hop carries, by collective (p ranks)
_FACTOR = {"allreduce": lambda p: 2.0 * (p - 1) / p, "allgather": lambda p: (p - 1) / p,
           "reduce_scatter": lambda p: (p - 1) / p, "broadcast": lambda p: 1.0, "reduce": lambda p: 1.0}


@register
class Ring(NcclAlgorithm):
    name = "ring"
    nccl = "Ring"
    summary = "pipelined rings, one channel per NIC rail (PXN hand-offs over NVLink)"
    reference = "NVIDIA/nccl src/device/all_reduce.h, src/graph/search.cc, src/graph/tuning.cc"
    collectives = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce")

    def flows(self, kind, layout, nbytes, root):
        rs = rings(layout)
        share = nbytes / len(rs) * _FACTOR[kind](layout.n_ranks)
        pairs = []
        for ring in rs:
            n = len(ring.order)
            for k, hop in enumerate(ring.hops):
                a, b = ring.order[k], ring.order[(k + 1) % n]
                if (kind == "broadcast" and b == root) or (kind == "reduce" and a == root):
                    continue  # the chain from (to) the root does not close the ring
                pairs += hop
        return pack(pairs, share)
