"""NCCL Ring: pipelined rings, one per channel, every rail in use.

All-reduce is a reduce-scatter then an all-gather around the ring
(``nsteps = 2(p-1)``), so each ring hop carries ``2(p-1)/p`` of its channel's
share; all-gather and reduce-scatter carry ``(p-1)/p``; broadcast and reduce
pipeline the whole share along the ring from (to) the root, leaving one hop
unused.  ``src/device/all_reduce.h``, ``all_gather.h``, ``broadcast.h``;
``src/graph/tuning.cc`` (nsteps).
"""

from __future__ import annotations

import numpy as np

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
        # The pattern depends on the layout (and the root, for a chain) alone: built once per layout, each
        # call carrying its own share, as pack() would (a 2 048-node ring of 8 rails is 147 456 hops).
        key = (kind, root) if kind in ("broadcast", "reduce") else None
        kept = layout.__dict__.setdefault("_ring_patterns", {})
        if key not in kept:
            rs = rings(layout)
            src, dst, _ = self._flows(kind, layout, 1.0, root, rs)
            kept[key] = (src, dst, len(rs))
        src, dst, n_rings = kept[key]
        return src.copy(), dst.copy(), np.full(len(src), nbytes / n_rings * _FACTOR[kind](layout.n_ranks))

    def _flows(self, kind, layout, nbytes, root, rs=None):
        rs = rings(layout) if rs is None else rs
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
