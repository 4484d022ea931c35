"""An MoE layer priced as Megatron-core runs it: each expert-parallel rank reads and runs only its local experts.

A tiny MoE block, by hand: hidden h = 8, routed experts E = 4 of FFN F = 16, top-2, GeLU (two matrices, no
biases), sequence 4, one sequence per micro-batch; a toy device without SMs (each GEMM is ``2 m n k`` FLOPs at
1e12 FLOP/s, or its operands at 1e12 B/s when that is longer), bf16 (2 bytes), no launch time.  Each expert has
2 x 8 x 16 = 256 weights; the leaf has 4 x 256 + the router 8 x 4 + its LayerNorm 2 x 8 = 1 072.
"""

from __future__ import annotations

import pytest

from simcomm.llm.compute import expert_layer_times, moe_priced
from simcomm.llm.models import TransformerConfig
from simcomm.traces.devices import DeviceSpec
from simcomm.traces.gemm import GemmDevice, gemm_seconds
from simcomm.traces.transformer_cost import LeafPricing, Sharding, leaf_seconds
from simcomm.traces.zoo.transformer import layer_specs, transformer_trace

TINY = TransformerConfig("tiny-moe-ep", layers=1, hidden=8, ffn=16, heads=2, kv_heads=2, vocab=10, seq=4, tied=False,
                         mlp="gelu", norm="layernorm", bias=False, experts=4, top_k=2)
PRICING = LeafPricing(peak=1e12, sms=0, compute_eff=1.0, memory_eff=1.0, mem_bw=1e12, launch_s=0.0, act_bytes=2)
PS = 1e-12  # one FLOP, or one byte, takes a picosecond


def _moe(sharding: Sharding | None = None, micro_batch=1):
    sharding = sharding or Sharding()
    leaf = next(s for s in layer_specs(TINY) if s.module_type == "TransformerMoE")
    assert leaf.params == 4 * 256 + 32 + 16
    out = leaf_seconds(leaf.module_type, TINY.meta(), leaf.params, micro_batch, PRICING, sharding,
                       flops=leaf.flops if sharding == Sharding() else None)
    assert out is not None
    return out


def test_grouped_gemm_reads_every_group_once():
    dev = GemmDevice(1e12, 0, 1.0, 1e12, 1.0)
    # 4 experts of 2 rows x 16 x 8: 2 x 4 x 2 x 16 x 8 = 2 048 FLOPs; operands 4 x ((2 x 8 + 8 x 16) + 2 x 16) x 2
    assert gemm_seconds(2, 16, 8, dev, 2, 2, 4) == pytest.approx(2048 * PS, rel=1e-12)
    # 4 experts of 1 row: 512 FLOPs but 4 x (8 + 128 + 16) x 2 = 1 216 bytes: the weights bound it
    assert gemm_seconds(1, 16, 8, dev, 2, 2, 4) == pytest.approx(1216 * PS, rel=1e-12)
    assert gemm_seconds(1, 16, 8, dev, 2, 2, 1) == gemm_seconds(1, 16, 8, dev, 2, 2)


def test_ep1_one_rank_runs_all_four_experts():
    # T = 4 tokens, 8 routed rows: 2 per expert.  Router 4 x 4 x 8: 256 FLOPs (its 160 bytes under them);
    # each grouped GEMM 4 x (2 x 16 x 8): 2 048 FLOPs (1 408 bytes under them).  Memory-bound kernels: all
    # 1 072 weights, and per token 7 h (norm, residual) + 4 h k (permutation) + 4 k F (GeLU in/out, written
    # and read) = 56 + 64 + 128 = 248 elements: 2 x (1 072 + 4 x 248) = 4 128 bytes
    f, b = _moe()
    assert f == pytest.approx((256 + 2 * 2048 + 4128) * PS, rel=1e-12)
    # backward: each GEMM's data and weight gradients at its forward FLOPs (the router's 4 x 8 x 4 and 8 x 4 x 4;
    # FC1's 4 x (2 x 8 x 16) and 4 x (8 x 16 x 2), FC2's likewise, each over its bytes), and the traffic twice
    assert b == pytest.approx((2 * 256 + 4 * 2048 + 2 * 4128) * PS, rel=1e-12)


def test_ep4_each_rank_reads_its_one_expert():
    # ep 4: each rank holds 1 expert and gets the 4 ranks' 2 rows for it: 8 rows, 2 x 8 x 16 x 8 = 2 048 FLOPs per
    # GEMM as before (the same rows are computed, on the rank that holds the expert); it reads 1 072 - 3 x 256 =
    # 304 weights: 768 fewer, 1 536 bytes less once forward, twice backward
    f1, b1 = _moe()
    f4, b4 = _moe(Sharding(ep=4))
    assert f4 == pytest.approx((256 + 2 * 2048 + 2 * (304 + 4 * 248)) * PS, rel=1e-12)
    assert f1 - f4 == pytest.approx(1536 * PS, rel=1e-9) and b1 - b4 == pytest.approx(2 * 1536 * PS, rel=1e-9)


def test_etp_and_load_split_and_stretch_the_local_experts():
    # ep 2 (2 local experts), etp 2: each expert's FFN split in 2 (8 columns); the all-gather over etp makes
    # 2 x 2 x 4 x 2 / 4 = 8 rows per expert (tp 1: the etp ranks' tokens are distinct); the busiest rank 1.5x:
    # 12 rows.  GEMMs 2 x (12 x 8 x 8): 3 072 FLOPs each (bytes 2 x (96 + 64 + 96) x 2 = 1 024 under them);
    # weights 1 072 - 4 x 256 + 2 x 128 = 304; per token 56 + 64 + 4 x 2 x 12 x 8 / 4 = 312
    f, _ = _moe(Sharding(ep=2, etp=2, load=1.5))
    assert f == pytest.approx((256 + 2 * 3072 + 2 * (304 + 4 * 312)) * PS, rel=1e-12)


def test_megatron_moe_layer_is_the_local_leaf():
    """Through the layout code the strategy and the estimate share (simcomm.llm.compute): the trace's time
    scaled by the leaf at the rank's shapes over the trace's own, so an unedited trace gives the leaf itself."""
    dev = DeviceSpec("toy-moe", "gpu", {"bf16": 1e12, "fp32": 1e12}, mem_bw=1e12, compute_eff=1.0, memory_eff=1.0)
    t = transformer_trace(TINY.name, dev, 1, "bf16", "adam", config=TINY)
    assert moe_priced(t)
    layer = next(x for x in t.layers if x.module_type == "TransformerMoE")
    pricing = LeafPricing.from_meta(t.meta)
    assert pricing is not None
    own = leaf_seconds(layer.module_type, t.meta["transformer"], layer.params, 1, pricing)
    assert (layer.forward_s, layer.backward_s) == own
    for sharding in (Sharding(ep=4), Sharding(ep=2, etp=2, load=1.5)):
        want = leaf_seconds(layer.module_type, t.meta["transformer"], layer.params, 1, pricing, sharding)
        got = expert_layer_times(t, layer, 1, sharding)
        assert got == pytest.approx(want, rel=1e-12)
    assert expert_layer_times(t, layer, 1, Sharding(ep=4))[0] < layer.forward_s


def test_strategy_and_estimate_price_the_same_local_experts():
    """Mixtral 8x7B cut to 2 layers on one DGX H100 node, ep 8 (one expert per rank), micro-batch 1: the
    strategy's MoE compute op, the estimate's layer cost and expert_layer_times at ep 8 are one number, below
    the ep 1 layer (which reads all eight experts' weights)."""
    from simcomm.llm import estimate
    from simcomm.llm.layout import Layout
    from simcomm.ops import Compute
    from simcomm.pipeline import Context
    from simcomm.pipeline.run import make_strategy, scenario_options
    from simcomm.scenario import from_flat
    from simcomm.workload import build_workload

    flat = {"strategy": "megatron", "model": "mixtral-8x7b", "layers": 2, "cluster": "dgx-h100-ndr", "nodes": 1,
            "precision": "bf16", "batch": 1, "experts_parallel": 8, "global_batch": 8, "microbatch": 1,
            "memory": "off"}
    scn = from_flat(flat)
    ctx = Context(scn)
    trace = ctx.trace()
    _, topo = ctx.cluster(1, 0)
    w = build_workload(trace, 8, batch=1)
    j, layer = next((i, x) for i, x in enumerate(trace.layers) if x.module_type == "TransformerMoE")
    local = expert_layer_times(trace, layer, 1, Sharding(ep=8))
    assert local is not None and local[0] < layer.forward_s and local[1] < layer.backward_s
    pricer = estimate.Pricer(w, topo, ctx.runtime(), 8)
    cost = pricer.costs(Layout(1, 1, 8, ep=8, zero=0))[j]
    assert (cost.forward_s, cost.backward_s) == local
    plan = next(iter(make_strategy(scn.strategy, scenario_options(scn)).iterations(w, topo)))[1]
    ops = [o.seconds for o in plan.ops if isinstance(o, Compute) and o.label.startswith(f"F {layer.name}")]
    assert ops and set(ops) == {local[0]}
