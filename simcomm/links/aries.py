"""Cray Aries (XC40, e.g. Cori): measured MPI bandwidth, nearest-neighbour latency per hop.

NERSC quotes "~8GB/sec MPI bandwidth" and "0.25 us to 3.7 us MPI latency"
[CORI].  The 0.25 us lower bound is taken as the per-hop latency, so a
minimal dragonfly route (injection, up to three router hops, ejection)
accumulates 0.5-1.25 us; the rest of the quoted range is software overhead.
"""

from __future__ import annotations

from simcomm.links.base import define

define("aries", bandwidth=8e9, latency=0.25e-6, family="aries",
       summary="Cray Aries: ~8 GB/s MPI bandwidth per direction, 0.25 us per hop", reference="[CORI]")
