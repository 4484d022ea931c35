"""``megatron``'s options: :class:`MegatronParams`, the choices of its string options, and its ``assumed`` lines.

Every value is checked here, once, as the options are parsed (one ``error:`` line naming the field and
the valid choices); the layout's own divisibility checks, which need the trace and the cluster, are in
:mod:`simcomm.strategies.megatron.sizing`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.llm.placement import ORDERS, SCHEDULES
from simcomm.memory.activations import RECOMPUTE
from simcomm.strategies.common import check_choice

#: context parallelism: ``ring`` (TransformerEngine's p2p ring attention), ``ulysses`` (DeepSpeed-Ulysses
#: all-to-alls), ``a2a`` (Megatron-core/TransformerEngine's all-to-all variant: one more in backward)
CP_KINDS = ("ring", "ulysses", "a2a")
#: replicas: ``one`` simulates replica 0 (the replicas one expert-parallel group or context-parallel ring
#: spans) and the data-parallel collectives over all; ``all`` every replica; ``auto`` folds when dp > 1,
#: compute is uniform and the plan is large
REPLICAS = ("auto", "one", "all")
#: Megatron-core's --moe-token-dispatcher-type (megatron/core/transformer/moe/token_dispatcher.py): ``alltoall``
#: (MoEAlltoAllTokenDispatcher: tokens all-to-all'd over the EP group) or ``allgather``
#: (MoEAllGatherTokenDispatcher: every token all-gathered over the ETP × EP group, reduce-scattered back);
#: ``flex`` (DeepEP) is not modelled
DISPATCHERS = ("alltoall", "allgather")


def _pos(name: str, value, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name.replace('_', '-')}: {value!r} must be a positive integer")


def _check_schedule(p) -> None:
    """The framework and its schedule options: one error line each (names and valid choices)."""
    from simcomm.frameworks import RESHARD, UNITS, get_framework

    if p.framework is not None:
        get_framework(p.framework)
    if p.prefetch is not None and (isinstance(p.prefetch, bool) or not isinstance(p.prefetch, int) or p.prefetch < 0):
        raise ConfigError(f"prefetch: {p.prefetch!r} must be a non-negative integer (units gathered ahead; 0: on demand)")
    for name in ("max_live_params", "reduce_bucket_params", "grad_bucket_mb"):
        value = getattr(p, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value < 0):
            raise ConfigError(f"{name.replace('_', '-')}: {value!r} must be a non-negative number (0: "
                              + ("no limit)" if name == "max_live_params" else
                                 "one reduce-scatter per gather unit)" if name == "reduce_bucket_params" else
                                 "one bucket)"))
    if p.gather_unit is not None:
        check_choice("gather_unit", p.gather_unit, UNITS)
    if p.reshard_after_forward is not None and reshard_policy(p.reshard_after_forward) not in RESHARD:
        raise ConfigError(f"reshard-after-forward: {p.reshard_after_forward!r} is not valid; valid choices: "
                          f"true, false, {', '.join(RESHARD)}")
    if p.reduce_stream is not None:
        check_choice("reduce_stream", p.reduce_stream, REDUCE_STREAMS)


#: reshard_after_forward's boolean spellings (FSDP's own): true re-gathers every unit in backward, false none
RESHARD_ALIASES = {"true": "all", "false": "none"}
def reshard_policy(value) -> str:
    """The reshard-after-forward policy a spelling means (``true`` -> ``all``, ``false`` -> ``none``)."""
    text = str(value).strip().lower()
    return RESHARD_ALIASES.get(text, text)


#: where gradient reductions run: their own stream (overlapping compute) or the compute stream (serialised)
REDUCE_STREAMS = ("separate", "compute")


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


@dataclass(frozen=True)
class MegatronParams:
    """Options of ``megatron`` (the layout)."""

    tp: int = 1
    pp: int = 1
    dp: int | None = None  # None: the rest of the ranks, R / (tp·pp)
    microbatch: int | None = None  # samples per micro-batch
    microbatches: int | None = None  # per replica per iteration
    global_batch: int | None = None  # None: the workload's (per-rank batch × ranks)
    schedule: str = "1f1b"
    virtual: int = 1  # model chunks per rank (interleaved)
    sequence_parallel: bool = False
    zero: int = 0
    recompute: str = "none"
    experts_parallel: int = 1
    # MoE (docs/strategies-llm.md, "Expert parallelism"): --moe-expert-capacity-factor (None: dropless, Megatron-core's
    # default), --moe-pad-expert-input-to-capacity, --moe-token-dispatcher-type, --expert-tensor-parallel-size
    # (None: tp, Megatron-core's default), and the busiest expert-parallel rank's routed load over the mean
    capacity_factor: float | None = None
    pad_to_capacity: bool = False
    moe_dispatcher: str = "alltoall"
    etp: int | None = None
    moe_imbalance: float = 1.0
    order: str = "tp-pp-dp"  # rank order, innermost first
    # None: the framework's (no framework: True); False: Megatron-LM's default, reduced after the last backward
    overlap_grad_reduce: bool | None = None
    replicas: str = "auto"  # one: fold identical replicas (simulate replica 0 + full DP collectives); all; auto
    cp: int = 1  # context parallel: the sequence split cp ways, K/V passed around a ring in each attention layer
    cp_kind: str = "ring"  # ring (p2p ring attention), ulysses (DeepSpeed-Ulysses all-to-alls), a2a (Megatron-core)
    shard_group: int | None = None  # HSDP (zero 3): parameters sharded within groups of this many replicas
    # Megatron-core's --decoder-first/last-pipeline-num-layers: blocks on the first / last stage (None: an even
    # share); the other stages split the rest evenly (Llama 3 405B: 126 layers on 16 stages, 7 + 14 x 8 + 7)
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    # how the framework schedules data parallelism and ZeRO (simcomm.frameworks; docs/strategies-llm.md): the
    # scenario's ``framework`` sets the defaults of the options below (None: the framework's, or the generic one)
    framework: str | None = None
    prefetch: int | None = None  # ZeRO-3: gather units all-gathered ahead of the one computing (0: on demand)
    gather_unit: str | None = None  # ZeRO-3: layer, block (FSDP's wrapped module) or module (DeepSpeed leaf Linear)
    max_live_params: float | None = None  # ZeRO-3: gathered parameters live at once (DeepSpeed; 0: no limit)
    reshard_after_forward: str | None = None  # ZeRO-3: true/all, false/none, not-root (FSDP2), not-last (torchtitan)
    reduce_bucket_params: float | None = None  # ZeRO-3: gradient reduce-scatter bucket, parameters (0: per unit)
    grad_bucket_mb: float | None = None  # zero 0-2: gradient bucket in MB (0: one bucket)
    reduce_stream: str | None = None  # separate (own stream, overlapping compute) or compute (serialised)
    overlap_param_gather: bool | None = None  # zero 1-2: updated parameters gathered during the next forward
    # Megatron-core's --cpu-offloading --cpu-offloading-num-layers: activations of this many blocks per stage
    # kept in host memory until their backward (memory only: the copies' time is not simulated)
    offload_layers: int = 0

    def __post_init__(self):
        for name in ("tp", "pp", "virtual", "experts_parallel", "cp"):
            _pos(name, getattr(self, name))
        for name in ("dp", "microbatch", "microbatches", "global_batch", "shard_group", "first_stage_layers",
                     "last_stage_layers"):
            _pos(name, getattr(self, name), optional=True)
        _pos("etp", self.etp, optional=True)
        if self.shard_group is not None and self.zero != 3:
            raise ConfigError(f"shard-group: {self.shard_group} shards parameters within groups of replicas "
                              f"(HSDP, FSDP's HYBRID_SHARD) and needs zero 3, not zero {self.zero}")
        if isinstance(self.offload_layers, bool) or not isinstance(self.offload_layers, int) \
                or self.offload_layers < 0:
            raise ConfigError(f"offload-layers: {self.offload_layers!r} must be an integer >= 0")
        check_choice("schedule", self.schedule, SCHEDULES)
        check_choice("recompute", self.recompute, RECOMPUTE)
        check_choice("order", self.order, ORDERS)
        check_choice("replicas", self.replicas, REPLICAS)
        check_choice("cp_kind", self.cp_kind, CP_KINDS)
        _check_schedule(self)
        if isinstance(self.zero, bool) or self.zero not in (0, 1, 2, 3):
            raise ConfigError(f"zero: {self.zero!r} is not valid; valid choices: 0, 1, 2, 3 (3 = FSDP full shard)")
        check_choice("moe_dispatcher", self.moe_dispatcher, DISPATCHERS)
        if self.capacity_factor is not None and not _positive(self.capacity_factor):
            raise ConfigError(f"capacity-factor: {self.capacity_factor!r} must be a positive number "
                              "(leave it out for dropless routing)")
        if self.pad_to_capacity and self.capacity_factor is None:
            raise ConfigError("pad-to-capacity: padding to capacity needs capacity-factor (Megatron-core asserts "
                              "--moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity)")
        if not _positive(self.moe_imbalance) or self.moe_imbalance < 1:
            raise ConfigError(f"moe-imbalance: {self.moe_imbalance!r} must be a number >= 1 (the busiest "
                              "expert-parallel rank's routed tokens over the mean)")
        if self.virtual > 1 and self.schedule != "interleaved":
            raise ConfigError(f"virtual: {self.virtual} chunks per rank need schedule interleaved "
                              f"(not {self.schedule})")
        if self.schedule == "interleaved" and self.pp < 2:
            raise ConfigError("schedule: interleaved needs pp >= 2 (it interleaves pipeline stages)")

    @property
    def assumed(self) -> tuple[str, ...]:
        out = ["placement: tensor-parallel ranks consecutive (inside a node), then "
               + ("pipeline stages, then data-parallel replicas" if self.order == "tp-pp-dp"
                  else "data-parallel replicas, then pipeline stages (Megatron-core's default order)")]
        if self.zero == 3:
            out.append("zero 3: parameters all-gathered before every micro-batch's forward and backward, "
                       "gradients reduce-scattered after each (FSDP without no_sync, DeepSpeed ZeRO-3)")
        if self.shard_group is not None:
            out.append(f"hsdp: parameters sharded within groups of {self.shard_group} consecutive replicas "
                       "(all-gather and reduce-scatter inside a group), each gradient shard all-reduced across "
                       "the groups after its reduce-scatter (FSDP HYBRID_SHARD)")
        if self.offload_layers:
            out.append(f"activation offload: {self.offload_layers} block(s) per pipeline stage keep their "
                       "activations in host memory until their backward (Megatron-core --cpu-offloading, "
                       "TransformerEngine's offload context); the device-host copies are assumed hidden behind "
                       "compute (not simulated)")
        if self.cp > 1 and self.cp_kind != "ring":
            bwd = "4 (the output gradient, then dQ, dK, dV" if self.cp_kind == "ulysses" else \
                "5 (the saved output and its gradient, then dQ, dK, dV"
            out.append(f"context parallel {self.cp} (cp_kind {self.cp_kind}, "
                       + ("DeepSpeed-Ulysses" if self.cp_kind == "ulysses" else
                          "Megatron-core cp_comm_type a2a, TransformerEngine") + f"): each sequence split {self.cp} "
                       "ways (CP ranks right outside TP); per attention layer all-to-alls over the CP group of Q, K "
                       "and V (sequence- to head-sharded) before the attention core and of its output after it, "
                       f"4 forward; backward {bwd}); the core waits for them (not overlapped); the layer's time "
                       "split into QKV projection, core and output projection by their FLOPs; gradients reduced "
                       "over dp × cp")
        elif self.cp > 1:
            placed = "tp-cp-dp-pp, Megatron-core's" if self.order == "tp-dp-pp" else "tp-cp-pp-dp"
            out.append(f"context parallel {self.cp} (cp_kind ring): each sequence split {self.cp} ways (CP ranks "
                       f"right outside TP: {placed} order); per attention layer {self.cp - 1} ring steps "
                       f"of the K/V block forward, {self.cp - 1} of K/V and {self.cp - 1} of dK/dV backward, overlapped "
                       f"with the attention computed in {self.cp} equal pieces (TransformerEngine's p2p ring; the "
                       "first send starts with the layer, not after the QKV projection: slightly optimistic); "
                       "gradients reduced over dp × cp")
        return tuple(out)

