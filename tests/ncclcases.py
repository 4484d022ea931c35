"""Fabrics for the NCCL tests, built explicitly so that preset changes cannot move the pins."""

from __future__ import annotations

from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.two_level import two_level


def h100(nodes: int, stack: str = "nccl"):
    """DGX H100-like: 8 H100 on NVSwitch (18 NVLink4), one 400 Gb/s NDR NIC per GPU on PCIe Gen5, rail fabric."""
    topo = two_level(nodes, 8, intra="nvswitch", intra_link="nvswitch-h100", nic_link="ib-ndr", nics_per_node=8,
                     nic_attach="pcie5", inter="rail", device="h100", name="test-h100")
    return apply_stack(topo, get_stack(stack))


def a100(nodes: int, stack: str = "nccl"):
    """DGX A100-like: 8 A100 on NVSwitch (12 NVLink3), one 200 Gb/s HDR NIC per GPU on PCIe Gen4."""
    topo = two_level(nodes, 8, intra="nvswitch", intra_link="nvswitch-a100", nic_link="ib-hdr", nics_per_node=8,
                     nic_attach="pcie4", inter="rail", device="a100", name="test-a100")
    return apply_stack(topo, get_stack(stack))


