"""Hugging Face config.json files of published models: exact published counts, the zoo's definitions, runs.

The files under tests/data/hf are the published config.json of each repository (tests/data/hf/README.md).
Sources of the counts: the Hugging Face model API's ``safetensors`` field of the repository (``total``, or
per dtype), which counts the tensors stored in its checkpoint.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from simcomm.llm.hf import KNOWN, read_hf_config
from simcomm.llm.zoo import TRANSFORMERS

HF = Path(__file__).resolve().parents[1] / "data" / "hf"

#: folder -> (parameters, source)
PUBLISHED = {
    "llama3.1-8b": (8_030_261_248, "meta-llama/Llama-3.1-8B safetensors.total"),
    "llama3.1-70b": (70_553_706_496, "meta-llama/Llama-3.1-70B safetensors.total"),
    "llama3.1-405b": (405_853_388_800, "meta-llama/Llama-3.1-405B safetensors.total"),
    "mixtral-8x22b": (140_620_634_112, "mistral-community/Mixtral-8x22B-v0.1 safetensors.total"),
    "qwen2.5-72b": (72_706_203_648, "Qwen/Qwen2.5-72B safetensors.total (model card: 72.7B)"),
    "qwen3-235b-a22b": (235_093_634_560, "Qwen/Qwen3-235B-A22B safetensors.total"),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_counts_exactly(name):
    cfg = read_hf_config(HF / name / "config.json").config
    assert cfg.params == PUBLISHED[name][0]


def _fp8_scales(c) -> int:
    """Block scales (weight_scale_inv, one fp32 per 128 x 128 block) of every matrix DeepSeek-V3 stores in fp8:
    the attention's and every MLP's and expert's matrices; embeddings, routers, eh_proj and norms are bf16."""
    def blocks(rows, cols):
        return math.ceil(rows / 128) * math.ceil(cols / 128)

    h, heads = c.hidden, c.heads
    attn = (blocks(c.q_lora_rank, h) + blocks(heads * c.qk_head_dim, c.q_lora_rank)
            + blocks(c.kv_lora_rank + c.qk_rope_head_dim, h)
            + blocks(heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank) + blocks(h, heads * c.v_head_dim))

    def mlp(f):
        return 2 * blocks(f, h) + blocks(h, f)

    moe = (c.experts + c.shared_experts) * mlp(c.ffn)
    layers = sum(attn + (moe if c.is_moe(i) else mlp(c.dense_ffn)) for i in range(c.layers))
    return layers + c.mtp_layers * (attn + moe)


def test_deepseek_v3_main_model_and_checkpoint():
    """671B is the main model (the technical report's count, and what a training step runs); the Hugging Face
    checkpoint adds the multi-token-prediction module (14B: its block, norms and projection, 11.6B, plus its own
    stored copies of the embedding and output head), and stores its fp8 matrices' block scales as F32 tensors.

    deepseek-ai/DeepSeek-V3 safetensors: total 684,531,386,000 = BF16 3,918,786,560 + F8_E4M3 680,571,043,840 +
    F32 41,555,600; the F32 tensors are the 59 router correction biases (256 each) and the block scales.
    """
    c = read_hf_config(HF / "deepseek-v3" / "config.json").config
    assert c.params == 671_026_419_200 and round(c.params / 1e9) == 671
    checkpoint = c.params + c.mtp_params() + 2 * c.vocab * c.hidden
    assert round((checkpoint - c.params) / 1e9) == 13 and round(checkpoint / 1e9) == 684
    assert checkpoint == 3_918_786_560 + 680_571_043_840 + 59 * 256
    assert checkpoint + _fp8_scales(c) == 684_531_386_000


@pytest.mark.parametrize("name", sorted(PUBLISHED) + ["deepseek-v3"])
def test_the_zoo_is_the_same_shape(name):
    """The zoo entry is the config's shape at the zoo's pre-training sequence length."""
    hf = read_hf_config(HF / name / "config.json").config
    zoo = TRANSFORMERS[name][0]
    assert replace(hf, seq=zoo.seq) == zoo


def test_every_known_architecture_reads_a_minimal_config():
    """One minimal config per model_type: each maps to a shape whose count is the brute-force one of its kind."""
    base = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 96,
            "vocab_size": 100}
    extra = {"mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
             "qwen2_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                           "shared_expert_intermediate_size": 48},
             "qwen3_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "head_dim": 8},
             "deepseek_v2": {"kv_lora_rank": 8, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8,
                             "q_lora_rank": None, "n_routed_experts": 4, "num_experts_per_tok": 2,
                             "moe_intermediate_size": 16, "n_shared_experts": 1, "first_k_dense_replace": 1},
             "deepseek_v3": {"kv_lora_rank": 8, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8,
                             "q_lora_rank": 16, "n_routed_experts": 4, "num_experts_per_tok": 2,
                             "moe_intermediate_size": 16, "n_shared_experts": 1, "first_k_dense_replace": 1},
             "gpt2": {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 32},
             "mpt": {"d_model": 64, "n_layers": 2, "n_heads": 4},
             "nemotron": {"hidden_act": "relu2"}}
    from tests.llm_models.test_llm_counts import weights

    for mt in KNOWN:
        raw = {**base, "model_type": mt, **extra.get(mt, {})}
        from simcomm.llm.hf import hf_config

        cfg = hf_config(raw, mt).config
        assert cfg.params == sum(math.prod(w) for w in weights(cfg)), mt
    # spot checks of the mapping: Qwen2's QKV-only biases, Falcon-7B's multi-query attention and one norm
    assert hf_config({**base, "model_type": "qwen2"}, "q").config.attn_params() == 4 * 64 * 64 + 3 * 64 + 64
    falcon = hf_config({**base, "model_type": "falcon"}, "f").config
    assert (falcon.kv_heads, falcon.parallel, falcon.shared_norm, falcon.bias) == (1, True, True, False)
    # absent fields take the configuration class's defaults, and the run lists them
    neox = hf_config({**base, "model_type": "gpt_neox"}, "n")
    assert neox.defaults == ('hidden_act "gelu"', "num_key_value_heads 4 (= num_attention_heads)",
                             "max_position_embeddings 2048", "tie_word_embeddings false", "attention_bias true",
                             "use_parallel_residual true")
    assert (neox.config.parallel, neox.config.shared_norm, neox.config.bias, neox.config.seq) == (True, False, True, 2048)


def _config(tmp_path, name="llama3.1-8b", **changes):
    raw = json.loads((HF / name / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            raw.pop(key)
        else:
            raw[key] = value
    path = tmp_path / "m" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(raw))
    return str(path)


RUN = ("run", "-s", "megatron", "--cluster", "dgx-h100-ndr", "--precision", "bf16", "--batch", "1", "--no-baseline",
       "--fidelity", "analytic")


@pytest.mark.parametrize("changes, message", [
    (dict(model_type="gemma2"), "model_type 'gemma2' in "),
    (dict(hidden_size=None), "has no 'hidden_size', which a llama model needs"),
    (dict(hidden_act="gelu"), "hidden_act = \"gelu\" in "),
    (dict(mlp_bias=True), "mlp_bias = true in "),
    (dict(num_key_value_heads=5), "kv_heads: 5 does not divide the 32 heads"),
])
def test_bad_configs_are_one_line(cli, tmp_path, changes, message):
    rc, out, err = cli(*RUN, "--nodes", "1", "--model-config", _config(tmp_path, **changes))
    assert rc == 2 and err.startswith("error: model_config: ") and err.count("\n") == 1 and message in err, err
    if "model_type" in changes:
        assert "known: deepseek_v2, deepseek_v3, falcon, gpt2, gpt_neox, llama, mistral, mixtral, mpt, nemotron, " \
               "qwen2, qwen2_moe, qwen3, qwen3_moe" in err


def test_qwen_sliding_window_is_refused_not_ignored(cli, tmp_path):
    path = _config(tmp_path, "qwen2.5-72b", use_sliding_window=True)
    rc, out, err = cli(*RUN, "--nodes", "1", "--model-config", path)
    assert rc == 2 and "use_sliding_window = true" in err and "not modelled" in err and err.count("\n") == 1


def test_heads_not_divisible_by_tp_is_one_line(cli):
    rc, out, err = cli(*RUN, "--nodes", "2", "--model-config", str(HF / "llama3.1-8b" / "config.json"),
                       "--layers", "2", "--seq", "512", "--opt", "tp=16")
    assert rc == 2 and err.count("\n") == 1 and "tp: 16 does not divide the 8 kv heads" in err, err
    rc, out, err = cli(*RUN, "--nodes", "1", "--layers", "2", "--hidden", "96", "--heads", "12", "--vocab", "100",
                       "--seq", "64", "--opt", "tp=8")
    assert rc == 2 and err.count("\n") == 1 and "tp: 8 does not divide the 12 heads" in err, err


def test_missing_or_unreadable_file(cli, tmp_path):
    rc, out, err = cli(*RUN, "--model-config", str(tmp_path / "none.json"))
    assert rc == 2 and "model_config: file" in err and "does not exist" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    rc, out, err = cli(*RUN, "--model-config", str(bad))
    assert rc == 2 and "is not a readable JSON file" in err and err.count("\n") == 1
