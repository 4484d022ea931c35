"""Two-level cluster: M nodes x G ranks, an intranode fabric, NICs, an internode network.

Structure (rank ``r`` = node-major: node ``m`` holds ranks ``offset[m] ..``):

* intranode: ``nvswitch`` (one switch per node, each rank joined by
  ``intra_link``, e.g. ``nvswitch-a100`` = the GPU's whole NVLink port),
  ``nvlink-mesh`` (every pair of the node's ranks joined directly by
  ``links_per_pair`` x ``intra_link``), ``pcie`` (one PCIe switch per node; a
  one-level tree) or ``shm`` (a per-node memory "switch");
* NICs: ``nics_per_node`` per node; local rank ``l`` uses NIC ``l*nics//G``
  through its own ``nic_attach`` link (PCIe).  Every byte a rank sends off
  the node crosses its NIC's ``nic_link`` to the network, so the ranks that
  share a NIC share that link: this is where intranode ranks contend;
* internode: ``switch`` (one switch), ``fat-tree``, ``dragonfly``, ``torus``
  or ``ring``, built over the NICs as hosts; ``inter_options`` go to that
  builder (e.g. ``{"k": 8, "oversubscription": 4}``).

Routes: same node -> the intranode path; otherwise rank -> NIC -> the
internode fabric's structured route (ECMP keyed by the rank pair) -> NIC ->
rank.  ``gpus_per_node`` may also be a list (one count per node), e.g. a
parameter-server node with one rank beside worker nodes with two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import networkx as nx
import numpy as np

from simcomm.errors import ConfigError, UnknownNameError
from simcomm.links.base import LinkClass, link_class
from simcomm.topologies.base import DEFAULT_GAMMA, Topology, ecmp_hash, ecmp_hash_many
from simcomm.topologies.devices import device_gamma
from simcomm.topologies.dragonfly import add_dragonfly
from simcomm.topologies.fabric import add_link, positive_int
from simcomm.topologies.fat_tree import add_fat_tree
from simcomm.topologies.star import add_star
from simcomm.topologies.torus import add_torus

__all__ = ["two_level", "INTRA", "INTER", "DEFAULT_INTRA_LINK"]

INTRA = ("nvswitch", "nvlink-mesh", "pcie", "shm")
INTER = ("switch", "fat-tree", "dragonfly", "torus", "ring")
DEFAULT_INTRA_LINK = {"nvswitch": "nvswitch-a100", "nvlink-mesh": "nvlink3", "pcie": "pcie4", "shm": "shm"}
_HUB = {"nvswitch": "nvsw", "pcie": "pcie", "shm": "mem"}


class TwoLevelRouter:
    """Intranode path, or rank -> NIC -> fabric route -> NIC -> rank."""

    def __init__(self, rank_names, machine, local, hub, nic_of, nics, fabric, mesh: bool):
        self.index = {n: i for i, n in enumerate(rank_names)}
        self.rank_names, self.machine, self.local = rank_names, machine, local
        self.hub, self.nic_of, self.nics, self.fabric, self.mesh = hub, nic_of, nics, fabric, mesh

    def path(self, topo, src, dst):
        a, b = self.index[src], self.index[dst]
        if a == b:
            return [src]
        if self.machine[a] == self.machine[b]:
            return [src, dst] if self.mesh else [src, self.hub[self.machine[a]], dst]
        ni, nj = self.nic_of[a], self.nic_of[b]
        return [src, *self.fabric.path(ni, nj, ecmp_hash(a, b)), dst]

    def paths_many(self, topo, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        """:meth:`path` of many rank pairs as node index rows padded with -1 (see Router)."""
        fab_many = getattr(self.fabric, "paths_many", None)
        if self.fabric is not None and fab_many is None:
            return None
        idx = topo.node_index
        rank = np.array([idx[n] for n in self.rank_names], dtype=np.int64)
        machine = np.asarray(self.machine, dtype=np.int64)
        hub = np.array([-1 if h is None else idx[h] for h in self.hub], dtype=np.int64)
        width = 3 if self.fabric is None else 2 + self.fabric.max_nodes
        out = np.full((len(a), width), -1, dtype=np.int64)
        out[:, 0] = rank[a]
        same = a == b
        local = (machine[a] == machine[b]) & ~same
        if self.mesh:
            out[local, 1] = rank[b[local]]
        else:
            out[local, 1] = hub[machine[a[local]]]
            out[local, 2] = rank[b[local]]
        far = np.flatnonzero(~local & ~same)
        if far.size:
            nic_of = np.asarray(self.nic_of, dtype=np.int64)
            fab = fab_many(nic_of[a[far]], nic_of[b[far]], ecmp_hash_many(a[far], b[far]), idx)
            out[far, 1:1 + fab.shape[1]] = fab
            out[far, 1 + (fab >= 0).sum(axis=1)] = rank[b[far]]
        return out


def _counts(nodes: int, gpus_per_node) -> list[int]:
    positive_int(nodes, "two-level: nodes")
    if isinstance(gpus_per_node, Sequence) and not isinstance(gpus_per_node, str):
        counts = [positive_int(c, "two-level: gpus_per_node entry") for c in gpus_per_node]
        if len(counts) != nodes:
            raise ConfigError(f"two-level: gpus_per_node lists {len(counts)} counts for {nodes} nodes")
        return counts
    return [positive_int(gpus_per_node, "two-level: gpus_per_node")] * nodes


def _add_inter(g, inter, hosts, nic_lc, links, opts):
    opts = dict(opts or {})
    try:
        if inter == "switch":
            if opts:
                raise TypeError(f"unexpected option {sorted(opts)[0]!r}")
            return add_star(g, hosts, nic_lc)
        if inter == "fat-tree":
            return add_fat_tree(g, hosts, nic_lc, links, **opts)
        if inter == "dragonfly":
            return add_dragonfly(g, hosts, nic_lc, links, **opts)
        if inter in ("torus", "ring"):
            if inter == "ring":
                opts.setdefault("dims", (len(hosts),))
            opts.setdefault("dims", _square(len(hosts)))
            return add_torus(g, hosts, nic_lc, links, **opts)
    except TypeError as exc:  # an unknown keyword in inter_options
        raise ConfigError(f"two-level: bad inter_options for {inter!r}: {exc}") from None
    raise UnknownNameError("internode network", inter, INTER)


def _square(n: int) -> tuple[int, int]:
    """Smallest near-square 2-D torus holding ``n`` hosts."""
    a = math.isqrt(n)
    a = a if a * a >= n else a + 1
    return (a, math.ceil(n / a))


def two_level(nodes: int, gpus_per_node: int | Sequence[int] = 8, *, intra: str = "nvswitch",
              intra_link: str | LinkClass | None = None, nic_link: str | LinkClass = "ib-hdr",
              nics_per_node: int = 1, nic_attach: str | LinkClass = "pcie4", inter: str = "switch",
              inter_options: dict | None = None, links_per_pair: int = 1, device: str | None = None,
              gamma: float | None = None, name: str | None = None) -> Topology:
    """Build the cluster described in the module docstring."""
    counts = _counts(nodes, gpus_per_node)
    if intra not in INTRA:
        raise UnknownNameError("intranode fabric", intra, INTRA)
    if inter not in INTER:
        raise UnknownNameError("internode network", inter, INTER)
    nics = positive_int(nics_per_node, "two-level: nics_per_node")
    links: dict[str, LinkClass] = {}
    in_lc = link_class(intra_link if intra_link is not None else DEFAULT_INTRA_LINK[intra])
    if intra == "nvlink-mesh" and positive_int(links_per_pair, "two-level: links_per_pair") != 1:
        in_lc = in_lc.scaled(links_per_pair, suffix=f"x{links_per_pair}")  # parallel links of one pair
    in_lc = add_link(links, in_lc)
    g = nx.Graph()
    rank_names, machine, local, hub, nic_of = [], [], [], [], []
    for m, cnt in enumerate(counts):
        gam = gamma if gamma is not None else (device_gamma(device, cnt) if device else DEFAULT_GAMMA)
        names = [f"r{len(rank_names) + l}" for l in range(cnt)]
        g.add_nodes_from(names, kind="rank", machine=m, gamma=gam)
        rank_names += names
        machine += [m] * cnt
        local += range(cnt)
        nic_of += [m * nics + l * nics // cnt for l in range(cnt)]
        if cnt > 1 and intra != "nvlink-mesh":
            h = f"m{m}.{_HUB[intra]}"
            g.add_node(h, kind="switch", machine=m)
            g.add_edges_from(((n, h) for n in names), link=in_lc.name)
            hub.append(h)
        else:
            hub.append(None)
            if cnt > 1:
                g.add_edges_from(((names[x], names[y]) for x in range(cnt) for y in range(x + 1, cnt)),
                                 link=in_lc.name)
    fabric, nic_names = None, []
    if nodes > 1:
        att = add_link(links, nic_attach)
        nic_lc = add_link(links, nic_link)
        nic_names = [f"m{m}.nic{j}" for m in range(nodes) for j in range(nics)]
        g.add_nodes_from(((n, {"kind": "nic", "machine": i // nics}) for i, n in enumerate(nic_names)))
        g.add_edges_from(((r, nic_names[nic_of[i]]) for i, r in enumerate(rank_names)), link=att.name)
        fabric = _add_inter(g, inter, nic_names, nic_lc, links, inter_options)
    used = {d for _, _, d in g.edges(data="link")}
    links = {k: v for k, v in links.items() if k in used}
    uniform = len(set(counts)) == 1
    meta = {"builder": "two-level", "nodes": nodes, "gpus_per_node": counts[0] if uniform else counts,
            "intra": intra, "intra_link": in_lc.name, "nic_link": nic_link if isinstance(nic_link, str)
            else nic_link.name, "nics_per_node": nics, "inter": inter, "inter_options": dict(inter_options or {}),
            "device": device}
    label = name or f"two-level-{nodes}x{counts[0] if uniform else 'var'}-{intra}-{inter}"
    router = TwoLevelRouter(rank_names, machine, local, hub, nic_of, nic_names, fabric, intra == "nvlink-mesh")
    return Topology(label, g, links, tuple(rank_names), router=router, meta=meta)
