"""Named clusters: the seed papers' platforms and GPU systems as they are built.

Each preset is a function ``(nodes, gpus_per_node) -> Topology`` registered in
:data:`PRESETS` with the paper it comes from; ``nodes``/``gpus_per_node``
override the defaults.  Facts not stated by a paper are marked as
assumptions here and in docs/topologies.md.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.registry import Registry
from simcomm.topologies.base import Topology
from simcomm.topologies.devices import device_gamma
from simcomm.topologies.fabric import positive_int
from simcomm.topologies.intranode import HostPath
from simcomm.topologies.nvlink import NvlinkSpec, resolve_split
from simcomm.topologies.two_level import two_level

__all__ = ["PRESETS", "PRESET_STACKS", "PRESET_LINKS", "NVLINK_PRESETS", "preset", "default_stack",
           "published_size", "PublishedSize"]

PRESETS: Registry = Registry("topology preset")
#: preset name -> (transport stack its platform ran, why); clusters not listed run ``nccl``
PRESET_STACKS: dict[str, tuple[str, str]] = {}
#: preset name -> why its network link is the one it is, where the source leaves a choice (an ``assumed:`` line
#: while the user keeps the preset's internode link)
PRESET_LINKS: dict[str, str] = {}

S000 = "seed 000: Moreno-Alvarez et al., Enhancing Distributed NN Training Through Node-Based Communications"
S001 = "seed 001: Yeo et al. (gossip SGD), Table 2"
S002 = "seed 002: gs-SGD (global sketching), 4-GPU 1 GbE cluster"
S003 = "seed 003: Communication-Efficient Parallelization Strategy for Deep CNN Training (Cori)"
S004 = "seed 004: layer dropping for PS-based distributed DL, Sec. 6.1"


def _n(value, default, field):
    return default if value is None else positive_int(value, f"preset: {field}")


def _add(name: str, summary: str, reference: str, stack: tuple[str, str] | None = None, link: str | None = None):
    def deco(fn):
        PRESETS.add(name, fn, summary=summary, reference=reference)
        if stack is not None:
            PRESET_STACKS[name] = stack
        if link is not None:
            PRESET_LINKS[name] = link
        return fn
    return deco


_OMPI_TCP = ("mpi-tcp", "seed 000's launcher runs Open MPI with the TCP BTL (launch_github.sh: --mca btl "
                        "tcp,self,vader)")


def default_stack(cluster: str) -> tuple[str, str]:
    """(stack, why) a cluster runs when the user names none: its platform's own, else NCCL."""
    return PRESET_STACKS.get(cluster, ("nccl", "GPU clusters run NCCL unless told otherwise"))


@_add("deep-est-esb", "DEEP-EST ESB: 1 x V100 per node, 100 Gb/s InfiniBand (EDR), 20 nodes", S000, _OMPI_TCP)
def _deep_est(nodes, gpn):
    return two_level(_n(nodes, 20, "nodes"), _n(gpn, 1, "gpus_per_node"), intra="pcie", intra_link="pcie3",
                     nic_link="ib-edr", nic_attach="pcie3", device="v100", name="deep-est-esb")


@_add("ceta-ciemat", "Ceta-Ciemat TA nodes: 4 nodes x 4 V100 (PCIe 3, EDR assumed)", S000, _OMPI_TCP)
def _ceta(nodes, gpn):
    # The paper gives 4 nodes x 4 V100 only; PCIe intranode and EDR InfiniBand are assumptions.
    return two_level(_n(nodes, 4, "nodes"), _n(gpn, 4, "gpus_per_node"), intra="pcie", intra_link="pcie3",
                     nic_link="ib-edr", nic_attach="pcie3", device="v100", name="ceta-ciemat")


@_add("kisti-neuron", "KISTI Neuron: 2 x V100 32 GB per node, 56 Gb/s (FDR) network, 4 nodes", S001,
      ("mpi-tcp", "seed 001's training code uses torch.distributed's MPI backend (OpenMPI 3.1; TCP assumed)"))
def _neuron(nodes, gpn):
    return two_level(_n(nodes, 4, "nodes"), _n(gpn, 2, "gpus_per_node"), intra="pcie", intra_link="pcie3",
                     nic_link="ib-fdr", nic_attach="pcie3", device="v100", name="kisti-neuron")


#: g4dn.2xlarge's network as AWS publishes it and as NCCL's socket transport uses it (docs/topologies.md)
_G4DN_LINK = (
    "aws-g4dn link eth-25g, 25 Gb/s per direction: Table 2's 'up to 3125Mb/s' is AWS's 'Up to 25 Gigabit' for "
    "g4dn.2xlarge in MB/s (25 000 / 8 = 3 125); AWS's network specifications give it 10 Gb/s baseline and 25 Gb/s "
    "burst, credits full at launch and bursts of 5-60 min, longer than the timing job; NCCL's socket transport opens "
    "2 threads x 8 sockets per peer on an ENA NIC (net_socket.cc, vendor 0x1d0f), so AWS's 5 Gb/s single-flow cap "
    "(10 in a placement group) does not bind; --inter eth-10g for the baseline")


@_add("aws-g4dn", "AWS g4dn.2xlarge cluster: 1 x T4 per instance, up to 25 Gb/s (ENA, no EFA), 4 instances",
      S001 + "; AWS EC2 network specifications (g4dn.2xlarge: 10 / 25 Gb/s baseline / burst)",
      ("nccl-socket", "seed 001's AWS timing code uses the NCCL backend; g4dn instances have no EFA, so NCCL "
                      "runs over TCP sockets"), link=_G4DN_LINK)
def _g4dn(nodes, gpn):
    return two_level(_n(nodes, 4, "nodes"), _n(gpn, 1, "gpus_per_node"), intra="pcie", intra_link="pcie3",
                     nic_link="eth-25g", nic_attach="pcie3", device="t4", name="aws-g4dn")


@_add("cori-haswell", "Cori Haswell (Cray XC40): Aries dragonfly, 1 MPI rank per node (or up to 32), 256 nodes",
      S003 + "; [CORI]", ("cray-mpich", "seed 003 ran Intel Caffe over Cray MPICH on Aries"))
def _cori(nodes, gpn):
    n, per = _n(nodes, 256, "nodes"), _n(gpn, 1, "gpus_per_node (ranks per node)")
    if per > 32:
        raise ConfigError(f"preset cori-haswell: at most 32 ranks (cores) per node, got {per}")
    # Aries: 4 nodes per router, 96 routers per group (2 cabinets); contiguous placement.
    routers = min(96, -(-n // 4))
    return two_level(n, per, intra="shm", nic_link="aries", nic_attach="pcie3", inter="dragonfly",
                     inter_options={"routers_per_group": routers, "hosts_per_router": 4,
                                    "local_link": "aries", "global_link": "aries"},
                     device="haswell", name="cori-haswell")


@_add("gbe-4gpu", "4 GPU machines on 1 Gb/s Ethernet (one GPU each)", S002,
      ("mpi-tcp", "seed 002's gTop-k and sketch code exchange with MPI over 1 GbE (TCP)"))
def _gbe(nodes, gpn):
    return two_level(_n(nodes, 4, "nodes"), _n(gpn, 1, "gpus_per_node"), intra="pcie", intra_link="pcie3",
                     nic_link="eth-1g", nic_attach="pcie3", name="gbe-4gpu")


@_add("seed004-ps", "2 worker machines x 2 GTX 1080 Ti + 1 CPU parameter-server machine (its own node), 1 GbE",
      S004, ("cpu-ps", "seed 004 runs TensorFlow's parameter server over OpenMPI on 1 GbE"))
def _ps(nodes, gpn):
    # Sec. 6.1: "one parameter server machine and two worker machines ... two NVIDIA Geforce GTX 1080 Tis"
    # each; "the parameter server uses the CPU".  ``nodes`` counts worker machines; the server machine comes
    # last (training ranks first) and holds one CPU rank with a Haswell-class γ (the CPU model is not given).
    workers, per = _n(nodes, 2, "nodes (worker machines)"), _n(gpn, 2, "gpus_per_node")
    topo = two_level(workers + 1, [per] * workers + [1], intra="pcie", intra_link="pcie3",
                     nic_link="eth-1g", nic_attach="pcie3", device="gtx-1080-ti", name="seed004-ps")
    server = topo.n_ranks - 1
    topo.graph.nodes[topo.ranks[server]]["gamma"] = device_gamma("haswell", 1)
    topo.meta["server_ranks"] = (server,)
    topo.meta["server_device"] = "haswell"
    return topo


# ---- GPU systems as they are built (facts and sources: docs/topologies.md "GPU system presets") ----
_NCCL = ("nccl", "NVIDIA GPU systems run NCCL")
_SPOD_A100 = "NVIDIA DGX SuperPOD (A100) reference architecture: 20 nodes per scalable unit, one leaf per rail"
_SPOD_H100 = "NVIDIA DGX SuperPOD (H100) reference architecture: 32 nodes per scalable unit, one leaf per rail"


def _gpu(nodes, gpn, default_nodes, default_gpn, cpu=None, **kw):
    """A two-level GPU cluster with ``nodes``/``gpus_per_node`` overrides; ``cpu`` is the host vendor NCCL sees."""
    topo = two_level(_n(nodes, default_nodes, "nodes"), _n(gpn, default_gpn, "gpus_per_node"), **kw)
    if cpu is not None:
        topo.meta["cpu"] = cpu
    return topo


def _dgx(nodes, gpn, *, nvswitch, nic, attach, per_leaf, device, name, cpu, default_nodes=32, **kw):
    """DGX-style node: 8 GPUs on NVSwitch, one NIC per GPU, rail-optimised leaf-spine."""
    g = _n(gpn, 8, "gpus_per_node")
    return _gpu(nodes, g, default_nodes, 8, cpu, intra="nvswitch", intra_link=nvswitch, nic_link=nic,
                nics_per_node=g, nic_attach=attach, inter="rail", inter_options={"nodes_per_leaf": per_leaf},
                device=device, name=name, **kw)


@_add("dgx1-v100", "DGX-1 (V100): 8 x V100 in a hybrid cube mesh (NVLink2, 1-2 links per pair), 4 x EDR IB "
      "on 4 PCIe switches, host path over 2 sockets, fat-tree, 32 nodes",
      "NVIDIA DGX-1 with Tesla V100 system architecture white paper; NVIDIA/nccl#671 (NVLink counts, PLX "
      "switches); [IB-jp]; fat-tree as SATURNV", _NCCL)
def _dgx1(nodes, gpn):
    host = HostPath(pcie_switches=4, sockets=2, gpu_link="pcie3", uplink="pcie3", socket_link="qpi-bdw",
                    memory="shm")
    return _gpu(nodes, gpn, 32, 8, "intel", intra="nvlink-cube-mesh", intra_link="nvlink2", host=host,
                nic_link="ib-edr", nics_per_node=4, nic_attach="pcie3", inter="fat-tree", device="v100",
                name="dgx1-v100")


@_add("dgx-a100-hdr", "DGX A100 SuperPOD: 8 x A100 NVSwitch + 8 x HDR NICs per node, rail-optimised HDR "
      "leaf-spine (20 nodes per SU), 32 nodes", "[A100-gk], [NVL-wiki], [IB-jp]; " + _SPOD_A100, _NCCL)
def _dgx_a100(nodes, gpn):
    return _dgx(nodes, gpn, nvswitch="nvswitch-a100", nic="ib-hdr", attach="pcie4", per_leaf=20,
                device="a100-80g", name="dgx-a100-hdr", cpu="amd")


@_add("dgx-h100-ndr", "DGX H100 SuperPOD: 8 x H100 NVSwitch + 8 x NDR NICs per node, rail-optimised NDR "
      "leaf-spine (32 nodes per SU), 32 nodes", "[H100-gk], [NVL-wiki], [IB-jp]; " + _SPOD_H100, _NCCL)
def _dgx_h100(nodes, gpn):
    return _dgx(nodes, gpn, nvswitch="nvswitch-h100", nic="ib-ndr", attach="pcie5", per_leaf=32, device="h100",
                name="dgx-h100-ndr", cpu="intel")


@_add("dgx-h100-fat-tree", "DGX H100 nodes on a rail-free 3-level NDR fat-tree with ECMP hashing (for "
      "comparison with the rail-optimised dgx-h100-ndr), 32 nodes",
      "[H100-gk], [IB-jp]; Al-Fares et al. SIGCOMM 2008 fat-tree; rail-free wiring and ECMP are the comparison "
      "case, not a published SuperPOD", _NCCL)
def _dgx_h100_ft(nodes, gpn):
    g = _n(gpn, 8, "gpus_per_node")
    return _gpu(nodes, g, 32, 8, "intel", intra="nvswitch", intra_link="nvswitch-h100", nic_link="ib-ndr",
                nics_per_node=g, nic_attach="pcie5", inter="fat-tree", inter_options={"routing": "ecmp"},
                device="h100", name="dgx-h100-fat-tree")


@_add("dgx-h200-ndr", "DGX H200: 8 x H200 NVSwitch (NVLink 4, 900 GB/s) + 8 x NDR NICs, rail-optimised NDR "
      "leaf-spine (32 nodes per SU), 32 nodes",
      "[MLPerf-H200] (18x NVLink 4, 900 GB/s; 2 x Xeon 8480C), [H200]; SU as " + _SPOD_H100, _NCCL)
def _dgx_h200(nodes, gpn):
    return _dgx(nodes, gpn, nvswitch="nvswitch-h200", nic="ib-ndr", attach="pcie5", per_leaf=32, device="h200",
                name="dgx-h200-ndr", cpu="intel")


@_add("hgx-h800", "HGX H800 (DeepSeek-V3's cluster): 8 x H800 NVSwitch (NVLink 400 GB/s bidir), 8 x 400 Gb/s "
      "InfiniBand NICs (one per GPU), rail-optimised two-layer leaf-spine (32 nodes per leaf), 256 nodes",
      "[DSV3] DeepSeek-V3 technical report (arXiv 2412.19437) section 3.1: 2048 H800 GPUs, 8 per node on NVLink/"
      "NVSwitch, InfiniBand across nodes; 3.2.2: IB 50 GB/s, NVLink 160 GB/s; [DSV3-isca] Insights into DeepSeek-V3 "
      "(ISCA 2025): one 400 Gb/s NIC per GPU, each on its own plane of a two-layer fat-tree (planes as rails here); "
      "[H800]", _NCCL)
def _hgx_h800(nodes, gpn):
    return _dgx(nodes, gpn, nvswitch="nvswitch-h800", nic="ib-ndr", attach="pcie5", per_leaf=32, device="h800",
                name="hgx-h800", cpu="intel", default_nodes=256)


@_add("hgx-b200", "DGX/HGX B200: 8 x B200 NVSwitch (NVLink 5, 1.8 TB/s) + 8 x 400 Gb/s CX-7 NICs, "
      "rail-optimised NDR leaf-spine (32 nodes per SU), 32 nodes",
      "[DGXB200-ug] (8 x B200, 2 NVSwitches 14.4 TB/s, 8 x CX-7 400 Gb/s, 2 x Xeon 8570), [B200-gk]; SU size "
      "assumed as the H100 SuperPOD", _NCCL)
def _hgx_b200(nodes, gpn):
    return _dgx(nodes, gpn, nvswitch="nvswitch-b200", nic="ib-ndr", attach="pcie5", per_leaf=32, device="b200",
                name="hgx-b200", cpu="intel")


@_add("gb200-nvl72", "GB200 NVL72: nodes are compute trays of 4 B200; 18 trays (72 GPUs) share one NVLink 5 "
      "domain; 1 x 400 Gb/s CX-7 per GPU, 4-rail leaf-spine, 36 trays (2 racks)",
      "[NVL72] (72 GPUs, 18 trays, 1.8 TB/s per GPU), [GCP-net] A4X (4 CX-7, 1,600 Gb/s per tray, 4-way "
      "rail-aligned); leaf size one rack (assumption)", _NCCL)
def _gb200(nodes, gpn, nvlink=None):
    # Grace is an Arm CPU: meta["cpu"] stays unset (NCCL's model knows Intel and AMD hosts).
    return _mnnvl(nodes, gpn, nvlink, "gb200-nvl72", trays=18, default_nodes=36, intra_link="nvswitch-nvl72",
                  nic_link="ib-ndr", nic_attach="pcie5", per_leaf=18, device="gb200")


@_add("l40s-pcie", "8 x L40S on PCIe Gen4 without NVLink or peer-to-peer (staged through host memory), "
      "2 GPUs + 1 x 400 Gb/s RoCE NIC per PCIe switch (200 Gb/s per GPU), 2 sockets, 4 nodes",
      "NVIDIA Enterprise RA PCIe-optimised 2-8-5 (2 CPUs, 8 GPUs, 5 NICs: 4 east-west + 1 north-south) [ERA]; "
      "[L40S] PCIe 4.0 x16, no NVLink; NVIDIA/nccl#1639 (no-P2P boxes bound by host memory); CPU and memory "
      "are assumptions", _NCCL)
def _l40s(nodes, gpn):
    host = HostPath(pcie_switches=4, sockets=2, uplink="pcie5", socket_link="upi-spr", memory="shm-ddr5-4800x8")
    return _gpu(nodes, gpn, 4, 8, "intel", intra="pcie-host", intra_link="pcie4", host=host,
                nic_link="roce-400g", nics_per_node=4, nic_attach="pcie4", inter="rail",
                inter_options={"nodes_per_leaf": 32}, device="l40s", name="l40s-pcie")


@_add("aws-p4d", "AWS p4d.24xlarge: 8 x A100 40 GB NVSwitch, 4 x 100 Gb/s EFA (one per 2 GPUs), one "
      "non-blocking switch, 16 instances",
      "[AWS-p4d] (8 x A100 40 GB, NVSwitch 600 GB/s, 400 Gb/s EFA, Cascade Lake); AWS publishes no fabric: "
      "one non-blocking switch (assumption)", _NCCL)
def _p4d(nodes, gpn):
    return _gpu(nodes, gpn, 16, 8, "intel", intra="nvswitch", intra_link="nvswitch-a100", nic_link="efa-100g",
                nics_per_node=4, nic_attach="pcie4", inter="switch", device="a100", name="aws-p4d")


@_add("aws-p5", "AWS p5.48xlarge: 8 x H100 NVSwitch, 32 x 100 Gb/s EFA modelled as one 400 Gb/s NIC per "
      "GPU, one non-blocking switch, 16 instances",
      "[AWS-efa] (32 EFA devices), [AWS-p5] (3,200 Gb/s EFA, 8 x H100); 4 adapters per GPU as one logical "
      "NIC; one non-blocking switch (assumption)", _NCCL)
def _p5(nodes, gpn):
    g = _n(gpn, 8, "gpus_per_node")
    return _gpu(nodes, g, 16, 8, "amd", intra="nvswitch", intra_link="nvswitch-h100", nic_link="efa-400g",
                nics_per_node=g, nic_attach="pcie5", inter="switch", device="h100", name="aws-p5")


@_add("gcp-a3-mega", "Google Cloud A3 Mega (a3-megagpu-8g): 8 x H100 NVSwitch, 8 x 200 Gb/s GPUDirect-TCPXO "
      "NICs (one per GPU), one non-blocking switch, 16 VMs",
      "[GCP-net] (A3 Mega: 1,800 Gb/s, GPUDirect-TCPXO, 8 GPU NICs); one non-blocking switch (assumption)",
      _NCCL)
def _a3mega(nodes, gpn):
    g = _n(gpn, 8, "gpus_per_node")
    return _gpu(nodes, g, 16, 8, "intel", intra="nvswitch", intra_link="nvswitch-h100", nic_link="tcpxo-200g",
                nics_per_node=g, nic_attach="pcie5", inter="switch", device="h100", name="gcp-a3-mega")


# ---- cloud GPU instances (facts and sources: docs/topologies.md "Cloud presets"); the providers publish no
# fabric, so each is one non-blocking switch (assumption), as aws-p4d, aws-p5 and gcp-a3-mega above ----
def _cloud(nodes, gpn, *, nic, nics, device, cpu, name, attach="pcie5"):
    g = _n(gpn, 8, "gpus_per_node")
    return _gpu(nodes, g, 16, 8, cpu, intra="nvswitch", intra_link=f"nvswitch-{device}", nic_link=nic,
                nics_per_node=nics if nics else g, nic_attach=attach, inter="switch", device=device, name=name)


@_add("aws-p5e", "AWS p5e.48xlarge: 8 x H200 NVSwitch, 32 x 100 Gb/s EFA modelled as one 400 Gb/s NIC per GPU "
      "(aws-ofi-nccl stripes a GPU's 4 adapters), one non-blocking switch, 16 instances",
      "[AWS-p5e] aws.amazon.com/ec2/instance-types/p5 (p5e.48xlarge: 8 x H200 141 GB, 3,200 Gb/s EFA); [AWS-efa] "
      "32 EFA devices on P5-class instances; one switch (assumption)", _NCCL)
def _p5e(nodes, gpn):
    return _cloud(nodes, gpn, nic="efa-400g", nics=0, device="h200", cpu="amd", name="aws-p5e")


@_add("gcp-a3-high", "Google Cloud A3 High (a3-highgpu-8g): 8 x H100 NVSwitch, 4 x 200 Gb/s GPUDirect-TCPX NICs "
      "(one per 2 GPUs), one non-blocking switch, 16 VMs",
      "[GCP-net] cloud.google.com/compute/docs/gpus/gpu-network-bandwidth (A3 High: 1,000 Gb/s, 4 GPU NICs, "
      "GPUDirect-TCPX); one switch (assumption)", _NCCL)
def _a3high(nodes, gpn):
    return _cloud(nodes, gpn, nic="tcpx-200g", nics=4, device="h100", cpu="intel", name="gcp-a3-high")


@_add("gcp-a4", "Google Cloud A4 (a4-highgpu-8g): 8 x B200 NVSwitch, 8 x 400 Gb/s CX-7 RoCE NICs (GPUDirect RDMA, "
      "one per GPU), one non-blocking switch, 16 VMs",
      "[GCP-net] (A4: 3,600 Gb/s, 8 x 400 Gb/s RDMA over RoCE GPU NICs plus 2 host NICs); one switch (assumption)",
      _NCCL)
def _a4(nodes, gpn):
    return _cloud(nodes, gpn, nic="roce-400g", nics=0, device="b200", cpu="intel", name="gcp-a4")


@_add("azure-nd-h100-v5", "Azure ND H100 v5: 8 x H100 NVSwitch, 8 x 400 Gb/s NDR InfiniBand (CX-7, one per GPU), "
      "one non-blocking switch, 16 VMs",
      "[AZ-ND] learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nd-h100-v5-series (8 x H100, "
      "400 Gb/s Quantum-2 CX-7 InfiniBand per GPU, 3.2 Tb/s per VM, 4th Gen Xeon); one switch (assumption)", _NCCL)
def _nd_h100(nodes, gpn):
    return _cloud(nodes, gpn, nic="ib-ndr", nics=0, device="h100", cpu="intel", name="azure-nd-h100-v5")


@_add("oci-h100", "OCI BM.GPU.H100.8: 8 x H100 NVSwitch, 16 x 200 Gb/s RoCE v2 (RDMA cluster network) modelled as "
      "one 400 Gb/s NIC per GPU, one non-blocking switch, 16 hosts",
      "[OCI-shapes] docs.oracle.com/iaas/Content/Compute/References/computeshapes.htm (BM.GPU.H100.8: 8 x H100, "
      "16 x 200 Gb/s RDMA, 2 x Xeon 8480+); 2 adapters per GPU as one logical NIC; one switch (assumption)", _NCCL)
def _oci_h100(nodes, gpn):
    return _cloud(nodes, gpn, nic="roce-400g", nics=0, device="h100", cpu="intel", name="oci-h100")


# ---- multi-node NVLink (facts and sources: docs/topologies.md "Multi-node NVLink presets") ----
#: preset name -> the most GPUs its NVLink switches join in one domain; these presets take nvl_domain/nvl_split
NVLINK_PRESETS: dict[str, int] = {"gb200-nvl72": 72}


def _mnnvl(nodes, gpn, nvlink, name, *, trays, default_nodes, intra_link, nic_link, nic_attach, per_leaf,
           device, cpu=None, default_gpn=4, max_gpus=None):
    """Trays of ``default_gpn`` GPUs whose NVLink domains (``trays`` each, or as ``nvlink`` says) span machines."""
    g = _n(gpn, default_gpn, "gpus_per_node")
    n = _n(nodes, default_nodes, "nodes")
    domain, note = resolve_split(nvlink or NvlinkSpec(), n, g, trays, max_gpus or trays * default_gpn, name)
    topo = _gpu(n, g, default_nodes, default_gpn, cpu, intra="nvswitch", intra_link=intra_link, nvlink_domain=domain,
                nic_link=nic_link, nics_per_node=g, nic_attach=nic_attach, inter="rail",
                inter_options={"nodes_per_leaf": per_leaf}, device=device, name=name)
    if note:
        topo.meta["nvlink_note"] = note
    return topo


def _nvlink_preset(name: str, max_gpus: int, summary: str, reference: str):
    NVLINK_PRESETS[name] = max_gpus
    return _add(name, summary, reference, _NCCL)


@_nvlink_preset("gb300-nvl72", 72, "GB300 NVL72: compute trays of 4 B300; 18 trays (72 GPUs) share one NVLink 5 "
                "domain; 1 x 800 Gb/s ConnectX-8 per GPU, 4-rail leaf-spine, 36 trays (2 racks)",
                "[GB300] (72 Blackwell Ultra GPUs, NVLink 5 1.8 TB/s per GPU, ConnectX-8 800 Gb/s per GPU); rails "
                "and leaf size as gb200-nvl72 (assumption)")
def _gb300(nodes, gpn, nvlink=None):
    return _mnnvl(nodes, gpn, nvlink, "gb300-nvl72", trays=18, default_nodes=36, intra_link="nvswitch-nvl72",
                  nic_link="ib-xdr", nic_attach="pcie6", per_leaf=18, device="gb300")


@_nvlink_preset("gb200-nvl36", 72, "GB200 NVL36 racks: compute trays of 4 B200; 9 trays (36 GPUs) per NVLink 5 "
                "domain (NVL36x2 pairs two racks: --nvl-domain 72); 1 x 400 Gb/s CX-7 per GPU, 36 trays",
                "[NVL36] (36 GPUs and 9 compute trays per rack, two racks cabled as one 72-GPU NVLink domain in "
                "NVL36x2); NICs and rails as gb200-nvl72 (assumption)")
def _gb200_nvl36(nodes, gpn, nvlink=None):
    return _mnnvl(nodes, gpn, nvlink, "gb200-nvl36", trays=9, default_nodes=36, intra_link="nvswitch-nvl72",
                  nic_link="ib-ndr", nic_attach="pcie5", per_leaf=9, device="gb200", max_gpus=72)


@_nvlink_preset("h100-nvl256", 256, "DGX H100 SuperPOD with the NVLink Switch System: 32 nodes x 8 H100 (256 GPUs) "
                "in one NVLink 4 domain, 8 x NDR NICs per node, rail-optimised NDR leaf-spine, 32 nodes",
                "[NVL256] (up to 256 H100 in one NVLink network, 900 GB/s per GPU, 57.6 TB/s all-to-all); "
                "modelled as one non-blocking star: the second-level NVLink switches' 2:1 taper is not modelled "
                "(assumption); SU as " + _SPOD_H100)
def _h100_nvl256(nodes, gpn, nvlink=None):
    return _mnnvl(nodes, gpn, nvlink, "h100-nvl256", trays=32, default_nodes=32, intra_link="nvswitch-h100",
                  nic_link="ib-ndr", nic_attach="pcie5", per_leaf=32, device="h100", cpu="intel", default_gpn=8)


def preset(name: str, *, nodes: int | None = None, gpus_per_node: int | None = None,
           nvlink: NvlinkSpec | None = None) -> Topology:
    """Build preset ``name`` (unknown names list the choices).

    ``nvlink`` (the ``nvl_domain``/``nvl_split`` keys) applies to the multi-node NVLink presets
    (:data:`NVLINK_PRESETS`); elsewhere an NVLink domain is one machine, and only that may be named.
    """
    build = PRESETS.get(name)
    if name in NVLINK_PRESETS:
        return build(nodes, gpus_per_node, nvlink)
    topo = build(nodes, gpus_per_node)
    if nvlink is not None and nvlink.any():
        gpn = topo.meta.get("gpus_per_node")
        if nvlink.split or nvlink.domain != gpn:
            raise ConfigError(f"nvl_domain/nvl_split: preset {name!r} has no NVLink between machines (one NVLink "
                              f"domain per {gpn}-GPU machine); multi-node NVLink presets: "
                              f"{', '.join(sorted(NVLINK_PRESETS))}")
    return topo


@dataclass(frozen=True)
class PublishedSize:
    """The size a preset describes: its machines (training machines only) and GPUs per machine."""

    nodes: int
    gpus_per_node: int

    def beyond(self, name: str, nodes: int, gpus_per_node: int | None) -> str | None:
        """One ``assumed:`` line when a run is larger than this (None when it is not)."""
        parts = []
        if nodes > self.nodes:
            parts.append(f"{nodes} nodes where it describes {self.nodes}")
        if gpus_per_node is not None and gpus_per_node > self.gpus_per_node:
            parts.append(f"{gpus_per_node} GPUs (ranks) per node where it describes {self.gpus_per_node}")
        if not parts:
            return None
        return (f"cluster {name} beyond its published size: {' and '.join(parts)}; simcomm grows it by the "
                "preset's own rules (the same machines and links, more of them)")


@functools.cache
def published_size(name: str) -> PublishedSize:
    """The preset's published size: its default build (a parameter-server machine is not counted)."""
    topo = preset(name)
    counts = topo.meta["gpus_per_node"]
    servers = {topo.machine_of(r) for r in topo.meta.get("server_ranks", ())}
    per = max(counts) if isinstance(counts, (list, tuple)) else counts
    return PublishedSize(topo.meta["nodes"] - len(servers), per)
