"""Ulysses context parallelism (``--opt cp_kind=ulysses``, DeepSpeed-Ulysses; ``a2a``: Megatron-core's).

Hand-computed on a tiny GQA transformer: sequence ``s = 8``, hidden ``h = 16``, 8 query heads and
4 KV heads of dimension 2, bf16 (2 bytes).  With ``tp = 2`` and ``cp = 2`` a rank holds ``s / cp = 4``
tokens of ``8 / 2 = 4`` query heads and ``4 / 2 = 2`` KV heads, so per sample it sends in one
all-to-all ``4 · 4 · 2 · 2 = 64`` bytes of Q (or of the attention output) and ``4 · 2 · 2 · 2 = 32``
bytes of K (or of V).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm import engine
from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.llm.compute import attention_shares
from simcomm.ops import Collective, Compute
from simcomm.runtimes.mpi import MPICH
from simcomm.strategies import STRATEGIES
from simcomm.strategies.base import make_params
from simcomm.strategies.megatron import MegatronParams
from simcomm.topologies.full_mesh import full_mesh
from simcomm.traces.schema import Layer, Trace
from simcomm.workload import build_workload

TF, TB = 1e-3, 2e-3  # forward / backward seconds of one block (attention half, MLP half)
FREE = LinkClass("free", 1e18, 0.0, "nvlink")
CLS = STRATEGIES.get("megatron")


def gqa(blocks=2, *, s=8, h=16, heads=8, kv_heads=4) -> Trace:
    layers = []
    for i in range(blocks):
        layers.append(Layer(f"block{i}.attn", "Attention", 64, 256, TF / 2, TB / 2, 0.0, (s, h), (s, h)))
        layers.append(Layer(f"block{i}.mlp", "MLP", 128, 512, TF / 2, TB / 2, 0.0, (s, h), (s, h)))
    meta = {"transformer": {"layers": blocks, "hidden": h, "ffn": 4 * h, "heads": heads, "kv_heads": kv_heads,
                            "vocab": 100, "seq": s, "experts": 0, "top_k": 1, "shared_experts": 0, "tied": False}}
    return Trace("tiny-gqa", 1, "bf16", "test", "gpu", "synthetic", tuple(layers), iteration_s=1.0, meta=meta)


def plan_of(n, opts, trace=None, link=FREE):
    w = build_workload(trace or gqa(), n, batch=1, bucket_mb=0.0)
    return CLS(make_params(CLS, opts)).plan(w, full_mesh(n, link))


def a2as(plan):
    return [op for op in plan.ops if isinstance(op, Collective) and op.kind == "alltoall"]


FWD = [("q", 64.0), ("k", 32.0), ("v", 32.0), ("o", 64.0)]
BWD = {"ulysses": [("do", 64.0), ("dq", 64.0), ("dk", 32.0), ("dv", 32.0)],
       "a2a": [("o", 64.0), ("do", 64.0), ("dq", 64.0), ("dk", 32.0), ("dv", 32.0)]}


@pytest.mark.parametrize("kind", ["ulysses", "a2a"])
@pytest.mark.parametrize("mb, m", [(1, 2), (2, 1)])
def test_alltoalls_per_attention_layer_per_microbatch_by_hand(kind, mb, m):
    """tp 2 × cp 2 on 4 GPUs, 2 blocks: per CP group, attention layer and micro-batch the forward sends Q, K, V
    and the output (64, 32, 32, 64 bytes per sample), the backward the output gradient (``a2a``: the saved
    output first), dQ, dK, dV; nothing else is an all-to-all and the MLPs send none."""
    L = 2
    plan = plan_of(4, {"tp": 2, "cp": 2, "cp_kind": kind, "microbatch": mb, "microbatches": m,
                       "global_batch": mb * m})
    ops = a2as(plan)
    assert {op.ranks for op in ops} == {(0, 2), (1, 3)}  # CP ranks right outside TP: rank = t + tp·c
    seen: dict = {}
    for op in ops:  # label: cp-alltoall WHAT PHASE LAYER TASK
        _, what, phase, layer, task = op.label.split()
        seen.setdefault((op.ranks, phase, layer, task), []).append((what, op.nbytes / mb))
    assert len(seen) == 2 * 2 * L * m  # groups × (F, B) × attention layers × micro-batches
    for (_, phase, layer, _), got in seen.items():
        assert layer.endswith(".attn")
        assert got == (FWD if phase == "F" else BWD[kind])
    assert len(ops) == 2 * L * m * (4 + len(BWD[kind]))
    assert plan.meta["collectives"]["alltoall"] == len(ops)
    assert not [op for op in plan.ops if op.stream == "cp" and not isinstance(op, Collective)]  # no ring sends


def test_full_recompute_repeats_the_forward_alltoalls():
    plan = plan_of(2, {"cp": 2, "cp_kind": "ulysses", "recompute": "full", "global_batch": 1}, gqa(1))
    phases = [op.label.split()[2] for op in a2as(plan)]
    assert (phases.count("F"), phases.count("R"), phases.count("B")) == (4, 4, 4)


def test_the_core_waits_for_the_qkv_alltoalls_and_the_projection_for_the_output_one():
    plan = plan_of(2, {"cp": 2, "cp_kind": "ulysses", "global_batch": 1}, gqa(1))
    by = {op.label: op for op in a2as(plan)}
    comp = {(op.rank, op.label.split()[-1]): op for op in plan.ops
            if isinstance(op, Compute) and op.label.startswith("F block0.attn")}
    assert set(comp) == {(r, w) for r in (0, 1) for w in ("qkv", "core", "out")}
    q, k, v, o = (by[f"cp-alltoall {w} F block0.attn F0"] for w in "qkvo")
    for r in (0, 1):
        assert comp[(r, "qkv")].id in q.deps
        assert q.id in k.deps and k.id in v.deps  # one after another on the CP communicator
        assert v.id in comp[(r, "core")].deps and comp[(r, "core")].id in o.deps and o.id in comp[(r, "out")].deps


def test_pieces_split_the_layer_time_by_flops():
    """s 8, h 16, 8 heads, 4 KV heads of 2: QKV 2·8·16·(16 + 16) = 8192, output 2·8·16·16 = 4096, causal core
    2·64·16 = 2048 FLOPs: shares 4/7, 1/7, 2/7 of the attention forward (and backward) per rank / (tp·cp)."""
    assert attention_shares(8, 16, gqa().meta["transformer"]) == pytest.approx((4 / 7, 1 / 7, 2 / 7), rel=1e-12)
    plan = plan_of(2, {"cp": 2, "cp_kind": "ulysses", "global_batch": 1}, gqa(1))
    secs = {op.label.split(maxsplit=1)[0] + " " + op.label.split()[-1]: op.seconds for op in plan.ops
            if isinstance(op, Compute) and op.rank == 0 and "attn" in op.label}
    attn_f, attn_b = TF / 2 / 2, TB / 2 / 2
    assert secs == pytest.approx({"F qkv": attn_f * 4 / 7, "F core": attn_f / 7, "F out": attn_f * 2 / 7,
                                  "B qkv": attn_b * 4 / 7, "B core": attn_b / 7, "B out": attn_b * 2 / 7}, rel=1e-12)


def test_free_links_the_step_is_the_compute_split_cp_ways():
    plan = plan_of(2, {"cp": 2, "cp_kind": "ulysses", "global_batch": 1}, gqa(2))
    tl = engine.simulate(plan, full_mesh(2, FREE), runtime=MPICH)
    assert tl.makespan == pytest.approx(2 * (TF + TB) / 2, rel=1e-9)


def test_alltoalls_are_exposed_on_a_slow_link_by_hand():
    """cp 2 on 2 GPUs, each pair its own link of β bytes/s, no latency: an all-to-all of n bytes per rank sends
    n/2 each way, n / (2β) seconds.  Forward of the attention layer: its compute / cp, plus Q, K, V and the
    output all-to-alls (128 + 64 + 64 + 128 bytes per rank with tp 1: 4 tokens of 8 heads / 4 KV heads of 2,
    2 bytes) one after another: 384 / (2β), none hidden (the core needs the whole sequence)."""
    beta = 384 / 2 / 1e-4  # the four all-to-alls take 0.1 ms
    link = LinkClass("slow", beta, 0.0, "nvlink")
    plan = plan_of(2, {"cp": 2, "cp_kind": "ulysses", "global_batch": 1}, gqa(1), link=link)
    assert [op.nbytes for op in a2as(plan)][:4] == [128.0, 64.0, 64.0, 128.0]  # tp 1: 8 heads, 4 KV heads
    tl = engine.simulate(plan, full_mesh(2, link), runtime=MPICH)
    out = [op for op in plan.ops if isinstance(op, Compute) and op.label == "F block0.attn F0 out"]
    want = TF / 2 / 2 + (128 + 64 + 64 + 128) / 2 / beta
    assert {round(float(tl.end[op.id]) / want, 9) for op in out} == {1.0}


def test_assumed_names_the_cp_kind():
    ring = MegatronParams(cp=2).assumed
    uly = MegatronParams(cp=2, cp_kind="ulysses").assumed
    te = MegatronParams(cp=2, cp_kind="a2a").assumed
    assert any("cp_kind ring" in x for x in ring)
    assert any("cp_kind ulysses, DeepSpeed-Ulysses" in x and "backward 4" in x for x in uly)
    assert any("cp_kind a2a, Megatron-core" in x and "backward 5" in x for x in te)
    assert not any("cp_kind" in x for x in MegatronParams(cp_kind="ulysses").assumed)  # cp 1: nothing to say


@pytest.mark.parametrize("opts, trace, text", [
    ({"cp": 4, "cp_kind": "ulysses"}, gqa(1, heads=4, kv_heads=2),
     "cp: 4 does not divide the 4 query heads and 2 KV heads per tensor-parallel rank (tp 1) that cp_kind ulysses "
     "splits over the cp ranks; valid choices: 1, 2"),
    ({"cp": 2, "tp": 2, "cp_kind": "a2a"}, gqa(1, heads=8, kv_heads=2),
     "cp: 2 does not divide the 4 query heads and 1 KV heads per tensor-parallel rank (tp 2) that cp_kind a2a "
     "splits over the cp ranks; valid choices: 1"),
    ({"cp": 2, "cp_kind": "p2p"}, None, "cp_kind: 'p2p' is not valid; valid choices: ring, ulysses, a2a"),
])
def test_bad_input_is_one_line(opts, trace, text):
    n = opts["cp"] * opts.get("tp", 1)
    with pytest.raises(ConfigError) as e:
        plan_of(n, {**opts, "global_batch": 1}, trace)
    assert str(e.value) == text


def test_cli_heads_not_divisible_exits_2_with_one_line(cli):
    rc, out, err = cli(["run", "--strategy", "megatron", "--model", "gpt2-small", "--cluster", "dgx-a100-hdr",
                        "--nodes", "1", "--opt", "cp=8", "--opt", "cp_kind=ulysses", "--no-baseline"])
    assert rc == 2 and out == ""
    assert err == ("error: cp: 8 does not divide the 12 query heads and 12 KV heads per tensor-parallel rank (tp 1) "
                   "that cp_kind ulysses splits over the cp ranks; valid choices: 1, 2, 3, 4, 6, 12\n")


def test_ring_is_the_default_and_unchanged():
    ring = plan_of(2, {"cp": 2, "global_batch": 1}, gqa(1))
    same = plan_of(2, {"cp": 2, "cp_kind": "ring", "global_batch": 1}, gqa(1))
    assert not a2as(ring) and [op.label for op in ring.ops] == [op.label for op in same.ops]


@settings(max_examples=20, deadline=None)
@given(kind=st.sampled_from(["ulysses", "a2a"]), tp=st.sampled_from([1, 2]), cp=st.sampled_from([1, 2, 4]),
       dp=st.sampled_from([1, 2]), m=st.integers(1, 2), blocks=st.integers(1, 2))
def test_alltoall_volume_and_free_step_invariants(kind, tp, cp, dp, m, blocks):
    """8 heads and 8 KV heads of 2, s = 8: every rank of every CP group sends, per attention layer and
    micro-batch, 4 all-to-alls of B = (8 / cp) · (8 / tp) · 2 · 2 bytes forward and 4 (a2a: 5) backward; none
    with cp 1; on free links the step is the compute, m · L · (t_f + t_b) / (tp · cp)."""
    n = tp * cp * dp
    plan = plan_of(n, {"tp": tp, "cp": cp, "cp_kind": kind, "microbatches": m, "global_batch": m * dp,
                       "replicas": "all"}, gqa(blocks, kv_heads=8))
    ops = a2as(plan)
    per_layer = 0 if cp == 1 else 4 + len(BWD[kind])
    assert len(ops) == tp * dp * blocks * m * per_layer
    assert {op.nbytes for op in ops} <= {(8 / cp) * (8 / tp) * 2 * 2}
    assert all(len(op.ranks) == cp for op in ops)
    tl = engine.simulate(plan, full_mesh(n, FREE), runtime=MPICH)
    assert tl.makespan == pytest.approx(m * blocks * (TF + TB) / (tp * cp), rel=1e-9)
