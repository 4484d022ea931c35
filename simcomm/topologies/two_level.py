"""Two-level cluster: M nodes x G ranks, an intranode fabric, NICs, an internode network.

Structure (rank ``r`` = node-major: node ``m`` holds ranks ``offset[m] ..``):

* intranode (:mod:`simcomm.topologies.intranode`): ``nvswitch``,
  ``nvlink-mesh``, ``nvlink-cube-mesh`` (DGX-1), ``pcie``, ``pcie-host`` (no
  peer-to-peer: staged through host memory) or ``shm``; ``host`` (a
  :class:`~simcomm.topologies.intranode.HostPath`) shapes the PCIe switches,
  sockets and memory of the last two;
* NVLink domains: with ``nvlink_domain=D`` (``nvswitch`` only) the GPUs of
  machines ``kD .. kD+D-1`` hang off one NVSwitch ``d<k>.nvsw``, so routes
  between those machines stay on NVLink (GB200 NVL72: 18 trays of 4 GPUs);
  ``nvlink_domain=(18, 14)`` gives the machines per domain in order instead
  (racks of unequal fill, :mod:`simcomm.topologies.nvlink`);
* NICs: ``nics_per_node`` per node; local rank ``l`` uses NIC ``l*nics//G``
  (with a host path: a NIC on its own PCIe switch) through its own
  ``nic_attach`` link; on a ``pcie`` machine the NICs hang off the PCIe switch
  (the NIC's ``nic_attach`` is its own port), so a GPU reaches its NIC through
  the same x16 port as its peers.  Every byte a rank sends off its NVLink domain crosses
  its NIC's ``nic_link``, so the ranks that share a NIC share that link;
* internode: ``switch`` (one switch), ``fat-tree``, ``rail`` (rail-optimised
  leaf-spine, as DGX SuperPOD), ``dragonfly``, ``torus`` or ``ring`` over the
  NICs as hosts; ``inter_options`` go to that builder (e.g. ``{"k": 8,
  "oversubscription": 4}``, ``{"nodes_per_leaf": 32}``).  ``planes=N`` builds N
  independent copies, NIC j of every node on plane ``j mod N``
  (:mod:`simcomm.topologies.planes`).

Routes: same NVLink domain -> the intranode path; otherwise rank [-> PCIe switch] -> NIC ->
the fabric's structured route (ECMP keyed by the rank pair) -> NIC [-> PCIe switch] -> rank.
With several planes a rank whose NIC is on another plane than the
destination's first moves the data inside its node to the GPU whose NIC
sits on the destination NIC's rail (NCCL's PXN).  ``gpus_per_node`` may also
be a list (one count per node), e.g. a parameter-server node with one rank
beside worker nodes with two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import networkx as nx
import numpy as np

from simcomm.errors import ConfigError, UnknownNameError
from simcomm.links.base import LinkClass, link_class
from simcomm.registry import Registry
from simcomm.topologies.base import DEFAULT_GAMMA, TOPOLOGIES, Recipe, Topology, ecmp_hash, ecmp_hash_many
from simcomm.topologies.devices import device_gamma
from simcomm.topologies.dragonfly import add_dragonfly
from simcomm.topologies.fabric import (
    add_link,
    add_new_edges,
    add_new_nodes,
    add_new_nodes_data,
    check_ranks,
    positive_int,
)
from simcomm.topologies.fat_tree import add_fat_tree
from simcomm.topologies.intranode import (
    DEFAULT_INTRA_LINK,
    HOST_INTRA,
    INTRA,
    HostIntra,
    HostPath,
    HubIntra,
    MeshIntra,
    add_host_intra,
    nic_by_switch,
)
from simcomm.topologies.nvlink import check_split, domain_of_machines
from simcomm.topologies.planes import add_planes
from simcomm.topologies.rail import add_rail
from simcomm.topologies.star import add_star
from simcomm.topologies.torus import add_torus
from simcomm.topologies.two_level_links import links_many as links_from_tables

__all__ = ["two_level", "FABRICS", "INTRA", "INTER", "DEFAULT_INTRA_LINK", "HostPath"]

INTER = ("switch", "fat-tree", "rail", "dragonfly", "torus", "ring")
_HUB = {"nvswitch": "nvsw", "pcie": "pcie", "shm": "mem"}


class TwoLevelRouter:
    """Intranode path within an NVLink domain, else [relay ->] NIC -> fabric route -> NIC -> rank."""

    def __init__(self, rank_names, group, local, intra, nic_of, fabric, relay=None, machine=None, planes=1,
                 port=None, nic_names=None):
        self.index = {n: i for i, n in enumerate(rank_names)}
        self.rank_names, self.group, self.local, self.intra = rank_names, group, local, intra
        self.nic_of, self.fabric = nic_of, fabric
        # port[r]: the PCIe switch a rank's NIC hangs off (its one x16 port carries peer and NIC traffic), or None
        self.port = port or [None] * len(rank_names)
        self.nic_names = nic_names  # node name of NIC index i (nic_of's values)
        # relay[m, j]: the rank of machine m that sends for its machine to NIC-local index j (planes > 1)
        self.relay, self.machine, self.planes = relay, machine, planes

    def _relay(self, a: int, b: int) -> int:
        if self.relay is None:
            return a
        na, nb = self.nic_of[a], self.nic_of[b]
        nics = self.relay.shape[1]
        return a if na % self.planes == nb % self.planes else int(self.relay[self.machine[a], nb % nics])

    def path(self, topo, src, dst):
        a, b = self.index[src], self.index[dst]
        if a == b:
            return [src]
        if self.group[a] == self.group[b]:
            return self.intra[self.group[a]].path(self.local[a], self.local[b])
        r = self._relay(a, b)
        head = [src] if r == a else self.intra[self.group[a]].path(self.local[a], self.local[r])
        out, into = [self.port[r]] if self.port[r] else [], [self.port[b]] if self.port[b] else []
        return [*head, *out, *self.fabric.path(self.nic_of[r], self.nic_of[b], ecmp_hash(a, b)), *into, dst]

    # ---- many pairs at once ------------------------------------------------
    def _local_rows(self, topo, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        """Intranode paths of pairs in one group (a != b) as node index rows, or None."""
        c = self._cached(topo.node_index)
        if c["kind"] == "hub":
            return np.stack([c["rank"][a], c["hub"][self.group_arr[a]], c["rank"][b]], axis=1)
        if c["kind"] == "mesh":
            return np.stack([c["rank"][a], c["rank"][b]], axis=1)
        if c["kind"] == "host":
            table, nodes = c["templates"]
            pos = table[self.local_arr[a], self.local_arr[b]]
            return np.where(pos >= 0, nodes[self.group_arr[a][:, None], np.maximum(pos, 0)], -1)
        return None

    def _cached(self, idx) -> dict:
        """Node indices the array paths need, computed once per graph index."""
        c = self.__dict__.get("_cache")
        if c is not None and c["idx"] is idx:
            return c
        kinds = {type(x) for x in self.intra if x is not None}
        c = {"idx": idx, "rank": np.array([idx[n] for n in self.rank_names], dtype=np.int64), "kind": None}
        if kinds <= {HubIntra}:
            c["kind"] = "hub"
            c["hub"] = np.array([-1 if x is None else idx[x.hub] for x in self.intra], dtype=np.int64)
        elif kinds <= {MeshIntra}:
            c["kind"] = "mesh"
        elif kinds <= {HostIntra} and len({len(x.names) for x in self.intra}) == 1:
            c["kind"], c["templates"] = "host", self._templates(idx)
        self.__dict__["_cache"] = c
        return c

    def _templates(self, idx) -> tuple[np.ndarray, np.ndarray]:
        """Every machine has the same host path: route positions of group 0, nodes of each group."""
        members = [x.names + x.aux for x in self.intra]
        nodes = np.array([[idx[n] for n in ms] for ms in members], dtype=np.int64)
        pos = {n: i for i, n in enumerate(members[0])}
        g0, n = self.intra[0], len(self.intra[0].names)
        paths = {(x, y): [pos[v] for v in g0.path(x, y)] for x in range(n) for y in range(n) if x != y}
        width = max((len(p) for p in paths.values()), default=1)
        table = np.full((n, n, width), -1, dtype=np.int64)
        for (x, y), p in paths.items():
            table[x, y, :len(p)] = p
        return table, nodes

    def paths_many(self, topo, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        """:meth:`path` of many rank pairs as node index rows padded with -1 (see Router)."""
        fab_many = getattr(self.fabric, "paths_many", None)
        if self.fabric is not None and fab_many is None:
            return None
        idx = topo.node_index
        rank = self._cached(idx)["rank"]
        same, local = a == b, (self.group_arr[a] == self.group_arr[b]) & (a != b)
        far = np.flatnonzero(~local & ~same)
        parts = []
        loc = np.flatnonzero(local)
        if loc.size:
            rows = self._local_rows(topo, a[loc], b[loc])
            if rows is None:
                return None
            parts.append((loc, rows))
        if far.size:
            af, bf = a[far], b[far]
            nic_of = np.asarray(self.nic_of, dtype=np.int64)
            r = self.senders(af, bf, nic_of)
            port = self._port_arr(idx)
            head = np.full((len(af), 1 if port is None else 2), -1, dtype=np.int64)
            head[:, 0] = rank[af]
            if port is not None:  # relay is None here: ports exist only on one-plane PCIe machines
                head[:, 1] = port[af]
            moved = np.flatnonzero(r != af)
            if moved.size:
                sub = self._local_rows(topo, af[moved], r[moved])
                if sub is None:
                    return None
                head = np.pad(head, ((0, 0), (0, sub.shape[1] - 1)), constant_values=-1)
                head[moved] = sub
            fab = fab_many(nic_of[r], nic_of[bf], ecmp_hash_many(af, bf), idx)
            if fab is None:
                return None
            hl, fl = (head >= 0).sum(axis=1), (fab >= 0).sum(axis=1)
            rows = np.full((len(af), head.shape[1] + fab.shape[1] + (1 if port is None else 2)), -1,
                           dtype=np.int64)
            rows[:, :head.shape[1]] = head
            cols = hl[:, None] + np.arange(fab.shape[1])
            ok = fab >= 0
            rows[np.nonzero(ok)[0], cols[ok]] = fab[ok]
            at = np.arange(len(af))
            if port is not None:
                into = port[bf]
                rows[at, hl + fl] = np.where(into >= 0, into, rank[bf])
                rows[at[into >= 0], (hl + fl + 1)[into >= 0]] = rank[bf][into >= 0]
            else:
                rows[at, hl + fl] = rank[bf]
            parts.append((far, rows))
        width = max([3] + [p[1].shape[1] for p in parts])
        out = np.full((len(a), width), -1, dtype=np.int64)
        out[:, 0] = rank[a]
        for sel, rows in parts:
            out[sel, :rows.shape[1]] = rows
        return out

    def senders(self, a: np.ndarray, b: np.ndarray, nic_of: np.ndarray) -> np.ndarray:
        """:meth:`_relay` of many pairs of ranks on different machines (``nic_of``: :attr:`nic_of` as an array)."""
        r = a.copy()
        if self.relay is not None:
            cross = nic_of[a] % self.planes != nic_of[b] % self.planes
            mach = np.asarray(self.machine, dtype=np.int64)
            r[cross] = self.relay[mach[a[cross]], nic_of[b[cross]] % self.relay.shape[1]]
        return r

    def links_many(self, topo, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The directed link ids of :meth:`paths_many`'s routes as ``(route_len, links)`` (see Router), from
        per-rank and per-fabric-link tables (:mod:`simcomm.topologies.two_level_links`), or None."""
        return links_from_tables(self, topo, a, b)

    def pair_counts(self, topo, rows: np.ndarray) -> np.ndarray | None:
        """Links crossed by every pair within each row, counted by classes (:mod:`simcomm.topologies.pair_counts`)."""
        from simcomm.topologies.pair_counts import two_level_counts

        return two_level_counts(self, topo, rows)

    def _port_arr(self, idx) -> np.ndarray | None:
        """Node index of each rank's port switch (-1: none), or None when no rank has one."""
        if not any(self.port):
            return None
        c = self.__dict__.get("_port")
        if c is None or c[0] is not idx:
            c = (idx, np.array([-1 if p is None else idx[p] for p in self.port], dtype=np.int64))
            self.__dict__["_port"] = c
        return c[1]

    @property
    def group_arr(self) -> np.ndarray:
        return self._arrays()[0]

    @property
    def local_arr(self) -> np.ndarray:
        return self._arrays()[1]

    def _arrays(self):
        arr = self.__dict__.get("_arr")
        if arr is None:
            arr = (np.asarray(self.group, dtype=np.int64), np.asarray(self.local, dtype=np.int64))
            self.__dict__["_arr"] = arr
        return arr


def _counts(nodes: int, gpus_per_node) -> list[int]:
    positive_int(nodes, "two-level: nodes")
    if isinstance(gpus_per_node, Sequence) and not isinstance(gpus_per_node, str):
        counts = [positive_int(c, "two-level: gpus_per_node entry") for c in gpus_per_node]
        if len(counts) != nodes:
            raise ConfigError(f"two-level: gpus_per_node lists {len(counts)} counts for {nodes} nodes")
        check_ranks(sum(counts), f"nodes = {nodes}")
        return counts
    gpn = positive_int(gpus_per_node, "two-level: gpus_per_node")
    check_ranks(nodes * gpn, f"nodes x gpus_per_node = {nodes:,} x {gpn:,}")
    return [gpn] * nodes


def _switch(g, hosts, nic_lc, links, rails, **opts):
    if opts:
        raise TypeError(f"unexpected option {sorted(opts)[0]!r}")
    return add_star(g, hosts, nic_lc)


def _fat_tree(g, hosts, nic_lc, links, rails, **opts):
    return add_fat_tree(g, hosts, nic_lc, links, **opts)


def _rail(g, hosts, nic_lc, links, rails, **opts):
    return add_rail(g, hosts, nic_lc, links, rails=rails, **opts)


def _dragonfly(g, hosts, nic_lc, links, rails, **opts):
    return add_dragonfly(g, hosts, nic_lc, links, **opts)


def _torus(g, hosts, nic_lc, links, rails, **opts):
    opts.setdefault("dims", _square(len(hosts)))
    return add_torus(g, hosts, nic_lc, links, **opts)


def _ring(g, hosts, nic_lc, links, rails, **opts):
    opts.setdefault("dims", (len(hosts),))
    return add_torus(g, hosts, nic_lc, links, **opts)


#: the internode networks a two-level cluster can use (``inter``), one registered builder each;
#: ``simcomm list fabrics`` prints them
FABRICS: Registry = Registry("internode network")
for _name, _fn, _summary, _ref in (
    ("switch", _switch, "every NIC on one non-blocking switch", "docs/topologies.md"),
    ("fat-tree", _fat_tree, "k-ary fat-tree or leaf-spine, oversubscription, ECMP", "Al-Fares et al., SIGCOMM 2008"),
    ("rail", _rail, "rail-optimised leaf-spine: one leaf group per NIC rail (DGX SuperPOD)",
     "NVIDIA DGX SuperPOD reference architecture; docs/topologies.md"),
    ("dragonfly", _dragonfly, "groups of all-to-all routers, one global link per group pair",
     "Kim, Dally, Scott, Abts, ISCA 2008"),
    ("torus", _torus, "2-D/3-D torus of the nodes, dimension-order routing", "docs/topologies.md"),
    ("ring", _ring, "the nodes on a bidirectional ring", "docs/topologies.md"),
):
    FABRICS.add(_name, _fn, summary=_summary, reference=_ref)
assert FABRICS.names() == INTER


def _add_inter(g, inter, hosts, nic_lc, links, opts, rails: int = 1):
    build = FABRICS.get(inter)  # an unknown name: one line listing the valid ones
    try:
        return build(g, hosts, nic_lc, links, rails, **dict(opts or {}))
    except TypeError as exc:  # an unknown keyword in inter_options
        raise ConfigError(f"two-level: bad inter_options for {inter!r}: {exc}") from None


def _square(n: int) -> tuple[int, int]:
    """Smallest near-square 2-D torus holding ``n`` hosts."""
    a = math.isqrt(n)
    a = a if a * a >= n else a + 1
    return (a, math.ceil(n / a))


def _check(intra, inter, domain, host, planes, nics):
    if intra not in INTRA:
        raise UnknownNameError("intranode fabric", intra, INTRA)
    if inter not in INTER:
        raise UnknownNameError("internode network", inter, INTER)
    if domain > 1 and intra != "nvswitch":
        raise ConfigError(f"two-level: nvlink_domain needs intra 'nvswitch' (an NVSwitch domain), got {intra!r}")
    if host is not None and intra not in HOST_INTRA:
        raise ConfigError(f"two-level: host is only used by intra {' or '.join(HOST_INTRA)}, got {intra!r}")
    if nics % planes:
        raise ConfigError(f"two-level: planes ({planes}) must divide nics_per_node ({nics})")


def _relay_table(counts, offsets, nic_of, nics, planes):
    """relay[m, j]: the rank of machine m whose NIC has local index j (that rail), else one on j's plane."""
    relay = np.full((len(counts), nics), -1, dtype=np.int64)
    for m, cnt in enumerate(counts):
        mine: dict[int, int] = {}
        for l in range(cnt):  # the first GPU using each NIC
            mine.setdefault(nic_of[offsets[m] + l] % nics, offsets[m] + l)
        for j in range(nics):
            r = mine.get(j, next((v for k, v in sorted(mine.items()) if k % planes == j % planes), None))
            if r is None:
                raise ConfigError(f"two-level: node {m} has no GPU on plane {j % planes}; planes need a GPU "
                                  "per plane on every node")
            relay[m, j] = r
    return relay


@TOPOLOGIES.register('two-level', summary='builder: M nodes x G ranks, intranode fabric, shared NICs, any internode network',
                     reference='issue 2; docs/topologies.md')
def two_level(nodes: int, gpus_per_node: int | Sequence[int] = 8, *, intra: str = "nvswitch",
              intra_link: str | LinkClass | None = None, nic_link: str | LinkClass = "ib-hdr",
              nics_per_node: int = 1, nic_attach: str | LinkClass = "pcie4", inter: str = "switch",
              inter_options: dict | None = None, links_per_pair: int = 1,
              nvlink_domain: int | Sequence[int] = 1,
              host: HostPath | None = None, planes: int = 1, device: str | None = None,
              gamma: float | None = None, name: str | None = None) -> Topology:
    """Build the cluster described in the module docstring."""
    args = dict(locals())  # every argument as given: the Recipe a network override rebuilds from
    counts = _counts(nodes, gpus_per_node)
    nics = positive_int(nics_per_node, "two-level: nics_per_node")
    split: tuple[int, ...] | None = None
    if isinstance(nvlink_domain, Sequence) and not isinstance(nvlink_domain, str):
        per_domain = check_split(nvlink_domain, nodes)
        split, domain = per_domain, max(per_domain)
    else:
        split, domain = None, positive_int(nvlink_domain, "two-level: nvlink_domain")
    planes = positive_int(planes, "two-level: planes")
    _check(intra, inter, domain, host, planes, nics)
    dmeta = {"nvlink_domain": split if split is not None else domain}
    of_machine = domain_of_machines(dmeta, nodes)
    if intra in HOST_INTRA and host is None:
        host = HostPath()
    links: dict[str, LinkClass] = {}
    in_lc = link_class(intra_link if intra_link is not None else DEFAULT_INTRA_LINK[intra])
    if intra == "nvlink-mesh" and positive_int(links_per_pair, "two-level: links_per_pair") != 1:
        in_lc = in_lc.scaled(links_per_pair, suffix=f"x{links_per_pair}")  # parallel links of one pair
    in_lc = add_link(links, in_lc)  # dropped below if no edge uses it (cube mesh with 1 GPU)
    g = nx.Graph()
    rank_names, machine, nic_of, offsets = [], [], [], []
    for m, cnt in enumerate(counts):
        gam = gamma if gamma is not None else (device_gamma(device, cnt) if device else DEFAULT_GAMMA)
        offsets.append(len(rank_names))
        mine = [f"r{len(rank_names) + l}" for l in range(cnt)]
        add_new_nodes(g, mine, kind="rank", machine=m, gamma=gam)
        rank_names += mine
        machine += [m] * cnt
        local_nic = nic_by_switch(cnt, nics, host.layout(cnt)[0]) if host is not None \
            else [l * nics // cnt for l in range(cnt)]
        nic_of += [m * nics + j for j in local_nic]
    # intranode: one router object per group (a machine, or an NVLink domain of `domain` machines)
    group = [of_machine[m] for m in machine]
    first_of: dict[int, int] = {}  # the first machine of each group (one pass: 2 048 machines, 2 048 groups)
    for m, k in enumerate(of_machine):
        first_of.setdefault(k, m)
    first = [first_of[k] for k in range(of_machine[-1] + 1)] + [nodes]
    intra_of: list = []
    local: list[int] = []
    bounds = offsets + [len(rank_names)]
    for k in range(group[-1] + 1):  # groups are contiguous rank ranges
        names = rank_names[bounds[first[k]]:bounds[first[k + 1]]]
        local += range(len(names))
        if intra in HOST_INTRA:
            intra_of.append(add_host_intra(g, links, k, names, intra, in_lc, host))
        elif len(names) < 2:
            intra_of.append(None)
        elif intra == "nvlink-mesh":
            g.add_edges_from(((x, y) for i, x in enumerate(names) for y in names[i + 1:]), link=in_lc.name)
            intra_of.append(MeshIntra(names))
        else:
            h = f"m{k}.{_HUB[intra]}" if domain == 1 else f"d{k}.{_HUB[intra]}"
            g.add_node(h, kind="switch", machine=k if domain == 1 else None)
            add_new_edges(g, ((n, h) for n in names), in_lc.name)
            intra_of.append(HubIntra(names, h))
    fabric, relay = None, None
    port: list = [None] * len(rank_names)
    nic_names: list = []
    if nodes > 1:  # machines of one NVLink domain still have their NICs (unused by its own routes)
        att, nic_lc = add_link(links, nic_attach), add_link(links, nic_link)
        nic_names = [f"m{m}.nic{j}" for m in range(nodes) for j in range(nics)]
        add_new_nodes_data(g, ((n, {"kind": "nic", "machine": i // nics}) for i, n in enumerate(nic_names)))
        if intra == "pcie" and domain == 1 and planes == 1:
            # No NVLink: a GPU's one PCIe port reaches its peers and its NIC through the same switch, so peer
            # and network traffic share it (the NIC's own port is the attach link)
            for i, r in enumerate(rank_names):
                hub = intra_of[group[i]].hub if intra_of[group[i]] is not None else None
                port[i] = hub
                g.add_edge(hub or r, nic_names[nic_of[i]], link=att.name)
        else:
            add_new_edges(g, ((r, nic_names[nic_of[i]]) for i, r in enumerate(rank_names)), att.name)
        if planes == 1:
            fabric = _add_inter(g, inter, nic_names, nic_lc, links, inter_options, nics)
        else:
            fabric = add_planes(g, nic_names, planes, lambda h, hosts: _add_inter(
                h, inter, hosts, nic_lc, links, inter_options, nics // planes))
            relay = _relay_table(counts, offsets, nic_of, nics, planes)
    used = {data.get("link") for _, nbrs in g.adjacency() for data in nbrs.values()}  # (no edge view per edge)
    links = {k: v for k, v in links.items() if k in used}
    uniform = len(set(counts)) == 1
    meta = {"builder": "two-level", "nodes": nodes, "gpus_per_node": counts[0] if uniform else counts,
            "intra": intra, "intra_link": in_lc.name, "nic_link": nic_link if isinstance(nic_link, str)
            else nic_link.name, "nics_per_node": nics, "inter": inter, "inter_options": dict(inter_options or {}),
            "device": device}
    # Non-default features only, so that the summaries of existing clusters stay as they were.
    if domain > 1 or split is not None:
        meta["nvlink_domain"] = dmeta["nvlink_domain"]
    if planes > 1:
        meta["planes"] = planes
    if host is not None:
        sw, so = host.layout(counts[0])
        meta["host"] = {"pcie_switches": sw, "sockets": so, "uplink": link_class(host.up(intra, in_lc)).name,
                        "memory": link_class(host.memory).name}
        if so > 1:
            meta["host"]["socket_link"] = link_class(host.socket_link).name
    if intra == "pcie-host":
        meta["p2p"] = False  # GPU peer-to-peer is off: NCCL would use its SHM transport
    label = name or f"two-level-{nodes}x{counts[0] if uniform else 'var'}-{intra}-{inter}"
    router = TwoLevelRouter(rank_names, group, local, intra_of, nic_of, fabric, relay, machine, planes, port,
                            nic_names if nodes > 1 else None)
    recipe = Recipe("two-level", args, frozenset(meta))
    return Topology(label, g, links, tuple(rank_names), router=router, meta=meta, recipe=recipe)
