"""PCIe x16 presets: peak per direction after 128b/130b encoding; ``-nccl`` = NCCL's model."""

from __future__ import annotations

from simcomm.links.base import define

GB = 1e9
_LAT = 1.0e-6  # NCCL hwLat PCI, LL protocol, per hop [NCCL-tuning]
_REF = "[PCIe-wiki] lane rates; latency: NCCL hwLat PCI LL 1.0 us [NCCL-tuning]"

define("pcie3", bandwidth=15.75 * GB, latency=_LAT, family="pcie",
       summary="PCIe 3.0 x16: 8 GT/s x 16 lanes, 15.75 GB/s per direction", reference=_REF)
define("pcie4", bandwidth=31.5 * GB, latency=_LAT, family="pcie",
       summary="PCIe 4.0 x16: 16 GT/s x 16 lanes, 31.5 GB/s per direction", reference=_REF)
define("pcie5", bandwidth=63.0 * GB, latency=_LAT, family="pcie",
       summary="PCIe 5.0 x16: 32 GT/s x 16 lanes, 63 GB/s per direction", reference=_REF)
# PCIe 6.0 runs 64 GT/s PAM4 in FLIT mode: 242 of every 256 bytes carry data (PCI-SIG PCIe 6.0 FAQ),
# so x16 gives 64e9 * 16 / 8 * 242 / 256 = 121 GB/s per direction (ConnectX-8 SuperNICs, GB300 trays)
define("pcie6", bandwidth=121.0 * GB, latency=_LAT, family="pcie",
       summary="PCIe 6.0 x16: 64 GT/s x 16 lanes, FLIT mode, 121 GB/s per direction",
       reference="PCI-SIG PCIe 6.0 specification FAQ (64 GT/s, PAM4, 242/256 FLIT); latency [NCCL-tuning]")

_NREF = "NCCL PCIe bw = width x speed/80 (topo.h) [NCCL-topo]; latency [NCCL-tuning]"
define("pcie3-nccl", bandwidth=12.0 * GB, latency=_LAT, family="pcie",
       summary="PCIe 3.0 x16 at NCCL's model rate, 12 GB/s", reference=_NREF)
define("pcie4-nccl", bandwidth=24.0 * GB, latency=_LAT, family="pcie",
       summary="PCIe 4.0 x16 at NCCL's model rate, 24 GB/s", reference=_NREF)
define("pcie5-nccl", bandwidth=48.0 * GB, latency=_LAT, family="pcie",
       summary="PCIe 5.0 x16 at NCCL's model rate, 48 GB/s", reference=_NREF)
