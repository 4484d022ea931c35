"""A topology's graph as arrays (:class:`Wiring`), for regular fabrics too large to hold as a networkx graph.

A fat-tree of 1 048 576 hosts has ~1.1 million nodes and ~3.2 million edges: as a networkx graph that is
~2 GB and ~15 s to build and check, while what the engine reads of it (link classes per directed link,
routes as link ids, each rank's machine and gamma) fits in a few arrays that a builder can write in
one numpy pass.  A builder of a regular fabric describes its graph as a :class:`Wiring`;
:meth:`Topology.from_wiring <simcomm.topologies.base.Topology.from_wiring>` keeps it, and the graph
(``Topology.graph``) is made from it only when something asks for it (``simcomm topology show``,
analysis, a network override): the same nodes, attributes and edges, in the same order, as a graph
builder would have made, so link ids (edge ``e`` in ``graph.edges`` order gives ``2e`` and ``2e+1``)
and everything computed from them are the same either way (tests/topologies/test_wiring.py).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np

__all__ = ["KINDS", "Wiring", "unique_ids"]

#: node kinds, in the order of :attr:`Wiring.kind`'s codes
KINDS = ("rank", "nic", "switch")


@dataclass(frozen=True, eq=False)
class Wiring:
    """Nodes and undirected edges of a graph, as arrays.

    ``nodes`` are the node names in graph order; ``kind`` (codes into :data:`KINDS`), ``machine``
    (-1: none) and ``gamma`` (NaN: the node carries none; builders give one to rank nodes) their
    attributes.  Edge ``e`` joins ``u[e]`` to ``v[e]`` (node indices) with link class
    ``link_classes[link[e]]``; the edges are listed in the order, and with the orientation, that
    ``networkx.Graph.edges`` gives for the graph (node order, then each node's neighbours in the
    order they were joined), which :meth:`graph` reproduces.
    """

    nodes: Sequence[Hashable]
    kind: np.ndarray
    machine: np.ndarray
    gamma: np.ndarray
    u: np.ndarray
    v: np.ndarray
    link: np.ndarray
    link_classes: tuple[str, ...]

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def n_edges(self) -> int:
        return len(self.u)

    def same_edges(self, other: Wiring) -> bool:
        """Whether ``other`` has these very edge arrays (a wiring derived from this one, link classes aside)."""
        return self.u is other.u and self.v is other.v

    def graph(self) -> nx.Graph:
        """The networkx graph: nodes and edges in this order, with the attributes builders give."""
        g = nx.Graph()
        names = self.nodes
        machine = [None if m < 0 else m for m in self.machine.tolist()]
        gamma = self.gamma.tolist()
        kinds = [KINDS[k] for k in self.kind.tolist()]
        g.add_nodes_from((names[i], {"kind": kinds[i], "machine": machine[i]} if gamma[i] != gamma[i]
                          else {"kind": kinds[i], "machine": machine[i], "gamma": gamma[i]})
                         for i in range(len(names)))
        cls = self.link_classes
        g.add_edges_from((names[a], names[b], {"link": cls[c]})
                         for a, b, c in zip(self.u.tolist(), self.v.tolist(), self.link.tolist(), strict=True))
        return g

    @classmethod
    def from_graph(cls, g: nx.Graph) -> Wiring:
        """The wiring of a graph (for tests: a graph builder's output against a coordinate builder's)."""
        nodes = list(g.nodes)
        idx = {n: i for i, n in enumerate(nodes)}
        kind = np.array([KINDS.index(k) for _, k in g.nodes(data="kind")], dtype=np.int8)
        machine = np.array([-1 if m is None else m for _, m in g.nodes(data="machine")], dtype=np.int64)
        gamma = np.array([np.nan if x is None else x for _, x in g.nodes(data="gamma")], dtype=float)
        edges = list(g.edges(data="link"))
        classes = tuple(dict.fromkeys(name for _, _, name in edges))
        code = {name: i for i, name in enumerate(classes)}
        return cls(nodes, kind, machine, gamma,
                   np.array([idx[a] for a, _, _ in edges], dtype=np.int64),
                   np.array([idx[b] for _, b, _ in edges], dtype=np.int64),
                   np.array([code[name] for _, _, name in edges], dtype=np.int64), classes)

    def connected(self) -> bool:
        """Whether every node reaches every other (sparse components, no graph)."""
        if self.n_nodes <= 1:
            return True
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        n = self.n_nodes
        adj = coo_matrix((np.ones(self.n_edges, dtype=np.int8), (self.u, self.v)), shape=(n, n))
        return connected_components(adj, directed=False, return_labels=False) == 1


def unique_ids(ids: np.ndarray, n_ids: int) -> np.ndarray:
    """``np.unique(ids)`` of non-negative ids below ``n_ids`` (link ids, node indices): sorted, each once.

    A mask over the ids when they are many (a step of a million transfers: numpy's hash-based unique
    takes seconds there), ``np.unique`` otherwise (a small step on a large fabric).
    """
    if len(ids) * 4 < n_ids:
        return np.unique(ids)
    mark = np.zeros(n_ids, dtype=bool)
    mark[ids] = True
    return np.flatnonzero(mark)
