"""``megatron``: composable large-model layouts (tensor, sequence, pipeline, data/ZeRO and expert parallelism).

Ranks ``R = tp·pp·dp`` are placed tensor-parallel first (consecutive ranks, inside
a node), then pipeline, then data parallel (``order=tp-dp-pp`` swaps the last two, as
Megatron-core does by default; :mod:`simcomm.strategies._layout`).
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
* **EP** (MoE layers, Lepikhin et al. 2020): an all-to-all dispatch before and a
  combine after each expert layer, forward and backward, of b·s·h·top_k·capacity
  per rank; expert gradients are reduced over the replicas holding the same experts.
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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.ops import PlanBuilder
from simcomm.precision import DTYPE_BYTES
from simcomm.strategies._layout import ORDERS, SCHEDULES, Layout, chunks, layer_kind, schedule, structure
from simcomm.strategies.base import NotApplicable, Strategy, register
from simcomm.strategies.common import check_choice
from simcomm.traces.zoo.transformer import attention_kind
from simcomm.workload import layer_times

RECOMPUTE = ("none", "selective", "full")
#: context parallelism: ``ring`` (TransformerEngine's p2p ring attention), ``ulysses`` (DeepSpeed-Ulysses
#: all-to-alls), ``a2a`` (Megatron-core/TransformerEngine's all-to-all variant: one more in backward)
CP_KINDS = ("ring", "ulysses", "a2a")
#: replicas: ``one`` simulates replica 0 (the replicas one expert-parallel group or context-parallel ring
#: spans) and the data-parallel collectives over all; ``all`` every replica; ``auto`` folds when dp > 1,
#: compute is uniform and the plan is large
REPLICAS = ("auto", "one", "all")
#: ``auto`` folds plans of at least this many compute ops; smaller ones are cheap to simulate in full
FOLD_ABOVE = 20_000


def _pos(name: str, value, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name.replace('_', '-')}: {value!r} must be a positive integer")


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
    capacity_factor: float = 1.0
    order: str = "tp-pp-dp"  # rank order, innermost first
    overlap_grad_reduce: bool = True  # False: Megatron-LM's default, gradients reduced after the last backward
    replicas: str = "auto"  # one: fold identical replicas (simulate replica 0 + full DP collectives); all; auto
    cp: int = 1  # context parallel: the sequence split cp ways, K/V passed around a ring in each attention layer
    cp_kind: str = "ring"  # ring (p2p ring attention), ulysses (DeepSpeed-Ulysses all-to-alls), a2a (Megatron-core)
    shard_group: int | None = None  # HSDP (zero 3): parameters sharded within groups of this many replicas
    # Megatron-core's --decoder-first/last-pipeline-num-layers: blocks on the first / last stage (None: an even
    # share); the other stages split the rest evenly (Llama 3 405B: 126 layers on 16 stages, 7 + 14 x 8 + 7)
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None

    def __post_init__(self):
        for name in ("tp", "pp", "virtual", "experts_parallel", "cp"):
            _pos(name, getattr(self, name))
        for name in ("dp", "microbatch", "microbatches", "global_batch", "shard_group", "first_stage_layers",
                     "last_stage_layers"):
            _pos(name, getattr(self, name), optional=True)
        if self.shard_group is not None and self.zero != 3:
            raise ConfigError(f"shard-group: {self.shard_group} shards parameters within groups of replicas "
                              f"(HSDP, FSDP's HYBRID_SHARD) and needs zero 3, not zero {self.zero}")
        check_choice("schedule", self.schedule, SCHEDULES)
        check_choice("recompute", self.recompute, RECOMPUTE)
        check_choice("order", self.order, ORDERS)
        check_choice("replicas", self.replicas, REPLICAS)
        check_choice("cp_kind", self.cp_kind, CP_KINDS)
        if isinstance(self.zero, bool) or self.zero not in (0, 1, 2, 3):
            raise ConfigError(f"zero: {self.zero!r} is not valid; valid choices: 0, 1, 2, 3 (3 = FSDP full shard)")
        if not (isinstance(self.capacity_factor, (int, float)) and math.isfinite(self.capacity_factor)
                and self.capacity_factor > 0):
            raise ConfigError(f"capacity-factor: {self.capacity_factor!r} must be a positive number")
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


@dataclass(frozen=True)
class _Sizes:
    """The resolved batch split."""

    global_batch: int
    microbatch: int
    microbatches: int
    how: str


def _check_ulysses_heads(p: MegatronParams, meta, model: str) -> None:
    """Ulysses' all-to-alls hand each CP rank ``1/cp`` of the heads of its TP rank: Q's and K/V's.

    TransformerEngine asserts it ("The number of attention heads needs to be divisible by CP size!",
    ``q.shape[-2] % cp_size == 0 and k.shape[-2] % cp_size == 0``, per TP rank); DeepSpeed's
    ``single_all_to_all`` splits the head dimension ``// seq_world_size`` the same way.
    """
    if not meta.get("heads"):
        raise ConfigError(f"cp-kind: {p.cp_kind} splits the attention heads over the cp ranks, but trace {model!r} "
                          "has no transformer meta with its heads; valid choices: ring")
    heads = int(meta["heads"]) // p.tp
    kv = int(meta.get("kv_heads") or meta["heads"]) // p.tp
    if heads % p.cp or kv % p.cp:
        both = math.gcd(heads, kv)
        raise ConfigError(f"cp: {p.cp} does not divide the {heads} query heads and {kv} KV heads per "
                          f"tensor-parallel rank (tp {p.tp}) that cp_kind {p.cp_kind} splits over the cp ranks; "
                          "valid choices: " + ", ".join(str(c) for c in range(1, both + 1) if both % c == 0))


def _sizes(p: MegatronParams, lay: Layout, w) -> _Sizes:
    """Global batch = microbatch × microbatches × dp; any two given fix the third (one line on a mismatch)."""
    dp = lay.data  # context-parallel ranks share their replica's samples
    g = p.global_batch if p.global_batch is not None else w.batch * w.n_ranks
    src = "given" if p.global_batch is not None else f"the workload's {w.batch} per rank × {w.n_ranks} ranks"
    if g % dp:
        raise ConfigError(f"global-batch: {g} ({src}) does not divide over dp {dp} replicas")
    per = g // dp
    if p.microbatch is not None and p.microbatches is not None:
        if p.microbatch * p.microbatches != per:
            raise ConfigError(f"microbatch: {p.microbatch} × microbatches {p.microbatches} × dp {dp} = "
                              f"{p.microbatch * p.microbatches * dp}, not the global batch {g} ({src}); "
                              "give global-batch or one of the two")
        return _Sizes(g, p.microbatch, p.microbatches, "given")
    if p.microbatches is not None:
        if per % p.microbatches:
            raise ConfigError(f"microbatches: {p.microbatches} does not divide the {per} samples per replica "
                              f"(global batch {g} ({src}) / dp {dp})")
        return _Sizes(g, per // p.microbatches, p.microbatches, "microbatch derived")
    mb = p.microbatch if p.microbatch is not None else (1 if lay.pp > 1 else per)
    if per % mb:
        raise ConfigError(f"microbatch: {mb} does not divide the {per} samples per replica "
                          f"(global batch {g} ({src}) / dp {dp})")
    how = "given" if p.microbatch is not None else (
        "micro-batch 1 sample (pipelines need many micro-batches; Megatron-LM's large runs use 1-2)"
        if lay.pp > 1 else "one micro-batch per replica (no pipeline, so no gradient accumulation)")
    return _Sizes(g, mb, per // mb, how)


def stage_layers(p: MegatronParams, n_blocks: int) -> tuple[int, ...] | None:
    """Blocks per pipeline stage when the first or last stage is given its own count, else None (even).

    The stages without a given count share the rest evenly; anything else is one line naming the counts.
    With ``virtual`` chunks per rank each stage's blocks split into ``virtual`` equal chunks, as Megatron-core's
    ``get_num_layers_to_build`` does (it asserts ``num_layers_per_pipeline_rank % vp_size == 0``):
    :func:`virtual_stage_layers`.
    """
    first, last = p.first_stage_layers, p.last_stage_layers
    if first is None and last is None:
        return None
    if p.pp < 2:
        raise ConfigError(f"first-stage-layers/last-stage-layers: uneven stages need pp >= 2 (pp {p.pp})")
    given = [n for n in (first, last) if n is not None]
    rest, middle = n_blocks - sum(given), p.pp - len(given)
    if rest < middle or (middle and rest % middle) or (not middle and rest):
        share = "" if not middle else f" over the other {middle} stages"
        raise ConfigError(f"first-stage-layers/last-stage-layers: {n_blocks} layers minus {' + '.join(map(str, given))} "
                          f"leave {rest}, which do not split evenly{share} (each stage needs at least one layer)")
    even = rest // middle if middle else 0
    out = tuple([first if first is not None else even] + [even] * (p.pp - 2)
                + [last if last is not None else even])
    v = p.virtual  # Megatron-core's TransformerConfig refuses the same three cases
    for name, n in (("first-stage-layers", first), ("last-stage-layers", last)):
        if n is not None and n % v:
            raise ConfigError(f"{name}: {n} is not a multiple of virtual {v} (each of the stage's {v} model chunks "
                              f"holds 1/{v} of its layers, as in Megatron-core); valid choices: multiples of {v}")
    if middle and even % v:
        raise ConfigError(f"first-stage-layers/last-stage-layers: the other {middle} stages get {even} layers each, "
                          f"not a multiple of virtual {v} (each of a stage's {v} model chunks holds 1/{v} of its "
                          "layers, as in Megatron-core)")
    return out


def virtual_stage_layers(p: MegatronParams, n_blocks: int) -> tuple[int, ...] | None:
    """Blocks of each virtual stage ``u = c·pp + k`` (chunk c of pipeline stage k) with uneven stages, else None.

    Megatron-core (``transformer_block.get_num_layers_to_build``, ``transformer_layer.
    get_transformer_layer_offset``): stage k's ``n_k`` layers split into ``virtual`` chunks of
    ``n_k / virtual``; model chunk c holds the c-th such run of every stage in stage order, so chunk c of
    stage k starts at layer ``c·L/virtual + sum(n_i / virtual for i < k)``.
    """
    per = stage_layers(p, n_blocks)
    if per is None:
        return None
    return tuple(per[u % p.pp] // p.virtual for u in range(p.pp * p.virtual))


def _layout(p: MegatronParams, w, names: list[str]):
    """(Layout, Structure or None, sizes): every divisibility check, each one line naming the mismatch."""
    n = w.n_ranks
    ep = p.experts_parallel
    cp = p.cp
    if n % cp:
        raise ConfigError(f"cp: {cp} does not divide the {n} GPUs")
    inner = p.tp * p.pp * cp
    what = f"tp {p.tp} × pp {p.pp}" + (f" × cp {cp}" if cp > 1 else "")
    if p.dp is None:
        if n % inner:
            raise ConfigError(f"layout: {what} = {inner} does not divide the {n} GPUs")
        dp = n // inner
    else:
        dp = p.dp
        if inner * dp != n:
            raise ConfigError(f"layout: {what} × dp {dp} = {inner * dp} is not the {n} GPUs")
    lay = Layout(p.tp, p.pp, dp * cp, ep, p.virtual, p.order, cp)  # Layout.dp: replicas of the parameters
    s = structure(names)
    meta = dict(w.trace.meta.get("transformer") or {})
    if s is None:
        if p.tp > 1 or p.pp > 1 or ep > 1 or cp > 1:
            raise NotApplicable(f"tp/pp/cp/experts-parallel need a transformer trace (layers block{{i}}.attn and "
                                f".mlp/.moe); trace {w.trace.model!r} has none")
    else:
        stages = p.pp * p.virtual
        if stage_layers(p, len(s.blocks)) is None and len(s.blocks) % stages:
            raise ConfigError(f"layout: {len(s.blocks)} layers do not divide into pp {p.pp} × virtual "
                              f"{p.virtual} = {stages} stages (uneven stages: --opt first_stage_layers=N "
                              "and/or last_stage_layers=N)")
        for key in ("heads", "kv_heads"):
            h = meta.get(key)
            if h and h % p.tp:
                raise ConfigError(f"tp: {p.tp} does not divide the {h} {key.replace('_', ' ')} "
                                  f"(attention heads split over the tensor-parallel ranks)")
        seq = meta.get("seq")
        if cp > 1 and not seq:
            raise ConfigError(f"cp: {cp} splits the sequence, but trace {w.trace.model!r} has no transformer meta "
                              "with its sequence length")
        if cp > 1 and seq % cp:
            raise ConfigError(f"cp: {cp} does not divide the sequence length {seq} (each context-parallel rank "
                              "holds seq / cp tokens)")
        if cp > 1 and p.cp_kind != "ring":
            _check_ulysses_heads(p, meta, w.trace.model)
    if lay.dp % ep:
        raise ConfigError(f"experts-parallel: {ep} does not divide dp {lay.dp}" + (f" (dp {dp} × cp {cp})" if cp > 1
                          else "") + " (expert-parallel groups are carved out of the data-parallel replicas)")
    if p.shard_group is not None:
        if lay.dp % p.shard_group:
            raise ConfigError(f"shard-group: {p.shard_group} does not divide the {lay.dp} data-parallel replicas"
                              + (f" (dp {dp} × cp {cp})" if cp > 1 else "") + "; valid choices: "
                              + ", ".join(str(g) for g in range(1, lay.dp + 1) if lay.dp % g == 0))
        if ep > 1:
            raise ConfigError("shard-group: HSDP with experts-parallel > 1 is not modelled; give one of them")
    if ep > 1:
        if not any(layer_kind(x) == "moe" for x in names):
            raise ConfigError(f"experts-parallel: {ep} needs MoE layers (block{{i}}.moe); trace "
                              f"{w.trace.model!r} has none")
        experts = meta.get("experts")
        if experts and experts % ep:
            raise ConfigError(f"experts-parallel: {ep} does not divide the {experts} experts")
    sizes = _sizes(p, lay, w)
    if p.global_batch is None and w.scaling == "strong":  # say it: strong scaling rounds B up to ⌈B/R⌉·R
        sizes = _Sizes(sizes.global_batch, sizes.microbatch, sizes.microbatches,
                       f"{sizes.how}; strong scaling's {w.batch} per rank × {w.n_ranks} ranks, the requested "
                       "global batch rounded up to a multiple of the ranks; --opt global_batch=B keeps B exactly")
    if p.schedule == "interleaved" and sizes.microbatches % p.pp:
        raise ConfigError(f"microbatches: {sizes.microbatches} is not a multiple of pp {p.pp} "
                          "(Megatron-LM's interleaved schedule needs it)")
    return lay, s, sizes


@register
class Megatron(Strategy):
    """Tensor, sequence, pipeline, data (ZeRO/FSDP) and expert parallelism composed (module docstring)."""

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
        if p.experts_parallel > 1:
            parts.append(f"ep {p.experts_parallel} capacity {p.capacity_factor:g}")
        return f"megatron ({', '.join(parts)})"

    def memory(self, workload, device):
        """The layout's own memory (simcomm.memory_llm: sharded state, Korthikanti activations, in-flight
        micro-batches of the schedule), checked against ``device``; a layout that does not fit is one line."""
        from simcomm.traces.zoo.transformer import TRANSFORMERS

        model = workload.trace.model
        if model not in TRANSFORMERS:
            return ("memory: not checked (the layout shards model state, and the trace is not a zoo transformer "
                    "whose shape the memory model knows)",)
        from simcomm import memory_llm

        p = self.params
        lay, _, sizes = _layout(p, workload, [layer.name for layer in workload.layers])
        dtype = "fp32" if workload.trace.dtype in ("fp32", "float32") else "bf16"
        mem = memory_llm.estimate(model, tp=lay.tp, pp=lay.pp, dp=lay.data, cp=lay.cp, ep=lay.ep, zero=p.zero,
                                  shard_group=p.shard_group,
                                  micro_batch=sizes.microbatch, microbatches=sizes.microbatches,
                                  sequence_parallel=p.sequence_parallel, recompute=p.recompute,
                                  schedule=p.schedule, virtual_stages=lay.virtual, dtype=dtype,
                                  stage_layers=stage_layers(p, TRANSFORMERS[model][0].layers))
        if device is not None:
            from simcomm.errors import UnknownNameError
            from simcomm.traces import device_for_cluster

            try:
                memory_llm.check_fits(mem, device_for_cluster(device))
            except UnknownNameError:
                device = None
        where = "" if device is not None else " (not checked: the cluster names no known GPU)"
        return (f"memory: {mem.total / 1e9:.4g} GB per GPU on the fullest pipeline stage{where} "
                f"({mem.breakdown()})",)

    def plan(self, workload, topology):
        names = [layer.name for layer in workload.layers]
        lay, s, sizes = _layout(self.params, workload, names)
        return _Emitter(self.params, lay, s, sizes, workload, topology.n_ranks).plan()


class _Emitter:
    """Builds one iteration's plan; state is per-rank ``wait`` lists (what the next op must wait for)."""

    def __init__(self, p: MegatronParams, lay: Layout, s, sizes: _Sizes, w, n_ranks: int):
        self.p, self.lay, self.w, self.sizes = p, lay, w, sizes
        self.b = PlanBuilder(n_ranks)
        self.live = _live_replicas(p, lay, w, sizes.microbatches)  # replicas simulated in full (the rest: only in DP collectives)
        # With the replicas folded, the tensor-parallel ranks of a group also compute alike: one compute per
        # group, on its first rank, started once every rank's input is there (the group's next collective
        # waits for all of them anyway, and equal computes end max(ready) + t either way); not with ring
        # attention, whose pieces interleave with per-rank sends
        self.fold_lanes = self.live < lay.dp and lay.tp > 1 and lay.cp == 1
        n_layers = len(w.layers)
        u_count = lay.pp * lay.virtual
        self.chunks = (chunks(s, u_count, virtual_stage_layers(p, len(s.blocks))) if s is not None
                       else [tuple(range(n_layers))])
        self.kinds = [layer_kind(x.name) for x in w.layers]
        tr = w.trace
        meta = dict(tr.meta.get("transformer") or {})
        mb, tp, ep = sizes.microbatch, lay.tp, lay.ep
        cp = lay.cp  # context parallel: every rank computes on (and sends activations of) seq / cp tokens
        act = DTYPE_BYTES.get(tr.dtype, 4)
        self.kvb = kv_block_bytes(meta, mb, tp, cp, act)
        sp = p.sequence_parallel and tp > 1
        self.sp = sp
        self.tf, self.tb, self.grad, self.upd, self.tpb, self.a2a, self.act = [], [], [], [], [], [], []
        # Ulysses/a2a CP: attention layer -> (forward, backward) seconds of (QKV projection, core, output projection)
        self.uly: dict[int, tuple] = {}
        ulysses = cp > 1 and p.cp_kind != "ring" and s is not None
        self.uq, self.ukv = _ulysses_bytes(meta, mb, tp, cp, act) if ulysses else (0.0, 0.0)
        for j, (layer, lw) in enumerate(zip(tr.layers, w.layers)):
            f, bk = layer_times(layer, tr.batch, mb)
            moe = self.kinds[j] == "moe"
            shard = tp * (ep if moe else 1)
            extra = 0.0
            if p.recompute == "selective" and self.kinds[j] == "attn":
                extra = f * core_share(*_seq_hidden(lw, meta), meta)  # selective: the core is recomputed
            self.tf.append(f / (tp * cp))
            self.tb.append((bk + extra) / (tp * cp))
            if ulysses and self.kinds[j] == "attn":
                fq, fc, fo = attention_shares(*_seq_hidden(lw, meta), meta)
                n = tp * cp  # every rank: s/cp tokens of all its heads in the projections, s of heads/cp in the core
                self.uly[j] = ((f * fq / n, f * fc / n, f * fo / n),
                               (bk * fq / n, (bk * fc + extra) / n, bk * fo / n))
            self.grad.append(lw.grad_bytes / shard)
            self.upd.append(lw.update_s / shard)
            shape = lw.input_shape if self.kinds[j] == "head" else lw.output_shape
            self.tpb.append(math.prod(shape) * mb * act / cp if shape else 0.0)
            out = math.prod(lw.output_shape) * mb * act / cp if lw.output_shape else 0.0
            self.act.append(out / tp if sp else out)
            self.a2a.append(out * int(meta.get("top_k", 1) or 1) * p.capacity_factor / (tp if sp else 1))
        self.ready: dict = {}
        self.last_bwd: dict = {}  # (layer, rank) -> op id of that rank's final backward of the layer
        self.buckets: dict[int, list] = {}  # stage -> [(kind groups, nbytes)]
        self.counts = {"allreduce": 0, "reduce_scatter": 0, "allgather": 0, "alltoall": 0, "transfer": 0}

    # -- groups (cached: plans of millions of ops ask for them per layer per micro-batch) ------------------
    def _cached(self, key, make):
        cache = self.__dict__.setdefault("_cache", {})
        if key not in cache:
            cache[key] = make()
        return cache[key]

    def _tp_groups(self, p: int):
        return self._cached(("tp", p), lambda: [self.lay.tp_group(p, d) for d in range(self.live)])

    def _ep_groups(self, p: int):
        n = self.live // self.lay.ep  # live replicas hold whole expert-parallel groups
        return self._cached(("ep", p), lambda: [g for t in range(self.lay.tp) for g in self.lay.ep_groups(t, p)[:n]])

    def _lead(self, r: int) -> int:
        """The rank that computes for ``r``: the first of its tensor-parallel group when lanes are folded."""
        if not self.fold_lanes:
            return r
        lead = self._cached("lead", lambda: {self.lay.rank(t, q, d): self.lay.rank(0, q, d)
                                             for t in range(self.lay.tp) for q in range(self.lay.pp)
                                             for d in range(self.lay.dp)})
        return lead[r]

    def _lanes(self, ranks) -> list[tuple[int, list[int]]]:
        """``ranks`` grouped by the rank that computes for them (:meth:`_lead`), in first-seen order."""
        groups: dict[int, list[int]] = {}
        for r in ranks:
            groups.setdefault(self._lead(r), []).append(r)
        return list(groups.items())

    @property
    def _mirror(self) -> dict[int, int]:
        """Each folded replica's rank -> the live rank it stands for: same (t, p), replica ``d mod live``."""
        lay, live = self.lay, self.live
        return self._cached("mirror", lambda: {} if live == lay.dp else {
            lay.rank(t, p, d): lay.rank(t, p, d % live)
            for t in range(lay.tp) for p in range(lay.pp) for d in range(live, lay.dp)})

    def _stage(self, p: int) -> list[int]:
        """The live ranks of pipeline stage ``p`` (every TP rank of every simulated replica), in rank order."""
        lay = self.lay
        return self._cached(("stage", p), lambda: sorted(lay.rank(t, p, d) for t in range(lay.tp)
                                                          for d in range(self.live)))

    def _cp_groups(self, p: int):
        """Context-parallel rings of stage p's simulated replicas."""
        lay = self.lay
        return self._cached(("cp", p), lambda: [g for t in range(lay.tp) for g in lay.cp_groups(t, p)
                                                if max(g) in set(self._stage(p))])

    def _hsdp_groups(self, p: int):
        """HSDP replica groups of stage p: one rank per shard group holding the same shard (size dp / G)."""
        lay, size = self.lay, self.p.shard_group
        return self._cached(("hsdp", p), lambda: [g for t in range(lay.tp) for g in lay.replica_groups(t, p, size)])

    def _dp_groups(self, p: int, j: int):
        lay = self.lay
        if self.p.shard_group is not None:  # HSDP: sharded (gathered, reduce-scattered) within a shard group
            size = self.p.shard_group
            return self._cached(("shard", p), lambda: [g for t in range(lay.tp) for g in lay.shard_groups(t, p, size)])
        if self.kinds[j] == "moe" and lay.ep > 1:
            return self._cached(("edp", p), lambda: [g for t in range(lay.tp) for g in lay.edp_groups(t, p)])
        return self._cached(("dp", p), lambda: [lay.dp_group(t, p) for t in range(lay.tp)])

    def _coll(self, kind, groups, nbytes, wait, stream, label, after=None):
        """One collective per group (size >= 2), after each member's ``wait``; members then wait for it."""
        ids = {}
        for g in groups:
            if len(g) < 2:
                continue
            if after is None:
                deps = [x for r in g for x in wait[r]]
            else:  # a folded replica's member waits for what its live mirror waits for (groups of none live too)
                mirror = self._mirror
                deps = [x for r in g for x in (after.get(r) or after.get(mirror.get(r, r), ()))]
            cid = self.b.collective(kind, g, nbytes, after=deps, stream=stream, label=label)
            self.counts[kind] += 1
            for r in g:
                ids[r] = cid
                if after is None:
                    wait[r] = [cid]
        return ids

    # -- one layer ---------------------------------------------------------------------------------------
    def _comm(self, j: int, p: int, where: str):
        """Communication around layer j: ``where`` in fwd-pre, fwd-post, bwd-pre, bwd-post (in issue order)."""
        return self._cached(("comm", j, p, where), lambda: self._comm_of(j, p, where))

    def _comm_of(self, j: int, p: int, where: str):
        k, out = self.kinds[j], []
        tp_in = tp_out = None
        if self.lay.tp > 1:
            if k in ("attn", "mlp", "moe", "head"):
                tp_in = "allgather" if self.sp else "f"
            if k in ("attn", "mlp", "moe", "embed"):
                tp_out = "reduce_scatter" if self.sp else "allreduce"
        tpg = ("tp", self._tp_groups(p), self.tpb[j])
        ep = ("ep", self._ep_groups(p), self.a2a[j]) if k == "moe" and self.lay.ep > 1 else None
        if where == "fwd-pre":
            if tp_in == "allgather":
                out.append(("allgather",) + tpg)
            if ep:
                out.append(("alltoall",) + ep)
        elif where == "fwd-post":
            if ep:
                out.append(("alltoall",) + ep)
            if tp_out:
                out.append((tp_out,) + tpg)
        elif where == "bwd-pre":  # the conjugate of the forward's output op
            if tp_out == "reduce_scatter":
                out.append(("allgather",) + tpg)
            if ep:
                out.append(("alltoall",) + ep)
        else:  # bwd-post: the conjugate of the forward's input op
            if ep:
                out.append(("alltoall",) + ep)
            if tp_in:
                out.append(("allreduce" if tp_in == "f" else "reduce_scatter",) + tpg)
        return out

    def _layer(self, j, p, ranks, wait, phase, label, ag=None):
        """Comm before, compute, comm after one layer on every rank of stage p; returns compute ids by rank."""
        name = self.w.layers[j].name
        fwd = phase != "B"
        for kind, stream, groups, nbytes in self._comm(j, p, "fwd-pre" if fwd else "bwd-pre"):
            self._coll(kind, groups, nbytes, wait, stream, f"{stream}-{kind} {name} {label}")
        secs = self.tf[j] if fwd else self.tb[j]
        ids = {}
        if self.lay.cp > 1 and self.kinds[j] == "attn" and self.p.cp_kind != "ring":
            ids = self._ulysses(j, p, wait, fwd, f"{phase} {name} {label}", ag)
        elif self.lay.cp > 1 and self.kinds[j] == "attn":  # ring attention: compute in pieces around K/V sends
            ids = self._ring(j, p, wait, fwd, secs, f"{phase} {name} {label}", ag)
        elif self.fold_lanes:
            # the stage's ranks by lead, worked out once per stage (the same for each of its layers)
            groups = self._cached(("lanes", p, tuple(ranks)), lambda: self._lanes(ranks))
            for lead, members in groups:
                deps = list(dict.fromkeys(x for r in members for x in wait[r] + ([ag[r]] if ag and r in ag else [])))
                cid = self.b.compute(lead, secs * self.w.scale(lead), after=deps, label=f"{phase} {name} {label}")
                for r in members:
                    ids[r] = cid
                    wait[r] = [cid]
        else:
            for r in ranks:
                deps = wait[r] + ([ag[r]] if ag and r in ag else [])
                ids[r] = self.b.compute(r, secs * self.w.scale(r), after=deps, label=f"{phase} {name} {label}")
                wait[r] = [ids[r]]
        for kind, stream, groups, nbytes in self._comm(j, p, "fwd-post" if fwd else "bwd-post"):
            self._coll(kind, groups, nbytes, wait, stream, f"{stream}-{kind} {name} {label}")
        return ids

    def _ring(self, j, p, wait, fwd: bool, secs: float, label: str, ag=None):
        """Ring attention over each context-parallel group (TransformerEngine's p2p ring, Megatron-core CP).

        The attention runs in ``cp`` equal pieces, piece k on the K/V block that arrived at step k; the
        send of the next block overlaps piece k.  Forward: ``cp - 1`` steps of the K/V block.  Backward:
        K/V passed around again (only its own chunk was kept) and the partial dK/dV of each block travels
        with the ring towards its owner: ``cp - 1`` steps of K/V and ``cp - 1`` of dK/dV, the last of them
        after the last piece (exposed).  Returns each rank's last piece; ``wait`` then also holds the last
        dK/dV arrival.  The layer's TP communication is emitted around this by ``_layer``.
        """
        n = self.lay.cp
        kv = self.kvb  # the same block for every attention layer
        ids = {}
        for g in self._cp_groups(p):
            nxt = {g[i]: g[(i + 1) % n] for i in range(n)}
            cur = {r: wait[r] + ([ag[r]] if ag and r in ag else []) for r in g}
            arrived: dict = {}  # rank -> the K/V transfer it computes on next
            sent: dict = {}  # rank -> its previous K/V send (one buffer in flight per direction)
            grad_in: dict = {}  # rank -> the dK/dV partial it adds to before passing on
            for k in range(n):
                step = {}
                if k < n - 1:
                    for r in g:
                        deps = (cur[r] if k == 0 else [arrived[r]]) + ([sent[r]] if r in sent else [])
                        tid = self.b.transfer(r, nxt[r], kv, after=deps, stream="cp",
                                              label=f"cp-kv step{k + 1} {label}")
                        self.counts["transfer"] += 1
                        sent[r], step[nxt[r]] = tid, tid
                for r in g:
                    deps = cur[r] + ([arrived[r]] if k > 0 else [])
                    cur[r] = [self.b.compute(r, secs / n * self.w.scale(r), after=deps,
                                             label=f"{label} piece{k}")]
                    ids[r] = cur[r][0]
                if not fwd and k > 0:
                    new_in = {}
                    for r in g:
                        deps = cur[r] + ([grad_in[r]] if r in grad_in else [])
                        tid = self.b.transfer(r, nxt[r], kv, after=deps, stream="cp",
                                              label=f"cp-dkv step{k} {label}")
                        self.counts["transfer"] += 1
                        new_in[nxt[r]] = tid
                    grad_in = new_in
                arrived = step
            for r in g:
                wait[r] = cur[r] + ([grad_in[r]] if r in grad_in else [])
        return ids

    def _ulysses(self, j, p, wait, fwd: bool, label: str, ag=None):
        """All-to-all context parallelism over each CP group (DeepSpeed-Ulysses; Megatron-core's ``a2a``).

        Forward: QKV projection on the rank's s/cp tokens; all-to-alls of Q, K and V (one each, as
        DeepSpeed's ``DistributedAttention`` and TransformerEngine's ``flash_attn_a2a_communicate`` issue
        them) into head-sharded, full-sequence tensors; the attention core, which needs the whole sequence
        and so waits for them; one all-to-all of its output back to sequence-sharded; the output
        projection.  Backward mirrors it: the output projection's backward, the all-to-all of the output
        gradient (``a2a``: of the saved output too, TransformerEngine keeps it sequence-sharded), the core's
        backward, the all-to-alls of dQ, dK, dV, the QKV projection's backward.  Returns each rank's last
        compute; the layer's TP communication is emitted around this by ``_layer``.
        """
        qkv, core, out = self.uly[j][0 if fwd else 1]
        q, kv = self.uq, self.ukv
        if fwd:
            steps = [("qkv", qkv), (("q", q), ("k", kv), ("v", kv)), ("core", core), (("o", q),), ("out", out)]
        else:
            first = (("o", q), ("do", q)) if self.p.cp_kind == "a2a" else (("do", q),)
            steps = [("out", out), first, ("core", core), (("dq", q), ("dk", kv), ("dv", kv)), ("qkv", qkv)]
        groups = self._cp_groups(p)
        ranks = [r for g in groups for r in g]
        ids: dict = {}
        for i, step in enumerate(steps):
            if isinstance(step[0], tuple):  # all-to-alls, one after another on the CP communicator
                for what, nbytes in step:
                    self._coll("alltoall", groups, nbytes, wait, "cp", f"cp-alltoall {what} {label}")
                continue
            what, secs = step
            for r in ranks:
                deps = wait[r] + ([ag[r]] if i == 0 and ag and r in ag else [])
                ids[r] = self.b.compute(r, secs * self.w.scale(r), after=deps, label=f"{label} {what}")
                wait[r] = [ids[r]]
        return ids

    def _pass(self, p, layers, ranks, wait, forward: bool, label: str):
        """A forward or backward pass over ``layers`` (already in execution order)."""
        zero3 = self.p.zero == 3 and self.lay.dp > 1
        before = {r: self.b.tail(self._lead(r), "compute") for r in ranks}
        computes: list[dict] = []
        ags: dict[int, dict] = {}

        def gather(k):
            j = layers[k]
            if k >= 2:
                after = {r: (computes[k - 2][r],) for r in ranks}
            elif k == 1:
                after = {r: (before[r],) if before[r] is not None else () for r in ranks}
            else:
                after = {r: () for r in ranks}
            ags[k] = self._coll("allgather", self._dp_groups(p, j), self.grad[j], wait, "ag",
                                f"zero3-allgather {self.w.layers[j].name} {label}", after=after)

        for k, j in enumerate(layers):
            if zero3:
                if k == 0:
                    gather(0)
                if k + 1 < len(layers):
                    gather(k + 1)  # prefetch one layer ahead
            if not forward and self.p.recompute == "full":
                self._layer(j, p, ranks, wait, "R", label, ags.get(k))
            computes.append(self._layer(j, p, ranks, wait, "F" if forward else "B", label, ags.get(k)))
            if zero3 and not forward:
                done = {r: (computes[k][r],) for r in ranks}
                rs = self._coll("reduce_scatter", self._dp_groups(p, j), self.grad[j], wait, "rs",
                                f"zero3-reduce_scatter {self.w.layers[j].name} {label}", after=done)
                if self.p.shard_group is not None:  # HSDP: the gradient shard all-reduced across shard groups
                    self._coll("allreduce", self._hsdp_groups(p), self.grad[j] / self.p.shard_group, wait, "rs",
                               f"hsdp-allreduce {self.w.layers[j].name} {label}",
                               after={r: (rs[r],) if r in rs else done.get(r, ()) for g in self._hsdp_groups(p)
                                      for r in g})
        return computes

    # -- tasks -------------------------------------------------------------------------------------------
    def _task(self, p: int, task, last_of_chunk: bool):
        kind, mb, c = task
        lay, n_u = self.lay, self.lay.pp * self.lay.virtual
        u = c * lay.pp + p
        ranks = self._stage(p)
        coords = self._cached("coords", lambda: [(t, d) for d in range(self.live) for t in range(lay.tp)])
        if kind == "F":
            src = self.ready.get(("F", mb, u - 1), {}) if u > 0 else {}
        else:
            src = self.ready[("B", mb, u + 1)] if u + 1 < n_u else self.ready[("F", mb, u)]
        wait = {lay.rank(t, p, d): list(src.get((t, d), ())) for t, d in coords}
        layers = self.chunks[u] if kind == "F" else tuple(reversed(self.chunks[u]))
        label = f"{kind}{mb}" + (f".{c}" if lay.virtual > 1 else "")
        computes = self._pass(p, layers, ranks, wait, kind == "F", label)
        if kind == "B" and last_of_chunk:
            for k, j in enumerate(layers):
                for r in ranks:
                    self.last_bwd[(j, r)] = computes[k][r]
        nxt = u + 1 if kind == "F" else u - 1
        out = {}
        for t, d in coords:
            r = lay.rank(t, p, d)
            if 0 <= nxt < n_u:
                dst = lay.rank(t, nxt % lay.pp, d)
                nbytes = self.act[self.chunks[u][-1] if kind == "F" else self.chunks[u - 1][-1]]
                if dst != r:
                    tid = self.b.transfer(r, dst, nbytes, after=wait[r], stream="pp",
                                          label=f"pp-{'activation' if kind == 'F' else 'gradient'} {label}")
                    self.counts["transfer"] += 1
                    out[(t, d)] = (tid,)
                    continue
            out[(t, d)] = tuple(wait[r])
        self.ready[(kind, mb, u)] = out
        if kind == "B" and last_of_chunk and self.p.zero < 3 and self.p.overlap_grad_reduce:
            self._reduce_grads(p, self.chunks[u])

    def _reduce_grads(self, p: int, chunk, at_end: bool = False):
        """DDP-style buckets of this chunk, reduced as soon as their last gradient is ready.

        ``at_end``: after the rank's whole backward instead (no overlap).
        """
        if self.lay.dp < 2:
            return
        members = set(chunk)
        kind = "allreduce" if self.p.zero == 0 else "reduce_scatter"
        for bucket in self.w.buckets:
            mine = [j for j in bucket if j in members]
            for part in ([j for j in mine if self.kinds[j] != "moe" or self.lay.ep == 1],
                         [j for j in mine if self.kinds[j] == "moe" and self.lay.ep > 1]):
                if not part:
                    continue
                groups = self._dp_groups(p, part[0])
                nbytes = sum(self.grad[j] for j in part)
                # the groups cover the stage; only live ranks compute (_coll gives folded members their mirror's)
                after = {r: (self.b.tail(self._lead(r), "compute") if at_end else
                             max(self.last_bwd[(j, r)] for j in part),)
                         for r in self._stage(p)}
                self._coll(kind, groups, nbytes, {}, "dp", f"dp-{kind} stage{p}", after=after)
                self.buckets.setdefault(p, []).append((groups, nbytes))

    def plan(self):
        lay, p = self.lay, self.p
        m = self.sizes.microbatches
        orders = schedule(p.schedule, lay.pp, m, lay.virtual)
        last = [{} for _ in range(lay.pp)]  # stage -> chunk -> index of its final backward
        for s, tasks in enumerate(orders):
            for i, (kind, _, c) in enumerate(tasks):
                if kind == "B":
                    last[s][c] = i
        idx = [0] * lay.pp
        n_u = lay.pp * lay.virtual
        remaining = sum(len(t) for t in orders)
        while remaining:
            progress = False
            for s in range(lay.pp):
                while idx[s] < len(orders[s]):
                    kind, mb, c = orders[s][idx[s]]
                    u = c * lay.pp + s
                    need = (("F", mb, u - 1) if u > 0 else None) if kind == "F" else \
                        (("B", mb, u + 1) if u + 1 < n_u else ("F", mb, u))
                    if need is not None and need not in self.ready:
                        break
                    self._task(s, orders[s][idx[s]], kind == "B" and last[s][c] == idx[s])
                    idx[s] += 1
                    remaining -= 1
                    progress = True
            if not progress:  # a schedule whose orders wait on each other: a bug in _layout.schedule
                raise RuntimeError(f"pipeline schedule {p.schedule} deadlocks at tasks {idx}")
        if p.zero < 3 and not p.overlap_grad_reduce:
            for s in range(lay.pp):
                for u in reversed(range(s, n_u, lay.pp)):  # the last chunks' gradients are ready first
                    self._reduce_grads(s, self.chunks[u], at_end=True)
        self._tied_embeddings()
        self._update()
        sz = self.sizes
        ignored = ("data loading is not modelled by megatron (its time is not in the step)",) \
            if self.w.dataload_s > 0 else ()
        assumed = ignored + (f"layout tp {lay.tp}" + (f" × cp {lay.cp}" if lay.cp > 1 else "")
                   + f" × pp {lay.pp} × dp {lay.data}"
                   + (f" (ep {lay.ep})" if lay.ep > 1 else "")
                   + f": global batch {sz.global_batch} = micro-batch {sz.microbatch} × {sz.microbatches} "
                   f"micro-batches × dp {lay.data} ({sz.how})",)
        measured = None
        if self.live < lay.dp:
            measured = tuple(sorted({self._lead(r) for s in range(lay.pp) for r in self._stage(s)}))
            which = "replica 0's" if self.live == 1 else \
                f"replicas 0-{self.live - 1}'s (whole expert-parallel groups and context-parallel rings)"
            assumed += (f"data-parallel replicas identical: simulating {which} compute, tensor and pipeline "
                        f"traffic; data-parallel collectives span all {lay.dp} replicas (times from the simulated "
                        f"ranks; link traffic per link class counts their tensor, context, expert and pipeline "
                        f"bytes {lay.dp // self.live} times, once per replica they stand for; the busiest links "
                        "are the simulated ones; --opt replicas=all simulates every replica)",)
            if self.fold_lanes:
                assumed += (f"tensor-parallel ranks identical: one compute per group of {lay.tp}, started when "
                            "every rank's input has arrived (their collectives and sends stay per rank)",)
        # the folded replicas' own traffic (theirs is the simulated replicas', on like links of a symmetric fabric)
        weights = {s: lay.dp / self.live for s in ("tp", "cp", "ep", "pp")} if self.live < lay.dp else None
        return self.b.build(kind="every iteration", assumed=assumed, strategy="megatron", measured_ranks=measured,
                            samples=sz.global_batch, traffic_weights=weights,
                            layout={"tp": lay.tp, "pp": lay.pp, "dp": lay.data, "ep": lay.ep,
                                    "virtual": lay.virtual, "cp": lay.cp},
                            microbatch=sz.microbatch, microbatches=sz.microbatches, global_batch=sz.global_batch,
                            collectives=dict(self.counts))

    def _tied_embeddings(self):
        """Tied input/output embeddings across stages: the first and last stage all-reduce the word-embedding gradient.

        Megatron-LM keeps a copy of the word embeddings on the last stage for the
        output layer and sums the two gradients (its "embedding group") before the
        optimizer step: vocab·h / tp gradients per TP lane.
        """
        lay = self.lay
        meta = dict(self.w.trace.meta.get("transformer") or {})
        names = [x.name for x in self.w.layers]
        if lay.pp < 2 or not meta.get("tied") or "embed" not in names or "head" not in names:
            return
        nbytes = meta.get("vocab", 0) * meta.get("hidden", 0) * self.w.dtype_bytes / lay.tp
        emb, head = names.index("embed"), names.index("head")
        for d in range(lay.dp):  # folded replicas too: this traffic is on the data-parallel stream
            for t in range(lay.tp):
                live = (lay.rank(t, 0, d % self.live), lay.rank(t, lay.pp - 1, d % self.live))
                g = (lay.rank(t, 0, d), lay.rank(t, lay.pp - 1, d))
                after = {g[0]: (self.last_bwd[(emb, live[0])],), g[1]: (self.last_bwd[(head, live[1])],)}
                self._coll("allreduce", [g], nbytes, {}, "dp", "embedding-allreduce (tied)", after=after)

    def _update(self):
        """Optimizer step on each rank's (sharded) parameters, then ZeRO-1/2's parameter all-gather."""
        lay, zero = self.lay, self.p.zero
        for s in range(lay.pp):
            ranks = self._stage(s)
            layers = [j for u in range(s, lay.pp * lay.virtual, lay.pp) for j in self.chunks[u]]
            ups = {}
            for r in ranks:
                secs = 0.0
                for j in layers:
                    shard = 1
                    if zero >= 1:
                        shard = len(self._dp_groups(s, j)[0])
                    secs += self.upd[j] / shard
                stream = "rs" if zero == 3 else "dp"
                tail = self.b.tail(r, stream)
                ups[r] = (self.b.compute(r, secs * self.w.scale(r), after=() if tail is None else (tail,),
                                         label="update", category="update"),)
            if zero in (1, 2):
                for groups, nbytes in self.buckets.get(s, []):
                    self._coll("allgather", groups, nbytes, {}, "dp", f"zero{zero}-allgather stage{s}", after=ups)


def fold_computes(n_ranks: int, microbatches: int, n_layers: int, pp: int, recompute: str) -> int:
    """The compute ops a full plan would hold, as ``replicas=auto`` counts them against :data:`FOLD_ABOVE`:
    one per rank, layer (embedding and head included), micro-batch and phase, over the pipeline stages."""
    return n_ranks * microbatches * n_layers * (3 if recompute == "full" else 2) // pp


def _live_replicas(p: MegatronParams, lay: Layout, w, microbatches: int) -> int:
    """How many data-parallel replicas the plan simulates in full (``replicas``; docs/performance.md, "Large-model layouts").

    Replicas run the same ops, so on a symmetric cluster one stands for all: the rest
    appear only in the data-parallel collectives (their full groups).  Expert-parallel
    groups span ``ep`` consecutive replicas and context-parallel rings ``cp``, so a fold
    keeps lcm(ep, cp) replicas live.  Per-rank compute scales (stragglers) make replicas
    differ: ``auto`` then keeps all, and ``one`` is refused.  ``auto`` also keeps all when
    the full plan is small (under :data:`FOLD_ABOVE` compute ops), where folding saves nothing.
    """
    uniform = len(set(w.compute_scale)) <= 1 and not w.compute_jitter  # jitter draws every rank apart
    auto_all = not uniform or fold_computes(lay.n_ranks, microbatches, len(w.layers), lay.pp, p.recompute) < FOLD_ABOVE
    if p.replicas == "all" or lay.dp == math.lcm(lay.ep, lay.cp) or (p.replicas == "auto" and auto_all):
        return lay.dp
    if not uniform:
        raise ConfigError("replicas: one folds identical replicas, but the ranks compute differently "
                          "(straggler, heterogeneous nodes or compute jitter); valid choices: auto, all")
    return math.lcm(lay.ep, lay.cp)  # whole expert-parallel groups and whole context-parallel rings stay live


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


def _ulysses_bytes(meta, mb: int, tp: int, cp: int, act: int) -> tuple[float, float]:
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


def _seq_hidden(lw, meta) -> tuple[int, int]:
    """(sequence length, hidden size) of an attention layer: its output shape, else the trace's meta."""
    if len(lw.output_shape) == 2:
        return int(lw.output_shape[0]), int(lw.output_shape[1])
    if meta.get("seq") and meta.get("hidden"):
        return int(meta["seq"]), int(meta["hidden"])
    raise ConfigError(f"recompute: selective needs the sequence length and hidden size; layer {lw.name!r} "
                      "has no (seq, hidden) output shape and the trace no transformer meta")
