"""Ethernet presets over TCP: line rate per direction, TCP-socket latency.

The bandwidth is the line rate (rate/8 bytes per second).  The latency is
19 us per hop: NCCL over TCP sockets takes 38-46 us for an 8-byte broadcast
between two nodes [M7], i.e. about 38 us over the two hops of a one-switch
path.  ``eth-40g-usnic`` is Cisco's OS-bypass 40 GbE with its measured rate
and MPI half-round-trip latency [CISCO].
"""

from __future__ import annotations

from simcomm.links.base import define

_LAT = 19e-6
_REF = "line rate [NV-drv]; latency: NCCL-over-sockets 8 B bcast 38-46 us / 2 hops [M7]"

for _gbit in (1, 10, 25, 40, 50, 56, 100, 200, 400):
    define(f"eth-{_gbit}g", bandwidth=_gbit * 1e9 / 8, latency=_LAT, family="ethernet",
           summary=f"{_gbit} GbE over TCP: {_gbit / 8:g} GB/s per direction", reference=_REF)

define("eth-3125m", bandwidth=3125e6 / 8, latency=_LAT, family="ethernet",
       summary="AWS 'up to 25 Gigabit' instance baseline, 3125 Mb/s per direction",
       reference="seed 001 (g4dn.2xlarge, 3125 Mb/s); latency [M7]")
define("eth-40g-usnic", bandwidth=37.23e9 / 8, latency=1.93e-6 / 2, family="ethernet",
       summary="40 GbE usNIC (OS bypass): 37.23 Gb/s measured, 1.93 us MPI half round trip",
       reference="[CISCO]")
