"""RoCE v2 presets: Ethernet line rate with InfiniBand-verbs latency.

NCCL prices RoCE with the same NET model as InfiniBand [NCCL-tuning], so the
per-hop latency is the InfiniBand one (0.7 us, half of a 2-hop MPI p2p).
"""

from __future__ import annotations

from simcomm.links.base import define

_LAT = 0.7e-6
_REF = "line rate [NV-drv]; NET model shared with IB [NCCL-tuning]; latency [OMPI-ML]"

for _gbit in (25, 50, 100, 200, 400):
    define(f"roce-{_gbit}g", bandwidth=_gbit * 1e9 / 8, latency=_LAT, family="roce",
           summary=f"RoCE v2 at {_gbit} Gb/s ({_gbit / 8:g} GB/s) per direction", reference=_REF)
