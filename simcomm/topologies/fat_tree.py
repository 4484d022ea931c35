"""k-ary fat-tree (3 levels) and leaf-spine (2 levels) with oversubscription and ECMP.

Three levels (Al-Fares et al., SIGCOMM 2008): ``k`` pods, each with ``k/2``
edge and ``k/2`` aggregation switches; ``(k/2)^2`` core switches; ``k^3/4``
host ports.  Edge switch ``e`` of pod ``p`` serves hosts ``p*k^2/4 + e*k/2 ...``
and joins every aggregation switch of its pod; aggregation switch ``a`` joins
cores ``(a, 0..k/2-1)``.  Two levels: ``k`` leaves with ``k/2`` hosts each and
``k/2`` spines joined to every leaf (``k^2/2`` hosts).

Oversubscription ``r``: the edge (leaf) uplinks carry bandwidth ``B/r``, so a
full edge switch has down:up capacity ``r:1``; aggregation-core links stay at
``B``.  Routing is up/down: up to the lowest common level, then down.  Among the
equal-cost choices (aggregation switch, core):

* ``routing="ecmp"`` (Ethernet and RoCE): a hash of the (source,
  destination) pair picks, so routes are deterministic and spread evenly on
  average, but a few flows can collide on one uplink;
* ``routing="d-mod-k"`` (InfiniBand, the default on IB links): the
  destination picks, as OpenSM's fat-tree routing engines (ftree, and
  D-mod-K in the literature: Zahavi, "D-Mod-K Routing Providing Non-Blocking
  Traffic for Shift Permutations on Real Life Fat Trees", 2010) assign every
  destination its own up-port at each level.  Any shift permutation (every
  host i sending to host i+s, as NCCL's rail-aligned rings do) is then
  contention-free on a full fat-tree.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.topologies.base import DEFAULT_GAMMA, TOPOLOGIES, Topology
from simcomm.topologies.fabric import FabricRouter, NodeArrays, add_link, positive_int
from simcomm.topologies.wiring import KINDS, Wiring

__all__ = ["fat_tree", "add_fat_tree", "auto_k", "FatTreeFabric", "ROUTINGS"]

ROUTINGS = ("ecmp", "d-mod-k")


def auto_k(hosts: int, levels: int = 3) -> int:
    """Smallest even ``k >= 2`` whose fat-tree has at least ``hosts`` host ports."""
    k = 2
    while (k**3 // 4 if levels == 3 else k * k // 2) < hosts:
        k += 2
    return k


class FatTreeFabric:
    """Up/down ECMP routes computed from host coordinates."""

    def __init__(self, hosts: list, k: int, levels: int, edge: list, agg: list, core: list,
                 routing: str = "ecmp", wiring: Wiring | None = None):
        self.hosts, self.half, self.levels = hosts, k // 2, levels
        self.edge, self.agg, self.core = edge, agg, core  # see add_fat_tree for layouts
        self.routing = routing
        self._nodes = NodeArrays(hosts, edge, agg, core)
        self.wiring = wiring  # the arrays _wiring made (links_many's link ids are theirs), None on a graph

    def _key(self, j, key):
        """The equal-cost choice: the flow hash (ECMP) or the destination's digits (D-mod-K)."""
        if self.routing == "ecmp":
            return key
        h = self.half
        return j % h + h * ((j // h) % h)

    def path(self, i: int, j: int, key: int) -> list:
        h, hosts = self.half, self.hosts
        key = self._key(j, key)
        ei, ej = i // h, j // h  # global edge (leaf) switch index
        if ei == ej:
            return [hosts[i], self.edge[ei], hosts[j]]
        a = key % h
        if self.levels == 2:
            return [hosts[i], self.edge[ei], self.agg[a], self.edge[ej], hosts[j]]
        pi, pj = ei // h, ej // h
        if pi == pj:
            return [hosts[i], self.edge[ei], self.agg[pi * h + a], self.edge[ej], hosts[j]]
        c = (key // h) % h
        return [hosts[i], self.edge[ei], self.agg[pi * h + a], self.core[a * h + c],
                self.agg[pj * h + a], self.edge[ej], hosts[j]]

    @property
    def max_nodes(self) -> int:
        """Nodes on the longest host-to-host path."""
        return 7 if self.levels == 3 else 5

    def paths_many(self, i: np.ndarray, j: np.ndarray, key: np.ndarray, idx: dict) -> np.ndarray:
        """:meth:`path` of many host pairs as node index rows (``idx``: node -> index), padded with -1."""
        h = self.half
        key = self._key(j, key)
        host, edge, agg, core = self._nodes.of(idx)
        ei, ej, a = i // h, j // h, key % h
        out = np.full((len(i), self.max_nodes), -1, dtype=np.int64)
        out[:, 0], out[:, 1] = host[i], edge[ei]
        near = ei == ej  # same edge switch: host, edge, host
        out[near, 2] = host[j[near]]
        up = ~near
        if self.levels == 2:
            out[up, 2], out[up, 3], out[up, 4] = agg[a[up]], edge[ej[up]], host[j[up]]
            return out
        pi, pj = ei // h, ej // h
        pod = up & (pi == pj)  # same pod: up to an aggregation switch and down
        out[pod, 2], out[pod, 3], out[pod, 4] = agg[pi[pod] * h + a[pod]], edge[ej[pod]], host[j[pod]]
        far = up & (pi != pj)
        c = (key[far] // h) % h
        out[far, 2] = agg[pi[far] * h + a[far]]
        out[far, 3] = core[a[far] * h + c]
        out[far, 4] = agg[pj[far] * h + a[far]]
        out[far, 5], out[far, 6] = edge[ej[far]], host[j[far]]
        return out

    def links_many(self, i: np.ndarray, j: np.ndarray, key: np.ndarray) -> np.ndarray:
        """The directed link ids of :meth:`path` of many host pairs, as rows padded with -1 (``i != j``).

        Link ids follow :func:`_wiring`'s edge order: host ``x``'s link is edge ``x`` (up: ``2x``), then the
        edge-aggregation links (``n + e*h + a``), then the aggregation-core links (``n + E*h + (p*h + a)*h + c``),
        each oriented upwards, so the way up is the even id and the way down the odd one.
        """
        h, n = self.half, len(self.hosts)
        key = self._key(j, key)
        ei, ej, a = i // h, j // h, key % h
        out = np.full((len(i), 6), -1, dtype=np.int64)
        out[:, 0] = 2 * i
        near = ei == ej
        out[near, 1] = 2 * j[near] + 1
        up = ~near
        far = up & ((ei // h) != (ej // h)) if self.levels == 3 else np.zeros(len(i), dtype=bool)
        pod = up & ~far  # up to an aggregation switch (a spine on two levels) and down
        out[up, 1] = 2 * (n + ei[up] * h + a[up])
        out[pod, 2] = 2 * (n + ej[pod] * h + a[pod]) + 1
        out[pod, 3] = 2 * j[pod] + 1
        if far.any():
            core = n + len(self.edge) * h  # first aggregation-core edge
            c = (key[far] // h) % h
            out[far, 2] = 2 * (core + ((ei[far] // h) * h + a[far]) * h + c)
            out[far, 3] = 2 * (core + ((ej[far] // h) * h + a[far]) * h + c) + 1
            out[far, 4] = 2 * (n + ej[far] * h + a[far]) + 1
            out[far, 5] = 2 * j[far] + 1
        return out

    def edge_ends(self) -> tuple[list, list]:
        """The two ends of each edge :meth:`links_many` numbers (edge ``e``: ids ``2e`` one way, ``2e+1`` back),
        in :func:`_wiring`'s order; a two-level cluster maps them to its own graph's link ids."""
        h, n_edge = self.half, len(self.edge)
        us = list(self.hosts) + [self.edge[e] for e in range(n_edge) for _ in range(h)]
        vs = [self.edge[x // h] for x in range(len(self.hosts))]
        vs += [self.agg[(e // h) * h + a if self.levels == 3 else a] for e in range(n_edge) for a in range(h)]
        if self.levels == 3:
            us += [self.agg[g] for g in range(len(self.agg)) for _ in range(h)]
            vs += [self.core[(g % h) * h + c] for g in range(len(self.agg)) for c in range(h)]
        return us, vs

    def pair_counts(self, topo, hosts: np.ndarray, cls: np.ndarray) -> np.ndarray | None:
        """Links crossed by the pairs of each row of ``hosts`` of different ``cls``, counted by classes
        (D-mod-K; None under ECMP): :func:`simcomm.topologies.pair_counts.fat_tree_counts`."""
        from simcomm.topologies.pair_counts import fat_tree_counts

        return fat_tree_counts(self, topo, hosts, cls)


def _wiring(n: int, k: int, levels: int, gamma: float, classes: tuple[str, str, str]) -> tuple[Wiring, tuple]:
    """The graph ``rank_graph(n)`` + :func:`add_fat_tree` make, as arrays (see :mod:`simcomm.topologies.wiring`).

    ``classes``: the link classes of host, edge-uplink and aggregation-core links.  Returns the wiring and
    the switch names ``(edge, agg, core)``.  Nodes: ranks, edge, aggregation, core switches; edges in the
    order networkx lists them for that graph (each rank's link, then each edge switch's uplinks, then each
    aggregation switch's core links).
    """
    h = k // 2
    n_edge = k * h if levels == 3 else k
    edge, agg, core = _switch_names(k, levels)
    names = [f"r{i}" for i in range(n)]
    nodes = names + edge + agg + core
    switches = len(edge) + len(agg) + len(core)
    kind = np.concatenate((np.zeros(n, np.int8), np.full(switches, KINDS.index("switch"), np.int8)))
    machine = np.concatenate((np.arange(n, dtype=np.int64), np.full(switches, -1, np.int64)))
    gam = np.concatenate((np.full(n, float(gamma)), np.full(switches, np.nan)))
    e0, a0 = n, n + n_edge  # first edge and aggregation switch node
    us = [np.arange(n), e0 + np.repeat(np.arange(n_edge), h)]
    vs = [e0 + np.arange(n) // h]
    ups = np.repeat(np.arange(n_edge), h)
    vs.append(a0 + ((ups // h) * h if levels == 3 else 0) + np.tile(np.arange(h), n_edge))
    if levels == 3:
        c0, aggs = a0 + len(agg), np.repeat(np.arange(k * h), h)  # each aggregation switch's h core links
        us.append(a0 + aggs)
        vs.append(c0 + (aggs % h) * h + np.tile(np.arange(h), k * h))
    counts = [n, n_edge * h] + ([k * h * h] if levels == 3 else [])
    names_used = tuple(dict.fromkeys(classes))
    code = [names_used.index(c) for c in classes]
    link = np.concatenate([np.full(m, code[x], np.int64) for x, m in enumerate(counts)])
    wiring = Wiring(nodes, kind, machine, gam, np.concatenate(us).astype(np.int64),
                    np.concatenate(vs).astype(np.int64), link, names_used)
    return wiring, (edge, agg, core)


def _switch_names(k: int, levels: int) -> tuple[list[str], list[str], list[str]]:
    h = k // 2
    n_edge = k * h if levels == 3 else k
    edge = [f"edge{e // h}.{e % h}" if levels == 3 else f"leaf{e}" for e in range(n_edge)]
    agg = [f"agg{a // h}.{a % h}" for a in range(k * h)] if levels == 3 else [f"spine{s}" for s in range(h)]
    core = [f"core{c // h}.{c % h}" for c in range(h * h)] if levels == 3 else []
    return edge, agg, core


def add_fat_tree(g: nx.Graph, hosts: list, host_link: LinkClass, links: dict, *, k: int | None = None,
                 link: str | LinkClass | None = None, oversubscription: float = 1.0,
                 levels: int = 3, routing: str | None = None) -> FatTreeFabric:
    """Add a fat-tree's switches and links for ``hosts`` (placed in order on the ports).

    ``routing`` defaults to ``d-mod-k`` on InfiniBand links and ``ecmp`` otherwise.
    """
    k, routing, up_lc, fab_lc = _checked(len(hosts), host_link, links, k, link, oversubscription, levels, routing)
    h = k // 2
    n_edge = k * h if levels == 3 else k
    edge, agg, core = _switch_names(k, levels)
    g.add_nodes_from(edge + agg + core, kind="switch", machine=None)
    g.add_edges_from(((hn, edge[i // h]) for i, hn in enumerate(hosts)), link=host_link.name)
    if levels == 3:
        g.add_edges_from(((edge[e], agg[(e // h) * h + a]) for e in range(n_edge) for a in range(h)),
                         link=up_lc.name)
        g.add_edges_from(((agg[p * h + a], core[a * h + c]) for p in range(k) for a in range(h)
                          for c in range(h)), link=fab_lc.name)
    else:
        g.add_edges_from(((edge[e], agg[s]) for e in range(n_edge) for s in range(h)), link=up_lc.name)
    return FatTreeFabric(hosts, k, levels, edge, agg, core, routing)


def _checked(n_hosts: int, host_link: LinkClass, links: dict, k: int | None, link: str | LinkClass | None,
             oversubscription: float, levels: int, routing: str | None) -> tuple[int, str, LinkClass, LinkClass]:
    """The checked ``k`` and routing, and the uplink and fabric link classes (recorded in ``links``)."""
    if levels not in (2, 3):
        raise ConfigError(f"fat-tree: levels must be 2 or 3, got {levels!r}")
    if routing is None:
        routing = "d-mod-k" if host_link.family == "infiniband" else "ecmp"
    if routing not in ROUTINGS:
        raise ConfigError(f"fat-tree: routing {routing!r} is not valid; valid choices: {', '.join(ROUTINGS)}")
    k = auto_k(n_hosts, levels) if k is None else positive_int(k, "fat-tree: k", 2)
    if k % 2:
        raise ConfigError(f"fat-tree: k must be even, got {k}")
    ports = k**3 // 4 if levels == 3 else k * k // 2
    if n_hosts > ports:
        raise ConfigError(f"fat-tree: {n_hosts} hosts do not fit a k={k} tree with {ports} host ports")
    if isinstance(oversubscription, bool) or not isinstance(oversubscription, (int, float)) \
            or not 1.0 <= oversubscription < float("inf"):
        raise ConfigError(f"fat-tree: oversubscription must be a number >= 1, got {oversubscription!r}")
    fab_lc = add_link(links, link if link is not None else host_link)
    up_lc = fab_lc if oversubscription == 1 else add_link(
        links, fab_lc.scaled(1.0 / oversubscription, suffix=f"-os{oversubscription:g}"))
    return k, routing, up_lc, fab_lc


@TOPOLOGIES.register('fat-tree', summary='builder: k-ary fat-tree (3 levels) or leaf-spine (2), oversubscription, ECMP',
                     reference='Al-Fares, Loukissas, Vahdat, SIGCOMM 2008')
def fat_tree(k: int | None = None, *, link: str | LinkClass = "ib-edr", oversubscription: float = 1.0,
             levels: int = 3, hosts: int | None = None, host_link: str | LinkClass | None = None,
             gamma: float = DEFAULT_GAMMA, routing: str | None = None) -> Topology:
    """A fat-tree whose hosts are ranks; ``hosts`` (default: every port) are placed in port order."""
    if k is None and hosts is None:
        raise ConfigError("fat-tree: give k or hosts")
    kk = auto_k(positive_int(hosts, "fat-tree: hosts"), levels) if k is None else k
    ports = kk**3 // 4 if levels == 3 else kk * kk // 2
    n = ports if hosts is None else positive_int(hosts, "fat-tree: hosts")
    links: dict = {}
    hl = add_link(links, host_link if host_link is not None else link)
    # Built as arrays (a million hosts would be ~2 GB of networkx graph); the same graph as
    # rank_graph + add_fat_tree when something asks for it (tests/topologies/test_wiring.py).
    kk, routing, up_lc, fab_lc = _checked(n, hl, links, kk, link, oversubscription, levels, routing)
    wiring, (edge, agg, core) = _wiring(n, kk, levels, gamma, (hl.name, up_lc.name, fab_lc.name))
    names = wiring.nodes[:n]
    fab = FatTreeFabric(names, kk, levels, edge, agg, core, routing, wiring)
    meta = {"builder": "fat-tree", "k": kk, "levels": levels, "hosts": n,
            "oversubscription": oversubscription, "link": fab_name(link), "routing": fab.routing}
    return Topology.from_wiring(f"fat-tree-k{kk}" + ("" if levels == 3 else "-2l"), wiring, links,
                                np.arange(n), router=FabricRouter(fab, names), meta=meta)


def fab_name(link: str | LinkClass) -> str:
    return link if isinstance(link, str) else link.name
