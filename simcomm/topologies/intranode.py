"""What joins the GPUs of one machine (or one NVLink domain) in the two-level builder.

Kinds (``two_level(intra=...)``):

* ``nvswitch``: one switch per machine, or per NVLink domain of several
  machines (GB200 NVL72); each GPU joined by ``intra_link`` (its whole NVLink
  port, e.g. ``nvswitch-h100``);
* ``nvlink-mesh``: every pair joined directly by ``links_per_pair`` links;
* ``nvlink-cube-mesh``: DGX-1's hybrid cube mesh of 8 V100s (:data:`DGX1_NVLINKS`:
  1 or 2 NVLink bricks per joined pair, 6 per GPU); pairs without NVLink use
  the host path;
* ``pcie``: one PCIe switch per machine with peer-to-peer (a one-level tree);
* ``pcie-host``: PCIe without peer-to-peer: every GPU-to-GPU transfer is
  staged through host memory (the host path);
* ``shm``: processes sharing one memory (a per-machine star).

The **host path** (:class:`HostPath`) is the machine's PCIe tree and CPU
memory: GPU l sits on PCIe switch ``l*S//G`` (its link ``gpu_link``),
switch s under CPU socket ``s*sockets//S`` (``uplink``), each socket has a
memory node (``memory``: half the socket's memory bandwidth per direction,
links/host.py) and sockets are joined pairwise by ``socket_link``.  A
transfer a -> b goes a -> switch -> CPU -> memory -> CPU [-> other CPU] ->
switch -> b: the sender's GPU writes a buffer in its own socket's memory and
the receiver's GPU reads it, across the socket link if it sits on the other
socket (NCCL's SHM transport; NVIDIA/nccl#1639: such boxes are bounded by
host memory and CPU bandwidth).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.topologies.fabric import add_link, positive_int

__all__ = ["INTRA", "DEFAULT_INTRA_LINK", "HOST_INTRA", "DGX1_NVLINKS", "HostPath", "HubIntra", "MeshIntra",
           "HostIntra", "add_host_intra", "nic_by_switch"]

INTRA = ("nvswitch", "nvlink-mesh", "nvlink-cube-mesh", "pcie", "pcie-host", "shm")
DEFAULT_INTRA_LINK = {"nvswitch": "nvswitch-a100", "nvlink-mesh": "nvlink3", "nvlink-cube-mesh": "nvlink2",
                      "pcie": "pcie4", "pcie-host": "pcie4", "shm": "shm"}
#: intranode kinds that build the host path
HOST_INTRA = ("nvlink-cube-mesh", "pcie-host")

#: DGX-1 (V100) hybrid cube mesh: GPU pair -> NVLink bricks.  GPUs 0-3 and 4-7 are two faces of a cube
#: with both diagonals, joined by the four vertical edges (NVIDIA DGX-1 V100 white paper); the counts
#: of GPU 0 and 1 are NCCL's topology dump of a DGX1-V100 (NVIDIA/nccl#671), the rest follow from six
#: bricks per GPU with the second face mirroring the first (docs/topologies.md).
DGX1_NVLINKS = {(0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1, (1, 5): 2, (2, 3): 2,
                (2, 6): 1, (3, 7): 1, (4, 5): 1, (4, 6): 1, (4, 7): 2, (5, 6): 2, (5, 7): 1, (6, 7): 2}


@dataclass(frozen=True)
class HostPath:
    """A machine's PCIe switches, CPU sockets and memory (see the module docstring).

    ``pcie_switches``/``sockets`` default to 2 GPUs per switch and (up to) 2
    sockets; ``gpu_link`` defaults to ``intra_link`` for ``pcie-host`` and to
    ``uplink`` otherwise; ``uplink`` (a switch's upstream port) defaults to the
    GPUs' own link for ``pcie-host``, since a switch's ports are of one PCIe
    generation, and to ``pcie4`` otherwise.
    """

    pcie_switches: int | None = None
    sockets: int | None = None
    gpu_link: str | LinkClass | None = None
    uplink: str | LinkClass | None = None
    socket_link: str | LinkClass = "upi-spr"
    memory: str | LinkClass = "shm"

    def up(self, kind: str, intra_link: str | LinkClass) -> str | LinkClass:
        """The switches' upstream link: as given, else the GPUs' own (``pcie-host``) or ``pcie4``."""
        if self.uplink is not None:
            return self.uplink
        return (self.gpu_link or intra_link) if kind == "pcie-host" else "pcie4"

    def layout(self, gpus: int) -> tuple[int, int]:
        """(switches, sockets) for a machine of ``gpus`` GPUs, validated."""
        s = max(1, gpus // 2) if self.pcie_switches is None else positive_int(self.pcie_switches,
                                                                               "host: pcie_switches")
        if s > gpus:
            raise ConfigError(f"host: pcie_switches must be at most the GPUs per node ({gpus}), got {s}")
        k = min(2, s) if self.sockets is None else positive_int(self.sockets, "host: sockets")
        if k > s:
            raise ConfigError(f"host: sockets must be at most pcie_switches ({s}), got {k}")
        return s, k


class HubIntra:
    """GPU -> hub (NVSwitch, PCIe switch, memory) -> GPU."""

    def __init__(self, names: list, hub: str):
        self.names, self.hub = names, hub

    def path(self, la: int, lb: int) -> list:
        return [self.names[la], self.hub, self.names[lb]]


class MeshIntra:
    """A direct link between every pair."""

    def __init__(self, names: list):
        self.names = names

    def path(self, la: int, lb: int) -> list:
        return [self.names[la], self.names[lb]]


class HostIntra:
    """Direct NVLink where the pair has one (cube mesh), else the host path."""

    def __init__(self, names: list, switch_of: list[int], socket_of: list[int], switches: list, cpus: list,
                 mems: list, direct: set):
        self.names, self.switch_of, self.socket_of = names, switch_of, socket_of
        self.switches, self.cpus, self.mems, self.direct = switches, cpus, mems, direct

    @property
    def aux(self) -> list:
        """The machine's non-GPU nodes, in a fixed order (route templates index them)."""
        return self.switches + self.cpus + self.mems

    def path(self, la: int, lb: int) -> list:
        if (min(la, lb), max(la, lb)) in self.direct:
            return [self.names[la], self.names[lb]]
        sa, sb = self.switch_of[la], self.switch_of[lb]
        ka, kb = self.socket_of[sa], self.socket_of[sb]
        out = [self.names[la], self.switches[sa], self.cpus[ka], self.mems[ka], self.cpus[ka]]
        if kb != ka:
            out.append(self.cpus[kb])
        return out + [self.switches[sb], self.names[lb]]


def add_host_intra(g: nx.Graph, links: dict, m: int, names: list, kind: str, in_lc: LinkClass,
                   host: HostPath) -> HostIntra:
    """Add machine ``m``'s PCIe switches, sockets, memory and (cube mesh) NVLinks; return its router."""
    n = len(names)
    s, k = host.layout(n)
    uplink = host.up(kind, in_lc)
    gpu_lc = add_link(links, host.gpu_link or (in_lc if kind == "pcie-host" else uplink))
    up_lc, mem_lc = add_link(links, uplink), add_link(links, host.memory)
    switches = [f"m{m}.pcie{i}" for i in range(s)]
    cpus, mems = [f"m{m}.cpu{i}" for i in range(k)], [f"m{m}.mem{i}" for i in range(k)]
    g.add_nodes_from(switches + cpus + mems, kind="switch", machine=m)
    switch_of = [l * s // n for l in range(n)]
    socket_of = [i * k // s for i in range(s)]
    g.add_edges_from(((names[l], switches[switch_of[l]]) for l in range(n)), link=gpu_lc.name)
    g.add_edges_from(((switches[i], cpus[socket_of[i]]) for i in range(s)), link=up_lc.name)
    g.add_edges_from(zip(cpus, mems, strict=False), link=mem_lc.name)
    if k > 1:
        sock_lc = add_link(links, host.socket_link)
        g.add_edges_from(((cpus[a], cpus[b]) for a in range(k) for b in range(a + 1, k)), link=sock_lc.name)
    direct: set = set()
    if kind == "nvlink-cube-mesh":
        if n > 8:
            raise ConfigError(f"two-level: nvlink-cube-mesh joins at most 8 GPUs per node (DGX-1), got {n}")
        for (a, b), bricks in DGX1_NVLINKS.items():
            if b < n:
                lc = in_lc if bricks == 1 else in_lc.scaled(bricks, suffix=f"x{bricks}")
                g.add_edge(names[a], names[b], link=add_link(links, lc).name)
                direct.add((a, b))
    return HostIntra(names, switch_of, socket_of, switches, cpus, mems, direct)


def nic_by_switch(gpus: int, nics: int, switches: int) -> list[int]:
    """Local NIC of each GPU: one on the GPU's own PCIe switch when there is one (GPUDirect RDMA then
    never leaves the switch), spread evenly over that switch's GPUs; else the even split ``l*nics//gpus``."""
    out = []
    for l in range(gpus):
        s = l * switches // gpus
        mine = [j for j in range(nics) if j * switches // nics == s]
        peers = [x for x in range(gpus) if x * switches // gpus == s]
        out.append(mine[peers.index(l) * len(mine) // len(peers)] if mine else l * nics // gpus)
    return out
