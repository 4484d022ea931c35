"""Per-layer and per-stage compute of a large-model layout, read by BOTH the ``megatron`` emitter and the estimate.

:func:`layer_costs` gives one :class:`LayerCost` per layer for one micro-batch on one rank: the trace's
time at the micro-batch split over the tensor- and context-parallel ranks (selective recomputation adds
the attention core to the backward, per-operator recomputation every second mm; an MoE layer priced at the
rank's local experts, :func:`expert_layer_times`, or on a trace without GEMM shapes stretched by its routing
load and grouped-GEMM tiles), the gradient and optimizer shares (an MoE layer's routed
experts split over ``etp·ep``, its router and shared experts over ``tp``), and the bytes of each layer's
tensor-parallel and pipeline traffic
(docs/strategies-llm.md).  The emitter turns every cost into ops; :func:`stage_seconds` sums them per
pipeline stage for ``simcomm plan``'s estimate (:mod:`simcomm.llm.estimate`), so the two price a layout's
compute alike by construction.

:func:`sharded_layer_times` prices a layer at the rank's own shapes: a synthesised zoo transformer
(``trace.meta["gemm"]``) is re-priced at the rank's GEMM shapes
(:func:`simcomm.traces.transformer_cost.leaf_seconds`: a ``T x 3h/tp x h`` QKV projection runs in fewer,
emptier waves than ``1/tp`` of the whole one, and a thin one may fall to its memory floor), the trace's own
time kept as the scale (the model supplies only the ratio ``tp · cp · t(rank) / t(whole)``); any other trace
keeps ``1/(tp · cp)`` of its layer time.

The attention arithmetic lives here too: the bytes a context-parallel rank sends (the ring's K/V block,
Ulysses' all-to-alls) and the shares of an attention layer's FLOPs (QKV projection, core, output
projection) that split its traced time around Ulysses' all-to-alls and that selective recomputation adds
to the backward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simcomm.errors import ConfigError
from simcomm.llm.placement import layer_kind
from simcomm.precision import DTYPE_BYTES
from simcomm.traces.schema import Layer, Trace
from simcomm.traces.transformer_cost import LeafPricing, Sharding, leaf_seconds
from simcomm.traces.zoo.transformer import attention_kind
from simcomm.workload import layer_times

__all__ = ["LayerCost", "layer_costs", "stage_seconds", "sharded_layer_times", "expert_layer_times", "moe_priced",
           "kv_block_bytes", "ulysses_bytes", "attention_shares", "core_share", "op_recompute_share", "seq_hidden"]

#: Ulysses/a2a: (forward, backward) seconds of (QKV projection, attention core, output projection)
UlyssesTimes = tuple[tuple[float, float, float], tuple[float, float, float]]


@dataclass(frozen=True, slots=True)
class LayerCost:
    """One layer on one rank for one micro-batch."""

    kind: str  # layer_kind: embed, attn, mlp, moe, head, ...
    forward_s: float
    backward_s: float  # with selective recompute's attention core
    grad_bytes: float  # this rank's gradients (and ZeRO-3's gathered parameters)
    update_s: float  # optimizer step on this rank's (unsharded by ZeRO) parameters
    tp_bytes: float  # one tensor-parallel all-reduce (all-gather, reduce-scatter) at the layer's edge
    activation_bytes: float  # the output a pipeline stage sends on (1/tp of it with sequence parallelism)
    ulysses_times: UlyssesTimes | None  # attention layers under Ulysses/a2a context parallelism, else None
    expert_grad_bytes: float = 0.0  # MoE: the routed experts' part of grad_bytes (expert-data-parallel group)
    expert_update_s: float = 0.0  # MoE: the routed experts' part of update_s


def layer_costs(w, lay, ulysses: bool = False, moe=None, memo: dict | None = None) -> list[LayerCost]:
    """Every layer's :class:`LayerCost` of workload ``w`` under ``lay`` (a :class:`simcomm.llm.layout.Layout`:
    its tp, cp, ep, etp, micro-batch, sequence parallelism and recomputation); ``ulysses``: split attention
    layers' times for its all-to-alls; ``moe``: the plan's MoE layers
    (:class:`simcomm.strategies.megatron.moe.MoeCosts`: routing load and grouped-GEMM stretch, the routed
    experts' share of the parameters).  ``memo``: a dict the caller keeps for one trace (the search's
    estimate of thousands of layouts): each distinct layer is priced once per (micro-batch, tp, cp), the
    same floats as without it (:func:`sharded_layer_times` does not read a layer's name)."""
    tr = w.trace
    meta = dict(tr.meta.get("transformer") or {})
    mb, tp, ep = lay.microbatch, lay.tp, lay.ep
    cp = lay.cp  # context parallel: every rank computes on (and sends activations of) seq / cp tokens
    act = DTYPE_BYTES.get(tr.dtype, 4)
    sp = lay.sequence_parallel and tp > 1
    expert_shard = lay.expert_tp * ep
    out_costs = []
    for layer, lw in zip(tr.layers, w.layers, strict=False):
        kind = layer_kind(lw.name)
        if kind == "moe" and moe is not None:  # the local experts' grouped GEMMs at the busiest rank's rows
            experts = Sharding(tp, cp, ep, lay.expert_tp, moe.load)
            priced = _layer_times(tr, layer, mb, tp, cp, memo, experts)
            if priced is None:  # a trace that cannot be re-priced: stretched by the load and 128x128 tiles
                f, bk = _layer_times(tr, layer, mb, tp, cp, memo)
                f, bk = f * moe.compute_factor, bk * moe.compute_factor
            else:
                f, bk = priced
        else:
            f, bk = _layer_times(tr, layer, mb, tp, cp, memo)  # GEMMs at the rank's shapes
        extra = 0.0
        if lay.recompute == "selective" and kind == "attn":
            extra = f * core_share(*seq_hidden(lw, meta), meta)  # selective: the core is recomputed
        elif lay.recompute == "op" and kind in ("attn", "mlp", "moe"):
            hidden = seq_hidden(lw, meta) if kind == "attn" else (0, 0)  # the MLP's share needs no shape
            extra = f * op_recompute_share(kind, *hidden, meta)  # every second mm re-run
        times = None
        if ulysses and kind == "attn":
            fq, fc, fo = attention_shares(*seq_hidden(lw, meta), meta)
            n = tp * cp  # every rank: s/cp tokens of all its heads in the projections, s of heads/cp in the core
            times = ((f * fq / n, f * fc / n, f * fo / n), (bk * fq / n, (bk * fc + extra) / n, bk * fo / n))
        shape = lw.input_shape if kind == "head" else lw.output_shape
        out = math.prod(lw.output_shape) * mb * act / cp if lw.output_shape else 0.0
        grad, update, expert_grad, expert_update = lw.grad_bytes / tp, lw.update_s / tp, 0.0, 0.0
        if kind == "moe" and moe is not None:  # routed experts over etp·ep, the rest (router, shared) over tp
            dense = moe.dense_param_share
            expert_grad = lw.grad_bytes * (1 - dense) / expert_shard
            expert_update = lw.update_s * (1 - dense) / expert_shard
            grad = lw.grad_bytes * dense / tp + expert_grad
            update = lw.update_s * dense / tp + expert_update
        out_costs.append(LayerCost(
            kind=kind, forward_s=f / (tp * cp), backward_s=(bk + extra) / (tp * cp),
            grad_bytes=grad, update_s=update,
            tp_bytes=math.prod(shape) * mb * act / cp if shape else 0.0,
            activation_bytes=out / tp if sp else out, ulysses_times=times,
            expert_grad_bytes=expert_grad, expert_update_s=expert_update))
    return out_costs


def _layer_times(trace: Trace, layer: Layer, mb: int, tp: int, cp: int, memo: dict | None,
                 experts: Sharding | None = None):
    """:func:`sharded_layer_times` (:func:`expert_layer_times` when ``experts`` is given), looked up in ``memo``
    (keyed on the layer less its name: a model's blocks are the same layer under other names) when one is
    given."""
    def price():
        if experts is None:
            return sharded_layer_times(trace, layer, mb, tp, cp)
        return expert_layer_times(trace, layer, mb, experts)

    if memo is None:
        return price()
    same = memo.get(layer.name)  # a small int per distinct layer (memo only grows: len is a fresh number)
    if same is None:
        same = memo[layer.name] = memo.setdefault(("layer", replace(layer, name="")), len(memo))
    key = (same, mb, tp, cp) if experts is None else (same, mb, experts)
    if key not in memo:
        memo[key] = price()
    return memo[key]


def sharded_layer_times(trace: Trace, layer: Layer, micro_batch: int, tp: int = 1,
                        cp: int = 1) -> tuple[float, float]:
    """(forward, backward) of ``layer`` at ``micro_batch`` as a whole-layer time: ``/ (tp · cp)`` is one rank's.

    Without GEMM pricing in the trace's meta this is :func:`simcomm.workload.layer_times`.
    """
    if tp == cp == 1 and micro_batch == trace.batch:
        return layer.forward_s, layer.backward_s  # the trace's own shapes: its own times
    meta = trace.meta or {}
    shape = meta.get("transformer")
    pricing = LeafPricing.from_meta(meta) if shape else None
    whole = (leaf_seconds(layer.module_type, shape, layer.params, trace.batch, pricing, flops=layer.flops)
             if pricing and shape else None)
    if whole is None or pricing is None or not shape:
        return layer_times(layer, trace.batch, micro_batch)
    part = leaf_seconds(layer.module_type, shape, layer.params, micro_batch, pricing, Sharding(tp, cp))
    assert part is not None
    n = tp * cp
    return layer.forward_s * n * part[0] / whole[0], layer.backward_s * n * part[1] / whole[1]


def expert_layer_times(trace: Trace, layer: Layer, micro_batch: int, sharding: Sharding) -> tuple[float, float] | None:
    """(forward, backward) of an MoE ``layer`` as a whole-layer time (``/ (tp · cp)`` is one rank's) when each
    rank holds ``experts / ep`` routed experts split ``etp`` ways and the busiest takes ``load`` times the
    balanced rows (``sharding``): the trace's time scaled by :func:`leaf_seconds` at those local shapes over
    the trace's own (the local experts' grouped GEMMs and weight reads: :mod:`simcomm.traces.transformer_cost`);
    None for a trace without GEMM pricing (a capture, a model whose MoE leaf it cannot price): the caller
    stretches its ``1 / (tp · cp)`` instead."""
    meta = trace.meta or {}
    shape = meta.get("transformer")
    pricing = LeafPricing.from_meta(meta) if shape else None
    if pricing is None or not shape or layer.module_type != "TransformerMoE":
        return None
    whole = leaf_seconds(layer.module_type, shape, layer.params, trace.batch, pricing, flops=layer.flops)
    if whole is None:
        return None
    if sharding == Sharding() and micro_batch == trace.batch:
        return layer.forward_s, layer.backward_s  # the trace's own shapes: its own times
    part = leaf_seconds(layer.module_type, shape, layer.params, micro_batch, pricing, sharding)
    assert part is not None
    n = sharding.tp * sharding.cp
    return layer.forward_s * n * part[0] / whole[0], layer.backward_s * n * part[1] / whole[1]


def moe_priced(trace: Trace) -> bool:
    """Whether ``trace`` prices its MoE layers at each rank's local experts (:func:`expert_layer_times`)."""
    layer = next((x for x in trace.layers if x.module_type == "TransformerMoE"), None)
    return layer is not None and expert_layer_times(trace, layer, trace.batch, Sharding()) is not None


def stage_seconds(costs: list[LayerCost], layers, recompute: str) -> tuple[float, float]:
    """(forward, backward) seconds of one micro-batch over ``layers`` (indices into ``costs``) on one rank, as
    the emitter runs them: full recomputation re-runs each layer's forward before its backward."""
    f = sum(costs[j].forward_s for j in layers)
    b = sum(costs[j].backward_s for j in layers)
    return f, b + (f if recompute == "full" else 0.0)


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
