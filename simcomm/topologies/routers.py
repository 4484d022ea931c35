"""Routers of a :class:`~simcomm.topologies.base.Topology`: the protocol, minimum-hop ECMP, and the flow hash.

Builders of regular fabrics compute routes from their structure (:mod:`simcomm.topologies.fabric`,
:class:`~simcomm.topologies.two_level.TwoLevelRouter`); :class:`ShortestPathRouter` serves custom graphs.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import networkx as nx
import numpy as np

from simcomm.errors import TopologyError

if TYPE_CHECKING:
    from simcomm.topologies.base import Topology

__all__ = ["Router", "ShortestPathRouter", "ecmp_hash", "ecmp_hash_many"]


def ecmp_hash(*keys: int) -> int:
    """Deterministic 32-bit mix of integers (Python's ``hash`` is salted for str)."""
    h = 0x811C9DC5
    for k in keys:
        h ^= (int(k) * 0x9E3779B1) & 0xFFFFFFFF
        h = (h * 0x01000193) & 0xFFFFFFFF
        h ^= h >> 15
    return h


def ecmp_hash_many(*keys: np.ndarray) -> np.ndarray:
    """:func:`ecmp_hash` of many key tuples at once (one array per key position), bit for bit."""
    h = np.full(len(keys[0]) if keys else 0, 0x811C9DC5, dtype=np.uint64)
    m = np.uint64(0xFFFFFFFF)
    for k in keys:
        # Keys below 2^32 keep every product below 2^64, so uint64 arithmetic is exact.
        h ^= (np.asarray(k, dtype=np.uint64) * np.uint64(0x9E3779B1)) & m
        h = (h * np.uint64(0x01000193)) & m
        h ^= h >> np.uint64(15)
    return h.astype(np.int64)


class Router(Protocol):
    """Chooses the node path between two graph nodes.

    A router may also offer ``paths_many(topo, a, b) -> ndarray | None``: the node
    index paths (``topo.node_index``) of rank pairs ``a[i] -> b[i]`` as the rows of
    a matrix padded with -1, the same paths :meth:`path` gives; None means "not
    for this topology" (:meth:`Topology.routes` then routes pair by pair).  And
    ``links_many(topo, a, b) -> (route_len, links) | None``: the routes' directed
    link ids straight from the fabric's coordinates (a topology made from a
    :class:`~simcomm.topologies.wiring.Wiring`), None when not for this topology.
    """

    def path(self, topo: Topology, src: Hashable, dst: Hashable) -> Sequence[Hashable]: ...


@dataclass
class ShortestPathRouter:
    """Minimum-hop routing with ECMP: among equal-cost next hops, pick by a flow hash.

    Distances to each destination come from one BFS, cached per destination,
    so this suits custom graphs of modest size; builders of large regular
    networks supply structured routers instead.
    """

    _dist: dict = field(default_factory=dict, repr=False)

    def _distances(self, topo: Topology, dst: Hashable) -> dict:
        d = self._dist.get(dst)
        if d is None:
            d = nx.single_source_shortest_path_length(topo.graph, dst)
            self._dist[dst] = d
        return d

    def path(self, topo: Topology, src: Hashable, dst: Hashable) -> list[Hashable]:
        dist = self._distances(topo, dst)
        if src not in dist:
            raise TopologyError(f"topology {topo.name!r}: no path from {src!r} to {dst!r}")
        g, idx = topo.graph, topo.node_index
        here, out, hop = src, [src], 0
        key = (idx[src], idx[dst])
        while here != dst:
            want = dist[here] - 1
            # Endpoints (ranks, NICs) never forward traffic for others.
            cands = sorted((n for n in g.adj[here] if dist.get(n) == want
                            and (n == dst or g.nodes[n]["kind"] == "switch")), key=idx.__getitem__)
            if not cands:  # fall back to any node on a shortest path
                cands = sorted((n for n in g.adj[here] if dist.get(n) == want), key=idx.__getitem__)
            here = cands[ecmp_hash(*key, hop) % len(cands)] if len(cands) > 1 else cands[0]
            out.append(here)
            hop += 1
        return out
