"""The host side of a GPU server: CPU memory and the link between CPU sockets.

A GPU-to-GPU transfer without peer-to-peer (NCCL's SHM transport) is staged
through host memory: the sender's GPU writes a buffer in CPU memory and the
receiver's GPU reads it, so every byte is written once and read once.  The
two-level builder models a socket's memory as a link between the CPU and a
memory node whose bandwidth per direction is half of the socket's peak memory
bandwidth (writes one way, reads the other), as for ``shm``.

* ``shm`` (links/shm.py: half of one quad-channel DDR4-2133 socket, 34.15
  GB/s) is also the memory of a DGX-1 socket (2 x Xeon E5-2698 v4, DDR4-2133).
* ``shm-ddr5-4800x8``: one socket with 8 channels of DDR5-4800, the memory
  system of the Sapphire Rapids Xeons a PCIe L40S server is assumed to have:
  8 x 4800 MT/s x 8 B = 307.2 GB/s, half per direction **[derived]**.
* ``qpi-bdw`` / ``upi-spr``: the link between the two CPU sockets, at the rate
  NCCL's own topology model gives it (topo.h BDW_QPI_BW 6 GB/s, SRP_QPI_BW
  22 GB/s): no peak figure was retrieved, so, as for Aries, the effective
  rate is the preset (docs/links.md).  Latency: one shared-memory hop.
"""

from __future__ import annotations

from simcomm.links.base import define

_SHM_LAT = 0.46e-6  # the per-hop latency of links/shm.py [UCX-11020]

define("shm-ddr5-4800x8", bandwidth=8 * 4800e6 * 8 / 2, latency=_SHM_LAT, family="shm",
       summary="host memory of one 8-channel DDR5-4800 socket: 153.6 GB/s per direction (half of 307.2)",
       reference="[derived] 8 channels x 4800 MT/s x 8 B; latency [UCX-11020]")
define("qpi-bdw", bandwidth=6e9, latency=_SHM_LAT, family="shm",
       summary="Intel QPI between two Broadwell sockets at NCCL's model rate: 6 GB/s",
       reference="NCCL BDW_QPI_BW [NCCL-topo]; latency [UCX-11020]")
define("upi-spr", bandwidth=22e9, latency=_SHM_LAT, family="shm",
       summary="Intel UPI between two Sapphire Rapids sockets at NCCL's model rate: 22 GB/s",
       reference="NCCL SRP_QPI_BW [NCCL-topo]; latency [UCX-11020]")
