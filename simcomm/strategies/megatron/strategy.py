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
        states (``meta["transformer"]``, :func:`simcomm.llm.models.config_from_meta`); for a trace with no
        transformer blocks (tp, pp, cp and ep are then 1) a data-parallel replica's peak at the micro-batch with
        the state ZeRO-sharded (:mod:`simcomm.memory.replicated`); a line when a transformer trace states no
        shape."""
        peak_at, _, sizes = self._peak_at(workload)
        return peak_at if isinstance(peak_at, str) else peak_at(sizes.microbatch)

    def memory_knob(self, workload):
        """(key, its value, the peak at another value of it): what sets the micro-batch whose activations a
        rank holds, for the largest value that fits (``--batch`` when the micro-batch is the replica's whole
        per-rank batch, else ``microbatch``); None without a peak."""
        peak_at, lay, sizes = self._peak_at(workload)
        if isinstance(peak_at, str):
            return None
        p = self.params
        if p.microbatch is None and p.microbatches is None and p.global_batch is None and lay.pp == 1 \
                and workload.scaling != "strong":
            per = sizes.microbatch // workload.batch  # a replica's ranks (tp of them) share its samples
            return "batch", workload.batch, lambda batch: peak_at(batch * per)
        return "microbatch", sizes.microbatch, peak_at

    def _peak_at(self, workload):
        """(the rank's peak as a function of the micro-batch, or the line saying why there is none; the
        placement; the batch sizes)."""
        from simcomm.llm.models import config_from_meta
        from simcomm.llm.placement import structure
        from simcomm.memory import layout as memory_layout
        from simcomm.memory import replicated

        p = self.params
        names = [layer.name for layer in workload.layers]
        lay, _, sizes = resolve_layout(p, workload, names)
        trace = workload.trace
        cfg = config_from_meta(trace.meta.get("transformer") or {}, trace.model)
        if cfg is None:
            if structure(names) is not None:
                return ("memory: not checked (the layout shards model state, and the trace states no transformer "
                        "shape the memory model knows)"), lay, sizes
            # no transformer blocks: resolve_layout allows tp = pp = cp = ep = 1, so a rank is a data-parallel
            # replica whose state ZeRO shards over its shard group (HSDP) or every replica
            optimizer = str(trace.meta.get("optimizer", "sgd"))
            shards = p.shard_group or lay.data
            return (lambda mb: replicated.estimate(trace, mb, optimizer=optimizer, zero=p.zero,
                                                   shards=shards).peak()), lay, sizes
        dtype = "fp32" if trace.dtype in ("fp32", "float32") else "bf16"
        gather: dict = {}
        if p.zero >= 3:  # the framework's gather unit and buckets (DeepSpeed gathers leaf modules)
            sched = resolve_schedule(p, lay.data, 2.0)
            gather = {"gather_unit": sched.unit, "prefetch_params": sched.prefetch_params,
                      "reduce_bucket_params": sched.reduce_bucket_params}
        common = dict(tp=lay.tp, pp=lay.pp, dp=lay.data, cp=lay.cp, ep=lay.ep, etp=lay.etp, zero=p.zero,
                      shard_group=p.shard_group, microbatches=sizes.microbatches,
                      sequence_parallel=p.sequence_parallel, recompute=p.recompute, schedule=p.schedule,
                      virtual_stages=lay.virtual, dtype=dtype, stage_layers=stage_layers(p, cfg.layers),
                      offload_layers=p.offload_layers, **gather)
        return (lambda mb: memory_layout.estimate(cfg, micro_batch=mb, **common).peak()), lay, sizes

    def plan(self, workload, topology):
        names = [layer.name for layer in workload.layers]
        lay, s, sizes = resolve_layout(self.params, workload, names)
        # what the folds assume of the cluster (symmetry.py), checked on its routes only when a plan folds
        folds = lay.dp > 1 and live_replicas(self.params, lay, workload, sizes.microbatches) < lay.dp
        return Emitter(self.params, lay, s, sizes, workload, topology.n_ranks,
                       rings_alike=folds and lay.cp > 1 and rings_alike(lay, topology),
                       replicas_apart=not folds or replicas_apart(lay, topology)).plan()

