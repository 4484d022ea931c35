"""How ``megatron`` lays a run out: the resolved :class:`~simcomm.llm.placement.Placement`, the batch split and the stages' layers.

:func:`resolve_layout` makes every divisibility check (one ``error:`` line naming the mismatch);
:func:`live_replicas` decides how many data-parallel replicas the plan simulates in full
(``replicas``, docs/engine.md "Replica and lane folding (megatron plans)").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.llm import layout as rules
from simcomm.llm.layout import Layout
from simcomm.llm.placement import Placement, layer_kind, structure
from simcomm.strategies.base import NotApplicable
from simcomm.strategies.megatron.moe import check_experts
from simcomm.strategies.megatron.params import MegatronParams

#: ``auto`` folds plans of at least this many compute ops; smaller ones are cheap to simulate in full
FOLD_ABOVE = 20_000


@dataclass(frozen=True)
class BatchSizes:
    """The resolved batch split: ``global_batch = microbatch × microbatches × dp``, and how it was found."""
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


def batch_sizes(p: MegatronParams, lay: Placement, w) -> BatchSizes:
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
        return BatchSizes(g, p.microbatch, p.microbatches, "given")
    if p.microbatches is not None:
        if per % p.microbatches:
            raise ConfigError(f"microbatches: {p.microbatches} does not divide the {per} samples per replica "
                              f"(global batch {g} ({src}) / dp {dp})")
        return BatchSizes(g, per // p.microbatches, p.microbatches, "microbatch derived")
    mb = p.microbatch if p.microbatch is not None else (1 if lay.pp > 1 else per)
    if per % mb:
        raise ConfigError(f"microbatch: {mb} does not divide the {per} samples per replica "
                          f"(global batch {g} ({src}) / dp {dp})")
    how = "given" if p.microbatch is not None else (
        "micro-batch 1 sample (pipelines need many micro-batches; Megatron-LM's large runs use 1-2)"
        if lay.pp > 1 else "one micro-batch per replica (no pipeline, so no gradient accumulation)")
    return BatchSizes(g, mb, per // mb, how)


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




def _raise(problem: str | None) -> None:
    if problem is not None:
        raise ConfigError(problem)


def resolve_layout(p: MegatronParams, w, names: list[str]):
    """(Placement, Structure or None, sizes): every divisibility check (:mod:`simcomm.llm.layout`'s rules, the
    ones the search enumerates by; the experts' in :func:`~simcomm.strategies.megatron.moe.check_experts`),
    each one line naming the mismatch."""
    n = w.n_ranks
    ep = p.experts_parallel
    cp = p.cp
    _raise(rules.split_problem(n, p.tp, cp, p.pp, p.dp))
    dp = p.dp if p.dp is not None else n // (p.tp * p.pp * cp)
    lay = Placement(p.tp, p.pp, dp * cp, ep, p.virtual, p.order, cp, p.etp)  # Placement.dp: parameter replicas
    s = structure(names)
    meta = dict(w.trace.meta.get("transformer") or {})
    if s is None:
        if p.tp > 1 or p.pp > 1 or ep > 1 or cp > 1:
            raise NotApplicable(f"tp/pp/cp/experts-parallel need a transformer trace (layers block{{i}}.attn and "
                                f".mlp/.moe); trace {w.trace.model!r} has none")
    else:
        if stage_layers(p, len(s.blocks)) is None:
            _raise(rules.stages_problem(len(s.blocks), p.pp, p.virtual))
        _raise(rules.tp_problem(p.tp, meta.get("heads"), meta.get("kv_heads")))
        seq = meta.get("seq")
        if cp > 1 and not seq:
            raise ConfigError(f"cp: {cp} splits the sequence, but trace {w.trace.model!r} has no transformer meta "
                              "with its sequence length")
        _raise(rules.cp_problem(cp, seq))
        if cp > 1 and p.cp_kind != "ring":
            _check_ulysses_heads(p, meta, w.trace.model)
    if p.shard_group is not None:
        if lay.dp % p.shard_group:
            raise ConfigError(f"shard-group: {p.shard_group} does not divide the {lay.dp} data-parallel replicas"
                              + (f" (dp {dp} × cp {cp})" if cp > 1 else "") + "; valid choices: "
                              + ", ".join(str(g) for g in range(1, lay.dp + 1) if lay.dp % g == 0))
        if ep > 1 or lay.expert_tp != p.tp:
            raise ConfigError("shard-group: HSDP with experts-parallel > 1 or etp is not modelled; give one of them")
    if ep > 1 or p.etp is not None:
        if not any(layer_kind(x) == "moe" for x in names):
            what = f"experts-parallel: {ep}" if ep > 1 else f"etp: {p.etp}"
            raise ConfigError(f"{what} needs MoE layers (block{{i}}.moe); trace {w.trace.model!r} has none")
        check_experts(p, lay, meta, w.trace.model)
    sizes = batch_sizes(p, lay, w)
    if p.global_batch is None and w.scaling == "strong":  # say it: strong scaling rounds B up to ⌈B/R⌉·R
        sizes = BatchSizes(sizes.global_batch, sizes.microbatch, sizes.microbatches,
                       f"{sizes.how}; strong scaling's {w.batch} per rank × {w.n_ranks} ranks, the requested "
                       "global batch rounded up to a multiple of the ranks; --opt global_batch=B keeps B exactly")
    _raise(rules.batch_problem(sizes.global_batch, lay.data, sizes.microbatch, p.pp, p.schedule))
    _check_plan_size(p, lay, w, sizes)
    return lay, s, sizes


def _check_plan_size(p: MegatronParams, lay: Placement, w, sizes: BatchSizes) -> None:
    """Refuse, before building it, a plan too large to hold in memory (``--batch 1000000000``: billions of ops)."""
    live = live_replicas(p, lay, w, sizes.microbatches) if lay.dp > 1 else 1
    computes = fold_computes(lay.n_ranks * live // lay.dp, sizes.microbatches, len(w.layers), lay.pp, p.recompute)
    if computes > MAX_PLAN_COMPUTES:
        raise ConfigError(f"global batch: {sizes.global_batch:,} samples in {sizes.microbatches:,} micro-batches "
                          f"of {sizes.microbatch} make a plan of {computes:,} compute ops, more than the "
                          f"{MAX_PLAN_COMPUTES:,} simcomm builds (about {MAX_PLAN_COMPUTES * 200 / 1e9:.0f} GB); give "
                          "a smaller global batch or a larger micro-batch (the step time grows linearly with the "
                          "micro-batches once the pipeline is full)")



#: the most compute ops a megatron plan may hold (with the other ops, about 200 bytes each while it is built)
MAX_PLAN_COMPUTES = 20_000_000


def layout_of(p: MegatronParams, place: Placement, sizes: BatchSizes) -> Layout:
    """The resolved options as the one :class:`simcomm.llm.layout.Layout` the search and the estimate use."""
    return Layout(place.tp, place.pp, place.data, p.schedule, place.virtual, p.zero, sizes.microbatch,
                  p.sequence_parallel, p.recompute, place.cp, p.shard_group, place.ep, p.etp)


def fold_computes(n_ranks: int, microbatches: int, n_layers: int, pp: int, recompute: str) -> int:
    """The compute ops a full plan would hold, as ``replicas=auto`` counts them against :data:`FOLD_ABOVE`:
    one per rank, layer (embedding and head included), micro-batch and phase, over the pipeline stages."""
    return n_ranks * microbatches * n_layers * (3 if recompute == "full" else 2) // pp


def live_replicas(p: MegatronParams, lay: Placement, w, microbatches: int) -> int:
    """How many data-parallel replicas the plan simulates in full (``replicas``; docs/engine.md, "Replica and lane folding").

    Replicas run the same ops, so on a symmetric cluster one stands for all: the rest
    appear only in the data-parallel collectives (their full groups).  Expert-parallel
    groups span ``ep`` consecutive replicas and context-parallel rings ``cp``, so a fold
    keeps lcm(ep, cp) replicas live.  Per-rank compute scales (stragglers) make replicas
    differ: ``auto`` then keeps all, and ``one`` is refused.  ``auto`` also keeps all when
    the full plan is small (under :data:`FOLD_ABOVE` compute ops), where folding saves nothing.
    """
    uniform = len(set(w.compute_scale)) <= 1 and not w.compute_jitter  # jitter draws every rank apart
    auto_all = not uniform or fold_computes(lay.n_ranks, microbatches, len(w.layers), lay.pp, p.recompute) < FOLD_ABOVE
    keep = expert_replicas(lay)
    if p.replicas == "all" or lay.dp <= keep or (p.replicas == "auto" and auto_all):
        return lay.dp
    if not uniform:
        raise ConfigError("replicas: one folds identical replicas, but the ranks compute differently "
                          "(straggler, heterogeneous nodes or compute jitter); valid choices: auto, all")
    return keep  # whole expert tensor/expert-parallel groups and whole context-parallel rings stay live


def expert_replicas(lay: Placement) -> int:
    """The fewest replicas that hold whole context-parallel rings and whole ``etp·ep`` expert groups (stage indices
    ``t + tp·d``: the first ``tp·n`` of them must be a multiple of ``etp·ep``)."""
    group = lay.expert_tp * lay.ep
    return math.lcm(lay.cp, group // math.gcd(lay.tp, group))

