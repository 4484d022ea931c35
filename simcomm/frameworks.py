"""Training frameworks: how each one schedules its data-parallel and ZeRO/FSDP collectives, with its defaults.

A framework (scenario key ``framework``) sets the defaults of the ``megatron`` layout's data-parallel
schedule; every default is printed as one ``assumed:`` line naming the framework, its version and the
source file it comes from, and each can be changed by a strategy option (:mod:`simcomm.strategies.megatron.zero`).
The defaults were read in the frameworks' own code (docs/strategies-llm.md, "Data parallelism and ZeRO"):

* **megatron-core** (``megatron/core/distributed/distributed_data_parallel_config.py``): gradient buckets
  of ``max(40M, 1M x dp)`` parameters; ``overlap_grad_reduce`` and ``overlap_param_gather`` both False;
  ZeRO-3 is Megatron-FSDP (``use_megatron_fsdp``), gathered per transformer layer.
* **nemo** (NeMo 2, ``nemo/lightning/pytorch/strategies/megatron_strategy.py`` and its
  communication-overlap guide): Megatron-core underneath with both overlaps on.
* **deepspeed** (``deepspeed/runtime/zero/config.py``, ``partitioned_param_coordinator.py``,
  ``stage3.py``, ``stage_1_and_2.py``): stage 3 fetches each leaf module's parameters on demand and
  prefetches up to ``stage3_prefetch_bucket_size`` = 5e7 elements ahead within
  ``stage3_max_live_parameters`` = 1e9, on its own all-gather stream; gradients in buckets of
  ``reduce_bucket_size`` = 5e8 elements; ``overlap_comm`` is True for stage 3 and False for stages 1-2
  (the reduction then runs on the compute stream); stages 1-2 all-gather the updated parameters after the
  step (``allgather_bucket_size`` 5e8).
* **fsdp1** (PyTorch ``torch/distributed/fsdp``, FullyShardedDataParallel): FULL_SHARD per wrapped
  transformer block, ``backward_prefetch=BACKWARD_PRE``, ``forward_prefetch=False``,
  ``limit_all_gathers=True`` (``_FreeEventQueue``: at most 2 all-gathers in flight), reduce-scatter per
  unit on the post-backward stream; DDP (zero 0) buckets of 25 MB overlapped with backward.
* **fsdp2** (PyTorch ``torch/distributed/_composable/fsdp``, ``fully_shard``): per block, implicit
  one-module prefetch in forward, one-module backward prefetch, ``reshard_after_forward=True`` except the
  root module (embedding and head), all-gather and reduce-scatter on their own streams.
* **torchtitan** (``torchtitan/models/llama3/infra/parallelize.py``): FSDP2 with
  ``reshard_after_forward_policy="default"``: the last transformer block is not resharded after forward.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.registry import Registry

__all__ = ["Framework", "FRAMEWORKS", "FRAMEWORK_NAMES", "FRAMEWORK_REGISTRY", "get_framework"]

#: ZeRO-3 gather units: ``layer`` (each simcomm layer: an attention or MLP sublayer), ``block`` (a transformer
#: block, attention + MLP: FSDP's wrapped module), ``module`` (each leaf Linear of a layer: DeepSpeed's fetch unit)
UNITS = ("layer", "block", "module")
#: reshard-after-forward policies: ``all``; ``none`` (FSDP's SHARD_GRAD_OP: no backward all-gather);
#: ``not-root`` (FSDP2: not the root module, whose embedding and head are used at once in backward);
#: ``not-last`` (torchtitan: neither the root nor the last transformer block)
RESHARD = ("all", "none", "not-root", "not-last")
#: how gradients are reduced: ``overlap`` (each bucket on its own stream once ready), ``end`` (after the whole
#: backward), ``serial`` (on the compute stream as each bucket fills: DeepSpeed's overlap_comm=false)
GRAD_REDUCE = ("overlap", "end", "serial")


@dataclass(frozen=True)
class Framework:
    """One framework's defaults for the data-parallel schedule (None: the generic schedule's)."""

    name: str
    label: str  # name and version, as printed
    source: str  # where the defaults are read
    unit: str  # ZeRO-3 gather unit (UNITS)
    prefetch: int  # ZeRO-3 units gathered ahead of the one computing
    prefetch_params: float | None  # DeepSpeed: each fetch prefetches the next units up to this many parameters
    max_live_params: float | None  # no prefetch while this many gathered parameters are live (None: no limit)
    reshard: str  # RESHARD policy
    zero3_reduce_params: float | None  # ZeRO-3 gradient reduce-scatter bucket in parameters (None: per unit)
    grad_reduce: str  # GRAD_REDUCE, zero 0-2
    grad_reduce_zero3: str  # GRAD_REDUCE of ZeRO-3's reduce-scatters ("overlap" or "serial")
    grad_bucket: str  # zero 0-2 gradient buckets: "megatron" (max(40M, 1M x dp) params), "NUMBER" params, "MB:25"
    overlap_param_gather: bool  # zero 1-2: the updated parameters gathered during the next forward
    why: str  # one phrase on what the framework does (simcomm list frameworks)
    sources: dict  # topic (unit, prefetch, live, reshard, zero3_reduce, buckets, grad_reduce, param_gather) -> source


FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (
    Framework("megatron-core", "Megatron-core 0.14",
              "megatron/core/distributed/distributed_data_parallel_config.py, param_and_grad_buffer.py",
              unit="block", prefetch=1, prefetch_params=None, max_live_params=None, reshard="all", zero3_reduce_params=None,
              grad_reduce="end", grad_reduce_zero3="overlap", grad_bucket="megatron", overlap_param_gather=False,
              why="DistributedDataParallelConfig defaults: overlap_grad_reduce=False, overlap_param_gather=False, "
                  "bucket_size max(40M, 1M x dp) parameters; ZeRO-3 is Megatron-FSDP, gathered per transformer layer",
              sources={"unit": "megatron/core/distributed/fsdp (Megatron-FSDP; its own bucketing not read in detail: "
                               "approximated as one unit per TransformerLayer)",
                       "prefetch": "Megatron-FSDP, approximated as FSDP's one-layer prefetch (not read in detail)",
                       "live": "the framework has no such limit", "reshard": "Megatron-FSDP optim_grads_params",
                       "zero3_reduce": "Megatron-FSDP: reduce-scatter per layer on its own stream",
                       "buckets": "distributed_data_parallel_config.py bucket_size=None: max(40M, 1M x dp) params",
                       "grad_reduce": "distributed_data_parallel_config.py overlap_grad_reduce=False",
                       "param_gather": "distributed_data_parallel_config.py overlap_param_gather=False"}),
    Framework("nemo", "NeMo 2.x (Megatron-core 0.14)",
              "nemo/lightning/pytorch/strategies/megatron_strategy.py; docs communication_overlap.rst",
              unit="block", prefetch=1, prefetch_params=None, max_live_params=None, reshard="all", zero3_reduce_params=None,
              grad_reduce="overlap", grad_reduce_zero3="overlap", grad_bucket="megatron", overlap_param_gather=True,
              why="Megatron-core with the recipes' overlap_grad_sync=True and overlap_param_gather=True (gradients "
                  "reduced in fp32 by default there: give --wire-dtype fp32 to match)",
              sources={"unit": "Megatron-FSDP under NeMo (approximated per TransformerLayer, not read in detail)",
                       "prefetch": "Megatron-FSDP, approximated as FSDP's one-layer prefetch (not read in detail)",
                       "live": "the framework has no such limit", "reshard": "Megatron-FSDP optim_grads_params",
                       "zero3_reduce": "Megatron-FSDP", "buckets": "Megatron-core bucket_size default",
                       "grad_reduce": "NeMo recipes' ddp config overlap_grad_sync=True (communication_overlap.rst)",
                       "param_gather": "NeMo recipes' overlap_param_gather=True (communication_overlap.rst)"}),
    Framework("deepspeed", "DeepSpeed 0.16",
              "deepspeed/runtime/zero/config.py, partitioned_param_coordinator.py, stage3.py, stage_1_and_2.py",
              unit="module", prefetch=1, prefetch_params=5e7, max_live_params=1e9, reshard="all",
              zero3_reduce_params=5e8, grad_reduce="serial", grad_reduce_zero3="overlap", grad_bucket="500000000",
              overlap_param_gather=False,
              why="stage 3 fetches each leaf module on demand and prefetches up to stage3_prefetch_bucket_size 5e7 "
                  "elements ahead within stage3_max_live_parameters 1e9, on its own all-gather stream; "
                  "reduce_bucket_size 5e8 elements; overlap_comm True for stage 3, False for stages 1-2 "
                  "(reduction on the compute stream); stages 1-2 all-gather the parameters after the step",
              sources={"unit": "partitioned_param_coordinator.py fetch_sub_module (leaf modules)",
                       "prefetch": "config.py stage3_prefetch_bucket_size=5e7",
                       "live": "config.py stage3_max_live_parameters=1e9",
                       "reshard": "partitioned_param_coordinator.py release_sub_module",
                       "zero3_reduce": "config.py reduce_bucket_size=5e8, overlap_comm=None -> True for stage 3",
                       "buckets": "config.py reduce_bucket_size=5e8",
                       "grad_reduce": "config.py overlap_comm=None -> False for stages 1-2 (stage_1_and_2.py reduces "
                                      "on the current stream)",
                       "param_gather": "stage_1_and_2.py step: all_gather_dp_groups after the update"}),
    Framework("deepspeed-0.3", "DeepSpeed 0.3.13-0.3.16 (the March 2021 ZeRO-3 release)",
              "deepspeed/runtime/zero/stage3.py of that release (PartitionedParameterCoordinator, "
              "FP16_DeepSpeedZeroOptimizer_Stage3)",
              unit="module", prefetch=1, prefetch_params=2.5e7, max_live_params=7e8, reshard="all",
              zero3_reduce_params=5e8, grad_reduce="serial", grad_reduce_zero3="serial", grad_bucket="500000000",
              overlap_param_gather=False,
              why="each leaf module fetched on demand (fetch_sub_module blocks on torch.cuda.synchronize), the next "
                  "parameters prefetched up to prefetch_elements 2.5e7 only when none is in flight and fewer than "
                  "max_available_parameters_in_numel 7e8 are live; overlap_comm=False: the gradients' "
                  "reduce-scatter (buckets of reduce_bucket_size 5e8) runs on the compute stream",
              sources={"unit": "stage3.py fetch_sub_module (leaf modules, blocking)",
                       "prefetch": "stage3.py prefetch_elements=25000000, only when none is in flight",
                       "live": "stage3.py PartitionedParameterCoordinator max_available_parameters_in_numel=7e8",
                       "reshard": "stage3.py release_sub_module",
                       "zero3_reduce": "stage3.py reduce_bucket_size=5e8, overlap_comm=False (reduction_stream = "
                                       "the current stream)",
                       "buckets": "reduce_bucket_size=5e8", "grad_reduce": "overlap_comm=False",
                       "param_gather": "after the step"}),
    Framework("fsdp1", "PyTorch 2.5 FSDP (FullyShardedDataParallel)",
              "torch/distributed/fsdp/fully_sharded_data_parallel.py, _runtime_utils.py, _limiter_utils.py",
              unit="block", prefetch=1, prefetch_params=None, max_live_params=None, reshard="all", zero3_reduce_params=None,
              grad_reduce="overlap", grad_reduce_zero3="overlap", grad_bucket="MB:25", overlap_param_gather=False,
              why="FULL_SHARD per wrapped block, backward_prefetch=BACKWARD_PRE, forward_prefetch=False, "
                  "limit_all_gathers=True (at most 2 all-gathers in flight: the next waits for the free of the "
                  "unit two back); reduce-scatter per unit on the post-backward stream; DDP buckets of 25 MB",
              sources={"unit": "auto_wrap_policy per transformer block (FULL_SHARD)",
                       "prefetch": "_runtime_utils.py _unshard: limit_all_gathers=True, _limiter_utils.py "
                                   "_FreeEventQueue (2 in flight); backward_prefetch=BACKWARD_PRE",
                       "live": "FSDP has no such limit beyond its rate limiter", "reshard": "FULL_SHARD reshards after forward",
                       "zero3_reduce": "_runtime_utils.py _post_backward_hook: reduce-scatter per unit on the "
                                       "post-backward stream",
                       "buckets": "DistributedDataParallel bucket_cap_mb=25", "grad_reduce": "DDP: as buckets fill",
                       "param_gather": "FSDP has no ZeRO-1/2 of this kind (its SHARD_GRAD_OP is zero 3 with "
                                       "reshard_after_forward=false): simcomm's after-step gather"}),
    Framework("fsdp2", "PyTorch 2.5 FSDP2 (fully_shard)",
              "torch/distributed/_composable/fsdp/fully_shard.py, _fsdp_param_group.py, _fsdp_state.py",
              unit="block", prefetch=1, prefetch_params=None, max_live_params=None, reshard="not-root", zero3_reduce_params=None,
              grad_reduce="overlap", grad_reduce_zero3="overlap", grad_bucket="MB:25", overlap_param_gather=False,
              why="fully_shard per block: implicit one-module forward prefetch, one-module backward prefetch, "
                  "reshard_after_forward=True except the root module (embedding, head); all-gather and "
                  "reduce-scatter on their own streams",
              sources={"unit": "fully_shard per transformer block",
                       "prefetch": "_fsdp_state.py: implicit forward prefetch (all-gather stream), one-module "
                                   "backward prefetch",
                       "live": "the framework has no such limit", "reshard": "fully_shard.py reshard_after_forward=True, root kept",
                       "zero3_reduce": "_fsdp_param_group.py post_backward: reduce-scatter stream",
                       "buckets": "DistributedDataParallel bucket_cap_mb=25", "grad_reduce": "DDP: as buckets fill",
                       "param_gather": "FSDP has no ZeRO-1/2 of this kind (its SHARD_GRAD_OP is zero 3 with "
                                       "reshard_after_forward=false): simcomm's after-step gather"}),
    Framework("torchtitan", "torchtitan 0.1 (FSDP2)",
              "torchtitan/models/llama3/infra/parallelize.py (apply_fsdp), torch/distributed/_composable/fsdp",
              unit="block", prefetch=1, prefetch_params=None, max_live_params=None, reshard="not-last", zero3_reduce_params=None,
              grad_reduce="overlap", grad_reduce_zero3="overlap", grad_bucket="MB:25", overlap_param_gather=False,
              why="FSDP2 per transformer block with reshard_after_forward_policy 'default': the last block (and "
                  "the root) kept gathered from forward into backward",
              sources={"unit": "parallelize.py apply_fsdp: fully_shard per TransformerBlock",
                       "prefetch": "FSDP2 implicit prefetch", "live": "the framework has no such limit",
                       "reshard": "parallelize.py reshard_after_forward_policy='default' (not the last block)",
                       "zero3_reduce": "FSDP2 reduce-scatter stream", "buckets": "DDP bucket_cap_mb=25",
                       "grad_reduce": "DDP: as buckets fill",
                       "param_gather": "FSDP has no ZeRO-1/2 of this kind (its SHARD_GRAD_OP is zero 3 with "
                                       "reshard_after_forward=false): simcomm's after-step gather"}),
)}
FRAMEWORK_NAMES = tuple(FRAMEWORKS)
#: the catalogue ``simcomm list frameworks`` prints (the table above, with each one's source)
FRAMEWORK_REGISTRY: Registry[Framework] = Registry("framework")
for _f in FRAMEWORKS.values():
    FRAMEWORK_REGISTRY.add(_f.name, _f, summary=f"{_f.label}: {_f.why}", reference=_f.source)


def get_framework(name: str) -> Framework:
    """The framework called ``name`` (one error line naming the valid choices otherwise)."""
    if name not in FRAMEWORKS:
        raise ConfigError(f"framework: {name!r} is not valid; valid choices: {', '.join(FRAMEWORK_NAMES)}")
    return FRAMEWORKS[name]
