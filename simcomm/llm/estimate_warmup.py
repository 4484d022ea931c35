"""The estimate of Megatron's interleaved schedule with as many micro-batches as stages (every forward first).

Megatron-core's ``forward_backward_pipelining_with_interleaving`` (``megatron/core/pipeline_parallel/
schedules.py``) sets ``all_warmup_microbatches`` when ``num_microbatches == pipeline_parallel_size``: every
stage runs all ``m·v`` forwards, then all backwards (:func:`simcomm.llm.placement.schedule`).  There is no
steady state, so no other micro-batch's compute hides a point-to-point hop: every hop is on the pipeline's
chain, and each model chunk's data-parallel buckets start (``enable_grad_sync`` before the chunk's last
micro-batch's backward) exactly when that backward sends its activation gradient on, the two sharing the
in-node links.  The stage that ends last is stage 0 (its first chunk's backward is the iteration's last
task), so its own tail (the embedding's bucket, the tied embeddings' all-reduce, its optimizer step) ends
the step, not the compute-slowest stage's.

:class:`AllForwardsFirst` (a mixin of :class:`simcomm.llm.estimate.Pricer`) prices that: the list schedule
of every stage's tasks (:func:`list_schedule`, exact for any chunk times, ``O(p·v·m)``), with the hop after
a chunk's last backward priced beside the bucket it starts (a two-collective flow run, cached), then each
stage's buckets, tied-embedding all-reduce and update after its own last backward (docs/plan.md, section 5).

Pure library: no typer, rich or matplotlib here.
"""

from __future__ import annotations

from typing import Any

from simcomm.llm.compute import stage_seconds
from simcomm.llm.layout import Layout
from simcomm.llm.placement import chunks, schedule

__all__ = ["AllForwardsFirst", "list_schedule", "all_forwards_first"]


def all_forwards_first(lay: Layout, microbatches: int) -> bool:
    """Megatron's interleaved schedule with as many micro-batches as stages (``all_warmup_microbatches``)."""
    return lay.schedule == "interleaved" and lay.pp > 1 and microbatches == lay.pp


def list_schedule(orders, pp: int, v: int, forward, backward, hop) -> dict:
    """End time of every task ``(F|B, micro-batch, virtual stage u)`` when each stage runs its ``orders``
    (:func:`simcomm.llm.placement.schedule`) one after the other, as early as its input allows.

    A forward of virtual stage ``u`` waits for its micro-batch's forward of ``u - 1`` (on the stage before) plus
    one hop; a backward of ``u`` for its backward of ``u + 1`` plus one hop, the last virtual stage's for its own
    forward (no hop).  ``forward[u]``, ``backward[u]``: one micro-batch's seconds of virtual stage u; ``hop``:
    seconds of every hop, or a function of the receiving task ``(kind, micro-batch, u)`` giving its hop's (the
    stages' link; after a chunk's last backward, beside the buckets it starts).  With uniform chunk times ``F``,
    ``B`` and ``m == pp`` the last task ends at
    ``pp·(F + B) + (pp·v - 1)·(F + B + 2·hop)``: ``(pp - 1)·(F + B) + 2(pp·v - 1)·hop`` past the stage's work."""
    n = pp * v
    done: dict = {}
    free = [0.0] * pp
    idx = [0] * pp
    left = sum(len(x) for x in orders)
    while left:
        moved = False
        for s in range(pp):
            tasks = orders[s]
            while idx[s] < len(tasks):
                kind, mb, c = tasks[idx[s]]
                u = c * pp + s
                need = _input_of(kind, mb, u, n)
                if need is not None and need not in done:
                    break
                ready = 0.0
                if need is not None:
                    ready = done[need]
                    if need[2] != u:  # from the stage before (forward) or after (backward): one hop
                        ready += hop if isinstance(hop, float) else hop(kind, mb, u)
                start = max(free[s], ready)
                free[s] = done[(kind, mb, u)] = start + (forward[u] if kind == "F" else backward[u])
                idx[s] += 1
                left -= 1
                moved = True
        if not moved:
            raise RuntimeError("pipeline schedule deadlocks")  # placement.schedule's orders never do
    return done


def _input_of(kind: str, mb: int, u: int, n: int):
    """The task whose output task ``(kind, mb, u)`` reads (the emitter's ``plan``): the forward of ``u - 1``, the
    backward of ``u + 1``, or for the last of ``n`` virtual stages' backward its own forward; None for the first
    virtual stage's forward."""
    if kind == "F":
        return ("F", mb, u - 1) if u > 0 else None
    return ("B", mb, u + 1) if u + 1 < n else ("F", mb, u)


class AllForwardsFirst:
    """Mixin of :class:`simcomm.llm.estimate.Pricer` (reads its ``price``, ``structure``, ``bucket_tail``,
    ``_buckets``, ``_prices``, ``workload``, ``meta``, ``topo``, ``runtime``)."""

    structure: Any
    workload: Any
    meta: dict
    topo: Any
    runtime: Any
    _prices: dict
    _groups: dict
    _stages: dict

    def chunk_seconds(self, lay: Layout, costs, ar: float, per_moe: float, moe_tp, z3_extra: list[float]):
        """(forward, backward) seconds of one micro-batch of each virtual stage, with what the stage time of
        :meth:`~simcomm.llm.estimate.Pricer.estimate` adds per micro-batch, chunk by chunk: TP collectives (a
        block's two in forward, two (four with full recomputation) in backward, the embedding's in forward, the
        head's in backward; an MoE layer's own split by pass), the CP ring and the MoE dispatchers split as the
        compute (forward : backward), ZeRO-3's per-micro-batch excess as its stage's, by compute share."""
        p, v = lay.pp, lay.virtual
        parts = chunks(self.structure, p * v)
        passes = 3 if lay.recompute == "full" else 2
        fwd, bwd = [], []
        stage_fb = [sum(sum(stage_seconds(costs, parts[u], lay.recompute)) for u in range(s, p * v, p))
                    for s in range(p)]
        blocks = len(self.structure.blocks) // (p * v)  # per chunk, as the estimate counts a stage's
        for u, idx in enumerate(parts):
            f, b = stage_seconds(costs, idx, lay.recompute)
            kinds = [costs[j].kind for j in idx]
            tp_f = ar * (2 * blocks + kinds.count("embed"))
            tp_b = ar * (2 * (passes - 1) * blocks + kinds.count("head"))
            if moe_tp is not None:
                tp_f += moe_tp / passes * kinds.count("moe")
                tp_b += moe_tp * (passes - 1) / passes * kinds.count("moe")
            other = self.ring(lay, idx) + (per_moe * kinds.count("moe") if per_moe else 0.0)
            if z3_extra[u % p]:
                other += z3_extra[u % p] * (f + b) / stage_fb[u % p]
            share = f / (f + b) if f + b > 0 else 0.5
            fwd.append(f + tp_f + other * share)
            bwd.append(b + tp_b + other * (1 - share))
        return parts, fwd, bwd

    def warmup_estimate(self, lay: Layout, costs, grp: dict, ar: float, per_moe: float, moe_tp,
                        stages: list[tuple], hop_bytes: float, tp_time):
        """(bubble, dp, update) of an all-forwards-first layout (:func:`all_forwards_first`).

        ``stages``: per stage the estimate's ``(stage_t, f + b, t_tp, per_mb_extra, dp_t, update, ring, ep)``;
        ``tp_time``: the backward TP collectives beside a bucket (``bucket_tail``'s), or None.  The bubble is
        the list schedule's last task's end past ``m`` of the slowest stage's times; dp and update are the
        ones of the stage that ends the step (its last backward, then its buckets past it, the tied embeddings'
        all-reduce, its optimizer step)."""
        p, v, m = lay.pp, lay.virtual, lay.pp
        z3 = [st[3] for st in stages] if lay.zero == 3 else [0.0] * p
        parts, fwd, bwd = self.chunk_seconds(lay, costs, ar, per_moe, moe_tp, z3)
        orders = schedule("interleaved", p, m, v)
        place = self._placement(lay)
        dp_groups = grp["dp"]
        overlapped = lay.zero < 3 and bool(dp_groups)
        hops: dict = {}

        def hop(kind: str, mb: int, u: int) -> float:
            """The hop into task (kind, mb, u): over the link between its stage and the sender's, and after a
            chunk's last backward beside the bucket that backward starts."""
            src = (u - 1 if kind == "F" else u + 1) % p
            bucket = self._first_bucket_bytes(lay, parts[u + 1], costs) if kind == "B" and mb == m - 1 and overlapped \
                else 0.0
            key = (src, u % p, bucket)
            if key not in hops:
                if bucket:
                    hops[key] = self.hop_beside_bucket(lay, place, costs, parts[u + 1], hop_bytes, src, u % p)
                else:
                    pair = ((place.rank(0, src, 0), place.rank(0, u % p, 0)),)
                    hops[key] = self.price("transfer", pair, hop_bytes)
            return hops[key]

        done = list_schedule(orders, p, v, fwd, bwd, hop)
        span = max(done.values())
        ends = []
        for s in range(p):
            last_b = done[("B", m - 1, s)]  # the stage's first chunk's last backward: its last task
            tail = stages[s][4]
            if overlapped:
                tail = self.chunk_buckets(lay, costs, dp_groups, parts, done, s, tp_time)
            ends.append(last_b + tail)
        tied = self.tied_embeddings(lay)
        if tied:
            both = max(ends[0], ends[-1]) + tied
            ends[0] = ends[-1] = both
        finish = [ends[s] + stages[s][5] for s in range(p)]
        last = max(range(p), key=lambda s: (finish[s], s))
        worst = max(stages)
        update = stages[last][5]
        # the parts sum to the finish: the slowest stage's m stage times (its ZeRO-3 excess counted in dp, as
        # the estimate counts it), the bubble past them to the last task's end, then dp and update
        return span - m * worst[0], finish[last] - span - update + m * worst[3], update

    def hop_beside_bucket(self, lay: Layout, place, costs, idx, hop_bytes: float, src: int, dst: int) -> float:
        """Seconds of the activation-gradient send from stage ``src`` to ``dst`` after a chunk's (layers ``idx``)
        last backward, beside the bucket the chunk's first layer's gradient completes: the bucket starts when
        that layer's backward compute ends (the emitter's ``_reduce_grads``), the send once the layer's backward
        TP collective after it has run.  Every TP lane of every replica sends while stage ``src``'s
        data-parallel groups reduce (a flow run of the two, cached)."""
        first = min(idx)
        nbytes = self._first_bucket_bytes(lay, idx, costs)
        since = 0.0
        if lay.tp > 1 and costs[first].kind in ("attn", "mlp", "head"):
            tp_kind = "reduce_scatter" if lay.sequence_parallel else "allreduce"
            since = self.price(tp_kind, (place.tp_group(src, 0),), costs[first].tp_bytes)
        kind = "allreduce" if lay.zero == 0 else "reduce_scatter"
        key = ("sends beside", lay.tp, lay.pp, lay.dp, lay.cp, src, dst)
        if key not in self._groups:
            data = range(lay.dp * lay.cp)
            self._groups[key] = (
                tuple((place.rank(t, src, d), place.rank(t, dst, d)) for d in data for t in range(lay.tp)),
                tuple(g for g in (place.dp_group(t, src) for t in range(lay.tp)) if len(g) > 1))
        sends, groups = self._groups[key]
        return self._send_beside(sends, hop_bytes, kind, groups, nbytes, since)

    def _first_bucket_bytes(self, lay: Layout, idx, costs) -> float:
        """Bytes of the bucket a chunk's (layers ``idx``) first layer's gradient completes: the chunk's bucket that
        starts when its backward ends."""
        key = ("first bucket", tuple(idx), self._cost_key(lay))
        if key not in self._stages:
            first = min(idx)
            self._stages[key] = sum(costs[k].grad_bytes for b in self._buckets(tuple(idx)) if first in b for k in b)
        return self._stages[key]

    def _placement(self, lay: Layout):
        key = ("placement", lay.tp, lay.pp, lay.dp, lay.cp)
        if key not in self._groups:
            self._groups[key] = Layout(lay.tp, lay.pp, lay.dp, cp=lay.cp).placement()
        return self._groups[key]

    def _send_beside(self, sends: tuple, nbytes: float, dp_kind: str, dp_groups: tuple, dp_bytes: float,
                     since: float) -> float:
        if dp_bytes <= 0:
            return self.price("transfer", sends[:1], nbytes)
        key = ("send-beside", sends, round(nbytes), dp_kind, dp_groups, round(dp_bytes), round(since, 6))
        if key not in self._prices:
            from simcomm import engine
            from simcomm.engine.options import EngineOptions
            from simcomm.ops import PlanBuilder

            b = PlanBuilder(self.topo.n_ranks)
            ids = [b.transfer(src, dst, nbytes, label="plan-price", stream="pp",
                              after=[b.compute(src, since, label="plan-price")] if since > 0 else ())
                   for src, dst in sends]
            for g in dp_groups:
                b.collective(dp_kind, g, dp_bytes, label="plan-price", stream="dp")
            tl = engine.simulate(b.build(kind="price"), self.topo, fidelity="flow", seed=0,
                                 options=EngineOptions(runtime=self.runtime, link_bytes=False,
                                                       stop_after=frozenset(ids)))
            self._prices[key] = max(float(max(tl.end[i] for i in ids)) - since,
                                    self.price("transfer", sends[:1], nbytes))
        return self._prices[key]

    def chunk_buckets(self, lay: Layout, costs, dp_groups, parts, done: dict, s: int, tp_time) -> float:
        """Seconds stage ``s``'s data-parallel work runs past its last backward (ZeRO 0-2).  Each later chunk's
        buckets start when that chunk's last micro-batch's backward ends, one after the other on the stream
        (the emitter's ``_reduce_grads`` per chunk, each with its own buckets as Megatron-core wraps each model
        chunk in its own DDP); the stage's first chunk, whose backward is the stage's last task, as
        :meth:`bucket_tail` times it inside that backward, or, when the stream is still busy with the earlier
        chunks' buckets, all of its buckets after them; then ZeRO-1/2's parameter all-gathers of every chunk."""
        p, m = lay.pp, lay.pp
        kind = "allreduce" if lay.zero == 0 else "reduce_scatter"
        reduce = self.at(kind, dp_groups)

        def bucket_bytes(u: int) -> list[float]:
            return [sum(costs[k].grad_bytes for k in b) for b in self._buckets(tuple(parts[u]))]

        stream = 0.0
        for c in range(lay.virtual - 1, 0, -1):
            u = c * p + s
            stream = max(stream, done[("B", m - 1, u)]) + sum(reduce(x) for x in bucket_bytes(u))
        last_b = done[("B", m - 1, s)]
        exposed, slower = self.bucket_tail(lay, parts[s], costs, dp_groups, tp_time, self._edp_groups(lay))
        backlog = stream + sum(reduce(x) for x in bucket_bytes(s)) - last_b
        gathers = 0.0
        if lay.zero in (1, 2):  # the later chunks' parameter all-gathers (bucket_tail counts the first chunk's)
            gather = self.at("allgather", dp_groups)
            gathers = sum(gather(x) for c in range(1, lay.virtual) for x in bucket_bytes(c * p + s))
        return max(exposed, backlog) + slower + gathers

    def tied_embeddings(self, lay: Layout) -> float:
        """Seconds of the tied word embeddings' gradient all-reduce between the first and last stage (the
        emitter's ``_tied_embeddings``; Megatron's ``_allreduce_word_embedding_grads``), every (tp, dp) pair at once."""
        names = [x.name for x in self.workload.layers]
        if lay.pp < 2 or not self.meta.get("tied") or "embed" not in names or "head" not in names:
            return 0.0
        nbytes = self.meta.get("vocab", 0) * self.meta.get("hidden", 0) * self.workload.dtype_bytes / lay.tp
        place = self._placement(lay)
        groups = tuple((place.rank(t, 0, d), place.rank(t, lay.pp - 1, d))
                       for d in range(lay.dp * lay.cp) for t in range(lay.tp))
        return self.price("allreduce", groups, nbytes)

    # the host's (Pricer / DataParallelTimelines)
    def price(self, kind: str, groups: tuple, nbytes: float) -> float:
        raise NotImplementedError

    def at(self, kind: str, groups: tuple):
        raise NotImplementedError

    def ring(self, lay: Layout, idx) -> float:
        raise NotImplementedError

    def bucket_tail(self, lay, idx, costs, dp_groups, tp_time=None, expert_groups=None):
        raise NotImplementedError

    def _buckets(self, idx: tuple):
        raise NotImplementedError

    def _edp_groups(self, lay: Layout):
        raise NotImplementedError

    def _cost_key(self, lay: Layout) -> tuple:
        raise NotImplementedError
