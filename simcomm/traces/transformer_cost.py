"""Per-rank time of a transformer leaf from its GEMM shapes, in bf16 or in FP8 as Transformer Engine runs it.

One pass of a leaf (``block{i}.attn``, ``block{i}.mlp``/``.moe``, ``head``) on one rank costs::

    t = Σ_GEMMs gemm_seconds(m, n, k)  +  F_core / (P e_c)  +  (Q + Q_cast) / (W e_m)  +  t_launch

* the GEMMs (:func:`simcomm.traces.gemm.gemm_seconds`: tiles, waves, memory floor) at the shapes one
  tensor-parallel rank runs: ``T = micro-batch · seq / cp`` tokens; QKV ``T x (q + 2 kv)/tp x h``, the
  attention output ``T x h x q/tp``, FC1 ``T x up·ffn/tp x h``, FC2 ``T x h x ffn/tp`` (Megatron's
  column- then row-parallel pair), the vocabulary-parallel head ``T x V/tp x h``; backward runs each
  one's data gradient ``T x k x n`` and weight gradient ``k x n x T``;
* an MoE leaf (``block{i}.moe``) as Megatron-core runs it on an expert-parallel rank (:func:`_moe_gemms`): the
  router on the rank's own ``T/tp`` tokens, the shared experts as a tensor-parallel MLP, and the rank's
  ``E/ep`` local experts as one grouped GEMM per matrix (``gemm_seconds(..., groups)``) of ``etp·ep·(T/tp)·k/E``
  rows each (times the busiest rank's load) by ``F/etp`` columns; its memory-bound traffic reads only the
  local experts' weights.  At ``tp = ep = etp = 1`` that is one GPU holding all ``E`` experts (the trace);
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
    """How one rank's share of a leaf is cut: tensor parallel (heads, FFN columns, vocabulary), context
    parallel (tokens), and for a mixture-of-experts leaf expert parallel (``ep``: the rank holds ``experts /
    ep`` routed experts), expert tensor parallel (``etp``: each routed expert's FFN split so; 0: ``tp``,
    Megatron-core's default ``--expert-tensor-parallel-size``) and ``load`` (the busiest expert-parallel
    rank's routed rows over the balanced mean: ``moe_imbalance``, or the capacity factor's)."""

    tp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 0
    load: float = 1.0

    @property
    def expert_tp(self) -> int:
        return self.etp or self.tp


def _split(x: float, parts: int) -> int:
    return max(1, math.ceil(x / parts))


def _shape(shape: dict, kind: str) -> tuple[int, int, int, int, int, int, int]:
    """(h, q, kv, inner, up, vocab, seq) of a leaf from ``meta["transformer"]``."""
    h, heads = int(shape["hidden"]), int(shape["heads"])
    hd = h // heads
    q, kv = heads * hd, int(shape.get("kv_heads") or heads) * hd
    up = 2 if shape.get("mlp") == "swiglu" else 1
    if kind == "TransformerMoE":  # the shared experts' FFN (the routed experts: _moe_gemms)
        inner = int(shape.get("shared_experts") or 0) * (int(shape.get("shared_ffn") or 0) or int(shape["ffn"]))
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
    if kind not in PRICED_KINDS or (kind == "TransformerAttention" and (shape.get("kv_lora_rank") or 0) > 0):
        return None  # latent attention's GEMMs are not these (its MLP, MoE and head leaves are)
    tp, cp = sharding.tp, sharding.cp
    h, q, kv, inner, up, vocab, seq = _shape(shape, kind)
    tokens = max(1, round(micro_batch * seq / cp))
    rep = (7 if kind != "TransformerHead" else 3) * h / tp  # LayerNorm, residual, dropout: in 1, norm 2, out 1, add 3
    core = 0.0
    fp8_gemms: list[tuple[int, int, int]] = []  # (m, n, k) forward shapes
    bf16_gemms: list[tuple[float, int, int]] = []
    grouped: list[tuple[int, float, int, int]] = []  # MoE: (groups, m, n, k) of the local experts' grouped GEMMs
    fused_inputs = 0.0  # FP8 GEMM input elements quantised by the LayerNorm before them
    weights = params / tp  # the weights one rank reads per pass
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
    elif kind == "TransformerMLP":
        fp8_gemms = [(tokens, _split(up * inner, tp), h), (tokens, h, _split(inner, tp))]
        fused_inputs = tokens * h
        split = (2 * up + 2) * inner / tp
    else:  # TransformerMoE: router, shared experts (tensor parallel like a dense MLP), the local routed experts
        fp8_gemms = [(tokens, _split(up * inner, tp), h), (tokens, h, _split(inner, tp))] if inner else []
        # Megatron-core's MoE layer spec keeps its pre-norm a separate TENorm (pre_mlp_layernorm=TENorm if
        # num_experts), so no FP8 input comes quantised by the norm
        grouped, split = _moe_gemms(shape, tokens, sharding, up)
        split += (2 * up + 2) * inner / tp
        experts = int(shape.get("experts") or 0)
        # the router (Megatron keeps it out of FP8) on the rank's own b·s/(tp·cp) tokens (sequence parallel)
        bf16_gemms = [(tokens / tp, experts, h)]
        rep += 4 * h * int(shape.get("top_k") or 0) / tp  # each own token permuted to its experts and back
        weights = _moe_weights(shape, params, sharding, up)  # the routed experts: only the local ones
    if flops is not None and sharding == Sharding():  # the whole leaf: its GEMMs must be the zoo's FLOPs
        mine = core + sum(2.0 * m * n * k for m, n, k in bf16_gemms + fp8_gemms)
        mine += sum(2.0 * g * m * n * k for g, m, n, k in grouped)
        if abs(mine - flops) > 1e-6 * max(flops, 1.0):
            return None
    if pricing.fp8 is None:
        bf16_gemms, fp8_gemms = bf16_gemms + fp8_gemms, []
    nbytes = pricing.act_bytes * (weights + tokens * (rep + split))
    gemm, fp8 = pricing.gemm(), pricing.gemm(fp8=True)
    ab = pricing.act_bytes
    fwd = sum(gemm_seconds(m, n, k, gemm, ab, ab) for m, n, k in bf16_gemms)
    bwd = sum(gemm_seconds(m, k, n, gemm, ab, ab) + gemm_seconds(k, n, m, gemm, ab, ab) for m, n, k in bf16_gemms)
    # the routed experts' grouped GEMMs (TEGroupedMLP's GroupedLinear: FP8 under TE's recipe, like the dense ones)
    dev, ib = (fp8, 1) if pricing.fp8 is not None else (gemm, ab)
    fwd += sum(gemm_seconds(m, n, k, dev, ib, ab, g) for g, m, n, k in grouped)
    bwd += sum(gemm_seconds(m, k, n, dev, ib, ab, g) + gemm_seconds(k, n, m, dev, ib, ab, g) for g, m, n, k in grouped)
    cast_f = cast_b = 0.0
    if fp8_gemms or (grouped and pricing.fp8 is not None):
        assert pricing.fp8 is not None
        fwd += sum(gemm_seconds(m, n, k, fp8, 1, ab) for m, n, k in fp8_gemms)
        bwd += sum(gemm_seconds(m, k, n, fp8, 1, ab) + gemm_seconds(k, n, m, fp8, 1, ab) for m, n, k in fp8_gemms)
        after_norm, elsewhere = CAST_BYTES[pricing.fp8.recipe]
        inputs = sum(m * k for m, _, k in fp8_gemms) + sum(g * m * k for g, m, _, k in grouped)
        cast_f = after_norm * fused_inputs + elsewhere * (inputs - fused_inputs)
        # each output gradient, cast for dgrad and wgrad
        cast_b = elsewhere * (sum(m * n for m, n, _ in fp8_gemms) + sum(g * m * n for g, m, n, _ in grouped))
    rate = pricing.peak * pricing.compute_eff
    bw = pricing.mem_bw * pricing.memory_eff
    fwd += core / rate + (nbytes + cast_f) / bw + pricing.launch_s
    bwd += 2.0 * core / rate + (2.0 * nbytes + cast_b) / bw + pricing.launch_s
    return fwd, bwd


def _moe_gemms(shape: dict, tokens: int, sharding: Sharding, up: int) -> tuple[list, float]:
    """One rank's routed experts as Megatron-core runs them: ([(groups, m, n, k)] of the two grouped GEMMs, their
    activation elements per token of the leaf).

    Each expert-parallel rank holds ``E / ep`` experts (``BaseMoELayer``: ``num_local_experts =
    num_moe_experts // ep_size``) and runs them as one grouped GEMM per matrix (``TEGroupedMLP``'s
    ``GroupedLinear`` over ``num_local_experts``, each expert's FFN split over the expert-tensor-parallel group
    ``expt_tp``).  The rank's ``T = b·s/(tp·cp)`` tokens make ``T·k`` routed rows; the all-to-all over EP
    brings each rank ``T·k`` rows in expectation, ETP's all-gather makes them ``etp·T·k`` (token_dispatcher.py,
    ``MoEAlltoAllTokenDispatcher``), so each local expert takes ``etp·ep·T·k / E`` rows, times ``load`` on the
    busiest rank.  Forward FLOPs ``2·T·k·load·mats·h·F`` (the etp's cancel); at ``ep = etp = tp = 1`` the
    E experts' ``T·k/E`` rows each add up to the zoo's ``top_k`` experts per token."""
    experts, top_k, ffn, h = int(shape["experts"]), int(shape["top_k"]), int(shape["ffn"]), int(shape["hidden"])
    ep, etp = sharding.ep, sharding.expert_tp
    rows = etp * ep * (tokens / sharding.tp) * top_k / experts * sharding.load
    local, cols = experts // ep, _split(ffn, etp)
    gemms = [(local, rows, up * cols, h), (local, rows, h, cols)]
    # the up/gate and activation outputs, written and read, per token of the leaf (``tokens`` counts tp ranks')
    return gemms, (2 * up + 2) * local * rows * cols / tokens


def _moe_weights(shape: dict, params: int, sharding: Sharding, up: int) -> float:
    """The MoE leaf's parameters one rank reads: its local routed experts (``E / ep`` of them, each
    ``1 / etp``) and ``1 / tp`` of the rest (router, shared experts, norm: the dense layers' convention)."""
    experts, ffn, h = int(shape["experts"]), int(shape["ffn"]), int(shape["hidden"])
    routed = experts * (up + 1) * h * ffn  # the routed experts' matrices (no biases: Megatron's grouped GEMM has none)
    local = (experts // sharding.ep) * (up + 1) * h * _split(ffn, sharding.expert_tp)
    return (params - routed) / sharding.tp + local
