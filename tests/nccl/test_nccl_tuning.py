"""NCCL's tuning model against hand-worked values (docs/nccl-source-notes.md §2.8 and §8).

Every number below was computed by hand from NCCL's formulas (the spec's
tables; arithmetic repeated in comments) before the code was run.
"""

from __future__ import annotations

import pytest
from ncclcases import a100, h100

from simcomm.nccl import tuning
from simcomm.nccl.layout import group_layout

MiB = 1 << 20


def layout(topo):
    return group_layout(topo, tuple(range(topo.n_ranks)))


def test_graphs_follow_nccls_search():
    # 1 x 8 H100: NVLink 18 x 20.6 = 370.8; ring 6 x 60 (360) found first, duplicated to 12 x 30;
    # NVLS: 9 x 40 <= 370.8 gives bwIntra 40, bwInter raised to 60 (< 2 x 40).
    g = tuning.graphs(layout(h100(1)))
    assert (g["ring"].n_ch, g["ring"].bw_intra) == (12, 30)
    assert (g["nvls"].n_ch, g["nvls"].bw_intra, g["nvls"].bw_inter) == (8, 40, 60)
    # N x 8 H100 with 8 NDR NICs: GPU->NIC path 48 (PCIe Gen5), 8 channels x 48, no duplication on Hopper
    # (48 < 50 and nCh > 4); the tree cannot be balanced with one GPU per NIC: TREE pattern.
    g = tuning.graphs(layout(h100(2)))
    assert (g["ring"].n_ch, g["ring"].bw_inter) == (8, 48)
    assert g["tree"].pattern == "tree"
    assert (g["nvls"].n_ch, g["nvls"].bw_intra, g["nvls"].bw_inter) == (8, 40, 48)
    # DGX A100: 1 node 6 x 40 -> 12 x 20; multi-node 8 x 24 (PCIe Gen4), tree bwIntra raised to 30 (8 x 30 = 240).
    assert (tuning.graphs(layout(a100(1)))["ring"].n_ch, tuning.graphs(layout(a100(1)))["ring"].bw_intra) == (12, 20)
    g = tuning.graphs(layout(a100(4)))
    assert (g["ring"].n_ch, g["ring"].bw_inter, g["tree"].bw_intra, g["tree"].pattern) == (8, 24, 30, "balanced")


# (size, {(algo, proto): expected us}) from the spec's §8.1 table, 1 x 8 H100
ONE_NODE = [
    (8, {("ring", "ll"): 15.00, ("ring", "ll128"): 40.60, ("ring", "simple"): 56.00, ("tree", "ll"): 15.20,
         ("tree", "ll128"): 31.50, ("tree", "simple"): 64.40, ("nvls", "simple"): 25.00}),
    (MiB, {("ring", "ll"): 28.01, ("ring", "ll128"): 46.14, ("ring", "simple"): 61.10, ("tree", "ll128"): 45.07,
           ("nvls", "simple"): 28.86}),
    (1 << 30, {("ring", "simple"): 5275.58, ("nvls", "simple"): 3972.58, ("tree", "simple"): 6548.35}),
]


@pytest.mark.parametrize("size,cells", ONE_NODE)
def test_one_node_times_match_the_hand_table(size, cells):
    lay = layout(h100(1))
    for (algo, proto), us in cells.items():
        # e.g. Ring/LL at 1 MiB: 15.0 + 1 048 576 / (1000 x 141 x 8/14) = 28.01 us
        assert tuning.model(algo, proto, "allreduce", lay, size).seconds(size) * 1e6 == pytest.approx(us, abs=0.01)


TWO_NODES = [
    (8, "tree", "ll", 25.20), (65536, "tree", "ll", 31.79), (MiB, "tree", "ll128", 62.51),
    (16 * MiB, "nvls-tree", "simple", 134.95), (1 << 30, "nvls-tree", "simple", 4428.29),
    (1 << 30, "ring", "simple", 5427.12), (MiB, "ring", "ll128", 81.90),
]


@pytest.mark.parametrize("size,algo,proto,us", TWO_NODES)
def test_two_node_times_match_the_hand_table(size, algo, proto, us):
    # 2-node Tree/LL128 at 1 MiB: min(0.92 x 384, 8 x 41.4) = 331.2 -> LL128 min(310.5, 293.6) = 293.6
    # x 0.85 (TREE pattern) x 0.5 x 0.6 (correction at 1 MiB) = 74.87 GB/s; 48.5 + 1 048 576 / 74 868 = 62.51
    lay = layout(h100(2))
    assert tuning.model(algo, proto, "allreduce", lay, size).seconds(size) * 1e6 == pytest.approx(us, abs=0.01)


@pytest.mark.parametrize("nodes,size,pick", [
    (1, 8, ("ring", "ll")), (1, 65536, ("ring", "ll")), (1, MiB, ("ring", "ll")), (1, 16 * MiB, ("nvls", "simple")),
    (1, 1 << 30, ("nvls", "simple")),
    (2, 8, ("tree", "ll")), (2, MiB, ("tree", "ll128")), (2, 16 * MiB, ("nvls-tree", "simple")),
    (16, 65536, ("tree", "ll")), (16, MiB, ("tree", "ll128")), (16, 16 * MiB, ("nvls-tree", "simple")),
])
def test_nccls_choice_matches_the_hand_table(nodes, size, pick):
    lay = layout(h100(nodes))
    algos = tuple(a for a in tuning.ALGOS if a in ("tree", "ring") or (a == "nvls" and nodes == 1)
                  or (a == "nvls-tree" and nodes > 1))
    m = tuning.select("allreduce", lay, size, algos)
    assert (m.algo, m.proto) == pick


def test_without_nvls_the_ring_protocols_cross_where_the_model_says():
    # Ring on 1 x 8 H100: LL 15.0 + n/80571.4, LL128 40.6 + n/189257, Simple 56.0 + n/205714 (us, n bytes):
    # LL = LL128 at n = 25.6 / (1/80571.4 - 1/189257) = 25.6 / 7.1276e-6 = 3 591 700 B; LL128 = Simple at 15.4 / (1/189257 -
    # 1/205714) = 36.43 MB.
    lay = layout(h100(1))

    def pick(n):
        m = tuning.select("allreduce", lay, n, ("ring",))
        return m.proto
    assert pick(3_550_000) == "ll" and pick(3_630_000) == "ll128"
    assert pick(36_000_000) == "ll128" and pick(37_000_000) == "simple"


def test_all_gather_never_picks_nvls_on_one_h100_node():
    # NVLS all-gather: 40 x 0.85 x 7/8 x 7/8 = 26.03 per channel, 208.25 GB/s (no busBw conversion) against
    # Ring/Simple 411.43: NVLS loses (NVIDIA/nccl issue 1506).
    lay = layout(h100(1))
    for size in (MiB, 1 << 30):
        assert tuning.select("allgather", lay, size, ("ring", "nvls")).algo == "ring"
    assert tuning.model("nvls", "simple", "allgather", lay, 1 << 30).alg_bw == pytest.approx(208.25, abs=0.01)


def test_amd_hosts_pay_more_network_overhead():
    # AMD: netOverhead 2 us (x3 for Simple): 2-node Ring/LL latency 6.6 + 28 x 2 + 2 x 2.7 = 68.0 us.
    topo = h100(2)
    topo.meta["cpu"] = "amd"
    topo.__dict__.pop("_nccl_info", None)
    m = tuning.model("ring", "ll", "allreduce", layout(topo), 8)
    assert m.latency_us == pytest.approx(68.0)
