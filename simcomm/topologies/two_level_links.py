"""Link ids of a two-level cluster's routes from tables (:meth:`TwoLevelRouter.links_many
<simcomm.topologies.two_level.TwoLevelRouter.links_many>`).

``paths_many`` gives node index paths, which :meth:`Topology._links_of_paths
<simcomm.topologies.base.Topology._links_of_paths>` turns into link ids by a binary search of every hop's node
pair (crossover-sgd at 16 384 GPUs: 3 x 10^5 routes, 2.4 x 10^6 hops).  But a route's links are of a few kinds
only: a rank's link to its machine's hub (NVSwitch, PCIe switch) and back, a rank's way to its NIC (through its
PCIe port switch on a ``pcie`` machine) and back, and the fabric's links between NICs, which the fabric numbers
itself (``links_many`` and ``edge_ends``) and a table maps to the cluster graph's ids.  The tables are looked up
once per graph; a batch of routes is then a few table lookups per pair, as rows padded with -1 and read row by
row, the same ids in the same order.  Intranode routes other than a hub's (NVLink meshes, host paths) are few
and keep the node paths.
"""

from __future__ import annotations

import numpy as np

from simcomm.topologies.base import ecmp_hash_many

__all__ = ["LinkTables", "links_many"]

#: fewer pairs than this are left to the node paths (Topology.route for one pair: 27 us against 75 us here)
_FEW = 2


class LinkTables:
    """A topology's link ids by what they join: per rank, per NIC and per fabric link (-1: none)."""

    def __init__(self, router, topo):
        idx = topo.node_index
        self.idx = idx
        cached = router._cached(idx)
        rank = cached["rank"]
        self.up = self.down = None  # rank -> its hub, hub -> rank (intranode hubs only)
        if cached["kind"] == "hub":
            hub = cached["hub"][router.group_arr]
            on = hub >= 0
            self.up, self.down = _ids(topo, rank, hub, on), _ids(topo, hub, rank, on)
        # a rank's links to its NIC and back (two with a port switch), and the fabric's ids in the graph's
        self.send = self.recv = self.fabric = None
        if router.fabric is not None and router.nic_names is not None:
            self.nic_of = np.asarray(router.nic_of, dtype=np.int64)
            nic = np.fromiter((idx[n] for n in router.nic_names), dtype=np.int64,
                              count=len(router.nic_names))[self.nic_of]
            port = router._port_arr(idx)
            if port is None:
                self.send, self.recv = topo.link_ids(rank, nic)[:, None], topo.link_ids(nic, rank)[:, None]
            else:
                via, direct = port >= 0, port < 0
                self.send = np.stack([np.where(via, _ids(topo, rank, port, via), _ids(topo, rank, nic, direct)),
                                      _ids(topo, port, nic, via)], axis=1)
                self.recv = np.stack([np.where(via, _ids(topo, nic, port, via), _ids(topo, nic, rank, direct)),
                                      _ids(topo, port, rank, via)], axis=1)
            self.fabric = _fabric_ids(router.fabric, topo)


def _ids(topo, u: np.ndarray, v: np.ndarray, on: np.ndarray) -> np.ndarray:
    """Link id from node ``u[i]`` to ``v[i]`` where ``on[i]``, else -1."""
    out = np.full(len(u), -1, dtype=np.int64)
    out[on] = topo.link_ids(u[on], v[on])
    return out


def _fabric_ids(fabric, topo) -> np.ndarray | None:
    """The graph's link id of each of the fabric's own link ids (``fabric.links_many``), and -1 last (so that
    -1 padding maps to -1); None when the fabric does not number its links."""
    ends = getattr(fabric, "edge_ends", None)
    if ends is None or getattr(fabric, "links_many", None) is None:
        return None
    both = ends()
    if both is None:
        return None
    idx = topo.node_index
    u = np.fromiter((idx[n] for n in both[0]), dtype=np.int64, count=len(both[0]))
    v = np.fromiter((idx[n] for n in both[1]), dtype=np.int64, count=len(both[1]))
    out = np.full(2 * len(u) + 1, -1, dtype=np.int64)
    if len(u):
        out[0:-1:2], out[1:-1:2] = topo.link_ids(u, v), topo.link_ids(v, u)
    return out


def _local(router, topo, tables: LinkTables, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """Link ids of intranode routes ``a[i] -> b[i]`` (one group, ``a != b``) as rows padded with -1, or None."""
    if tables.up is not None:
        return np.stack([tables.up[a], tables.down[b]], axis=1)
    nodes = router._local_rows(topo, a, b)
    if nodes is None:
        return None
    lens, links = topo._links_of_paths(nodes)
    rows = np.full((len(a), int(lens.max(initial=0))), -1, dtype=np.int64)
    rows[np.arange(rows.shape[1]) < lens[:, None]] = links
    return rows


def links_many(router, topo, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(route_len, links)`` of the routes ``a[i] -> b[i]``: what ``router.paths_many`` and
    ``Topology._links_of_paths`` give, from :class:`LinkTables`; None where those tables do not cover a route,
    and for a single pair (``Topology.route``'s node path and edge dict take a third of the time)."""
    if len(a) < _FEW:
        return None
    tables = router.__dict__.get("_link_tables")
    if tables is None or tables.idx is not topo.node_index:
        tables = router.__dict__["_link_tables"] = LinkTables(router, topo)
    group = router.group_arr
    ga, gb = group[a], group[b]
    parts = []
    loc = np.flatnonzero((ga == gb) & (a != b))
    if loc.size:
        rows = _local(router, topo, tables, a[loc], b[loc])
        if rows is None:
            return None
        parts.append((loc, rows))
    far = np.flatnonzero(ga != gb)
    if far.size:
        if tables.fabric is None:
            return None
        af, bf = a[far], b[far]
        nic_of = tables.nic_of
        r = router.senders(af, bf, nic_of)  # the rank that sends into the network (a relay with planes > 1)
        blocks = []
        moved = np.flatnonzero(r != af)
        if moved.size:
            sub = _local(router, topo, tables, af[moved], r[moved])
            if sub is None:
                return None
            head = np.full((len(af), sub.shape[1]), -1, dtype=np.int64)
            head[moved] = sub
            blocks.append(head)
        fab = router.fabric.links_many(nic_of[r], nic_of[bf], ecmp_hash_many(af, bf))
        blocks += [tables.send[r], tables.fabric[fab], tables.recv[bf]]
        parts.append((far, np.concatenate(blocks, axis=1)))
    if len(parts) == 1 and len(parts[0][0]) == len(a):  # (every pair of one kind: its rows as they are)
        out = parts[0][1]
    else:
        out = np.full((len(a), max([0] + [rows.shape[1] for _, rows in parts])), -1, dtype=np.int64)
        for sel, rows in parts:
            out[sel, :rows.shape[1]] = rows
    hop = out >= 0
    lens = np.zeros(len(a), dtype=np.int64)
    for col in hop.T:  # (column by column: a third of the time of hop.sum(axis=1) over short rows)
        lens += col
    return lens, out[hop]
