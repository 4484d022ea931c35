"""Exact numbers from tiny cases worked out by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import numpy as np
import pytest

from simcomm.collectives import ALGORITHMS, ideal_time
from simcomm.collectives._trees import btree_parents, depths, tree_edges
from simcomm.errors import ConfigError

A = ALGORITHMS.get


def test_collectives_pin_ring_allreduce_p4():
    # p=4, n=4 MB, α=1 µs, β=1 ns/B, γ=0.5 ns/B:
    # latency 2(p-1)α = 6 µs; bandwidth 2(p-1)/p·n·β = 2·3/4·4e6·1e-9 = 6 ms;
    # reduction (p-1)/p·n·γ = 3/4·4e6·0.5e-9 = 1.5 ms.
    c = A("allreduce/ring").cost(4, 4e6, 1e-6, 1e-9, 0.5e-9)
    assert (c.latency, c.bandwidth, c.reduction) == pytest.approx((6e-6, 6e-3, 1.5e-3), rel=1e-12)
    steps = A("allreduce/ring").steps(4, 4e6)
    assert [s.repeat for s in steps] == [3, 3]
    assert steps[0].src.tolist() == [0, 1, 2, 3] and steps[0].dst.tolist() == [1, 2, 3, 0]
    assert steps[0].nbytes.tolist() == [1e6] * 4 and steps[1].reduce.tolist() == [0.0] * 4


def test_collectives_pin_recursive_doubling_p3_fold():
    # p=3: p'=2, rem=1. Fold 0->1 (n, reduced), one exchange 1<->2, unfold 1->0.
    # α=1, β=0.001, γ=0.002, n=1000: latency 3; bandwidth 3·1 = 3; reduction 2·1000·0.002 = 4.
    alg = A("allreduce/recursive-doubling")
    c = alg.cost(3, 1000.0, 1.0, 0.001, 0.002)
    assert (c.latency, c.bandwidth, c.reduction) == pytest.approx((3.0, 3.0, 4.0))
    s = alg.steps(3, 1000.0)
    assert [(x.src.tolist(), x.dst.tolist()) for x in s] == [([0], [1]), ([1, 2], [2, 1]), ([1], [0])]


def test_collectives_pin_rabenseifner_p8():
    # p=8: 2 lg p = 6 α; 2(p-1)/p·n = 2·7/8·800 = 1400 bytes of β; (p-1)/p·n = 700 of γ.
    c = A("allreduce/rabenseifner").cost(8, 800.0, 1.0, 1.0, 1.0)
    assert (c.latency, c.bandwidth, c.reduction) == pytest.approx((6.0, 1400.0, 700.0))
    assert [x.nbytes[0] for x in A("allreduce/rabenseifner").steps(8, 800.0)] == [400, 200, 100, 100, 200, 400]


def test_collectives_pin_rabenseifner_p6_fold():
    # p=6: p'=4, e=1: latency (2·2+2)=6; bandwidth (2·3/4 + 2)·600 = 2100; reduction (3/4+1)·600 = 1050.
    c = A("allreduce/rabenseifner").cost(6, 600.0, 1.0, 1.0, 1.0)
    assert (c.latency, c.bandwidth, c.reduction) == pytest.approx((6.0, 2100.0, 1050.0))


def test_collectives_pin_bruck_allgather_p5():
    # ⌈lg 5⌉ = 3 rounds moving min(2^k, 5-2^k) = 1, 2, 1 blocks of 100 B: 400 B, 3 α.
    alg = A("allgather/bruck")
    assert [x.nbytes[0] for x in alg.steps(5, 500.0)] == [100.0, 200.0, 100.0]
    c = alg.cost(5, 500.0, 1.0, 1.0)
    assert (c.latency, c.bandwidth) == (3.0, 400.0)


def test_collectives_pin_rd_allgather_p6_fold():
    # p=6: p'=4, rem=2. Fold: 1 block (100 B). Doubling m=1: new ranks 0,1 own 2 blocks -> 2 blocks;
    # m=2: window {0,1} holds 4 blocks. Unfold 5 blocks. Total 1+2+4+5 = 12 blocks = 1200 B, 4 α.
    c = A("allgather/recursive-doubling").cost(6, 600.0, 1.0, 1.0)
    assert (c.latency, c.bandwidth) == (4.0, 1200.0)


def test_collectives_pin_recursive_halving_p6():
    # p=6, rem=2, n=600 (block 100): fold 600 + halving m=2: window{0,1} = 4 blocks (400),
    # m=1: new rank 0 alone = 2 blocks (200); unfold 100 (no reduce).
    # bandwidth 600+400+200+100 = 1300; reduction 1200; latency 4.
    c = A("reduce_scatter/recursive-halving").cost(6, 600.0, 1.0, 1.0, 1.0)
    assert (c.latency, c.bandwidth, c.reduction) == (4.0, 1300.0, 1200.0)


def test_collectives_pin_binomial_scatter_and_bcast_p5():
    # scatter rounds m=4,2,1: root sends 1 block to 4, then 2 blocks to 2, then 1 block 0->1, 2->3.
    s = A("scatter/binomial").steps(5, 500.0)
    assert [(x.src.tolist(), x.dst.tolist(), x.nbytes.tolist()) for x in s] == [
        ([0], [4], [100.0]), ([0], [2], [200.0]), ([0, 2], [1, 3], [100.0, 100.0])]
    # van de Geijn: (3 + 4) α and 2·4/5·500 = 800 β
    c = A("broadcast/scatter-allgather").cost(5, 500.0, 1.0, 1.0)
    assert (c.latency, c.bandwidth) == (7.0, 800.0)


def test_collectives_pin_bruck_alltoall_p5():
    # bits set among 0..4: bit0 {1,3}, bit1 {2,3}, bit2 {4}: 2+2+1 = 5 blocks of 100 B.
    c = A("alltoall/bruck").cost(5, 500.0, 1.0, 1.0)
    assert (c.latency, c.bandwidth) == (3.0, 500.0)
    # p = 8: lg p / 2 · n = 1.5 n
    assert A("alltoall/bruck").cost(8, 800.0, 0.0, 1.0).bandwidth == 1200.0


def test_collectives_pin_hierarchical_two_links():
    # p=8, ppn=4 (L=4, N=2), n=8000; intranode α=1, β=0.001; internode α=10, β=0.01; γ=0.
    # intra: 2·3·1 = 6 α_i, 2·3/4·8000·0.001 = 12; inter: 2·1·10 = 20, 2·1/2·2000·0.01 = 20.
    c = A("allreduce/hierarchical").cost(8, 8000.0, 1.0, 0.001, ppn=4, alpha_inter=10.0, beta_inter=0.01)
    assert (c.latency, c.bandwidth) == pytest.approx((26.0, 32.0))
    assert not A("allreduce/hierarchical").supports(8, 3)
    with pytest.raises(ConfigError, match="ppn=3"):
        A("allreduce/hierarchical").steps(8, 1.0, ppn=3)


def test_collectives_pin_nccl_btree_p8():
    # ncclGetBtree for 8 ranks: 0 -> 4 -> {2, 6} -> {1, 3}, {5, 7}
    par = btree_parents(8)
    assert par.tolist() == [-1, 2, 4, 2, 0, 6, 4, 6]
    assert depths(par).tolist() == [0, 3, 2, 3, 1, 3, 2, 3]
    # mirror tree for even p: rank r plays 7-r, so odd leaves of tree 1 are interior in tree 2
    (c1, p1, _), (c2, p2, _) = tree_edges(8, double=True)
    assert set(zip(c2.tolist(), p2.tolist(), strict=False)) == {(7 - c, 7 - p) for c, p in zip(c1.tolist(), p1.tolist(), strict=False)}


def test_collectives_pin_binary_tree_p4():
    # tree 0 <- 2 <- {1, 3}: depth 2. γ: round 1 rank 2 reduces two buffers, round 2 rank 0 one.
    c = A("allreduce/binary-tree").cost(4, 10.0, 1.0, 1.0, 1.0)
    assert (c.latency, c.bandwidth, c.reduction) == (4.0, 40.0, 30.0)
    assert ideal_time(A("allreduce/binary-tree").steps(4, 10.0), 1.0, 1.0, 1.0) == 74.0


def test_collectives_bad_arguments():
    alg = A("allreduce/ring")
    with pytest.raises(ConfigError, match="ranks"):
        alg.cost(0, 1.0, 1.0, 1.0)
    with pytest.raises(ConfigError, match="size"):
        alg.steps(4, -1.0)
    with pytest.raises(ConfigError, match="root"):
        A("broadcast/binomial").steps(4, 1.0, root=4)


def test_collectives_steps_are_numpy():
    s = A("allreduce/rabenseifner").steps(33, 1e6)
    assert all(isinstance(x.src, np.ndarray) and x.src.dtype == np.int64 for x in s)
