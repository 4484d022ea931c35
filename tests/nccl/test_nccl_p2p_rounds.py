"""NCCL's grouped point-to-point as its code runs it: protocol per message, batches per channel, exact times.

Hand-computed from the mechanism (docs/nccl.md, "P2P"): a message between nodes runs Simple (the network's
shared p2p buffers carry no LL), one on a node runs LL up to ``nChannelsMax x 16 KiB``; each is priced as
NCCL's model prices one ring step of its protocol over its hop (``baseLat + hwLat``, us); every peer of a
batch runs at once and a channel runs its batches in turn; one kernel launch (1.825 us per GPU).
"""

from __future__ import annotations

import pytest

from simcomm import engine
from simcomm.nccl import execution
from simcomm.nccl.layout import group_layout
from simcomm.ops import PlanBuilder
from simcomm.runtimes import NcclRuntime
from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.two_level import two_level

LAUNCH_US = 1.825  # execution.LAUNCH_PER_GPU_S, one GPU per thread
SIMPLE_NET_US = 8.4 + 14.0  # ring baseLat Simple + hwLat NET Simple (src/graph/tuning.cc)
LL_PCI_US = 6.6 + 1.0  # ring baseLat LL + hwLat PCI LL
SIMPLE_PCI_US = 8.4 + 5.7  # ring baseLat Simple + hwLat PCI Simple


def pcie_box(nodes: int, gpus: int):
    t = two_level(nodes, gpus, intra="pcie", intra_link="pcie5", nic_link="roce-400g", nics_per_node=gpus,
                  nic_attach="pcie5", inter="switch", device="h100")
    return apply_stack(t, get_stack("ideal"))


def makespan(topo, kind: str, nbytes: float, fidelity: str = "flow") -> float:
    b = PlanBuilder(topo.n_ranks)
    b.collective(kind, range(topo.n_ranks), nbytes)
    return engine.simulate(b.build(), topo, fidelity=fidelity, runtime=NcclRuntime()).makespan


@pytest.mark.parametrize("fidelity", ["flow", "analytic"])
def test_four_rank_all_to_all_across_two_nodes_is_one_simple_network_step(fidelity):
    # 2 nodes x 2 PCIe GPUs, count 0: every message still runs; the slowest ones cross the network,
    # Simple there whatever their size: 1.825 + 8.4 + 14.0 = 24.225 us, one batch per channel.
    assert makespan(pcie_box(2, 2), "alltoall", 0.0, fidelity) == pytest.approx(24.225e-6, rel=1e-12)


@pytest.mark.parametrize("fidelity", ["flow", "analytic"])
def test_one_node_message_switches_from_ll_to_simple_above_the_threshold(fidelity):
    # One node, 2 PCIe GPUs: a PCIe peer gets 2 channels, so LL up to 2 x 16 KiB per message.
    topo = pcie_box(1, 2)
    layout = group_layout(topo, [0, 1])
    assert execution.p2p_channels_per_peer(layout) == 2
    assert execution.p2p_message_latency_us(layout, False, 32768) == ("ll", pytest.approx(LL_PCI_US))
    assert execution.p2p_message_latency_us(layout, False, 32769) == ("simple", pytest.approx(SIMPLE_PCI_US))
    # count 0: 1.825 + 6.6 + 1.0 = 9.425 us
    assert makespan(topo, "alltoall", 0.0, fidelity) == pytest.approx(9.425e-6, rel=1e-12)


def test_network_messages_never_run_ll():
    layout = group_layout(pcie_box(2, 2), [0, 1, 2, 3])
    for nbytes in (0.0, 8.0, 16384.0, 1 << 30):
        proto, us = execution.p2p_message_latency_us(layout, True, nbytes)
        assert proto == "simple" and us == pytest.approx(SIMPLE_NET_US)


def test_peers_beyond_one_batch_round_run_in_turn(monkeypatch):
    # 4 nodes x 8 GPUs: 32 rounds in 4 groups of 8 local offsets, one channel base each. With 2 p2p channels
    # every channel holds 2 batches of 8 peers, run one after the other: 1.825 + 2 x 22.4 = 46.625 us.
    topo = pcie_box(4, 8)
    monkeypatch.setattr(execution, "p2p_channels", lambda layout: 2)
    layout = group_layout(topo, list(range(32)))
    assert execution.p2p_batches(layout) == 2
    assert makespan(topo, "alltoall", 0.0, "analytic") == pytest.approx(46.625e-6, rel=1e-12)
    monkeypatch.setattr(execution, "p2p_channels", lambda layout: 4)
    assert execution.p2p_batches(layout) == 1  # 4 bases on 4 channels: every peer at once


def test_sixteen_pcie_ranks_fit_one_batch_round():
    # 2 x 8 PCIe GPUs with one 400 Gb/s NIC each (the public RTX 6000D all-to-all): 2 channel bases, both
    # within the p2p channels, so the 15 peers of a rank all run at once.
    layout = group_layout(pcie_box(2, 8), list(range(16)))
    assert execution.p2p_channels(layout) >= 2
    assert execution.p2p_batches(layout) == 1


def test_bench_sendrecv_runs_nccl_point_to_point():
    # nccl-tests' sendrecv_perf is grouped ncclSend/ncclRecv: on the nccl stack each rank's message to the next
    # takes NCCL's p2p path, so an 8 B ring on one 8 x A100 node with -g 8 costs 8 launches and one LL step
    # over NVLink: 8 x 1.825 + 6.6 + 0.6 = 21.8 us (plain transfers would cost their route's latency alone)
    from simcomm.bench import bench
    from simcomm.topologies.presets import preset

    topo = apply_stack(preset("dgx-a100-hdr", nodes=1), get_stack("nccl"))
    (row,) = bench("sendrecv", topo, NcclRuntime(), [8.0], gpus_per_thread=8)
    rate = min(float(topo.capacity[k]) for k in topo.route(0, 1))  # the 8 bytes themselves: ~3e-5 us
    assert row.time_us == pytest.approx(8 * LAUNCH_US + 6.6 + 0.6 + 8 / rate * 1e6, rel=1e-12)
    assert row.algorithm == "NCCL P2P"


@pytest.mark.parametrize("fidelity", ["flow", "analytic"])
def test_all_to_all_with_every_message_across_nodes(fidelity):
    # Ranks 0 and 2 of 2 nodes x 2 PCIe GPUs (an expert-parallel group strided across nodes): no message stays
    # on a node, so only the network kind is priced (the in-node maximum over no message raised ValueError):
    # count 0: 1.825 + 8.4 + 14.0 = 24.225 us.
    topo = pcie_box(2, 2)
    b = PlanBuilder(topo.n_ranks)
    b.collective("alltoall", [0, 2], 0.0)
    span = engine.simulate(b.build(), topo, fidelity=fidelity, runtime=NcclRuntime()).makespan
    assert span == pytest.approx(24.225e-6, rel=1e-12)
