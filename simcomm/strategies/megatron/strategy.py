"""The registered ``megatron`` strategy: its one-line description, its memory check and its plan.

The plan itself is :class:`~simcomm.strategies.megatron.emitter.Emitter`'s; what the layout does is told
in the package docstring (:mod:`simcomm.strategies.megatron`).
"""

from __future__ import annotations

from simcomm.strategies.base import Strategy, register
from simcomm.strategies.megatron.emitter import Emitter
from simcomm.strategies.megatron.params import MegatronParams
from simcomm.strategies.megatron.sizing import live_replicas, resolve_layout, stage_layers
from simcomm.strategies.megatron.symmetry import replicas_apart, rings_alike
from simcomm.strategies.megatron.zero import resolve_schedule


@register
class Megatron(Strategy):
    """Tensor, sequence, pipeline, data (ZeRO/FSDP) and expert parallelism composed (package docstring)."""

    name = "megatron"
    summary = "large-model layout: tensor, sequence, pipeline (GPipe/1F1B/interleaved), ZeRO/FSDP and expert parallel"
    reference = ("Narayanan et al. SC'21 (Megatron-LM); Korthikanti et al. 2022; Rajbhandari et al. 2020 (ZeRO); "
                 "Huang et al. 2019 (GPipe); Lepikhin et al. 2020 (GShard)")
    Params = MegatronParams
    #: exposed time per parallelism (Result.exposed_by): the streams this layout's ops use
    comm_streams = {"tp": "tensor", "cp": "context", "ep": "expert", "pp": "pipeline", "dp": "data", "ag": "data",
                    "rs": "data"}

    def describe(self) -> str:
        p = self.params
        parts = [f"tp {p.tp}"] + ([f"cp {p.cp}" + (f" {p.cp_kind}" if p.cp_kind != "ring" else "")]
                                  if p.cp > 1 else []) + \
            [f"pp {p.pp}", f"dp {'rest' if p.dp is None else p.dp}", f"schedule {p.schedule}"]
        if p.virtual > 1:
            parts.append(f"virtual {p.virtual}")
        if p.sequence_parallel:
            parts.append("sequence parallel")
        parts += [f"zero {p.zero}" + (f" shard group {p.shard_group}" if p.shard_group else ""),
                  f"recompute {p.recompute}"]
        if p.order != "tp-pp-dp":
            parts.append(f"order {p.order}")
        if p.experts_parallel > 1 or p.etp is not None:
            parts.append(f"ep {p.experts_parallel}" + (f" etp {p.etp}" if p.etp is not None else "")
                         + f" {p.moe_dispatcher} " + ("dropless" if p.capacity_factor is None else
                                                       f"capacity {p.capacity_factor:g}"
                                                       + (" padded" if p.pad_to_capacity else ""))
                         + (f" imbalance {p.moe_imbalance:g}" if p.moe_imbalance != 1 else ""))
        return f"megatron ({', '.join(parts)})"

    def memory(self, workload):
        """The layout's own peak (simcomm.memory.layout: sharded state, activations per attention and
        recomputation kind, in-flight micro-batches of the schedule, stage buffers) of the shape the trace
        states (``meta["transformer"]``, :func:`simcomm.llm.models.config_from_meta`); a line when it states
        none."""
        from simcomm.llm.models import config_from_meta
        from simcomm.memory import layout as memory_layout

        cfg = config_from_meta(workload.trace.meta.get("transformer") or {}, workload.trace.model)
        if cfg is None:
            return ("memory: not checked (the layout shards model state, and the trace states no transformer "
                    "shape the memory model knows)")
        p = self.params
        lay, _, sizes = resolve_layout(p, workload, [layer.name for layer in workload.layers])
        dtype = "fp32" if workload.trace.dtype in ("fp32", "float32") else "bf16"
        gather: dict = {}
        if p.zero >= 3:  # the framework's gather unit and buckets (DeepSpeed gathers leaf modules)
            sched = resolve_schedule(p, lay.data, 2.0)
            gather = {"gather_unit": sched.unit, "prefetch_params": sched.prefetch_params,
                      "reduce_bucket_params": sched.reduce_bucket_params}
        return memory_layout.estimate(cfg, tp=lay.tp, pp=lay.pp, dp=lay.data, cp=lay.cp, ep=lay.ep, etp=lay.etp,
                                      zero=p.zero,
                                      shard_group=p.shard_group, micro_batch=sizes.microbatch,
                                      microbatches=sizes.microbatches, sequence_parallel=p.sequence_parallel,
                                      recompute=p.recompute, schedule=p.schedule, virtual_stages=lay.virtual,
                                      dtype=dtype, stage_layers=stage_layers(p, cfg.layers),
                                      offload_layers=p.offload_layers, **gather).peak()

    def plan(self, workload, topology):
        names = [layer.name for layer in workload.layers]
        lay, s, sizes = resolve_layout(self.params, workload, names)
        # what the folds assume of the cluster (symmetry.py), checked on its routes only when a plan folds
        folds = lay.dp > 1 and live_replicas(self.params, lay, workload, sizes.microbatches) < lay.dp
        return Emitter(self.params, lay, s, sizes, workload, topology.n_ranks,
                       rings_alike=folds and lay.cp > 1 and rings_alike(lay, topology),
                       replicas_apart=not folds or replicas_apart(lay, topology)).plan()

