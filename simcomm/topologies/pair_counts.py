"""How many routes of every ordered pair within groups of ranks cross each link, counted by classes.

:meth:`~simcomm.topologies.base.Topology.pair_counts` asks the router first: a router (or fabric) whose
routes follow from a few coordinates of the two ends counts the pairs crossing each link from how many
members share those coordinates, with no route per pair.  Built for the two-level cluster on a hub (NVSwitch,
one PCIe switch, shared memory) without PXN relays or PCIe ports (:func:`two_level_counts`) over the
rail-optimised leaf-spine with InfiniBand's destination routing (:func:`rail_counts`: every DGX SuperPOD
preset), a fat-tree with D-mod-K (:func:`fat_tree_counts`, InfiniBand's default) or one switch
(:func:`star_counts`: the cloud presets).  Anything else (ECMP hashes each pair; other fabrics) is routed a
chunk of rows at a time and counted (:func:`routed_counts`), the same integers.
tests/topologies/test_topologies_pair_counts.py draws fabrics and groups and compares the two bit for bit.

Two-level, per row of members (each with its group: the NVLink domain; a pair of one group stays on the hub):
``rank -> hub`` and ``hub -> rank`` are crossed once per partner in its group; ``rank -> NIC`` and ``NIC ->
rank`` once per partner in another group; the fabric sees those pairs between the members' NICs.

Rail fabric with ``d-mod-k`` (spine = destination NIC mod spines; same leaf: straight across), per row of NICs
with classes (pairs of one class do not enter the fabric): a NIC's link to its leaf and back carry one route
per partner of another class; the uplink from leaf ``L`` to spine ``s`` carries, for each source ``a`` on
``L``, the destinations on spine ``s`` that are neither on ``L`` nor of ``a``'s class, by inclusion and
exclusion ``D[s] - D[L, s] - E[c, s] + E[c, L, s]`` (``D`` members per spine, per leaf and spine; ``E`` of
class ``c`` per spine, per leaf and spine); the downlink from ``s`` to leaf ``L'`` carries, for each
destination on ``L'`` and ``s``, the sources neither on ``L'`` nor of its class.  A fat-tree with D-mod-K is
the same count twice (:func:`_up_down`): edge switches below and the destination's aggregation switch above,
then pods below and the destination's (aggregation switch, core) above.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pair_counts", "routed_counts", "two_level_counts", "rail_counts", "fat_tree_counts", "star_counts"]

#: pairs routed per chunk when a router cannot count by classes (bounded memory)
_CHUNK_PAIRS = 1 << 20


def pair_counts(topo, rows: np.ndarray) -> np.ndarray:
    """See :meth:`simcomm.topologies.base.Topology.pair_counts`."""
    count = getattr(topo.router, "pair_counts", None)
    got = count(topo, rows) if count is not None and rows.size else None
    return got if got is not None else routed_counts(topo, rows)


def routed_counts(topo, rows: np.ndarray) -> np.ndarray:
    """Route every pair of ``rows``, a chunk of rows at a time, and count the links crossed."""
    from simcomm.collectives.pairs import all_pairs

    n_links = len(topo.capacity)
    counts = np.zeros(n_links, dtype=np.int64)
    n_rows, width = rows.shape
    if width < 2:
        return counts
    per = max(1, _CHUNK_PAIRS // (width * (width - 1)))
    for lo in range(0, n_rows, per):
        src, dst = all_pairs(rows[lo:lo + per])
        counts += np.bincount(topo._routes_of(src, dst)[1], minlength=n_links)
    return counts


def _add(counts: np.ndarray, ids: np.ndarray, times: np.ndarray) -> None:
    np.add.at(counts, ids, np.asarray(times, dtype=np.int64))


def _partners(rows: np.ndarray, cls: np.ndarray) -> np.ndarray:
    """Per member (rows flattened): members of its row in its class, itself included."""
    n_rows, width = rows.shape
    key = np.repeat(np.arange(n_rows, dtype=np.int64), width) * (int(cls.max()) + 1) + cls.ravel()
    _, inverse, count = np.unique(key, return_inverse=True, return_counts=True)
    return count[inverse.reshape(-1)]


def two_level_counts(router, topo, rows: np.ndarray) -> np.ndarray | None:
    """Counts on a two-level cluster whose groups sit on a hub (see the module docstring), or None."""
    cache = router._cached(topo.node_index)
    if cache["kind"] != "hub" or router.relay is not None or any(p is not None for p in router.port):
        return None
    fabric = None
    if router.fabric is not None:
        fabric = getattr(router.fabric, "pair_counts", None)
        if fabric is None:
            return None
    n_rows, width = rows.shape
    counts = np.zeros(len(topo.capacity), dtype=np.int64)
    if width < 2:
        return counts
    flat = rows.ravel()
    group = router.group_arr[flat]
    same = _partners(rows, group.reshape(rows.shape)) - 1
    far = (width - 1) - same
    rank = cache["rank"][flat]
    on = same > 0
    if on.any():
        hub = cache["hub"][group[on]]
        _add(counts, topo.link_ids(rank[on], hub), same[on])
        _add(counts, topo.link_ids(hub, rank[on]), same[on])
    on = far > 0
    if on.any():
        assert fabric is not None  # members of two groups: the cluster has nodes joined by a fabric
        idx = topo.node_index
        nic = np.asarray(router.nic_of, dtype=np.int64)[flat]
        nic_node = np.fromiter((idx[router.nic_names[i]] for i in nic[on].tolist()), dtype=np.int64,
                               count=int(on.sum()))
        _add(counts, topo.link_ids(rank[on], nic_node), far[on])
        _add(counts, topo.link_ids(nic_node, rank[on]), far[on])
        keep = (far.reshape(rows.shape) > 0).any(axis=1)
        got = fabric(topo, nic.reshape(rows.shape)[keep], group.reshape(rows.shape)[keep])
        if got is None:
            return None
        counts += got
    return counts


def _far(cls_row: np.ndarray) -> np.ndarray:
    """Per member of a row: partners of another class (its routes through the fabric)."""
    _, ci = np.unique(cls_row, return_inverse=True)
    ci = ci.reshape(-1)
    return len(cls_row) - np.bincount(ci)[ci]


def star_counts(fabric, topo, hosts: np.ndarray, cls: np.ndarray) -> np.ndarray:
    """Counts on one switch for pairs of ``hosts`` of different ``cls``: each host's link to the switch and
    back, once per partner of another class."""
    idx = topo.node_index
    host_node = np.fromiter((idx[n] for n in fabric.hosts), dtype=np.int64, count=len(fabric.hosts))
    switch = np.full(hosts.shape[1], idx[fabric.switch], dtype=np.int64)
    counts = np.zeros(len(topo.capacity), dtype=np.int64)
    for h, c in zip(hosts, cls, strict=True):
        far = _far(c)
        _add(counts, topo.link_ids(host_node[h], switch), far)
        _add(counts, topo.link_ids(switch, host_node[h]), far)
    return counts


def _host_links(counts, topo, host_nodes: np.ndarray, first_hop: np.ndarray, far: np.ndarray) -> None:
    """Each host's link to its first switch and back, once per partner of another class."""
    _add(counts, topo.link_ids(host_nodes, first_hop), far)
    _add(counts, topo.link_ids(first_hop, host_nodes), far)


def _up_down(counts, topo, below: np.ndarray, choice: np.ndarray, ci: np.ndarray, n_choices: int,
             lower, upper) -> None:
    """One up/down layer of destination routing for one row: a pair of members on different ``below`` groups
    climbs from ``lower(B, S)`` to ``upper(B, S)`` (node indices) at its source's group ``B`` and the
    destination's choice ``S``, and comes down from ``upper(B', S)`` to ``lower(B', S)`` at the destination's
    group ``B'``; pairs of one class (``ci``) never enter the fabric.  Counted by inclusion and exclusion
    (the module docstring)."""
    groups, bi = np.unique(below, return_inverse=True)
    bi = bi.reshape(-1)
    if len(groups) < 2:  # one group: every route stays below
        return
    _, gi = np.unique(ci * len(groups) + bi, return_inverse=True)
    gi = gi.reshape(-1)
    width = len(below)
    per_choice = np.bincount(choice, minlength=n_choices)
    by_group = np.zeros((len(groups), n_choices), dtype=np.int64)
    np.add.at(by_group, (bi, choice), 1)
    by_cls = np.zeros((int(ci.max()) + 1, n_choices), dtype=np.int64)
    np.add.at(by_cls, (ci, choice), 1)
    by_both = np.zeros((int(gi.max()) + 1, n_choices), dtype=np.int64)
    np.add.at(by_both, (gi, choice), 1)
    up = np.zeros((len(groups), n_choices), dtype=np.int64)
    np.add.at(up, bi, per_choice[None, :] - by_group[bi] - by_cls[ci] + by_both[gi])
    # sources of each destination that are below another group and of another class
    senders = width - np.bincount(bi)[bi] - np.bincount(ci)[ci] + np.bincount(gi)[gi]
    down = np.zeros((len(groups), n_choices), dtype=np.int64)
    np.add.at(down, (bi, choice), senders)
    for table, rising in ((up, True), (down, False)):
        at, sc = np.nonzero(table)
        lo, hi = lower(groups[at], sc), upper(groups[at], sc)
        _add(counts, topo.link_ids(lo, hi) if rising else topo.link_ids(hi, lo), table[at, sc])


def rail_counts(fabric, topo, hosts: np.ndarray, cls: np.ndarray) -> np.ndarray | None:
    """Counts on a rail fabric with destination routing for pairs of ``hosts`` (NIC positions, one row per
    group) whose ``cls`` differ (see the module docstring), or None (ECMP: each pair's hash)."""
    if fabric.routing != "d-mod-k":
        return None
    host_node, leaf_node, spine_node = fabric._nodes.of(topo.node_index)
    n_spines = len(fabric.spines)
    counts = np.zeros(len(topo.capacity), dtype=np.int64)
    for h, c in zip(hosts, cls, strict=True):
        leaf_of = fabric._leaf(h)
        _, ci = np.unique(c, return_inverse=True)
        ci = ci.reshape(-1)
        _host_links(counts, topo, host_node[h], leaf_node[leaf_of], len(h) - np.bincount(ci)[ci])
        _up_down(counts, topo, leaf_of, h % n_spines, ci, n_spines,
                 lambda leaf, s: leaf_node[leaf], lambda leaf, s: spine_node[s])
    return counts


def fat_tree_counts(fabric, topo, hosts: np.ndarray, cls: np.ndarray) -> np.ndarray | None:
    """Counts on a fat-tree (two or three levels) with destination routing (D-mod-K: the destination's
    digits pick the aggregation switch and the core), or None (ECMP)."""
    if fabric.routing != "d-mod-k":
        return None
    host_node, edge_node, agg_node, core_node = fabric._nodes.of(topo.node_index)
    half = fabric.half
    counts = np.zeros(len(topo.capacity), dtype=np.int64)
    for h, c in zip(hosts, cls, strict=True):
        _, ci = np.unique(c, return_inverse=True)
        ci = ci.reshape(-1)
        edge, a = h // half, h % half
        _host_links(counts, topo, host_node[h], edge_node[edge], len(h) - np.bincount(ci)[ci])
        if fabric.levels == 2:
            _up_down(counts, topo, edge, a, ci, half, lambda e, s: edge_node[e], lambda e, s: agg_node[s])
            continue
        _up_down(counts, topo, edge, a, ci, half,
                 lambda e, s: edge_node[e], lambda e, s: agg_node[(e // half) * half + s])
        core = (h // half) % half  # the core among the aggregation switch's: the destination's next digit
        _up_down(counts, topo, edge // half, a * half + core, ci, half * half,
                 lambda pod, s: agg_node[pod * half + s // half], lambda pod, s: core_node[s])
    return counts
