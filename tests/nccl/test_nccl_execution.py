"""NCCL's execution beyond its tuning model: channels launched for small buffers, slice handshakes."""

from __future__ import annotations

import pytest
from ncclcases import a100, h100

from simcomm.nccl import tuning
from simcomm.nccl.execution import channels_used, execution_efficiency, slice_bytes
from simcomm.nccl.layout import group_layout
from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.two_level import two_level


def layout(topo):
    return group_layout(topo, tuple(range(topo.n_ranks)))


def test_small_buffers_launch_fewer_channels():
    lay = layout(a100(1))  # 24 run-time channels (12 search channels x 2)
    # NCCL counts comm->maxThreads (Simple 512, before the sync warp): 512 x 64 B = 32 KiB per channel;
    # 256 KiB keeps exactly 8 (8 x 32 KiB = 256 KiB is not more than the buffer), 256 KiB - 1 B only 7.
    assert channels_used("ring", "simple", "allreduce", lay, 262144) == (8, 24)
    assert channels_used("ring", "simple", "allreduce", lay, 262143) == (7, 24)
    # Ring/LL: 512 threads x 8 B x 8 ranks = 32 KiB per channel: 1 MiB keeps all 24 (24 x 32 KiB = 768 KiB).
    assert channels_used("ring", "ll", "allreduce", lay, 1 << 20) == (24, 24)
    assert channels_used("ring", "ll", "allreduce", lay, 8) == (1, 24)
    # Tree/LL: 512 threads x 8 B = 4 KiB per channel (LL128 would count 640 threads: 5 KiB)
    assert channels_used("tree", "ll", "allreduce", lay, 40960) == (10, 24)
    assert channels_used("tree", "ll128", "allreduce", lay, 40960) == (8, 24)


def test_pcie_bound_rings_count_256_simple_threads():
    # ncclTopoTuneModel: a ring whose search found at most PCI_BW (12 GB/s) in all runs Simple on 256 threads
    topo = apply_stack(two_level(1, 4, intra="pcie", intra_link="pcie3", device="v100"), get_stack("nccl"))
    lay = layout(topo)
    ring = tuning.graphs(lay)["ring"]
    assert ring.n_ch * ring.bw_intra == 12
    # 40 000 B: ring 256 x 64 = 16 KiB per channel -> 2 channels; tree 512 x 64 = 32 KiB -> 1
    assert channels_used("ring", "simple", "allreduce", lay, 40000) == (2, 2)
    assert channels_used("tree", "simple", "allreduce", lay, 40000) == (1, 2)


def test_slices_follow_ncclss_chunking():
    lay = layout(a100(1))
    # Ring/Simple all-reduce: 2 MiB chunks of two 1 MiB slices, shrunk to a loop's share: 16 MiB over 24 channels
    # and 8 ranks is 87 381 B per chunk, 43 690.67 B per slice; 8 GiB hits the 2 MiB cap.
    assert slice_bytes("ring", "simple", "allreduce", lay, 16 << 20, 24) == pytest.approx((16 << 20) / 24 / 8 / 2)
    assert slice_bytes("ring", "simple", "allreduce", lay, 8 << 30, 24) == 1 << 20
    assert slice_bytes("ring", "ll", "allreduce", lay, 8 << 30, 24) == 32 * 1024


def test_one_slice_per_step_costs_nothing_beyond_the_model():
    # 16 KiB on 8 A100, Ring/LL: 1 channel x 16 KiB -> slices of 2 KiB, K = 2 x 7/8 x 16 Ki / 2 Ki = 14 = H: no
    # handshake beyond the model's.  NCCL launches 256 threads (16 Ki < 1 x 512 x 64 B halves them once), whose
    # one trip (256 x 8 B = 2 KiB) carries each step's whole slice: every step's bandwidth time rides on its hop
    # latency (simcomm.nccl.trips), and the call runs at NCCL's own bandwidth, never past it.
    lay = layout(a100(1))
    mt = tuning.model("ring", "ll", "allreduce", lay, 16384)
    used, full = channels_used("ring", "ll", "allreduce", lay, 16384)
    assert (used, full) == (1, 24)
    assert execution_efficiency(mt, "allreduce", lay, 16384) == 1.0
    # Ring/LL128 has no trips to hide: the channels and handshakes only
    mt = tuning.model("ring", "ll128", "allreduce", lay, 16384)
    used, full = channels_used("ring", "ll128", "allreduce", lay, 16384)
    assert execution_efficiency(mt, "allreduce", lay, 16384) == pytest.approx(used / full)


def test_large_buffers_lose_a_few_percent_to_handshakes():
    # 8 GiB on 8 H100, Ring/Simple: 24 channels of 360/24 = 15 GB/s; 1 MiB slices; per channel 8 Gi / 24; a link
    # carries K = 2 x 7/8 x 8 Gi / 24 / 1 Mi = 597.33 slices over H = 14 steps; each takes 2^20 / 15e9 s and
    # the other K - H pay Ring/Simple's NVLink step latency 3.4 us.
    lay = layout(h100(1))
    mt = tuning.model("ring", "simple", "allreduce", lay, 8 << 30)
    k = 2 * 7 / 8 * (8 << 30) / 24 / 2**20
    move = 2**20 / 15e9
    want = k * move / (k * move + (k - 14) * 3.4e-6)
    assert execution_efficiency(mt, "allreduce", lay, 8 << 30) == pytest.approx(want, rel=1e-12)
    assert 0.9 < want < 1.0


def test_nvls_tree_loops_follow_ncclss_chunking():
    from simcomm.nccl.execution import nvls_tree_loop_bytes

    # 2 x 8 H100: 16 NVLS channels x 8 heads = 128 concurrent ops.  The chunk is 128 KiB from 4 x 128 x 128 KiB
    # = 64 MiB on, 64 KiB from 128 x 64 KiB = 8 MiB on, else 32 KiB: loops of 16, 8 and 4 MiB.
    lay = layout(h100(2))
    assert nvls_tree_loop_bytes(lay, 64 << 20) == 16 << 20
    assert nvls_tree_loop_bytes(lay, (64 << 20) - 1) == 8 << 20
    assert nvls_tree_loop_bytes(lay, 8 << 20) == 8 << 20
    assert nvls_tree_loop_bytes(lay, (8 << 20) - 1) == 4 << 20
    # from 4 nodes on NCCL_NVLS_TREE_MAX_CHUNKSIZE caps the chunk at 64 KiB: 8 MiB loops even at 8 GiB
    assert nvls_tree_loop_bytes(layout(h100(4)), 8 << 30) == 8 << 20


def test_nvls_tree_fill_is_the_first_loops_trip_through_the_kernels_stages():
    from simcomm.nccl import execution
    from simcomm.nccl.execution import nvls_loop_bytes, nvls_tree_fill, nvls_tree_fill_loops, nvls_tree_head_nic_bw

    lay = layout(h100(2))
    # NCCL's view of 2 x 8 H100: NVLink 18 x 20.6 = 370.8 GB/s, one 48 GB/s NIC per GPU, 8 NVLS heads, depth 1.
    assert (lay.intra_bw, nvls_tree_head_nic_bw(lay), tuning.graphs(lay)["nvls"].n_ch) == pytest.approx((370.8, 48, 8))
    mt = tuning.model("nvls-tree", "simple", "allreduce", lay, 1 << 30)
    # NCCL's NVLS-Tree algBw (nccl-source-notes 8.2): 8 heads x min(40 x 0.85 x 7/8 x 2, 2 x 60, 57.7) = 461.6
    # bus, x 16/30 = 246.1867 GB/s.  Stages of the first loop: scatter and gather (the whole loop over NVLink),
    # the child's reduce, the root's reduce-and-broadcast and the child's broadcast (loop / 8 over NVLink each),
    # two network hops (loop / 8 through a 48 GB/s NIC):
    #   F = 246.1867 x ((2 + 3/8) / 370.8 + 2 / (8 x 48)) - 1 = 246.1867 x (0.0064051 + 0.0052083) - 1 = 1.85907
    assert mt.alg_bw == pytest.approx(461.6 * 16 / 30, rel=1e-12)
    F = nvls_tree_fill_loops(lay, mt)
    assert pytest.approx(461.6 * 16 / 30 * (2.375 / 370.8 + 2 / 384) - 1, rel=1e-12) == F
    assert pytest.approx(1.85907, abs=1e-5) == F
    # 8 MiB is exactly one 8 MiB loop: n / (n + F n); 2 MiB is part of a 4 MiB loop: the same
    assert nvls_tree_fill(lay, 8 << 20, F) == pytest.approx(1 / (1 + F), rel=1e-12)
    assert nvls_tree_fill(lay, 2 << 20, F) == pytest.approx(1 / (1 + F), rel=1e-12)
    # 1 GiB: 64 loops of 16 MiB; the fill is F loops of 16 MiB on top
    assert nvls_tree_fill(lay, 1 << 30, F) == pytest.approx(64 / (64 + F), rel=1e-12)
    # NVLS-Tree's execution share is the fill (all 16 channels run at every size here)
    assert execution_efficiency(mt, "allreduce", lay, 1 << 30) == pytest.approx(64 / (64 + F), rel=1e-12)
    # a deeper tree crosses more stages: 16 nodes, depth 4, 9 NVLink hand-offs and 8 network hops
    lay16 = layout(h100(16))
    mt16 = tuning.model("nvls-tree", "simple", "allreduce", lay16, 1 << 30)
    want = mt16.alg_bw * ((2 + 9 / 8) / lay16.intra_bw + 8 / (8 * nvls_tree_head_nic_bw(lay16))) - 1
    assert nvls_tree_fill_loops(lay16, mt16) == pytest.approx(want, rel=1e-12) and want > F
    # 3 nodes: NCCL's trees (ncclGetDtree) hang node 1 under node 2 under the root, two levels where the model's
    # log2i(3) counts one: 5 NVLink hand-offs and 4 network hops, F = algBw x ((2 + 5/8) / 370.8 + 4 / (8 x 48)) - 1
    lay3 = layout(h100(3))
    mt3 = tuning.model("nvls-tree", "simple", "allreduce", lay3, 1 << 30)
    assert (lay3.intra_bw, nvls_tree_head_nic_bw(lay3)) == pytest.approx((370.8, 48))
    want3 = mt3.alg_bw * ((2 + 5 / 8) / 370.8 + 4 / (8 * 48)) - 1
    assert nvls_tree_fill_loops(lay3, mt3) == pytest.approx(want3, rel=1e-12)
    # single-node NVLS: the same chain without the network (depth 0): scatter, one reduce-and-broadcast, gather.
    # algBw 8 x min(40 x 0.85 x 7/8 x 2, 60) x 8/14 = 476 x 8/14 = 272 GB/s: F = 272 x 2.125 / 370.8 - 1 = 0.558792.
    # 1 GiB is not below 64 x 128 ops x 128 KiB = 1 GiB: 128 KiB chunks, 16 MiB loops, 64 of them.
    one = layout(h100(1))
    mt1 = tuning.model("nvls", "simple", "allreduce", one, 1 << 30)
    F1 = nvls_tree_fill_loops(one, mt1)
    assert pytest.approx(272.0 * 2.125 / 370.8 - 1, rel=1e-12) == F1
    assert pytest.approx(0.558792, abs=1e-6) == F1
    assert nvls_loop_bytes(one, 1 << 30) == 16 << 20
    assert execution_efficiency(mt1, "allreduce", one, 1 << 30) == pytest.approx(64 / (64 + F1), rel=1e-12)
    # below 1 GiB the chunk is 64 KiB (8 MiB loops), below 64 MiB 32 KiB, below 8 MiB 16 KiB (2 MiB loops)
    assert [nvls_loop_bytes(one, x) for x in ((1 << 30) - 1, 64 << 20, (64 << 20) - 1, (8 << 20) - 1)] == [
        8 << 20, 8 << 20, 4 << 20, 2 << 20]
    # NVLS all-gather runs another kernel: no fill; NVLS across nodes (with SHARP) is not modelled
    mt_ag = tuning.model("nvls", "simple", "allgather", one, 1 << 30)
    assert execution_efficiency(mt_ag, "allgather", one, 1 << 30) == 1.0
    assert nvls_tree_fill_loops(lay, tuning.model("nvls", "simple", "allreduce", lay, 1 << 30)) == 0.0
    # nothing fitted: only the launch's calibration run is held out
    assert execution.HELD_OUT_RUNS == (execution.CALIBRATION_RUN,)


def test_nvls_tree_fill_lengthens_the_bandwidth_term_only(monkeypatch):
    import numpy as np

    from simcomm.nccl import execution
    from simcomm.nccl.prepare import prepare_nccl
    from simcomm.ops import Collective
    from simcomm.runtimes import NcclRuntime

    topo, n = h100(2), float(1 << 30)
    op = Collective(0, "allreduce", tuple(range(16)), n)

    def bandwidth_term(fill):
        monkeypatch.setattr(execution, "nvls_tree_fill_loops", lambda layout, mt: fill)
        prep = prepare_nccl(op, topo, NcclRuntime(nccl_algo="nvls-tree"))
        return prep.closed_form - prep.latency[0], prep.latency[0]

    with_fill, lat1 = bandwidth_term(1.85907)
    without, lat0 = bandwidth_term(0.0)
    assert lat1 == lat0  # NCCL's model latency and the launch are untouched
    # 1 GiB = 64 loops of 16 MiB: the fill adds 1.85907 loops' worth of the same bandwidth
    assert with_fill / without == pytest.approx((64 + 1.85907) / 64, rel=1e-12)
    assert np.isfinite(with_fill)


def test_tree_depth_is_the_deepest_leaf_of_nccls_trees():
    from simcomm.nccl.channels import btree_parents, dtree_parents, tree_depth

    # by hand from ncclGetBtree (src/graph/trees.cc): a rank with lowest set bit b hangs under (r ^ b) | 2b, or
    # r ^ b when that is out of range.  2 nodes: 1 -> 0.  3: 1 -> 2 -> 0.  4: 1 -> 2 -> 0, 3 -> 2.
    # 20: 15 -> 14 -> 12 -> 8 -> 16 -> 0 (8's parent is 16, which is in range), five levels.
    assert [tree_depth(n) for n in (1, 2, 3, 4, 8, 16, 20, 32)] == [0, 1, 2, 2, 3, 4, 5, 5]
    assert btree_parents(20)[15] == 14 and btree_parents(20)[8] == 16 and btree_parents(20)[16] == 0

    def deepest(par):
        out = 0
        for k in range(len(par)):
            x, levels = k, 0
            while par[x] >= 0:
                x, levels = par[x], levels + 1
            out = max(out, levels)
        return out

    # both trees of the double binary tree (mirrored or shifted) are as deep as the first, for every size
    for n in range(2, 70):
        first, second = dtree_parents(n)
        assert deepest(first) == deepest(second) == tree_depth(n)
