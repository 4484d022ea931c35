"""Decoder-only transformers (dense and mixture-of-experts) as analytic zoo models and roofline traces.

A model is a :class:`~simcomm.llm.models.TransformerConfig` (its shape and exact parameter counts live in
:mod:`simcomm.llm.models`, the published models in :mod:`simcomm.llm.zoo`); :func:`build_spec` writes it
against the analytic ops of :mod:`simcomm.traces.zoo.spec`: ``embed``, then per block ``block{i}.attn``
(pre-norm + QKV + attention core + output projection) and ``block{i}.mlp`` (pre-norm + MLP) or
``block{i}.moe`` (pre-norm + router + top-k routed experts + shared experts), then ``head`` (final norm,
output projection and cross-entropy loss).  FLOPs count matrix multiplies only (2 per multiply-add), from
the model's real matrices (multi-head latent attention's down- and up-projections included).  The
attention core is priced as one of :data:`ATTENTIONS`: ``flash`` (the default) counts the causal half of
``2 s^2 heads (d_qk + d_v)``, the convention of FlashAttention's benchmarks, with the scores kept on chip;
``unfused`` (Megatron-LM of 2021-2022) counts all of it and moves the scores through HBM (:data:`SCORE_ELEMS`).

The dense GPT/Llama-shaped models also have a torch module for capture, built leaf for leaf under the same
names by :func:`simcomm.traces.zoo.torchnet.build_transformer`; :func:`transformer_trace` synthesises a trace
with ``meta["transformer"]`` and supports ``fp8`` (GEMMs at the fp8 tensor peak, everything else bf16, as
NVIDIA Transformer Engine runs them).
"""

from __future__ import annotations

from dataclasses import replace

from simcomm.errors import ConfigError
from simcomm.llm.models import ATTENTIONS, META_KEYS, TransformerConfig, check_attention
from simcomm.llm.zoo import TRANSFORMERS
from simcomm.traces.zoo.spec import SpecOps

__all__ = ["TransformerConfig", "TRANSFORMERS", "META_KEYS", "ATTENTIONS", "SCORE_ELEMS", "attention_kind",
           "check_attention", "transformer_config", "transformer_meta", "transformer_trace", "register",
           "build_spec", "layer_specs"]

#: HBM traffic of the unfused attention scores per head per score element, forward, in two-byte elements:
#: QK^T writes them, the fused scale-mask-softmax reads and writes them, dropout reads and writes them (and a
#: one-byte mask, half an element), the attention-over-V GEMM reads them: 1 + 2 + 2.5 + 1
SCORE_ELEMS = 6.5


def attention_kind(meta: dict) -> str:
    """``"unfused"`` for a ``trace.meta["transformer"]`` whose ``attention_core`` is ``"full"``, else ``"flash"``."""
    return "unfused" if (meta or {}).get("attention_core") == "full" else "flash"


def _attn_leaf(cfg: TransformerConfig, ops, name, x):
    s, h = cfg.seq, cfg.hidden
    qk, out = cfg.heads * cfg.qk_head_dim, cfg.heads * cfg.v_dim
    qkv = qk + cfg.kv_heads * (cfg.qk_head_dim + cfg.v_dim)  # q, k and v as the core reads them
    unfused = cfg.attention == "unfused"
    # every activation written once and read once; FlashAttention never materialises the s x s scores
    mem = s * (h + 2 * h + 2 * qkv + 2 * out + h + 3 * h)  # in, norm, qkv, attn out, proj out, residual
    if cfg.mla:  # the query and key-value latents (and the shared rotary key), written and read
        mem += 2 * s * (cfg.q_lora_rank + cfg.kv_lora_rank + cfg.qk_rope_head_dim)
    if unfused:
        mem += SCORE_ELEMS * cfg.heads * s * s  # the scores through HBM, per head (SCORE_ELEMS)
    # Korthikanti et al. 2022: attention keeps 11sbh + 5as^2b bytes, its LayerNorm 2sbh (fp16); as 2-byte
    # elements besides the output, with the two dropout masks (sbh + as^2 bytes) as one-byte masks
    saved = 5 * s * h + 2 * cfg.heads * s * s
    return ops._leaf(name, "TransformerAttention", cfg.attn_params(), x, (s, h), cfg.attn_flops(), mem=mem,
                     saved=saved, masks=s * h + cfg.heads * s * s)


def _mlp_leaf(cfg: TransformerConfig, ops, name, x, i):
    s, h = cfg.seq, cfg.hidden
    moe = cfg.is_moe(i)
    if moe:
        inner = cfg.top_k * cfg.ffn + cfg.shared_experts * (cfg.shared_ffn or cfg.ffn)
        kind = "TransformerMoE"
    else:
        inner, kind = cfg.dense_ffn or cfg.ffn, "TransformerMLP"
    # in, norm out (w+r), up/gate out (w+r), activation out (w+r), down out, residual; MoE adds the
    # permutation of each token to its top_k experts and back (written and read twice)
    up = 2 if cfg.mlp == "swiglu" else 1
    dispatch = 4 * s * h * cfg.top_k if moe else 0
    mem = s * (h + 2 * h + 2 * up * inner + 2 * inner + h + 3 * h) + dispatch
    # Korthikanti et al. 2022: MLP keeps 19sbh, its LayerNorm 2sbh (the dropout mask sbh as one byte)
    return ops._leaf(name, kind, cfg.mlp_params(i), x, (s, h), cfg.mlp_flops(i), mem=mem, saved=9 * s * h,
                     masks=s * h)


def build_spec(cfg: TransformerConfig, ops, x):
    """The analytic architecture of ``cfg`` (torch modules come from ``torchnet.build_transformer``, not from here)."""
    if type(ops) is not SpecOps:
        raise ConfigError(f"model: {cfg.name!r} is built for capture by torchnet.build_transformer, not by "
                          "the analytic ops (roofline synthesis only)")
    s, h = cfg.seq, cfg.hidden
    # embedding gather: ids in, rows read, (s, h) out
    x = ops._leaf("embed", "TransformerEmbedding", cfg.embed_params(), x, (s, h), 0.0, mem=s + 2 * s * h)
    for i in range(cfg.layers):
        x = _attn_leaf(cfg, ops, f"block{i}.attn", x)
        x = _mlp_leaf(cfg, ops, f"block{i}.{'moe' if cfg.is_moe(i) else 'mlp'}", x, i)
    # final norm, logits (s, V) written and read by the fused softmax cross-entropy
    return ops._leaf("head", "TransformerHead", cfg.head_params(), x, (s, cfg.vocab), cfg.head_flops(),
                     mem=3 * s * h + 2 * s * cfg.vocab)


def layer_specs(cfg: TransformerConfig) -> tuple:
    """The analytic :class:`~simcomm.traces.zoo.spec.LayerSpec` list of one sequence of ``cfg``."""
    ops = SpecOps()
    build_spec(cfg, ops, (cfg.seq,))
    return tuple(ops.layers)


def register(add) -> None:
    """Register every transformer with the zoo's ``_add(name, arch, shape, published, source, summary, ref)``."""
    for name, (cfg, published, stated, summary, reference) in TRANSFORMERS.items():
        add(name, cfg, (cfg.seq,), published, stated, summary, reference)


def transformer_config(name: str) -> TransformerConfig:
    """The config of a zoo transformer; unknown names (or non-transformers) list the transformer choices."""
    from simcomm.errors import UnknownNameError

    if name not in TRANSFORMERS:
        raise UnknownNameError("transformer model", name, TRANSFORMERS)
    return TRANSFORMERS[name][0]


def transformer_meta(model: str, attention: str = "flash") -> dict:
    """``{"transformer": {...}}`` for a zoo transformer, ``{}`` for any other model (for trace meta)."""
    if model not in TRANSFORMERS:
        return {}
    return {"transformer": replace(TRANSFORMERS[model][0], attention=attention).meta()}


def transformer_trace(model: str, device, batch: int = 1, dtype: str = "bf16", optimizer: str = "adam",
                      attention: str = "flash", config: TransformerConfig | None = None):
    """A roofline trace of a zoo transformer with ``meta["transformer"]`` (``dtype``: bf16, fp16, fp32, or an
    FP8 choice of :data:`simcomm.traces.synth.FP8_DTYPES`).

    ``device`` is a trace device name or a :class:`~simcomm.traces.devices.DeviceSpec`; ``batch`` counts
    sequences of the model's ``seq`` tokens; ``attention`` is one of :data:`ATTENTIONS`.

    FP8 follows Transformer Engine (:mod:`simcomm.traces.transformer_cost`): the linear layers' GEMMs at
    the device's FP8 peak with their cast passes, everything else bf16; the trace's dtype is then ``bf16``
    and ``meta["compute_dtype"]`` names the FP8 choice.  A device without FP8 tensor cores (A100, V100)
    is refused naming the ones that have them.  ``config``: a transformer shape to
    synthesise instead of zoo ``model`` (the trace is named after it).
    """
    from simcomm.traces.synth import synth_trace

    if config is None:
        transformer_config(model)
    return synth_trace(model if config is None else config.name, device, batch, dtype, optimizer,
                       attention=attention, config=config)
