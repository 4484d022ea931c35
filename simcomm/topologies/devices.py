"""Per-device reduction cost γ (seconds per byte reduced) for rank nodes.

An element-wise reduction ``c = a + b`` is memory bound: it reads two operands
and writes one, so about three bytes cross the memory bus per byte reduced,
and ``γ = 3 / memory bandwidth``.  Memory bandwidths are the peak figures of
/work/shared/reference/cost-models-and-hardware.md §4 and, for the newer GPUs,
of the sources in docs/topologies.md.  A CPU device's memory
is shared by the ranks (processes) of its node, so each rank gets
``bandwidth / ranks_per_node``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.errors import UnknownNameError

__all__ = ["Device", "DEVICES", "device_gamma", "BYTES_PER_REDUCED_BYTE"]

BYTES_PER_REDUCED_BYTE = 3.0


@dataclass(frozen=True)
class Device:
    name: str
    memory_bandwidth: float  # bytes/s
    shared_by_node: bool     # CPU: one memory system for every rank on the node
    reference: str


DEVICES: dict[str, Device] = {d.name: d for d in (
    Device("v100", 900e9, False, "[V100-bw]"),
    Device("a100", 1555e9, False, "[A100-gk] (40 GB)"),
    Device("a100-80g", 2039e9, False, "[A100-gk] (80 GB)"),
    Device("h100", 3.35e12, False, "[H100-gk]"),
    Device("h800", 3.35e12, False, "[H800] H100 SXM's 80 GB HBM3 at 3.35 TB/s"),
    Device("h200", 4.8e12, False, "[H200] 141 GB HBM3e, 4.8 TB/s"),
    Device("b200", 8.0e12, False, "[B200-gk] 192 GB HBM3e, 8 TB/s"),
    Device("gb200", 8.0e12, False, "[B200-gk] the B200 GPU of a GB200 superchip, 8 TB/s"),
    Device("gb300", 8.0e12, False, "[GB300] the Blackwell Ultra GPU of a GB300 superchip: 288 GB HBM3e, 8 TB/s"),
    Device("l40s", 864e9, False, "[L40S] 48 GB GDDR6, 864 GB/s"),
    Device("t4", 320e9, False, "[T4-sys]"),
    Device("gtx-1080-ti", 484e9, False, "[1080Ti]"),
    Device("haswell", 136.6e9, True, "[HSW-bw] x2 sockets [derived]"),
)}


def device_gamma(name: str, ranks_per_node: int = 1) -> float:
    """γ of one rank of device ``name`` (see the module docstring)."""
    if name not in DEVICES:
        raise UnknownNameError("device", name, DEVICES)
    d = DEVICES[name]
    bw = d.memory_bandwidth / (ranks_per_node if d.shared_by_node else 1)
    return BYTES_PER_REDUCED_BYTE / bw
