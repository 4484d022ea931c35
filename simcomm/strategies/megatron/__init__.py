"""``megatron``: composable large-model layouts (tensor, sequence, pipeline, data/ZeRO and expert parallelism).

Ranks ``R = tp·pp·dp`` are placed tensor-parallel first (consecutive ranks, inside
a node), then pipeline, then data parallel (``order=tp-dp-pp`` swaps the last two, as
Megatron-core does by default; :mod:`simcomm.llm.placement`).
Every rank runs its pipeline stage's schedule of micro-batch tasks; the plan is
made only of the ordinary ops, so the engine does not know what it runs:

* **TP** (Megatron column/row, Shoeybi et al. 2019): per block per micro-batch
  an all-reduce of b·s·h after attention and after the MLP in forward (``g``), and
  one at each sublayer's input in backward (``f``): 4 per block; the compute
  after each waits for it.  The vocabulary-parallel embedding all-reduces its
  output in forward and the head its input gradient in backward.  With
  ``sequence_parallel`` (Korthikanti et al. 2022) each all-reduce becomes an
  all-gather before and a reduce-scatter after the sublayer, the same volume.
* **PP**: stages hold consecutive blocks (embed on the first, head on the last);
  a forward task sends its b·s·h activation to the next stage (Transfer), a
  backward task its gradient to the previous one.  Stages run GPipe, 1F1B or
  interleaved 1F1B orders; the bubble emerges from these dependencies.
* **DP**: with ``zero=0`` each gradient bucket is all-reduced over the replicas
  as soon as the last micro-batch's backward has produced it (DDP's overlap;
  ``overlap_grad_reduce=false``: after the whole backward, Megatron-LM's default);
  ZeRO-1/2 reduce-scatter instead, update their 1/dp shard and all-gather the
  parameters; ZeRO-3/FSDP all-gather each layer's parameters before its forward
  and again before its backward (one layer ahead) and reduce-scatter its
  gradients after its backward, every micro-batch.
* **EP** (MoE layers as Megatron-core runs them, :mod:`.moe`): the ``alltoall`` token
  dispatcher (token counts all-gathered, rows all-to-all'd over EP, all-gathered and
  reduce-scattered over the expert tensor-parallel group ``etp``, all-to-all'd back) or
  ``allgather`` (all-gather and reduce-scatter over ETP × EP), forward and backward;
  dropless or capacity routing, a router imbalance; the expert groups re-cut each stage's
  ranks (MoE parallel folding); routed experts' gradients are reduced over the
  expert-data-parallel group, the router's and shared experts' over dp.
* **CP** (``cp``, Megatron-core context parallelism): every rank holds s/cp tokens;
  each attention layer runs in cp pieces around a ring passing the K/V block (cp - 1
  steps forward; K/V and dK/dV, cp - 1 steps each, backward); gradients are reduced
  over dp × cp (docs/layouts.md).  ``cp_kind=ulysses`` (DeepSpeed-Ulysses, Jacobs et
  al. 2023) instead all-to-alls Q, K and V from sequence- to head-sharded before the
  attention core and its output back after it (4 per layer forward, 4 backward);
  ``cp_kind=a2a`` is Megatron-core's ``cp_comm_type="a2a"`` (TransformerEngine), which
  also re-sends the saved output in backward (5).
* **HSDP** (``shard_group`` with ZeRO-3, FSDP's HYBRID_SHARD): the ZeRO-3 gathers and
  reduce-scatters stay inside groups of that many replicas; each gradient shard is then
  all-reduced across the groups.
* ``recompute``: ``full`` re-runs each layer's forward (with its TP/EP
  communication) just before its backward; ``selective`` adds the attention
  core's share of the attention forward to its backward (:func:`core_share`).
* Tied embeddings with ``pp > 1``: the first and last stage all-reduce the word
  embedding's gradient (vocab·h/tp) before the optimizer step, as Megatron-LM does.

Closed form (uniform stages, free communication): 1F1B and GPipe take
``(m + p - 1)·(t_f + t_b)``; interleaving with v chunks ``(m + (p - 1)/v)·(t_f + t_b)``.
docs/strategies-llm.md derives every volume.

Modules: ``params`` (the options and their ``assumed`` lines), ``moe`` (MoE layers: dispatchers, routing,
expert compute), ``sizing`` (layout checks by :mod:`simcomm.llm.layout`'s rules, batch split, uneven stages,
replica folding), ``zero`` (the
data-parallel schedule a framework runs), ``emitter`` (the plan's core: layer, pass, pipeline task, plan; its
per-layer seconds and bytes are :mod:`simcomm.llm.compute`'s, which ``plan``'s estimate reads too) with its
mixins ``comm`` (tensor/sequence and expert-parallel collectives around a layer), ``context`` (ring and
Ulysses attention) and ``data`` (data parallelism, ZeRO/FSDP/HSDP, tied embeddings, the optimizer step), and
``strategy`` (the registered :class:`Megatron`).
"""


from simcomm.strategies.megatron.params import CP_KINDS, RECOMPUTE, REPLICAS, MegatronParams
from simcomm.strategies.megatron.sizing import (
                                                FOLD_ABOVE,
                                                BatchSizes,
                                                batch_sizes,
                                                fold_computes,
                                                layout_of,
                                                live_replicas,
                                                resolve_layout,
                                                stage_layers,
                                                virtual_stage_layers,
)
from simcomm.strategies.megatron.strategy import Megatron

__all__ = ["CP_KINDS", "FOLD_ABOVE", "RECOMPUTE", "REPLICAS", "BatchSizes", "Megatron", "MegatronParams",
           "batch_sizes", "fold_computes", "layout_of", "live_replicas", "resolve_layout", "stage_layers",
           "virtual_stage_layers"]
