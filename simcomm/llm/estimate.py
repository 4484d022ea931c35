"""``simcomm plan``'s closed-form step time of a layout: it only prunes the search (docs/plan.md, "Estimate").

:class:`Pricer` prices every fitting layout of one model on one cluster in microseconds each; the search
(:mod:`simcomm.llm.search`) then flow-simulates the best few with the pipeline ``simcomm run`` uses and ranks
by those simulations alone.  Compute is never modelled twice: each stage's seconds are
:func:`simcomm.llm.compute.stage_seconds` of the same :func:`~simcomm.llm.compute.layer_costs` the
``megatron`` emitter turns into ops.  Communication (a TP all-reduce, a DP reduction over every TP lane at
once, a ZeRO-3 gather, a CP ring step, one activation transfer) is priced once per size by the engine's
analytic NCCL model on the real topology and cached, so that thousands of layouts cost seconds.

:func:`plan_ops` counts the ops of a layout's simulated plan as the strategy builds it (its own fold rule,
:func:`simcomm.strategies.megatron.sizing.fold_computes`), so the search can say what a simulation costs.

Pure library: no typer, rich or matplotlib here.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.llm.compute import layer_costs, stage_seconds
from simcomm.llm.estimate_dp import WINDOW_PROBES, DataParallelTimelines
from simcomm.llm.estimate_warmup import AllForwardsFirst, all_forwards_first
from simcomm.llm.layout import Layout
from simcomm.llm.placement import Structure, chunks, structure
from simcomm.strategies.megatron.sizing import FOLD_ABOVE, fold_computes

__all__ = ["Estimate", "Pricer", "plan_ops", "WINDOW_PROBES"]

@dataclass(frozen=True)
class Estimate:
    """Closed-form step time of a layout and its parts (seconds; docs/plan.md derives each)."""

    compute: float  # m micro-batches of the slowest stage's forward + backward (+ recomputation)
    tp: float  # tensor-parallel collectives of the slowest stage, m micro-batches (not overlapped)
    bubble: float  # pipeline fill and drain: (p - 1)/v stage-times, plus the activations' point-to-point hops
    dp: float  # data-parallel communication not hidden behind the backward (ZeRO-3: every micro-batch's)
    update: float  # the optimizer step on this rank's (sharded) parameters
    cp: float = 0.0  # context-parallel ring steps not hidden behind the attention pieces, m micro-batches
    ep: float = 0.0  # the MoE token dispatchers' collectives of the slowest stage, m micro-batches (on the path)

    @property
    def step(self) -> float:
        return self.compute + self.tp + self.bubble + self.dp + self.update + self.cp + self.ep


class _Groups(tuple):
    """A tuple of rank groups that hashes once: :meth:`Pricer.price` keys its cache on the groups, and the
    groups of a 1 024-GPU layout are long."""

    def __hash__(self):
        h = self.__dict__.get("_h")
        if h is None:
            h = self.__dict__["_h"] = tuple.__hash__(self)
        return h


class Pricer(DataParallelTimelines, AllForwardsFirst):
    """Closed-form step time of layouts of one model (its workload) on one cluster (topology + NCCL runtime).

    ``workload``: the pipeline's own :class:`simcomm.workload.Workload` of the trace (its layers' gradient
    bytes in the wire dtype), from which :func:`~simcomm.llm.compute.layer_costs` reads every layer.
    """

    def __init__(self, workload, topology, runtime, global_batch: int, gpus_per_node: int | None = None):
        self.workload, self.topo, self.runtime, self.gb = workload, topology, runtime, global_batch
        self.trace = workload.trace
        self.act = 4 if self.trace.dtype in ("fp32", "float32") else 2
        found = structure([x.name for x in self.trace.layers])
        if found is None:
            raise ValueError("plan's estimate needs a transformer trace (block{i}.attn/.mlp layers)")
        self.structure: Structure = found
        self.meta = dict(self.trace.meta.get("transformer") or {})
        self._groups: dict = {}
        self._costs: dict = {}
        self._stages: dict = {}
        self._prices: dict = {}
        self._dp_memo: dict = {}
        self._layer_memo: dict = {}  # compute.layer_costs' per-layer times, shared by every layout
        self._moes: dict = {}  # _cost_key -> the emitter's MoeCosts (None: a dense model)
        self._ep_memo: dict = {}  # (cost key, pp) -> dispatcher seconds of one MoE layer and micro-batch
        self._at: dict = {}  # (kind, groups) -> {bytes: seconds}: price() without re-hashing the groups
        self._moe_trace = any(x.name.endswith(".moe") for x in self.trace.layers)
        self.gpn = gpus_per_node  # None: the TP-DP link sharing below is not counted

    # -- compute (the emitter's own per-layer costs) -------------------------------------------------------
    def costs(self, lay: Layout):
        """:func:`~simcomm.llm.compute.layer_costs` of ``lay`` (cached on what they depend on)."""
        key = self._cost_key(lay)
        if key not in self._costs:
            self._costs[key] = layer_costs(self.workload, lay, moe=self.moe_costs(lay), memo=self._layer_memo)
        return self._costs[key]

    def moe_costs(self, lay: Layout):
        """:meth:`_moe` cached on what it depends on (the layout's shape: :meth:`_cost_key`)."""
        key = self._cost_key(lay)
        if key not in self._moes:
            self._moes[key] = self._moe(lay)
        return self._moes[key]

    def _moe(self, lay: Layout):
        """The emitter's :class:`~simcomm.strategies.megatron.moe.MoeCosts` of ``lay`` (None for a dense model):
        the MoE layers' compute stretch and expert share, as the strategy builds them from its options."""
        if not self._moe_trace:
            return None
        from simcomm.strategies.megatron import MegatronParams
        from simcomm.strategies.megatron.moe import moe_costs

        params = MegatronParams(**lay.options(self.gb))
        return moe_costs(params, lay.placement(), self.meta, lay.microbatch, self.act)

    def _cost_key(self, lay: Layout) -> tuple:
        # dp only for MoE models (the MoE costs depend on the placement; a dense layer's cost does not)
        return (lay.tp, lay.cp, lay.ep, lay.etp, lay.dp if self._moe_trace else 0, lay.microbatch,
                lay.sequence_parallel, lay.recompute)

    def stage_layers(self, lay: Layout, k: int) -> list[int]:
        """Trace indices of stage ``k``'s layers in forward order (its virtual chunks k, k + pp, ...; the
        embedding is in stage 0's first chunk and the head in the last stage's last, as the emitter places them)."""
        key = (lay.pp, lay.virtual, k)
        if key not in self._stages:
            parts = chunks(self.structure, lay.pp * lay.virtual)
            self._stages[key] = [j for c in range(k, lay.pp * lay.virtual, lay.pp) for j in parts[c]]
        return self._stages[key]

    # -- communication (engine's analytic model, cached) ----------------------------------------------------
    def price(self, kind: str, groups: tuple, nbytes: float) -> float:
        """Seconds of one ``kind`` over every group at once (``"transfer"``: groups of (src, dst))."""
        if nbytes <= 0 or not groups:
            return 0.0
        # keyed on the exact bytes it prices: a price never depends on which layout asked first, so the
        # search's estimates are the same in one process or split over several (search.estimate_part)
        key = (kind, groups, nbytes)
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

    def at(self, kind: str, groups: tuple):
        """``price(kind, groups, ·)`` as a function of the bytes alone, memoised per byte count (the same
        seconds: price is a function of the bytes): the data-parallel timelines ask per layer."""
        key = (kind, groups)
        memo = self._at.get(key)
        if memo is None:
            memo = self._at[key] = {}

        def seconds(nbytes: float) -> float:
            out = memo.get(nbytes)
            if out is None:
                out = memo[nbytes] = self.price(kind, groups, nbytes)
            return out
        return seconds

    def groups(self, lay: Layout) -> dict:
        """The collective groups of stage 0 (every TP lane at once) in the strategy's placement
        (:class:`simcomm.llm.placement.Placement`): ``tp``, ``dp`` (all dp·cp replicas, or HSDP's shard
        groups), ``hsdp`` (HSDP's replica groups, one rank per shard group) and ``ring`` (the (src, dst)
        sends of one step of every context-parallel ring of replica 0)."""
        key = (lay.tp, lay.pp, lay.dp, lay.cp, lay.shard_group)
        if key not in self._groups:
            self._groups[key] = self._make_groups(Layout(lay.tp, lay.pp, lay.dp, cp=lay.cp), lay.shard_group)
        return self._groups[key]

    @staticmethod
    def _make_groups(lay: Layout, g: int | None) -> dict:
        tp, cp = lay.tp, lay.cp
        place = lay.placement()
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
        lanes = _Groups(place.tp_group(0, d) for d in range(lay.dp * cp))
        return {"tp": _Groups((place.tp_group(0, 0),)), "tp_all": lanes, "dp": _Groups(x for x in dp if len(x) > 1),
                "hsdp": _Groups(x for x in hsdp if len(x) > 1), "ring": _Groups(ring)}

    def ring(self, lay: Layout, idx) -> float:
        """Exposed seconds of the context-parallel rings of one micro-batch over the stage's layers ``idx``.

        Per attention layer (the emitter's ``ContextParallel._ring``): the layer runs in ``cp`` pieces of its
        per-rank time / cp, each step's K/V block (``T``: all rings' sends at once) overlapping a piece.
        Forward: ``(cp - 1)·max(0, T - piece)``; backward ``(cp - 1)·max(0, T - piece) + T``: the K/V sends
        run ahead (each waits only for the block it forwards), each dK/dV send follows its piece, and the
        last dK/dV, after the last piece, is exposed; full recomputation runs the forward's ring again.
        Contention with other traffic (DP reductions during the last backward) is not counted.
        """
        from simcomm.llm.compute import kv_block_bytes

        cp = lay.cp
        if cp < 2:
            return 0.0
        kv = kv_block_bytes(self.meta, lay.microbatch, lay.tp, cp, self.act)
        t1 = self.price("transfer", self.groups(lay)["ring"], kv)
        costs = self.costs(lay)
        total = 0.0
        for j in idx:
            c = costs[j]
            if c.kind != "attn":
                continue
            fwd = (cp - 1) * max(0.0, t1 - c.forward_s / cp)
            total += fwd * (2 if lay.recompute == "full" else 1) + (cp - 1) * max(0.0, t1 - c.backward_s / cp) + t1
        return total

    def _edp_groups(self, lay: Layout):
        """Stage 0's expert-data-parallel groups when the routed experts' gradients reduce apart from the dense
        ones (a MoE model with ep > 1 or etp != tp: the emitter's ``_experts_apart``), else None."""
        if not self._moe_trace or (lay.ep == 1 and (lay.etp or lay.tp) == lay.tp) or lay.shard_group is not None:
            return None
        key = ("edp", lay.tp, lay.pp, lay.dp, lay.cp, lay.ep, lay.etp)
        if key not in self._groups:
            self._groups[key] = _Groups(g for g in lay.placement().edp_groups(0) if len(g) > 1)
        return self._groups[key]

    def _moe_tp(self, lay: Layout, ar: float, act: float) -> float | None:
        """Seconds an MoE layer's tensor-parallel collectives (one micro-batch) differ from the dense MLP's the
        closed form counts per block (:func:`~simcomm.strategies.megatron.moe.has_tp_edges`, the emitter's
        rule): none of their own under sequence parallelism without shared experts, DeepSpeed-MoE's all-gather
        per pass without sequence parallelism; None where they are the MLP's (or the model is dense)."""
        from simcomm.strategies.megatron.moe import has_tp_edges

        moe = self.moe_costs(lay)
        if moe is None or has_tp_edges("moe", lay.sequence_parallel, moe):
            return None
        passes = 3 if lay.recompute == "full" else 2
        gather = 0.0 if lay.sequence_parallel else self.price("allgather", self.groups(lay)["tp"], act)
        return passes * (gather - ar)

    def expert_comm(self, lay: Layout) -> float:
        """Seconds of one MoE layer's token-dispatcher collectives for one micro-batch, forward and backward
        (:func:`~simcomm.strategies.megatron.moe.dispatcher_steps`, what the emitter issues before and after the
        layer's compute, which waits for them), each priced over every expert group of stage 0 at once; full
        recomputation runs the forward's again.  0 for a dense model."""
        moe = self.moe_costs(lay)
        if moe is None:
            return 0.0
        key = (self._cost_key(lay), lay.pp)  # the cost key holds tp, cp, ep, etp, dp and the rest of the shape
        if key not in self._ep_memo:
            from simcomm.strategies.megatron.moe import DISPATCH_POINTS, dispatcher_steps

            place = lay.placement()
            total = 0.0
            for where in DISPATCH_POINTS:
                again = 2 if lay.recompute == "full" and where.startswith("fwd") else 1
                for kind, which, nbytes in dispatcher_steps(moe, where):
                    groups = _Groups(g for g in getattr(place, f"{which}_groups")(0) if len(g) > 1)
                    total += again * self.price(kind, groups, nbytes)
            self._ep_memo[key] = total
        return self._ep_memo[key]

    def estimate(self, lay: Layout) -> Estimate:
        """The closed form of docs/plan.md ("Estimate") for ``lay``."""
        tp, p, v = lay.tp, lay.pp, lay.virtual
        hs = lay.shard_group
        m = lay.microbatches(self.gb)
        costs = self.costs(lay)
        grp = self.groups(lay)
        tp_groups, dp_groups = grp["tp"], grp["dp"]
        act = costs[self.structure.blocks[0][0]].tp_bytes  # one b·(s/cp)·h activation at a block's edge
        ar = self.price("allreduce", tp_groups, act) if tp > 1 else 0.0
        if lay.sequence_parallel and tp > 1:
            ar = self.price("allgather", tp_groups, act) + self.price("reduce_scatter", tp_groups, act)
        # per block and micro-batch: 4 TP all-reduces (2 forward, 2 backward), 6 with full recomputation
        per_block = (6 if lay.recompute == "full" else 4) * ar

        per_moe = self.expert_comm(lay)
        moe_tp = self._moe_tp(lay, ar, act) if tp > 1 else None
        worst = None
        stages = []
        for k in range(p):
            idx = self.stage_layers(lay, k)  # embedding first on stage 0, head last on the last stage
            f, b = stage_seconds(costs, idx, lay.recompute)
            nblocks = len(self.structure.blocks) // p
            t_tp = nblocks * per_block + (ar if k == 0 else 0.0) + (ar if k == p - 1 else 0.0)
            if moe_tp is not None:  # the stage's MoE layers' own TP collectives instead of an MLP's
                t_tp += moe_tp * sum(1 for j in idx if costs[j].kind == "moe")
            # the data-parallel timelines depend on fewer fields than the layout: one per stage and group
            key = (self._cost_key(lay), lay.pp, lay.virtual, k, min(lay.zero, 1) + (lay.zero == 3),
                   lay.tp, lay.dp, lay.cp, lay.shard_group)
            if key not in self._dp_memo:
                if lay.zero == 3:
                    fwd_t, bwd_t, tail, busy_f, busy_b = self.zero3_passes(lay, idx, costs, grp)
                    extra = (fwd_t + bwd_t) - (f + b)
                    if self._shares_links(lay, grp):
                        # every pass's TP collectives share NVLink with its gathers (and reduce-scatters): both
                        # slow down where they meet, the TP collectives on the compute's path and the gathers the
                        # next layers wait for, so the TP time of the busy share is paid twice more
                        extra += 2 * (busy_f * 2 + busy_b * (4 if lay.recompute == "full" else 2)) * nblocks * ar
                    self._dp_memo[key] = (tail, extra, 0.0)
                else:
                    tp_time = (self._tp_beside_buckets(lay, grp, costs, self._shares_links(lay, grp))
                               if tp > 1 and not self._moe_trace else None)
                    exposed, slower = self.bucket_tail(lay, idx, costs, dp_groups, tp_time, self._edp_groups(lay))
                    self._dp_memo[key] = (exposed + slower, 0.0, 0.0)
            dp_t, per_mb_extra, _ = self._dp_memo[key]
            shard = (hs if hs is not None else lay.replicas) if lay.zero else 1  # the strategy's optimizer shard
            upd = sum(costs[j].update_s for j in idx) / shard
            ring = self.ring(lay, idx)
            ep_t = per_moe * sum(1 for j in idx if costs[j].kind == "moe") if per_moe else 0.0
            stage_t = f + b + t_tp + per_mb_extra + ring + ep_t
            cand = (stage_t, f + b, t_tp, per_mb_extra, dp_t, upd, ring, ep_t)
            stages.append(cand)
            if worst is None or cand > worst:
                worst = cand
        assert worst is not None  # pp >= 1 stages
        stage_t, comp, t_tp, extra, dp_t, upd, ring, ep_t = worst
        hops = 0.0
        if p > 1:
            nbytes = costs[self.structure.blocks[0][-1]].activation_bytes
            hops = 2 * (p * v - 1) * self.price("transfer", ((0, tp * lay.cp),), nbytes)
        bubble = (p - 1) / v * stage_t + hops if p > 1 else 0.0
        if all_forwards_first(lay, m):  # every forward first: the list schedule and the last stage's tail
            tp_time = (self._tp_beside_buckets(lay, grp, costs, self._shares_links(lay, grp))
                       if tp > 1 and not self._moe_trace else None)
            bubble, dp_t, upd = self.warmup_estimate(lay, costs, grp, ar, per_moe, moe_tp, stages,
                                                     costs[self.structure.blocks[0][-1]].activation_bytes, tp_time)
            return Estimate(m * comp, m * t_tp, bubble, dp_t, upd, m * ring, m * ep_t)
        return Estimate(m * comp, m * t_tp, bubble, dp_t + m * extra, upd, m * ring, m * ep_t)


def plan_ops(cfg, lay: Layout, n_gpus: int, global_batch: int, gpus_per_node: int | None = None) -> int:
    """Approximate ops of the layout's simulated plan (docs/strategies-llm.md, "Plan size"): one compute per
    rank per sublayer per micro-batch and phase, one collective per TP group per sublayer and phase; with
    context parallelism each attention layer's compute in ``cp`` pieces and ``cp - 1`` K/V sends per rank
    forward (``2(cp - 1)`` backward); ZeRO-3 three collectives per group per sublayer (HSDP: the shard
    groups', plus the all-reduce across them).  Large plans are counted as ``megatron`` builds them with its
    default ``replicas=auto``: one data replica in full (:data:`FOLD_ABOVE`), its ring-attention ranks folded
    when every ring hop is alike (``gpus_per_node`` given: a ring within a node or one node per ring rank, as
    ``megatron.symmetry.rings_alike`` finds on a DGX cluster; None: assumed alike)."""
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
        # their full groups; the tensor-parallel lanes fold too, one compute per group, and with ring attention
        # one compute, one ring send per step and one pipeline send per stage for all its tp·cp ranks
        # (and, in a dense model, the first ring rank's tensor-parallel collectives alone)
        alike = gpus_per_node is None or lay.tp * lay.cp <= gpus_per_node or lay.tp % gpus_per_node == 0
        lanes = lay.tp * lay.cp if lay.cp == 1 or alike else 1
        rings = lay.cp if not cfg.experts and lay.cp > 1 and alike else 1
        computes, colls, ring, sends = (computes // (lay.dp * lanes), colls // (lay.dp * rings),
                                        ring // (lay.dp * lanes), sends // (lay.dp * (lanes if lay.cp > 1 else 1)))
    return computes + colls + ring + zero3 + sends
