"""A network step on a fabric slower than InfiniBand waits the difference (simcomm.nccl.fabric), pinned by hand."""

from __future__ import annotations

import pytest

import simcomm.nccl.algorithms  # noqa: F401  (registers the catalogue)
from simcomm.links.base import LinkClass
from simcomm.nccl.fabric import fabric_extra_us, fabric_latency_us, fabric_note, network_latency_steps
from simcomm.nccl.layout import group_layout
from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.two_level import two_level


def _nic(us: float) -> LinkClass:
    return LinkClass(f"nic-{us:g}us", 100e9 / 8, us * 1e-6, "ethernet", "test NIC", "test")


def cluster(nic, nodes: int = 2, gpus: int = 1, stack: str = "nccl"):
    topo = two_level(nodes, gpus, intra="nvswitch" if gpus > 1 else "pcie",
                     intra_link="nvswitch-h100" if gpus > 1 else "pcie4", nic_link=nic, nics_per_node=gpus,
                     nic_attach="pcie4", device="h100", name="test-fabric")
    return apply_stack(topo, get_stack(stack))


def _prepare(topo, kind, nbytes):
    from simcomm.nccl.prepare import prepare_nccl
    from simcomm.ops import Collective
    from simcomm.runtimes import NcclRuntime

    return prepare_nccl(Collective(0, kind, tuple(range(topo.n_ranks)), nbytes), topo, NcclRuntime())


def test_infiniband_and_roce_steps_cost_nccls_table_alone():
    for nic in ("ib-ndr", "roce-400g", "ib-hdr"):
        lay = group_layout(cluster(nic), (0, 1))
        assert lay.nic_hop_latency == pytest.approx(0.7e-6)  # the class's latency, before NCCL's 3 us overhead
        assert fabric_extra_us(lay) == 0.0
        assert fabric_latency_us("ring", "allreduce", lay) == 0.0


def test_an_efa_step_waits_its_one_way_latency_beyond_infinibands():
    # efa-100g: 9.87 us one way (2 hops of 4.935 us) against InfiniBand's 1.4 us (2 x 0.7): 8.47 us per step
    lay = group_layout(cluster("efa-100g"), (0, 1))
    assert fabric_extra_us(lay) == pytest.approx(8.47)
    # 2 x 1 GPUs, ring all-reduce: both steps cross the network (NCCL's 2 (nodes - 1)): 16.94 us
    assert fabric_latency_us("ring", "allreduce", lay) == pytest.approx(16.94)
    # the socket stack's 40 us overhead per message is not the wire's: the class's own latency counts
    sock = group_layout(cluster("efa-100g", stack="nccl-socket"), (0, 1))
    assert sock.nic_hop_latency == pytest.approx(4.935e-6)


def test_a_small_all_reduce_over_efa_by_hand():
    # 2 nodes x 1 H100 over EFA, 8 B all-reduce: NCCL picks Ring/LL (6.6 + 2 x 5.0 us, one GPU per node takes the
    # Tree network latency), no proxy wait (one channel: its one send a step is NCCL's own), the fabric 2 x 8.47
    # us, one launch 1.825 us; the 8 bytes themselves take some 14 ns
    prep = _prepare(cluster("efa-100g"), "allreduce", 8.0)
    assert prep.label == "NCCL Ring/LL"
    want = (6.6 + 2 * 5.0) + 2 * 8.47 + 1.825
    assert prep.latency[0] * 1e6 == pytest.approx(want)
    assert prep.closed_form * 1e6 == pytest.approx(want, abs=0.05)
    # the same machine on InfiniBand: 8.47 us less per step
    ib = _prepare(cluster("ib-edr"), "allreduce", 8.0)
    assert (prep.latency[0] - ib.latency[0]) * 1e6 == pytest.approx(16.94)


def test_the_steps_counted_are_nccls_network_steps():
    lay = group_layout(cluster("ib-ndr", nodes=4, gpus=8), tuple(range(32)))
    assert network_latency_steps("ring", "allreduce", lay) == 6  # 2 (nodes - 1)
    assert network_latency_steps("ring", "allgather", lay) == 3  # nodes - 1
    assert network_latency_steps("ring", "broadcast", lay) == 1  # one hop: the channels' same order
    assert network_latency_steps("tree", "allreduce", lay) == 4  # up and down log2(4) levels
    assert network_latency_steps("nvls-tree", "allreduce", lay) == 4
    assert network_latency_steps("collnet-direct", "allreduce", lay) == 1
    assert network_latency_steps("pat", "allgather", lay) == pytest.approx(2 / 3.5)
    one = group_layout(cluster("efa-100g", nodes=1, gpus=8), tuple(range(8)))
    assert network_latency_steps("ring", "allreduce", one) == 0 and fabric_extra_us(one) == 0.0


def test_a_grouped_point_to_point_message_across_nodes_waits_it_too():
    # all-to-all between 2 nodes of one GPU: one network message per peer, priced as a Ring/Simple network step
    # (8.4 + 14.0 us), once per batch (one here), plus the fabric's 8.47 us and one launch
    efa = _prepare(cluster("efa-100g"), "alltoall", 1024.0)
    ib = _prepare(cluster("ib-edr"), "alltoall", 1024.0)
    assert ib.latency[0] * 1e6 == pytest.approx(8.4 + 14.0 + 1.825)
    assert (efa.latency[0] - ib.latency[0]) * 1e6 == pytest.approx(8.47)


def test_a_slower_fabric_is_one_assumed_line_and_infiniband_none():
    assert fabric_note(cluster("ib-ndr")) == []
    (line,) = fabric_note(cluster(_nic(19.0)))
    assert line.startswith("each NCCL network step waits +36.60 us beyond NCCL's (InfiniBand) table: 2 hops")
    assert fabric_note(cluster("efa-100g", nodes=1, gpus=8)) == []  # no network step on one node
