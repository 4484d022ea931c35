"""Transport-stack presets with their sources (keys refer to docs/reference facts §3/§5).

* ``ideal``: line rate, no software cost (the bare α-β model).
* ``nccl``: 96 % of network line rate (12 GB/s measured per 100 Gb/s NIC,
  [M4]), 80 % of NVLink (NCCL's 20 GB/s model of a 25 GB/s NVLink 2 link,
  [NCCL-topo]), 3 µs per message (netOverhead 1 µs ×3 for the Simple
  protocol, [NCCL-tuning]).
* ``mpi-tcp``: 40 % of line rate (100 Gb/s TCP all-reduce busbw 4-6 GB/s
  [M5]; ≤ 60 % of wire at 32 Gb/s [M6]); 40 µs per message (8-byte
  broadcast over sockets 38-46 µs [M7]); intranode via shared memory, 1 µs
  [UCX-11020], half the bandwidth (copies through host memory: assumed).
  Seed 000 ran MPI over TCP on InfiniBand.
* ``gloo``: TCP like ``mpi-tcp`` but 50 % of line rate (assumed: gloo
  pipelines large buffers, between the two measurements above); intranode
  staged through host memory at 30 % (assumed).
* ``cpu-ps``: a CPU parameter server over MPI/TCP as in seed 004: 94 % of
  line rate, capped at 0.42 GB/s per link (seed 004 Table 1: 1 Gb/s moved
  4 × 102 MB per direction in 3.457 s = 0.118 GB/s ≈ 94 % of 0.125 GB/s; at
  56 Gb/s 8 × 102 MB in 1.951 s ≈ 0.42 GB/s [derived]), 40 µs per message.
"""

from __future__ import annotations

from simcomm.stacks.base import Stack, define

define(Stack("ideal", 1.0, 0.0, 1.0, 0.0, None, "line rate, no per-message software cost",
             "Hockney alpha-beta model"))
define(Stack("nccl", 0.96, 3e-6, 0.8, 3e-6, None, "NCCL: ~96 % of network, 80 % of NVLink, 3 us per message",
             "reference [M4], [NCCL-topo], [NCCL-tuning]"))
define(Stack("mpi-tcp", 0.4, 40e-6, 0.5, 1e-6, None, "MPI over TCP sockets: ~40 % of line rate, 40 us per message",
             "reference [M5], [M6], [M7], [UCX-11020]; seed 000 used TCP over InfiniBand"))
define(Stack("gloo", 0.5, 40e-6, 0.3, 5e-6, None, "gloo over TCP: ~50 % of line rate, 40 us per message",
             "reference [M5], [M6], [M7]; intranode efficiency assumed"))
define(Stack("cpu-ps", 0.94, 40e-6, 0.5, 1e-6, 0.42e9,
             "CPU parameter server over MPI/TCP: 94 % of line rate capped at 0.42 GB/s per link",
             "seed 004 Table 1 [derived]"))
