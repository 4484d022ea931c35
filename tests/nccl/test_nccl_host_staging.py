"""Transfers NCCL stages through host memory (SHM without P2P, a network without GPUDirect RDMA): a GPU that
writes to and reads from host memory at once gets HOST_BIDIR_SHARE of its PCIe port each way (NVIDIA/nccl#384)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm import engine
from simcomm.nccl.execution import (
    HOST_BIDIR_SHARE,
    HOST_BIDIR_SHARE_BY_KIND,
    host_bidir_share,
    host_bidirectional_stretch,
    host_staged,
)
from simcomm.nccl.prepare import prepare_nccl
from simcomm.ops import Collective, PlanBuilder
from simcomm.runtimes import NcclRuntime
from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.intranode import HostPath
from simcomm.topologies.two_level import two_level

GiB = 1 << 30
PCIE3 = 15.75e9  # pcie3's line rate (links/pcie.py); the ideal stack keeps line rates


def shm_box(gpus=2, switches=1):
    """GPUs without peer-to-peer behind ``switches`` PCIe Gen3 switches of one socket, ideal stack."""
    t = two_level(1, gpus, intra="pcie-host", intra_link="pcie3", device="v100",
                  host=HostPath(pcie_switches=switches, sockets=1))
    return apply_stack(t, get_stack("ideal"))


def net_pair(stack="ideal", gdr=None):
    """Two nodes of one GPU each, a 100 Gb/s NIC on PCIe Gen3; ``gdr=False`` marks GPUDirect RDMA off."""
    t = two_level(2, 1, intra="pcie", intra_link="pcie3", nic_link="efa-100g", nics_per_node=1,
                  nic_attach="pcie3", device="v100")
    if gdr is not None:
        t.meta["gdr"] = gdr
    return apply_stack(t, get_stack(stack))


def prepared(topo, kind, nbytes, **rt):
    op = Collective(0, kind, tuple(range(topo.n_ranks)), nbytes)
    return prepare_nccl(op, topo, NcclRuntime(**rt))


def simulate(topo, kind, nbytes, **rt):
    b = PlanBuilder(topo.n_ranks)
    b.collective(kind, range(topo.n_ranks), nbytes)
    return engine.simulate(b.build(), topo, runtime=NcclRuntime(**rt)).makespan


def test_the_share_is_issue_384s_allreduce_over_broadcast():
    # maintainer's numbers, two PCIe Gen3 GPUs through SHM: all-reduce busbw 3.9 GB/s, broadcast 10.31 GB/s
    assert pytest.approx(0.378274, abs=1e-6) == HOST_BIDIR_SHARE


def test_all_gather_and_reduce_scatter_get_issue_384s_own_share_and_the_rest_all_reduces():
    # the same measurement's all-gather and reduce-scatter: 3.17 GB/s busbw each against broadcast's 10.31
    for kind in ("allgather", "reduce_scatter"):
        assert host_bidir_share(kind) == pytest.approx(0.307468, abs=1e-6)
    assert set(HOST_BIDIR_SHARE_BY_KIND) == {"allgather", "reduce_scatter"}
    for kind in ("allreduce", "alltoall", "broadcast"):
        assert host_bidir_share(kind) == HOST_BIDIR_SHARE


def test_which_transfers_go_through_host_memory():
    assert host_staged(shm_box(), 0, 1)                       # SHM: P2P off on this machine
    assert not host_staged(net_pair(), 0, 1)                  # GPUDirect RDMA (the default)
    assert host_staged(net_pair(gdr=False), 0, 1)             # a plugin without NCCL_PTR_CUDA
    assert host_staged(net_pair(stack="nccl-socket"), 0, 1)   # NCCL's sockets: host pointers only


def test_two_way_exchange_on_one_switch_is_held_to_the_share():
    # r0 <-> r1 through host memory, x bytes each way.  The busiest links are the switch's uplink (both GPUs
    # write up it: 2x / 15.75 GB/s) next to the memory node (2x / 17.07 GB/s); each GPU's own port may carry
    # x at 0.378 x 15.75 GB/s: stretch = (x / (s P)) / (2x / P) = 1 / (2 s) = 10.31 / 7.8.
    topo, x = shm_box(), 1e6
    got = host_bidirectional_stretch(topo, np.arange(2), np.array([0, 1]), np.array([1, 0]), np.array([x, x]))
    assert got == pytest.approx(10.31 / 7.8, rel=1e-12)


def test_one_way_traffic_and_peer_to_peer_are_not_stretched():
    # broadcast between two GPUs: r0 only writes, r1 only reads (issue 384's 10.31 GB/s is such a case)
    one_way = host_bidirectional_stretch(shm_box(), np.arange(2), np.array([0]), np.array([1]), np.array([1e9]))
    assert one_way == 1.0
    # a network with GPUDirect RDMA moves GPU memory directly: nothing is staged
    both = (np.arange(2), np.array([0, 1]), np.array([1, 0]), np.array([1e9, 1e9]))
    assert host_bidirectional_stretch(net_pair(), *both) == 1.0


def test_the_cap_counts_payload_not_the_bytes_fewer_channels_inflate():
    # flows inflated 4x for want of channels (busiest 8x / P) against a payload of x per direction: the port
    # cap x / (0.378 P) = 2.64 x / P does not bind
    topo, x = shm_box(), 1e6
    got = host_bidirectional_stretch(topo, np.arange(2), np.array([0, 1]), np.array([1, 0]),
                                     np.array([4 * x, 4 * x]), np.array([x, x]))
    assert got == 1.0


def test_shm_allreduce_runs_at_the_share_of_the_gpu_port():
    # 1 GiB ring all-reduce over 2 GPUs: each GPU sends 2 (p-1)/p n = n over all channels and receives as much;
    # at 0.378 x 15.75 GB/s per direction that takes n / 5.958 GB/s, slower than the shared uplink's 2n / P
    # even after the slice handshakes: the bandwidth term is exactly the port cap.
    topo, n = shm_box(), float(GiB)
    prep = prepared(topo, "allreduce", n, nccl_algo="ring", nccl_proto="simple")
    assert prep.closed_form - prep.latency[0] == pytest.approx(n / (HOST_BIDIR_SHARE * PCIE3), rel=1e-12)
    # the flow engine agrees with the closed form on this contention-free box
    sim = simulate(topo, "allreduce", n, nccl_algo="ring", nccl_proto="simple")
    assert sim == pytest.approx(prep.closed_form, rel=1e-9)


@pytest.mark.parametrize("kind", ["allgather", "reduce_scatter"])
def test_shm_allgather_and_reduce_scatter_run_at_issue_384s_share(kind):
    # 1 GiB over 2 GPUs: each GPU sends n/2 and receives n/2 through host memory; at 3.17/10.31 x 15.75 GB/s
    # = 4.843 GB/s per direction that takes (n/2) / 4.843 GB/s, slower than the link's own n/2 / 15.75 GB/s
    # even after the handshakes: the bandwidth term is exactly the cap
    topo, n = shm_box(), float(GiB)
    prep = prepared(topo, kind, n, nccl_algo="ring", nccl_proto="simple")
    share = 3.17 / 10.31
    assert prep.closed_form - prep.latency[0] == pytest.approx((n / 2) / (share * PCIE3), rel=1e-12)
    sim = simulate(topo, kind, n, nccl_algo="ring", nccl_proto="simple")
    assert sim == pytest.approx(prep.closed_form, rel=1e-9)


def test_shm_broadcast_between_two_gpus_is_unchanged():
    # one way: the time is the busiest link's, the same as with peer-to-peer staged through an equal path
    topo, n = shm_box(), float(GiB)
    prep = prepared(topo, "broadcast", n, nccl_algo="ring", nccl_proto="simple")
    step = prep.steps[0]
    stretch = host_bidirectional_stretch(topo, np.arange(2), step.src, step.dst, step.nbytes)
    assert stretch == 1.0


def test_network_without_gdr_holds_a_two_rank_allreduce_to_the_share():
    # 2 nodes x 1 GPU, Ring/Simple: each GPU sends n and receives n through its PCIe Gen3 port (NIC 12.5 GB/s is
    # faster than 0.378 x 15.75 = 5.958 GB/s): the bandwidth term is n / 5.958 GB/s; with GDR it is NIC-bound.
    n = float(GiB)
    staged = prepared(net_pair(gdr=False), "allreduce", n, nccl_algo="ring", nccl_proto="simple")
    assert staged.closed_form - staged.latency[0] == pytest.approx(n / (HOST_BIDIR_SHARE * PCIE3), rel=1e-12)
    direct = prepared(net_pair(), "allreduce", n, nccl_algo="ring", nccl_proto="simple")
    assert direct.closed_form - direct.latency[0] < 0.95 * n / (HOST_BIDIR_SHARE * PCIE3)
    sim = simulate(net_pair(gdr=False), "allreduce", n, nccl_algo="ring", nccl_proto="simple")
    assert sim == pytest.approx(staged.closed_form, rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(1.0, 1e9), min_size=2, max_size=2), st.sampled_from([2, 4]))
def test_stretch_never_speeds_up_and_only_binds_on_two_way_gpus(sizes, gpus):
    topo = shm_box(gpus=gpus, switches=gpus // 2)
    src, dst = np.array([0, 1]), np.array([1, 0])
    got = host_bidirectional_stretch(topo, np.arange(gpus), src, dst, np.array(sizes))
    assert got >= 1.0
    # the slowest two-way GPU sets it: max(out, in) = the larger of the two flows
    route_len, links = topo.routes(src, dst)
    load = np.bincount(links, weights=np.repeat(np.array(sizes), route_len), minlength=len(topo.capacity))
    busiest = float((load[load > 0] / topo.capacity[load > 0]).max())
    assert got == pytest.approx(max(1.0, max(sizes) / (HOST_BIDIR_SHARE * PCIE3) / busiest), rel=1e-12)
