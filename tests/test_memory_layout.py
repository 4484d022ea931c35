"""Large-model GPU memory: ZeRO's published figures, Korthikanti's activation formulas, tiny layouts by hand."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.errors import ConfigError, UnknownNameError
from simcomm.memory.activations import in_flight, layer_bytes
from simcomm.memory.layout import check_fits, estimate, estimate_stages, stage_params
from simcomm.memory.state import zero_state_bytes
from simcomm.traces.zoo.transformer import TRANSFORMERS, TransformerConfig, transformer_config

TINY = TransformerConfig("tiny-gpt", layers=2, hidden=8, ffn=32, heads=2, kv_heads=2, vocab=10, seq=4,
                         tied=True, positions=4)
TINY_MOE = TransformerConfig("tiny-moe", layers=3, hidden=8, ffn=12, heads=4, kv_heads=2, vocab=10, seq=4,
                             tied=False, mlp="swiglu", norm="rmsnorm", bias=False, experts=4, top_k=2,
                             shared_experts=1, first_dense=1, dense_ffn=16)


@pytest.mark.parametrize("zero, published", [(0, 120e9), (1, 31.4e9), (2, 16.6e9), (3, 1.9e9)])
def test_zero_paper_figure_1(zero, published):
    # Rajbhandari et al. 2020 Figure 1: 7.5B parameters, 64 data-parallel ranks, mixed-precision Adam (K = 12):
    # (2 + 2 + K) psi = 120 GB; P_os 31.4 GB; P_os+g 16.6 GB; P_os+g+p 1.9 GB
    exact = {0: 120e9, 1: 31.40625e9, 2: 16.640625e9, 3: 1.875e9}[zero]
    total = sum(zero_state_bytes(7_500_000_000, 64, zero, "bf16", "adam"))
    assert total == exact and abs(total - published) <= 0.05e9


def test_state_bytes_by_dtype_and_optimizer():
    assert zero_state_bytes(10, 1, 0, "fp16", "adam") == (20, 20, 120)  # 2 + 2 + 12 = 16 bytes/param
    assert zero_state_bytes(10, 1, 0, "fp32", "adam") == (40, 40, 80)
    assert zero_state_bytes(10, 1, 0, "bf16", "sgd") == (20, 20, 80)
    assert zero_state_bytes(10, 3, 3, "bf16", "adam") == (8, 8, 48)  # shards of ceil(10 / 3) = 4 elements


GPT_TINY = TransformerConfig("tiny-unfused", layers=1, hidden=8, ffn=32, heads=2, kv_heads=2, vocab=10, seq=4,
                             tied=True, positions=4, attention="unfused")


def _kept(cfg, **kw):
    return layer_bytes(cfg, 0, 4, 2, **kw).kept


def test_korthikanti_table_2_by_hand():
    # unfused attention, GPT shape (MHA, 4h GeLU MLP, dropout): s = 4, b = 2, h = 8 (sbh = 64), a = 2: 5as/h = 5
    assert _kept(GPT_TINY) == 64 * (34 + 5)
    # t = 2: sbh (10 + 24/t + 5as/(ht)) = 64 x 24.5; sequence parallel 64 x (34/2 + 2.5)
    assert _kept(GPT_TINY, tp=2) == 1568
    assert _kept(GPT_TINY, tp=2, sp=True) == 1248
    # selective recomputation drops the attention term; full keeps 2sbh, / t under sequence parallelism
    assert _kept(GPT_TINY, tp=2, recompute="selective") == 64 * 22
    assert _kept(GPT_TINY, tp=2, sp=True, recompute="selective") == 64 * 17
    assert _kept(GPT_TINY, tp=2, recompute="full") == 128
    assert _kept(GPT_TINY, tp=2, sp=True, recompute="full") == 64
    # ... and under recomputation the rest of the layer's set is live once, during its backward
    assert layer_bytes(GPT_TINY, 0, 4, 2, tp=2, sp=True, recompute="full").working == 1248 - 64


def test_flash_attention_stores_no_scores_by_hand():
    # FlashAttention: no s x s scores or attention dropout mask; the fp32 log-sum-exp, 4 bytes per head and token
    flash = replace(GPT_TINY, attention="flash")
    lse = 4 * 2 * 8  # 4 bytes x a = 2 heads x s b = 8 tokens
    assert _kept(flash) == 64 * 34 + lse
    assert _kept(flash, tp=2, sp=True) == (64 * 34 + lse) // 2
    # Megatron-core's selective (core_attn) under flash drops only what the core stores itself: the lse
    assert _kept(flash, recompute="selective") == 64 * 34
    # context parallelism: s / c tokens per rank, every term / c
    assert _kept(flash, cp=2) == (64 * 34 + lse) // 2
    # no dropout (torchtitan's Llama): the two hidden masks (sbh each) go
    assert _kept(flash, dropout=False) == 64 * 32 + lse


def test_gqa_swiglu_moe_by_hand():
    # h 8, 4 heads of 2, 2 kv heads (kv width 4), SwiGLU: tokens s b = 8
    cfg = TransformerConfig("t", layers=2, hidden=8, ffn=12, heads=4, kv_heads=2, vocab=10, seq=4, tied=False,
                            mlp="swiglu", norm="rmsnorm", bias=False, experts=4, top_k=2, shared_experts=1,
                            first_dense=1, dense_ffn=16)
    # attention: norm in 16 + QKV in 16 + Q 16 + K 8 + V 8 + out 16 + mask 8 + lse 16 = 104 per token
    # dense MLP (f 16): norm in 16 + in 16 + fc1 out 2 x 2 x 16 + act out 2 x 16 + mask 8 = 136
    assert layer_bytes(cfg, 0, 4, 2).kept == 8 * (104 + 136)
    # MoE (f 12): norm in 16 + in 16 + mask 8 + router logits 4 x 4 + shared (48 + 24) + 2 routed copies of
    # (in 16 + 48 + 24 + out 16) = 336
    assert layer_bytes(cfg, 1, 4, 2).kept == 8 * (104 + 56 + 72 + 208)
    # torchtitan per-op: block input 16 + every other mm output (wq 8·2, wv 4·2, w1 16·2 of wq wk wv wo w1 w3 w2)
    # + SDPA output 16 + lse 16 = 16 + 16 + 8 + 32 + 16 + 16 + 16 (w2 out, 7th mm)
    assert layer_bytes(cfg, 0, 4, 2, recompute="op").kept == 8 * (16 + 16 + 8 + 32 + 16 + 16 + 16)


def test_latent_attention_by_hand():
    # MLA (DeepSeek): h 16, 2 heads of qk 4 + 2 (rope), v 4, latents q 8, kv 4 + rope 2; SwiGLU f 32; no dropout
    from simcomm.llm.models import TransformerConfig as Shape

    c = Shape("mla", layers=1, hidden=16, ffn=32, heads=2, kv_heads=2, vocab=10, seq=4, tied=False, mlp="swiglu",
              norm="rmsnorm", bias=False, q_lora_rank=8, kv_lora_rank=4, qk_nope_head_dim=4, qk_rope_head_dim=2,
              v_head_dim=4)
    # per token: norms and inputs 4 x 2h = 128, latents 2 x 14 = 28; Q 2 x 12, K 2 x 12 (per head after the
    # up-projection), V 2 x 8, output 2 x 8 = 80; MLP 2 x 2 x 32 + 2 x 32 = 192; lse 4 x 2 = 8: 436
    assert layer_bytes(c, 0, 4, 1, dropout=False).kept == 4 * 436


def test_cpu_offload_by_hand():
    # Megatron-core --cpu-offloading-num-layers 1 on a 2-block stage: block 0's activations live in host memory,
    # one block's worth stays as the copy buffer; 2 stages of 1F1B hold 2 micro-batches on stage 0
    cfg = replace(GPT_TINY, layers=4)
    per_block = layer_bytes(cfg, 0, 4, 2).kept  # 64 x 39
    base = estimate_stages(cfg, pp=2, micro_batch=2, microbatches=4, context_bytes=0)[0]
    off = estimate_stages(cfg, pp=2, micro_batch=2, microbatches=4, context_bytes=0, offload_layers=1)[0]
    assert (base.activations, base.in_flight) == (2 * per_block, 2 * per_block)
    assert (off.activations, off.in_flight, off.buffers - base.buffers) == (per_block, per_block, per_block)
    with pytest.raises(ConfigError, match="^offload_layers: 2 must be fewer than the 2 blocks"):
        estimate(cfg, pp=2, offload_layers=2)


def test_korthikanti_attention_term_of_gpt3_and_mt_nlg():
    # the paper's motivating numbers: 5as/h is 80 for GPT-3 175B and 64 for MT-NLG 530B, larger than the 34 of
    # the rest of the layer (why selective recomputation of the attention core pays)
    for name, term in (("gpt3-175b", 80), ("megatron-530b", 64)):
        c = replace(transformer_config(name), attention="unfused")
        sbh = c.seq * c.hidden
        assert layer_bytes(c, 0, c.seq, 1).kept == sbh * (34 + term)
        assert layer_bytes(c, 0, c.seq, 1, recompute="selective").kept == sbh * 34


def test_first_stage_holds_34sbhL_over_t():
    # Korthikanti et al. section 4.2.3: with 1F1B the first stage holds p micro-batches of L/p layers, so with
    # sequence parallelism and selective recomputation its activations are 34 sbhL / t regardless of p
    c = replace(transformer_config("gpt3-175b"), attention="unfused")
    for pp in (1, 4, 16):
        m = estimate(c, tp=8, pp=pp, dp=1, sequence_parallel=True, recompute="selective")
        assert m.stage == 0 and m.activations + m.in_flight == 34 * c.seq * c.hidden * c.layers // 8


def test_interleaving_costs_korthikanti_factor():
    # interleaved first stage: L (1 + (p - 1)/(p v)) layers' worth (Korthikanti et al. eq. 5)
    c = replace(transformer_config("gpt3-175b"), attention="unfused")
    one = estimate(c, tp=8, pp=16, sequence_parallel=True, recompute="selective")
    inter = estimate(c, tp=8, pp=16, sequence_parallel=True, recompute="selective",
                     schedule="interleaved", virtual_stages=3)
    held = one.activations + one.in_flight
    assert inter.activations + inter.in_flight == held * (1 + Fraction(15, 48)) and inter.stage == 0
    assert c.layers % 48 == 0


def test_in_flight_micro_batches():
    assert [in_flight(4, k, None) for k in range(4)] == [4, 3, 2, 1]
    assert [in_flight(4, k, 2) for k in range(4)] == [2, 2, 2, 1]  # fewer micro-batches than stages
    assert in_flight(4, 0, 8, "gpipe") == 8 and in_flight(1, 0, 8, "gpipe") == 1
    # Megatron's interleaved warm-up 2(p - k - 1) + (v - 1) p, plus the one in steady state, in chunks of 1/v
    assert in_flight(4, 0, None, "interleaved", 2) == Fraction(11, 2)
    assert in_flight(4, 3, None, "interleaved", 2) == Fraction(5, 2)
    assert in_flight(4, 0, 2, "interleaved", 2) == 2  # capped at m v chunks


@settings(max_examples=60, deadline=None)
@given(p=st.integers(2, 64), v=st.integers(2, 8), k=st.integers(0, 63))
def test_interleaved_in_flight_invariants(p, v, k):
    k = k % p
    first = in_flight(p, 0, None, "interleaved", v)
    # the first stage's layers' worth over L is Korthikanti's 1 + (p - 1)/(pv): (p + (p - 1)/v) chunks of L/p
    assert first / p == 1 + Fraction(p - 1, p * v)
    assert first - in_flight(p, 0, None) == Fraction(p - 1, v)  # above 1F1B by (p - 1)/v micro-batches
    # later stages never hold more than earlier ones
    assert in_flight(p, k, None, "interleaved", v) >= in_flight(p, min(k + 1, p - 1), None, "interleaved", v)


def test_tiny_layout_by_hand():
    # TINY: attn 304 = weights 256 + qkv bias 24 (split) + out bias 8 + LayerNorm 16 (replicated):
    # t = 2 -> 140 + 24 = 164; MLP 568 = weights 512 + fc1 bias 32 (split) + fc2 bias 8 + LayerNorm 16 -> 272 + 24
    # = 296.  Stage 0: block 0 + word embedding 80/2 + positions 32 = 532; stage 1: block 1 + final LN 16 +
    # Megatron's copy of the tied embedding 40 = 516.
    assert stage_params(TINY, 2, 2, 0) == (532, 0) and stage_params(TINY, 2, 2, 1) == (516, 0)
    unfused = replace(TINY, attention="unfused")
    s0, s1 = estimate_stages(unfused, tp=2, pp=2, dp=2, zero=1, micro_batch=2, context_bytes=0)
    # bf16 Adam, ZeRO-1 over 2: params 2 x 532, grads 2 x 532, optimizer 12 x 266
    assert (s0.parameters, s0.gradients, s0.optimizer_state) == (1064, 1064, 3192)
    # one layer per stage, sbh (10 + 24/2 + 5as/(ht)) = 64 x 24.5 = 1568; stage 0 holds 2 micro-batches
    assert (s0.activations, s0.in_flight, s1.activations, s1.in_flight) == (1568, 1568, 1568, 0)
    # buffers: stage 0 the embedding dropout mask, sbh = 64 per micro-batch in flight; stage 1 the final norm's
    # and the projection's inputs 4sbh = 256 and the fp32 logits 4 s b V / t = 4 x 8 x 10 / 2 = 160
    assert (s0.buffers, s1.buffers) == (128, 416)
    assert s0.total == 1064 + 1064 + 3192 + 3136 + 128
    assert estimate(unfused, tp=2, pp=2, dp=2, zero=1, micro_batch=2, context_bytes=0) == s0


def test_zero3_and_expert_parallel_by_hand():
    # TINY_MOE, tp 1: routed experts 4 x 288 split over ep 2 -> 576 per MoE block; their optimizer state is
    # sharded over dp / ep = 2 ranks, the dense state over dp = 4
    dense, expert = stage_params(TINY_MOE, 1, 1, 0, e=2)
    assert expert == 2 * 576 and dense + 2 * expert == TINY_MOE.params
    (m,) = estimate_stages(TINY_MOE, dp=4, ep=2, zero=3)
    assert m.parameters == 2 * (-(-dense // 4) + expert // 2) and m.optimizer_state == 12 * (-(-dense // 4) + 576)


@pytest.mark.parametrize("name", sorted(TRANSFORMERS))
def test_unsplit_rank_holds_the_whole_model(name):
    # the stage's blocks are TransformerConfig.rank_block_params: every shape (latent attention, QKV-only
    # biases, q/k norms, head_dim != h/a, shared norms, a norm after the embedding) sums to the whole model
    assert sum(stage_params(transformer_config(name), 1, 1, 0)) == transformer_config(name).params


def test_check_fits_with_the_numbers():
    m = estimate("llama3.1-405b", tp=8, pp=14, dp=8, zero=1, sequence_parallel=True, recompute="full")
    assert check_fits(m, "h100").startswith("memory: peak ")  # fits: nothing raised
    check_fits(m, m.total, margin=0)
    with pytest.raises(ConfigError) as err:
        check_fits(estimate("llama3.1-405b", tp=8, dp=64), "h100")
    msg = str(err.value)
    assert msg.startswith("memory: llama3.1-405b with tp 8, pp 1, dp 64") and "but a H100 has 85.9 GB" in msg
    assert "\n" not in msg and "optimizer 608.8 GB" in msg and "short by" in msg
    with pytest.raises(ConfigError, match="margin 1 B"):
        check_fits(m, m.total, margin=1e-12)  # the margin rounds up to whole bytes
    assert "running anyway" in check_fits(m, m.total, margin=1e-12, policy="warn")
    assert "not checked" in check_fits(m, 1, policy="off")
    assert "the given 96 GB" in check_fits(m, "h100", gpu_memory=96e9)


@pytest.mark.parametrize("kw, needle", [
    ({"tp": 3}, "tp: 3 does not divide the heads"),
    ({"tp": 16}, "tp: 16 does not divide the kv_heads"),
    ({"pp": 7}, "pp: 7 x virtual_stages 1 does not divide the 80 layers"),
    ({"zero": 4}, "zero: 4 is not one of 0, 1, 2, 3"),
    ({"recompute": "some"}, "recompute: 'some' is not valid; valid choices: none, selective, full, op"),
    ({"schedule": "zb"}, "schedule: 'zb' is not one of 1f1b, interleaved, gpipe"),
    ({"virtual_stages": 2, "pp": 4}, "virtual_stages: 2 needs the interleaved schedule"),
    ({"ep": 2}, "ep: 2 must divide the experts"),
    ({"dp": 0}, "dp: must be a positive integer"),
    ({"dtype": "fp8"}, "dtype: 'fp8' is not one of bf16, fp16, fp32"),
    ({"optimizer": "lion"}, "optimizer: 'lion' is not one of adam, sgd, none"),
    ({"pp": 4, "schedule": "gpipe"}, "microbatches: GPipe holds every micro-batch"),
    ({"pp": 4, "schedule": "interleaved", "virtual_stages": 2, "microbatches": 6}, "microbatches: interleaving needs a multiple of pp (4)"),
])
def test_bad_layouts_are_one_line(kw, needle):
    with pytest.raises(ConfigError, match="^" + needle.replace("(", r"\(").replace(")", r"\)")) as err:
        estimate("llama3-70b", **kw)
    assert "\n" not in str(err.value)


def test_unknown_model_lists_transformers():
    with pytest.raises(UnknownNameError, match="transformer model 'resnet50'"):
        estimate("resnet50")


def test_uneven_stages_llama3_405b():
    # Llama 3 405B: 126 layers on 16 stages, the first and the last one layer short (8 x 16 - 2)
    split = (7,) + (8,) * 14 + (7,)
    stages = estimate_stages("llama3.1-405b", tp=8, pp=16, dp=8, zero=1, sequence_parallel=True,
                             recompute="full", stage_layers=split)
    c = transformer_config("llama3.1-405b")
    per_layer = 2 * c.seq * c.hidden // 8  # full recomputation: 2sbh, / t under sequence parallelism
    held = [m.activations + m.in_flight - layer_bytes(c, 0, c.seq, 1, tp=8, sp=True, recompute="full").working
            for m in stages[:3]]
    assert held == [7 * 16 * per_layer, 8 * 15 * per_layer, 8 * 14 * per_layer]
    # stage 1 holds 8 identical blocks; stage 0 seven of them plus the vocabulary-parallel embedding
    block = sum(stage_params(c, 8, 16, 1, stage_layers=split)) // 8
    assert sum(stage_params(c, 8, 16, 1, stage_layers=split)) == 8 * block
    assert sum(stage_params(c, 8, 16, 0, stage_layers=split)) == 7 * block + c.vocab * c.hidden // 8
    with pytest.raises(ConfigError, match="^stage_layers: must be 16 positive layer counts summing to the 126"):
        estimate("llama3.1-405b", tp=8, pp=16, stage_layers=(8,) * 16)


def test_expert_tensor_parallel_by_hand():
    # Megatron-core's MoE parallel folding: the expert layers' tensor-parallel size etp is apart from the attention's
    # tp.  The block of test_gqa_swiglu_moe_by_hand at tp 2 with sequence parallelism (s b = 8 tokens): per token
    # replicated-unless-SP 40 + 56 -> / 2 = 48; split (Q 16 + K 8 + V 8 + out 16, shared 72, routed FFN 2 x 72,
    # lse 16) -> / 2 = 140; routed copies at full width (in 16 + out 16, 2 copies = 64): a rank routes its
    # tokens / tp and the dispatcher all-gathers etp ranks' copies (token_dispatcher.py), so 64 x etp / tp
    cfg = TransformerConfig("t", layers=2, hidden=8, ffn=12, heads=4, kv_heads=2, vocab=10, seq=4, tied=False,
                            mlp="swiglu", norm="rmsnorm", bias=False, experts=4, top_k=2, shared_experts=1,
                            first_dense=1, dense_ffn=16)
    assert layer_bytes(cfg, 1, 4, 2, tp=2, sp=True).kept == 8 * (48 + 140 + 64)  # etp = tp (the default)
    assert layer_bytes(cfg, 1, 4, 2, tp=2, sp=True, etp=2).kept == 8 * (48 + 140 + 64)
    assert layer_bytes(cfg, 1, 4, 2, tp=2, sp=True, etp=1).kept == 8 * (48 + 140 + 32)
    # routed experts (4 x 288) over etp x ep ranks; TINY_MOE has two MoE blocks
    assert stage_params(TINY_MOE, 2, 1, 0, e=2)[1] == 2 * 1152 // 4
    assert stage_params(TINY_MOE, 2, 1, 0, e=2, etp=1)[1] == 2 * 1152 // 2
    # expert state over the expert-data-parallel group: tp dp cp / (etp ep) = 2 x 4 / (1 x 2) = 4 ranks
    dense, expert = stage_params(TINY_MOE, 2, 1, 0, e=2, etp=1)
    (m,) = estimate_stages(TINY_MOE, tp=2, dp=4, ep=2, etp=1, zero=1)
    assert m.optimizer_state == 12 * (-(-dense // 4) + -(-expert // 4))
    (m,) = estimate_stages(TINY_MOE, tp=2, dp=4, ep=2, zero=1)  # etp = tp: dp / ep = 2 ranks
    dense, expert = stage_params(TINY_MOE, 2, 1, 0, e=2)
    assert m.optimizer_state == 12 * (-(-dense // 4) + -(-expert // 2))
    # ep 4 spans the two TP ranks of two replicas when etp = 1 (accepted); with etp = tp it needs 4 replicas
    estimate_stages(TINY_MOE, tp=2, dp=2, ep=4, etp=1)
    with pytest.raises(ConfigError, match=r"etp 2 x ep 4 must divide the tp x dp x cp = 4 ranks"):
        estimate_stages(TINY_MOE, tp=2, dp=2, ep=4)


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.integers(0, 10**11), min_size=6, max_size=6), capacity=st.integers(1, 2 * 10**11),
       margin=st.sampled_from([0.0, 0.05, 0.1]), policy=st.sampled_from(["refuse", "warn", "off"]))
def test_refuses_is_check_raising(parts, capacity, margin, policy):
    """The search's fit test (fit.refuses, no line made) is exactly whether check() raises."""
    from simcomm.memory.fit import Budget, DoesNotFitError, Peak, check, refuses

    peak, budget = Peak("x", *parts), Budget(capacity, "test", margin, policy)
    try:
        check(peak, budget)
        raised = False
    except DoesNotFitError:
        raised = True
    assert refuses(peak, budget) is raised


def test_total_is_the_peaks_total():
    for m in estimate_stages("gpt3-175b", tp=8, pp=8, dp=4, zero=1, micro_batch=1, microbatches=64,
                             sequence_parallel=True, recompute="selective", schedule="interleaved",
                             virtual_stages=3):
        assert m.total == m.peak().total > 0
