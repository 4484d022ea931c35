"""Named clusters: the seed papers' platforms and modern DGX pods.

Each preset is a function ``(nodes, gpus_per_node) -> Topology`` registered in
:data:`PRESETS` with the paper it comes from; ``nodes``/``gpus_per_node``
override the defaults.  Facts not stated by a paper are marked as
assumptions here and in docs/topologies.md.
"""

from __future__ import annotations

from simcomm.errors import ConfigError
from simcomm.registry import Registry
from simcomm.topologies.base import Topology
from simcomm.topologies.devices import device_gamma
from simcomm.topologies.fabric import positive_int
from simcomm.topologies.two_level import two_level

__all__ = ["PRESETS", "preset"]

PRESETS: Registry = Registry("topology preset")

S000 = "seed 000: Moreno-Alvarez et al., Enhancing Distributed NN Training Through Node-Based Communications"
S001 = "seed 001: Yeo et al. (gossip SGD), Table 2"
S002 = "seed 002: gs-SGD (global sketching), 4-GPU 1 GbE cluster"
S003 = "seed 003: Communication-Efficient Parallelization Strategy for Deep CNN Training (Cori)"
S004 = "seed 004: layer dropping for PS-based distributed DL, Sec. 6.1"


def _n(value, default, field):
    return default if value is None else positive_int(value, f"preset: {field}")


def _add(name: str, summary: str, reference: str):
    def deco(fn):
        PRESETS.add(name, fn, summary=summary, reference=reference)
        return fn
    return deco


@_add("deep-est-esb", "DEEP-EST ESB: 1 x V100 per node, 100 Gb/s InfiniBand (EDR), 20 nodes", S000)
def _deep_est(nodes, gpn):
    return two_level(_n(nodes, 20, "nodes"), _n(gpn, 1, "gpus_per_node"), intra="pcie", intra_link="pcie3",
                     nic_link="ib-edr", nic_attach="pcie3", device="v100", name="deep-est-esb")


@_add("ceta-ciemat", "Ceta-Ciemat TA nodes: 4 nodes x 4 V100 (PCIe 3, EDR assumed)", S000)
def _ceta(nodes, gpn):
    # The paper gives 4 nodes x 4 V100 only; PCIe intranode and EDR InfiniBand are assumptions.
    return two_level(_n(nodes, 4, "nodes"), _n(gpn, 4, "gpus_per_node"), intra="pcie", intra_link="pcie3",
                     nic_link="ib-edr", nic_attach="pcie3", device="v100", name="ceta-ciemat")


@_add("kisti-neuron", "KISTI Neuron: 2 x V100 32 GB per node, 56 Gb/s (FDR) network, 4 nodes", S001)
def _neuron(nodes, gpn):
    return two_level(_n(nodes, 4, "nodes"), _n(gpn, 2, "gpus_per_node"), intra="pcie", intra_link="pcie3",
                     nic_link="ib-fdr", nic_attach="pcie3", device="v100", name="kisti-neuron")


@_add("aws-g4dn", "AWS g4dn.2xlarge cluster: 1 x T4 per instance, up to 3125 Mb/s, 4 instances", S001)
def _g4dn(nodes, gpn):
    return two_level(_n(nodes, 4, "nodes"), _n(gpn, 1, "gpus_per_node"), intra="pcie", intra_link="pcie3",
                     nic_link="eth-3125m", nic_attach="pcie3", device="t4", name="aws-g4dn")


@_add("cori-haswell", "Cori Haswell (Cray XC40): Aries dragonfly, 1 MPI rank per node (or up to 32), 256 nodes",
      S003 + "; [CORI]")
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


@_add("gbe-4gpu", "4 GPU machines on 1 Gb/s Ethernet (one GPU each)", S002)
def _gbe(nodes, gpn):
    return two_level(_n(nodes, 4, "nodes"), _n(gpn, 1, "gpus_per_node"), intra="pcie", intra_link="pcie3",
                     nic_link="eth-1g", nic_attach="pcie3", name="gbe-4gpu")


@_add("seed004-ps", "1 parameter server (rank 0, CPU) + 2 nodes x 2 GTX 1080 Ti, 1 GbE", S004)
def _ps(nodes, gpn):
    workers, per = _n(nodes, 2, "nodes (worker machines)"), _n(gpn, 2, "gpus_per_node")
    topo = two_level(workers + 1, [1] + [per] * workers, intra="pcie", intra_link="pcie3",
                     nic_link="eth-1g", nic_attach="pcie3", device="gtx-1080-ti", name="seed004-ps")
    # The PS updates parameters on its CPU: give rank 0 the Haswell-class γ (an assumption).
    topo.graph.nodes[topo.ranks[0]]["gamma"] = device_gamma("haswell", 1)
    topo.meta["parameter_server_rank"] = 0
    return topo


@_add("dgx-a100-hdr", "DGX A100 pod: 8 x A100 NVSwitch + 8 x HDR NICs per node, HDR fat-tree, 32 nodes",
      "[A100-gk], [NVL-wiki], [IB-jp]; DGX SuperPOD-style rail-free fat-tree (assumption)")
def _dgx_a100(nodes, gpn):
    g = _n(gpn, 8, "gpus_per_node")
    return two_level(_n(nodes, 32, "nodes"), g, intra="nvswitch", intra_link="nvswitch-a100", nic_link="ib-hdr",
                     nics_per_node=g, nic_attach="pcie4", inter="fat-tree", device="a100-80g",
                     name="dgx-a100-hdr")


@_add("dgx-h100-ndr", "DGX H100 pod: 8 x H100 NVSwitch + 8 x NDR NICs per node, NDR fat-tree, 32 nodes",
      "[H100-gk], [NVL-wiki], [IB-jp]; rail-free fat-tree (assumption)")
def _dgx_h100(nodes, gpn):
    g = _n(gpn, 8, "gpus_per_node")
    return two_level(_n(nodes, 32, "nodes"), g, intra="nvswitch", intra_link="nvswitch-h100", nic_link="ib-ndr",
                     nics_per_node=g, nic_attach="pcie5", inter="fat-tree", device="h100",
                     name="dgx-h100-ndr")


def preset(name: str, *, nodes: int | None = None, gpus_per_node: int | None = None) -> Topology:
    """Build preset ``name`` (unknown names list the choices)."""
    return PRESETS.get(name)(nodes, gpus_per_node)
