"""``simcomm plan``: search the ``megatron`` layouts of a transformer on a cluster (docs/plan.md).

Three steps, cheapest first:

1. :func:`enumerate_layouts`: every (tp, pp, dp, schedule, virtual, zero,
   micro-batch, sequence parallel, recompute, context parallel, HSDP shard
   group) that divides the GPU count, the layers, the heads and the sequence,
   and whose dp divides the global batch (the sizes the ``megatron`` strategy
   itself accepts).
2. :func:`fit_layouts`: the memory model (:func:`simcomm.memory.layout.estimate`
   and :func:`simcomm.memory.fit.check`) keeps those that fit in a GPU;
   none fitting is one error line naming the smallest need found.
3. :class:`Pricer`: a closed-form step time for every fitting layout (compute
   from the trace, pipeline bubble, tensor-parallel, context-parallel ring and
   data-parallel (HSDP: in and across shard groups) communication priced one
   at a time by the engine's analytic NCCL model), used
   to rank them; the caller then simulates the best few with the pipeline
   (:func:`simulate_row`).  Every row says how its step time was obtained.

Pure library: no typer, rich or matplotlib here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from itertools import accumulate

from simcomm.memory import layout as memory_layout
from simcomm.memory.fit import Budget, check
from simcomm.errors import ConfigError
from simcomm.strategies.megatron import FOLD_ABOVE, core_share, fold_computes, kv_block_bytes
from simcomm.llm.compute import sharded_layer_times

__all__ = ["Layout", "Space", "Estimate", "Row", "divisors", "auto_cps", "valid_cps", "node_shard_group",
           "enumerate_layouts", "batch_skipped", "layout_memory",
           "fit_layouts", "Pricer", "plan_ops", "rank_rows", "simulate_row", "ESTIMATE", "FLOW", "ANALYTIC"]

ESTIMATE, FLOW, ANALYTIC = "estimate", "simulated flow", "simulated analytic"


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n``, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]


@functools.total_ordering
@dataclass(frozen=True)
class Layout:
    """One ``megatron`` layout (its fields are the strategy's options of the same names).

    ``dp`` counts the data replicas proper (each takes its own samples), as the strategy's ``dp``
    option does; with context parallelism the parameters have ``dp · cp`` replicas (:attr:`replicas`).
    ``shard_group`` None is plain ZeRO (sharded over all replicas), an int is HSDP (ZeRO-3 only).
    """

    tp: int
    pp: int
    dp: int
    schedule: str
    virtual: int
    zero: int
    microbatch: int
    sequence_parallel: bool
    recompute: str
    cp: int = 1
    shard_group: int | None = None

    @property
    def replicas(self) -> int:
        """Ranks holding the same parameters: gradients are reduced, and ZeRO shards, over them (dp · cp)."""
        return self.dp * self.cp

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    def _key(self) -> tuple:
        # the old nine fields first, so layouts without cp or HSDP keep their order; None (plain) before HSDP
        return (self.tp, self.pp, self.dp, self.schedule, self.virtual, self.zero, self.microbatch,
                self.sequence_parallel, self.recompute, self.cp, self.shard_group or 0)

    def __lt__(self, other):
        if not isinstance(other, Layout):
            return NotImplemented
        return self._key() < other._key()

    def microbatches(self, global_batch: int) -> int:
        return global_batch // (self.dp * self.microbatch)

    def options(self, global_batch: int) -> dict:
        """Flat strategy options for :func:`simcomm.scenario.from_flat`."""
        out = {**self.to_dict(), "global_batch": global_batch}
        if self.shard_group is None:
            del out["shard_group"]
        return out

    def to_dict(self) -> dict:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "schedule": self.schedule, "virtual": self.virtual,
                "zero": self.zero, "microbatch": self.microbatch, "sequence_parallel": self.sequence_parallel,
                "recompute": self.recompute, "cp": self.cp, "shard_group": self.shard_group}


#: ``simcomm plan --cp auto`` searches context parallelism only from this sequence length on (docs/plan.md)
CP_AUTO_SEQ = 8192
#: :attr:`Space.shard_groups` entry for the in-node HSDP group of each layout (:func:`node_shard_group`)
NODE = "node"


@dataclass(frozen=True)
class Space:
    """Which values each axis may take (docs/plan.md).

    The defaults are everything the strategy supports except the two axes that multiply the search:
    context parallelism (``cps``: 1 only) and HSDP (``shard_groups``: none).  ``simcomm plan`` resolves its
    ``--cp auto`` into ``cps=None`` (:func:`auto_cps` of the GPUs per node) and ``--shard-group auto`` into
    :data:`NODE`.
    """

    max_tp: int | None = None  # None: the GPUs per node (tensor parallelism stays on NVLink)
    max_microbatch: int = 16
    zeros: tuple[int, ...] = (0, 1, 2, 3)
    schedules: tuple[str, ...] = ("1f1b", "interleaved", "gpipe")
    recomputes: tuple[str, ...] = ("none", "selective", "full")
    sequence_parallel: tuple[bool, ...] = (False, True)
    cps: tuple[int, ...] | None = (1,)  # context-parallel sizes (each where it divides); None: auto_cps
    shard_groups: tuple = ()  # HSDP group sizes (ints, or NODE) tried beside plain ZeRO-3, where they divide dp·cp


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
    from simcomm.strategies._layout import Layout as Placement

    reps = dp * cp
    place = Placement(tp, pp, reps, cp=cp)

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
    """(tp, cp, pp, dp) of every split dividing the GPUs, heads, KV heads, FFN, sequence and layers."""
    max_tp = space.max_tp if space.max_tp is not None else gpus_per_node
    cps = space.cps if space.cps is not None else auto_cps(cfg, gpus_per_node)
    for tp in divisors(n_gpus):
        if tp > max_tp or cfg.heads % tp or cfg.kv_heads % tp or cfg.ffn % tp:
            continue
        for cp in cps:
            if (n_gpus // tp) % cp or cfg.seq % cp:
                continue
            for pp in divisors(n_gpus // (tp * cp)):
                if cfg.layers % pp == 0:
                    yield tp, cp, pp, n_gpus // (tp * cp * pp)


def enumerate_layouts(cfg, n_gpus: int, global_batch: int, gpus_per_node: int, space: Space = Space()) -> list[Layout]:
    """Every layout of ``cfg`` (a TransformerConfig) on ``n_gpus`` GPUs for ``global_batch``, in a fixed order.

    tp divides the GPUs, the heads, the KV heads and the FFN, and is at most ``max_tp``; cp (from
    ``space.cps``) divides the GPUs left and the sequence; pp divides the layers and the GPUs left; dp is
    the rest and divides the global batch (the CP ranks of a replica share its samples); the micro-batch
    divides the samples per replica (at most ``max_microbatch``).  With pp = 1 the schedule is ``1f1b``
    (there is no pipeline to schedule); interleaving takes every virtual count v >= 2 dividing the layers
    per stage and needs the micro-batches to be a multiple of pp (Megatron-LM's rule).  ZeRO stages > 0
    need dp·cp > 1 replicas and sequence parallelism tp > 1 (otherwise they change nothing and would be
    duplicates).  ZeRO-3 layouts come plain and with each HSDP size of ``space.shard_groups`` smaller than
    and dividing dp·cp (the full size is plain ZeRO-3).
    """
    out: list[Layout] = []
    for tp, cp, pp, dp in _splits(cfg, n_gpus, gpus_per_node, space):
        if global_batch % dp:
            continue
        per = global_batch // dp
        scheds = [("1f1b", 1)] if pp == 1 else \
            [(s, v) for s in space.schedules
             for v in ([1] if s != "interleaved" else [v for v in divisors(cfg.layers // pp) if v > 1])]
        for schedule, v in scheds:
            for zero in space.zeros:
                if zero and dp * cp == 1:
                    continue
                groups = _shard_groups(space, tp, cp, pp, dp, gpus_per_node) if zero == 3 else [None]
                for g in groups:
                    for mb in divisors(per):
                        if mb > space.max_microbatch:
                            break
                        if schedule == "interleaved" and (per // mb) % pp:
                            continue
                        for sp in space.sequence_parallel:
                            if sp and tp == 1:
                                continue
                            for rc in space.recomputes:
                                out.append(Layout(tp, pp, dp, schedule, v, zero, mb, sp, rc, cp, g))
    return out


def batch_skipped(cfg, n_gpus: int, global_batch: int, gpus_per_node: int, space: Space = Space()) -> list[tuple]:
    """The (tp, pp, dp) splits (``(tp, pp, dp, cp)`` when cp > 1) :func:`enumerate_layouts` skips only because
    dp does not divide the global batch.

    The global batch is the user's and is kept exactly (never rounded to a multiple of dp); the caller
    prints how many splits that rules out.
    """
    return [(tp, pp, dp) if cp == 1 else (tp, pp, dp, cp)
            for tp, cp, pp, dp in _splits(cfg, n_gpus, gpus_per_node, space) if global_batch % dp]


def layout_memory(cfg, lay: Layout, global_batch: int, dtype: str = "bf16"):
    """The memory model's fullest stage for ``lay`` (:func:`simcomm.memory.layout.estimate`)."""
    return memory_layout.estimate(cfg, tp=lay.tp, pp=lay.pp, dp=lay.dp, cp=lay.cp, shard_group=lay.shard_group,
                               zero=lay.zero, micro_batch=lay.microbatch,
                               microbatches=lay.microbatches(global_batch), sequence_parallel=lay.sequence_parallel,
                               recompute=lay.recompute, schedule=lay.schedule, virtual_stages=lay.virtual,
                               dtype=dtype)


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
        try:
            check(mem.peak(), budget)
        except ConfigError:
            pass
        else:
            fits.append((lay, mem))
        if progress is not None:
            progress()
    return fits, smallest


@dataclass(frozen=True)
class Estimate:
    """Closed-form step time of a layout and its parts (seconds; docs/plan.md derives each)."""

    compute: float  # m micro-batches of the slowest stage's forward + backward (+ recomputation)
    tp: float  # tensor-parallel collectives of the slowest stage, m micro-batches (not overlapped)
    bubble: float  # pipeline fill and drain: (p - 1)/v stage-times, plus the activations' point-to-point hops
    dp: float  # data-parallel communication not hidden behind the backward (ZeRO-3: every micro-batch's)
    update: float  # the optimizer step on this rank's (sharded) parameters
    cp: float = 0.0  # context-parallel ring steps not hidden behind the attention pieces, m micro-batches

    @property
    def step(self) -> float:
        return self.compute + self.tp + self.bubble + self.dp + self.update + self.cp


class _Groups(tuple):
    """A tuple of rank groups that hashes once: :meth:`Pricer.price` keys its cache on the groups, and the
    groups of a 1 024-GPU layout are long."""

    def __hash__(self):
        h = self.__dict__.get("_h")
        if h is None:
            h = self.__dict__["_h"] = tuple.__hash__(self)
        return h


class Pricer:
    """Closed-form step time of layouts of one model (its trace) on one cluster (topology + NCCL runtime).

    Compute comes from the trace exactly as the ``megatron`` strategy uses it
    (:func:`simcomm.llm.compute.sharded_layer_times` at the micro-batch and the layout's shapes, / tp); each collective
    (a TP all-reduce, a DP all-reduce over every TP lane at once, one activation
    transfer) is priced once by the engine's analytic model on the real topology
    and cached, so that thousands of layouts cost seconds.
    """

    def __init__(self, trace, topology, runtime, cfg, global_batch: int, wire_bytes: int = 2,
                 bucket_bytes: float = 25e6, gpus_per_node: int | None = None):
        self.trace, self.topo, self.runtime, self.cfg, self.gb = trace, topology, runtime, cfg, global_batch
        self.wire, self.bucket_bytes = wire_bytes, bucket_bytes
        self.act = 4 if trace.dtype in ("fp32", "float32") else 2
        names = [x.name for x in trace.layers]
        self.embed = names.index("embed") if "embed" in names else None
        self.head = names.index("head") if "head" in names else None
        self.blocks = [[j for j, n in enumerate(names) if n.startswith(f"block{i}.")] for i in range(cfg.layers)]
        self.attn = {j for j, n in enumerate(names) if n.startswith("block") and n.endswith(".attn")}
        self.meta = dict(trace.meta.get("transformer") or {})  # the strategy reads K/V sizes from here too
        self._core = core_share(cfg.seq, cfg.hidden, cfg.meta())  # selective recomputation's share of attention
        self._groups: dict = {}
        self.gpn = gpus_per_node  # None: HSDP's in-group and cross-group collectives assumed to share links
        self._times: dict = {}
        self._prices: dict = {}

    # -- compute ------------------------------------------------------------------------------------------
    def _per_mb(self, lay: Layout, recompute: str):
        """Prefix sums over blocks of (forward, backward) seconds at ``lay``'s micro-batch (whole-layer
        times at its tp/cp shapes, as the strategy prices them: / tp·cp is a rank's), and the embedding's and
        head's own."""
        mb = lay.microbatch
        key = (mb, recompute, lay.tp, lay.cp)
        if key not in self._times:
            fb = []
            for j, layer in enumerate(self.trace.layers):
                f, b = sharded_layer_times(self.trace, layer, mb, lay.tp, lay.cp)
                if recompute == "full":
                    b += f  # every layer's forward (embedding and head too, as the strategy does) re-run
                elif recompute == "selective" and layer.name.endswith(".attn"):
                    b += f * self._core  # the attention core's share of the forward
                fb.append((f, b))
            bf = [sum(fb[j][0] for j in blk) for blk in self.blocks]
            bb = [sum(fb[j][1] for j in blk) for blk in self.blocks]
            pre_f, pre_b = [0.0, *accumulate(bf)], [0.0, *accumulate(bb)]
            ends = tuple(fb[j] if j is not None else (0.0, 0.0) for j in (self.embed, self.head))
            self._times[key] = (pre_f, pre_b, ends, fb)
        return self._times[key]

    def _stage(self, lay: Layout, k: int):
        """(forward, backward, blocks) of one micro-batch on stage ``k`` (unsharded seconds)."""
        pre_f, pre_b, ((ef, eb), (hf, hb)), _ = self._per_mb(lay, lay.recompute)
        L, p, v = self.cfg.layers, lay.pp, lay.virtual
        per = L // (p * v)
        f = b = 0.0
        for c in range(k, p * v, p):
            f += pre_f[(c + 1) * per] - pre_f[c * per]
            b += pre_b[(c + 1) * per] - pre_b[c * per]
        if k == 0:
            f, b = f + ef, b + eb
        if k == p - 1:
            f, b = f + hf, b + hb
        return f, b, per * v

    # -- communication (engine's analytic model, cached) ----------------------------------------------------
    def price(self, kind: str, groups: tuple, nbytes: float) -> float:
        """Seconds of one ``kind`` over every group at once (``"transfer"``: groups of (src, dst))."""
        if nbytes <= 0 or not groups:
            return 0.0
        key = (kind, groups, round(nbytes))
        if key not in self._prices:
            from simcomm import engine
            from simcomm.engine.options import EngineOptions
            from simcomm.ops import PlanBuilder

            b = PlanBuilder(self.topo.n_ranks)
            for g in groups:
                if kind == "transfer":
                    b.transfer(g[0], g[1], nbytes, label="plan-price")
                else:
                    b.collective(kind, g, nbytes, label="plan-price")
            tl = engine.simulate(b.build(kind="price"), self.topo, fidelity="analytic", seed=0,
                                 options=EngineOptions(runtime=self.runtime, link_bytes=False))
            self._prices[key] = float(max(tl.end))
        return self._prices[key]

    def _grad_bytes(self, lay: Layout, k: int) -> float:
        """Gradient bytes of stage ``k`` per TP rank in the wire dtype (the memory model's parameter count)."""
        dense, expert = memory_layout.stage_params(self.cfg, lay.tp, lay.pp, k, lay.virtual)
        return (dense + expert) * self.wire

    def groups(self, lay: Layout) -> dict:
        """The collective groups of stage 0 (every TP lane at once) in the strategy's placement
        (:class:`simcomm.strategies._layout.Layout`): ``tp``, ``dp`` (all dp·cp replicas, or HSDP's shard
        groups), ``hsdp`` (HSDP's replica groups, one rank per shard group) and ``ring`` (the (src, dst)
        sends of one step of every context-parallel ring of replica 0)."""
        key = (lay.tp, lay.pp, lay.replicas, lay.cp, lay.shard_group)
        if key not in self._groups:
            self._groups[key] = self._make_groups(*key, self.gpn)
        return self._groups[key]

    @staticmethod
    def _make_groups(tp: int, pp: int, reps: int, cp: int, g: int | None, gpn: int | None) -> dict:
        from simcomm.strategies._layout import Layout as Placement

        place = Placement(tp, pp, reps, cp=cp)
        if g is not None:
            dp = [x for t in range(tp) for x in place.shard_groups(t, 0, g)]
            hsdp = [x for t in range(tp) for x in place.replica_groups(t, 0, g)]
        else:
            dp, hsdp = [place.dp_group(t, 0) for t in range(tp)], []
        ring = []
        if cp > 1:
            for t in range(tp):
                r = place.cp_groups(t, 0)[0]
                ring += [(r[i], r[(i + 1) % cp]) for i in range(cp)]
        # HSDP "apart": every shard group inside a node and every replica group across nodes, so the gathers and
        # reduce-scatters (NVLink) and the all-reduce (the NICs) do not share links
        apart = bool(gpn and hsdp and all(len({r // gpn for r in x}) == 1 for x in dp)
                     and all(len({r // gpn for r in x}) == len(x) for x in hsdp))
        return {"tp": _Groups((place.tp_group(0, 0),)), "dp": _Groups(x for x in dp if len(x) > 1),
                "hsdp": _Groups(x for x in hsdp if len(x) > 1), "ring": _Groups(ring), "apart": apart}

    def ring(self, lay: Layout, idx) -> float:
        """Exposed seconds of the context-parallel rings of one micro-batch over the stage's layers ``idx``.

        Per attention layer (the ``megatron`` strategy's ``_ring``): the layer runs in ``cp`` pieces of
        ``t / (tp·cp·cp)``, each step's K/V block (``T``: all rings' sends at once) overlapping a piece.
        Forward: ``(cp - 1)·max(0, T - piece)``; backward ``(cp - 1)·max(0, T - piece) + T``: the K/V sends
        run ahead (each waits only for the block it forwards), each dK/dV send follows its piece, and the
        last dK/dV, after the last piece, is exposed; full recomputation runs the forward's ring again.
        Contention with other traffic (DP reductions during the last backward) is not counted.
        """
        cp = lay.cp
        if cp < 2:
            return 0.0
        pairs = self.groups(lay)["ring"]
        kv = kv_block_bytes(self.meta, lay.microbatch, lay.tp, cp, self.act)
        t1 = self.price("transfer", pairs, kv)
        fb = self._per_mb(lay, "none")[3]  # the strategy's pieces: the layer without recomputation
        split = lay.tp * cp * cp
        total = 0.0
        for j in idx:
            if j not in self.attn:
                continue
            f, b = fb[j]
            if lay.recompute == "selective":  # the strategy's backward piece includes the core's recomputation
                b += f * self._core
            fwd = (cp - 1) * max(0.0, t1 - f / split)
            total += fwd * (2 if lay.recompute == "full" else 1) + (cp - 1) * max(0.0, t1 - b / split) + t1
        return total

    def estimate(self, lay: Layout) -> Estimate:
        """The closed form of docs/plan.md ("Estimate") for ``lay``."""
        tp, p, v, cp = lay.tp, lay.pp, lay.virtual, lay.cp
        split = tp * cp  # every layer's time is divided over the TP ranks and the CP ranks' tokens
        reps, hs = lay.replicas, lay.shard_group
        m = lay.microbatches(self.gb)
        s, h = self.cfg.seq, self.cfg.hidden
        act = lay.microbatch * s * h * self.act / cp  # each CP rank carries s / cp tokens
        grp = self.groups(lay)
        tp_groups, dp_groups, hsdp_groups = grp["tp"], grp["dp"], grp["hsdp"]
        ar = self.price("allreduce", tp_groups, act) if tp > 1 else 0.0
        if lay.sequence_parallel and tp > 1:
            ar = self.price("allgather", tp_groups, act) + self.price("reduce_scatter", tp_groups, act)
        # per block and micro-batch: 4 TP all-reduces (2 forward, 2 backward), 6 with full recomputation
        per_block = (6 if lay.recompute == "full" else 4) * ar

        def hsdp_ar(nb):  # HSDP: the gradient shard (1/G) all-reduced across the shard groups
            return self.price("allreduce", hsdp_groups, nb / hs) if hs is not None else 0.0

        worst = None
        for k in range(p):
            f, b, nblocks = self._stage(lay, k)
            f, b = f / split, b / split
            t_tp = nblocks * per_block + (ar if k == 0 else 0.0) + (ar if k == p - 1 else 0.0)
            grads = self._grad_bytes(lay, k)
            idx = self._stage_layers(lay, k)
            layers = [self.trace.layers[j] for j in idx]
            first = layers[0].params * self.wire / tp  # first in forward order: its gradient is ready last
            last = layers[-1].params * self.wire / tp
            if lay.zero == 3:
                # prefetched one layer ahead: each layer's gather hides behind the previous layer's forward,
                # its gather and reduce-scatter (and HSDP's all-reduce, on the reduce-scatter's stream) behind
                # a backward, except the first gather of each pass and the reduce-scatter (+ all-reduce) of
                # the layer whose backward comes last
                fb = self._per_mb(lay, lay.recompute)[3]
                exposed = (self.price("allgather", dp_groups, first) + self.price("allgather", dp_groups, last)
                           + self.price("reduce_scatter", dp_groups, first) + hsdp_ar(first))
                for j in idx:
                    nb = self.trace.layers[j].params * self.wire / tp
                    ag, rs = self.price("allgather", dp_groups, nb), self.price("reduce_scatter", dp_groups, nb)
                    a = hsdp_ar(nb)  # after the reduce-scatter, on its stream
                    busy = max(ag + rs, rs + a) if grp["apart"] else ag + rs + a
                    exposed += max(0.0, ag - fb[j][0] / split) + max(0.0, busy - fb[j][1] / split)
                dp_t, per_mb_extra = 0.0, exposed
            else:
                kind = "allreduce" if lay.zero == 0 else "reduce_scatter"
                red = self.price(kind, dp_groups, grads)
                # buckets overlap the last micro-batch's backward, except the last bucket (the stage's first
                # layer, at least one bucket's worth), which starts when the backward ends
                tail = self.price(kind, dp_groups, min(grads, max(first, self.bucket_bytes)))
                dp_t = max(0.0, red - b, tail) if dp_groups else 0.0
                if lay.zero in (1, 2):
                    dp_t += self.price("allgather", dp_groups, grads)  # updated parameters, after the step
                per_mb_extra = 0.0
            shard = (hs if hs is not None else reps) if lay.zero else 1  # the strategy's optimizer shard
            upd = sum(x.update_s for x in layers) / tp / shard
            ring = self.ring(lay, idx)
            stage_t = f + b + t_tp + per_mb_extra + ring
            cand = (stage_t, f + b, t_tp, per_mb_extra, dp_t, upd, ring)
            if worst is None or cand > worst:
                worst = cand
        stage_t, comp, t_tp, extra, dp_t, upd, ring = worst
        hops = 0.0
        if p > 1:
            nbytes = act / tp if lay.sequence_parallel else act
            hops = 2 * (p * v - 1) * self.price("transfer", ((0, tp * cp),), nbytes)
        bubble = (p - 1) / v * stage_t + hops if p > 1 else 0.0
        return Estimate(m * comp, m * t_tp, bubble, dp_t + m * extra, upd, m * ring)

    def _stage_layers(self, lay: Layout, k: int):
        """Trace indices of stage ``k``'s layers in forward order (embedding first on stage 0, head last on the
        last stage)."""
        per = self.cfg.layers // (lay.pp * lay.virtual)
        out = [j for c in range(k, lay.pp * lay.virtual, lay.pp) for i in range(c * per, (c + 1) * per)
               for j in self.blocks[i]]
        if k == 0 and self.embed is not None:
            out.insert(0, self.embed)
        if k == lay.pp - 1 and self.head is not None:
            out.append(self.head)
        return out


def plan_ops(cfg, lay: Layout, n_gpus: int, global_batch: int) -> int:
    """Approximate ops of the layout's simulated plan (docs/strategies-llm.md, "Plan size"): one compute per
    rank per sublayer per micro-batch and phase, one collective per TP group per sublayer and phase; with
    context parallelism each attention layer's compute in ``cp`` pieces and ``cp - 1`` K/V sends per rank
    forward (``2(cp - 1)`` backward); ZeRO-3 three collectives per group per sublayer (HSDP: the shard
    groups', plus the all-reduce across them).  Large plans are counted as ``megatron`` builds them with its
    default ``replicas=auto``: one data replica in full (:data:`FOLD_ABOVE`)."""
    m = lay.microbatches(global_batch)
    sub = 2 * cfg.layers // lay.pp  # attention and MLP per block on one stage
    phases = 3 if lay.recompute == "full" else 2
    computes = n_gpus * m * sub * phases
    colls = (n_gpus // lay.tp) * m * sub * phases * (2 if lay.sequence_parallel else 1) if lay.tp > 1 else 0
    ring = 0
    if lay.cp > 1:
        attn = cfg.layers // lay.pp
        fwd_phases = phases - 1  # forward, and the recomputation's forward
        ring = n_gpus * m * attn * ((lay.cp - 1) * phases + (lay.cp - 1) * (fwd_phases + 2))
    zero3 = 0
    if lay.zero == 3:
        groups = n_gpus // lay.replicas if lay.shard_group is None else n_gpus // lay.shard_group
        zero3 = groups * m * sub * 3
        if lay.shard_group is not None:
            zero3 += (n_gpus // (lay.replicas // lay.shard_group)) * m * sub
    sends = 2 * n_gpus * m * lay.virtual
    # the strategy's own test (the trace's layers: every block's two sublayers, the embedding and the head)
    if lay.dp > 1 and fold_computes(n_gpus, m, 2 * cfg.layers + 2, lay.pp, lay.recompute) >= FOLD_ABOVE:
        # megatron's replicas=auto (the plan simulates a uniform cluster): one data replica (its whole
        # context-parallel rings) in full, the others only in the data-parallel collectives, which keep
        # their full groups; with cp 1 the tensor-parallel lanes fold too, one compute per group
        lanes = lay.tp if lay.cp == 1 and lay.tp > 1 else 1
        computes, colls, ring, sends = (computes // (lay.dp * lanes), colls // lay.dp, ring // lay.dp,
                                        sends // lay.dp)
    return computes + colls + ring + zero3 + sends

@dataclass
class Row:
    """One ranked layout: its memory, its estimate, and (when simulated) the pipeline's step time."""

    layout: Layout
    memory_bytes: int
    estimate: Estimate
    step_s: float = 0.0
    priced: str = ESTIMATE
    compute_s: float | None = None  # simulated: mean per-rank compute
    exposed_s: float | None = None  # simulated: step - compute (communication, bubble and update not hidden)
    note: str = ""

    def __post_init__(self):
        if not self.step_s:
            self.step_s = self.estimate.step

    def to_dict(self, global_batch: int) -> dict:
        e = self.estimate
        return {**self.layout.to_dict(), "microbatches": self.layout.microbatches(global_batch),
                "memory_gb": self.memory_bytes / 1e9, "step_s": self.step_s, "priced": self.priced,
                "samples_per_s": global_batch / self.step_s if self.step_s > 0 else math.inf,
                "estimate": {"step_s": e.step, "compute_s": e.compute, "tp_s": e.tp, "cp_s": e.cp,
                             "bubble_s": e.bubble, "dp_s": e.dp, "update_s": e.update},
                "simulated": None if self.priced == ESTIMATE else {"compute_s": self.compute_s,
                                                                   "exposed_s": self.exposed_s},
                "note": self.note}


def rank_rows(rows: list[Row]) -> list[Row]:
    """Fastest first by the best number each row has (simulated, else estimate); ties by less memory, then
    the layout's own order, so the ranking is deterministic."""
    return sorted(rows, key=lambda r: (r.step_s, r.memory_bytes, r.layout))


def simulate_row(row: Row, base: dict, global_batch: int, fidelity: str) -> Row:
    """Run ``row``'s layout through :func:`simcomm.pipeline.simulate` (``base``: flat scenario keys)."""
    from simcomm.pipeline import simulate
    from simcomm.scenario import from_flat

    # The layout's global batch is the megatron option, exactly; the workload keeps the trace's per-rank batch
    # (megatron does not read it).  Strong scaling would split the batch over the ranks and round it up to
    # ceil(B / R)·R (and refuse B < R), changing the number the user gave.
    scn = from_flat({**base, "strategy": "megatron", "fidelity": fidelity, **row.layout.options(global_batch)})
    res = simulate(scn, baseline=False, analytic=False)
    if res.not_applicable:
        return replace(row, note=f"not simulated: {res.not_applicable}")
    return replace(row, step_s=res.mean_s, priced=FLOW if fidelity == "flow" else ANALYTIC,
                   compute_s=res.breakdown.compute, exposed_s=res.mean_s - res.breakdown.compute)
