"""Star: every host on one switch (a single non-blocking crossbar).

Each host has its own full-duplex link to the switch, so contention appears
only when several flows enter or leave the same host (incast, outcast).
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from simcomm.links.base import LinkClass
from simcomm.topologies.base import DEFAULT_GAMMA, TOPOLOGIES, Topology
from simcomm.topologies.fabric import add_link, positive_int, rank_graph, standalone

__all__ = ["star", "add_star", "StarFabric"]


class StarFabric:
    """host -> switch -> host."""

    max_nodes = 3

    def __init__(self, hosts: list, switch: str):
        self.hosts, self.switch = hosts, switch

    def path(self, i: int, j: int, key: int) -> list:
        return [self.hosts[i], self.switch, self.hosts[j]]

    def paths_many(self, i: np.ndarray, j: np.ndarray, key: np.ndarray, idx: dict) -> np.ndarray:
        """:meth:`path` of many host pairs as node index rows."""
        host = np.array([idx[n] for n in self.hosts], dtype=np.int64)
        return np.stack([host[i], np.full(len(i), idx[self.switch], dtype=np.int64), host[j]], axis=1)

    def links_many(self, i: np.ndarray, j: np.ndarray, key: np.ndarray) -> np.ndarray:
        """The directed link ids of :meth:`path` of many host pairs as rows: host ``x``'s link is edge ``x``
        (:meth:`edge_ends`), ``2x`` towards the switch."""
        return np.stack([2 * i, 2 * j + 1], axis=1)

    def edge_ends(self) -> tuple[list, list]:
        """The two ends of each edge :meth:`links_many` numbers: every host's link to the switch."""
        return list(self.hosts), [self.switch] * len(self.hosts)

    def pair_counts(self, topo, hosts: np.ndarray, cls: np.ndarray) -> np.ndarray:
        """Links crossed by the pairs of each row of ``hosts`` of different ``cls``, counted by classes:
        :func:`simcomm.topologies.pair_counts.star_counts`."""
        from simcomm.topologies.pair_counts import star_counts

        return star_counts(self, topo, hosts, cls)


def add_star(g: nx.Graph, hosts: list, host_link: LinkClass, *, name: str = "sw0") -> StarFabric:
    """Add one switch joined to every host by ``host_link``."""
    g.add_node(name, kind="switch", machine=None)
    g.add_edges_from(((h, name) for h in hosts), link=host_link.name)
    return StarFabric(hosts, name)


@TOPOLOGIES.register('star', summary='builder: every rank on one non-blocking switch',
                     reference='docs/topologies.md')
def star(n: int, link: str | LinkClass, *, gamma: float = DEFAULT_GAMMA) -> Topology:
    """``n`` ranks, each joined to one switch by a link of class ``link``."""
    positive_int(n, "star: n")
    links: dict = {}
    lc = add_link(links, link)
    g, hosts = rank_graph(n, gamma)
    fab = add_star(g, hosts, lc)
    return standalone(f"star-{n}-{lc.name}", g, links, hosts, fab,
                      {"builder": "star", "ranks": n, "link": lc.name})
