"""Context parallelism (``--opt cp=N``, ring attention): bytes, placement, overlap, memory, bad input.

Hand numbers from the tiny model (conftest): K and V of one sample over the whole
sequence are ``2 · s · kv_heads · head_dim · 2 B = 2 · 4 · 8 · 2 = 128`` bytes, so a
CP rank's block is 128 / cp bytes per sample (/ tp with tensor parallelism).
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcomm.errors import ConfigError
from simcomm.llm.placement import Placement
from simcomm.memory import layout as memory_layout
from simcomm.ops import Compute


@pytest.mark.parametrize("cp, mb, m", [(2, 1, 1), (4, 1, 2), (4, 2, 1)])
def test_ring_bytes_per_attention_layer_per_microbatch(lay, cp, mb, m):
    """Forward: (cp-1) K/V blocks per rank; backward: (cp-1) K/V blocks and (cp-1) dK/dV blocks."""
    L = 2
    plan, _ = lay.plan_of(cp, {"cp": cp, "microbatch": mb, "microbatches": m, "global_batch": mb * m},
                          trace=lay.tiny(L))
    block = 128 * mb / cp
    kv, dkv = lay.transfers(plan, "cp-kv step"), lay.transfers(plan, "cp-dkv")
    assert {t.nbytes for t in kv + dkv} == {block}
    phase = Counter((t.src, t.label.split()[2]) for t in kv)  # label: cp-kv stepK PHASE layer task
    per_rank_dkv = Counter(t.src for t in dkv)
    for r in range(cp):
        assert phase[(r, "F")] == (cp - 1) * L * m  # forward: K/V around the ring
        assert phase[(r, "B")] == (cp - 1) * L * m  # backward: K/V again (only the own chunk was kept)
        assert per_rank_dkv[r] == (cp - 1) * L * m  # backward: the dK/dV partial sums back to their owners
    fwd, bwd = kv, dkv
    # a ring: every rank sends only to its successor
    assert {(t.src, t.dst) for t in fwd + bwd} == {(r, (r + 1) % cp) for r in range(cp)}
    # the MLP has no ring; only attention layers do
    assert not [t for t in fwd + bwd if ".mlp" in t.label]


def test_gqa_and_tp_shrink_the_block(lay):
    """K/V heads 2 of 4 halve the block; tp 2 splits the heads again: 128 · (2/4) / cp 2 / tp 2 = 16 bytes."""
    plan, _ = lay.plan_of(4, {"cp": 2, "tp": 2, "global_batch": 1}, trace=lay.tiny(1, kv_heads=2))
    assert {t.nbytes for t in lay.transfers(plan, "cp-")} == {16.0}


def test_cp_ranks_sit_right_outside_tp_and_gradients_reduce_over_dp_times_cp(lay):
    """tp 2, cp 2, dp 2 on 8 GPUs: CP rings (t, t+2); the gradient all-reduce spans the 4 ranks of one TP lane."""
    plan, _ = lay.plan_of(8, {"tp": 2, "cp": 2, "global_batch": 2, "replicas": "all"}, trace=lay.tiny(1))
    rings = {(t.src, t.dst) for t in lay.transfers(plan, "cp-kv")}
    assert rings == {(0, 2), (2, 0), (1, 3), (3, 1), (4, 6), (6, 4), (5, 7), (7, 5)}
    assert {op.ranks for op in lay.colls(plan, "allreduce", "tp-")} == {(0, 1), (2, 3), (4, 5), (6, 7)}
    dp = lay.colls(plan, "allreduce", "dp-")
    assert {op.ranks for op in dp} == {(0, 2, 4, 6), (1, 3, 5, 7)}
    # parameters are not split by CP: each TP rank's full gradient (attn 256 + mlp 512) / tp 2
    assert {op.nbytes for op in dp} == {(256 + 512) / 2}
    assert Placement(2, 1, 4, cp=2).cp_groups(0, 0) == [(0, 2), (4, 6)]
    # Megatron-core's default order: tp-cp-dp-pp
    assert Placement(2, 2, 4, order="tp-dp-pp", cp=2).cp_groups(1, 1) == [(9, 11), (13, 15)]


def test_global_batch_splits_over_data_replicas_not_cp_ranks(lay):
    """4 GPUs, cp 2: 2 data replicas, so a global batch of 2 is one sample each (cp 1 would need 4)."""
    plan, _ = lay.plan_of(4, {"cp": 2, "global_batch": 2}, trace=lay.tiny(1))
    assert plan.meta["microbatch"] == 1 and plan.meta["layout"]["dp"] == 2 and plan.meta["layout"]["cp"] == 2
    with pytest.raises(ConfigError, match="global-batch: 2 .* does not divide over dp 4"):
        lay.plan_of(4, {"global_batch": 2}, trace=lay.tiny(1))


@pytest.mark.parametrize("cp", [1, 2, 4])
def test_compute_splits_cp_ways_and_free_links_cost_nothing(lay, cp):
    """Free links: the step is L (t_f + t_b) / cp (each rank computes on s / cp tokens)."""
    L = 2
    _, tl = lay.run(cp, {"cp": cp, "global_batch": 1}, trace=lay.tiny(L))
    assert tl.makespan == pytest.approx(L * (lay.TF + lay.TB) / cp, rel=1e-9)


def test_each_piece_waits_for_its_block_and_the_ring_forwards_what_arrived(lay):
    plan, _ = lay.plan_of(3, {"global_batch": 3}, trace=lay.tiny(1))  # cp 1: no ring at all
    assert not lay.transfers(plan, "cp-")
    plan, _ = lay.plan_of(4, {"cp": 4, "global_batch": 1}, trace=lay.tiny(1))
    arrive, send = {}, {}  # (rank, step) -> the forward K/V transfer arriving at / leaving the rank
    for op in lay.transfers(plan, "cp-kv"):
        if op.label.split()[2] == "F":
            step = int(op.label.split()[1][len("step"):])
            arrive[(op.dst, step)], send[(op.src, step)] = op, op
    pieces = {(op.rank, int(op.label.split()[-1][len("piece"):])): op for op in plan.ops
              if isinstance(op, Compute) and op.label.startswith("F block0.attn")}
    assert len(pieces) == 4 * 4 and len(arrive) == 4 * 3
    for r in range(4):
        for k in range(1, 4):
            assert arrive[(r, k)].id in pieces[(r, k)].deps  # piece k computes on the block of step k
            assert pieces[(r, k - 1)].id in pieces[(r, k)].deps
        for k in range(2, 4):
            assert arrive[(r, k - 1)].id in send[(r, k)].deps  # a rank forwards the block it received


@pytest.mark.parametrize("ratio", [0.1, 3.0])
def test_ring_overlaps_the_forward_until_a_step_outlasts_a_piece(lay, ratio):
    """cp 2, one forward step of block / β seconds = ratio × a piece: hidden below 1, else the piece waits.

    The attention forward ends at 2 pieces (hidden) or at step + piece (the second piece waits for its block).
    """
    from simcomm.links.base import LinkClass

    cp = 2
    piece = lay.TF / 2 / cp / cp  # attention forward / cp ranks / cp pieces
    block = 128 / cp
    link = LinkClass("slow", block / (ratio * piece), 0.0, "nvlink")
    plan, tl = lay.run(cp, {"cp": cp, "global_batch": 1}, link=link, trace=lay.tiny(1))
    last = [op for op in plan.ops if isinstance(op, Compute) and op.label == "F block0.attn F0 piece1"]
    assert len(last) == 2
    want = 2 * piece if ratio < 1 else ratio * piece + piece
    assert {round(float(tl.end[op.id]) / want, 9) for op in last} == {1.0}


def test_memory_activations_divide_by_cp_and_state_shards_over_dp_times_cp():
    a = memory_layout.estimate("gpt2-small", tp=1, pp=1, dp=2, cp=1, zero=1)
    b = memory_layout.estimate("gpt2-small", tp=1, pp=1, dp=2, cp=2, zero=1)
    c = memory_layout.estimate("gpt2-small", tp=1, pp=1, dp=4, cp=1, zero=1)
    assert b.activations == pytest.approx(a.activations / 2, abs=1)
    assert (b.parameters, b.gradients, b.optimizer_state) == (c.parameters, c.gradients, c.optimizer_state)
    assert "cp 2" in b.layout
    with pytest.raises(ConfigError, match="cp: 3 does not divide the sequence length 1024"):
        memory_layout.estimate("gpt2-small", cp=3)


def test_bad_cp_is_one_line(lay):
    with pytest.raises(ConfigError, match=r"^cp: 3 does not divide the 4 GPUs$"):
        lay.plan_of(4, {"cp": 3, "global_batch": 4})
    with pytest.raises(ConfigError, match=r"^cp: 8 does not divide the sequence length 4 "):
        lay.plan_of(8, {"cp": 8, "global_batch": 1})
    with pytest.raises(ConfigError, match=r"^cp: 0 must be a positive integer$"):
        lay.plan_of(4, {"cp": 0})


def test_cli_bad_cp_exits_2_with_one_line(cli):
    rc, out, err = cli(["run", "--strategy", "megatron", "--model", "gpt2-small", "--cluster", "dgx-a100-hdr",
                        "--nodes", "1", "--opt", "cp=3", "--no-baseline"])
    assert rc == 2 and out == "" and err == "error: cp: 3 does not divide the 8 GPUs\n"


def test_backward_waits_for_the_last_dkv_step_before_the_layer_below(lay):
    """The dK/dV of a rank's own block arrives after the last piece; the next layer's backward waits for it."""
    plan, _ = lay.plan_of(2, {"cp": 2, "global_batch": 1}, trace=lay.tiny(2))
    dkv = {op.dst: op for op in lay.transfers(plan, "cp-dkv") if "block1.attn" in op.label}
    below = {op.rank: op for op in plan.ops if isinstance(op, Compute) and op.label == "B block0.mlp B0"}
    assert set(dkv) == set(below) == {0, 1}
    for r in (0, 1):
        assert dkv[r].id in below[r].deps


@pytest.mark.parametrize("opts", [{"cp": 2, "global_batch": 4},
                                  {"cp": 2, "tp": 2, "global_batch": 4, "microbatches": 2},
                                  {"cp": 2, "pp": 2, "global_batch": 4, "microbatches": 2},
                                  {"cp": 2, "zero": 3, "shard_group": 2, "global_batch": 4}])
def test_folding_replicas_keeps_whole_rings_and_the_same_step(lay, opts):
    """Simulating one data replica (its whole CP ring) gives the step of simulating all, on a slow link."""
    from simcomm.links.base import LinkClass

    slow = LinkClass("slow", 2e5, 1e-6, "nvlink")
    one_plan, one = lay.run(8, {**opts, "replicas": "one"}, link=slow, trace=lay.tiny(2, ends=True))
    all_plan, every = lay.run(8, {**opts, "replicas": "all"}, link=slow, trace=lay.tiny(2, ends=True))
    assert len(one_plan.ops) < len(all_plan.ops)
    assert one.makespan == pytest.approx(every.makespan, rel=1e-12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tp=st.sampled_from([1, 2]), cp=st.sampled_from([1, 2, 4]), dp=st.sampled_from([1, 2]),
       m=st.integers(1, 3), blocks=st.integers(1, 2))
def test_ring_volume_and_free_step_invariants(lay, tp, cp, dp, m, blocks):
    """Every rank sends 3 (cp - 1) K/V-sized blocks per attention layer per micro-batch (forward K/V, backward
    K/V and dK/dV); on free links the step is L · m · (t_f + t_b) / (tp · cp) (the heads split tp ways)."""
    n = tp * cp * dp
    plan, tl = lay.run(n, {"tp": tp, "cp": cp, "microbatch": 1, "microbatches": m, "global_batch": dp * m,
                           "replicas": "all"}, trace=lay.tiny(blocks))
    sent = Counter()
    for t in lay.transfers(plan, "cp-"):
        sent[t.src] += t.nbytes
    block = 128 / cp / tp
    want = 3 * (cp - 1) * blocks * m * block
    assert all(sent[r] == pytest.approx(want, rel=1e-12) for r in range(n))
    assert tl.makespan == pytest.approx(blocks * m * (lay.TF + lay.TB) / (tp * cp), rel=1e-9)
