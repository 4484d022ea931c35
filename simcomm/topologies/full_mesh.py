"""Full mesh: a dedicated link between every pair of ranks (contention free).

Every pair (i, j) has its own full-duplex link, so a transfer's time is
exactly ``latency + n / bandwidth`` whatever else runs, unless two transfers
use the same ordered pair at once.  This is the topology on which every
collective's simulated time must equal its closed form (tests/test_exactness).
"""

from __future__ import annotations

import networkx as nx

from simcomm.links.base import LinkClass, link_class
from simcomm.topologies.base import DEFAULT_GAMMA, TOPOLOGIES, Topology

__all__ = ["full_mesh"]


class _DirectRouter:
    """One hop: ranks are adjacent."""

    def path(self, topo, src, dst):
        return [src, dst]


@TOPOLOGIES.register('full-mesh', summary='builder: a dedicated link between every pair of ranks (contention free)',
                     reference='closed-form exactness reference (docs/topologies.md)')
def full_mesh(n_ranks: int, link: str | LinkClass, *, gamma: float = DEFAULT_GAMMA) -> Topology:
    """``n_ranks`` ranks, each pair joined by its own link of class ``link``."""
    lc = link_class(link)
    g = nx.complete_graph(n_ranks)
    nx.set_node_attributes(g, "rank", "kind")
    for i in g.nodes:
        g.nodes[i]["machine"] = i
        g.nodes[i]["gamma"] = gamma
    nx.set_edge_attributes(g, lc.name, "link")
    return Topology(f"full-mesh-{n_ranks}", g, {lc.name: lc}, tuple(range(n_ranks)),
                    router=_DirectRouter(), meta={"builder": "full-mesh", "ranks": n_ranks, "link": lc.name})
