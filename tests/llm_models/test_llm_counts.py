"""Parameter counts of the transformer shape against a brute-force sum over every weight's shape.

``weights`` enumerates the tensors the Hugging Face modeling files create (``modeling_llama.py``,
``modeling_qwen3.py``, ``modeling_deepseek_v3.py``, ``modeling_falcon.py``, ``modeling_bloom.py``: names in the
comments), torch-free; hypothesis draws shapes over every feature and the closed forms of
:mod:`simcomm.llm.models` must equal the sum, and the attention's and MLP's GEMM FLOPs ``2 s`` per weight.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.errors import ConfigError
from simcomm.llm.models import TransformerConfig


def _norm(c, width):
    return [(width,), (width,)] if c.norm == "layernorm" else [(width,)]


def _mlp(c, f):
    h = c.hidden
    if c.mlp == "swiglu":  # gate_proj, up_proj, down_proj
        return [(f, h), (f, h), (h, f)]
    return [(f, h), (h, f)] + ([(f,), (h,)] if c.bias else [])  # fc1, fc2 (+ biases)


def _attention(c):
    h, heads = c.hidden, c.heads
    if c.mla:  # q_a_proj, q_a_layernorm, q_b_proj (or q_proj), kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj
        qk = c.qk_nope_head_dim + c.qk_rope_head_dim
        q = ([(c.q_lora_rank, h), (c.q_lora_rank,), (heads * qk, c.q_lora_rank)] if c.q_lora_rank
             else [(heads * qk, h)])
        return q + [(c.kv_lora_rank + c.qk_rope_head_dim, h), (c.kv_lora_rank,),
                    (heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank), (h, heads * c.v_head_dim)]
    d = c.head_dim
    out = [(heads * d, h), (c.kv_heads * d, h), (c.kv_heads * d, h), (h, heads * d)]  # q, k, v, o_proj
    if c.bias or c.qkv_bias:
        out += [(heads * d,), (c.kv_heads * d,), (c.kv_heads * d,)]
    if c.bias:
        out.append((h,))
    return out + ([(d,), (d,)] if c.qk_norm else [])  # q_norm, k_norm


def weights(c):
    """Every weight's shape, block by block."""
    out = [(c.vocab, c.hidden)] + ([(c.positions, c.hidden)] if c.positions else [])
    out += _norm(c, c.hidden) if c.embed_norm else []
    for i in range(c.layers):
        out += _norm(c, c.hidden) + _attention(c)  # input_layernorm
        out += [] if c.shared_norm else _norm(c, c.hidden)  # post_attention_layernorm (or ln_mlp)
        if c.is_moe(i):
            out += [(c.experts, c.hidden)] + ([(c.experts,)] if c.router_bias else [])  # gate (+ correction bias)
            for _ in range(c.experts):
                out += _mlp(c, c.ffn)
            for _ in range(c.shared_experts):
                out += _mlp(c, c.shared_ffn or c.ffn)
            out += [(1, c.hidden)] if c.shared_gate else []  # Qwen2-MoE shared_expert_gate
        else:
            out += _mlp(c, c.dense_ffn or c.ffn)
    out += _norm(c, c.hidden)
    return out + ([] if c.tied else [(c.vocab, c.hidden)])


@st.composite
def shapes(draw):
    heads = draw(st.sampled_from([1, 2, 4, 6]))
    mla = draw(st.booleans())
    kw = dict(layers=draw(st.integers(1, 5)), ffn=draw(st.integers(1, 40)), heads=heads, vocab=draw(st.integers(1, 50)),
              seq=draw(st.integers(1, 64)), tied=draw(st.booleans()), mlp=draw(st.sampled_from(["gelu", "swiglu", "relu2"])),
              norm=draw(st.sampled_from(["layernorm", "rmsnorm", "layernorm-nobias"])), bias=draw(st.booleans()),
              positions=draw(st.integers(0, 8)), embed_norm=draw(st.booleans()), window=draw(st.integers(0, 70)))
    if mla:
        kw.update(hidden=draw(st.integers(1, 24)), kv_heads=heads, q_lora_rank=draw(st.integers(0, 6)),
                  kv_lora_rank=draw(st.integers(1, 6)), qk_nope_head_dim=draw(st.integers(0, 4)),
                  qk_rope_head_dim=draw(st.integers(1, 4)), v_head_dim=draw(st.integers(1, 4)), bias=False)
    else:
        kw.update(kv_heads=draw(st.sampled_from([k for k in (1, 2, 3, 6) if heads % k == 0])),
                  head_dim=draw(st.integers(1, 6)), hidden=draw(st.integers(1, 24)), qkv_bias=draw(st.booleans()),
                  qk_norm=draw(st.booleans()))
    kw["parallel"] = draw(st.booleans())
    kw["shared_norm"] = kw["parallel"] and draw(st.booleans())
    if draw(st.booleans()):
        experts = draw(st.integers(1, 5))
        kw.update(experts=experts, top_k=draw(st.integers(1, experts)), shared_experts=draw(st.integers(0, 2)),
                  shared_ffn=draw(st.integers(0, 9)), first_dense=draw(st.integers(0, kw["layers"])),
                  dense_ffn=draw(st.integers(0, 30)), moe_every=draw(st.integers(1, 3)),
                  dense_layers=tuple(draw(st.sets(st.integers(0, kw["layers"] - 1), max_size=2))),
                  router_bias=draw(st.booleans()), shared_gate=draw(st.booleans()))
    return TransformerConfig("h", **kw)


@settings(max_examples=300, deadline=None)
@given(shapes())
def test_count_is_the_sum_of_every_weight(c):
    assert c.params == sum(math.prod(w) for w in weights(c))
    idle = sum((c.experts - c.top_k) * sum(math.prod(w) for w in _mlp(c, c.ffn)) for i in range(c.layers)
               if c.is_moe(i))
    assert c.active_params == c.params - idle
    blocks = sum(sum(c.rank_block_params(i)) for i in range(c.layers))
    assert blocks + c.embed_params() + c.head_params() == c.params


@settings(max_examples=200, deadline=None)
@given(shapes())
def test_gemm_flops_are_two_per_weight_per_token(c):
    matrices = [w for w in _attention(c) if len(w) == 2]
    assert c.attn_flops() - c.attn_core_flops() == 2 * c.seq * sum(math.prod(w) for w in matrices)
    for i in range(c.layers):
        if not c.is_moe(i):
            assert c.mlp_flops(i) == 2 * c.seq * sum(math.prod(w) for w in _mlp(c, c.dense_ffn or c.ffn) if len(w) == 2)


def test_attention_core_flops_by_hand():
    # 2 heads of 4, seq 8: every pair 2 * 64 * 2 * (4 + 4) = 2048; causal half 1024; a window of 2 keeps the
    # pairs within it: 64/2 - (8 - 2)^2/2 = 14 of 64 -> 2048 * 14 / 64 = 448
    c = TransformerConfig("t", 1, 8, 8, 2, 2, 10, 8, tied=True)
    assert c.attn_core_flops() == 1024
    assert TransformerConfig("t", 1, 8, 8, 2, 2, 10, 8, tied=True, window=2).attn_core_flops() == 448
    assert TransformerConfig("t", 1, 8, 8, 2, 2, 10, 8, tied=True, attention="unfused").attn_core_flops() == 2048
    # latent attention: the core multiplies queries and keys of nope + rope (3 + 1) and values of 2
    m = TransformerConfig("m", 1, 8, 8, 2, 2, 10, 8, tied=True, kv_lora_rank=4, qk_nope_head_dim=3, qk_rope_head_dim=1,
                          v_head_dim=2)
    assert m.attn_core_flops() == 2 * 64 * 2 * (4 + 2) / 2 and m.head_dim == 4


@pytest.mark.parametrize("kw, message", [
    (dict(heads=3), "heads: 3 does not divide hidden 8; give head_dim"),
    (dict(kv_heads=3, heads=4), "kv_heads: 3 does not divide the 4 heads"),
    (dict(experts=4, top_k=5), "top_k: 5 must be between 1 and the 4 experts"),
    (dict(mlp="geglu"), "mlp: 'geglu' is not valid; valid choices: gelu, swiglu, relu2"),
    (dict(shared_norm=True), "shared_norm: one norm for attention and MLP needs parallel = true"),
    (dict(v_head_dim=4), "need kv_lora_rank > 0"),
    (dict(kv_lora_rank=4, qk_rope_head_dim=2, v_head_dim=2, kv_heads=2), "kv_heads: 2 must equal heads 4"),
])
def test_impossible_shapes_are_one_line(kw, message):
    base = dict(layers=2, hidden=8, ffn=8, heads=4, kv_heads=4, vocab=10, seq=4, tied=True)
    with pytest.raises(ConfigError) as err:
        TransformerConfig("t", **{**base, **kw})
    assert message in str(err.value) and "\n" not in str(err.value)
