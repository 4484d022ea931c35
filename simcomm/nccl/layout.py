"""Where a collective's members sit, as NCCL sees it: NVLink domains, local order, NICs, fabric features.

NCCL builds its channels from the node's topology (``src/graph/search.cc``):
a ring or tree enters a node through one NIC, visits the node's GPUs over
NVLink (or PCIe), and leaves through a NIC again; different channels use
different NICs, so every rail carries its share.  A :class:`GroupLayout`
holds what that needs, read off a :class:`~simcomm.topologies.base.Topology`
(never from link parameters a strategy could not see):

* ``node``: NCCL's node is an NVLink domain: one machine, or several machines
  sharing NVSwitches (GB200 NVL72; ``topology.meta["nvlink_domain"]``
  machines per domain, or one count per domain when racks are filled
  unequally: :mod:`simcomm.topologies.nvlink`);
* the intranode order NCCL's rings follow (:func:`intra_cycle`): rank order on
  an NVSwitch or PCIe switch, a Hamiltonian cycle over direct NVLinks on a mesh
  (DGX-1's hybrid cube mesh);
* each member's NIC (the NIC node its rank is wired to) and the NIC's local
  index on its machine;
* the fabric's features: NVLS needs an NVSwitch of the Hopper generation or
  later (``arch >= 90``); CollNet needs in-network reduction
  (``topology.meta["sharp"]``);
* the bandwidths NCCL's topology search sees (GB/s, ``src/graph/topo.h``):
  NVLink as links x NCCL's per-link rate of the GPU generation (20 GB/s on
  V100/A100, 20.6 on H100, 40.1 on B200), PCIe as width x speed / 80 (12, 24,
  48 GB/s for Gen3/4/5 x16), a NIC as its line rate.  They come from the
  links' line rates (``topology.meta["link_raw"]``), not from the stack's
  derated rates: NCCL prices the hardware.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from simcomm.errors import ConfigError
from simcomm.topologies.nvlink import domain_of_machines

__all__ = ["GroupLayout", "group_layout", "ARCH_OF_DEVICE", "intra_cycle", "intra_cycles", "topology_arch",
           "nvlink_bw"]

#: GPU architecture (SM version) of each topology device name; NCCL's constants are per arch
ARCH_OF_DEVICE = {"v100": 70, "t4": 75, "gtx-1080-ti": 61, "1080ti": 61, "a100": 80, "a100-80g": 80,
                  "a10": 86, "l40s": 89, "h100": 90, "h800": 90, "h200": 90, "h20": 90, "b200": 100, "gb200": 100,
                  "gb300": 100}
#: link families that join GPUs of one machine (the node's "intra" graph)
_INTRA = {"nvlink": "nvlink", "nvswitch": "nvswitch", "pcie": "pcie", "shm": "shm"}
#: NCCL's NVLink bandwidth per link and direction by SM generation, GB/s (topo.h)
NVLINK_BW = {60: 18.0, 70: 20.0, 80: 20.0, 86: 12.0, 90: 20.6, 100: 40.1}


def nvlink_bw(arch: int) -> float:
    return NVLINK_BW.get(arch, NVLINK_BW[100] if arch >= 100 else 20.0)


def _nccl_rate(family: str, raw: float, arch: int) -> float:
    """NCCL's view (GB/s) of a link of line rate ``raw`` bytes/s."""
    if family in ("nvlink", "nvswitch"):
        per_link = 50e9 if arch >= 100 else 20e9 if arch and arch < 70 else 25e9
        return max(1, round(raw / per_link)) * nvlink_bw(arch)
    if family == "pcie":
        return raw * 12.0 / 15.75e9  # width x speed / 80: Gen3 x16 = 12, Gen4 = 24, Gen5 = 48
    return raw / 1e9


@dataclass(frozen=True, eq=False)
class GroupLayout:
    """A collective group placed on a topology (member indices are positions in ``ranks``).

    Attributes
    ----------
    ranks: global ranks of the members, in the op's order.
    nodes: members of each NCCL node (NVLink domain), each in the order NCCL's
        intranode ring visits them; nodes in order of their first member.
    node_of: node index of each member.
    nic: global id (graph node index) of each member's NIC, -1 if none.
    nic_local: local index of each member's NIC on its machine, -1 if none.
    nics_per_node: NICs of one machine that the members use (max over nodes).
    intra: ``nvswitch``, ``nvlink``, ``pcie``, ``shm`` or ``none`` (one GPU per node).
    arch: SM version of the GPUs (NCCL's per-arch constants), 0 for CPUs.
    nvls: the NVLink domain reduces in-switch (NVLink SHARP).
    collnet: the network reduces in-switch (SHARP).
    intra_bw: NCCL's bandwidth of a member's intranode port, GB/s (NVLink total or PCIe).
    gpu_nic_bw: NCCL's bandwidth of a member's path to its NIC, GB/s (PCIe attach and NIC).
    nic_bw: one NIC's line rate, GB/s (0 without a network).
    cpu: host CPU vendor (``intel`` or ``amd``): NCCL's network overhead and LL caps depend on it.
    nic_hop_latency: seconds of one hop of the members' NIC link class, before any stack (0 without a
        network): what a network step costs beyond NCCL's table (:mod:`simcomm.nccl.fabric`).
    """

    ranks: tuple[int, ...]
    nodes: tuple[tuple[int, ...], ...]
    node_of: np.ndarray
    nic: np.ndarray
    nic_local: np.ndarray
    nics_per_node: int
    intra: str
    arch: int
    nvls: bool
    collnet: bool
    intra_bw: float
    gpu_nic_bw: float
    nic_bw: float
    cpu: str = "intel"
    #: every ring order NCCL's search finds in each node (member indices); ``nodes[k]`` is the first
    cycles: tuple[tuple[tuple[int, ...], ...], ...] = ()
    #: GPUs of a machine have no peer-to-peer path: NCCL stages their traffic through host memory (SHM)
    host_staged: bool = False
    nic_hop_latency: float = 0.0

    @property
    def n_ranks(self) -> int:
        return len(self.ranks)

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @cached_property
    def ppn(self) -> int:
        """Members per node (the largest node when they differ); computed once (rings() asks for every hop)."""
        return max(len(n) for n in self.nodes)

    @cached_property
    def min_ppn(self) -> int:
        """Members of the smallest node (NCCL's ``minLocalRanks``)."""
        return min(len(n) for n in self.nodes)

    @cached_property
    def uniform(self) -> bool:
        return len({len(n) for n in self.nodes}) == 1

    @cached_property
    def pxn(self) -> bool:
        """NCCL hands network traffic over NVLink to the GPU on the right rail (PXN, NCCL >= 2.12).

        ``src/graph/paths.cc`` (``ncclTopoComputePaths``) uses another GPU's NIC only when that GPU
        reaches this one through NVLink (``<= PATH_NVL``); on a PCIe-only machine a GPU sends through
        the NIC it is told to use over its own PCIe port.
        """
        return self.n_nodes > 1 and self.ppn > 1 and self.intra in ("nvswitch", "nvlink")


def topology_arch(topology) -> int:
    """SM version of the topology's GPUs: ``meta["gpu_arch"]``, else from ``meta["device"]`` (0: CPUs)."""
    device = str(topology.meta.get("device") or "")
    return int(topology.meta.get("gpu_arch") or ARCH_OF_DEVICE.get(device, 0 if device == "haswell" else 80))


def _machine_info(topology) -> dict:
    """Per-topology facts, computed once: NIC per rank, intra family, port rates."""
    cache = topology.__dict__.get("_nccl_info")
    if cache is not None:
        return cache
    g = topology.graph
    idx = topology.node_index
    # per-rank facts gathered in lists (one element set per rank and fact) and made arrays at the end
    n = topology.n_ranks
    nic: list = [-1] * n
    nic_local = [-1] * n
    by_family: dict[str, list[float]] = {}
    attach_bw, nic_bw, nic_lat = [0.0] * n, [0.0] * n, [0.0] * n
    families: set[str] = set()
    links = topology.links
    raw = topology.meta.get("link_raw", {})
    raw_lat = topology.meta.get("link_raw_latency", {})  # a hop's latency before the stack's overhead

    def hop(name: str) -> float:
        return float(raw_lat.get(name, links[name].latency))
    arch = topology_arch(topology)

    rates: dict[str, float] = {}  # per link class: 16 384 ranks have a few classes

    def rate(name: str) -> float:
        out = rates.get(name)
        if out is None:
            lc = links[name]
            out = rates[name] = _nccl_rate(lc.family, raw.get(name, lc.bandwidth), arch)
        return out

    router = topology.router
    port = getattr(router, "port", None)
    nic_names, nic_of = getattr(router, "nic_names", None), getattr(router, "nic_of", None)
    if not port or not any(port) or nic_names is None:
        port = None
    # Each edge's attributes read from its adjacency entry, and each node's from the node mapping (not through
    # ``g.edges[u, v]`` and ``g.nodes[n]``, views made per look-up: ~10^5 of them at 16 384 ranks).
    adj, node = g._adj, g._node  # (networkx's own dicts: its views rebuild an item per look-up)
    for r, name in enumerate(topology.ranks):
        for nb, data in adj[name].items():
            link = data["link"]
            lc = links[link]
            kind = node[nb].get("kind")
            if kind == "nic":
                nic[r] = idx[nb]
                attach_bw[r] = rate(link)
                # the NIC's own uplink rate: the first non-rank edge of the NIC
                for far, up in adj[nb].items():
                    if node[far].get("kind") != "rank":
                        nic_bw[r] = rate(up["link"])
                        nic_lat[r] = hop(up["link"])
                        break
            elif lc.family in _INTRA:
                fam = _INTRA[lc.family]
                families.add(fam)
                if fam not in by_family:
                    by_family[fam] = [0.0] * n
                by_family[fam][r] += rate(link)
                if port is not None and port[r] == nb:  # a PCIe machine: the NIC hangs off this switch
                    nic_node = nic_names[nic_of[r]]
                    nic[r] = idx[nic_node]
                    attach_bw[r] = min(rate(link), rate(adj[nb][nic_node]["link"]))
                    for far, up in adj[nic_node].items():
                        if far != nb and node[far].get("kind") != "rank":  # its uplink, not the switch
                            nic_bw[r] = rate(up["link"])
                            nic_lat[r] = hop(up["link"])
                            break
    # local NIC index: order of the NIC nodes of one machine
    machine_nics: dict = {}
    machine_of = [topology.machine_of(r) for r in range(n)]
    for r, x in enumerate(nic):
        if x >= 0:
            machine_nics.setdefault(machine_of[r], set()).add(x)
    order = {m: {x: i for i, x in enumerate(sorted(xs))} for m, xs in machine_nics.items()}
    for r, x in enumerate(nic):
        if x >= 0:
            nic_local[r] = order[machine_of[r]][x]
    nic, nic_local = np.array(nic, dtype=np.int64), np.array(nic_local, dtype=np.int64)
    attach_bw, nic_bw = np.array(attach_bw, dtype=float), np.array(nic_bw, dtype=float)
    nic_lat = np.array(nic_lat, dtype=float)
    intra = next((k for k in ("nvswitch", "nvlink", "pcie", "shm") if k in families), "none")
    # NCCL's rings use the fastest family a GPU has (NVLink over the PCIe path to the host).
    intra_bw = np.array(by_family[intra], dtype=float) if intra in by_family else np.zeros(n)
    gpu_nic = np.where(attach_bw > 0, np.minimum(attach_bw, nic_bw), nic_bw)
    info = {"nic": nic, "nic_local": nic_local, "intra_bw": intra_bw, "gpu_nic_bw": gpu_nic, "nic_bw": nic_bw,
            "nic_latency": nic_lat,
            "intra": intra, "arch": arch, "cpu": str(topology.meta.get("cpu") or "intel"),
            "nics_per_machine": max((len(v) for v in machine_nics.values()), default=0)}
    topology.__dict__["_nccl_info"] = info
    return info


def intra_cycles(topology, members: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """The orders NCCL's rings visit one node's ``members`` (global ranks), one per ring.

    On a switch (NVSwitch, PCIe switch, host memory) every GPU has one port and
    one ring in rank order uses all of it.  On a direct NVLink mesh a ring may
    only step along NVLinks, and NCCL's search finds as many rings as the links
    carry (src/graph/search.cc): here, Hamiltonian cycles over the members'
    direct links, each taking one link of every pair it uses (pairs with two
    links, as on DGX-1's cube mesh, can carry two cycles), tried most-links
    first; every cycle runs in both directions.  DGX-1: the 2-link cycle twice
    and the 1-link cycle once, both ways: 6 rings, NCCL's 6 channels x 20 GB/s.
    """
    if len(members) <= 2:
        return (tuple(members),)
    g = topology.graph
    names = [topology.ranks[r] for r in members]
    raw = topology.meta.get("link_raw", {})
    per_link = 50e9 if topology_arch(topology) >= 100 else 25e9
    cap = {}  # (i, j) -> links between members i and j; read only sorted, so filled in adjacency order
    pos = {name: i for i, name in enumerate(names)}
    adj = g._adj
    for i, a in enumerate(names):
        for b, data in adj[a].items():  # a rank's few neighbours, not every member pair (2 048 machines x 64)
            j = pos.get(b)
            if j is not None and j != i:
                name = data["link"]
                cap[i, j] = max(1, round(raw.get(name, topology.links[name].bandwidth) / per_link))
    if not cap:
        return (tuple(members),)
    cycles: list[tuple[int, ...]] = []
    for _ in range(8):
        found = _hamiltonian(len(names), tuple(sorted((k, v) for k, v in cap.items() if v > 0)))
        if found is None:
            break
        for a, b in zip(found, found[1:] + found[:1], strict=False):
            cap[a, b] -= 1
            cap[b, a] -= 1
        cycles += [found, (found[0],) + tuple(reversed(found[1:]))]
    if not cycles:
        return (tuple(members),)
    return tuple(tuple(members[i] for i in c) for c in cycles)


def intra_cycle(topology, members: tuple[int, ...]) -> tuple[int, ...]:
    """The first of :func:`intra_cycles`: the order a node's GPUs take in chains and in rank-aligned rails."""
    return intra_cycles(topology, members)[0]


@lru_cache(maxsize=256)
def _hamiltonian(n: int, caps: tuple) -> tuple[int, ...] | None:
    """A Hamiltonian cycle from vertex 0 over pairs with capacity left, most capacity first (n <= 16)."""
    if n > 16:
        return None
    left = dict(caps)
    adj = {i: sorted((j for (a, j), c in left.items() if a == i and c > 0), key=lambda j: (-left[i, j], j))
           for i in range(n)}
    path, used = [0], [False] * n
    used[0] = True

    def extend() -> bool:
        if len(path) == n:
            return left.get((path[-1], 0), 0) > 0
        for j in adj[path[-1]]:
            if not used[j]:
                used[j] = True
                path.append(j)
                if extend():
                    return True
                path.pop()
                used[j] = False
        return False

    return tuple(path) if extend() else None


def group_layout(topology, ranks: tuple[int, ...]) -> GroupLayout:
    """The :class:`GroupLayout` of ``ranks`` on ``topology`` (cached per topology and group)."""
    cache = topology.__dict__.setdefault("_nccl_layouts", {})
    key = tuple(int(r) for r in ranks)
    if key not in cache:
        cache[key] = _layout(topology, key)
    return cache[key]


def _domains(topology) -> list[int]:
    """NVLink domain (NCCL node) of each machine, from ``meta["nvlink_domain"]`` (machines per domain, or a split)."""
    cache = topology.__dict__.get("_nccl_domains")
    if cache is not None:
        return cache
    machines = [m for m in (topology.machine_of(r) for r in range(topology.n_ranks)) if m is not None]
    try:
        out = domain_of_machines(topology.meta, max(machines, default=-1) + 1)
    except ConfigError as exc:
        raise ConfigError(f"topology {topology.name!r}: {exc}") from None
    topology.__dict__["_nccl_domains"] = out
    return out


def _layout(topology, ranks: tuple[int, ...]) -> GroupLayout:
    info = _machine_info(topology)
    domain = _domains(topology)
    by_node: dict = {}
    machine_of, n_domains = topology.machine_of, len(domain)
    for i, r in enumerate(ranks):
        m = machine_of(r)
        key = ("r", r) if m is None else ("m", domain[m] if m < n_domains else m)
        by_node.setdefault(key, []).append(i)
    nodes, cycles = [], []
    node_list = [0] * len(ranks)  # each member's node, made an array once (not one assignment per node)
    for k, idx in enumerate(by_node.values()):
        glob = tuple(ranks[i] for i in idx)
        pos = {r: i for i, r in zip(idx, glob, strict=False)}
        found = tuple(tuple(pos[r] for r in order) for order in intra_cycles(topology, glob))
        nodes.append(found[0])
        cycles.append(found)
        for i in idx:
            node_list[i] = k
    node_of = np.array(node_list, dtype=np.int64)
    arr = np.asarray(ranks, dtype=np.int64)
    intra = info["intra"] if any(len(n) > 1 for n in nodes) or len(nodes) == 1 else "none"
    arch = info["arch"]
    meta = topology.meta
    nvls = bool(meta.get("nvls", intra == "nvswitch" and arch >= 90))
    return GroupLayout(tuple(int(r) for r in ranks), tuple(nodes), node_of, info["nic"][arr], info["nic_local"][arr],
                       int(info["nics_per_machine"]), intra, arch, nvls, bool(meta.get("sharp", False)),
                       float(info["intra_bw"][arr].min()), float(info["gpu_nic_bw"][arr].min()),
                       float(info["nic_bw"][arr].max()), info["cpu"], tuple(cycles), meta.get("p2p", True) is False,
                       float(info["nic_latency"][arr].max()))
