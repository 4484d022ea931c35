"""Activation bytes one transformer block keeps for backward, per attention kind and recomputation kind.

Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
section 4) count, for one layer of ``s`` tokens × ``b`` sequences, hidden ``h``, ``a`` heads,
16-bit activations and one-byte dropout masks, ``sbh(34 + 5as/h)`` bytes: the attention
block's ``11sbh + 5as²b`` (QKV input 2sbh, Q and K 4sbh, softmax output 2as²b, its dropout
mask as²b and output 2as²b, V 2sbh, output-projection input 2sbh, dropout mask sbh), the
MLP's 19sbh (input 2sbh, GeLU input 8sbh, GeLU output 8sbh, mask sbh) and two LayerNorm
inputs 4sbh.  This module counts the same tensors from the model's own shape, so that
GQA (K and V of ``kv_heads`` heads), gated MLPs (SwiGLU: fc1's two outputs and the
activation's output) and MoE blocks come out of the same rule:

* **attention kind** (:data:`~simcomm.traces.zoo.transformer.ATTENTIONS`): ``unfused``
  stores the s×s scores (softmax output, dropout mask and output: ``5as`` per token with
  dropout, ``2as`` without); ``flash`` (FlashAttention, TransformerEngine's fused
  attention) stores none, only its output and the fp32 log-sum-exp (``4a`` bytes per token;
  its dropout mask is regenerated from the RNG state).  Unfused attention expands GQA's K
  and V to every head before the batched GEMMs, so they count at the query width there.
* **tensor and sequence parallelism** (Korthikanti Table 2): Q, K, V, the attention output,
  the MLP's inner tensors and the scores are split ``t`` ways; the norm inputs, the QKV and
  MLP inputs and the dropout masks (``10sbh``) are replicated unless sequence parallelism
  splits them too.  **Context parallelism** keeps ``s / c`` tokens per rank: every term / c.
* **MoE block**: router input and fp32 logits (``4E`` per token), and per routed copy of a
  token (``top_k`` per token) the expert's input, fc1 output(s), activation output and its
  output (kept for the gradient of the routing weight); shared experts as a dense MLP.
* **multi-head latent attention**: per-head keys and values as the core sees them, plus the
  latents (:func:`_widths`).
  A rank routes its s/t tokens (Megatron-core runs MoE with sequence parallelism under tp);
  the all-to-all dispatcher then all-gathers the routed copies over the expert tensor-parallel
  group (``token_dispatcher.py``: ``gather_from_sequence_parallel_region`` on its ``tp_group``,
  reduce-scattered back in ``combine_preprocess``), so an expert rank holds ``etp`` ranks'
  copies at full width (``etp·k·s/t`` per sequence: their input and output, ``4h`` bytes
  each) with their FFN tensors split ``etp`` ways (``/t`` in all, as the dense MLP's).
* **dropout**: Megatron-LM's defaults (``--hidden-dropout 0.1 --attention-dropout 0.1``) keep
  the masks; torchtitan's Llama has no dropout (``dropout=False``).

Recomputation (:data:`RECOMPUTE`), as each framework implements it:

* ``selective``: Megatron-core ``--recompute-granularity selective`` with its default
  ``--recompute-modules core_attn`` checkpoints the attention core; Q, K and V are the
  checkpoint's inputs and the output is the projection's input, so what goes is what the
  core stores inside: the scores (Korthikanti's ``5as/h``) when unfused, and under flash
  only the log-sum-exp.
* ``full``: Megatron-core ``--recompute-granularity full --recompute-method uniform
  --recompute-num-layers 1`` keeps each layer's input (``2sbh``, / t under sequence
  parallelism, / c) and, during backward, the rest of one layer's set being recomputed.
* ``op``: torchtitan's per-operator selective checkpointing (``activation_checkpoint.mode
  = "selective"``, ``selective_ac_option = "op"``; torchtitan/distributed/activation_checkpoint.py):
  each block keeps its input and the outputs of the ops in the save list (mm, SDPA and the
  TP reduce-scatter) except every second mm, counted in forward order (wq, wk, wv, wo, w1,
  w3, w2 for SwiGLU: wq, wv, w1 and w2 kept), plus the rest of one block's set during its recompute.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

from simcomm.errors import ConfigError

__all__ = ["RECOMPUTE", "SCHEDULES", "LayerBytes", "layer_bytes", "in_flight", "head_bytes", "embedding_bytes"]

RECOMPUTE = ("none", "selective", "full", "op")
SCHEDULES = ("1f1b", "interleaved", "gpipe")


@dataclass(frozen=True)
class LayerBytes:
    """One block, one micro-batch: what stays until its backward (``kept``) and what its recomputation adds
    while that backward runs (``working``: the block's whole set less what it kept, which the recomputed
    forward reuses; 0 without recomputation)."""

    kept: Fraction
    working: Fraction


def _widths(cfg) -> tuple[int, int, int, int, int]:
    """(Q, K, V, attention output, stored latents) widths per token of the attention's tensors.

    Multi-head latent attention (DeepSeek-V2/V3, Megatron-core's ``MLASelfAttention``) up-projects its
    latents to per-head keys (``qk_nope + qk_rope``) and values (``v_head_dim``) before the core, and keeps
    the latents themselves (the query latent ``q_lora_rank`` and the key-value latent with its rotary key,
    ``kv_lora_rank + qk_rope_head_dim``) as the up-projections' inputs."""
    if cfg.mla:
        q = cfg.heads * cfg.qk_head_dim
        latents = cfg.q_lora_rank + cfg.kv_lora_rank + cfg.qk_rope_head_dim
        return q, q, cfg.heads * cfg.v_dim, cfg.heads * cfg.v_dim, latents
    q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    return q, kv, kv, q, 0


def _mlp(cfg, f: int) -> int:
    """Bytes per token of one MLP's inner tensors: fc1's output(s) (two for a gated MLP) and the activation's."""
    return 2 * (2 if cfg.mlp == "swiglu" else 1) * f + 2 * f


def _terms(cfg, moe: bool, s: int, attention: str,
           dropout: bool) -> tuple[Fraction, Fraction, Fraction, Fraction, Fraction]:
    """Per-token bytes of block ``i`` at one rank without recomputation: (replicated over tp unless sequence
    parallel, split over tp, the attention core's own stored tensors (split), the block's input, the routed
    copies' full-width tensors (their input and output, per token routed by this rank: :func:`_layer_bytes`
    scales them by the expert tensor-parallel gather))."""
    h, a = cfg.hidden, cfg.heads
    q, k, v, o, latents = _widths(cfg)
    mask = h if dropout else 0
    # attention: norm input, QKV input, dropout mask after the output projection; latents (MLA)
    rep = 2 * h + 2 * h + mask + 2 * latents
    if attention == "unfused":
        split = 2 * q + 2 * q + 2 * max(v, q) + 2 * o  # K and V expanded to every head, the core's output
        core = (5 if dropout else 2) * a * s  # per token: a heads × s scores
    else:
        split = 2 * q + 2 * k + 2 * v + 2 * o  # Q, K, V, output (FlashAttention keeps its output)
        core = 4 * a  # fp32 log-sum-exp per head
    # MLP or MoE: norm input, the MLP's input, dropout mask
    rep += 2 * h + 2 * h + mask
    if moe:
        rep += 4 * cfg.experts  # fp32 router logits
        split += cfg.shared_experts * _mlp(cfg, cfg.shared_ffn or cfg.ffn)
        split += cfg.top_k * _mlp(cfg, cfg.ffn)
        routed = cfg.top_k * (2 * h + 2 * h)
    else:
        split += _mlp(cfg, cfg.dense_ffn or cfg.ffn)
        routed = 0
    return Fraction(rep), Fraction(split), Fraction(core), Fraction(2 * h), Fraction(routed)


def _op_saved(cfg, moe: bool) -> Fraction:
    """Per-token bytes torchtitan's op-level policy saves in block ``i`` (split over tp): every other mm output
    in forward order, the SDPA output and log-sum-exp (the reduce-scatter outputs: :func:`layer_bytes`)."""
    h = cfg.hidden
    q, k, v, o, _ = _widths(cfg)
    f = cfg.ffn if moe else (cfg.dense_ffn or cfg.ffn)
    mlp = [f, f, h] if cfg.mlp == "swiglu" else [f, h]
    if moe:  # routed copies per token, and the shared experts' mms
        fs = cfg.shared_ffn or cfg.ffn
        shared = [fs, fs, h] if cfg.mlp == "swiglu" else [fs, h]
        mlp = [cfg.top_k * x for x in mlp] + [x for _ in range(cfg.shared_experts) for x in shared]
    outputs = [q, k, v, h] + mlp
    return Fraction(2 * sum(outputs[0::2]) + 2 * o + 4 * cfg.heads)


def layer_bytes(cfg, i: int, s: int, b: int, *, tp: int = 1, sp: bool = False, cp: int = 1,
                recompute: str = "none", attention: str | None = None, dropout: bool = True,
                etp: int | None = None) -> LayerBytes:
    """Bytes block ``i`` of ``cfg`` keeps for one micro-batch of ``b`` sequences of ``s`` tokens at one rank
    (module rules); ``attention`` defaults to the config's own, ``etp`` (the expert layers' tensor-parallel
    size) to ``tp``."""
    if recompute not in RECOMPUTE:
        raise ConfigError(f"recompute: {recompute!r} is not valid; valid choices: {', '.join(RECOMPUTE)}")
    # a block's bytes depend on its index only through whether it is an MoE block: one exact computation per
    # kind and shape (plan asks for every block of tens of thousands of layouts)
    return _layer_bytes(cfg, cfg.is_moe(i), s, b, tp, sp, cp, recompute, attention or cfg.attention, dropout,
                        tp if etp is None else etp)


@functools.lru_cache(maxsize=1 << 16)
def _layer_bytes(cfg, moe: bool, s: int, b: int, tp: int, sp: bool, cp: int, recompute: str, attention: str,
                 dropout: bool, etp: int) -> LayerBytes:
    rep, split, core, layer_input, routed = _terms(cfg, moe, s, attention, dropout)
    tokens = Fraction(s * b, cp)
    sharded = tp if sp else 1  # what sequence parallelism divides
    # routed copies: a rank routes its tokens / tp; the dispatcher's all-gather over the expert tensor-parallel
    # group (token_dispatcher.py, gather_from_sequence_parallel_region) gives each expert rank etp ranks' copies
    # at full width, their FFN split etp ways (so the inner tensors come to / tp as above)
    whole = tokens * (rep / sharded + (split + core) / tp + routed * etp / tp)
    if recompute == "none":
        return LayerBytes(whole, Fraction(0))
    if recompute == "selective":
        return LayerBytes(whole - tokens * core / tp, Fraction(0))
    kept = tokens * layer_input / sharded
    if recompute == "op":
        reduce_scatters = 2 * 2 * cfg.hidden if tp > 1 else 0  # the attention's and MLP's outputs, s/t each
        kept += tokens * (_op_saved(cfg, moe) + reduce_scatters) / tp
    return LayerBytes(kept, whole - kept)


def head_bytes(cfg, s: int, b: int, *, tp: int = 1, sp: bool = False, cp: int = 1) -> Fraction:
    """The last stage's output layer and loss for one micro-batch (Korthikanti section 4.3): the final norm's
    and the projection's inputs (``4sbh``, / t under sequence parallelism) and the logits in fp32 for the
    vocabulary-parallel cross-entropy (``4sbV / t``); / c with context parallelism."""
    tokens = Fraction(s * b, cp)
    return tokens * (Fraction(4 * cfg.hidden, tp if sp else 1) + Fraction(4 * cfg.vocab, tp))


def embedding_bytes(cfg, s: int, b: int, *, tp: int = 1, sp: bool = False, cp: int = 1,
                    dropout: bool = True) -> Fraction:
    """The first stage's embedding dropout mask for one micro-batch (Korthikanti section 4.3: ``sbh``, / t
    under sequence parallelism); 0 without dropout."""
    return Fraction(s * b * cfg.hidden, cp * (tp if sp else 1)) if dropout else Fraction(0)


def in_flight(p: int, k: int, m: int | None, schedule: str = "1f1b", v: int = 1) -> Fraction:
    """Micro-batches' worth of stage ``k``'s layers held at the peak (``m`` None: unbounded micro-batches).

    1F1B (Megatron-core ``forward_backward_pipelining_without_interleaving``): ``p - k - 1`` warm-up forwards
    plus the one in steady state, at most ``m``; GPipe all ``m``; interleaved
    (``forward_backward_pipelining_with_interleaving``): ``2(p - k - 1) + (v - 1)p`` warm-up model chunks
    plus one, at most all ``m·v`` (which it runs when ``m == p``), in chunks of ``1/v`` of the stage.
    """
    if p == 1:
        return Fraction(1)
    cap = math.inf if m is None else m
    if schedule == "gpipe":
        if m is None:
            raise ConfigError("microbatches: GPipe holds every micro-batch; give their number")
        return Fraction(m)
    if schedule == "1f1b" or v == 1:
        return Fraction(min(p - k, cap))
    chunks = min(2 * (p - k - 1) + (v - 1) * p + 1, cap * v)
    return Fraction(chunks, v)
