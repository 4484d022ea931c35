"""Per-rank time of a transformer leaf from its GEMM shapes, in bf16 or in FP8 as Transformer Engine runs it.

One pass of a leaf (``block{i}.attn``, ``block{i}.mlp``/``.moe``, ``head``) on one rank costs::

    t = Σ_GEMMs gemm_seconds(m, n, k)  +  F_core / (P e_c)  +  (Q + Q_cast) / (W e_m)  +  t_launch

* the GEMMs (:func:`simcomm.traces.gemm.gemm_seconds`: tiles, waves, memory floor) at the shapes one
  tensor-parallel rank runs: ``T = micro-batch · seq / cp`` tokens; QKV ``T x (q + 2 kv)/tp x h``, the
  attention output ``T x h x q/tp``, FC1 ``T x up·ffn/tp x h``, FC2 ``T x h x ffn/tp`` (Megatron's
  column- then row-parallel pair), the vocabulary-parallel head ``T x V/tp x h``; backward runs each
  one's data gradient ``T x k x n`` and weight gradient ``k x n x T``;
* the attention core (FlashAttention, or Megatron-LM's unfused core) as FLOPs at the bf16 peak, its
  heads split over tp and its tokens over cp;
* the memory-bound kernels' traffic ``Q`` (the leaf's activation elements as
  :mod:`simcomm.traces.zoo.transformer` counts them, and its weights), split over tp and cp as before
  the GEMM model.  Without sequence parallelism Megatron-LM replicates the LayerNorm and dropout work on
  every tensor-parallel rank (Korthikanti et al. 2022, section 4.2.2); that is *not* charged here: charged
  at the roofline's memory rate (``7 h`` elements per token and block, twice in backward) it needed a
  compute factor of 0.99 on the A100 calibration row and predicted the sequence-parallel 22B row 13 %
  fast, while the paper's Table 4 measures sequence parallelism saving only 0.5 of 7.7 ms forward and
  0.1 of 11.9 ms backward per 22B layer (docs/transformers.md, "GEMM shapes").  At tp = cp = 1 the
  whole is the trace's own leaf time.

**FP8** (:data:`FP8_RECIPES`, Transformer Engine as Megatron-core drives it with ``--fp8-format hybrid``):
the four linear layers of a block (QKV, attention output, FC1, FC2; ``te.LayerNormLinear``, ``te.Linear``,
``te.LayerNormMLP``) run fprop, dgrad and wgrad in FP8 (E4M3 forward, E5M2 gradients) at the device's FP8
peak with one-byte operands; the attention core, norms, softmax, embedding and the LM head (Megatron's
``output_layer`` is a plain ``ColumnParallelLinear``) stay bf16.  Every FP8 GEMM input is quantised by an
extra memory-bound pass, :data:`CAST_BYTES` per element: ``cast_transpose`` reads bf16 and writes the
row-wise copy for fprop/dgrad and the column-wise (transposed) copy for wgrad
(``input_quantizer.set_usage(rowwise=True, columnwise=backward_needs_input)`` in TE's ``linear.py`` and
``layernorm_linear.py``); with delayed scaling the amax is taken in the same kernel and the LayerNorm
before QKV and FC1 writes its output already quantised (``with_quantized_norm``), so those two inputs
cost nothing extra; current (``tensorwise``) scaling needs the amax before the cast (one more bf16
read); MXFP8 (Blackwell) writes both copies with an E8M0 scale per 32 elements and is not fused into
the norm here.  In backward each FP8 GEMM's output gradient is cast the same way.  Not priced: the
weights' casts (once per optimizer step: TE keeps the FP8 weights across micro-batches,
``is_first_microbatch``), delayed scaling's amax-history reduction (one small all-reduce per step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.traces.gemm import GemmDevice, gemm_seconds

__all__ = ["FP8_RECIPES", "CAST_BYTES", "Fp8", "LeafPricing", "Sharding", "leaf_seconds", "PRICED_KINDS"]

#: TE recipes (Megatron-core ``--fp8-recipe``) -> the words of the ``assumed:`` line
FP8_RECIPES = {
    "delayed": "Transformer Engine DelayedScaling (Megatron-core's default --fp8-recipe delayed, --fp8-format "
               "hybrid: E4M3 forward, E5M2 gradients; per-tensor scales from the amax history)",
    "tensorwise": "Transformer Engine Float8CurrentScaling (--fp8-recipe tensorwise: per-tensor scales from "
                  "each tensor's own amax, one more read per cast)",
    "mxfp8": "Transformer Engine MXFP8BlockScaling (--fp8-recipe mxfp8, Blackwell: E4M3 with one E8M0 scale "
             "per 32 elements, row- and column-wise copies)",
}
#: extra bytes per element of one FP8 GEMM input: (after a fused LayerNorm, anywhere else)
CAST_BYTES = {"delayed": (0.0, 4.0), "tensorwise": (6.0, 6.0), "mxfp8": (4.0 + 2 / 32, 4.0 + 2 / 32)}
#: the leaves this module prices (``Layer.module_type``); embeddings are memory-only and keep the trace's time
PRICED_KINDS = ("TransformerAttention", "TransformerMLP", "TransformerMoE", "TransformerHead")


@dataclass(frozen=True)
class Fp8:
    """FP8 linear layers: the recipe and the device's FP8 tensor peak."""

    recipe: str
    peak: float

    def __post_init__(self):
        if self.recipe not in FP8_RECIPES:
            raise ConfigError(f"fp8 recipe: {self.recipe!r} is not valid; valid choices: {', '.join(FP8_RECIPES)}")


@dataclass(frozen=True)
class LeafPricing:
    """The device-side numbers a leaf's time needs (kept in ``trace.meta`` so a layout can re-price it)."""

    peak: float  # FLOP/s of the compute dtype (bf16/fp16, or tf32 for fp32)
    sms: int
    compute_eff: float
    memory_eff: float
    mem_bw: float
    launch_s: float
    act_bytes: float  # bytes per activation element of the compute dtype
    fp8: Fp8 | None = None

    def gemm(self, fp8: bool = False) -> GemmDevice:
        peak = self.fp8.peak if fp8 and self.fp8 else self.peak
        return GemmDevice(peak, self.sms, self.compute_eff, self.mem_bw, self.memory_eff)

    def meta(self) -> dict:
        """The ``trace.meta["gemm"]`` entry (the rest is already in the roofline's meta keys)."""
        return {"sms": self.sms, "act_bytes": self.act_bytes,
                "fp8": None if self.fp8 is None else {"recipe": self.fp8.recipe, "peak": self.fp8.peak}}

    @classmethod
    def from_meta(cls, meta: dict) -> LeafPricing | None:
        """The pricing a synthesised trace recorded; None for a trace without it (a capture, an old file)."""
        g = meta.get("gemm")
        if not isinstance(g, dict) or "peak_flops" not in meta:
            return None
        fp8 = g.get("fp8")
        return cls(float(meta["peak_flops"]), int(g["sms"]), float(meta["compute_eff"]), float(meta["memory_eff"]),
                   float(meta["mem_bw"]), float(meta["launch_s"]), float(g["act_bytes"]),
                   Fp8(fp8["recipe"], float(fp8["peak"])) if fp8 else None)


@dataclass(frozen=True)
class Sharding:
    """How one rank's share of a leaf is cut: tensor parallel (heads, FFN columns, vocabulary) and context
    parallel (tokens)."""

    tp: int = 1
    cp: int = 1


def _split(x: float, parts: int) -> int:
    return max(1, math.ceil(x / parts))


def _shape(shape: dict, kind: str) -> tuple[int, int, int, int, int, int, int]:
    """(h, q, kv, inner, up, vocab, seq) of a leaf from ``meta["transformer"]``."""
    h, heads = int(shape["hidden"]), int(shape["heads"])
    hd = h // heads
    q, kv = heads * hd, int(shape.get("kv_heads") or heads) * hd
    up = 2 if shape.get("mlp") == "swiglu" else 1
    if kind == "TransformerMoE":
        inner = (int(shape.get("top_k") or 0) + int(shape.get("shared_experts") or 0)) * int(shape["ffn"])
    else:
        inner = int(shape.get("dense_ffn") or 0) or int(shape["ffn"])
    return h, q, kv, inner, up, int(shape["vocab"]), int(shape["seq"])


def leaf_seconds(kind: str, shape: dict, params: int, micro_batch: float, pricing: LeafPricing,
                 sharding: Sharding = Sharding(), flops: float | None = None) -> tuple[float, float] | None:
    """(forward, backward) seconds of one rank's share of a leaf of ``kind``; None for a kind not priced here.

    ``shape`` is ``trace.meta["transformer"]``, ``params`` the leaf's parameters (whole, not sharded),
    ``micro_batch`` the sequences per micro-batch.  ``flops``: the leaf's forward FLOPs at ``micro_batch``
    as the zoo counts them; a shape whose GEMMs here do not add up to them (latent attention, a head size
    other than ``hidden / heads``, sliding windows ...) is not priced here either (None: the caller keeps
    the additive roofline).
    """
    if kind not in PRICED_KINDS or (shape.get("kv_lora_rank") or 0) > 0:
        return None
    tp, cp = sharding.tp, sharding.cp
    h, q, kv, inner, up, vocab, seq = _shape(shape, kind)
    tokens = max(1, round(micro_batch * seq / cp))
    rep = (7 if kind != "TransformerHead" else 3) * h / tp  # LayerNorm, residual, dropout: in 1, norm 2, out 1, add 3
    core = 0.0
    fp8_gemms: list[tuple[int, int, int]] = []  # (m, n, k) forward shapes
    bf16_gemms: list[tuple[int, int, int]] = []
    fused_inputs = 0.0  # FP8 GEMM input elements quantised by the LayerNorm before them
    if kind == "TransformerAttention":
        fp8_gemms = [(tokens, _split(q + 2 * kv, tp), h), (tokens, h, _split(q, tp))]
        fused_inputs = tokens * h
        split = (2 * (q + 2 * kv) + 2 * q) / tp
        full = shape.get("attention_core") == "full"
        core = micro_batch * 4.0 * seq * seq * q / (1 if full else 2) / (tp * cp)
        if full:  # the s x s scores through HBM, per head (SCORE_ELEMS of transformer.py)
            from simcomm.traces.zoo.transformer import SCORE_ELEMS

            split += SCORE_ELEMS * int(shape["heads"]) / tp * seq  # per query token: seq scores per head
    elif kind == "TransformerHead":
        bf16_gemms = [(tokens, _split(vocab, tp), h)]  # Megatron's output layer is not a TE module: bf16
        split = 2 * vocab / tp
    else:
        fp8_gemms = [(tokens, _split(up * inner, tp), h), (tokens, h, _split(inner, tp))]
        fused_inputs = tokens * h
        split = (2 * up + 2) * inner / tp
        if kind == "TransformerMoE":
            experts = int(shape.get("experts") or 0)
            bf16_gemms = [(tokens, experts, h)]  # the router: Megatron keeps it out of FP8
            rep += 4 * h * int(shape.get("top_k") or 0)  # tokens permuted to their experts and back
    if flops is not None and sharding == Sharding():  # the whole leaf: its GEMMs must be the zoo's FLOPs
        mine = core + sum(2.0 * m * n * k for m, n, k in bf16_gemms + fp8_gemms)
        if abs(mine - flops) > 1e-6 * max(flops, 1.0):
            return None
    if pricing.fp8 is None:
        bf16_gemms, fp8_gemms = bf16_gemms + fp8_gemms, []
    nbytes = pricing.act_bytes * (params / tp + tokens * (rep + split))
    gemm, fp8 = pricing.gemm(), pricing.gemm(fp8=True)
    ab = pricing.act_bytes
    fwd = sum(gemm_seconds(m, n, k, gemm, ab, ab) for m, n, k in bf16_gemms)
    bwd = sum(gemm_seconds(m, k, n, gemm, ab, ab) + gemm_seconds(k, n, m, gemm, ab, ab) for m, n, k in bf16_gemms)
    cast_f = cast_b = 0.0
    if fp8_gemms:
        assert pricing.fp8 is not None
        fwd += sum(gemm_seconds(m, n, k, fp8, 1, ab) for m, n, k in fp8_gemms)
        bwd += sum(gemm_seconds(m, k, n, fp8, 1, ab) + gemm_seconds(k, n, m, fp8, 1, ab) for m, n, k in fp8_gemms)
        after_norm, elsewhere = CAST_BYTES[pricing.fp8.recipe]
        inputs = sum(m * k for m, _, k in fp8_gemms)
        cast_f = after_norm * fused_inputs + elsewhere * (inputs - fused_inputs)
        cast_b = elsewhere * sum(m * n for m, n, _ in fp8_gemms)  # each output gradient, cast for dgrad and wgrad
    rate = pricing.peak * pricing.compute_eff
    bw = pricing.mem_bw * pricing.memory_eff
    fwd += core / rate + (nbytes + cast_f) / bw + pricing.launch_s
    bwd += 2.0 * core / rate + (2.0 * nbytes + cast_b) / bw + pricing.launch_s
    return fwd, bwd
