"""Ethernet presets over TCP: line rate per direction, TCP-socket latency.

NCCL has no transport of its own for plain Ethernet: without RDMA (RoCE, which
has its own ``roce-*`` classes) or a vendor plugin (AWS EFA, Google's
GPUDirect-TCPX/TCPXO: ``efa-*``, ``tcpx*``), its IB verbs transport finds no
device and NCCL runs over its socket transport (``src/transport/net_socket.cc``,
``NCCL_NET=Socket``).  :func:`socket_transport_reason` says so for a network of
``eth-*`` links, and the pipeline then runs the ``nccl`` stack as
``nccl-socket`` (docs/stacks.md).

The bandwidth is the line rate (rate/8 bytes per second).  The latency is
19 us per hop: NCCL over TCP sockets takes 38-46 us for an 8-byte broadcast
between two nodes [M7], i.e. about 38 us over the two hops of a one-switch
path.  That figure is measured end to end through the socket stack, so it
holds TCP's per-message software cost: these classes are marked
``socket_latency``, and a TCP stack (``mpi-tcp``, ``gloo``, ``cpu-ps``,
``nccl-socket``), whose 40 us per message comes from the same measurement,
does not charge it again on them (:meth:`simcomm.stacks.Stack.derive`).
``eth-40g-usnic`` is Cisco's OS-bypass 40 GbE with its measured rate and MPI
half-round-trip latency [CISCO].
"""

from __future__ import annotations

from simcomm.links.base import LinkClass, define

__all__ = ["tcp_only", "socket_transport_reason"]

_LAT = 19e-6
_REF = "line rate [NV-drv]; latency: NCCL-over-sockets 8 B bcast 38-46 us / 2 hops [M7]"

for _gbit in (1, 10, 25, 40, 50, 56, 100, 200, 400):
    define(f"eth-{_gbit}g", bandwidth=_gbit * 1e9 / 8, latency=_LAT, family="ethernet",
           summary=f"{_gbit} GbE over TCP: {_gbit / 8:g} GB/s per direction", reference=_REF,
           socket_latency=True)

# Seed 001 Table 2's "up to 3125Mb/s" for g4dn.2xlarge read as megabits.  It is AWS's "Up to 25 Gigabit" in
# MB/s, so the aws-g4dn preset runs eth-25g; this class keeps the literal reading for comparison.
define("eth-3125m", bandwidth=3125e6 / 8, latency=_LAT, family="ethernet",
       summary="3125 Mb/s per direction: seed 001 Table 2 read as megabits (aws-g4dn runs eth-25g)",
       reference="seed 001 Table 2 (g4dn.2xlarge 'up to 3125Mb/s', read literally); latency [M7]",
       socket_latency=True)
define("eth-40g-usnic", bandwidth=37.23e9 / 8, latency=1.93e-6 / 2, family="ethernet",
       summary="40 GbE usNIC (OS bypass): 37.23 Gb/s measured, 1.93 us MPI half round trip",
       reference="[CISCO]")


def tcp_only(lc: LinkClass) -> bool:
    """A link NCCL can only reach through TCP sockets: an ``eth-*`` class (not RoCE, EFA or TCPX/TCPXO)."""
    return lc.family == "ethernet" and lc.name.startswith("eth-") and not lc.measured


def socket_transport_reason(links) -> str | None:
    """Why NCCL runs over TCP sockets on a network of these link classes, or None when it has RDMA.

    ``links``: the cluster's link classes; only those between machines count, and all of them must be
    TCP-only (a cluster with RoCE or InfiniBand NICs gets NCCL's IB transport).
    """
    net = [lc for lc in links if lc.family not in ("nvlink", "nvswitch", "pcie", "shm")]
    tcp = sorted({lc.name for lc in net if tcp_only(lc)})
    if not tcp or len(tcp) != len({lc.name for lc in net}):
        return None
    from simcomm.links.base import LINKS

    shown = [n for n in tcp if n in LINKS] or tcp  # the NIC classes, not the fabric's derived uplinks
    roce = f"roce-{shown[0].split('-', 1)[1]}"
    named = f"--inter {roce}" if roce in LINKS else "a roce-* class with --inter: simcomm list links"
    return (f"NCCL over TCP sockets: {', '.join(shown)} is Ethernet without RDMA, so NCCL's socket transport "
            f"carries it (src/transport/net_socket.cc); name RoCE ({named}) for NCCL's RDMA transport")
