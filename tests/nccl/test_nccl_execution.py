"""NCCL's execution beyond its tuning model: channels launched for small buffers, slice handshakes."""

from __future__ import annotations

import pytest
from ncclcases import a100, h100

from simcomm.nccl import tuning
from simcomm.nccl.execution import channels_used, execution_efficiency, slice_bytes
from simcomm.nccl.layout import group_layout


def layout(topo):
    return group_layout(topo, tuple(range(topo.n_ranks)))


def test_small_buffers_launch_fewer_channels():
    lay = layout(a100(1))  # 24 run-time channels (12 search channels x 2)
    # Ring/Simple: 544 threads x 64 B = 34 816 B per channel; 256 KiB keeps floor(262144 / 34816) = 7, then
    # the loop stops at the first nc with bytes >= nc x 34816: 7 x 34816 = 243 712 <= 262 144 -> 7 channels.
    assert channels_used("ring", "simple", "allreduce", lay, 262144) == (7, 24)
    # Ring/LL: 512 threads x 8 B x 8 ranks = 32 KiB per channel: 1 MiB keeps all 24 (24 x 32 KiB = 768 KiB).
    assert channels_used("ring", "ll", "allreduce", lay, 1 << 20) == (24, 24)
    assert channels_used("ring", "ll", "allreduce", lay, 8) == (1, 24)


def test_slices_follow_ncclss_chunking():
    lay = layout(a100(1))
    # Ring/Simple all-reduce: 2 MiB chunks of two 1 MiB slices, shrunk to a loop's share: 16 MiB over 24 channels
    # and 8 ranks is 87 381 B per chunk, 43 690.67 B per slice; 8 GiB hits the 2 MiB cap.
    assert slice_bytes("ring", "simple", "allreduce", lay, 16 << 20, 24) == pytest.approx((16 << 20) / 24 / 8 / 2)
    assert slice_bytes("ring", "simple", "allreduce", lay, 8 << 30, 24) == 1 << 20
    assert slice_bytes("ring", "ll", "allreduce", lay, 8 << 30, 24) == 32 * 1024


def test_one_slice_per_step_costs_nothing_beyond_the_model():
    # 16 KiB on 8 A100, Ring/LL: 1 channel x 16 KiB -> slices of 2 KiB, K = 2 x 7/8 x 16 Ki / 2 Ki = 14 = H.
    lay = layout(a100(1))
    mt = tuning.model("ring", "ll", "allreduce", lay, 16384)
    used, full = channels_used("ring", "ll", "allreduce", lay, 16384)
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


def test_nvls_tree_fill_adds_f_loops_of_bytes():
    from simcomm.nccl import execution
    from simcomm.nccl.execution import NVLS_TREE_FILL_LOOPS as F
    from simcomm.nccl.execution import nvls_tree_fill

    lay = layout(h100(2))
    # 8 MiB is exactly one 8 MiB loop: n / (n + F n)
    assert nvls_tree_fill(lay, 8 << 20) == pytest.approx(1 / (1 + F), rel=1e-12)
    # 2 MiB is part of a 4 MiB loop: the fill is what the buffer has, the same 1 / (1 + F)
    assert nvls_tree_fill(lay, 2 << 20) == pytest.approx(1 / (1 + F), rel=1e-12)
    # 1 GiB: 64 loops of 16 MiB; the fill is F loops of 16 MiB on top
    assert nvls_tree_fill(lay, 1 << 30) == pytest.approx(64 / (64 + F), rel=1e-12)
    # NVLS-Tree's execution share is the fill (all 16 channels run at every size here)
    mt = tuning.model("nvls-tree", "simple", "allreduce", lay, 1 << 30)
    assert execution_efficiency(mt, "allreduce", lay, 1 << 30) == pytest.approx(64 / (64 + F), rel=1e-12)
    # single-node NVLS has no network stages: no fill
    one = layout(h100(1))
    mt1 = tuning.model("nvls", "simple", "allreduce", one, 1 << 30)
    assert execution_efficiency(mt1, "allreduce", one, 1 << 30) == 1.0
    assert execution.FILL_CALIBRATION_RUN in execution.HELD_OUT_RUNS


def test_nvls_tree_fill_lengthens_the_bandwidth_term_only(monkeypatch):
    import numpy as np

    from simcomm.engine.schedule import Runtime
    from simcomm.nccl import execution
    from simcomm.nccl.prepare import prepare_nccl
    from simcomm.ops import Collective

    topo, n = h100(2), float(1 << 30)
    op = Collective(0, "allreduce", tuple(range(16)), n)

    def bandwidth_term(fill):
        monkeypatch.setattr(execution, "NVLS_TREE_FILL_LOOPS", fill)
        prep = prepare_nccl(op, topo, Runtime("nccl", nccl_algo="nvls-tree"))
        return prep.closed_form - prep.latency[0], prep.latency[0]

    with_fill, lat1 = bandwidth_term(2.88)
    without, lat0 = bandwidth_term(0.0)
    assert lat1 == lat0  # NCCL's model latency and the launch are untouched
    # 1 GiB = 64 loops of 16 MiB: the fill adds 2.88 loops' worth of the same bandwidth
    assert with_fill / without == pytest.approx((64 + 2.88) / 64, rel=1e-12)
    assert np.isfinite(with_fill)
