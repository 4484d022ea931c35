"""``simcomm plan`` searching context parallelism (``cp``) and HSDP (``shard_group``): enumeration, memory,
the estimate's ring and HSDP terms, the CLI's columns, golden and bad input (docs/plan.md)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from plancases import built_ops

from simcomm.llm import estimate
from simcomm.llm import search as plan
from simcomm.llm.compute import kv_block_bytes
from simcomm.llm.layout import Layout
from simcomm.memory import layout as memory_layout
from simcomm.memory.fit import Budget
from simcomm.traces.zoo.transformer import TransformerConfig, transformer_config

TINY = TransformerConfig("tiny", layers=4, hidden=16, ffn=64, heads=4, kv_heads=4, vocab=32, seq=8, tied=True)
ONE = dict(zeros=(0,), schedules=("1f1b", "interleaved"), recomputes=("none",), sequence_parallel=(False,),
           max_microbatch=1)


def _bytes(n):
    """A GPU of ``n`` bytes without the allocator margin (the filter's own arithmetic)."""
    return Budget(n, "test GPU", margin=0, given=True)


# -- enumeration ------------------------------------------------------------------------------------------
def test_cp_enumeration_count_by_hand():
    # 8 GPUs, 4 layers, 4 heads, seq 8, global batch 8, micro-batch 1, ZeRO 0 (tests/test_plan.py: 11 with cp 1).
    # cp 2 (divides seq 8 and the 8 / tp GPUs left for tp 1, 2, 4):
    #   tp 1: 4 left: pp 1 (dp 4), pp 2 (dp 2, m 4: 1f1b + v2), pp 4 (dp 1, one layer per stage: 1f1b)  = 4
    #   tp 2: 2 left: pp 1 (dp 2), pp 2 (dp 1, m 8: 1f1b + v2)                                          = 3
    #   tp 4: 1 left: pp 1 (dp 1)                                                                       = 1
    # cp 4: tp 1: 2 left: pp 1 (dp 2), pp 2 (dp 1: 1f1b + v2) = 3; tp 2: 1 left: pp 1 = 1; tp 4: 2 % 4 != 0
    # cp 3 divides neither the sequence nor the GPUs: nothing.  11 + 8 + 4 = 23
    lays = plan.enumerate_layouts(TINY, 8, 8, 8, plan.Space(cps=(1, 2, 3, 4), **ONE))
    assert len(lays) == len(set(lays)) == 23
    by_cp = {c: sorted((x.tp, x.pp, x.dp, x.virtual) for x in lays if x.cp == c) for c in (1, 2, 3, 4)}
    assert len(by_cp[1]) == 11 and by_cp[3] == []
    assert by_cp[2] == [(1, 1, 4, 1), (1, 2, 2, 1), (1, 2, 2, 2), (1, 4, 1, 1), (2, 1, 2, 1), (2, 2, 1, 1),
                        (2, 2, 1, 2), (4, 1, 1, 1)]
    assert by_cp[4] == [(1, 1, 2, 1), (1, 2, 1, 1), (1, 2, 1, 2), (2, 1, 1, 1)]
    for x in lays:
        assert x.tp * x.cp * x.pp * x.dp == x.gpus == 8 and x.replicas == x.dp * x.cp
    # the global batch divides over the data replicas only: batch 2 refuses dp 4 and 8 but keeps cp 2 dp 2
    two = plan.enumerate_layouts(TINY, 8, 2, 8, plan.Space(cps=(1, 2), **ONE))
    assert {(x.tp, x.cp, x.pp, x.dp) for x in two if x.pp == 1} == {(4, 1, 1, 2), (2, 2, 1, 2), (4, 2, 1, 1)}
    assert plan.batch_skipped(TINY, 8, 2, 8, plan.Space(cps=(1, 2), **ONE)) == [
        (1, 1, 8), (1, 2, 4), (1, 1, 4, 2), (2, 1, 4)]  # (tp, pp, dp[, cp]) in tp, cp, pp order


def test_zero_needs_replicas_counting_the_cp_ranks():
    # dp 1 with cp 2: two ranks hold the same parameters, so ZeRO shards over them (Megatron-core's DP×CP group)
    lays = plan.enumerate_layouts(TINY, 8, 8, 8, plan.Space(cps=(2,), **{**ONE, "zeros": (0, 1)}))
    assert Layout(4, 1, 1, "1f1b", 1, 1, 1, False, "none", 2) in lays
    assert all(x.replicas > 1 for x in lays if x.zero)


def test_auto_cp_only_for_long_sequences():
    assert plan.auto_cps(TINY, 8) == (1,)
    long = TransformerConfig("long", layers=2, hidden=16, ffn=64, heads=4, kv_heads=4, vocab=32, seq=8192, tied=True)
    assert plan.auto_cps(long, 8) == (1, 2, 4, 8)
    assert plan.auto_cps(long, 4) == (1, 2, 4)
    odd = TransformerConfig("odd", layers=2, hidden=16, ffn=64, heads=4, kv_heads=4, vocab=32, seq=8196, tied=True)
    assert plan.auto_cps(odd, 16) == (1, 2, 4)  # 8196 = 4 · 2049: 8 and 16 do not divide it
    assert plan.valid_cps(TINY, 12) == [1, 2, 4]  # gcd(12, 8) = 4
    # Space(cps=None) is auto
    assert {x.cp for x in plan.enumerate_layouts(long, 8, 8, 8, plan.Space(cps=None, **ONE))} == {1, 2, 4, 8}


def test_node_shard_group_by_hand():
    # 16 GPUs, 4 per node; placement t + tp·(c + cp·(p + pp·e)), replica d = c + cp·e
    assert plan.node_shard_group(1, 1, 1, 16, 4) == 4  # replicas 0..15 on ranks 0..15: 4 per node
    assert plan.node_shard_group(2, 1, 1, 8, 4) == 2  # replica d on ranks 2d, 2d+1: 2 per node
    assert plan.node_shard_group(4, 1, 1, 4, 4) is None  # one replica per node: no group of 2 fits
    assert plan.node_shard_group(1, 1, 2, 8, 4) == 2  # stage p, replica d on rank p + 2d
    assert plan.node_shard_group(1, 1, 4, 4, 4) is None  # rank p + 4d: every replica of a lane in another node
    assert plan.node_shard_group(1, 2, 1, 8, 4) == 4  # 16 replicas (dp 8 × cp 2) on ranks 0..15
    assert plan.node_shard_group(1, 1, 1, 8, 8) is None  # the whole lane is in one node: plain ZeRO-3 already


def test_hsdp_enumeration_plain_and_in_node_groups():
    space = plan.Space(zeros=(0, 3), schedules=("1f1b",), recomputes=("none",), sequence_parallel=(False,),
                       max_microbatch=1, shard_groups=(plan.NODE,))
    lays = plan.enumerate_layouts(TINY, 16, 16, 4, space)
    hsdp = {(x.tp, x.pp, x.dp, x.shard_group) for x in lays if x.shard_group}
    # tp 1 pp 1 dp 16: 4; tp 2 pp 1 dp 8: 2; tp 1 pp 2 dp 8: 2; tp 4 pp 1 dp 4, tp 1 pp 4 dp 4, ...: none
    assert hsdp == {(1, 1, 16, 4), (2, 1, 8, 2), (1, 2, 8, 2)}
    assert all(x.zero == 3 for x in lays if x.shard_group)
    plain3 = [x for x in lays if x.zero == 3 and x.shard_group is None]
    assert len(plain3) == len([x for x in lays if x.zero == 0 and x.replicas > 1])  # every ZeRO-3 layout plain too
    # explicit sizes: only where smaller than and dividing dp·cp (16 == dp is plain ZeRO-3)
    exp = plan.enumerate_layouts(TINY, 16, 16, 4, plan.Space(**{**space.__dict__, "shard_groups": (2, 8, 16)}))
    got = {(x.tp, x.pp, x.dp, x.shard_group) for x in exp if x.shard_group}
    # dp 16: 2 and 8; dp 8: 2; dp 4: 2; dp 2: none (2 is the whole group); dp 1: no ZeRO-3
    assert got == {(1, 1, 16, 2), (1, 1, 16, 8), (1, 2, 8, 2), (2, 1, 8, 2), (1, 4, 4, 2), (2, 2, 4, 2),
                   (4, 1, 4, 2)}


def test_every_cp_and_hsdp_layout_is_accepted_by_the_strategy_and_memory_model():
    from simcomm.strategies.megatron import MegatronParams

    space = plan.Space(cps=(1, 2, 4), shard_groups=(plan.NODE, 2))
    lays = plan.enumerate_layouts(TINY, 16, 16, 4, space)
    assert any(x.cp > 1 for x in lays) and any(x.shard_group for x in lays)
    for x in lays:
        MegatronParams(**x.options(16))
        plan.layout_memory(TINY, x, 16)


@settings(max_examples=30, deadline=None)
@given(gpus=st.integers(1, 16), per_node=st.sampled_from([2, 4, 8]), batch=st.integers(1, 16),
       cps=st.sets(st.integers(1, 8), min_size=1, max_size=3), sizes=st.sets(st.integers(1, 8), max_size=2))
def test_cp_and_hsdp_enumeration_match_a_brute_force(gpus, per_node, batch, cps, sizes):
    space = plan.Space(zeros=(0, 3), schedules=("1f1b",), recomputes=("none",), sequence_parallel=(False,),
                       max_microbatch=2, cps=tuple(sorted(cps)), shard_groups=tuple(sorted(sizes)))
    got = plan.enumerate_layouts(TINY, gpus, batch, per_node, space)
    want = set()
    for tp in range(1, gpus + 1):
        for cp in cps:
            for pp in range(1, gpus + 1):
                for dp in range(1, gpus + 1):
                    if (tp * cp * pp * dp != gpus or tp > per_node or 4 % tp or 8 % cp or 4 % pp or batch % dp):
                        continue
                    for mb in (1, 2):
                        if (batch // dp) % mb:
                            continue
                        want.add(Layout(tp, pp, dp, "1f1b", 1, 0, mb, False, "none", cp))
                        if dp * cp > 1:
                            want.add(Layout(tp, pp, dp, "1f1b", 1, 3, mb, False, "none", cp))
                            for g in sizes:
                                if g < dp * cp and (dp * cp) % g == 0:
                                    want.add(Layout(tp, pp, dp, "1f1b", 1, 3, mb, False, "none", cp, g))
    assert len(got) == len(set(got)) and set(got) == want


def test_layout_order_keeps_the_old_order_and_puts_plain_before_hsdp():
    a = Layout(1, 1, 8, "1f1b", 1, 3, 1, False, "none")
    b = Layout(1, 1, 8, "1f1b", 1, 3, 1, False, "none", 1, 2)
    c = Layout(1, 1, 4, "1f1b", 1, 3, 1, False, "none", 2)
    assert sorted([b, a, c]) == [c, a, b]
    assert a.options(8) == {"tp": 1, "pp": 1, "dp": 8, "schedule": "1f1b", "virtual": 1, "zero": 3, "microbatch": 1,
                            "sequence_parallel": False, "recompute": "none", "cp": 1, "global_batch": 8}
    assert b.options(8)["shard_group"] == 2


# -- memory -----------------------------------------------------------------------------------------------
LONG = TransformerConfig("long", layers=2, hidden=16, ffn=64, heads=4, kv_heads=4, vocab=32, seq=1024, tied=True)


def test_memory_of_cp_and_hsdp_by_hand():
    # FlashAttention (t = 1, no SP, no recomputation): s·b·(34h + 4a) = 1024·(34·16 + 16) = 573 440 bytes per
    # layer (no s×s scores; Korthikanti's unfused 5as/h would add 1024·16·1280); 2 layers, one micro-batch in
    # flight; cp 2 halves it
    one = plan.layout_memory(LONG, Layout(1, 1, 2, "1f1b", 1, 0, 1, False, "none"), 2)
    two = plan.layout_memory(LONG, Layout(1, 1, 1, "1f1b", 1, 0, 1, False, "none", 2), 2)
    assert one.activations == 2 * 573_440 and two.activations == 573_440
    assert one.parameters == two.parameters  # CP does not split parameters
    # HSDP over G = 2 of the 4 replicas: every state ceil(n / 2) elements (2 + 2 + 12 bytes each)
    n = sum(memory_layout.stage_params(LONG, 1, 1, 0))
    hs = plan.layout_memory(LONG, Layout(1, 1, 4, "1f1b", 1, 3, 1, False, "none", 1, 2), 4)
    full = plan.layout_memory(LONG, Layout(1, 1, 4, "1f1b", 1, 3, 1, False, "none"), 4)
    assert (hs.parameters, hs.gradients, hs.optimizer_state) == (2 * math.ceil(n / 2), 2 * math.ceil(n / 2),
                                                                 12 * math.ceil(n / 2))
    assert full.parameters == 2 * math.ceil(n / 4)


def test_memory_filter_keeps_cp_layouts_that_cp_1_layouts_cannot_match():
    space = plan.Space(zeros=(0,), schedules=("1f1b",), recomputes=("none",), sequence_parallel=(False,),
                       max_microbatch=1, cps=(1, 2, 4))
    lays = plan.enumerate_layouts(LONG, 4, 4, 4, space)
    need1 = min(plan.layout_memory(LONG, x, 4).total for x in lays if x.cp == 1)
    fits, smallest = plan.fit_layouts(LONG, lays, 4, _bytes(need1 - 1))
    assert fits and all(x.cp > 1 for x, _ in fits)
    assert smallest[0].cp == 4 and smallest[1].total == min(m.total for _, m in fits)


# -- the estimate's ring and HSDP terms ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def pricer2():
    """gpt2-small on 2 dgx-a100-hdr nodes (16 A100s), global batch 16."""
    from simcomm.cli.plan_cmd import _context
    from simcomm.workload import build_workload

    base = {"cluster": "dgx-a100-hdr", "model": "gpt2-small", "precision": "bf16"}
    _, ctx = _context(base, 2)
    _, topo = ctx.cluster(2, 0)
    return estimate.Pricer(build_workload(ctx.trace(), 16), topo, ctx.runtime(), 16)


def _attn(pr):
    return [j for j, x in enumerate(pr.trace.layers) if x.name.endswith(".attn")]


def _ring_by_hand(pr, lay, pairs, kv):
    t = pr.price("transfer", pairs, kv)
    costs = pr.costs(lay)  # the emitter's per-rank layer costs (already / (tp · cp))
    n, per_layer = lay.cp, []
    for j in _attn(pr):
        piece_f = costs[j].forward_s / n
        piece_b = costs[j].backward_s / n
        per_layer.append((n - 1) * max(0.0, t - piece_f) + (n - 1) * max(0.0, t - piece_b) + t)
    return t, sum(per_layer)


@pytest.mark.parametrize("tp, cp, mb, pairs", [
    (1, 2, 2, ((0, 1), (1, 0))),
    (2, 2, 2, ((0, 2), (2, 0), (1, 3), (3, 1))),  # CP ranks right outside TP: lane t's ring is t, t + tp
    (1, 8, 1, ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 0))),
])
def test_estimate_ring_term_by_hand(pricer2, tp, cp, mb, pairs):
    lay = Layout(tp, 1, 16 // (tp * cp), "1f1b", 1, 0, mb, False, "none", cp)
    assert pricer2.groups(lay)["ring"] == pairs
    # K/V block: 2 · b · (s / cp) · kv_heads · head_dim / tp · 2 bytes (gpt2-small: s 1024, 12 heads of 64)
    kv = 2 * mb * (1024 // cp) * 12 * 64 / tp * 2
    assert kv == kv_block_bytes(pricer2.meta, mb, tp, cp, 2)
    t, ring = _ring_by_hand(pricer2, lay, pairs, kv)
    m = lay.microbatches(16)
    e = pricer2.estimate(lay)
    assert len(_attn(pricer2)) == 12 and t > 0
    assert e.cp == pytest.approx(m * ring, rel=1e-12)
    assert e.step == pytest.approx(e.compute + e.tp + e.bubble + e.dp + e.update + e.cp)
    # compute is split over tp · cp: each replica has cp times the samples (dp is cp times smaller), each rank
    # 1/cp of their tokens: the same FLOPs per step as the layout without CP, in GEMMs of mb·s/cp rows
    # (simcomm.traces.gemm): as fast where that is the flat layout's 1024 rows, slower where fewer rows
    # leave SMs idle (cp 8: 128-row GEMMs of gpt2-small, whose waves are mostly empty)
    flat = pricer2.estimate(Layout(tp, 1, 16 // tp, "1f1b", 1, 0, 1, False, "none"))
    if mb * 1024 // cp == 1024:
        assert e.compute == pytest.approx(flat.compute, rel=1e-9)
    else:
        assert 1.5 * flat.compute < e.compute < 4 * flat.compute


def test_estimate_ring_exposed_when_a_step_outlasts_a_piece(pricer2):
    # cp 8 with micro-batch 1: a piece of the attention is shorter than a K/V step, so every step shows
    lay = Layout(1, 1, 2, "1f1b", 1, 0, 1, False, "none", 8)
    c = pricer2.costs(lay)
    j = min(_attn(pricer2))
    f, b = c[j].forward_s / 8, c[j].backward_s / 8  # a piece: the rank's layer time (/ tp·cp) / cp
    t = pricer2.price("transfer", pricer2.groups(lay)["ring"], 2 * 1 * 128 * 768 * 2)
    assert t > f
    one = pricer2.ring(lay, [j])
    assert one == pytest.approx(7 * (t - f) + 7 * max(0.0, t - b) + t)
    # full recomputation runs the forward's ring again
    full = Layout(1, 1, 2, "1f1b", 1, 0, 1, False, "full", 8)
    assert pricer2.ring(full, [j]) == pytest.approx(one + 7 * (t - f))
    assert pricer2.ring(Layout(1, 1, 16, "1f1b", 1, 0, 1, False, "none"), [j]) == 0.0


def test_estimate_hsdp_terms_by_hand(pricer2):
    pr = estimate.Pricer(pricer2.workload, pricer2.topo, pricer2.runtime, 16)
    lay = Layout(1, 1, 16, "1f1b", 1, 3, 1, False, "none", 1, 8)
    g = pr.groups(lay)
    assert g["dp"] == (tuple(range(8)), tuple(range(8, 16)))  # shard groups: 8 consecutive replicas
    assert g["hsdp"] == tuple((k, k + 8) for k in range(8))  # replica groups: one rank per shard group
    e = pr.estimate(lay)
    # by hand: per micro-batch, each pass as a timeline on the links the gathers and reduce-scatters share: the
    # first two gathers at the start, gather k + 2 once compute k is done, each compute after its gather, and in
    # backward each layer's reduce-scatter then its all-reduce of 1/G of the gradient across the shard groups
    # after its compute; the last reduce-scatters' tail is exposed once, after the last micro-batch
    tr = pr.trace
    costs = pr.costs(lay)
    idx = pr.stage_layers(lay, 0)
    nb = {j: tr.layers[j].params * 2 for j in idx}

    def ag(x):
        return pr.price("allgather", g["dp"], x)

    def rs(x):
        return pr.price("reduce_scatter", g["dp"], x)

    def ar(x):
        return pr.price("allreduce", g["hsdp"], x / 8)

    def one_pass(order, forward):
        gathered, link = {}, 0.0
        for j in order[:2]:
            link = gathered[j] = link + ag(nb[j])
        t = 0.0
        for k, j in enumerate(order):
            t = max(t, gathered[j]) + (costs[j].forward_s if forward else costs[j].backward_s)
            if k + 2 < len(order):
                link = gathered[order[k + 2]] = max(link, t) + ag(nb[order[k + 2]])
            if not forward:
                link = max(link, t) + rs(nb[j]) + ar(nb[j])
        return t, max(0.0, link - t)

    fwd, _ = one_pass(idx, True)
    bwd, tail = one_pass(idx[::-1], False)
    f = sum(costs[j].forward_s for j in idx)
    b = sum(costs[j].backward_s for j in idx)
    m = lay.microbatches(16)
    assert ar(nb[idx[0]]) > 0 and fwd > f and bwd > b
    assert e.dp == pytest.approx(m * (fwd + bwd - f - b) + tail, rel=1e-12)
    # the optimizer step covers 1/G of the parameters (the strategy's shard), plain ZeRO-3 1/(dp·cp)
    upd = sum(tr.layers[j].update_s for j in idx)
    assert e.update == pytest.approx(upd / 8)
    plain = pr.estimate(Layout(1, 1, 16, "1f1b", 1, 3, 1, False, "none"))
    assert plain.update == pytest.approx(upd / 16)
    assert pr.groups(Layout(1, 1, 16, "1f1b", 1, 3, 1, False, "none"))["hsdp"] == ()


def test_plan_ops_of_cp_and_hsdp_layouts_match_built_plans():
    cfg = transformer_config("gpt2-small")
    for lay in (Layout(2, 2, 1, "1f1b", 1, 0, 1, False, "none", 2),
                Layout(1, 1, 4, "1f1b", 1, 3, 1, False, "full", 2, 2),
                Layout(1, 1, 8, "1f1b", 1, 3, 1, False, "none", 1, 4)):
        n = built_ops(lay)
        assert 0.9 * n <= estimate.plan_ops(cfg, lay, 8, 8) <= 1.1 * n


# -- CLI --------------------------------------------------------------------------------------------------
CPH = ("plan", "--model", "gpt2-small", "--cluster", "dgx-a100-hdr", "--nodes", "2", "--global-batch", "16",
       "--cp", "1,2", "--zero", "0,3", "--recompute", "none", "--schedules", "1f1b", "--max-microbatch", "2",
       "--quiet", "--top", "6", "--simulate", "4")


def test_cli_cp_hsdp_golden(cli, golden):
    rc, out, err = cli(*CPH, "--no-prune")  # every one of the K simulated: cp and HSDP rows in the table
    assert rc == 0, err
    rows = [line.split("│") for line in out.splitlines() if line.startswith("│") and len(line.split("│")) in (17, 19)]
    cps = {r[3].strip() for r in rows}
    hsdp = {r[9].strip() for r in rows}
    assert cps == {"1", "2"} and "8" in hsdp and "-" in hsdp
    assert any("context parallel cp 1,2 (--cp;" in line for line in out.splitlines())
    golden("plan_gpt2_small_cp_hsdp.txt", out)


def test_cli_json_has_cp_and_shard_group(cli):
    rc, out, err = cli(*CPH, "--json", "--top", "1000")
    assert rc == 0, err
    d = json.loads(out)
    assert len(d["rows"]) + len(d["estimates"]) == d["fit"] == d["layouts"]
    for r in d["rows"] + d["estimates"]:
        assert r["tp"] * r["cp"] * r["pp"] * r["dp"] == 16
        assert r["shard_group"] is None or (r["zero"] == 3 and (r["dp"] * r["cp"]) % r["shard_group"] == 0)
        assert r["estimate"]["step_s"] == pytest.approx(sum(r["estimate"][k] for k in (
            "compute_s", "tp_s", "cp_s", "ep_s", "bubble_s", "dp_s", "update_s")))
        assert (r["estimate"]["cp_s"] > 0) == (r["cp"] > 1)
    assert {r["shard_group"] for r in d["rows"] + d["estimates"]} >= {None, 8, 4}
    # --shard-group none and --cp 1: the old search
    rc, out, _ = cli(*CPH, "--json", "--top", "1000", "--cp", "1", "--shard-group", "none")
    d = json.loads(out)
    assert rc == 0 and all(r["cp"] == 1 and r["shard_group"] is None for r in d["rows"] + d["estimates"])


def test_cli_cp_auto_searches_long_sequences(cli):
    # llama3-8b trains on 8192 tokens: --cp auto tries 1, 2, 4, 8 on 8-GPU nodes (one simulated, in analytic)
    rc, out, err = cli("plan", "--model", "llama3-8b", "--nodes", "2", "--global-batch", "16", "--quiet", "--json",
                       "--simulate", "1", "--fidelity", "analytic", "--top", "100000", "--zero", "1", "--recompute", "selective",
                       "--schedules", "1f1b", "--max-microbatch", "1")
    assert rc == 0, err
    d = json.loads(out)
    assert {r["cp"] for r in d["rows"] + d["estimates"]} == {1, 2, 4, 8}
    assert any("--cp auto: seq 8192 >= 8192, powers of two up to the 8 GPUs per node" in a for a in d["assumed"])


@pytest.mark.parametrize("args, needle", [
    (("--cp", "3"), "--cp: 3 does not divide the sequence length 1024 of gpt2-small (each context-parallel rank "
                    "holds seq / cp tokens); valid choices: auto, 1, 2, 4, 8, 16,"),
    (("--cp", "0"), "--cp: '0' is not valid; valid choices: auto or positive integers"),
    (("--cp", "two"), "--cp: 'two' is not valid; valid choices: auto or positive integers"),
    (("--cp", "auto,2"), "--cp: 'auto,2' mixes auto with other values"),
    (("--cp", "16"), "--cp: 16 does not divide the 8 GPUs; valid choices: auto, 1, 2, 4, 8"),
    (("--shard-group", "3"), "--shard-group: 3 divides the data-parallel replicas (dp × cp: 2, 4, 8) of no ZeRO-3 "
                             "layout on 8 GPUs (and is smaller); valid choices: auto, none, 1, 2, 4"),
    (("--shard-group", "2.5"), "--shard-group: '2.5' is not valid; valid choices: auto, none or positive integers"),
    (("--shard-group", "-1"), "--shard-group: '-1' is not valid"),
    (("--shard-group", "none,2"), "--shard-group: 'none,2' mixes auto or none with other values"),
    (("--shard-group", "2", "--zero", "0,1"), "--shard-group: 2 (HSDP) needs ZeRO-3, and --zero 0,1 leaves it out"),
])
def test_cli_bad_cp_and_shard_group_are_one_error_line(cli, args, needle):
    rc, out, err = cli("plan", "--model", "gpt2-small", "--global-batch", "8", "--quiet", *args)
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err


def test_cli_bad_cp_without_quiet_is_still_one_line(cli):
    # the progress bar stays off when stderr is not a terminal: no blank line before the error
    rc, out, err = cli("plan", "--model", "gpt2-small", "--global-batch", "8", "--cp", "16")
    assert rc == 2 and out == ""
    assert err.splitlines() == ["error: --cp: 16 does not divide the 8 GPUs; valid choices: auto, 1, 2, 4, 8"]
