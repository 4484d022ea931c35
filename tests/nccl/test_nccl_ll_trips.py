"""LL's trips (simcomm.nccl.trips): a step's first trip rides on its hop latency inside a node, not across one."""

from __future__ import annotations

import pytest
from ncclcases import a100, h100

from simcomm.nccl import tuning
from simcomm.nccl.execution import channels_used, execution_efficiency, slice_bytes
from simcomm.nccl.layout import group_layout
from simcomm.nccl.prepare import prepare_nccl
from simcomm.nccl.trips import launched_threads, ll_trip_share, threshold
from simcomm.ops import Collective
from simcomm.runtimes import NcclRuntime
from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.two_level import two_level


def layout(topo):
    return group_layout(topo, tuple(range(topo.n_ranks)))


def test_threads_halve_as_topoGetAlgoInfo_does():
    # Ring/LL on 8 ranks: 8 B x 8 = 64 B per thread; one channel left; 512 halves while bytes < 1 x nt x 64, to
    # no fewer than 3 warps; a tree always runs NCCL_MAX_NTHREADS
    per = threshold("ring", "ll", 8)
    assert per == 64.0 and threshold("tree", "ll", 8) == 8.0 and threshold("ring", "simple", 8) == 64.0
    assert launched_threads("ring", 512, 1, per, 8.0) == 96        # 512 -> 256 -> 128 -> 64, raised to 3 warps
    assert launched_threads("ring", 512, 1, per, 8192.0) == 128    # 8 Ki < 16 Ki halves to 128; 8 Ki < 8 Ki no
    assert launched_threads("ring", 512, 1, per, 16384.0) == 256   # 16 Ki < 32 Ki halves; 16 Ki < 16 Ki does not
    assert launched_threads("ring", 512, 1, per, 32768.0) == 512
    assert launched_threads("ring", 640, 1, 8.0, 8.0) == 320       # 640 = 5 x 128 halves once; 320 % 128 stops
    assert launched_threads("ring", 640, 2, 8.0, 10240.0) == 640   # 2 channels x 640 x 8 B = 10 KiB: no halving
    assert launched_threads("tree", 512, 1, 8.0, 8.0) == 640       # "Tree now uses all threads always"


def test_trip_share_by_hand():
    # a ring step of 2 KiB on 4 hidden steps of 6, 12 KiB per link: 8 KiB hidden, a third left, full threads
    assert ll_trip_share(12288.0, 4, 2048.0, 512, 512) == pytest.approx(1 / 3)
    # the same on 256 threads: a trip carries 2 KiB, still the whole slice; the rest at half the rate
    assert ll_trip_share(12288.0, 4, 2048.0, 256, 512) == pytest.approx(2 / 3)
    # slices of 8 KiB, 64 threads (512 B a trip): 4 x 512 B hidden of 12 KiB, at 1/8 of the rate
    assert ll_trip_share(12288.0, 4, 8192.0, 64, 512) == pytest.approx((12288 - 2048) / 12288 * 8)
    # nothing hidden (every step crosses the network): the threads' rate only
    assert ll_trip_share(12288.0, 0, 2048.0, 512, 512) == 1.0
    assert ll_trip_share(0.0, 4, 2048.0, 512, 512) == 1.0


def test_ring_ll_on_one_node_runs_at_nccls_own_price_while_a_trip_carries_each_step():
    # 8 A100 up to 32 KiB: one channel, each step's slice (bytes / 8) within one trip of the launched threads:
    # the per-channel time is hidden, so the call costs NCCL's own model time (latency + bytes / algBw, the
    # throughput of every channel at full threads, which hidden trips cannot beat) and the launch: 16.83 us
    # from 8 B to 32 KiB where the old channel model added up to 15.7 us (the public 8 x A100 run measures
    # 32.0-32.5 us at -g 8 from 64 B to 32 KiB: flat)
    topo = a100(1)
    rt = NcclRuntime()
    lay = layout(topo)
    for n in (8.0, 1024.0, 16384.0, 32768.0):
        t = prepare_nccl(Collective(0, "allreduce", tuple(range(8)), n), topo, rt).closed_form
        mt = tuning.model("ring", "ll", "allreduce", lay, n)
        assert t == pytest.approx(mt.seconds(n) + 1.825e-6, rel=1e-9), n
    # 4 KiB on 1 channel of 96 threads (4 Ki < 1 x 128 x 64 B halves to 64, raised to 3 warps): a trip carries
    # 768 B of the 512 B slice, so every step hides wholly: the channel share alone would be 1/24
    n = 4096.0
    used, full = channels_used("ring", "ll", "allreduce", lay, n)
    assert (used, full) == (1, 24) and slice_bytes("ring", "ll", "allreduce", lay, n, used) == 512.0
    assert execution_efficiency(tuning.model("ring", "ll", "allreduce", lay, n), "allreduce", lay, n) == 1.0


def test_when_trips_are_not_hidden_fewer_threads_are_slower():
    # 2 nodes x 1 H100, Ring/LL: both steps cross the network, nothing hidden. 1 KiB runs 1 channel; the ring's
    # 16 B per thread (8 B x 2 ranks) halves 512 -> 256 -> 128 -> 64 (1 Ki < 1 x 128 x 16), raised to 96: the
    # channel carries 96/512 of its rate. Slices of 512 B, two over two steps: no handshake beyond the model's.
    topo = apply_stack(two_level(2, 1, intra="nvswitch", intra_link="nvswitch-h100", nic_link="ib-ndr",
                                 nics_per_node=1, nic_attach="pcie5", inter="rail", device="h100", name="t"),
                       get_stack("nccl"))
    lay = layout(topo)
    n = 1024.0
    mt = tuning.model("ring", "ll", "allreduce", lay, n)
    used, full = channels_used("ring", "ll", "allreduce", lay, n)
    assert used == 1 and slice_bytes("ring", "ll", "allreduce", lay, n, used) == 512.0
    assert execution_efficiency(mt, "allreduce", lay, n) == pytest.approx(used / full * 96 / 512)
def test_across_nodes_nothing_is_hidden():
    # 2 x 8 H100, Tree/LL: the chunk crosses the network up and down (stored and forwarded whole by the proxy):
    # no trip hidden; the tree runs its 640 threads at any size, so the channels alone set the share
    lay = layout(h100(2))
    for n in (8.0, 4096.0, 32768.0):
        mt = tuning.model("tree", "ll", "allreduce", lay, n)
        used, full = channels_used("tree", "ll", "allreduce", lay, n)
        assert execution_efficiency(mt, "allreduce", lay, n) == pytest.approx(used / full), n


def test_a_one_node_tree_hides_its_chunks_first_trip():
    # 8 H100, Tree/LL forced: one chain inside the node, line by line; 640 threads carry 5 KiB a trip, so a
    # 4 KiB buffer on one channel (4 Ki < 2 x 512 x 8 B) rides wholly on the chain's hop latencies, where the
    # channel share alone would have been 1/24 of NCCL's bandwidth
    lay = layout(h100(1))
    mt = tuning.model("tree", "ll", "allreduce", lay, 4096.0)
    used, full = channels_used("tree", "ll", "allreduce", lay, 4096.0)
    assert used == 1
    assert execution_efficiency(mt, "allreduce", lay, 4096.0) == 1.0  # wholly hidden: NCCL's own price
