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
from simcomm.llm.layout import Layout
from simcomm.llm.placement import Structure, chunks, structure
from simcomm.strategies.megatron.sizing import FOLD_ABOVE, fold_computes

__all__ = ["Estimate", "Pricer", "plan_ops"]

#: starts a bucket's span is probed at for its NVLink window (Pricer._window_end): a window narrower than
#: span / WINDOW_PROBES can be missed (the TP collectives beside it then priced alone)
WINDOW_PROBES = 16


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
        self._at: dict = {}  # (kind, groups) -> {bytes: seconds}: price() without re-hashing the groups
        self._moe_trace = any(x.name.endswith(".moe") for x in self.trace.layers)
        self.gpn = gpus_per_node  # None: the TP-DP link sharing below is not counted

    # -- compute (the emitter's own per-layer costs) -------------------------------------------------------
    def costs(self, lay: Layout):
        """:func:`~simcomm.llm.compute.layer_costs` of ``lay`` (cached on what they depend on)."""
        key = self._cost_key(lay)
        if key not in self._costs:
            self._costs[key] = layer_costs(self.workload, lay, moe=self._moe(lay), memo=self._layer_memo)
        return self._costs[key]

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

    def at(self, kind: str, groups: tuple):
        """``price(kind, groups, ·)`` as a function of the bytes alone, memoised per byte count (the same
        seconds: price is a function of the rounded bytes): the data-parallel timelines ask per layer."""
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

    def bucket_tail(self, lay: Layout, idx, costs, dp_groups, tp_time=None) -> tuple[float, float]:
        """Exposed seconds of ZeRO-0/1/2's gradient reduction after the last micro-batch's backward, as the
        emitter's ``DataParallel._reduce_grads`` runs it: the workload's buckets (restricted to the stage's
        layers), each reduced on the one data-parallel stream as soon as its last gradient is ready, in order;
        ZeRO-1/2 then all-gather the updated parameters bucket by bucket after the optimizer step.

        ``tp_time(j, where, bucket_bytes, since)``: (alone, beside) seconds of the tensor-parallel collectives
        of layer ``j``'s backward (``where``: ``bwd-pre`` or ``bwd-post``, the emitter's positions) on their
        own and started ``since`` seconds after a bucket of ``bucket_bytes`` began (0 bytes: none running); None
        for no TP.  They sit on the compute's path, so they move when later buckets are ready; the emitter
        starts a layer's TP collective and the bucket its gradient completes at the same instant (both wait
        only for the layer's backward compute), so the two cross the links side by side.  Returns (exposed
        seconds, the seconds the TP collectives take beyond their time alone)."""
        if not dp_groups:
            return 0.0, 0.0
        kind = "allreduce" if lay.zero == 0 else "reduce_scatter"
        full = lay.recompute == "full"
        reduce, gather = self.at(kind, dp_groups), self.at("allgather", dp_groups)
        buckets = self._buckets(tuple(idx))
        last: dict[int, list[list[int]]] = {}  # layer -> the buckets its gradient completes (the workload's bucket order)
        for bucket in buckets:
            last.setdefault(min(bucket, key=idx.index), []).append(bucket)
        stream, gathers, extra, t = 0.0, 0.0, 0.0, 0.0
        running: list[tuple[float, float, float]] = []  # (start, end, bytes) of each bucket, in stream order

        def tp_at(j: int, where: str) -> tuple[float, float]:  # (alone, beside the bucket on the links)
            if tp_time is None:
                return 0.0, 0.0
            on = [x for x in running if x[0] <= t < x[1]]
            return tp_time(j, where, on[-1][2] if on else 0.0, t - on[-1][0] if on else 0.0)

        for j in reversed(idx):  # the backward, last layer first
            alone, more = tp_at(j, "bwd-pre")
            t += more + costs[j].backward_s + (costs[j].forward_s if full else 0.0)
            extra += more - alone
            for bucket in last.get(j, ()):  # in order, each once the stream is free and its gradients ready
                nbytes = sum(costs[k].grad_bytes for k in bucket)
                start = max(stream, t)
                stream = start + reduce(nbytes)
                running.append((start, stream, nbytes))
                if lay.zero in (1, 2):
                    gathers += gather(nbytes)
            alone, post = tp_at(j, "bwd-post")
            t += post
            extra += post - alone
        return max(0.0, stream - t) + gathers, extra

    def _tp_beside_buckets(self, lay: Layout, grp: dict, costs, shared: bool):
        """``bucket_tail``'s ``tp_time`` for ``lay``: the emitter's backward TP collectives of a layer
        (``megatron/comm.py`` ``_comm_of``: after the compute the conjugate of its input op, an all-reduce, or
        a reduce-scatter under sequence parallelism, for attn, mlp and head; before it, under sequence
        parallelism, the all-gather conjugate to the output's reduce-scatter, for attn, mlp and embed), alone
        and, where they share links with the buckets (``shared``), beside one (:meth:`side_by_side`)."""
        sp = lay.sequence_parallel
        dp_kind = "allreduce" if lay.zero == 0 else "reduce_scatter"
        lanes, dp_groups = grp["tp_all"], grp["dp"]

        def seconds(j: int, where: str, bucket: float, since: float) -> tuple[float, float]:
            c = costs[j]
            if where == "bwd-post" and c.kind in ("attn", "mlp", "head"):
                kind = "reduce_scatter" if sp else "allreduce"
            elif where == "bwd-pre" and sp and c.kind in ("attn", "mlp", "embed"):
                kind = "allgather"
            else:
                return 0.0, 0.0
            alone = self.price(kind, grp["tp"], c.tp_bytes)
            if not shared or bucket <= 0:
                return alone, alone
            return alone, max(alone, self.side_by_side(kind, lanes, c.tp_bytes, dp_kind, dp_groups, bucket, since))
        return seconds

    def side_by_side(self, tp_kind: str, tp_groups: tuple, tp_bytes: float, dp_kind: str, dp_groups: tuple,
                     dp_bytes: float, since: float = 0.0) -> float:
        """Seconds of a TP ``tp_kind`` over every TP group of the stage started ``since`` seconds after the
        data-parallel ``dp_kind`` of ``dp_bytes`` began over every DP group, each on its own stream: the flow
        model's max-min share of the NVLink ports they both cross (the analytic model prices each alone).

        In the flow model the bucket's in-node ring hops load NVLink in one window early in the bucket (its
        NVLink flows run ahead of the slower inter-node ones and finish first); a TP collective started after
        the window runs alone.  The window's end is found once per pair of sizes by pricing starts one alone
        TP time (at least 1/WINDOW_PROBES of the bucket's
        time) apart until they run alone again (:meth:`_window_end`); starts inside it are priced to the
        microsecond by a two-collective flow simulation (:meth:`_pair`), cached."""
        alone = self.price(tp_kind, tp_groups[:1], tp_bytes)
        pair = (tp_kind, tp_groups, round(tp_bytes), dp_kind, dp_groups, round(dp_bytes))
        if since >= self._window_end(pair, alone):
            return alone
        # inside the window: linear between the probes either side (the TP collective's end is flat in the
        # window's interior: it waits for the bucket's NVLink flows whatever its start)
        step = self._window_step(pair, alone)
        k = int(since / step)
        lo, hi = self._pair(pair, k * step), self._pair(pair, (k + 1) * step)
        return max(alone, lo + (hi - lo) * (since / step - k))

    def _window_step(self, pair: tuple, alone: float) -> float:
        return max(alone, self.price(pair[3], pair[4], pair[5]) / WINDOW_PROBES)

    def _window_end(self, pair: tuple, alone: float) -> float:
        key = ("window", pair)
        if key not in self._prices:
            span = self.price(pair[3], pair[4], pair[5])  # the bucket alone: no window past its end
            step = self._window_step(pair, alone)
            end, since, after = 0.0, 0.0, 0
            while since < span and after < 2:
                if self._pair(pair, since) > alone * (1 + 1e-9):
                    end, after = since + step, 0
                elif end:
                    after += 1
                since += step
            self._prices[key] = end
        return self._prices[key]

    def _pair(self, pair: tuple, since: float) -> float:
        since = round(since, 6)  # to the microsecond: the price is cached per start offset
        key = ("pair", pair, since)
        if key not in self._prices:
            from simcomm import engine
            from simcomm.engine.options import EngineOptions
            from simcomm.ops import PlanBuilder

            tp_kind, tp_groups, tp_bytes, dp_kind, dp_groups, dp_bytes = pair
            b = PlanBuilder(self.topo.n_ranks)
            ids = [b.collective(tp_kind, g, tp_bytes, label="plan-price", stream="tp",
                                after=[b.compute(r, since, label="plan-price") for r in g] if since > 0 else ())
                   for g in tp_groups]
            for g in dp_groups:
                b.collective(dp_kind, g, dp_bytes, label="plan-price", stream="dp")
            tl = engine.simulate(b.build(kind="price"), self.topo, fidelity="flow", seed=0,
                                 options=EngineOptions(runtime=self.runtime, link_bytes=False))
            self._prices[key] = float(max(tl.end[i] for i in ids)) - since
        return self._prices[key]

    def _shares_links(self, lay: Layout, grp) -> bool:
        """Whether the tensor-parallel collectives and the data-parallel reductions cross the same in-node links:
        tp > 1 and a data-parallel group with two ranks in one node (its NCCL ring then has NVLink hops)."""
        if lay.tp < 2 or not self.gpn or not grp["dp"]:
            return False
        group = grp["dp"][0]
        return len({r // self.gpn for r in group}) < len(group)

    def _buckets(self, idx: tuple) -> list[list[int]]:
        """The workload's gradient buckets restricted to the layers ``idx`` (empty ones dropped), in ready order."""
        key = ("buckets", idx)
        if key not in self._stages:
            members = set(idx)
            self._stages[key] = [part for part in ([j for j in b if j in members] for b in self.workload.buckets)
                                 if part]
        return self._stages[key]

    def zero3_passes(self, lay: Layout, idx, costs, grp) -> tuple[float, float, float, float, float]:
        """(forward pass, backward pass, tail) seconds of one micro-batch under ZeRO-3, as the emitter orders it:
        layer k's all-gather (one stream) starts once the compute two layers back is done (one layer of
        prefetch; the first two at the pass's start), its compute waits for its gather; in backward each
        layer's reduce-scatter (and HSDP's all-reduce across shard groups) follows its compute on a second
        stream.  ``tail``: what the last reduce-scatters add after the last backward.  The gathers and
        reduce-scatters cross the same links, so they are priced one after the other (in the order they become
        ready) rather than side by side.  Also returns the share of each pass the links are busy (the gathers'
        and reduce-scatters' seconds over the pass's, at most 1)."""
        dp_groups, hsdp_groups, hs = grp["dp"], grp["hsdp"], lay.shard_group
        full = lay.recompute == "full"
        gather, scatter = self.at("allgather", dp_groups), self.at("reduce_scatter", dp_groups)
        across = self.at("allreduce", hsdp_groups)

        def one(forward: bool) -> tuple[float, float, float]:
            order = idx if forward else idx[::-1]
            n = len(order)
            ag = [gather(costs[j].grad_bytes) for j in order]
            gathered = [0.0] * n
            link = gathered[0] = ag[0]  # the first two gathers at the pass's start, back to back
            if n > 1:
                link = gathered[1] = link + ag[1]
            t_c = 0.0
            for k, j in enumerate(order):
                c = costs[j].forward_s if forward else costs[j].backward_s + (costs[j].forward_s if full else 0.0)
                t_c = max(t_c, gathered[k]) + c
                if k + 2 < n:  # the gather two layers on waits for this compute
                    link = gathered[k + 2] = max(link, t_c) + ag[k + 2]
                if not forward:  # this layer's reduce-scatter (+ HSDP all-reduce) after its compute, same links
                    nb = costs[j].grad_bytes
                    link = max(link, t_c) + scatter(nb)
                    if hs is not None:
                        link += across(nb / hs)
            work = sum(ag) + (0.0 if forward else sum(
                scatter(costs[j].grad_bytes) + (across(costs[j].grad_bytes / hs) if hs is not None else 0.0)
                for j in order))
            return t_c, max(0.0, link - t_c), min(1.0, work / t_c) if t_c > 0 else 0.0

        fwd, _, busy_f = one(True)
        bwd, tail, busy_b = one(False)
        return fwd, bwd, tail, busy_f, busy_b

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

        worst = None
        for k in range(p):
            idx = self.stage_layers(lay, k)  # embedding first on stage 0, head last on the last stage
            f, b = stage_seconds(costs, idx, lay.recompute)
            nblocks = len(self.structure.blocks) // p
            t_tp = nblocks * per_block + (ar if k == 0 else 0.0) + (ar if k == p - 1 else 0.0)
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
                    exposed, slower = self.bucket_tail(lay, idx, costs, dp_groups, tp_time)
                    self._dp_memo[key] = (exposed + slower, 0.0, 0.0)
            dp_t, per_mb_extra, _ = self._dp_memo[key]
            shard = (hs if hs is not None else lay.replicas) if lay.zero else 1  # the strategy's optimizer shard
            upd = sum(costs[j].update_s for j in idx) / shard
            ring = self.ring(lay, idx)
            stage_t = f + b + t_tp + per_mb_extra + ring
            cand = (stage_t, f + b, t_tp, per_mb_extra, dp_t, upd, ring)
            if worst is None or cand > worst:
                worst = cand
        assert worst is not None  # pp >= 1 stages
        stage_t, comp, t_tp, extra, dp_t, upd, ring = worst
        hops = 0.0
        if p > 1:
            nbytes = costs[self.structure.blocks[0][-1]].activation_bytes
            hops = 2 * (p * v - 1) * self.price("transfer", ((0, tp * lay.cp),), nbytes)
        bubble = (p - 1) / v * stage_t + hops if p > 1 else 0.0
        return Estimate(m * comp, m * t_tp, bubble, dp_t + m * extra, upd, m * ring)


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
