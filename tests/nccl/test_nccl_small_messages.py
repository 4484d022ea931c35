"""Small messages as NCCL runs them: which algorithm NCCL can choose, and what a small call costs."""

from __future__ import annotations

import pytest

import simcomm.nccl.algorithms  # noqa: F401  (registers the catalogue)
from simcomm.errors import ConfigError
from simcomm.nccl.layout import group_layout
from simcomm.nccl.prepare import choose
from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.two_level import two_level


def hopper_box(gpus: int, nodes: int = 1):
    topo = two_level(nodes, gpus, intra="nvswitch", intra_link="nvswitch-h100", nic_link="ib-ndr",
                     nics_per_node=gpus, nic_attach="pcie5", inter="rail", device="h100", name="test-h100")
    return apply_stack(topo, get_stack("nccl"))


@pytest.mark.parametrize("nbytes", [8.0, 65536.0, float(1 << 20), float(1 << 30), float(8 << 30)])
def test_two_hopper_gpus_never_run_nvls(nbytes):
    # ncclNvlsInit (src/transport/nvls.cc): no NVLS support when the node has <= 2 GPUs, so neither NVLS nor
    # NVLS-Tree is a candidate, at any size; with 3 GPUs NVLS is one again
    two = group_layout(hopper_box(2), list(range(2)))
    assert choose("allreduce", two, nbytes, None, None)[0] not in ("nvls", "nvls-tree")
    across = group_layout(hopper_box(2, nodes=2), list(range(4)))
    assert choose("allreduce", across, nbytes, None, None)[0] not in ("nvls", "nvls-tree")


def test_nvls_returns_from_three_gpus_and_forcing_it_on_two_is_one_line():
    three = group_layout(hopper_box(3), list(range(3)))
    assert choose("allreduce", three, float(8 << 30), "nvls", None)[0] == "nvls"  # a candidate again
    eight = group_layout(hopper_box(8), list(range(8)))
    assert choose("allreduce", eight, float(1 << 30), None, None)[0] == "nvls"
    two = group_layout(hopper_box(2), list(range(2)))
    with pytest.raises(ConfigError, match=r"NVLS needs at least 3 GPUs in each NVLink domain .* the smallest here "
                                          r"has 2"):
        choose("allreduce", two, 8.0, "nvls", None)
