"""Put a calibrated link file (``simcomm calibrate --out``) onto a cluster's links.

``simcomm calibrate`` fits, end to end between two ranks, a latency α (seconds) and
a goodput β⁻¹ (bytes/s) per class: ``calib-inter`` between ranks on different hosts,
``calib-intra`` between ranks on one host (docs/calibration.md).  A topology prices a
route as the sum of its hops' latencies and the bottleneck of their bandwidths, so the
fitted numbers are mapped onto the cluster as follows (``scenario key links``):

* ``calib-inter`` replaces the **host links**: each edge between a machine (its rank or
  NIC) and the first network switch.  A route between two hosts crosses two of them, and
  perhaps other hops (the intranode path to the NIC, switch-to-switch trunks), so each
  host link gets the latency ``(α - L_other) / 2``, where ``L_other`` is the latency of
  the other hops on the route between rank 0 and the first rank of another machine;
  the end-to-end latency then equals the fitted α (floored at 0, said so).  Trunks keep
  the preset's rate; a calibration on a single switch cannot see them.
* ``calib-intra`` replaces, in every machine, the intranode link classes on the route
  between the first two ranks of machine 0, the latency split evenly over that route's
  hops (unused, and said so, with one rank per machine).

Calibrated classes are *measured*: the stack's efficiency and per-message overhead
are already in them, so the transport stack leaves them as they are
(:attr:`~simcomm.links.base.LinkClass.measured`).  Every mapping is returned as a line
for ``assumed:``.
"""

from __future__ import annotations

from simcomm.errors import ConfigError
from simcomm.links.base import INTRANODE_FAMILIES as INTRANODE
from simcomm.links.base import LinkClass
from simcomm.topologies.base import Topology

__all__ = ["with_calibrated_links", "host_edges"]



def _machine(g, n):
    return g.nodes[n].get("machine")


def host_edges(topo: Topology) -> list[tuple]:
    """Edges joining a machine's rank or NIC to a network switch (the first network hop)."""
    g = topo.graph
    out = []
    for u, v, name in g.edges(data="link"):
        ku, kv = g.nodes[u]["kind"], g.nodes[v]["kind"]
        if topo.links[name].family in INTRANODE:
            continue
        if {ku, kv} in ({"rank", "switch"}, {"nic", "switch"}):
            sw = u if ku == "switch" else v
            if _machine(g, sw) is None or _machine(g, sw) != _machine(g, u if sw == v else v):
                out.append((u, v))
    return out


def _route_edges(topo: Topology, a: int, b: int) -> list[tuple]:
    path = list(topo.path(a, b))  # node names, rank a to rank b
    return list(zip(path, path[1:], strict=False))


def with_calibrated_links(topo: Topology, classes: dict[str, LinkClass], source: str) -> tuple[Topology, list[str]]:
    """``topo`` with the calibrated classes on its host (and intranode) links, and the assumed lines."""
    if not ({"calib-inter", "calib-intra"} & set(classes)):
        raise ConfigError(f"links: {source!r} has no calib-inter or calib-intra class (it holds "
                          f"{', '.join(sorted(classes)) or 'none'}); give a file written by simcomm calibrate")
    g = topo.graph.copy()
    links = dict(topo.links)
    notes = []
    machines = [topo.machine_of(r) for r in range(topo.n_ranks)]
    if "calib-intra" in classes:
        fit = classes["calib-intra"]
        peer = next((r for r in range(1, topo.n_ranks) if machines[r] == machines[0]), None)
        route = _route_edges(topo, 0, peer) if peer is not None else []
    if "calib-intra" in classes and not route:
        notes.append(f"links: {source}: calib-intra not used (one rank per machine)")
    elif "calib-intra" in classes:
        lc = LinkClass("calib-intra", fit.bandwidth, fit.latency / max(1, len(route)), fit.family, fit.summary,
                       source, True)
        links[lc.name] = lc
        # every machine alike: each edge of a link class on that route becomes calib-intra
        kinds = {g.edges[e]["link"] for e in route}
        for u, v, name in list(g.edges(data="link")):
            if name in kinds:
                g.edges[u, v]["link"] = lc.name
        notes.append(f"links: {source}: calib-intra ({fit.bandwidth / 1e6:.4g} MB/s, {fit.latency * 1e6:.4g} us) on "
                     f"the intranode links ({', '.join(sorted(kinds))}), {len(route)} hop(s) between ranks of one "
                     "machine; measured, so the stack does not scale it")
    if "calib-inter" in classes:
        fit = classes["calib-inter"]
        others = [r for r in range(1, topo.n_ranks) if machines[r] != machines[0]]
        if not others:
            raise ConfigError(f"links: {source!r} has calib-inter but the cluster has one machine")
        hosts = set(map(frozenset, host_edges(topo)))
        # the first machine whose route from rank 0 leaves through a NIC: machines sharing an NVLink domain
        # (GB200 NVL72 trays of one rack) reach each other over NVLink, without a host link to calibrate
        route, on_host = [], []
        for r in others:
            route = _route_edges(topo, 0, r)
            on_host = [e for e in route if frozenset(e) in hosts]
            if on_host:
                break
        if not on_host:
            raise ConfigError(f"links: cluster {topo.name!r} has no host-to-switch link on any route between "
                              "machines to put calib-inter on (its machines share one NVLink domain)")
        rest = sum(links[g.edges[e]["link"]].latency for e in route if frozenset(e) not in hosts)
        per_hop = (fit.latency - rest) / len(on_host)
        if per_hop < 0:
            notes.append(f"links: calib-inter's fitted latency {fit.latency * 1e6:.4g} us is below the preset's "
                         f"other hops ({rest * 1e6:.4g} us); host links get latency 0")
        lc = LinkClass("calib-inter", fit.bandwidth, max(0.0, per_hop), fit.family, fit.summary, source, True)
        links[lc.name] = lc
        for u, v in host_edges(topo):
            g.edges[u, v]["link"] = lc.name
        notes.append(f"links: {source}: calib-inter ({fit.bandwidth / 1e6:.4g} MB/s, {fit.latency * 1e6:.4g} us end "
                     f"to end) on every host link, {max(0.0, per_hop) * 1e6:.4g} us per hop so that a route between "
                     f"machines adds up to the fitted latency; measured, so the stack does not scale it; trunks keep "
                     f"the preset's rate")
    used = {name for _, _, name in g.edges(data="link")}
    links = {k: v for k, v in links.items() if k in used}
    return Topology(topo.name, g, links, topo.ranks, router=topo.router,
                    meta={**topo.meta, "calibrated_links": source}, recipe=topo.recipe, network=topo.network), notes

