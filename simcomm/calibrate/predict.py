"""Predict the calibration cases with simcomm itself: the flow engine on the emulated cluster.

The cluster a record was measured on becomes a :class:`~simcomm.topologies.Topology`:

* every host is a node-local switch ``h<i>`` (its NIC) with its ranks hanging
  off it by a ``loopback`` link (100 GB/s, no latency: far above any link we
  emulate, so same-host traffic is free), or, where the record measured the
  host (``host``: :mod:`simcomm.runtimes.host`), at half its copy rate (the
  sender's and the receiver's copy both run on the host), with every rank
  reducing at the host's measured rate (γ = 1 / reduce rate; 0 without it);
* ``star``: every host joins one switch by the calibrated link class;
  ``two-tier``: hosts join their leaf switch, leaves join a spine by trunks
  at the recorded trunk/host rate ratio.

The calibrated link carries the fitted TCP goodput as its bandwidth and half
the fitted α per hop, so a host-to-host route through one switch adds up to
exactly α.  Trunks add bandwidth limits but no latency (the fit has no way
to split α between hops it never isolated).

Each case is the plan gloo really runs (see docs/calibration.md): all-reduce
is ``allreduce/ring``, all-gather ``allgather/gloo`` (the ring, but on 2 ranks the pair's
two directions in turn: gloo posts send-first), broadcast
``broadcast/gloo`` (all sends of a rank posted at once), PS push / pull are
concurrent point-to-point transfers into / out of rank 0.  The engine's
max-min fair flow model prices the contention on every link.
"""

from __future__ import annotations

import networkx as nx

from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes.host import HostRates, host_gamma, loopback_rate
from simcomm.runtimes.mpi import GLOO
from simcomm.topologies.base import Topology

__all__ = ["CASES", "GLOO_ALGORITHMS", "ACK_SHARE", "ack_share", "cluster_topology", "case_plan", "predict",
           "closed_form", "with_ack_share"]

CASES = ("allreduce", "allgather", "broadcast", "ps_push", "ps_pull", "p2p")
#: the catalogue algorithm each gloo collective runs (torch's ProcessGroupGloo defaults)
GLOO_ALGORITHMS = {k: GLOO[k] for k in ("allreduce", "allgather", "broadcast")}
LOOPBACK = LinkClass("loopback", 1e11, 0.0, "shm", "same-host TCP loopback (not a bottleneck here)")

#: Cases whose host links carry data in both directions at once (every rank of a ring sends
#: and receives in every step).  Derived, not fitted: Linux TCP sends a delayed ACK every two
#: full segments, a 66-byte frame (14 Ethernet + 20 IP + 32 TCP with timestamps) per two
#: 1514-byte data frames, and those ACKs share the shaped direction with that direction's own
#: data.  So data keeps 1514 / (1514 + 33) of the rate the one-way ping-pong fit measured
#: (with an MTU of m bytes, frames are m + 14 bytes: :func:`ack_share`).
BIDIRECTIONAL = ("allreduce", "allgather")


def ack_share(mtu: int = 1500) -> float:
    """Share of a link direction left to data when it also carries the reverse flow's delayed ACKs."""
    frame = float(mtu) + 14.0
    return frame / (frame + 66.0 / 2.0)


ACK_SHARE = ack_share(1500)


def cluster_topology(rank_host: tuple[int, ...], leaf_of: tuple[int, ...], alpha: float, bandwidth: float,
                     trunk_ratio: float = 1.0, name: str = "emulated", host: HostRates | None = None,
                     loopback: tuple[float, float] | None = None) -> Topology:
    """Hosts (``leaf_of[h]`` = leaf of host h) on a star or two-tier fabric, ranks placed by ``rank_host``.

    ``host``: the record's measured CPU rates (reduction and loopback copies cost what the host
    does); None keeps same-host traffic and reductions free.  ``loopback``: the same-host ping-pong's
    fitted (alpha, bandwidth), which prices same-host traffic where the record measured it (half the
    alpha on each of the two rank-host hops).
    """
    if bandwidth <= 0 or alpha < 0:
        raise ConfigError(f"link: bandwidth {bandwidth!r} must be > 0 and alpha {alpha!r} >= 0")
    host_lc = LinkClass("calib-inter", bandwidth, alpha / 2.0, "ethernet", "calibrated host link")
    loop, gamma = LOOPBACK, 0.0
    if host is not None:
        loop = LinkClass("loopback", loopback_rate(host), 0.0, "shm", "same-host TCP loopback: two copies per byte "
                         "at the host's measured copy rate")
        gamma = host_gamma(host)
    if loopback is not None:
        loop = LinkClass("loopback", loopback[1], loopback[0] / 2.0, "shm", "same-host TCP loopback, calibrated")
    links = {"loopback": loop, "calib-inter": host_lc}
    g = nx.Graph()
    leaves = sorted(set(leaf_of))
    two_tier = len(leaves) > 1
    if two_tier:
        trunk = LinkClass("calib-trunk", bandwidth * trunk_ratio, 0.0, "ethernet", "leaf-spine trunk")
        links["calib-trunk"] = trunk
        g.add_node("spine", kind="switch", machine=None)
    for j in leaves:
        g.add_node(f"leaf{j}", kind="switch", machine=None)
        if two_tier:
            g.add_edge(f"leaf{j}", "spine", link="calib-trunk")
    for h, j in enumerate(leaf_of):
        g.add_node(f"h{h}", kind="switch", machine=h)
        g.add_edge(f"h{h}", f"leaf{j}", link="calib-inter")
    ranks = []
    for r, h in enumerate(rank_host):
        g.add_node(f"r{r}", kind="rank", machine=h, gamma=gamma)
        g.add_edge(f"r{r}", f"h{h}", link="loopback")
        ranks.append(f"r{r}")
    # every route is unique on a tree, so shortest paths are the real ones
    return Topology(name, g, links, tuple(ranks), meta={"builder": "calibrate", "hosts": len(leaf_of)})


def case_plan(case: str, p: int, nbytes: float):
    """The op plan of one calibration case on ``p`` ranks (root / server = rank 0)."""
    b = PlanBuilder(p)
    if case in GLOO_ALGORITHMS:
        b.collective(case, range(p), nbytes, algorithm=GLOO_ALGORITHMS[case])
    elif case == "ps_push":
        for r in range(1, p):
            b.transfer(r, 0, nbytes)
    elif case == "ps_pull":
        for r in range(1, p):  # one stream per message: gloo posts them all at once
            b.transfer(0, r, nbytes, stream=f"to{r}")
    elif case == "p2p":
        b.transfer(0, 1, nbytes)
    else:
        raise ConfigError(f"case: {case!r} is not one of {', '.join(CASES)}")
    return b.build(case=case)


def predict(case: str, p: int, nbytes: float, topology: Topology, mtu: int = 1500) -> float:
    """Seconds the flow engine predicts for ``case`` on ``topology`` (``mtu``: of the links, for the ACK share)."""
    from simcomm.engine import simulate
    from simcomm.runtimes import get_runtime

    if p < 2:
        return 0.0
    if case in BIDIRECTIONAL:
        topology = with_ack_share(topology, ack_share(mtu))
    # the plan names gloo's algorithms; gloo's runtime runs them
    return float(simulate(case_plan(case, p, nbytes), topology, fidelity="flow",
                          runtime=get_runtime("gloo")).makespan)


def with_ack_share(topology: Topology, share: float = ACK_SHARE) -> Topology:
    """The same cluster with its calibrated links at ``share`` of their rate (see BIDIRECTIONAL)."""
    links = {k: (v.scaled(share, suffix="") if k.startswith("calib-") else v)
             for k, v in topology.links.items()}
    return Topology(topology.name, topology.graph, links, topology.ranks, meta=dict(topology.meta))


def closed_form(case: str, p: int, nbytes: float, alpha: float, beta: float) -> float | None:
    """The catalogue's contention-free Hockney form of the textbook algorithm, where one exists.

    Shown beside the prediction so a reader sees what the network adds: for
    broadcast it is ``broadcast/binomial`` (MPICH's), not gloo's schedule.
    """
    from simcomm.collectives import ALGORITHMS

    key = {"allreduce": "allreduce/ring", "allgather": "allgather/ring",
           "broadcast": "broadcast/binomial"}.get(case)
    if key is None:
        return None
    return float(ALGORITHMS.get(key).cost(p, nbytes, alpha, beta).total)
