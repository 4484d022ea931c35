"""What a network step costs on the fabric that carries it, beyond NCCL's table.

NCCL prices a network step with one latency per (algorithm, protocol), ``hwLat[NET]`` (``src/graph/tuning.cc``:
2.7 us for Ring/LL, 5.0 for Tree/LL, 14 for Simple), whatever the network: NVIDIA measured those figures on its
InfiniBand clusters, and its IB and socket network plugins report no latency of their own (``props->latency =
0``, so the ``latencyInter`` term the model keeps for a plugin's latency adds nothing; docs/nccl-source-notes.md
§1.3).  Running a call, a step still has to cross the wire: on a fabric whose one-way latency is longer than
InfiniBand's (AWS EFA through libfabric, TCP sockets, GPUDirect-TCPX/TCPXO) every network step of the call's
chain waits for the difference.  simcomm adds it where NCCL's latency counts a network step (its ``interLat``
terms) and nowhere else; the choice of algorithm and protocol stays NCCL's (:func:`simcomm.nccl.tuning.select`).

A fabric's one-way latency is two hops of its NIC's link class (host -> switch -> host: how simcomm's link
classes are derived from measured one-way latencies, docs/links.md), taken before any stack's overhead; the
reference is two hops of InfiniBand's class (2 x 0.7 us, the 1.4 us MPI point-to-point latency its class is
derived from).  On InfiniBand and RoCE (whose class shares InfiniBand's latency, as NCCL shares its model)
nothing changes; on EFA (9.87 us one way) a step costs 8.47 us more, on TCP and TCPX/TCPXO (19 us a hop, an
assumption of their classes) 36.6 us more.  Nothing is fitted: the latencies are the link classes', with their
sources; a ``--links`` file (or ``simcomm calibrate``) that sets a NIC's latency sets this too.
"""

from __future__ import annotations

import math

from simcomm.nccl.layout import GroupLayout

__all__ = ["REFERENCE_LINK", "HOPS", "fabric_extra_us", "network_latency_steps", "fabric_latency_us",
           "fabric_note"]

#: the link class whose latency NCCL's NET figures already hold (InfiniBand; RoCE's class has the same latency)
REFERENCE_LINK = "ib-ndr"
#: hops of a network path whose latency a step waits: host -> switch -> host
HOPS = 2


def _reference_hop_s() -> float:
    from simcomm.links.base import LINKS

    return LINKS.get(REFERENCE_LINK).latency


def fabric_extra_us(layout: GroupLayout) -> float:
    """Microseconds one network step of ``layout`` waits beyond NCCL's table: ``2 x (hop - InfiniBand's hop)``.

    0 on one node, on any fabric whose hop latency is InfiniBand's, and for a NIC class that gives no latency
    (0 s); negative on a faster fabric.
    """
    if layout.n_nodes < 2 or layout.nic_hop_latency <= 0:
        return 0.0
    return HOPS * (layout.nic_hop_latency - _reference_hop_s()) * 1e6


def network_latency_steps(algo: str, kind: str, layout: GroupLayout) -> float:
    """How many network steps NCCL's latency for ``algo`` counts: the coefficient of its ``interLat``.

    Ring: all-reduce ``2 (nodes - 1)``, all-gather and reduce-scatter ``nodes - 1``, broadcast and reduce 1
    (one hop: every channel uses the same order); Tree and NVLS-Tree ``2 floor(log2 nodes)`` (up and down the
    tree); NVLS and CollNet 1; PAT ``floor(log2 nodes) / 3.5``, as its model divides it
    (docs/nccl-source-notes.md §1.4).  0 on one node.
    """
    nodes = layout.n_nodes
    if nodes < 2:
        return 0.0
    depth = int(math.log2(nodes))
    if algo == "ring":
        if kind in ("broadcast", "reduce"):
            return 1.0
        return 2.0 * (nodes - 1) if kind == "allreduce" else float(nodes - 1)
    if algo in ("tree", "nvls-tree"):
        return 2.0 * depth
    if algo in ("nvls", "collnet-direct", "collnet-chain"):
        return 1.0
    if algo == "pat":
        return depth / 3.5
    return 0.0


def fabric_latency_us(algo: str, kind: str, layout: GroupLayout) -> float:
    """Microseconds the call's network steps wait on this fabric beyond NCCL's table (0 on InfiniBand/RoCE)."""
    extra = fabric_extra_us(layout)
    return network_latency_steps(algo, kind, layout) * extra if extra else 0.0


def fabric_note(topology) -> list[str]:
    """An ``assumed:`` line when the cluster's network is not priced as NCCL's table prices it (InfiniBand)."""
    from simcomm.nccl.layout import group_layout

    if topology.n_ranks < 2:
        return []
    layout = group_layout(topology, tuple(range(topology.n_ranks)))
    extra = fabric_extra_us(layout)
    if not extra:
        return []
    return [f"each NCCL network step waits {extra:+.2f} us beyond NCCL's (InfiniBand) table: {HOPS} hops of the "
            f"NIC's link class at {layout.nic_hop_latency * 1e6:.3g} us against {REFERENCE_LINK}'s "
            f"{_reference_hop_s() * 1e6:.3g} us (docs/nccl.md; --links)"]
