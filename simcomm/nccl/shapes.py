"""Groups on alike machines get one NCCL preparation: a machine's class and the members' local indices.

A collective group whose members all sit on one machine is prepared
(:func:`~simcomm.nccl.prepare.prepare_nccl`) from facts about that machine
alone, each read per member position:

* its :class:`~simcomm.nccl.layout.GroupLayout`: every member's NIC (only
  which members share one matters: ``execution.py`` counts distinct
  (node, NIC) pairs), the NIC's local index, the port rates NCCL sees
  (``intra_bw``, ``gpu_nic_bw``, ``nic_bw``), the direct links between
  members and their line rates (the rings NCCL's search finds on a mesh);
  the rest of a layout is the topology's (arch, NVLS, SHARP, CPU, P2P);
* its flows, algorithm and protocol: functions of the layout;
* its closed form and host-memory stretch: the links the flows' routes cross,
  their capacities, and which flows share a link (each link's bytes are
  summed in flow order, so equal patterns give equal floats).

So two machines whose members agree on all of these, position by position
(links relabelled in order of first use), give every group of the same local
members the same preparation bit for bit.  A machine's *class*
(:func:`group_shape`) is that agreement: built once per topology from every
ordered pair of a machine's ranks, in one routing batch.  At 16 384 GPUs
(2 048 DGX A100s) ``hierarchical-allreduce`` prepares 16 448 groups; all its
machine-local ones fall in one class.  Groups that span machines keep their
own preparation (their routes cross the fabric, which is not compared here).
The engine's ``shapes`` reference (:data:`simcomm.engine.paths.REFERENCES`)
prepares every group on its own; tests/nccl/test_nccl_shapes.py compares both
bit for bit.
"""

from __future__ import annotations

import numpy as np

from simcomm.nccl.layout import _machine_info

__all__ = ["group_shape"]

#: machines of more ranks than this are not classed (the pairs grow as the square)
MAX_LOCAL = 128
#: nor topologies whose machines have more ordered rank pairs than this in all
MAX_PAIRS = 1 << 22
#: pairs per routing call: under the topology's kept-batch size, so that classing does not evict
#: the large batches a run asks for again (Topology.routes keeps the last few of 4 096 pairs or more)
_CHUNK = 4095


def group_shape(topology, ranks: tuple[int, ...]) -> tuple | None:
    """``(class, local indices)`` of a group on one machine, equal for groups NCCL prepares alike; else None."""
    if len(ranks) < 2:
        return None
    seen = topology.__dict__.setdefault("_nccl_group_shapes", {})  # a plan asks for each group once per op
    if ranks in seen:
        return seen[ranks]
    out = None
    machine_of = topology.machine_of
    m = machine_of(ranks[0])
    if m is not None and all(machine_of(r) == m for r in ranks):  # (a group across machines stops at its first)
        classes = _classes(topology)
        if classes is not None:
            local, cls = classes
            out = cls[m], tuple(local[r] for r in ranks)
    elif len(ranks) == 2:
        out = _pair_shape(topology, ranks)
    if len(ranks) <= MAX_LOCAL:  # (large groups are not kept: they span machines, found at the second member)
        seen[ranks] = out
    return out


def _pair_shape(topology, ranks: tuple[int, ...]) -> tuple | None:
    """``("pair", class)`` of two ranks on machines of different NVLink domains (sgp's pair all-reduces of
    offset R/2, thousands of them at 16 384 GPUs); None when they share a domain or a GPU stages through host
    memory.

    Such a group is one rank per NCCL node, so its layout (:func:`~simcomm.nccl.layout.group_layout`) is two
    one-member nodes with each member's NIC index and port rates (its ``nic`` global ids are only counted as
    distinct (node, NIC) pairs, two here); its flows, algorithm and protocol follow from the layout, and its
    closed form from the two routes between the members (each link's bytes summed in flow order, so routes
    alike up to relabelling, with equal capacities, give equal floats).  Two pairs that agree on the members'
    facts, in order, and on both routes are prepared alike bit for bit (tests/nccl/test_nccl_shapes.py).
    """
    from simcomm.nccl.execution import any_host_staging
    from simcomm.nccl.layout import _domains

    a, b = ranks
    ma, mb = topology.machine_of(a), topology.machine_of(b)
    if ma is None or mb is None or any_host_staging(topology):
        return None
    domain = _domains(topology)
    if ma >= len(domain) or mb >= len(domain) or domain[ma] == domain[mb]:
        return None
    info = _machine_info(topology)
    facts = tuple((int(info["nic"][r] >= 0), int(info["nic_local"][r]), float(info["intra_bw"][r]),
                   float(info["gpu_nic_bw"][r]), float(info["nic_bw"][r]), float(info["nic_latency"][r]))
                  for r in (a, b))
    route_len, links = topology.routes(np.array([a, b], dtype=np.int64), np.array([b, a], dtype=np.int64))
    signature = (facts, np.asarray(route_len).tobytes(), _first_use(np.asarray(links)).tobytes(),
                 np.asarray(topology.capacity, dtype=float)[links].tobytes())
    seen = topology.__dict__.setdefault("_nccl_pair_classes", {})
    return "pair", seen.setdefault(signature, len(seen))


def _classes(topology):
    """(local index of each rank, class of each machine) as lists; None: unclassed.

    Cached with the topology, as the layouts are (:func:`~simcomm.nccl.layout.group_layout`).
    """
    if "_nccl_shapes" in topology.__dict__:
        return topology.__dict__["_nccl_shapes"]
    out = _build(topology)
    topology.__dict__["_nccl_shapes"] = out
    return out


def _build(topology):
    machines = np.asarray(topology.machines(), dtype=np.int64)
    placed = np.flatnonzero(machines >= 0)
    if not placed.size:
        return None
    counts = np.bincount(machines[placed])
    if counts.max() > MAX_LOCAL or int((counts * (counts - 1)).sum()) > MAX_PAIRS:
        return None
    # each machine's ranks in rank order: a rank's local index is its position there
    order = placed[np.argsort(machines[placed], kind="stable")]
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    local = np.full(len(machines), -1, dtype=np.int64)
    local[order] = np.arange(len(order)) - np.repeat(starts, counts)
    members = [order[s:s + c] for s, c in zip(starts.tolist(), counts.tolist(), strict=True)]

    # every ordered pair of a machine's ranks, machine after machine, local pairs in one fixed order
    pair_src, pair_dst, pair_start = [], [], [0]
    for ms in members:
        c = len(ms)
        i, j = np.nonzero(~np.eye(c, dtype=bool))
        pair_src.append(ms[i])
        pair_dst.append(ms[j])
        pair_start.append(pair_start[-1] + len(i))
    src, dst = np.concatenate(pair_src), np.concatenate(pair_dst)
    lens, links = [], []
    for lo in range(0, len(src), _CHUNK):
        n_len, n_links = topology.routes(src[lo:lo + _CHUNK], dst[lo:lo + _CHUNK])
        lens.append(n_len)
        links.append(n_links)
    route_len = np.concatenate(lens) if lens else np.zeros(0, dtype=np.int64)
    flat = np.concatenate(links) if links else np.zeros(0, dtype=np.int64)
    link_start = np.concatenate(([0], np.cumsum(route_len)))
    capacity = np.asarray(topology.capacity, dtype=float)

    info = _machine_info(topology)
    per_rank = list(zip(info["nic_local"].tolist(), info["intra_bw"].tolist(), info["gpu_nic_bw"].tolist(),
                        info["nic_bw"].tolist(), strict=True))
    nic = info["nic"].tolist()
    direct = _direct_links(topology, local)

    seen: dict = {}
    cls = [-1] * len(counts)
    for m, ms in enumerate(members):
        if not len(ms):
            continue
        p0, p1 = pair_start[m], pair_start[m + 1]
        seg = flat[link_start[p0]:link_start[p1]]
        ranks = ms.tolist()
        nic_label: dict = {-1: -1}
        signature = (
            len(ranks),
            route_len[p0:p1].tobytes(),
            _first_use(seg).tobytes(),
            capacity[seg].tobytes(),
            tuple(nic_label.setdefault(nic[r], len(nic_label) - 1) for r in ranks),
            tuple(per_rank[r] for r in ranks),
            tuple(direct.get(r, ()) for r in ranks),
        )
        cls[m] = seen.setdefault(signature, len(seen))
    return local.tolist(), cls


def _first_use(ids: np.ndarray) -> np.ndarray:
    """``ids`` relabelled 0, 1, 2 ... in order of first appearance (equal ids keep equal labels)."""
    if not len(ids):
        return ids
    uniq, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    label = np.empty(len(uniq), dtype=np.int64)
    label[np.argsort(first, kind="stable")] = np.arange(len(uniq))
    return label[inverse]


def _direct_links(topology, local: np.ndarray) -> dict[int, tuple]:
    """Per rank, its direct links to ranks of its own machine: ``(peer's local index, line rate)``, sorted.

    What :func:`~simcomm.nccl.layout.intra_cycles` reads of a node's members (an edge between them and its
    ``link_raw`` rate, else its link class's bandwidth).
    """
    g = topology.graph
    rank_of = {name: r for r, name in enumerate(topology.ranks)}
    machine = topology.machines()
    raw = topology.meta.get("link_raw", {})
    out: dict[int, tuple] = {}
    for r, name in enumerate(topology.ranks):
        found = []
        for nb in g.adj[name]:
            peer = rank_of.get(nb)
            if peer is not None and machine[peer] == machine[r] and machine[r] >= 0:
                link = g.edges[name, nb]["link"]
                found.append((int(local[peer]), float(raw.get(link, topology.links[link].bandwidth))))
        if found:
            out[r] = tuple(sorted(found))
    return out
