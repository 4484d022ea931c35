"""Per-layer seconds and bytes of one ``megatron`` micro-batch on one rank: one :class:`LayerCost` per layer.

Worked out once per plan, read by the emitter for every op (so plain fields, no per-op arithmetic):
compute split over the tensor- and context-parallel ranks (selective recompute adds the attention
core to the backward, per-operator recompute every second mm; MoE layers stretched by their routing load
and grouped-GEMM efficiency, :mod:`.moe`), the gradient and optimizer shares (an MoE layer's routed experts
split over ``etp·ep`` and reduced over the expert-data-parallel group, its router and shared experts over
``tp`` like a dense layer), and the bytes of each layer's tensor-parallel and pipeline traffic
(docs/strategies-llm.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcomm.llm.compute import sharded_layer_times
from simcomm.precision import DTYPE_BYTES
from simcomm.strategies._layout import Layout, layer_kind
from simcomm.strategies.megatron.moe import MoeCosts
from simcomm.strategies.megatron.params import MegatronParams
from simcomm.strategies.megatron.shares import attention_shares, core_share, op_recompute_share, seq_hidden

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


def layer_costs(p: MegatronParams, lay: Layout, microbatch: int, w, ulysses: bool,
                moe: MoeCosts | None = None) -> list[LayerCost]:
    """Every layer's :class:`LayerCost` (``ulysses``: split attention layers' times for its all-to-alls;
    ``moe``: the plan's MoE layers)."""
    tr = w.trace
    meta = dict(tr.meta.get("transformer") or {})
    mb, tp, ep = microbatch, lay.tp, lay.ep
    cp = lay.cp  # context parallel: every rank computes on (and sends activations of) seq / cp tokens
    act = DTYPE_BYTES.get(tr.dtype, 4)
    sp = p.sequence_parallel and tp > 1
    expert_shard = lay.expert_tp * ep
    out_costs = []
    for layer, lw in zip(tr.layers, w.layers):
        kind = layer_kind(lw.name)
        f, bk = sharded_layer_times(tr, layer, mb, tp, cp)  # GEMMs at the rank's shapes (simcomm.llm.compute)
        if kind == "moe" and moe is not None:  # routed experts stretched by their load and grouped-GEMM tiles
            f, bk = f * moe.compute_factor, bk * moe.compute_factor
        extra = 0.0
        if p.recompute == "selective" and kind == "attn":
            extra = f * core_share(*seq_hidden(lw, meta), meta)  # selective: the core is recomputed
        elif p.recompute == "op" and kind in ("attn", "mlp", "moe"):
            shape = seq_hidden(lw, meta) if kind == "attn" else (0, 0)  # the MLP's share needs no shape
            extra = f * op_recompute_share(kind, *shape, meta)  # every second mm re-run
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
