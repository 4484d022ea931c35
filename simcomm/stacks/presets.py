"""Transport-stack presets with their sources (keys refer to docs/reference facts §3/§5).

* ``ideal``: line rate, no software cost (the bare α-β model).
* ``nccl``: 96 % of network line rate (12 GB/s measured per 100 Gb/s NIC,
  [M4]), NVLink at NCCL's own per-link rate of the GPU generation (20 of 25
  GB/s on V100/A100, 20.6 on H100, 40.1 of 50 on B200, [NCCL-topo]; ~370
  GB/s on an 8-GPU H100 node [M3]), 80 % of PCIe, 3 µs per message
  (netOverhead 1 µs ×3 for the Simple protocol, [NCCL-tuning]).
* ``mpi-tcp``: 40 % of line rate (100 Gb/s TCP all-reduce busbw 4-6 GB/s
  [M5]; ≤ 60 % of wire at 32 Gb/s [M6]); 40 µs per message (8-byte
  broadcast over sockets 38-46 µs [M7]); intranode via shared memory, 1 µs
  [UCX-11020], half the bandwidth (copies through host memory: assumed).
  Seed 000 ran MPI over TCP on InfiniBand.
* TCP's 40 µs is counted once: [M7] is one end-to-end measurement (NCCL 2.9.6
  over sockets, 2 nodes of one V100 PCIe, Ring/Simple forced: 8 B broadcast
  38.17 µs in place, 45.82 out of place), and the ``eth-*`` link classes
  already take it as their latency (19 µs × 2 hops).  The TCP stacks
  (``mpi-tcp``, ``gloo``, ``cpu-ps``, ``nccl-socket``: ``socket_overhead``)
  therefore add their 40 µs only on network links whose latency does not hold
  it (InfiniBand, RoCE, EFA ...), not on ``eth-*`` (stacks/base.py).
* ``gloo``: TCP like ``mpi-tcp`` but 50 % of line rate (assumed: gloo
  pipelines large buffers, between the two measurements above); intranode
  staged through host memory at 30 % (assumed).
* ``nccl-socket``: NCCL's algorithms over its TCP socket transport (AWS
  g4dn, 1 GPU per instance, no EFA): 45 % of line rate (between [M5]'s
  32-48 % and [M6]'s 60 %), 40 us per network message ([M7]).
* ``cray-mpich``: Cray MPICH over Aries (seed 003): line rate and 1 us per
  message [CORI]; seed 003's validation calibrates the efficiency.
* collective rules (how ``auto`` picks an algorithm): ``nccl`` runs NCCL's own
  algorithms and tuning-model choice (docs/nccl.md); ``mpi-tcp`` and ``cpu-ps``
  follow Open MPI's coll/tuned fixed rules (seeds 000, 001 and 004 ran Open
  MPI); ``gloo`` runs gloo's ring all-reduce/all-gather and its broadcast
  (calibrate/predict.py); ``ideal`` keeps MPICH's textbook choice.
* MPI over TCP (``mpi-tcp``, ``cpu-ps``): Open MPI's ob1 over btl_tcp between machines: eager up to
  64 KiB, rendezvous above (request, ACK, data: three latencies; simcomm/runtimes/transport.py).
* ``cpu-ps``: a CPU parameter server over MPI/TCP as in seed 004: 94 % of
  line rate, capped at 0.42 GB/s per link (seed 004 Table 1: 1 Gb/s moved
  4 × 102 MB per direction in 3.457 s = 0.118 GB/s ≈ 94 % of 0.125 GB/s; at
  56 Gb/s 8 × 102 MB in 1.951 s ≈ 0.42 GB/s [derived]), 40 µs per message
  (MPI over TCP: [M7], as ``mpi-tcp``).
"""

from __future__ import annotations

from simcomm.stacks.base import Stack, define

define(Stack("ideal", 1.0, 0.0, 1.0, 0.0, None, "line rate, no per-message software cost",
             "Hockney alpha-beta model", collectives="mpich"))
define(Stack("nccl", 0.96, 3e-6, 0.8, 3e-6, None, "NCCL: ~96 % of network, NVLink at NCCL's per-link rate, 80 % "
             "of PCIe, 3 us per message", "reference [M4], [NCCL-topo], [NCCL-tuning]", collectives="nccl",
             nccl_nvlink=True, over_plain_ethernet="nccl-socket"))
define(Stack("mpi-tcp", 0.4, 40e-6, 0.5, 1e-6, None, "Open MPI over TCP sockets: ~40 % of line rate, 40 us per "
             "message (in eth-* links' own latency), coll/tuned algorithm choice",
             "reference [M5], [M6], [M7], [UCX-11020]; seed 000 used TCP over InfiniBand", collectives="openmpi",
             tcp_protocol="ob1-tcp", socket_overhead=True))
define(Stack("gloo", 0.5, 40e-6, 0.3, 5e-6, None,
             "gloo over TCP: ~50 % of line rate, 40 us per message (in eth-* links' own latency)",
             "reference [M5], [M6], [M7]; intranode efficiency assumed", collectives="gloo", socket_overhead=True))
define(Stack("cpu-ps", 0.94, 40e-6, 0.5, 1e-6, 0.42e9,
             "CPU parameter server over MPI/TCP: 94 % of line rate capped at 0.42 GB/s per link",
             "seed 004 Table 1 [derived]; 40 us per message [M7]", collectives="openmpi", tcp_protocol="ob1-tcp",
             socket_overhead=True))
define(Stack("nccl-socket", 0.45, 40e-6, 0.8, 3e-6, None,
             "NCCL over TCP sockets (no RDMA): ~45 % of line rate, 40 us per network message (in eth-* "
             "links' own latency)",
             "reference [M5] (100 Gb/s TCP: 4-6 GB/s busbw), [M6] (<= 60 % of 32 Gb/s), [M7] (8 B broadcast "
             "38-46 us)", collectives="nccl", nccl_nvlink=True, socket_overhead=True))
define(Stack("cray-mpich", 1.0, 1e-6, 1.0, 0.3e-6, None,
             "Cray MPICH on Aries: line rate, 1 us per message, MPICH's algorithm choice",
             "[CORI] (MPI latency 0.25-3.7 us, ~8 GB/s); intranode [KOKKOS]", collectives="mpich"))
