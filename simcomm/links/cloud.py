"""Cloud GPU networks: AWS Elastic Fabric Adapter and Google Cloud GPUDirect-TCPXO.

Neither provider publishes its fabric, so these are NIC classes: line rate
per direction and a per-hop latency for the one-switch path the presets use.

* EFA (SRD transport over AWS's Ethernet fabric, OS bypass) runs at 100 Gb/s
  per adapter.  p4d.24xlarge has 4 adapters (400 Gb/s) for 8 GPUs; p5.48xlarge
  has 32 (3200 Gb/s), 4 per GPU, which simcomm models as ONE 400 Gb/s logical
  NIC per GPU (``efa-400g``): NCCL's aws-ofi-nccl plugin stripes a GPU's
  traffic over its adapters.  Latency: a 1-byte MPI ping-pong between two
  instances over EFA takes 9.87 us (aws-parallelcluster #6449, hpc6a, Intel
  MPI); half of it per hop of a host -> switch -> host path.
* GPUDirect-TCPXO (A3 Mega) is TCP with the payload placed in GPU memory by
  the NIC: 8 x 200 Gb/s GPU NICs (1,800 Gb/s per VM with the host NIC).  Its
  latency is taken as the TCP-socket one of ``eth-*`` (an assumption: no
  published small-message figure was found).
"""

from __future__ import annotations

from simcomm.links.base import define

_EFA_LAT = 9.87e-6 / 2
_EFA_REF = "[AWS-p4d], [AWS-efa]; latency: MPI 1 B over EFA 9.87 us / 2 hops (aws-parallelcluster #6449)"

define("efa-100g", bandwidth=100e9 / 8, latency=_EFA_LAT, family="ethernet",
       summary="AWS EFA adapter (SRD, OS bypass): 100 Gb/s (12.5 GB/s) per direction", reference=_EFA_REF)
define("efa-400g", bandwidth=400e9 / 8, latency=_EFA_LAT, family="ethernet",
       summary="AWS EFA, 4 x 100 Gb/s adapters of one GPU as one logical NIC (p5): 400 Gb/s (50 GB/s)",
       reference=_EFA_REF + "; 32 adapters / 8 GPUs on p5.48xlarge [AWS-efa]")
define("tcpxo-200g", bandwidth=200e9 / 8, latency=19e-6, family="ethernet",
       summary="Google Cloud GPUDirect-TCPXO GPU NIC (A3 Mega): 200 Gb/s (25 GB/s) per direction",
       reference="[GCP-net] A3 Mega 1,800 Gb/s, GPUDirect-TCPXO; latency of TCP sockets [M7] (assumption)",
       socket_latency=True)
define("tcpx-200g", bandwidth=200e9 / 8, latency=19e-6, family="ethernet",
       summary="Google Cloud GPUDirect-TCPX GPU NIC (A3 High): 200 Gb/s (25 GB/s) per direction",
       reference="[GCP-net] A3 High 1,000 Gb/s, 4 GPU NICs, GPUDirect-TCPX; latency of TCP sockets [M7] (assumption)",
       socket_latency=True)
