"""InfiniBand 4x presets: data rate per direction after 64b/66b encoding.

Latency per hop is half of the measured MPI point-to-point latency over
ConnectX (~1.4 us, MVAPICH), because the shortest host-to-host path crosses
two links (host -> switch -> host); a path through more switches costs more.
"""

from __future__ import annotations

from simcomm.links.base import define

GB = 1e9
_LAT = 0.7e-6  # 1.4 us MPI p2p / 2 hops [OMPI-ML]
_REF = "[IB-jp] lane-rate table, [IB-ac]; latency: MPI p2p ~1.4 us over 2 hops [OMPI-ML]"

define("ib-fdr", bandwidth=54.55e9 / 8, latency=_LAT, family="infiniband",
       summary="InfiniBand FDR 4x: 54.55 Gb/s (6.82 GB/s) per direction", reference=_REF)
define("ib-edr", bandwidth=12.5 * GB, latency=_LAT, family="infiniband",
       summary="InfiniBand EDR 4x: 100 Gb/s (12.5 GB/s) per direction", reference=_REF)
define("ib-hdr", bandwidth=25.0 * GB, latency=_LAT, family="infiniband",
       summary="InfiniBand HDR 4x: 200 Gb/s (25 GB/s) per direction", reference=_REF)
define("ib-ndr", bandwidth=50.0 * GB, latency=_LAT, family="infiniband",
       summary="InfiniBand NDR 4x (e.g. ConnectX-7): 400 Gb/s (50 GB/s) per direction", reference=_REF)
define("ib-xdr", bandwidth=100.0 * GB, latency=_LAT, family="infiniband",
       summary="InfiniBand XDR (ConnectX-8 SuperNIC, Quantum-X800): 800 Gb/s (100 GB/s) per direction",
       reference="[GB300] ConnectX-8 800 Gb/s per GPU; latency as NDR [OMPI-ML] (assumption)")

_NREF = "NCCL per-NIC rule of thumb 12 GB/s per 100G, 24 GB/s per 200G [M4]; latency [OMPI-ML]"
define("ib-edr-nccl", bandwidth=12.0 * GB, latency=_LAT, family="infiniband",
       summary="InfiniBand EDR at NCCL's measured per-NIC rate, 12 GB/s", reference=_NREF)
define("ib-hdr-nccl", bandwidth=24.0 * GB, latency=_LAT, family="infiniband",
       summary="InfiniBand HDR at NCCL's measured per-NIC rate, 24 GB/s", reference=_NREF)
define("ib-ndr-nccl", bandwidth=48.0 * GB, latency=_LAT, family="infiniband",
       summary="InfiniBand NDR (ConnectX-7) at NCCL's measured per-NIC rate, 48 GB/s",
       reference="NCCL busbw 46-49 GB/s per 400 Gb/s NDR NIC (nccl-tests #267, #290); 96 % of line rate as "
                 "for EDR/HDR [M4]; latency [OMPI-ML]")
