"""The scalar core's lean form while no two live flows share a link.

:class:`~simcomm.engine.fluid.small.SmallFlows` runs the array core's algorithm in
Python floats: pruning counts, per-link loads and flow counts, the
local-minimum solver.  While the routes of the live flows are pairwise
disjoint (no directed link crossed by two of them, none crossed twice by one),
all of that collapses to a closed form, operation for operation:

* a link's bandwidth-phase flow count is 0 or 1, and its load is exactly 0.0 or
  that one flow's rate (every load is rebuilt by a merge as ``0.0 + rate``, an
  update is ``load - old + new`` with ``old == load``, and ``r - r`` is 0.0), so
  every residual a re-solve sees is the link's capacity, ``cap - 0.0``;
* the solver then freezes every re-solved flow in its first round at the
  smallest capacity of its pruned row, which is the smallest capacity of its
  route (pruning never drops a route's tightest link): one round per solve;
* the threshold of the incremental rule is the smallest rate that left and of
  each new flow's share ``cap / 1``: again the smallest capacity of its route.

:class:`LoneFlows` keeps just that (the per-slot fields, the routes and their
smallest capacity) and runs the scalar form's pass and re-solve
(:meth:`SmallFlows.step`, :class:`~simcomm.engine.fluid.maxmin.IncrementalSolve`) with two
kernels of its own, the threshold and the rates above: the same re-solve sets, the same ``rem``,
``t_ref``, ``rate`` and ``t_next`` floats and the same ``solves``, ``rounds``
and ``full_solves`` counts.  A merge that would make two live routes share a
link (or a route cross a link twice) first rebuilds the general form's pruning
counts over the same flows (finished ones not yet compacted included) and
hands over to :class:`SmallFlows`' merge, which rebuilds rows, loads and flow
counts from scratch as it always does; a later merge whose live routes are
disjoint again returns to the lean form (that merge would rebuild the loads as
``0.0 + rate`` on disjoint rows, the state the lean form assumes).  The per-
tensor parameter server with one FIFO server (one push and one pull live at a
time on opposite directions of the server's links) runs entirely in the lean form
(docs/engine.md, "The lean form for disjoint routes").
"""

from __future__ import annotations

from collections import Counter

from simcomm.engine.fluid.maxmin import route_rate
from simcomm.engine.fluid.small import BANDWIDTH, LATENCY, SmallFlows, _floats, _ints, split_routes

__all__ = ["LoneFlows"]

_INF = float("inf")
#: the per-slot lists of the lean form (no pruned rows; each route's smallest capacity instead)
_LEAN_FIELDS = ("rem", "t_ref", "rate", "t_bw", "t_next", "phase", "batch", "index", "route", "mincap")


def _fl(a) -> list:
    return a if type(a) is list else _floats(a)


class LoneFlows(SmallFlows):
    """:class:`SmallFlows` with a lean form while the live routes are pairwise disjoint."""

    def __init__(self, core):
        super().__init__(core)
        self.lean = True
        self.busy: set = set()      # links crossed by live flows (lean form)
        self.mincap: list = []      # per slot: smallest capacity of its route (lean form)
        self._mins: dict = core.route_min  # route -> (links, smallest capacity)
        self._merged: tuple = ([], 0, [])  # finished flows' routes (list, count) and live routes at the last merge

    # ---- the general form's per-link state, derived in the lean form ------
    # The lean form needs no pruned rows, loads or flow counts; these properties give, when
    # asked (tests compare states), what the general form would hold: rows pruned over the
    # flows present at the last merge, loads 0.0 + rate on the rows of bandwidth-phase flows.
    @property
    def row(self) -> list:
        if not self.lean:
            return self._row
        gone, n, routes = self._merged
        saved = self.count, self.together
        self.count, self.together = Counter(), Counter()
        try:
            for r in gone[:n] + routes:
                self._count(r)
            return [self._prune(r) for r in self.route]
        finally:
            self.count, self.together = saved

    @row.setter
    def row(self, value: list) -> None:
        self._row = value

    @property
    def load(self) -> dict:
        if not self.lean:
            return self._load
        return {x: 0.0 + r for r, ph, row in zip(self.rate, self.phase, self.row, strict=False) if ph == BANDWIDTH for x in row}

    @load.setter
    def load(self, value: dict) -> None:
        self._load = value

    @property
    def nflows(self) -> dict:
        if not self.lean:
            return self._nflows
        return {x: 1 for ph, row in zip(self.phase, self.row, strict=False) if ph == BANDWIDTH for x in row}

    @nflows.setter
    def nflows(self, value: dict) -> None:
        self._nflows = value

    # ---- forms -----------------------------------------------------------
    def _to_general(self) -> None:
        """Rebuild the pruning counts over the flows present; rows and loads follow in merge."""
        self.lean = False
        self.count, self.together = Counter(), Counter()
        for r in self.gone_routes:
            self._count(r)
        for r in self.route:
            self._count(r)
        self.row = [()] * len(self.route)  # recomputed by SmallFlows.merge for every live flow

    def merge(self, parts, t: float) -> int:
        if self.lean and len(parts) == 1 and type(parts[0][5]) is tuple:
            # One message from FluidCore.add_message (Python scalars and the route's tuple).
            bid, _, rem, t_bw, _, route = parts[0]
            links, low = self._mins.get(route) or self._info_of(route)
            if links is not None and self.busy.isdisjoint(links):
                self.busy |= links
                self.rem.append(rem[0])
                self.t_ref.append(t)
                self.rate.append(0.0)
                self.t_bw.append(t_bw[0])
                self.t_next.append(t_bw[0])
                self.phase.append(LATENCY)
                self.batch.append(bid)
                self.index.append(0)
                self.route.append(route)
                self.mincap.append(low)
                self._merged = (self.gone_routes, len(self.gone_routes), self.route[:])
                return 1
        new = []
        if self.lean:
            busy = set(self.busy)
            ok = True
        else:  # the live routes themselves must be pairwise disjoint too
            busy = set().union(*self.route)
            ok = len(busy) == sum(len(r) for r in self.route)
        for bid, idx, rem, t_bw, route_len, links in parts:
            routes = split_routes(route_len, links)
            for route in routes:
                if ok:
                    s = set(route)
                    if not route or len(s) != len(route) or not busy.isdisjoint(s):
                        ok = False
                    else:
                        busy |= s
            new.append((bid, idx, rem, t_bw, routes))
        if not ok:
            if self.lean:
                self._to_general()
            return SmallFlows.merge(self, parts, t)
        if not self.lean:  # every live route disjoint again: the loads a merge rebuilds are 0.0 + rate
            self.lean = True
            self.mincap = [self._min(r) for r in self.route]
        self.busy = busy
        added = 0
        for bid, idx, rem, t_bw, routes in new:
            added += self._append(t, bid, _ints(idx) if type(idx) is not list else idx, _fl(rem), _fl(t_bw), routes)
            self.mincap += [self._min(r) for r in routes]
        self._merged = (self.gone_routes, len(self.gone_routes), self.route[:])
        return added

    def _info_of(self, route: tuple) -> tuple:
        """(the route's links as a frozenset, or None if it is empty or crosses a link twice; smallest capacity)."""
        hit = self._mins.get(route)
        if hit is None:
            links = frozenset(route)
            hit = self._mins[route] = (links if route and len(links) == len(route) else None,
                                       route_rate([self.cap[x] for x in route]))
        return hit

    def _min(self, route: tuple) -> float:
        return self._info_of(route)[1]

    def settle_next(self, now: float, tol: float):
        """FluidCore.settle then next_time with at most one queued message; None: use those instead."""
        core = self.core
        core.t = now
        pend = core._pending
        if pend:  # FluidCore._merge's scalar branch (the caller checked that the flow fits)
            added = self.merge(pend, now)
            if added < 0:
                return None  # a route crossing a link twice: FluidCore.settle moves the state to the arrays
            core._pending = []
            core.n_live += added
            if not self.lean:
                return core._settle_small(now, tol, []), core.next_time()
        # self.settle, inlined (no link usage here: the caller checked)
        done: list = []
        res = core.resolution
        n_live = core.n_live
        if n_live:
            lim = now + tol
            if n_live == 1 and res > 0:
                more = self._first_pass_of_one(now, tol, lim, res, done)
            else:
                more = self.step(now, tol, True, done) if res > 0 else True
            while more and core.n_live:
                t_next = self.t_next
                if (t_next[0] if len(t_next) == 1 else min(t_next)) > lim:
                    break
                more = self.step(now, tol, False, done)
            n_live = core.n_live
        n_slots = len(self.rem) + len(self.gone_routes)
        if (n_live == 0 and n_slots) or 2 * n_live < n_slots - 4096:
            self.gone_routes = []  # self.compact() in the lean form
        if done:
            finish = core._finish
            if len(done) == 1:  # (a comprehension costs a function call)
                b = done[0]
                done = [(b, finish.pop(b))]
            else:
                done = [(b, finish.pop(b)) for b in done]
        if n_live == 0:
            return done, _INF
        # self.next_time(res), inlined
        t_next = self.t_next
        if len(t_next) == 1:  # one flow: its next change; as its own group, at the group's middle 0.5 * (t + t)
            t = t_next[0]
            if res > 0 and self.phase[0] == BANDWIDTH and t - t <= res * (t - self.t_bw[0]):
                return done, 0.5 * (t + t)
            return done, t
        return done, self.next_time(res)

    def _first_pass_of_one(self, now: float, tol: float, lim: float, res: float, done_batches: list) -> bool:
        """:meth:`step`'s first pass (``first``, resolution ``res`` > 0) with one live flow, the FIFO chain's case.

        The same floats and counts as ``step``: a finishing flow leaves nothing to re-solve (a
        solve of no flow: no round, not a full solve); an entering one is re-solved alone (a full
        solve of one round, at its route's smallest capacity).
        """
        core = self.core
        t = self.t_next[0]
        if t <= lim:
            if not self.phase[0]:  # LATENCY: enters its bandwidth phase
                return self._enter_one(now)
            if t < now - tol:
                core.merged += 1  # late
        elif self.phase[0] and t - now <= res * (t - self.t_bw[0]):
            core.merged += 1  # early: within the resolution of its own duration
        else:
            return False
        # the one flow finishes (self._record_finished of one flow; then step's removal of every flow)
        b = self.batch[0]
        core._finish[b][self.index[0]] = now
        left = core._left
        left[b] -= 1
        if left[b] == 0:
            del left[b]
            done_batches.append(b)
        core.n_live -= 1
        core.solves += 1
        self.gone_routes.append(self.route[0])
        self.busy.clear()
        self.rem, self.t_ref, self.rate, self.t_bw, self.t_next = [], [], [], [], []
        self.phase, self.batch, self.index, self.route, self.mincap = [], [], [], [], []
        return True

    def _enter_one(self, now: float) -> bool:
        """The one live flow enters its bandwidth phase: re-solved alone (see :meth:`_first_pass_of_one`)."""
        core = self.core
        self.phase[0] = BANDWIDTH
        t_ref = self.t_ref
        t_ref[0] = now
        core.solves += 1
        core.full_solves += 1
        core.rounds += 1
        r = self.mincap[0]
        x = self.rem[0] - self.rate[0] * (now - t_ref[0])
        self.rem[0] = x
        self.rate[0] = r
        self.t_next[0] = now + ((x / r if r else _INF) if x > 0 else 0.0)  # maxmin.div for x > 0
        return True

    def compact(self) -> None:
        if self.lean:
            self.gone_routes = []
        else:
            SmallFlows.compact(self)

    # ---- the lean specialisation of SmallFlows.solve and its removal -------
    def _rates_gone_entered(self, gone: list, enter: list) -> tuple[float, dict | None]:
        """The threshold T on disjoint routes: the smallest rate that left and each new flow's
        share ``cap / 1`` (its route's smallest capacity); no per-link count or load to move."""
        if not self.lean:
            return SmallFlows._rates_gone_entered(self, gone, enter)
        rate = self.rate
        threshold = _INF
        for i in gone:
            r = rate[i]
            if r < threshold:
                threshold = r
            rate[i] = 0.0
        mincap = self.mincap
        for i in enter:
            m = mincap[i]
            if m < threshold:
                threshold = m
        return threshold, None

    def _new_rates(self, slots: list, full: bool, left: dict | None) -> list | None:
        """maxmin_small on disjoint routes (module docstring): residuals are capacities, one
        round, every re-solved flow at its route's smallest capacity."""
        if not self.lean:
            return SmallFlows._new_rates(self, slots, full, left)
        if not slots:
            return None
        core = self.core
        if full:
            core.full_solves += 1
        core.rounds += 1
        mincap = self.mincap
        return [mincap[i] for i in slots]

    def _slot_fields(self) -> tuple[str, ...]:
        return _LEAN_FIELDS if self.lean else SmallFlows._slot_fields(self)

    def _release(self, route: tuple | None) -> None:
        if route is None:
            self.busy.clear()
        else:
            self.busy.difference_update(route)
