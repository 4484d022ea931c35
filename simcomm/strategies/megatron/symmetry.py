"""What megatron's folds assume of the cluster, checked on its routes.

The replica fold (``replicas=auto|one``) simulates one data replica's tensor, context and pipeline traffic and
counts the others' in the link bytes only: exact when no link carries traffic of two replicas, since each
replica's flows then meet only their own (docs/engine.md, "Replica and lane folding").  A rail-optimised fabric
breaks it when a replica's point-to-point hops leave their rail (a ring-attention ring of 16 ranks over two
DGX nodes sends GPU 6 -> GPU 0 of the next node through a spine, and every replica's alike hop takes the same
spine up-link): folded, those hops run alone and the step comes out too fast (tp 2, cp 8, pp 2, dp 2 on 8 DGX
H100 nodes: 23.5 % under every replica simulated).  :func:`replicas_apart` checks the premise on the routes
(only when a plan folds), and a folded plan says in an ``assumed:`` line when it fails.  It is not a reason to
simulate every replica: the full plan routes such a hop through a spine, where NCCL's PXN (``NCCL_PXN_DISABLE=0``, the default since
2.12; ``src/graph/paths.cc``, the proxy GPU chosen on the destination NIC's rail) relays it over NVLink to the
GPU on the destination's rail and keeps it on that rail's leaf, where the replicas are apart again; and
keeping all replicas would multiply the plans ``plan`` simulates by dp.

The ring fold (one compute chain and one send per ring step per stage) also needs every hop of a ring to cross
the same link classes (:func:`rings_alike`): a ring that leaves its node on some hops only is paced by those.
"""

from __future__ import annotations

import numpy as np

__all__ = ["replicas_apart", "rings_alike"]


def _replica_hops(lay, e: int) -> list[tuple[int, int]]:
    """Data replica ``e``'s point-to-point hops: ring-attention neighbours, pipeline neighbours (the interleaved
    schedule's last stage to the first too) and tensor-parallel ring neighbours, on every lane and stage."""
    hops = []
    for p in range(lay.pp):
        for c in range(lay.cp):
            d = e * lay.cp + c
            for t in range(lay.tp):
                r = lay.rank(t, p, d)
                if lay.cp > 1:
                    hops.append((r, lay.rank(t, p, e * lay.cp + (c + 1) % lay.cp)))
                if lay.pp > 1 and (p + 1 < lay.pp or lay.virtual > 1):
                    hops.append((r, lay.rank(t, (p + 1) % lay.pp, d)))
                if lay.tp > 1:
                    hops.append((r, lay.rank((t + 1) % lay.tp, p, d)))
    return hops


def replicas_apart(lay, topology) -> bool:
    """Whether no link carries point-to-point hops of data replica 0 and of another replica (the replica
    fold's premise; see the module).  The data-parallel collectives, which the fold keeps whole, are not
    counted."""
    data = lay.dp // lay.cp
    if data < 2:
        return True
    hops = np.array([_replica_hops(lay, e) for e in range(data)], dtype=np.int64)  # (replica, hop, src/dst)
    if hops.shape[1] == 0:
        return True
    lens, links = topology.routes(hops[:, :, 0].ravel(), hops[:, :, 1].ravel())
    owner = np.repeat(np.arange(hops.shape[0] * hops.shape[1]) // hops.shape[1], lens)  # each link's replica
    mine = np.unique(links[owner == 0])
    return not bool(np.isin(links[owner > 0], mine).any())


def rings_alike(lay, topology) -> bool:
    """Whether every hop of every simulated context-parallel ring (each stage's, each tensor-parallel lane's,
    the first data replica's) crosses links of the same classes in the same order (``topology.route``), so that
    one hop's send can stand for every rank's (:meth:`~simcomm.strategies.megatron.context.ContextParallel.
    _folded_ring`).  A ring of 8 ranks over two DGX nodes is not: 6 NVLink hops and 2 over the NICs."""
    names = topology.link_names
    seen = None
    for p in range(lay.pp):
        for t in range(lay.tp):
            ring = lay.cp_groups(t, p)[0]
            for a, b in zip(ring, ring[1:] + ring[:1], strict=True):
                classes = tuple(names[i] for i in topology.route(a, b))
                if seen is None:
                    seen = classes
                elif classes != seen:
                    return False
    return True
