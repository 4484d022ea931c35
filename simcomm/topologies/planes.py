"""N independent network planes: NIC j of every node on plane ``j mod N``, one fabric per plane.

DeepSeek's multi-plane fat-tree (Zhao et al., "Insights into DeepSeek-V3:
Scaling Challenges and Reflections on Hardware for AI Architectures", ISCA
2025) gives each GPU-NIC pair of a node its own plane, a two-tier fat-tree
that shares no switch with the others; traffic between NICs of different
planes must be forwarded inside a node (NVLink or PCIe) to a NIC of the
destination's plane.  The two-level router does that forwarding (PXN-style:
to the local GPU whose NIC is on the destination NIC's rail); this module
only builds the planes and routes within one.

Each plane is built by the ordinary fabric builder (fat-tree, rail, ...) on
a scratch graph holding that plane's NICs; its switches are renamed
``p<plane>.<name>`` and copied into the cluster graph, and routes are mapped
through the renaming.
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx
import numpy as np

__all__ = ["PlanesFabric", "add_planes"]


class PlanesFabric:
    """Routes inside one plane; hosts are the cluster's NICs (global index), planes ``host mod planes``."""

    def __init__(self, fabrics: list, renames: list[dict], plane_of: np.ndarray, local_of: np.ndarray):
        self.fabrics, self.renames = fabrics, renames
        self.plane_of, self.local_of = plane_of, local_of
        self.max_nodes = max(f.max_nodes for f in fabrics) if all(hasattr(f, "max_nodes") for f in fabrics) \
            else 0
        self._idx_cache: tuple | None = None
        self._first_edge: list[int] | None = None  # (links_many) the first edge of each plane in edge_ends

    def path(self, i: int, j: int, key: int) -> list:
        p = int(self.plane_of[i])
        if int(self.plane_of[j]) != p:
            raise ValueError(f"hosts {i} and {j} are on different planes")  # the router relays first
        ren = self.renames[p]
        return [ren.get(n, n) for n in self.fabrics[p].path(int(self.local_of[i]), int(self.local_of[j]), key)]

    def paths_many(self, i: np.ndarray, j: np.ndarray, key: np.ndarray, idx: dict) -> np.ndarray | None:
        if not self.max_nodes or not all(hasattr(f, "paths_many") for f in self.fabrics):
            return None
        if self._idx_cache is None or self._idx_cache[0] is not idx:
            # each plane's own names -> indices in the cluster graph
            self._idx_cache = (idx, [_PlaneIndex(idx, ren) for ren in self.renames])
        out = np.full((len(i), self.max_nodes), -1, dtype=np.int64)
        plane = self.plane_of[i]
        for p, fab in enumerate(self.fabrics):
            sel = np.flatnonzero(plane == p)
            if sel.size:
                sub = fab.paths_many(self.local_of[i[sel]], self.local_of[j[sel]], key[sel], self._idx_cache[1][p])
                out[sel, :sub.shape[1]] = sub
        return out


    def edge_ends(self) -> tuple[list, list] | None:
        """The two ends of each edge :meth:`links_many` numbers: every plane's edges in plane order (each as its
        fabric numbers them, renamed), or None when a plane's fabric does not number its links."""
        us: list = []
        vs: list = []
        for fab, ren in zip(self.fabrics, self.renames, strict=True):
            ends = getattr(fab, "edge_ends", None)
            if ends is None or getattr(fab, "links_many", None) is None:
                return None
            u, v = ends()
            us += [ren.get(x, x) for x in u]
            vs += [ren.get(x, x) for x in v]
        return us, vs

    def links_many(self, i: np.ndarray, j: np.ndarray, key: np.ndarray) -> np.ndarray:
        """The directed link ids of :meth:`path` of many host pairs on one plane each (``i != j``), as rows
        padded with -1: each plane's own ids, moved past the planes before it (:meth:`edge_ends`)."""
        if self._first_edge is None:  # (each plane's edges counted once)
            self._first_edge = np.cumsum([0] + [len(f.edge_ends()[0]) for f in self.fabrics]).tolist()
        parts = []
        plane = self.plane_of[i]
        for p, fab in enumerate(self.fabrics):
            sel = np.flatnonzero(plane == p)
            if sel.size:
                sub = fab.links_many(self.local_of[i[sel]], self.local_of[j[sel]], key[sel])
                parts.append((sel, np.where(sub >= 0, sub + 2 * self._first_edge[p], -1)))
        out = np.full((len(i), max((sub.shape[1] for _, sub in parts), default=0)), -1, dtype=np.int64)
        for sel, sub in parts:
            out[sel, :sub.shape[1]] = sub
        return out


class _PlaneIndex(dict):
    """``idx`` seen through one plane's renaming (a plane's fabric names its switches without prefix)."""

    def __init__(self, idx: dict, rename: dict):
        super().__init__()
        self.idx, self.rename = idx, rename

    def __missing__(self, name):
        return self.idx[self.rename.get(name, name)]


def add_planes(g: nx.Graph, hosts: list, planes: int, build: Callable[[nx.Graph, list], object]) -> PlanesFabric:
    """Build ``planes`` copies of a fabric with ``build(scratch_graph, plane_hosts)``; NIC j on plane j mod N."""
    fabrics, renames = [], []
    for p in range(planes):
        sub_hosts = hosts[p::planes]
        h = nx.Graph()
        h.add_nodes_from((n, g.nodes[n]) for n in sub_hosts)
        fabrics.append(build(h, sub_hosts))
        keep = set(sub_hosts)
        ren = {n: f"p{p}.{n}" for n in h.nodes if n not in keep}
        g.add_nodes_from((ren[n], d) for n, d in h.nodes(data=True) if n in ren)
        g.add_edges_from((ren.get(u, u), ren.get(v, v), d) for u, v, d in h.edges(data=True))
        renames.append(ren)
    n = np.arange(len(hosts))
    return PlanesFabric(fabrics, renames, n % planes, n // planes)
