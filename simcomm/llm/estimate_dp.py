"""The data-parallel timelines of ``simcomm plan``'s estimate (:class:`simcomm.llm.estimate.Pricer`'s mixin).

What the emitter's data-parallel mixin (``strategies/megatron/data.py``) runs after and around the backward,
timed in closed form per stage: ZeRO-0/1/2's gradient buckets after the last micro-batch's backward with the
tensor-parallel collectives beside them on NVLink (:meth:`DataParallelTimelines.bucket_tail`), and ZeRO-3's
per-layer gathers and reduce-scatters (:meth:`DataParallelTimelines.zero3_passes`).  Collectives are priced by
the host class's ``price``/``at`` (the engine's analytic NCCL model, cached); where a TP collective and a
bucket share NVLink ports a two-collective flow run prices them side by side (:meth:`_pair`, cached).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simcomm.llm.layout import Layout

__all__ = ["DataParallelTimelines", "WINDOW_PROBES"]

#: starts a bucket's span is probed at for its NVLink window (Pricer._window_end): a window narrower than
#: span / WINDOW_PROBES can be missed (the TP collectives beside it then priced alone)
WINDOW_PROBES = 16


class DataParallelTimelines:
    """Mixin of :class:`simcomm.llm.estimate.Pricer`: reads its ``price``, ``at``, ``topo``, ``runtime``,
    ``gpn``, ``workload``, ``_prices`` and ``_stages``."""

    workload: Any
    topo: Any
    runtime: Any
    gpn: int | None
    _prices: dict
    _stages: dict

    def price(self, kind: str, groups: tuple, nbytes: float) -> float:
        raise NotImplementedError  # the host's: seconds of one collective over every group at once

    def at(self, kind: str, groups: tuple) -> Callable[[float], float]:
        raise NotImplementedError  # the host's: price(kind, groups, ·) memoised per byte count

    def bucket_tail(self, lay: Layout, idx, costs, dp_groups, tp_time=None,
                    expert_groups=None) -> tuple[float, float]:
        """Exposed seconds of ZeRO-0/1/2's gradient reduction after the last micro-batch's backward, as the
        emitter's ``DataParallel._reduce_grads`` runs it: the workload's buckets (restricted to the stage's
        layers), each reduced on the one data-parallel stream as soon as its last gradient is ready, in order;
        ZeRO-1/2 then all-gather the updated parameters bucket by bucket after the optimizer step.

        ``tp_time(j, where, bucket_bytes, since)``: (alone, beside) seconds of the tensor-parallel collectives
        of layer ``j``'s backward (``where``: ``bwd-pre`` or ``bwd-post``, the emitter's positions) on their
        own and started ``since`` seconds after a bucket of ``bucket_bytes`` began (0 bytes: none running); None
        for no TP.  They sit on the compute's path, so they move when later buckets are ready; the emitter
        starts a layer's TP collective and the bucket its gradient completes at the same instant (both wait
        only for the layer's backward compute), so the two cross the links side by side.  ``expert_groups``: the
        expert-data-parallel groups when the routed experts' gradients reduce apart (ep > 1 or etp != tp, the
        emitter's ``_bucket_parts``): each bucket's dense part over ``dp_groups``, then its routed experts' part
        over these, one after the other on the stream.  Returns (exposed seconds, the seconds the TP
        collectives take beyond their time alone)."""
        if not dp_groups:
            return 0.0, 0.0
        kind = "allreduce" if lay.zero == 0 else "reduce_scatter"
        full = lay.recompute == "full"
        reduce, gather = self.at(kind, dp_groups), self.at("allgather", dp_groups)
        if expert_groups is not None:
            expert_reduce, expert_gather = self.at(kind, expert_groups), self.at("allgather", expert_groups)
        buckets = self._buckets(tuple(idx))
        last: dict[int, list[list[int]]] = {}  # layer -> the buckets its gradient completes (the workload's bucket order)
        for bucket in buckets:
            last.setdefault(min(bucket, key=idx.index), []).append(bucket)
        stream, gathers, extra, t = 0.0, 0.0, 0.0, 0.0
        running: list[tuple[float, float, float]] = []  # (start, end, bytes) of each bucket, in stream order
        # Each bucket starts once the one before it has ended, so the buckets' spans are disjoint and ordered,
        # and t only grows: the bucket running at t (if any) is the first not yet ended at t, found by a cursor.
        cursor = [0]

        def tp_at(j: int, where: str) -> tuple[float, float]:  # (alone, beside the bucket on the links)
            if tp_time is None:
                return 0.0, 0.0
            k = cursor[0]
            while k < len(running) and running[k][1] <= t:
                k += 1
            cursor[0] = k
            if k < len(running) and running[k][0] <= t:
                return tp_time(j, where, running[k][2], t - running[k][0])
            return tp_time(j, where, 0.0, 0.0)

        for j in reversed(idx):  # the backward, last layer first
            alone, more = tp_at(j, "bwd-pre")
            t += more + costs[j].backward_s + (costs[j].forward_s if full else 0.0)
            extra += more - alone
            for bucket in last.get(j, ()):  # in order, each once the stream is free and its gradients ready
                nbytes = sum(costs[k].grad_bytes for k in bucket)
                experts = sum(costs[k].expert_grad_bytes for k in bucket) if expert_groups is not None else 0.0
                nbytes -= experts
                start = max(stream, t)
                stream = start + reduce(nbytes) if nbytes > 0 else start
                running.append((start, stream, nbytes))
                if lay.zero in (1, 2) and nbytes > 0:
                    gathers += gather(nbytes)
                if experts > 0:  # the routed experts' part, after the dense part on the same stream
                    stream += expert_reduce(experts)
                    if lay.zero in (1, 2):
                        gathers += expert_gather(experts)
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
        the window runs alone.  The window's end is found per pair of sizes by pricing starts one alone TP
        time (at least 1/WINDOW_PROBES of the bucket's time) apart until the first that runs alone again
        (:meth:`_window_end`, lazily: only as far as a start needs; a gap inside the window, which no pair of
        the measured searches has, would end it there); starts inside it are priced linearly between the
        probes either side, each a two-collective flow simulation to the microsecond (:meth:`_pair`), cached."""
        alone = self.price(tp_kind, tp_groups[:1], tp_bytes)
        pair = (tp_kind, tp_groups, round(tp_bytes), dp_kind, dp_groups, round(dp_bytes))
        if since == 0.0:
            # started with the bucket (the common case: the bucket the same backward completes): the window's
            # first probe is the answer inside the window (the interpolation's weight on the next is 0), and
            # alone when it runs alone, so the next probe is not needed
            first = self._pair(pair, 0.0)
            if first <= alone or self._window_end(pair, alone, 0.0) <= 0.0:
                return alone
            return first
        if since >= self._window_end(pair, alone, since):
            return alone
        # inside the window: linear between the probes either side (the TP collective's end is flat in the
        # window's interior: it waits for the bucket's NVLink flows whatever its start)
        step = self._window_step(pair, alone)
        k = int(since / step)
        lo, hi = self._pair(pair, k * step), self._pair(pair, (k + 1) * step)
        return max(alone, lo + (hi - lo) * (since / step - k))

    def _window_step(self, pair: tuple, alone: float) -> float:
        return max(alone, self.price(pair[3], pair[4], pair[5]) / WINDOW_PROBES)

    def _window_end(self, pair: tuple, alone: float, since: float) -> float:
        """The end of ``pair``'s window as far as a start ``since`` seconds after the bucket needs it: probes
        starts ``step`` apart from 0 while ``since`` is at or past the end found so far, up to the first that
        runs alone after one inside (the window's end) or the bucket's span; the probes already run are kept.
        The probes are the same sequence whichever start asks first, and the window only grows with them, so
        a start before the end found so far is inside the final window too: every answer equals probing the
        whole window at once, at a fraction of the flow runs (most starts fall early in it)."""
        key = ("window", pair)
        state = self._prices.get(key)
        if state is None:
            # [next start to probe, end so far (0: no start inside yet), whether the end is final]
            state = self._prices[key] = [0.0, 0.0, False]
        if state[2] or since < state[1]:
            return state[1]
        span = self.price(pair[3], pair[4], pair[5])  # the bucket alone: no window past its end
        step = self._window_step(pair, alone)
        probe, end, final = state
        while not final and since >= end:
            if probe >= span:
                final = True
            elif self._pair(pair, probe) > alone * (1 + 1e-9):
                end = probe + step
            elif end:  # the first start past the window runs alone: the window has ended (the
                final = True  # interpolation reads this probe and the last inside, none later)
            if not final:
                probe += step
        state[:] = [probe, end, final]
        return end

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
            # only the TP collectives' ends are read: the run stops when the last of them ends (the bucket's
            # remaining steps cannot move them; EngineOptions.stop_after)
            tl = engine.simulate(b.build(kind="price"), self.topo, fidelity="flow", seed=0,
                                 options=EngineOptions(runtime=self.runtime, link_bytes=False,
                                                       stop_after=frozenset(ids)))
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
