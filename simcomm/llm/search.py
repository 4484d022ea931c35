"""``simcomm plan``'s search: enumerate layouts, keep what fits, prune by the estimate, rank by simulation.

Four steps, cheapest first (docs/plan.md):

1. :func:`enumerate_layouts`: every :class:`~simcomm.llm.layout.Layout` (tp, cp, pp, dp, ep, schedule,
   virtual stages, ZeRO stage and HSDP group, micro-batch, sequence parallelism, recomputation) that
   :mod:`simcomm.llm.layout`'s rules accept: the sizes the ``megatron`` strategy itself accepts.
2. :func:`fit_layouts`: the memory model (:mod:`simcomm.memory`) keeps those that fit in a GPU.
3. :class:`~simcomm.llm.estimate.Pricer`: a closed-form step time for every fitting layout, used only
   to choose which layouts to simulate.
4. :func:`simcomm.llm.simulate.simulate_best`: the best K by estimate run through
   :func:`simcomm.pipeline.simulate`, the pipeline ``simcomm run`` uses; :func:`rank_rows` puts every simulated
   row, fastest first, above every row that has only an estimate, so the winner is always a simulated layout.

Precision (bf16, FP8 ...) is an axis too: :func:`search_precisions` runs steps 1-3 once per precision (its
own trace) and merges the rows by estimate, each tagged with its precision.

Pure library: no typer, rich or matplotlib here; ``progress`` callbacks stand in for a bar.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from simcomm.errors import ConfigError
from simcomm.llm.estimate import Estimate
from simcomm.llm.fitting import fits_budget, layout_memory
from simcomm.llm.layout import Layout, batch_problem, cp_problem, divisors, ep_problem, split_problem, stages_problem, tp_problem
from simcomm.memory import layout as memory_layout
from simcomm.memory.fit import Budget

__all__ = ["Space", "Row", "search", "search_precisions", "memory_dtype", "auto_cps", "valid_cps", "node_shard_group",
           "enumerate_layouts", "batch_skipped",
           "layout_memory", "fit_layouts", "fits_budget", "rank_rows", "ESTIMATE", "FLOW", "ANALYTIC", "CP_AUTO_SEQ",
           "NODE", "PARALLEL_LAYOUTS"]

ESTIMATE, FLOW, ANALYTIC = "estimate", "simulated flow", "simulated analytic"

#: ``simcomm plan --cp auto`` searches context parallelism only from this sequence length on (docs/plan.md)
CP_AUTO_SEQ = 8192
#: :attr:`Space.shard_groups` entry for the in-node HSDP group of each layout (:func:`node_shard_group`)
NODE = "node"
#: :func:`search` runs a phase in worker processes from this many layouts on (a worker's start, about 1-2 s
#: of imports and setup, is more than the memory model and the estimate of a few thousand layouts)
PARALLEL_LAYOUTS = 4000


@dataclass(frozen=True)
class Space:
    """Which values each axis may take (docs/plan.md).

    The defaults are everything the strategy supports except the two axes that multiply the search:
    context parallelism (``cps``: 1 only) and HSDP (``shard_groups``: none).  ``simcomm plan`` resolves its
    ``--cp auto`` into ``cps=None`` (:func:`auto_cps` of the GPUs per node) and ``--shard-group auto`` into
    :data:`NODE`.  ``eps`` None: every expert-parallel size dividing the experts and the replicas (1 for a
    dense model).
    """

    max_tp: int | None = None  # None: the GPUs per node (tensor parallelism stays on NVLink)
    max_microbatch: int = 16
    zeros: tuple[int, ...] = (0, 1, 2, 3)
    schedules: tuple[str, ...] = ("1f1b", "interleaved", "gpipe")
    recomputes: tuple[str, ...] = ("none", "selective", "full")
    sequence_parallel: tuple[bool, ...] = (False, True)
    cps: tuple[int, ...] | None = (1,)  # context-parallel sizes (each where it divides); None: auto_cps
    shard_groups: tuple = ()  # HSDP group sizes (ints, or NODE) tried beside plain ZeRO-3, where they divide dp·cp
    eps: tuple[int, ...] | None = None  # expert-parallel sizes; None: every one that divides


def auto_cps(cfg, gpus_per_node: int) -> tuple[int, ...]:
    """``--cp auto``: 1, plus 2, 4, ... up to the GPUs per node when the sequence is at least
    :data:`CP_AUTO_SEQ` tokens (and the size divides it).  Both bounds are choices (docs/plan.md, section
    1.1): shorter sequences' attention pieces, which hide the ring steps, shrink as 1/cp²."""
    out = [1]
    if cfg.seq >= CP_AUTO_SEQ:
        c = 2
        while c <= gpus_per_node:
            if cfg.seq % c == 0:
                out.append(c)
            c *= 2
    return tuple(out)


def valid_cps(cfg, n_gpus: int) -> list[int]:
    """Every context-parallel size the strategy accepts on ``n_gpus``: dividing the GPUs and the sequence
    (each rank holds seq / cp tokens; ``megatron``'s own checks)."""
    return divisors(math.gcd(n_gpus, cfg.seq))


@functools.lru_cache(maxsize=4096)
def node_shard_group(tp: int, cp: int, pp: int, dp: int, gpus_per_node: int) -> int | None:
    """HSDP's usual group (FSDP HYBRID_SHARD: shard within a node, replicate across): the largest size
    ``G < dp·cp`` (at least 2) dividing the ``dp·cp`` replicas whose every shard group of consecutive
    replicas (the strategy's placement) lies inside one node; None when the replicas of a lane already sit
    in one node (plain ZeRO-3 is then the in-node sharding) or no group of 2 fits in a node."""
    reps = dp * cp
    place = Layout(tp, pp, dp, cp=cp).placement()

    def in_node(g):
        return all(len({r // gpus_per_node for r in grp}) == 1
                   for t in range(tp) for q in range(pp) for grp in place.shard_groups(t, q, g))

    if in_node(reps):
        return None
    return next((g for g in sorted(divisors(reps), reverse=True) if 2 <= g < reps and in_node(g)), None)


def _shard_groups(space: Space, tp: int, cp: int, pp: int, dp: int, gpus_per_node: int) -> list:
    """[None (plain ZeRO-3)] + the HSDP sizes of ``space`` dividing the dp·cp replicas, ascending."""
    reps, out = dp * cp, set()
    for g in space.shard_groups:
        size = node_shard_group(tp, cp, pp, dp, gpus_per_node) if g == NODE else g
        if size is not None and size < reps and reps % size == 0:
            out.add(size)
    return [None, *sorted(out)]


def _splits(cfg, n_gpus: int, gpus_per_node: int, space: Space):
    """(tp, cp, pp, dp) of every split :mod:`simcomm.llm.layout`'s rules accept (tp <= ``max_tp``)."""
    max_tp = space.max_tp if space.max_tp is not None else gpus_per_node
    cps = space.cps if space.cps is not None else auto_cps(cfg, gpus_per_node)
    for tp in divisors(n_gpus):
        if tp > max_tp or tp_problem(tp, cfg.heads, cfg.kv_heads, cfg.ffn):
            continue
        for cp in cps:
            if split_problem(n_gpus, tp, cp, 1) or cp_problem(cp, cfg.seq):
                continue
            for pp in divisors(n_gpus // (tp * cp)):
                if not stages_problem(cfg.layers, pp):
                    yield tp, cp, pp, n_gpus // (tp * cp * pp)


def _experts(cfg, space: Space, tp: int, replicas: int) -> list[tuple[int, int | None]]:
    """(ep, etp) of a split: (1, None) for a dense model; else each expert-parallel size of ``space`` (all
    dividing by default) with the expert tensor-parallel size the attention's (None) and, when tp > 1, 1
    (Megatron-core's ``--expert-tensor-parallel-size 1``), where :func:`~simcomm.llm.layout.ep_problem` accepts
    them."""
    experts = getattr(cfg, "experts", 0) or 0
    if not experts:
        return [(1, None)]
    ffn = getattr(cfg, "ffn", 0) or 0
    cands = space.eps if space.eps is not None else divisors(tp * replicas)
    out = []
    for e in cands:
        if replicas % e:  # the memory model (simcomm.memory.layout) still carves ep out of the dp·cp replicas only
            continue
        for etp in ([None, 1] if tp > 1 else [None]):
            if not ep_problem(e, etp or tp, tp, replicas, experts, ffn, cfg.name, etp is not None):
                out.append((e, etp))
    return out


def enumerate_layouts(cfg, n_gpus: int, global_batch: int, gpus_per_node: int, space: Space = Space()) -> list[Layout]:
    """Every layout of ``cfg`` (a TransformerConfig) on ``n_gpus`` GPUs for ``global_batch``, in a fixed order.

    tp divides the GPUs, the heads, the KV heads and the FFN, and is at most ``max_tp``; cp (from
    ``space.cps``) divides the GPUs left and the sequence; pp divides the layers and the GPUs left; dp is
    the rest and divides the global batch (the CP ranks of a replica share its samples); ep (MoE models)
    divides the experts and, times etp (the attention's tp, or 1), a stage's tp·dp·cp ranks; the
    micro-batch divides the samples per replica (at most ``max_microbatch``).  With pp = 1 the schedule is
    ``1f1b`` (there is no pipeline to schedule); interleaving takes every virtual count v >= 2 dividing the layers per stage and needs the
    micro-batches to be a multiple of pp (Megatron-LM's rule).  ZeRO stages > 0 need dp·cp > 1 replicas
    and sequence parallelism tp > 1 (otherwise they change nothing and would be duplicates).  ZeRO-3
    layouts come plain and with each HSDP size of ``space.shard_groups`` smaller than and dividing dp·cp
    (the full size is plain ZeRO-3; HSDP is not combined with ep > 1, which the strategy refuses).
    """
    out: list[Layout] = []
    for tp, cp, pp, dp in _splits(cfg, n_gpus, gpus_per_node, space):
        if global_batch % dp:
            continue
        per = global_batch // dp
        scheds = [("1f1b", 1)] if pp == 1 else \
            [(s, v) for s in space.schedules
             for v in ([1] if s != "interleaved" else [v for v in divisors(cfg.layers // pp) if v > 1])]
        for ep, etp in _experts(cfg, space, tp, dp * cp):
            for schedule, v in scheds:
                for zero in space.zeros:
                    if zero and dp * cp == 1:
                        continue
                    plain = ep == 1 and etp is None  # HSDP with expert parallelism is refused by the strategy
                    groups = _shard_groups(space, tp, cp, pp, dp, gpus_per_node) if zero == 3 and plain else [None]
                    for g in groups:
                        for mb in divisors(per):
                            if mb > space.max_microbatch:
                                break
                            if batch_problem(global_batch, dp, mb, pp, schedule):
                                continue
                            for sp in space.sequence_parallel:
                                if sp and tp == 1:
                                    continue
                                for rc in space.recomputes:
                                    out.append(Layout(tp, pp, dp, schedule, v, zero, mb, sp, rc, cp, g, ep, etp))
    return out


def batch_skipped(cfg, n_gpus: int, global_batch: int, gpus_per_node: int, space: Space = Space()) -> list[tuple]:
    """The (tp, pp, dp) splits (``(tp, pp, dp, cp)`` when cp > 1) :func:`enumerate_layouts` skips only because
    dp does not divide the global batch.

    The global batch is the user's and is kept exactly (never rounded to a multiple of dp); the caller
    prints how many splits that rules out.
    """
    return [(tp, pp, dp) if cp == 1 else (tp, pp, dp, cp)
            for tp, cp, pp, dp in _splits(cfg, n_gpus, gpus_per_node, space) if global_batch % dp]


def memory_dtype(precision: str) -> str:
    """The memory model's dtype for a ``--precision``: Transformer Engine's FP8 recipes keep bf16 weights,
    gradients and activations beside the FP8 copies of the GEMM inputs (the ``megatron`` strategy's own
    memory check counts them as bf16), so an FP8 layout's memory is its bf16 layout's."""
    from simcomm.precision import PRECISIONS
    from simcomm.traces.synth import FP8_DTYPES

    return "bf16" if precision in FP8_DTYPES else PRECISIONS[precision].compute


def fit_layouts(cfg, layouts, global_batch: int, device, dtype: str = "bf16", progress=None):
    """([(layout, memory)] that fit ``device``, the smallest (layout, memory) seen).

    ``device`` is a :class:`~simcomm.memory.fit.Budget` (capacity, margin, policy), a trace device name or a
    number of bytes (the default margin, refusing).  A layout fits when :func:`simcomm.memory.fit.check`
    accepts it: under ``memory = warn`` or ``off`` every layout does.  ``progress()`` is called per layout.
    """
    budget = device if isinstance(device, Budget) else memory_layout.device_budget(device)
    fits, smallest = [], None
    for lay in layouts:
        mem = layout_memory(cfg, lay, global_batch, dtype)
        if smallest is None or mem.total < smallest[1].total:
            smallest = (lay, mem)
        if fits_budget(mem, budget):
            fits.append((lay, mem))
        if progress is not None:
            progress()
    return fits, smallest


@dataclass
class Row:
    """One layout: its memory, its estimate, and (when simulated) the pipeline's step time."""

    layout: Layout
    memory_bytes: int
    estimate: Estimate
    step_s: float = 0.0
    priced: str = ESTIMATE
    compute_s: float | None = None  # simulated: mean per-rank compute
    exposed_s: float | None = None  # simulated: step - compute (communication, bubble and update not hidden)
    note: str = ""
    estimate_rank: int = 0  # 1-based place by estimate among the fitting layouts (0: not set)
    precision: str | None = None  # set when the search covers several precisions (None: the scenario's one)
    bound_s: float | None = None  # a lower bound on its simulated step (simcomm.engine.bound), when worked out
    #: simulated: each iteration kind's ``engine`` record, the paths its run took (as ``simcomm run --json``'s)
    engine: tuple = ()

    def __post_init__(self):
        if not self.step_s:
            self.step_s = self.estimate.step

    @property
    def simulated(self) -> bool:
        return self.priced != ESTIMATE

    def to_dict(self, global_batch: int) -> dict:
        e = self.estimate
        return {**self.layout.to_dict(), "microbatches": self.layout.microbatches(global_batch),
                "memory_gb": self.memory_bytes / 1e9, "step_s": self.step_s, "priced": self.priced,
                "samples_per_s": global_batch / self.step_s if self.step_s > 0 else math.inf,
                "estimate_rank": self.estimate_rank,
                "estimate": {"step_s": e.step, "compute_s": e.compute, "tp_s": e.tp, "cp_s": e.cp, "ep_s": e.ep,
                             "bubble_s": e.bubble, "dp_s": e.dp, "update_s": e.update},
                "simulated": None if not self.simulated else {"compute_s": self.compute_s,
                                                              "exposed_s": self.exposed_s,
                                                              "engine": list(self.engine)},
                "note": self.note, **({"precision": self.precision} if self.precision else {})}


def rank_by_estimate(rows: list[Row]) -> list[Row]:
    """Fastest estimate first; ties by less memory, then the layout's own order (deterministic).  Sets each
    row's :attr:`Row.estimate_rank`."""
    out = sorted(rows, key=lambda r: (r.estimate.step, r.memory_bytes, r.layout, r.precision or ""))
    for i, r in enumerate(out):
        r.estimate_rank = i + 1
    return out


def rank_rows(rows: list[Row]) -> list[Row]:
    """Every simulated row, fastest simulated step first, then every estimate-only row by its estimate: an
    estimate never outranks a simulation.  Ties by less memory, then the layout's own order."""
    return sorted(rows, key=lambda r: (not r.simulated, r.step_s, r.memory_bytes, r.layout, r.precision or ""))


@dataclass
class Found:
    """What :func:`search` found on one cluster size: every fitting layout ranked by estimate."""

    rows: list[Row]  # fitting layouts, fastest estimate first (Row.estimate_rank set)
    enumerated: int
    fit: int
    device: object  # the memory Budget (label, capacity, margin, policy)
    gpus: int
    context: object  # the pipeline Context (stack choice, trace)
    scenario: object


def _check_batch_size(cfg, n_gpus: int, global_batch: int, space: Space) -> None:
    """Refuse, before enumerating, a global batch whose smallest plan is too large to simulate (1e9 samples).

    The fewest micro-batches any layout runs per replica is ``global_batch / (GPUs x largest micro-batch)``
    (every GPU a data-parallel replica); each runs at least a forward and a backward per layer on one rank,
    which :data:`~simcomm.strategies.megatron.sizing.MAX_PLAN_COMPUTES` bounds as the strategy does.
    """
    from simcomm.strategies.megatron.sizing import MAX_PLAN_COMPUTES

    fewest = -(-global_batch // (n_gpus * space.max_microbatch))
    computes = fewest * (cfg.layers + 2) * 2
    if computes > MAX_PLAN_COMPUTES:
        raise ConfigError(f"global batch: {global_batch:,} samples on {n_gpus} GPUs run at least {fewest:,} "
                          f"micro-batches of {space.max_microbatch} per replica, a plan of at least {computes:,} "
                          f"compute ops per rank, more than the {MAX_PLAN_COMPUTES:,} simcomm builds; give a "
                          "global batch of a real step (thousands of sequences)")


def search(cfg, base: dict, nodes: int, global_batch: int, space: Space, dtype: str, progress=None,
           strict: bool = True, workers: int = 1, parallel_from: int = PARALLEL_LAYOUTS) -> Found:
    """Enumerate, fit and estimate every layout of ``cfg`` on ``nodes`` nodes (``base``: flat scenario keys).

    Raises one ConfigError line when nothing divides or nothing fits (``strict``: also when a ``cp`` or
    ``shard_group`` value of ``space`` fits no layout on these GPUs; the Pareto sweep's other node counts skip
    them).  ``progress(stage, total)`` starts a stage and returns a per-item callback (or None).  ``workers`` > 1
    runs the memory model and the estimate in that many processes, each phase once it has ``parallel_from``
    layouts or more (fewer cost less than starting the processes): the same rows.
    """
    from simcomm.llm.search_parts import estimate_in_processes, estimate_part, fit_in_processes
    from simcomm.pipeline import Context, memory_budget
    from simcomm.scenario import from_flat
    from simcomm.units import format_size

    scn = from_flat({**base, "strategy": "megatron", "nodes": nodes})
    ctx = Context(scn)
    _, topo = ctx.cluster(nodes, 0)
    n = topo.n_ranks
    gpn = max(1, n // nodes)
    dev = memory_budget(ctx.device(), scn.memory)
    if dev is None:
        raise ConfigError(f"cluster: {scn.cluster!r} names no GPU the memory model knows ({ctx.device() or 'none'}); "
                          "plan needs a GPU's memory to filter layouts (--gpu-memory gives one, e.g. 80GB)")
    if strict:
        check_cp(space.cps, cfg, n)
    _check_batch_size(cfg, n, global_batch, space)
    layouts = enumerate_layouts(cfg, n, global_batch, gpn, space)
    if strict:
        check_shard_groups(space, layouts, n)
    if not layouts:
        max_tp = space.max_tp or gpn
        raise ConfigError(f"layout: no tp × pp × dp = {n} GPUs divides {cfg.name}'s {cfg.layers} layers and "
                          f"{cfg.heads} heads (tp <= {max_tp}) with dp dividing the global batch {global_batch}; "
                          f"try a global batch that is a multiple of {n} or another node count")
    tick = progress(f"memory of {len(layouts)} layouts ({n} GPUs)", len(layouts)) if progress else None
    if workers > 1 and len(layouts) >= parallel_from:
        fits, smallest = fit_in_processes(cfg, layouts, global_batch, dev, memory_dtype(dtype), workers, tick)
    else:
        fits, smallest = fit_layouts(cfg, layouts, global_batch, dev, memory_dtype(dtype), tick)
    if not fits:
        lay, mem = smallest
        peak = mem.peak()
        raise ConfigError(f"memory: none of the {len(layouts)} layouts of {cfg.name} on {n} GPUs fits {dev.what} "
                          f"({format_size(dev.capacity)}); the smallest needs {format_size(peak.need(dev))} per GPU "
                          f"({mem.layout}: {mem.breakdown()}); use more GPUs or a smaller global batch")
    tick = progress(f"estimating {len(fits)} layouts that fit", len(fits)) if progress else None
    lays = [lay for lay, _ in fits]
    if workers > 1 and len(lays) >= parallel_from:
        estimates = estimate_in_processes(base, nodes, global_batch, lays, workers, tick)
    else:
        estimates = estimate_part(base, nodes, global_batch, lays, tick, (scn, ctx, topo))
    rows = [Row(lay, mem.total, e) for (lay, mem), e in zip(fits, estimates, strict=True)]
    return Found(rank_by_estimate(rows), len(layouts), len(fits), dev, n, ctx, scn)


def search_precisions(cfg, base: dict, nodes: int, global_batch: int, space: Space, precisions: tuple[str, ...],
                      progress=None, strict: bool = True, workers: int = 1,
                      parallel_from: int = PARALLEL_LAYOUTS) -> Found:
    """:func:`search` once per precision (``base``'s ``precision`` replaced: its own trace, so its own
    compute), every row tagged with its precision and all ranked together by estimate.  One precision is
    exactly :func:`search` (rows untagged)."""
    if len(precisions) == 1:
        return search(cfg, {**base, "precision": precisions[0]}, nodes, global_batch, space, precisions[0],
                      progress, strict, workers, parallel_from)
    founds = [search(cfg, {**base, "precision": p}, nodes, global_batch, space, p, progress, strict, workers,
                     parallel_from)
              for p in precisions]
    rows = [replace(r, precision=p) for f, p in zip(founds, precisions, strict=False) for r in f.rows]
    first = founds[0]
    return Found(rank_by_estimate(rows), sum(f.enumerated for f in founds), sum(f.fit for f in founds),
                 first.device, first.gpus, first.context, first.scenario)


def check_cp(cps, cfg, n_gpus: int) -> None:
    """Every ``cp`` value divides the GPUs (and the sequence): one line naming the valid choices."""
    for c in cps or ():
        if n_gpus % c:
            raise ConfigError(f"--cp: {c} does not divide the {n_gpus} GPUs; valid choices: auto, "
                              f"{', '.join(map(str, valid_cps(cfg, n_gpus)))}")


def check_shard_groups(space: Space, layouts, n_gpus: int) -> None:
    """Each explicit ``shard_group`` size divides the dp·cp replicas of some ZeRO-3 layout (a smaller
    size than all of them), else one line with the sizes that would."""
    sizes = [g for g in space.shard_groups if g != NODE]
    if not sizes:
        return
    if 3 not in space.zeros:
        raise ConfigError(f"--shard-group: {','.join(map(str, sizes))} (HSDP) needs ZeRO-3, and --zero "
                          f"{','.join(map(str, space.zeros))} leaves it out; valid choices: auto, none, or add 3 to "
                          "--zero")
    reps = sorted({x.replicas for x in layouts if x.zero == 3})
    valid = sorted({g for r in reps for g in divisors(r) if g < r})
    for g in sizes:
        if not any(r % g == 0 and g < r for r in reps):
            raise ConfigError(f"--shard-group: {g} divides the data-parallel replicas (dp × cp: "
                              f"{', '.join(map(str, reps)) or 'none'}) of no ZeRO-3 layout on {n_gpus} GPUs "
                              f"(and is smaller); valid choices: auto, none, {', '.join(map(str, valid)) or '-'}")
