"""The ``analytic`` fidelity: closed forms, no contention.

A Transfer of n bytes from a to b takes ``alpha + n * beta`` with ``alpha`` the
summed per-hop latency of route(a, b) and ``beta`` = 1 / (smallest link
capacity on that route).

A Collective is priced by its algorithm's Hockney closed form
``alg.cost(p, n, alpha, beta, gamma)`` with one alpha, beta and gamma for the
whole group, taken from the worst pair the algorithm actually uses:

* the pairs are the distinct (src, dst) of the algorithm's own steps (so a ring
  is priced by its neighbour routes, a tree by its parent-child routes);
* ``alpha`` = the largest route latency among them;
* ``beta`` = 1 / the smallest bottleneck capacity among them;
* ``gamma`` = the largest per-byte reduction cost among the group's ranks;
* two-level (``hierarchical``) algorithms get intranode alpha/beta from the
  pairs on one machine and ``alpha_inter``/``beta_inter`` from the others.

For schedules larger than :data:`PAIR_LIMIT` transfers (e.g. an all-to-all
over thousands of ranks) the pairs are sampled as ring neighbours plus the
routes to and from the group's first rank, and link bytes are not counted
(``meta["analytic_sampled"]`` says how often).  On a contention-free
topology where every pair has the same link this is exactly the flow
fidelity's answer (tests/engine/test_engine_fidelity.py).

Nothing is shared, so an op's times depend only on when its dependencies and
its stream's previous op end: :func:`longest_path` computes them in one pass
in op order, without an event loop, when link bytes are not asked for (their
sum depends on the order in which an event loop starts the ops).
"""

from __future__ import annotations

from itertools import chain, repeat

import numpy as np

from simcomm.collectives.base import Step
from simcomm.collectives.pairs import add_block_link_bytes, block_family_bytes
from simcomm.engine.schedule import algorithm_cost, route_step, takes_ppn
from simcomm.ops import Collective, Compute, Transfer

__all__ = ["AnalyticPricer", "PAIR_LIMIT", "longest_path"]

#: Largest schedule (transfers summed over distinct steps) routed in full.
PAIR_LIMIT = 1_000_000


class AnalyticPricer:
    """Closed-form prices; caches the group parameters of repeated collectives."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.env = ctx.env
        # seconds, bytes per family, bytes per link (None: not counted)
        self._cache: dict[tuple, tuple[float, np.ndarray | None, np.ndarray | None]] = {}
        # latency, bottleneck, the route's families, its links
        self._pairs: dict[tuple[int, int], tuple] = {}  # (latency, bottleneck[, families, links])

    # The Pricer protocol's bookkeeping: closed forms merge no flows and record no link usage.
    live_merged = 0

    @property
    def usage(self) -> list:
        return []

    def finish_stats(self) -> None:
        return None

    def _route_params(self, routed) -> tuple[np.ndarray, np.ndarray]:
        """Per transfer: route latency and bottleneck capacity."""
        cap = self.ctx.topology.capacity[routed.links]
        starts = np.concatenate(([0], np.cumsum(routed.route_len)[:-1]))
        return routed.latency, np.minimum.reduceat(cap, starts)

    def route_pairs(self, src: np.ndarray, dst: np.ndarray) -> None:
        """Route the pairs ``src[i] -> dst[i]`` not routed yet in one call (:meth:`Topology.routes`).

        The same floats as :meth:`transfer_seconds` routing each pair alone: each pair's latency is the sum of
        its own links' latencies in route order (``np.bincount`` adds them in that order) and its bottleneck the
        minimum of their capacities.  A plan of 10^4-10^5 messages (``dpsgd`` at 16 384 GPUs) was routed pair by
        pair, a third of its closed form's time.
        """
        ctx = self.ctx
        # the distinct pairs in (src, dst) order: np.unique of src x R + dst (a sort of int64, not of rows)
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        width = int(max(src.max(), dst.max())) + 1 if len(src) else 1
        code = np.unique(src * width + dst)
        pairs = zip((code // width).tolist(), (code % width).tolist(), strict=True)
        todo = [(a, b) for a, b in pairs if (a, b) not in self._pairs]
        if not todo:
            return
        arr = np.array(todo, dtype=np.int64)
        route_len, links = ctx.topology.routes(arr[:, 0], arr[:, 1])
        if (route_len == 0).any():  # reduceat below needs a link per route; let transfer_seconds handle these
            return
        owner = np.repeat(np.arange(len(arr)), route_len)
        latency = np.bincount(owner, weights=ctx.topology.latency[links], minlength=len(arr))
        starts = np.concatenate(([0], np.cumsum(route_len)[:-1]))
        bottleneck = np.minimum.reduceat(ctx.topology.capacity[links], starts)
        if not ctx.link_bytes and ctx.per_link is None:
            # nothing counts bytes (the one pass of a closed form): each pair's links are never read
            self._pairs.update(zip(todo, zip(latency.tolist(), bottleneck.tolist(), strict=True), strict=True))
            return
        fams = ctx.family_of_link[links]
        # (as Python numbers first: the same floats and bounds, without numpy scalars per pair)
        ends = np.cumsum(route_len).tolist()
        for (a, b), lo, hi, lat, cap in zip(todo, starts.tolist(), ends, latency.tolist(), bottleneck.tolist(),
                                            strict=True):
            self._pairs[(a, b)] = (lat, cap, fams[lo:hi], links[lo:hi])

    def message_seconds(self, sends: list) -> list | None:
        """``latency + bytes / bottleneck`` of each ``(src, dst, bytes)`` of ``sends``, by position: the floats
        :meth:`transfer_seconds` gives when nothing counts bytes, every distinct pair routed in one call and
        nothing kept per pair (crossover-sgd at 16 384 GPUs: ~3 x 10^5 pairs, each used once); None when some
        pair has no route (:meth:`transfer_seconds` handles those)."""
        # (a byte count as float(x): the float ``x / bottleneck`` divides; np.array's floats, read as one stream)
        arr = np.fromiter(chain.from_iterable(sends), dtype=float, count=3 * len(sends)).reshape(-1, 3)
        src, dst, nbytes = arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64), arr[:, 2]
        width = int(max(src.max(), dst.max())) + 1
        code, first, at = np.unique(src * width + dst, return_index=True, return_inverse=True)
        # the distinct pairs in the order they first appear, as the flow run routes them
        # (FlowPricer.add_messages): the same batch, kept routed by Topology.routes, is not routed again
        order = np.argsort(first, kind="stable")
        code = code[order]
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        at = rank[at.reshape(-1)]
        topo = self.ctx.topology
        route_len, links = topo.routes(code // width, code % width)
        if (route_len == 0).any():
            return None
        # as route_pairs: each route's latency summed in route order, its bottleneck the least capacity
        owner = np.repeat(np.arange(len(code)), route_len)
        latency = np.bincount(owner, weights=topo.latency[links], minlength=len(code))
        bottleneck = np.minimum.reduceat(topo.capacity[links], np.cumsum(route_len) - route_len)
        return (latency[at] + nbytes / bottleneck[at]).tolist()

    def transfer_seconds(self, op) -> float:
        """``alpha + n * beta`` of a Transfer's route (routed once per pair); counts its link bytes."""
        ctx = self.ctx
        hit = self._pairs.get((op.src, op.dst))
        if hit is None:
            group = np.array([op.src, op.dst], dtype=np.int64)
            routed = route_step(ctx.topology, group, Step.make([0], [1], 0.0), ctx.gamma)
            lat, cap = self._route_params(routed)
            hit = (float(lat[0]), float(cap[0]), ctx.family_of_link[routed.links], routed.links)
            self._pairs[(op.src, op.dst)] = hit
        latency, bottleneck = hit[0], hit[1]
        if len(hit) == 2:  # routed by route_pairs for a run that counts no bytes
            return latency + op.nbytes / bottleneck
        fams, links = hit[2], hit[3]
        if ctx.link_bytes and len(ctx.families):  # as RoutedStep.family_bytes: n once per link crossed
            w = ctx.weight(op.stream)
            nb = float(op.nbytes if w is None else op.nbytes * w)
            ctx.family_bytes += np.bincount(fams, weights=np.full(len(fams), nb), minlength=len(ctx.families))
            if ctx.per_link is not None:  # the busiest links, as Context.count_bytes counts collectives
                np.add.at(ctx.per_link, links, float(op.nbytes))
        return latency + op.nbytes / bottleneck

    def collective_seconds(self, op, prep) -> float:
        """The collective's closed form (priced once per algorithm, group, size); counts its link bytes."""
        if prep.closed_form is not None and not self.ctx.link_bytes:
            # what _price gives a runtime's own closed form when no bytes are counted, for any group (the
            # analytic one pass: hierarchical-crossover-sgd's 38 930 machine-local collectives at 16 384 GPUs)
            return float(prep.closed_form)
        key = (prep.key, op.ranks, op.nbytes, op.root, prep.ppn)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._price(prep, op)
            self._cache[key] = hit
        seconds, fam_bytes, link_bytes = hit
        if fam_bytes is not None:
            w = self.ctx.weight(op.stream)
            self.ctx.family_bytes += fam_bytes if w is None else w * fam_bytes
        if link_bytes is not None:  # the busiest links, as Context.count_bytes counts them (unweighted)
            self.ctx.per_link += link_bytes
        return seconds

    def transfer(self, op):
        yield self.env.timeout(self.transfer_seconds(op))

    def collective(self, op, prep):
        seconds = self.collective_seconds(op, prep)
        if seconds > 0:
            yield self.env.timeout(seconds)

    def _count(self, fam, per, routed, repeat: int) -> None:
        """Add one routed step's bytes per family and per link (the arrays given, None: not counted)."""
        ctx = self.ctx
        if fam is not None:
            fam += repeat * routed.family_bytes(ctx.family_of_link, len(ctx.families))
        if per is not None:
            np.add.at(per, routed.links, repeat * np.repeat(routed.nbytes, routed.route_len))

    def _price(self, prep, op) -> tuple[float, np.ndarray | None, np.ndarray | None]:
        """(seconds, bytes per family, bytes per link) of a collective; the counts are None when not kept."""
        ctx = self.ctx
        alg, ppn, steps = prep.algorithm, prep.ppn, list(prep.steps)
        p = len(op.ranks)
        group = np.asarray(op.ranks, dtype=np.int64)
        counted = ctx.link_bytes and len(ctx.families)
        fam = np.zeros(len(ctx.families)) if ctx.link_bytes else None
        per = np.zeros(len(ctx.topology.capacity)) if counted and ctx.per_link is not None else None
        if prep.closed_form is not None:  # the runtime's own closed form (NCCL's patterns, simcomm.nccl)
            if fam is not None or per is not None:
                for s in steps:
                    blocks = getattr(s, "blocks", None)
                    if blocks is not None:
                        # blocks of pairs (NCCL's PXN all-to-all): bytes per family and per link from each link's
                        # count of pairs, the routed sums bit for bit (an all-to-all over 16 384 GPUs is never routed)
                        counts = [ctx.topology.pair_counts(group[rows]) for rows in blocks.rows]
                        if fam is not None:
                            fam += s.repeat * block_family_bytes(blocks, counts, ctx.family_of_link,
                                                                 len(ctx.families))
                        if per is not None:
                            add_block_link_bytes(per, blocks, counts, s.repeat)
                        continue
                    self._count(fam, per, route_step(ctx.topology, group, s, ctx.gamma), s.repeat)
            return float(prep.closed_form), fam, per
        assert alg is not None  # a Prepared without a closed form names its catalogue algorithm
        gamma = float(ctx.gamma[group].max())  # (a runtime's closed form, above, has its reductions in it)
        if not steps:
            return algorithm_cost(alg, p, op.nbytes, 0.0, 0.0, gamma, ppn), None, None
        if sum(len(s) for s in steps) > PAIR_LIMIT:
            ctx.stats["analytic_sampled"] += 1
            ctx.took("sampled_schedules")
            idx = np.arange(p)
            zeros = np.zeros(p - 1, dtype=np.int64)
            steps = [Step.make(np.concatenate((idx, zeros, idx[1:])),
                               np.concatenate(((idx + 1) % p, idx[1:], zeros)), 0.0)]
            fam = per = None
        lats, caps, intras = [], [], []
        for s in steps:
            routed = route_step(ctx.topology, group, s, ctx.gamma)
            a, c = self._route_params(routed)
            lats.append(a)
            caps.append(c)
            intras.append(ctx.machine[routed.src] == ctx.machine[routed.dst])
            self._count(fam, per, routed, s.repeat)
        lat, cap, intra = np.concatenate(lats), np.concatenate(caps), np.concatenate(intras)
        if not takes_ppn(alg) or intra.all() or not intra.any():
            return algorithm_cost(alg, p, op.nbytes, lat.max(), 1.0 / cap.min(), gamma, ppn), fam, per
        # Two-level algorithms: intranode stages priced by intranode pairs, internode by the rest.
        return algorithm_cost(alg, p, op.nbytes, lat[intra].max(), 1.0 / cap[intra].min(), gamma, ppn,
                              lat[~intra].max(), 1.0 / cap[~intra].min()), fam, per


def longest_path(ops, pricer: AnalyticPricer, prepared: dict) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every op of the analytic fidelity, in one pass in op order (no event loop).

    The executor's rules, with nothing shared between ops: a (rank, stream)
    runs its ops in id order; a Compute or Transfer starts when its stream's
    previous op has ended and its deps are done; a Collective starts when its
    last member's stream reaches it and its deps are done, and every member's
    stream continues at its end.  Ids are a topological order, so every time
    needed is known when an op is reached.  Ends are computed as the event loop
    computes them (start + duration, zero-length ops end at their start), so
    the times are the same floats.  Link bytes are not counted.
    """
    n = len(ops)
    ctx = pricer.ctx
    counts = ctx.link_bytes or ctx.per_link is not None
    sends = [(op.src, op.dst, op.nbytes) for op in ops if isinstance(op, Transfer)]
    # every message's seconds at once when nothing counts bytes (message rounds, unless the ``rounds`` reference)
    durations = pricer.message_seconds(sends) if len(sends) > 1 and not counts and ctx.rounds else None
    if len(sends) > 1 and durations is None:
        pairs = np.array([s[:2] for s in sends], dtype=np.int64)
        pricer.route_pairs(pairs[:, 0], pairs[:, 1])
    if durations is not None:
        ctx.took("message_rounds")
    start = [0.0] * n
    end = [0.0] * n
    free: dict[tuple[int, str], float] = {}  # (rank, stream) -> end of its last op
    streams_of: dict[tuple, list[tuple[int, str]]] = {}  # (a collective's ranks, stream) -> its members' keys
    # a message's seconds straight from its routed pair when nothing counts bytes (transfer_seconds' float)
    routed = pricer._pairs if not counts else {}
    k = 0  # messages so far (durations: by message, in op order)
    for op in ops:
        transfer = isinstance(op, Transfer)
        if transfer and durations is not None:
            t = free.get((op.src, op.stream), 0.0)
            for d in op.deps:
                if end[d] > t:
                    t = end[d]
            e = t + durations[k]
            k += 1
            free[(op.src, op.stream)] = e
            start[op.id] = t
            end[op.id] = e
            continue
        if transfer:
            t = free.get((op.src, op.stream), 0.0)
        elif isinstance(op, Collective):
            # its members' streams, once per (group, stream): crossover-sgd's barriers over 16 384 ranks
            group = (op.ranks, op.stream)
            if group not in streams_of:
                streams_of[group] = [(r, op.stream) for r in op.ranks]
            keys = streams_of[group]
            t = max(map(free.get, keys, repeat(0.0)))
        else:
            t = free.get((op.rank, op.stream), 0.0)
        for d in op.deps:
            if end[d] > t:
                t = end[d]
        if transfer:
            hit = routed.get((op.src, op.dst))
            e = t + (hit[0] + op.nbytes / hit[1] if hit is not None else pricer.transfer_seconds(op))
            free[(op.src, op.stream)] = e
        elif isinstance(op, Compute):
            e = t + op.seconds if op.seconds > 0 else t
            free[(op.rank, op.stream)] = e
        else:
            seconds = pricer.collective_seconds(op, prepared[op.id])
            e = t + seconds if seconds > 0 else t
            free.update(zip(keys, repeat(e)))
        start[op.id] = t
        end[op.id] = e
    return np.array(start, dtype=float), np.array(end, dtype=float)
