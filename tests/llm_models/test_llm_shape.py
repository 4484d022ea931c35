"""The [model] keys -> the shape a run simulates (simcomm.llm.shape), without running anything."""

from __future__ import annotations

import pytest

from simcomm.errors import ConfigError
from simcomm.llm.shape import resolve_shape
from simcomm.llm.zoo import TRANSFORMERS
from simcomm.scenario.resolve import from_flat

DEEPSEEK_V3_KEYS = dict(layers=61, hidden=7168, heads=128, vocab=129280, seq=4096, mlp="swiglu", norm="rmsnorm",
                        tied=False, bias=False, ffn=18432, experts=256, top_k=8, expert_ffn=2048, shared_experts=1,
                        first_dense=3, router_bias=True, q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128,
                        qk_rope_head_dim=64, v_head_dim=128)


def _shape(**flat):
    scn = from_flat({k: str(v) for k, v in flat.items()})  # as flags give them: text, checked by the vocabulary
    return resolve_shape(scn.model, scn.shape)


def test_deepseek_v3_by_its_keys_alone_is_the_zoo_model():
    cfg, notes = _shape(**DEEPSEEK_V3_KEYS)
    zoo = TRANSFORMERS["deepseek-v3"][0]
    assert cfg.params == zoo.params == 671_026_419_200 and cfg.active_params == zoo.active_params
    assert cfg.head_dim == 192 and cfg.mla and notes[-1].startswith("model: custom, 671,026,419,200 parameters")
    assert [cfg.is_moe(i) for i in range(5)] == [False, False, False, True, True]


def test_qwen3_head_dim_by_keys():
    cfg, _ = _shape(model="qwen3-235b-a22b", layers=2)
    assert cfg.head_dim == 128 and cfg.hidden == 4096  # kept: not hidden / heads, and neither changed
    cfg, _ = _shape(layers=2, hidden=100, heads=4, head_dim=32, vocab=10, seq=8)
    assert cfg.head_dim == 32 and cfg.attn_matrices() == 100 * (128 + 256) + 128 * 100


def test_changing_hidden_keeps_head_dim_following_it():
    cfg, notes = _shape(model="llama3-8b", hidden=2048)
    assert cfg.head_dim == 64 and "model: llama3-8b changed by the scenario: hidden 2048 (was 4096)" in notes


def test_moe_keys_on_a_dense_base_and_the_dense_ffn():
    cfg, _ = _shape(model="llama3-8b", layers=4, experts=8, top_k=2, expert_ffn=1024, first_dense=1)
    assert (cfg.ffn, cfg.dense_ffn, cfg.moe_blocks()) == (1024, 14336, 3)
    cfg, _ = _shape(model="deepseek-v3", ffn=9000, layers=4)
    assert (cfg.dense_ffn, cfg.ffn) == (9000, 2048)
    with pytest.raises(ConfigError, match="top_k: 0 must be between 1 and the 8 experts"):
        _shape(model="llama3-8b", experts=8, expert_ffn=1024)


def test_zoo_model_seq_alone():
    cfg, notes = _shape(model="llama2-7b", seq=8192)
    assert cfg.name == "llama2-7b(seq=8192)" and cfg.params == TRANSFORMERS["llama2-7b"][0].params
    assert notes == ["model: llama2-7b changed by the scenario: seq 8192 (was 4096)",
                     "model: llama2-7b(seq=8192), 6,738,415,616 parameters"]
    cfg, _ = _shape(model="gpt3-175b", seq=1024)  # shorter than its learned positions: the table stays
    assert cfg.params == TRANSFORMERS["gpt3-175b"][0].params
    with pytest.raises(ConfigError, match="seq: 8192 is longer than the 2048 learned positions of gpt3-175b"):
        _shape(model="gpt3-175b", seq=8192)
    cfg, _ = _shape(model="gpt3-175b", seq=8192, positions=8192)
    assert cfg.params == TRANSFORMERS["gpt3-175b"][0].params + 6144 * 12288
