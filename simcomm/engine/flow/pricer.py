"""The ``flow`` fidelity: collectives run step by step as max-min fair flows.

A collective runs its algorithm's bulk-synchronous steps in order.  All
transfers of a step start together as one batch of flows; the step ends when
its last transfer has arrived and every receiving rank has reduced what it got
(``gamma`` seconds per byte on that rank's device); then the next step starts.

Coalesced repeats (``coalesce=True``, the default): when a step repeats r > 1
times and the network is idle, the step is priced once *alone* (a private
fluid run) and the network is reserved for r times that period.  With nothing
else on the network every repeat is the same isolated run, so this is the plain
model's answer.  If other traffic arrives during the reservation, the plain
model is resumed exactly: the repeats already complete are kept, the current
repeat's state at the interruption (bytes left and phase of every flow) is
rebuilt by re-running it alone up to that offset, its live flows join the
shared network, and the remaining repeats run plainly.  A single *scalable*
step (same bytes and route latency on every transfer, no reduction: the
pairwise steps of an all-to-all) is reserved the same way, its isolated time
scaled from one run of the same pattern at another size (see :func:`simcomm.engine.flow.steps._scalable`).
A large step whose every link carries transfers of one size (NCCL's all-to-all: relayed in-node shares on
NVLink, rail messages on the network) is reserved for its closed form, the fluid model's answer for it
alone (see :func:`~simcomm.engine.flow.closed.closed_period`; a step of blocks of pairs from its pair counts,
:func:`~simcomm.engine.flow.closed.counted_step`).

Per-link reservations (the default; the ``per_link`` reference turns them off): a step is reserved when
none of its own links carries a live flow or is held by another reservation,
not only on an idle network; traffic interrupts only the reservations whose
links it shares.  The whole-network rule is kept when link usage is recorded
(its samples are totals of the live network, which a concurrent reservation's
replay would overwrite); with ``comm_cpu`` nothing is reserved (every repeat runs
as flows, whose bytes its per-rank counts follow).  Which rule runs is
the run's ``paths.pricing`` (:func:`simcomm.engine.paths.choose`).

Link usage (engine option ``record_link_usage``): the live network samples
bytes/s per link family at every settle; a reservation has no live flows, so
its isolated run's samples are replayed, shifted to each repeat, up to where
the reservation ended or was interrupted.
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives.base import Step
from simcomm.engine.flow.closed import Unrouted, count_bytes, routed_now
from simcomm.engine.flow.network import LiveNetwork
from simcomm.engine.flow.steps import _KEPT_STEPS, StepDerivation
from simcomm.engine.fluid.core import run_isolated
from simcomm.engine.schedule import RoutedStep, message_routes, route_step

__all__ = ["FlowPricer"]

#: What :meth:`FlowPricer.reserved` yields where :meth:`FlowPricer.collective` waits for the end of the instant.
UNTIL_LATE = "until late"
#: A scalable step's isolated run is reused for other sizes only if its bandwidth phase is at least
#: this share of its duration (else the phase is lost to rounding and the step is run alone again).
_RESOLVED = 1e-6


class FlowPricer(StepDerivation):
    """Prices Transfers and Collectives on a shared :class:`LiveNetwork` (each collective's routed steps from
    :class:`~simcomm.engine.flow.steps.StepDerivation`)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.env = ctx.env
        self.fam = ctx.family_of_link if ctx.record_usage else None
        paths = ctx.paths
        self.form = paths.core  # the fluid core's form, for the shared network and every isolated run
        self.max_live = paths.max_live
        self.scaled = paths.scaled  # reuse a scalable step's isolated run for other sizes
        self.closed_from = paths.closed_from  # steps of this many transfers and one size per link: closed form
        self.net = LiveNetwork(ctx.env, ctx.topology.capacity, self.form, self.fam, ctx.resolution,
                               per_link=paths.pricing == "per-link", max_live=self.max_live,
                               sparse_links=ctx.sparse_links)
        self._routes: dict = {}  # routes per (group, step pattern), see route_step
        # (src, dst) -> (route latency, route tuple, [(family, links of it)], links) of a message (add_messages)
        self.messages: dict = {}
        self._periods: dict = {}  # isolated durations (and usage) of scalable step patterns
        self._alike: dict = {}  # isolated runs of disjoint-route steps by what they depend on (see _alike_key)
        self.shapes = paths.shapes  # (off with the ``shapes`` reference: every group's step run alone on its own)
        # steps of alike groups derived once (off with the ``alike_steps`` reference: each derived anew)
        self.alike_steps = paths.alike_steps
        self._patterns: dict = {}  # (group, src, dst) -> [signature, routes, held links] (see _pattern)
        self._templates: dict = {}  # (id of preparation, step, signature) -> a derived step (see _translated)
        self._held_of: dict = {}  # id of a step's routes -> (the routes, their held links), see _held
        self._moved: np.ndarray | None = None  # per-rank bytes of finished flows (comm_cpu only)
        self._moving: dict[int, list] = {}  # rank -> [(batch id, index, bytes)] still in flight
        self._used = False  # whether any transfer or collective ran (finish_stats)
        self._shapes: dict = {}  # (group, preparation) -> its routed steps (see _steps)
        # ... and those of small preparations from earlier runs on this topology with the same settings (the
        # executor keeps those preparations, the same objects, so their ids stay theirs: each entry holds it),
        # with the isolated runs of their steps (id of a kept routed step -> (it, its run), see _isolated_period)
        kept = (_KEPT_STEPS.setdefault(ctx.topology, {}).setdefault(
            (paths.pricing, self.closed_from, ctx.link_bytes, ctx.per_link is None, self.form, self.fam is None,
             ctx.resolution, self.max_live), ({}, {})) if paths.keep else None)
        self._kept_steps: dict | None = None if kept is None else kept[0]
        self._kept_runs: dict | None = None if kept is None else kept[1]

    @property
    def live_merged(self) -> int:
        """Flows the shared network retired at a merged event (engine option ``resolution``)."""
        return self.net.core.merged

    def track_ranks(self) -> None:
        """Count the bytes each rank sends or receives (for the ``comm_cpu`` option)."""
        self._moved = np.zeros(self.ctx.topology.n_ranks)
        # a reservation has no flows to count: paths.choose runs every repeat as flows (plain pricing)
        assert not self.net.per_link

    def rank_bytes(self, rank: int) -> float:
        """Bytes ``rank`` has sent plus received so far, on the shared network (exact, mid-flow too).

        Every repeat of a collective counts: with ``comm_cpu`` nothing is reserved or
        coalesced (docs/engine.md, "CPU cost of communication").
        """
        assert self._moved is not None  # track_ranks() came first (comm_cpu > 0)
        done = float(self._moved[rank])
        for bid, idx, nbytes in self._moving.get(rank, ()):
            done += nbytes - self.net.core.bytes_left(bid, idx, self.env.now)
        return done

    @property
    def usage(self) -> list:
        """Recorded link usage blocks (see :func:`simcomm.engine.fluid.core.merge_usage`)."""
        return self.net.core.usage

    def finish_stats(self) -> None:
        """Copy the network's counters into the run's statistics (once, after the run)."""
        if not self._used:
            return
        st = self.ctx.stats
        st["network_settles"] = self.net.settles
        st["maxmin_solves"] = self.net.core.solves
        st["maxmin_rounds"] = self.net.core.rounds
        st["reservation_interrupts"] = self.net.interrupts

    def add_messages(self, pairs) -> None:
        """Work out what pricing a message needs of each route of ``pairs`` ((src, dst) of the plan's Transfers)
        in one pass (:func:`~simcomm.engine.schedule.message_routes`) instead of a few numpy calls per message:
        crossover-sgd at 16 384 GPUs sends ~3 x 10^5 messages between as many distinct pairs."""
        ctx = self.ctx
        todo = [key for key in dict.fromkeys(pairs) if key not in self.messages]
        if todo:
            self.messages.update(message_routes(todo, ctx.topology, ctx.family_of_link, len(ctx.families)))

    # ---- ops -------------------------------------------------------------
    def transfer(self, op):
        ctx = self.ctx
        if self._moved is not None:  # comm_cpu follows each rank's bytes: the general step path
            group = np.array([op.src, op.dst], dtype=np.int64)
            routed = route_step(ctx.topology, group, Step.make([0], [1], op.nbytes), ctx.gamma)
            ctx.count_bytes(routed, 1, ctx.weight(op.stream))
            self._used = True
            yield from self._run_step(routed)
            return
        # One message: the same flow as a one-transfer step, without building one per message
        # (gossip plans hold tens of thousands); its route's latency, links and families come from
        # add_messages (all of a plan's pairs at once), or are worked out here for a pair not seen.
        hit = self.messages.get((op.src, op.dst))
        if hit is None:
            self.add_messages([(op.src, op.dst)])
            hit = self.messages[(op.src, op.dst)]
        latency, route, fam, links = hit
        if ctx.link_bytes and fam:
            # ctx.family_bytes += n * (links of each family), element by element: the same floats (a family
            # the route does not cross would add n x 0.0, which changes nothing)
            w = ctx.weight(op.stream)
            counted = op.nbytes if w is None else op.nbytes * w
            fbytes = ctx.family_bytes
            for f, x in fam:
                fbytes[f] += counted * x
            if ctx.per_link is not None:  # the busiest links count messages as Context.count_bytes counts steps
                np.add.at(ctx.per_link, links, float(op.nbytes))
        ctx.stats["steps_simulated"] += 1
        self._used = True
        fin = yield self.net.add_message(float(op.nbytes), self.env.now + latency, route, links)
        if fin[0] > self.env.now:
            yield self.env.timeout(float(fin[0]) - self.env.now)

    def collective(self, op, prep):
        ctx = self.ctx
        self._used = True
        w = ctx.weight(op.stream)
        for routed, skey, held, fbytes, closed in self._steps(op, prep):
            if fbytes is not None:
                ctx.family_bytes += (routed.repeat if w is None else routed.repeat * w) * fbytes
            elif ctx.link_bytes:
                count_bytes(ctx, routed, routed.repeat, w)
            left = routed.repeat
            period = profile = None
            while left > 0:
                if closed is not None and (self.fam is not None or self._moved is not None):
                    closed = None  # link usage and per-rank bytes follow flows: run it as flows
                if held is not None and (left > 1 or skey is not None or closed is not None) \
                        and self.net.free(held):
                    res = None
                    if self.net.per_link:
                        # Hold the links and price the step only at the end of this instant: traffic
                        # starting now on them (a rank's other streams, often) takes them back for free.
                        res = self.net.hold(held)
                        yield self.net.late()
                        if res.event.triggered:  # taken back before anything ran: run this repeat live
                            yield from self._run_step(routed_now(routed))
                            left -= 1
                            continue
                    if period is None and closed is not None:
                        period = self._closed_step(closed, isinstance(routed, Unrouted))
                    elif period is None:
                        period, profile = self._isolated_period(routed_now(routed), skey)
                    if period <= 0.0:  # nothing to wait for in any repeat
                        if res is not None:
                            self.net.release(res)
                        ctx.stats["steps_coalesced"] += left
                        ctx.took("coalesced_steps", left)
                        break
                    t0 = self.env.now
                    res = self.net.reserve(period, left) if res is None else self.net.start(res, period, left)
                    outcome = yield res.event
                    if profile is not None:
                        self._replay(profile, t0, period, left if outcome is None else outcome[0],
                                     None if outcome is None else outcome[1])
                    if outcome is None:
                        ctx.stats["steps_coalesced"] += left
                        ctx.took("coalesced_steps", left)
                        break
                    k, offset = outcome
                    ctx.stats["steps_coalesced"] += k
                    ctx.took("coalesced_steps", k)
                    left -= k
                    yield from self._run_step(routed_now(routed), resume=offset)
                else:
                    yield from self._run_step(routed_now(routed))
                left -= 1

    def reservable(self, op, prep) -> list | None:
        """:meth:`_steps` of ``op`` when :meth:`collective` would reserve every step of it on free links (each
        repeated, scalable or closed, with its held links and, when bytes are counted, its bytes per family):
        what :meth:`reserved` runs; else None."""
        ctx = self.ctx
        if not self.net.per_link or self.fam is not None or self._moved is not None or ctx.per_link is not None:
            return None
        entries = self._steps(op, prep)
        for routed, skey, held, fbytes, closed in entries:
            if held is None or not (routed.repeat > 1 or skey is not None or closed is not None) \
                    or (fbytes is None and ctx.link_bytes):
                return None
        return entries

    def reserved(self, op, entries, add_bytes):
        """:meth:`collective` of ``op`` (its :meth:`reservable` steps) when nothing else ever takes its links, as
        the direct loop drives it: it yields :data:`UNTIL_LATE` where :meth:`collective` holds the links and waits for the
        end of the instant, and ``(period, repeats)`` where it reserves them (the reservation's timer is due at
        ``now + ((now + repeats x period) - now)``, :meth:`LiveNetwork.start`); bytes per family go to
        ``add_bytes(times, family bytes)``.  The same statistics and pricing calls in the same order, so the
        same floats (the ``local_collectives`` reference runs :meth:`collective` on SimPy's queue)."""
        ctx = self.ctx
        self._used = True
        w = ctx.weight(op.stream)
        for routed, skey, _held, fbytes, closed in entries:
            left = routed.repeat
            if fbytes is not None:
                add_bytes(left if w is None else left * w, fbytes)
            yield UNTIL_LATE
            if closed is not None:
                period = self._closed_step(closed, isinstance(routed, Unrouted))
            else:
                period, _ = self._isolated_period(routed_now(routed), skey)
            if not period <= 0.0:  # (as collective(): nothing to wait for when it is)
                yield period, left
            ctx.stats["steps_coalesced"] += left
            ctx.took("coalesced_steps", left)

    # ---- steps -----------------------------------------------------------
    def _closed_step(self, period: float, counted: bool) -> float:
        """A step priced alone by its closed form (:mod:`simcomm.engine.flow.closed`): counted, its ``period`` returned
        (``counted``: its link loads came from pair counts, :func:`~simcomm.engine.flow.closed.counted_step`)."""
        self.ctx.stats["steps_closed"] += 1
        self.ctx.took("closed_steps")
        if counted:
            self.ctx.took("pair_counts")
        return period

    def _isolated_period(self, routed: RoutedStep, skey=None):
        """``(duration, usage profile or None)`` of one run of ``routed`` alone on the network.

        A *scalable* step (see :func:`~simcomm.engine.flow.steps._scalable`) seen before with another byte
        count is not run again: alone, its rates do not depend on the bytes, so
        its bandwidth phase lasts ``bytes / bytes0`` times as long (and so do the
        instants of its usage profile after the latency; the rates are the same).
        """
        n = float(routed.nbytes[0]) if len(routed) else 0.0
        hit = self._periods.get(skey) if skey is not None else None
        if hit is not None:
            n0, lat, d0, prof = hit
            self.ctx.stats["isolated_scaled"] += 1
            self.ctx.took("scaled_runs")
            if prof is not None:
                t, f = prof
                prof = (np.where(t > lat, lat + (t - lat) * (n / n0), t), f)
            return lat + (d0 - lat) * (n / n0), prof
        alike = self._alike_key(routed)
        ran = self._alike.get(alike) if alike is not None else None
        kept = self._kept_runs.get(id(routed)) if ran is None and self._kept_runs is not None else None
        if kept is not None and kept[0] is routed:
            ran = kept[1]  # this very step's run alone, from an earlier run on the topology (None: not yet)
            if ran is not None and alike is not None:
                self._alike[alike] = ran
        if ran is None:
            iso = run_isolated(self.net.core.capacity, routed.nbytes, routed.latency, routed.route_len,
                               routed.links, form=self.form, family_of_link=self.fam,
                               resolution=self.ctx.resolution, max_live=self.max_live, shared=self.net.core)
            prof = None
            if self.fam is not None:
                prof = (np.concatenate([b[0] for b in iso.usage]), np.concatenate([b[1] for b in iso.usage]))
            ran = (routed.end_time(0.0, iso.finish), prof, iso.solves, iso.merged)
            if alike is not None:
                self._alike[alike] = ran
            if kept is not None and kept[0] is routed and self._kept_runs is not None:
                self._kept_runs[id(routed)] = (routed, ran)
        # (a run an alike step stood in for counts as that step's own run: the statistics are the reference's)
        period, prof, solves, merged = ran
        self.ctx.stats["isolated_runs"] += 1
        self.ctx.stats["isolated_solves"] += solves
        if merged:
            self.ctx.stats["merged_flows"] += merged
        lat = float(routed.latency[0]) if len(routed) else 0.0
        # Kept for scaling only if its bandwidth phase is resolved in floats: a few bytes on a fast link
        # (or a subnormal byte count) leave period - latency at a few ulps or zero, and scaling that to
        # another size would be wrong (0 x inf = NaN for subnormal bytes; the latency alone otherwise).
        if skey is not None and self.scaled and period - lat >= _RESOLVED * period:
            self._periods[skey] = (n, lat, period, prof)
        return period, prof

    def _alike_key(self, routed: RoutedStep) -> tuple | None:
        """What an isolated run of ``routed`` depends on when it runs in the lean form, else None.

        The lean form (:mod:`simcomm.engine.fluid.lone`) runs a batch of at most ``max_live`` flows whose
        routes are pairwise disjoint (no link crossed twice) as a closed form per flow: its rate is the
        smallest capacity on its route, and every float after that is per flow slot, in slot order, at the
        batch's own event times; link ids enter only as set members.  So two such steps with the same bytes,
        latencies, route lengths, capacities (and link families, when usage is recorded) and reductions,
        position by position, run to the same floats on any links: one machine's step stands for the same
        step on every alike machine.  A step of more than ``max_live`` flows has the key of
        :meth:`_relabelled_key` instead.  Exact; the ``shapes`` reference runs each alone.
        """
        if not self.shapes:
            return None
        if len(routed) > self.max_live:
            return self._relabelled_key(routed)
        if self.form != "lean" or not len(routed):
            return None
        links, lens = routed.links, routed.route_len
        if not lens.min() > 0 or len(np.unique(links)) != len(links):
            return None
        cap = self.net.core.capacity
        return (lens.tobytes(), cap[links].tobytes(), routed.nbytes.tobytes(), routed.latency.tobytes(),
                None if self.fam is None else self.fam[links].tobytes(), routed.red_slot.tobytes(),
                routed.red_seconds.tobytes())

    def _relabelled_key(self, routed: RoutedStep) -> tuple | None:
        """What an isolated run of ``routed`` depends on when it runs on the core's arrays: its flows with
        each link relabelled by its rank among the links the step crosses, and those links' capacities in
        id order (None when usage is recorded, or the core is the plain reference).

        A run of more than ``max_live`` flows alone lives in the core's arrays from its one merge on, and there
        a link id is only ever compared with another (the pruning's ranks by (capacity, id), its pair codes and
        every ``np.unique``, all in id order; the padding link, ``len(capacity)``, above every one) or used to
        look up its capacity or per-link sums (each added in entry order, whatever the id).  A relabelling
        that keeps the crossed links' order and capacities therefore leaves every float of the run as it
        was: two steps with one key run to the same floats on their own links (hierarchical-allreduce's 8
        lanes' trees at 16 384 GPUs, two keys: ranks 0-3 and 4-7 of each machine).  Exact; the ``shapes``
        reference runs each alone; tests/engine/test_engine_relabelled_runs.py runs relabelled steps.
        """
        if self.fam is not None or self.form not in ("lean", "scalar", "numpy"):
            return None
        links, capacity = routed.links, self.net.core.capacity
        if len(links) * 4 < len(capacity):  # (a few links: a sort of them)
            uniq, code = np.unique(links, return_inverse=True)
        else:  # np.unique's sorted ids and inverse from a mask over every link (no sort of 10^5-10^6 crossings)
            mark = np.zeros(len(capacity), dtype=bool)
            mark[links] = True
            uniq = np.flatnonzero(mark)
            code = (np.cumsum(mark) - 1)[links]
        return ("relabelled", routed.route_len.tobytes(), code.astype(np.intp).tobytes(), capacity[uniq].tobytes(),
                routed.nbytes.tobytes(), routed.latency.tobytes(), routed.red_slot.tobytes(),
                routed.red_seconds.tobytes())

    def _replay(self, profile, t0: float, period: float, k: int, offset: float | None) -> None:
        """Record the usage of ``k`` whole repeats from ``t0``, then of the next one up to ``offset``."""
        t, f = profile
        if k:
            starts = t0 + period * np.arange(k)
            self.usage.append(((starts[:, None] + t[None, :]).ravel(), np.tile(f, (k, 1))))
        if offset is not None:
            part = t < offset  # the live network records the interrupted repeat from the interruption on
            self.usage.append((t0 + k * period + t[part], f[part]))

    def _run_step(self, routed: RoutedStep, resume: float | None = None):
        """Run one repeat of ``routed`` on the shared network (``resume``: seconds already run)."""
        self.ctx.stats["steps_simulated"] += 1
        now = self.env.now
        if resume is None:
            t_start = now
            ev = self.net.add(routed.nbytes.copy(), now + routed.latency, routed.route_len, routed.links)
            if self._moved is None:
                fin = yield ev
            else:
                fin = yield from self._tracked(ev, routed)
        else:
            t_start = now - resume
            st = run_isolated(self.net.core.capacity, routed.nbytes, routed.latency, routed.route_len,
                              routed.links, until=resume, form=self.form,
                              resolution=self.ctx.resolution, max_live=self.max_live, shared=self.net.core)
            fin = t_start + st.finish
            if st.merged:
                self.ctx.stats["merged_flows"] += st.merged
            if np.isnan(fin).any():
                fin = yield self.net.add(st.rem, t_start + st.t_bw, routed.route_len, routed.links,
                                         finish=fin)
        end = routed.end_time(t_start, fin)
        if end > self.env.now:
            yield self.env.timeout(end - self.env.now)

    def _tracked(self, ev, routed: RoutedStep):
        """Wait for batch ``ev`` while its transfers count toward their ranks' bytes."""
        bid = ev.batch
        items = [(int(r), (bid, i, float(routed.nbytes[i]))) for i in range(len(routed))
                 for r in {int(routed.src[i]), int(routed.dst[i])}]
        for r, item in items:
            self._moving.setdefault(r, []).append(item)
        fin = yield ev
        moved = self._moved
        assert moved is not None  # this path runs only while ranks are tracked
        for r, item in items:
            self._moving[r].remove(item)
            moved[r] += item[2]
        return fin
