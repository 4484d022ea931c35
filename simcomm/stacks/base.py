"""Transport stacks: what software does to a link's bandwidth and per-message cost.

A :class:`Stack` (NCCL, MPI over TCP, gloo, a CPU parameter server) is
applied by deriving an *effective topology*: every link class gets

* bandwidth ``min(efficiency × line rate, cap)``, separately for network
  families (InfiniBand, RoCE, Ethernet, Aries, custom) and intranode ones
  (NVLink, NVSwitch, PCIe, shared memory);
* a per-message software overhead, added to the latency of the links at
  the two ends of a message's path, half on each end, so a message pays it
  once whatever the number of switch hops in between.  The ends are the
  edges touching a rank (intranode families) or touching a rank or NIC
  (network families: a rank -> PCIe -> NIC -> fabric route has its network
  ends at the NICs).  An internode message through PCIe-attached NICs thus
  pays the network overhead plus the (small) intranode one.

A TCP stack's network overhead (``socket_overhead``: ``mpi-tcp``, ``gloo``,
``cpu-ps``, ``nccl-socket``) is TCP sockets' small-message latency, 40 us from
NCCL-over-sockets' 8-byte broadcast between two nodes [M7].  The ``eth-*``
link classes take their 19 us per hop from that same end-to-end measurement
(``LinkClass.socket_latency``), so on them the stack adds no network overhead:
the measurement is counted once, in the links (an 8-byte message between two
hosts on one switch: 2 x 19 us, not 2 x 19 + 40).  On any other network (TCP
over InfiniBand, seed 000; RoCE) the links hold the hardware's latency and the
stack adds its 40 us.  A ``--stack-overhead`` the user gives is charged as given.

The engine needs no change: it simply sees slower, laggier links.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simcomm.errors import ConfigError
from simcomm.links.base import INTRANODE_FAMILIES, LinkClass
from simcomm.registry import Registry

__all__ = ["Stack", "STACKS", "INTRANODE_FAMILIES", "COLLECTIVE_RULES", "NCCL_ALGOS", "NCCL_PROTOS", "apply_stack",
           "get_stack", "nccl_name", "socket_overhead_note"]

#: how ``auto`` collectives choose an algorithm (see :attr:`Stack.collectives`)
COLLECTIVE_RULES = ("nccl", "openmpi", "openmpi-3.1", "mpich", "gloo")
#: NCCL_ALGO / NCCL_PROTO values simcomm understands (lower case; docs/nccl.md)
NCCL_ALGOS = ("ring", "tree", "nvls", "nvls-tree", "collnet-direct", "collnet-chain", "pat")
NCCL_PROTOS = ("ll", "ll128", "simple")


@dataclass(frozen=True)
class Stack:
    """Software transport: efficiency, optional bandwidth cap and overhead per message.

    ``efficiency``/``cap``/``overhead`` apply to network link families,
    ``intra_*`` to intranode ones.  ``cap`` is bytes/s (None: no cap).
    """

    name: str
    efficiency: float
    overhead: float
    intra_efficiency: float = 1.0
    intra_overhead: float = 0.0
    cap: float | None = None
    summary: str = ""
    reference: str = ""
    #: Host CPU seconds per byte a rank sends or receives; it stretches whatever compute
    #: the transfer overlaps (0 for GPU stacks, whose compute does not share the host CPU).
    cpu_per_byte: float = 0.0
    #: How ``auto`` collectives pick their algorithm on this stack: ``nccl`` (NCCL's tuning
    #: model, docs/nccl.md), ``openmpi`` (Open MPI 4.1 coll/tuned fixed rules), ``openmpi-3.1``,
    #: ``mpich`` or ``gloo`` (docs/cost-models.md).
    collectives: str = "mpich"
    #: NVLink and NVSwitch links run at NCCL's own per-link rate of the GPU generation
    #: (20 GB/s of 25 on V100/A100, 20.6 on H100, 40.1 of 50 on B200: src/graph/topo.h; "with the
    #: protocol overhead (~20%) NCCL can get an effective NVLink bandwidth of 370GB/s" on H100,
    #: nccl-tests issue 212) instead of ``intra_efficiency``.
    nccl_nvlink: bool = False
    #: The stack this one runs as on a network of plain Ethernet (no RDMA device): NCCL's IB plugin finds no
    #: device and NCCL falls back to its own socket transport (``ncclNetSocket``, src/transport/net_socket.cc).
    over_plain_ethernet: str | None = None
    #: Seconds per byte one rank's CPU reduces in a collective that runs in host memory (gloo, MPI on the
    #: host: ``opts.reduce`` in gloo/allreduce.cc, simcomm.runtimes.host); it replaces every rank's device
    #: γ.  None: the device's γ (a measured host rate comes from ``simcomm calibrate``'s record).
    reduce_per_byte: float | None = None
    #: The MPI point-to-point protocol between machines (a key of
    #: :data:`simcomm.runtimes.transport.MPI_TCP_PROTOCOLS`: ``ob1-tcp`` is Open MPI's ob1 over btl_tcp, eager up
    #: to 64 KiB, rendezvous above); None: one latency per message.
    tcp_protocol: str | None = None
    #: ``overhead`` is TCP sockets' per-message latency ([M7]); a network link whose latency already holds
    #: it (``LinkClass.socket_latency``: the ``eth-*`` classes, taken from the same measurement) is not
    #: charged it again (module docstring)
    socket_overhead: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.cpu_per_byte) and self.cpu_per_byte >= 0):
            raise ConfigError(f"stack {self.name!r}: cpu-per-byte {self.cpu_per_byte!r} must be >= 0 seconds")
        if self.reduce_per_byte is not None and not (math.isfinite(self.reduce_per_byte)
                                                     and self.reduce_per_byte >= 0):
            raise ConfigError(f"stack {self.name!r}: reduce-per-byte {self.reduce_per_byte!r} must be >= 0 seconds")
        for field in ("efficiency", "intra_efficiency"):
            v = getattr(self, field)
            if not (math.isfinite(v) and 0 < v <= 1):
                raise ConfigError(f"stack {self.name!r}: {field.replace('_', '-')} {v!r} must be in (0, 1]")
        for field in ("overhead", "intra_overhead"):
            v = getattr(self, field)
            if not (math.isfinite(v) and v >= 0):
                raise ConfigError(f"stack {self.name!r}: {field.replace('_', '-')} {v!r} must be >= 0 seconds")
        if self.cap is not None and not (math.isfinite(self.cap) and self.cap > 0):
            raise ConfigError(f"stack {self.name!r}: cap {self.cap!r} must be a positive bandwidth")
        if self.collectives not in COLLECTIVE_RULES:
            raise ConfigError(f"stack {self.name!r}: collectives {self.collectives!r} is not valid; valid "
                              f"choices: {', '.join(COLLECTIVE_RULES)}")

    def with_overrides(self, efficiency: float | None = None, overhead: float | None = None,
                       cpu_per_byte: float | None = None, collectives: str | None = None,
                       reduce_per_byte: float | None = None) -> Stack:
        """The ``--stack-efficiency`` / ``--stack-overhead`` overrides (network links), ``cpu_per_byte``,
        the collective rules and the host's reduction cost."""
        out = self
        if reduce_per_byte is not None:
            out = replace(out, reduce_per_byte=float(reduce_per_byte))
        if collectives is not None:
            out = replace(out, collectives=collectives)
        if cpu_per_byte is not None:
            out = replace(out, cpu_per_byte=float(cpu_per_byte))
        if efficiency is not None:
            out = replace(out, efficiency=float(efficiency))
        if overhead is not None:  # the user's overhead is charged as given, on every network link
            out = replace(out, overhead=float(overhead), socket_overhead=False)
        return out

    def charges_overhead(self, lc: LinkClass) -> bool:
        """Whether a message's end on ``lc`` pays this stack's overhead (False: the link's latency holds it)."""
        if lc.family in INTRANODE_FAMILIES:
            return bool(self.intra_overhead)
        return bool(self.overhead) and not (self.socket_overhead and lc.socket_latency)

    def derive(self, lc: LinkClass, rank_ends: int, arch: int = 0) -> LinkClass:
        """Effective link class for ``lc`` on an edge touching ``rank_ends`` (0-2) rank nodes.

        ``arch`` (the GPUs' SM version) sets NVLink's rate on ``nccl_nvlink`` stacks.
        """
        if lc.measured:  # calibrated end to end: this stack's share and overhead are already in the numbers
            return lc
        intra = lc.family in INTRANODE_FAMILIES
        eff = self.intra_efficiency if intra else self.efficiency
        if self.nccl_nvlink and lc.family in ("nvlink", "nvswitch") and arch:
            from simcomm.nccl.layout import nvlink_bw

            eff = nvlink_bw(arch) / (50.0 if arch >= 100 else 25.0)
        over = (self.intra_overhead if intra else self.overhead) if self.charges_overhead(lc) else 0.0
        bw = lc.bandwidth * eff
        if self.cap is not None and not intra:
            bw = min(bw, self.cap)
        lat = lc.latency + over * rank_ends / 2.0
        return LinkClass(f"{lc.name}@{self.name}/{rank_ends}", bw, lat, lc.family,
                         f"{lc.summary} via {self.name}", lc.reference, socket_latency=lc.socket_latency)


def socket_overhead_note(topology, stack: Stack) -> list[str]:
    """An ``assumed:`` line when ``stack``'s TCP overhead is left off links whose latency already holds it."""
    if not (stack.socket_overhead and stack.overhead):
        return []
    held = sorted({lc.name for lc in topology.links.values()
                   if lc.family not in INTRANODE_FAMILIES and lc.socket_latency and not lc.measured})
    if not held:
        return []
    hop = min(lc.latency for lc in topology.links.values() if lc.name in held)
    return [f"{stack.name}'s {stack.overhead * 1e6:g} us per network message is TCP sockets' latency [M7], "
            f"already in {', '.join(held)}'s {hop * 1e6:g} us per hop (the same measurement): not charged "
            f"again on them (docs/links.md; --stack-overhead charges one)"]


def nccl_name(value: str | None, field: str, choices: tuple[str, ...]) -> str | None:
    """``Ring``/``NVLSTree``/``LL128`` (NCCL's spelling) or simcomm's, normalised; None passes.

    Like NCCL_ALGO/NCCL_PROTO, a value may list several (``ll,simple``) or exclude
    with a leading ``^`` (``^ll128``); the result is the sorted list of what stays
    enabled, comma-separated, or the single name.
    """
    if value is None:
        return None
    text = str(value).strip().lower().replace("_", "-")
    negate = text.startswith("^")
    names = []
    for item in filter(None, (x.strip() for x in text.lstrip("^").split(","))):
        item = {"nvlstree": "nvls-tree", "collnetdirect": "collnet-direct",
                "collnetchain": "collnet-chain"}.get(item, item)
        if item not in choices:
            raise ConfigError(f"{field}: {value!r} is not valid; valid choices: {', '.join(choices)} "
                              f"(one, a comma-separated list, or ^ to exclude)")
        names.append(item)
    if not names:
        raise ConfigError(f"{field}: {value!r} names nothing; valid choices: {', '.join(choices)}")
    kept = [c for c in choices if (c not in names) == negate]
    if not kept:
        raise ConfigError(f"{field}: {value!r} leaves nothing enabled")
    return ",".join(kept)


STACKS: Registry[Stack] = Registry("stack", "simcomm.stacks")


def define(stack: Stack) -> Stack:
    STACKS.add(stack.name, stack, summary=stack.summary, reference=stack.reference)
    return stack


def get_stack(name: str | Stack) -> Stack:
    if isinstance(name, Stack):
        return name
    import simcomm.stacks  # noqa: F401  (registers the presets)

    return STACKS.get(name)


def apply_stack(topology, stack: Stack):
    """A new Topology whose link classes are ``stack``'s effective ones (the input is untouched)."""
    from simcomm.topologies.base import Topology
    from simcomm.topologies.fabric import copy_relinked

    if stack.efficiency == 1 and stack.intra_efficiency == 1 and not stack.overhead \
            and not stack.intra_overhead and stack.cap is None and stack.reduce_per_byte is None:
        return topology
    links: dict[str, LinkClass] = {}
    raw: dict[str, float] = dict(topology.meta.get("link_raw", {}))
    raw_lat: dict[str, float] = dict(topology.meta.get("link_raw_latency", {}))
    arch = 0
    if stack.nccl_nvlink:
        from simcomm.nccl.layout import topology_arch

        arch = topology_arch(topology)
    derived: dict[tuple[str, int], str] = {}  # (link class, rank ends) -> its effective class's name

    def derived_name(link: str, kind_u, kind_v) -> str:
        """The effective class of a ``link`` edge between nodes of these kinds (derived once per pair of class
        and rank ends)."""
        lc = topology.links[link]
        end_kinds = ("rank",) if lc.family in INTRANODE_FAMILIES else ("rank", "nic")
        ends = (kind_u in end_kinds) + (kind_v in end_kinds)
        name = derived.get((lc.name, ends))
        if name is None:  # derive() depends on the class and the ends alone: once per pair, not per edge
            eff = stack.derive(lc, ends, arch)
            links.setdefault(eff.name, eff)
            raw.setdefault(eff.name, raw.get(lc.name, lc.bandwidth))
            raw_lat.setdefault(eff.name, raw_lat.get(lc.name, lc.latency))
            name = derived[(lc.name, ends)] = eff.name
        return name

    # The graph copied with each edge's class renamed as it is copied (each edge once, in ``src.edges``' order: the
    # adjacency, and so every link id, comes out as ``Graph.copy``'s), its edges and their classes gathered on the
    # way for the effective topology's arrays (65 632 edges at 16 384 GPUs).
    g, edges, names = copy_relinked(topology.graph, derived_name)
    if stack.reduce_per_byte is not None:  # the collectives reduce on the host's CPU, not on the device
        for r in topology.ranks:
            g.nodes[r]["gamma"] = stack.reduce_per_byte
    # Keep the router: it depends on graph structure only, which is unchanged.  ``link_raw`` keeps
    # each link's line rate: NCCL's own tuning model prices the hardware, not the stack's share; ``link_raw_latency``
    # each hop's latency before the stack's overhead (the fabric's own, simcomm.nccl.fabric).
    return Topology.relinked(topology, g, links, (edges, names),
                             {**topology.meta, "stack": stack.name, "link_raw": raw, "link_raw_latency": raw_lat})
