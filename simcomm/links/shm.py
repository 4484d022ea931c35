"""Shared memory between processes of one node (MPI intranode transport).

Latency: 0.46 us per hop, so that the two hops of the two-level builder's
shared-memory star (rank -> memory -> rank) cost the OSU/UCX-posix small
message latency of 0.92 us [UCX-11020].  Bandwidth [derived]: a copy reads and
writes every byte, so half of one Haswell socket's 68.3 GB/s DDR4-2133 memory
bandwidth [HSW-bw], 34.15 GB/s per direction.  It is an upper bound: concurrent
copies share the memory system, which the star does not model.
"""

from __future__ import annotations

from simcomm.links.base import define

define("shm", bandwidth=68.3e9 / 2, latency=0.46e-6, family="shm",
       summary="intranode shared memory: 34.15 GB/s (half a socket's DRAM bandwidth), 0.46 us per hop",
       reference="latency [UCX-11020], [KOKKOS]; bandwidth [derived] from [HSW-bw]")
