"""Attention arithmetic shared by the emitter and ``simcomm plan``'s estimate.

The bytes one context-parallel rank sends (the ring's K/V block, Ulysses' all-to-alls) and the shares of
an attention layer's FLOPs (QKV projection, core, output projection) that split its traced time around
Ulysses' all-to-alls and that selective recompute adds to the backward (docs/strategies-llm.md).
"""

from __future__ import annotations

from simcomm.errors import ConfigError
from simcomm.traces.zoo.transformer import attention_kind


def kv_block_bytes(meta, mb: int, tp: int, cp: int, act: int) -> float:
    """Bytes of one context-parallel rank's K and V block: 2 · b · (s / cp) · kv_heads · head_dim / tp.

    The ring passes this block once per step (docs/layouts.md, "Context parallelism"); GQA's fewer
    K/V heads make it smaller than the b·s·h activation.
    """
    if cp < 2:
        return 0.0
    heads = int(meta.get("heads") or 1)
    head_dim = int(meta.get("head_dim") or int(meta["hidden"]) // heads)
    kv = int(meta.get("kv_heads") or heads) * head_dim
    return 2.0 * mb * (int(meta["seq"]) // cp) * kv / tp * act


def ulysses_bytes(meta, mb: int, tp: int, cp: int, act: int) -> tuple[float, float]:
    """Bytes one rank sends in Ulysses' all-to-all of Q (and of the attention output) and of K (and of V).

    The rank's slice before the all-to-all: ``b · (s / cp) · (heads / tp) · head_dim`` elements for Q,
    ``kv_heads`` instead of ``heads`` for K and V (GQA); simcomm's all-to-all size is the total one rank
    sends, its own block included ((cp - 1)/cp of it leaves the rank).
    """
    heads = int(meta.get("heads") or 1)
    head_dim = int(meta.get("head_dim") or int(meta["hidden"]) // heads)
    kv = int(meta.get("kv_heads") or heads)
    tokens = mb * (int(meta["seq"]) // cp)
    return (float(tokens * (heads // tp) * head_dim * act), float(tokens * (kv // tp) * head_dim * act))


def attention_shares(sq: int, hd: int, meta) -> tuple[float, float, float]:
    """Shares of an attention layer's FLOPs: (QKV projection, attention core, output projection).

    The same counts as :func:`core_share`: QKV ``2 s h (q + 2 kv)``, output ``2 s q h`` (``q = h``), core
    ``2 s^2 q`` causal (``4 s^2 q`` with ``meta["attention_core"] == "full"``).  Ulysses splits the layer's
    traced time by these shares around its all-to-alls (the norms, rotary embedding and softmax are not
    told apart: an approximation, stated).
    """
    heads = int(meta.get("heads") or 1)
    kv = int(meta.get("kv_heads") or heads) * (hd / heads)
    qkv = 2 * sq * hd * (hd + 2 * kv)
    out = 2 * sq * hd * hd
    core = 4 * sq * sq * hd / (2 if attention_kind(meta) == "flash" else 1)  # causal half, or the full s x s
    total = qkv + core + out
    return qkv / total, core / total, out / total


def core_share(sq: int, hd: int, meta) -> float:
    """The attention core's share (QK^T and PV) of an attention layer's forward FLOPs.

    The zoo counts the core as FlashAttention runs it with a causal mask (half the s x s scores:
    ``2 s^2 q`` per sample) beside the projections' ``2 s (h (q + 2 kv) + q h)``; a trace whose
    ``meta["attention_core"]`` is ``"full"`` (Megatron-LM's unfused attention of 2021-2022) counts
    all ``4 s^2 q``.  With ``q = h`` and no GQA that is ``s / (4h + s)``, or ``s / (2h + s)`` for full.
    """
    return attention_shares(sq, hd, meta)[1]


def op_recompute_share(kind: str, sq: int, hd: int, meta) -> float:
    """The share of a layer's forward that torchtitan's per-operator checkpointing (``recompute=op``) re-runs in
    its backward: every second mm of the block in forward order (wq, wk, wv, wo, w1, w3, w2), so ``wk`` and
    ``wo`` of the attention layer and ``w3`` of a SwiGLU MLP (the second of a GeLU MLP's two); SDPA's output is
    saved (simcomm.memory.activations).  Norms and element-wise ops, recomputed too, are not counted (small
    memory-bound kernels: an approximation, stated in docs/strategies-llm.md)."""
    if kind == "attn":
        fq, _, fo = attention_shares(sq, hd, meta)
        heads = int(meta.get("heads") or 1)
        kv = int(meta.get("kv_heads") or heads) / heads  # K's width over Q's
        return fq * kv / (1 + 2 * kv) + fo
    if kind in ("mlp", "moe"):
        return 1 / 3 if meta.get("mlp") == "swiglu" else 1 / 2
    return 0.0


def seq_hidden(lw, meta) -> tuple[int, int]:
    """(sequence length, hidden size) of an attention layer: its output shape, else the trace's meta."""
    if len(lw.output_shape) == 2:
        return int(lw.output_shape[0]), int(lw.output_shape[1])
    if meta.get("seq") and meta.get("hidden"):
        return int(meta["seq"]), int(meta["hidden"])
    raise ConfigError(f"recompute: selective needs the sequence length and hidden size; layer {lw.name!r} "
                      "has no (seq, hidden) output shape and the trace no transformer meta")
