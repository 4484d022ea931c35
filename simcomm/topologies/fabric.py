"""Shared plumbing for builders: a *fabric* joins a list of host nodes by switches.

A fabric builder (``add_star``, ``add_fat_tree`` ...) adds its switches and
links to a graph for a given list of host nodes and returns a :class:`Fabric`
whose ``path(i, j, key)`` gives the node path from host ``i`` to host ``j``
computed from the structure alone (no graph search), so routes are cheap
even for tens of thousands of hosts.  ``key`` is the flow hash that picks
among equal-cost paths (ECMP).  The hosts are ranks when a builder is used on
its own and NICs inside :func:`~simcomm.topologies.two_level.two_level`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import cached_property
from typing import Protocol

import networkx as nx
import numpy as np

from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass, link_class
from simcomm.topologies.base import DEFAULT_GAMMA, Topology, ecmp_hash, ecmp_hash_many

__all__ = ["Fabric", "FabricRouter", "add_link", "add_new_edges", "add_new_nodes", "add_new_nodes_data", "copy_relinked",
           "rank_graph", "standalone", "positive_int", "NodeArrays"]


class Fabric(Protocol):
    """Structured router over hosts ``0..n-1``."""

    def path(self, i: int, j: int, key: int) -> list[Hashable]: ...


#: the most ranks one topology may hold: past this the rank arrays and routing tables alone would take
#: gigabytes (they grow with the ranks and the routes asked for), so a larger cluster is refused
#: before any work instead of exhausting memory
MAX_RANKS = 262_144


def check_ranks(total: int, what: str) -> int:
    """``total`` ranks, or one error line when it exceeds :data:`MAX_RANKS`."""
    if total > MAX_RANKS:
        raise ConfigError(f"{what} gives {total:,} ranks; simcomm simulates at most {MAX_RANKS:,}")
    return total


class NodeArrays:
    """Lists of node names as index arrays for one ``node_index``, worked out once.

    A fabric's ``paths_many`` is called once per chunk of pairs; looking up a million host names for
    every chunk cost as much as the routing itself.
    """

    def __init__(self, *name_lists: Sequence[Hashable]):
        self.name_lists = name_lists
        self._kept: tuple[dict, tuple[np.ndarray, ...]] | None = None

    def of(self, idx: dict) -> tuple[np.ndarray, ...]:
        """Each list's node indices under ``idx`` (node -> index)."""
        if self._kept is None or self._kept[0] is not idx:
            self._kept = (idx, tuple(np.fromiter((idx[n] for n in names), dtype=np.int64, count=len(names))
                                     for names in self.name_lists))
        return self._kept[1]


def positive_int(value: object, field: str, minimum: int = 1) -> int:
    """Validate an integer option (bools and floats with fractions are rejected)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{field} must be an integer >= {minimum}, got {value!r}")
    return value


def add_link(links: dict[str, LinkClass], lc: str | LinkClass) -> LinkClass:
    """Resolve ``lc`` and record it in ``links`` (the topology's link table)."""
    cls = link_class(lc)
    old = links.get(cls.name)
    if old is not None and old != cls:
        raise ConfigError(f"two different link classes are both named {cls.name!r}")
    links[cls.name] = cls
    return cls


# A 16 384-GPU cluster is ~36 000 nodes and ~66 000 edges: networkx's add_nodes_from/add_edges_from check each
# one (a pair that may carry data, a node that may be missing or None), which was most of the build.  The two
# helpers below put a new node or edge into ``nx.Graph``'s own dicts exactly as those methods do (the same
# order, one attribute dict per node, one per edge shared by both ends) and hand anything else to networkx.


def add_new_nodes(g: nx.Graph, names: Sequence[Hashable], **attrs) -> None:
    """``g.add_nodes_from(names, **attrs)``, without networkx's per-node checks for names not in ``g`` yet."""
    if type(g) is not nx.Graph:
        g.add_nodes_from(names, **attrs)
        return
    adj, node = g._adj, g._node
    for n in names:
        if n is None or n in node:
            g.add_node(n, **attrs)  # (its checks and its update of a present node's attributes)
        else:
            adj[n] = {}
            node[n] = dict(attrs)
    _clear_cache(g)


def add_new_nodes_data(g: nx.Graph, items) -> None:
    """``g.add_nodes_from(items)`` for ``(name, attributes)`` pairs, without networkx's per-node checks (it first
    tries each pair as a node) for names not in ``g`` yet; each node gets its own copy of its attributes."""
    if type(g) is not nx.Graph:
        g.add_nodes_from(items)
        return
    adj, node = g._adj, g._node
    for n, data in items:
        if n is None or n in node:
            g.add_node(n, **data)
        else:
            adj[n] = {}
            node[n] = dict(data)
    _clear_cache(g)


def add_new_edges(g: nx.Graph, pairs, link: str) -> None:
    """``g.add_edges_from(pairs, link=link)``, without networkx's per-edge checks for pairs of present nodes not
    joined yet."""
    if type(g) is not nx.Graph:
        g.add_edges_from(pairs, link=link)
        return
    adj = g._adj
    for u, v in pairs:
        nbrs = adj.get(u)
        if nbrs is None or v not in adj or v in nbrs:
            g.add_edge(u, v, link=link)
        else:
            nbrs[v] = adj[v][u] = {"link": link}
    _clear_cache(g)


def copy_relinked(src: nx.Graph, rename) -> tuple[nx.Graph, list[tuple[Hashable, Hashable]], list[str]]:
    """A copy of ``src`` whose edges' link classes are renamed, with the copy's edges in order and each one's class.

    An edge with ``link`` class ``L`` between nodes of kinds ``ku`` and ``kv`` (node attribute ``kind``, None when
    absent) gets ``rename(L, ku, kv)``, asked once per such triple, in the order the edges first show it.  The copy
    is ``src.copy()`` with those names: the graph attributes, each node with its own copy of its attributes (in
    ``src``'s order), each edge once in ``src.edges(data=True)``'s walk (each pair from the end met first, a
    self-loop once) with a copy of its attributes shared by both ends, so the adjacency and every link id come out
    as ``Graph.copy``'s.  For ``nx.Graph`` straight into its dicts: one loop over the edges, no callback per edge
    (65 632 edges and 35 660 nodes at 16 384 GPUs)."""
    kind = {n: data.get("kind") for n, data in src.nodes(data=True)}
    named: dict[tuple, str] = {}  # (link class, kind of u, kind of v) -> the new name
    edges: list[tuple[Hashable, Hashable]] = []
    names: list[str] = []
    g = type(src)()
    g.graph.update(src.graph)
    if type(src) is not nx.Graph:
        g.add_nodes_from((n, dict(data)) for n, data in src.nodes(data=True))
        for u, v, data in src.edges(data=True):
            key = (data["link"], kind[u], kind[v])
            name = named.get(key)
            if name is None:
                name = named[key] = rename(*key)
            edges.append((u, v))
            names.append(name)
            g.add_edge(u, v, **{**data, "link": name})
        return g, edges, names
    adj, node = g._adj, g._node
    for n, data in src._node.items():
        adj[n] = {}
        node[n] = dict(data)
    add_edge, add_name, get = edges.append, names.append, named.get
    for u, nbrs in src._adj.items():
        here, ku = adj[u], kind[u]
        for v, data in nbrs.items():
            if v in here:  # joined from ``v``'s side already: ``v`` came first (what Graph.edges skips)
                continue
            key = (data["link"], ku, kind[v])
            name = get(key)
            if name is None:
                name = named[key] = rename(*key)
            add_edge((u, v))
            add_name(name)
            here[v] = adj[v][u] = {**data, "link": name}
    _clear_cache(g)
    return g, edges, names


def _clear_cache(g: nx.Graph) -> None:
    """What networkx does after adding nodes or edges: forget graphs converted from ``g`` (none while building)."""
    cache = getattr(g, "__networkx_cache__", None)
    if cache:
        cache.clear()


def rank_graph(n: int, gamma: float = DEFAULT_GAMMA) -> tuple[nx.Graph, list[str]]:
    """A graph holding ``n`` rank nodes ``r0..r{n-1}``, each its own machine."""
    g = nx.Graph()
    names = [f"r{i}" for i in range(n)]
    g.add_nodes_from((nm, {"kind": "rank", "machine": i, "gamma": gamma}) for i, nm in enumerate(names))
    return g, names


class FabricRouter:
    """Adapts a :class:`Fabric` whose hosts are the ranks to the :class:`Router` protocol."""

    def __init__(self, fabric: Fabric, hosts: Sequence[Hashable]):
        self.fabric = fabric
        self.hosts = hosts
        self._host_of: tuple[tuple, np.ndarray] | None = None  # (ranks, rank -> host position)

    @cached_property
    def index(self) -> dict[Hashable, int]:
        """Host name -> position (made on first use: a million names cost a fifth of a second)."""
        return {h: i for i, h in enumerate(self.hosts)}

    def path(self, topo: Topology, src: Hashable, dst: Hashable) -> list[Hashable]:
        if src == dst:
            return [src]
        i, j = self.index[src], self.index[dst]
        return self.fabric.path(i, j, ecmp_hash(i, j))

    def _hosts_of(self, topo: Topology) -> np.ndarray:
        """Host position of each of ``topo``'s ranks (kept for its rank tuple)."""
        if self._host_of is None or self._host_of[0] is not topo.ranks:
            n = len(topo.ranks)
            if n == len(self.hosts) and topo.ranks == tuple(self.hosts):  # the ranks are the hosts, in order
                host_of = np.arange(n, dtype=np.int64)
            else:
                host_of = np.fromiter((self.index[r] for r in topo.ranks), dtype=np.int64, count=n)
            self._host_of = (topo.ranks, host_of)
        return self._host_of[1]

    def links_many(self, topo: Topology, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Routes of many rank pairs as ``(route_len, links)`` from the fabric's coordinates (the Router
        protocol), the same links :meth:`paths_many` gives; None unless ``topo`` is made of the fabric's own
        :class:`~simcomm.topologies.wiring.Wiring` (then the fabric knows every link's id)."""
        many = getattr(self.fabric, "links_many", None)
        mine, wiring = getattr(self.fabric, "wiring", None), topo.wiring
        if many is None or mine is None or wiring is None or not wiring.same_edges(mine):
            return None
        host_of = self._hosts_of(topo)
        i, j = host_of[a], host_of[b]
        rows = many(i, j, ecmp_hash_many(i, j))
        rows[a == b] = -1  # a rank to itself: no link
        hop = rows >= 0
        return hop.sum(axis=1).astype(np.int64), rows[hop]

    def paths_many(self, topo: Topology, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        """:meth:`path` of many rank pairs as node index rows padded with -1 (the Router protocol).

        The same paths as :meth:`path` (the ECMP key is :func:`ecmp_hash_many` of the same host pair,
        bit for bit); a pair of one rank is the one-node path.
        """
        many = getattr(self.fabric, "paths_many", None)
        if many is None:
            return None
        host_of = self._hosts_of(topo)
        i, j = host_of[a], host_of[b]
        out = many(i, j, ecmp_hash_many(i, j), topo.node_index)
        out[a == b, 1:] = -1  # a rank to itself: its own node, no link
        return out


def standalone(name: str, g: nx.Graph, links: dict[str, LinkClass], hosts: list[str],
               fabric: Fabric, meta: dict) -> Topology:
    """Wrap a fabric whose hosts are ranks into a :class:`Topology`."""
    return Topology(name, g, links, tuple(hosts), router=FabricRouter(fabric, hosts), meta=meta)
