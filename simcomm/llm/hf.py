"""A Hugging Face ``config.json`` as a :class:`~simcomm.llm.models.TransformerConfig`.

Every field that changes the weights or the FLOPs is mapped the way the ``transformers`` modeling file of
its ``model_type`` builds the model (``modeling_llama.py``, ``modeling_deepseek_v3.py`` ...); a field that
is absent takes that configuration class's default, and the run says which defaults it used.  A value the
shape cannot honour (another activation, MLP biases on a gated MLP, per-layer sliding windows, MPT without
ALiBi ...) is refused in one line, as are an unknown ``model_type`` (naming the known ones) and a missing
shape field (naming it).  Fields that change neither weights nor FLOPs (rope scaling, dropout, token ids,
eps) are ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from simcomm.errors import ConfigError
from simcomm.llm.models import TransformerConfig

__all__ = ["HFModel", "KNOWN", "read_hf_config", "hf_config"]

#: a config.json larger than this is refused before it is read (real ones are a few kB)
MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class HFModel:
    """A config's shape and what the run should say about how it was read."""

    config: TransformerConfig
    model_type: str
    defaults: tuple[str, ...]  # "key value" of each field the file lacks and the class default filled in
    notes: tuple[str, ...]


class _Fields:
    """The config's fields, with the class defaults it used recorded and missing shape fields refused."""

    def __init__(self, raw: dict, where: str, model_type: str):
        self.raw, self.where, self.model_type = raw, where, model_type
        self.defaults: list[str] = []

    def need(self, key: str) -> int:
        value = self.raw.get(key)
        if value is None:
            raise ConfigError(f"model_config: {self.where} has no {key!r}, which a {self.model_type} model needs")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"model_config: {key} = {value!r} in {self.where} must be a positive integer")
        return value

    def get(self, key: str, default):
        """The field, or the class default (recorded) when absent; ``null`` stays None."""
        if key not in self.raw:
            self.defaults.append(f"{key} {json.dumps(default)}")
            return default
        return self.raw[key]

    def flag(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise ConfigError(f"model_config: {key} = {value!r} in {self.where} must be true or false")
        return value

    def refuse(self, key: str, value, why: str) -> None:
        raise ConfigError(f"model_config: {key} = {json.dumps(value)} in {self.where} is not modelled ({why})")

    def act(self, allowed: tuple[str, ...], default: str, key: str = "hidden_act") -> None:
        value = self.get(key, default)
        if value not in allowed:
            self.refuse(key, value, f"{self.model_type} is modelled with {' or '.join(allowed)}")


def _base(f: _Fields, ffn: int, seq_key: str = "max_position_embeddings", seq_default: int = 2048) -> dict:
    heads = f.need("num_attention_heads")
    if "num_key_value_heads" not in f.raw:
        f.defaults.append(f"num_key_value_heads {heads} (= num_attention_heads)")
    kv = f.raw.get("num_key_value_heads")
    return dict(layers=f.need("num_hidden_layers"), hidden=f.need("hidden_size"), ffn=ffn, heads=heads,
                kv_heads=kv or heads, vocab=f.need("vocab_size"), seq=f.get(seq_key, seq_default),
                tied=f.flag("tie_word_embeddings", False), mlp="swiglu", norm="rmsnorm", bias=False)


def _llama(f: _Fields) -> dict:
    """llama, mistral, mixtral, qwen2(-moe), qwen3(-moe): modeling_{llama,mistral,mixtral,qwen2,...}.py."""
    mt = f.model_type
    f.act(("silu",), "silu")
    if mt == "llama" and f.flag("mlp_bias", False):
        f.refuse("mlp_bias", True, "a gated MLP is modelled without biases")
    moe = mt in ("mixtral", "qwen2_moe", "qwen3_moe")
    d = _base(f, f.need("intermediate_size"), seq_default={"mistral": 4096 * 32, "mixtral": 4096 * 32,
                                                            "llama": 2048}.get(mt, 32768))
    d["bias"] = f.flag("attention_bias", False) if mt in ("llama", "qwen3", "qwen3_moe") else False
    d["qkv_bias"] = mt in ("qwen2", "qwen2_moe")  # Qwen2Attention: q/k/v_proj bias=True, o_proj bias=False
    if mt in ("qwen3", "qwen3_moe"):
        d["qk_norm"] = True  # Qwen3Attention: q_norm and k_norm, RMSNorm(head_dim)
        d["head_dim"] = f.get("head_dim", 128)
    elif f.raw.get("head_dim"):
        d["head_dim"] = f.raw["head_dim"]
    if mt in ("mistral", "mixtral"):
        d["window"] = f.get("sliding_window", None) or 0
    elif mt.startswith("qwen") and f.flag("use_sliding_window", False):
        f.refuse("use_sliding_window", True, "Qwen's sliding window applies to layers from max_window_layers on; "
                 "per-layer windows are not modelled")
    if not moe:
        return d
    if mt == "mixtral":
        d.update(experts=f.need("num_local_experts"), top_k=f.need("num_experts_per_tok"))
        return d
    d.update(experts=f.need("num_experts"), top_k=f.need("num_experts_per_tok"), dense_ffn=d["ffn"],
             ffn=f.need("moe_intermediate_size"))
    step = f.get("decoder_sparse_step", 1)
    only = f.get("mlp_only_layers", [])
    # Qwen2MoeDecoderLayer: sparse when not in mlp_only_layers and (layer_idx + 1) % decoder_sparse_step == 0
    d["dense_layers"] = tuple(i for i in range(d["layers"]) if i in only or (i + 1) % step)
    if mt == "qwen2_moe" and f.get("shared_expert_intermediate_size", 0):
        d.update(shared_experts=1, shared_ffn=f.raw["shared_expert_intermediate_size"], shared_gate=True)
    return d


def _deepseek(f: _Fields) -> dict:
    """deepseek_v2, deepseek_v3: modeling_deepseek_v{2,3}.py (multi-head latent attention, MoE)."""
    f.act(("silu",), "silu")
    if f.flag("attention_bias", False):
        f.refuse("attention_bias", True, "multi-head latent attention is modelled without biases")
    d = _base(f, f.need("intermediate_size"))
    d["kv_heads"] = d["heads"]  # every head gets its keys and values from the latent
    d.update(q_lora_rank=f.get("q_lora_rank", 1536) or 0, kv_lora_rank=f.need("kv_lora_rank"),
             qk_nope_head_dim=f.need("qk_nope_head_dim"), qk_rope_head_dim=f.need("qk_rope_head_dim"),
             v_head_dim=f.need("v_head_dim"))
    experts = f.get("n_routed_experts", None)
    if experts:
        first = f.get("first_k_dense_replace", 0)
        freq = f.get("moe_layer_freq", 1)
        # DeepseekV3DecoderLayer: MoE when layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq == 0
        d.update(experts=experts, top_k=f.need("num_experts_per_tok"), dense_ffn=d["ffn"],
                 ffn=f.need("moe_intermediate_size"), shared_experts=f.get("n_shared_experts", None) or 0,
                 first_dense=first, dense_layers=tuple(i for i in range(first, d["layers"]) if i % freq))
        # noaux_tc routing keeps a learned correction bias per expert (e_score_correction_bias)
        method = f.get("topk_method", "noaux_tc" if f.model_type == "deepseek_v3" else "greedy")
        d["router_bias"] = method == "noaux_tc"
    if f.model_type == "deepseek_v3":
        d["mtp_layers"] = f.get("num_nextn_predict_layers", 1) or 0
    return d


def _gpt2(f: _Fields) -> dict:
    """gpt2: modeling_gpt2.py (Conv1D projections with biases, learned positions, tied head)."""
    f.act(("gelu_new", "gelu", "gelu_fast", "gelu_pytorch_tanh"), "gelu_new", "activation_function")
    if f.flag("add_cross_attention", False):
        f.refuse("add_cross_attention", True, "a decoder-only model has no cross-attention")
    h, positions = f.need("n_embd"), f.get("n_positions", 1024)
    heads = f.need("n_head")
    return dict(layers=f.need("n_layer"), hidden=h, ffn=f.get("n_inner", None) or 4 * h, heads=heads,
                kv_heads=heads, vocab=f.need("vocab_size"), seq=positions, positions=positions,
                tied=f.flag("tie_word_embeddings", True))


def _neox(f: _Fields) -> dict:
    """gpt_neox: modeling_gpt_neox.py (parallel residual with two norms, biases, rotary, untied)."""
    f.act(("gelu", "gelu_new", "gelu_fast"), "gelu")
    d = _base(f, f.need("intermediate_size"))
    return {**d, "kv_heads": d["heads"], "mlp": "gelu", "norm": "layernorm",
            "bias": f.flag("attention_bias", True), "parallel": f.flag("use_parallel_residual", True)}


def _falcon(f: _Fields) -> dict:
    """falcon: modeling_falcon.py (MQA or GQA, parallel attention and MLP, one or two norms)."""
    f.act(("gelu",), "gelu", "activation")
    new = f.flag("new_decoder_architecture", False)
    h, heads = f.need("hidden_size"), f.need("num_attention_heads")
    kv = (f.get("num_kv_heads", None) or heads) if new else (1 if f.flag("multi_query", True) else heads)
    parallel = new or f.flag("parallel_attn", True)
    one_norm = (f.get("num_ln_in_parallel_attn", None) == 1) if new else parallel
    return dict(layers=f.need("num_hidden_layers"), hidden=h, ffn=f.get("ffn_hidden_size", None) or 4 * h,
                heads=heads, kv_heads=kv, vocab=f.need("vocab_size"), seq=f.get("max_position_embeddings", 2048),
                tied=f.flag("tie_word_embeddings", True), bias=f.flag("bias", False), parallel=parallel,
                shared_norm=one_norm)


def _mpt(f: _Fields) -> dict:
    """mpt: modeling_mpt.py (ALiBi, LayerNorms without bias under no_bias, tied head)."""
    attn = f.get("attn_config", {}) or {}
    if attn.get("alibi", True) is not True:
        f.refuse("attn_config.alibi", attn.get("alibi"), "transformers' MPT runs ALiBi only")
    if attn.get("attn_type", "multihead_attention") != "multihead_attention":
        f.refuse("attn_config.attn_type", attn.get("attn_type"), "transformers' MPT is multi-head attention")
    h, heads = f.need("d_model"), f.need("n_heads")
    no_bias = f.flag("no_bias", True)
    return dict(layers=f.need("n_layers"), hidden=h, ffn=f.get("expansion_ratio", 4) * h, heads=heads,
                kv_heads=heads, vocab=f.need("vocab_size"), seq=f.get("max_seq_len", 2048), tied=True,
                bias=not no_bias, norm="layernorm-nobias" if no_bias else "layernorm")


def _nemotron(f: _Fields) -> dict:
    """nemotron: modeling_nemotron.py (squared-ReLU MLP of two matrices, LayerNorm1P with bias, untied)."""
    f.act(("relu2",), "relu2")
    d = _base(f, f.need("intermediate_size"), seq_default=4096)
    if f.raw.get("head_dim"):
        d["head_dim"] = f.raw["head_dim"]
    attn_bias, mlp_bias = f.flag("attention_bias", False), f.flag("mlp_bias", False)
    if attn_bias != mlp_bias:
        f.refuse("mlp_bias", mlp_bias, "biases are modelled on both the attention and the MLP or on neither")
    return {**d, "mlp": "relu2", "norm": "layernorm", "bias": attn_bias}


_FAMILIES = {"llama": _llama, "mistral": _llama, "mixtral": _llama, "qwen2": _llama, "qwen2_moe": _llama,
             "qwen3": _llama, "qwen3_moe": _llama, "deepseek_v2": _deepseek, "deepseek_v3": _deepseek,
             "gpt2": _gpt2, "gpt_neox": _neox, "falcon": _falcon, "mpt": _mpt, "nemotron": _nemotron}
#: the model_type values a config.json may have
KNOWN = tuple(sorted(_FAMILIES))


def hf_config(raw: dict, name: str, where: str = "config.json") -> HFModel:
    """The shape of a parsed ``config.json`` (``where`` names it in errors)."""
    mt = raw.get("model_type")
    if mt not in _FAMILIES:
        raise ConfigError(f"model_config: model_type {mt!r} in {where} is not a known architecture; known: "
                          + ", ".join(KNOWN))
    f = _Fields(raw, where, mt)
    kwargs = _FAMILIES[mt](f)
    notes = []
    if isinstance(raw.get("quantization_config"), dict):
        notes.append(f"model: {name}'s checkpoint is stored quantized "
                     f"({raw['quantization_config'].get('quant_method', '?')}); counted and trained at the run's "
                     "precision")
    try:
        cfg = TransformerConfig(name=name, **kwargs)
    except ConfigError as exc:
        raise ConfigError(f"model_config: {where}: {exc}") from None
    return HFModel(cfg, mt, tuple(f.defaults), tuple(notes))


def read_hf_config(path: str | Path) -> HFModel:
    """The shape of the ``config.json`` at ``path``; named after its folder (``.../Llama-3.1-8B/config.json``)
    or, for any other file name, after the file."""
    p = Path(path)
    try:
        if not p.is_file():
            raise ConfigError(f"model_config: file {str(p)!r} does not exist or is not a regular file")
        if p.stat().st_size > MAX_BYTES:
            raise ConfigError(f"model_config: {str(p)!r} is larger than {MAX_BYTES:,} bytes; not a config.json")
        raw = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise ConfigError(f"model_config: {str(p)!r} is not a readable JSON file ({exc})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"model_config: {str(p)!r} must hold a JSON object (a Hugging Face config.json)")
    name = (p.parent.name if p.stem == "config" and p.parent.name else p.stem) or "model"
    return hf_config(raw, name, str(p))
