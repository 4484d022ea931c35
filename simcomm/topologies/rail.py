"""Rail-optimised leaf-spine: NIC r of every node in a scalable unit hangs off leaf r (DGX SuperPOD).

NVIDIA's DGX SuperPOD reference architectures wire the compute fabric by
*rail*: the GPUs' NICs are numbered 0..R-1 inside every node, and NIC r of
every node of a scalable unit (SU) connects to the same leaf switch, the SU's
rail-r leaf.  Traffic between GPUs of the same local index ("rail-aligned",
what NCCL's channels and PXN produce) therefore crosses a single leaf switch;
only cross-rail or cross-SU traffic climbs to the spines.  DGX A100 SuperPOD:
20 nodes and 8 HDR leaves per SU; DGX H100 SuperPOD: 32 nodes and 8 NDR leaves
per SU (NVIDIA DGX SuperPOD reference architecture documents, "compute fabric").

Structure: ``nodes_per_leaf`` nodes per SU; leaf (u, r) for SU u and rail r;
``spines`` spine switches, each joined to every leaf by one link carrying
``nodes_per_leaf / spines`` host links' worth of bandwidth divided by
``oversubscription`` (a fat uplink stands for that many parallel cables), so
with oversubscription 1 the leaf's uplinks carry as much as its downlinks.
Routing: same leaf, straight across; otherwise up to the spine the
destination picks (InfiniBand's destination-based routing, see
:mod:`simcomm.topologies.fat_tree`) or the flow hash (``routing="ecmp"``).
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.topologies.fabric import NodeArrays, add_link, add_new_edges, positive_int

__all__ = ["add_rail", "RailFabric"]


class RailFabric:
    """Routes of a rail-optimised leaf-spine; hosts are NICs ``node * rails + rail``."""

    max_nodes = 5

    def __init__(self, hosts: list, rails: int, nodes_per_leaf: int, leaves: list, spines: list, routing: str):
        self.hosts, self.rails, self.per_leaf = hosts, rails, nodes_per_leaf
        self.leaves, self.spines, self.routing = leaves, spines, routing
        self._nodes = NodeArrays(hosts, leaves, spines)

    def _leaf(self, i):
        node, rail = i // self.rails, i % self.rails
        return (node // self.per_leaf) * self.rails + rail

    def _spine(self, j, key):
        return (j if self.routing == "d-mod-k" else key) % len(self.spines)

    def path(self, i: int, j: int, key: int) -> list:
        li, lj = self._leaf(i), self._leaf(j)
        if li == lj:
            return [self.hosts[i], self.leaves[li], self.hosts[j]]
        return [self.hosts[i], self.leaves[li], self.spines[self._spine(j, key)], self.leaves[lj], self.hosts[j]]

    def paths_many(self, i: np.ndarray, j: np.ndarray, key: np.ndarray, idx: dict) -> np.ndarray:
        host, leaf, spine = self._nodes.of(idx)
        li, lj = self._leaf(i), self._leaf(j)
        out = np.full((len(i), self.max_nodes), -1, dtype=np.int64)
        out[:, 0], out[:, 1] = host[i], leaf[li]
        near = li == lj
        out[near, 2] = host[j[near]]
        far = ~near
        out[far, 2] = spine[self._spine(j[far], key[far])]
        out[far, 3], out[far, 4] = leaf[lj[far]], host[j[far]]
        return out

    def links_many(self, i: np.ndarray, j: np.ndarray, key: np.ndarray) -> np.ndarray:
        """The directed link ids of :meth:`path` of many host pairs (``i != j``) as rows padded with -1, in
        :meth:`edge_ends`' numbering: host ``x``'s link is edge ``x`` (up: ``2x``), leaf ``l``'s link to spine
        ``s`` is edge ``n + l*S + s`` (up: even)."""
        n, n_spines = len(self.hosts), len(self.spines)
        li, lj = self._leaf(i), self._leaf(j)
        near = li == lj
        s = self._spine(j, key)  # (whole columns and np.where: cheaper than masked assignments)
        down = 2 * j + 1
        return np.stack([2 * i, np.where(near, down, 2 * (n + li * n_spines + s)),
                         np.where(near, -1, 2 * (n + lj * n_spines + s) + 1), np.where(near, -1, down)], axis=1)

    def edge_ends(self) -> tuple[list, list]:
        """The two ends of each edge :meth:`links_many` numbers (edge ``e``: ids ``2e`` one way, ``2e+1`` back):
        each host's link to its leaf, then every leaf's link to every spine (none with a single leaf)."""
        us = list(self.hosts) + ([lf for lf in self.leaves for _ in self.spines] if len(self.leaves) > 1 else [])
        vs = [self.leaves[self._leaf(x)] for x in range(len(self.hosts))]
        vs += list(self.spines) * len(self.leaves) if len(self.leaves) > 1 else []
        return us, vs

    def pair_counts(self, topo, hosts: np.ndarray, cls: np.ndarray) -> np.ndarray | None:
        """Links crossed by the pairs of each row of ``hosts`` of different ``cls``, counted by classes
        (destination routing; None under ECMP): :func:`simcomm.topologies.pair_counts.rail_counts`."""
        from simcomm.topologies.pair_counts import rail_counts

        return rail_counts(self, topo, hosts, cls)


def add_rail(g: nx.Graph, hosts: list, host_link: LinkClass, links: dict, *, rails: int,
             nodes_per_leaf: int = 32, spines: int | None = None, oversubscription: float = 1.0,
             routing: str | None = None) -> RailFabric:
    """Add the leaves, spines and links of a rail-optimised fabric for ``hosts`` (NICs, node-major)."""
    rails = positive_int(rails, "rail: rails (NICs per node)")
    per_leaf = positive_int(nodes_per_leaf, "rail: nodes_per_leaf")
    if len(hosts) % rails:
        raise ConfigError(f"rail: {len(hosts)} NICs are not a whole number of nodes with {rails} rails")
    if isinstance(oversubscription, bool) or not isinstance(oversubscription, (int, float)) \
            or not 1.0 <= oversubscription < float("inf"):
        raise ConfigError(f"rail: oversubscription must be a number >= 1, got {oversubscription!r}")
    routing = routing or ("d-mod-k" if host_link.family == "infiniband" else "ecmp")
    if routing not in ("ecmp", "d-mod-k"):
        raise ConfigError(f"rail: routing {routing!r} is not valid; valid choices: ecmp, d-mod-k")
    nodes = len(hosts) // rails
    units = -(-nodes // per_leaf)
    n_spines = positive_int(spines, "rail: spines") if spines is not None else min(per_leaf, 64)
    leaves = [f"leaf{u}.r{r}" for u in range(units) for r in range(rails)]
    spine_names = [f"spine{s}" for s in range(n_spines)] if units * rails > 1 else []
    g.add_nodes_from(leaves + spine_names, kind="switch", machine=None)
    add_new_edges(g, ((h, leaves[((i // rails) // per_leaf) * rails + i % rails]) for i, h in enumerate(hosts)),
                  host_link.name)
    if spine_names:
        up = add_link(links, host_link.scaled(per_leaf / n_spines / oversubscription,
                                              suffix=f"-up{per_leaf}of{n_spines}"
                                                     + ("" if oversubscription == 1 else f"-os{oversubscription:g}")))
        add_new_edges(g, ((lf, sp) for lf in leaves for sp in spine_names), up.name)
    return RailFabric(hosts, rails, per_leaf, leaves, spine_names or leaves[:1], routing)
