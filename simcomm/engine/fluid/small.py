"""The fluid core's scalar twin for networks with few live flows.

:class:`~simcomm.engine.fluid.core.FluidCore` keeps flows in numpy arrays; each of
its events is a few dozen numpy calls (tens of µs) however few flows are live.
A chain of single messages (the per-tensor parameter server: one push and one
pull live at a time, 3 events per message) pays that cost ~10^6 times.
:class:`SmallFlows` holds the same state in Python lists and dicts and runs the
same algorithm, operation for operation, in scalar floats (the scalar kernels of
:class:`~simcomm.engine.fluid.maxmin.IncrementalSolve`, the one re-solve): the same pruned
routes (dominance counted over every flow present, gone ones included, until
the same compaction), the same re-solve set, the same per-link sums taken in
the same entry order, the same local-minimum rounds, the same ``rem``,
``t_ref`` and ``t_next`` updates.  IEEE-754 double arithmetic on Python floats
is the arithmetic numpy applies element-wise, so every float, every statistic
and every event is bit-for-bit the vectorised core's (docs/engine.md, "The
scalar core for few flows"; tests/engine/test_engine_small.py compares them).

The core switches to this form when it is empty and back to arrays when a
merge would bring more than ``max_live`` live flows (default :data:`MAX_LIVE`).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from simcomm.engine.fluid.maxmin import RESOLVE_MARGIN, IncrementalSolve, maxmin_small

__all__ = ["SmallFlows", "MAX_LIVE"]

#: Live flows above which the arrays (one numpy call per operation) beat Python loops: the default of
#: ``EngineOptions.max_live`` (a run's value reaches the core as its ``max_live``; this is read nowhere else).
MAX_LIVE = 16
LATENCY, BANDWIDTH = 0, 1
_INF = math.inf
_SLOT_FIELDS = ("rem", "t_ref", "rate", "t_bw", "t_next", "phase", "batch", "index", "route", "row")


def _floats(a) -> list:
    return a.tolist() if isinstance(a, np.ndarray) and a.dtype == np.float64 else np.asarray(a, float).tolist()


def _ints(a) -> list:
    return a.tolist() if isinstance(a, np.ndarray) and a.dtype.kind == "i" else np.asarray(a, np.int64).tolist()


def split_routes(route_len, links) -> list[tuple]:
    """A batch's concatenated routes (``links``, ``route_len`` links each) as one tuple per flow."""
    flat, routes, pos = _ints(links), [], 0
    for k in _ints(route_len):
        routes.append(tuple(flat[pos:pos + k]))
        pos += k
    return routes


class SmallFlows(IncrementalSolve):
    """The live state of a :class:`FluidCore` in Python lists (live slots in slot order)."""

    def __init__(self, core):
        self.core = core
        self.cap = core._cap_list()
        self.rank = core._rank_list()
        self.rem: list[float] = []
        self.t_ref: list[float] = []
        self.rate: list[float] = []
        self.t_bw: list[float] = []
        self.t_next: list[float] = []
        self.phase: list[int] = []
        self.batch: list[int] = []
        self.index: list[int] = []
        self.route: list[tuple] = []
        self.row: list[tuple] = []
        self.gone_routes: list[tuple] = []  # routes of finished flows still counted by the pruning
        self.count: Counter = Counter()     # link -> entries of present flows crossing it
        self.together: Counter = Counter()  # (link, lower-ranked link) -> position pairs of present routes
        self.load: dict = {}      # link -> sum of rates of bandwidth-phase flows (pruned routes)
        self.nflows: dict = {}    # link -> bandwidth-phase flows (pruned routes)
        self._info: dict = core.route_info  # route -> (pair keys, per position: (link, keys to lower-ranked links))

    @property
    def n_slots(self) -> int:
        return len(self.rem) + len(self.gone_routes)

    # ---- pruning ---------------------------------------------------------
    def _route_info(self, route: tuple):
        info = self._info.get(route)
        if info is None:
            rank = self.rank
            pairs = []
            for p in range(len(route)):
                for q in range(p + 1, len(route)):
                    a, b = route[p], route[q]
                    if a != b:
                        pairs.append((a, b) if rank[b] < rank[a] else (b, a))
            checks = tuple((x, tuple((x, y) for y in set(route) if rank[y] < rank[x])) for x in route)
            info = self._info[route] = (tuple(pairs), checks)
        return info

    def _count(self, route: tuple) -> None:
        self.count.update(route)
        self.together.update(self._route_info(route)[0])

    def _prune(self, route: tuple) -> tuple:
        """The non-dominated links of ``route`` (prune.route_matrix's row, unpadded)."""
        count, together = self.count, self.together
        out = []
        for x, keys in self._route_info(route)[1]:
            cx = count[x]
            for key in keys:
                if together.get(key, 0) == cx:
                    break
            else:
                out.append(x)
        return tuple(out)

    # ---- state changes ---------------------------------------------------
    def merge(self, parts, t: float) -> int:
        """Append pending batches (FluidCore._merge); return the number of flows added.

        Returns -1, changing nothing, when a route crosses a link twice: prune.route_matrix
        counts such a route's link pairs once per position pair, which this form does not
        repeat, so those flows stay with the arrays.
        """
        count, together, info = self.count, self.together, self._info
        batches = []
        for bid, idx, rem, t_bw, route_len, links in parts:
            routes = split_routes(route_len, links)
            if any(len(set(route)) != len(route) for route in routes):
                return -1
            batches.append((bid, _ints(idx), _floats(rem), _floats(t_bw), routes))
        added = 0
        for bid, idx, rem, t_bw, routes in batches:
            added += self._append(t, bid, idx, rem, t_bw, routes)
            for route in routes:
                count.update(route)
                hit = info.get(route)
                together.update((hit or self._route_info(route))[0])
        # Rows of every live flow over the flows present, then loads and counts rebuilt on them.
        self.row = row = [self._prune(r) for r in self.route]
        load: dict[int, float] = {}
        nflows: dict[int, int] = {}
        for i, ph in enumerate(self.phase):
            if ph == BANDWIDTH:
                r = self.rate[i]
                for link in row[i]:
                    load[link] = load.get(link, 0.0) + r
                    nflows[link] = nflows.get(link, 0) + 1
        self.load, self.nflows = load, nflows
        return added

    def _append(self, t: float, bid: int, idx: list, rem: list, t_bw: list, routes: list) -> int:
        """Append one batch's flows (in their latency phase from ``t``); returns how many."""
        n = len(rem)
        self.rem += rem
        self.t_ref += [t] * n
        self.rate += [0.0] * n
        self.t_bw += t_bw
        self.t_next += t_bw
        self.phase += [LATENCY] * n
        self.batch += [bid] * n
        self.index += idx
        self.route += routes
        return n

    def compact(self) -> None:
        """Forget finished flows (FluidCore._compact): the pruning counts only the live ones."""
        self.gone_routes = []
        self.count, self.together = Counter(), Counter()
        for r in self.route:
            self._count(r)

    def _record_finished(self, gone: list, now: float, done_batches: list) -> None:
        """Write ``now`` as the finish of the flows ``gone``; batches left with no live flow are done."""
        core = self.core
        batch, index, finish, left = self.batch, self.index, core._finish, core._left
        if len(gone) == 1:
            i = gone[0]
            b = batch[i]
            finish[b][index[i]] = now
            left[b] -= 1
            if left[b] == 0:
                del left[b]
                done_batches.append(b)
            return
        per: dict = {}
        for i in gone:
            per.setdefault(batch[i], []).append(index[i])
        for b in sorted(per):
            fin = finish[b]
            for i in per[b]:  # (one by one: a message round's finish is a list, FluidCore.add_messages)
                fin[i] = now
            left[b] -= len(per[b])
            if left[b] == 0:
                del left[b]
                done_batches.append(b)

    def due(self, now: float, tol: float, first: bool) -> tuple[list, list]:
        """``(finishing, entering)`` slots at ``now``, in slot order: FluidCore.settle's due test.

        On the ``first`` pass of an instant, flows due within the resolution of their own
        duration finish now too (counted in ``merged``, with those found late).  Shared by
        the general scalar form and the lean one (:mod:`simcomm.engine.fluid.lone`).
        """
        lim = now + tol
        t_next, phase = self.t_next, self.phase
        gone: list = []
        enter: list = []
        if first:
            core = self.core
            res = core.resolution
            lo = now - tol
            early = late = 0
            for i, (t, ph, tb) in enumerate(zip(t_next, phase, self.t_bw, strict=False)):
                if t <= lim:
                    if ph:  # BANDWIDTH (the slots hold no GONE flow between passes)
                        gone.append(i)
                        if t < lo:
                            late += 1
                    else:
                        enter.append(i)
                elif ph and t - now <= res * (t - tb):
                    gone.append(i)
                    early += 1
            if early or late:
                core.merged += early + late
        else:
            for i, t in enumerate(t_next):
                if t <= lim:
                    (gone if phase[i] else enter).append(i)
        return gone, enter

    def step(self, now: float, tol: float, first: bool, done_batches: list) -> bool:
        """One pass of FluidCore.settle's loop; False when nothing is due.

        The same pass in every scalar form: the lean one (:mod:`simcomm.engine.fluid.lone`)
        replaces only two kernels of the re-solve (:meth:`_rates_gone_entered` and
        :meth:`_new_rates`) and which per-slot lists a removal shortens (:meth:`_slot_fields`).
        """
        gone, enter = self.due(now, tol, first)
        if not gone and not enter:
            return False
        t_next, phase = self.t_next, self.phase
        if gone:
            self._record_finished(gone, now, done_batches)
            for i in gone:
                phase[i] = 2  # GONE until the solve below has used its rate and row
                t_next[i] = _INF
            self.core.n_live -= len(gone)
        if enter:
            t_ref = self.t_ref
            for i in enter:
                phase[i] = BANDWIDTH
                t_ref[i] = now
                t_next[i] = _INF
        self.resolve(now, gone, enter)
        if gone:
            self._remove(gone)
        return True

    def _slot_fields(self) -> tuple[str, ...]:
        """The per-slot lists of this form (a removal shortens each)."""
        return _SLOT_FIELDS

    def _release(self, route: tuple | None) -> None:
        """A finished flow's ``route`` leaves (None: every live flow's); the general form keeps no link set."""

    def _remove(self, gone: list) -> None:
        """Drop the finished slots ``gone`` (their routes stay counted by the pruning until a compaction)."""
        route = self.route
        names = self._slot_fields()
        if len(gone) == len(route):
            self.gone_routes.extend(route)
            self._release(None)
            for name in names:
                setattr(self, name, [])
        else:
            lists = [getattr(self, name) for name in names]
            for i in reversed(gone):
                self.gone_routes.append(route[i])
                self._release(route[i])
                for lst in lists:
                    del lst[i]

    # ---- the scalar kernels of the incremental re-solve (IncrementalSolve) ----
    def _resolve_set(self, threshold: float, enter: list) -> tuple[list, bool]:
        core = self.core
        core.solves += 1
        rate = self.rate
        bar = threshold * RESOLVE_MARGIN
        live = []
        slots = []
        for i, ph in enumerate(self.phase):
            if ph == BANDWIDTH:
                live.append(i)
                if rate[i] >= bar or i in enter:
                    slots.append(i)
        if core.solves % core._refresh == 0 or len(slots) == len(live):
            return live, True
        return slots, False

    def _apply(self, slots: list, rates: list, now: float) -> None:
        rem, t_ref, t_next, rate = self.rem, self.t_ref, self.t_next, self.rate
        for i, r in zip(slots, rates, strict=False):
            x = rem[i] - rate[i] * (now - t_ref[i])
            rem[i] = x
            t_ref[i] = now
            rate[i] = r
            t_next[i] = now + ((x / r if r else _INF) if x > 0 else 0.0)  # div(x, r) for x > 0

    def _rates_gone_entered(self, gone: list, enter: list) -> tuple[float, dict | None]:
        """The threshold T of the re-solve, and what the flows that left took from each link.

        Zeroes the rates of ``gone`` and moves the per-link flow counts; a running minimum
        is numpy's min for these NaN-free floats.
        """
        rate, row, nflows, cap = self.rate, self.row, self.nflows, self.cap
        threshold = _INF
        left: dict | None = None
        if gone:
            left = {}
            for i in gone:
                r = rate[i]
                if r < threshold:
                    threshold = r
                for link in row[i]:
                    nflows[link] -= 1
                    left[link] = left.get(link, 0.0) + r
                rate[i] = 0.0
        if enter:
            for i in enter:
                for link in row[i]:
                    nflows[link] = nflows.get(link, 0) + 1
            for i in enter:
                for link in row[i]:
                    share = cap[link] / nflows[link]  # the count includes this flow: >= 1
                    if share < threshold:
                        threshold = share
        return threshold, left

    def _new_rates(self, slots: list, full: bool, left: dict | None) -> list | None:
        """The max-min rates of ``slots`` on the capacity the other flows leave (None: no slot),
        with the per-link loads moved to them (:func:`~simcomm.engine.fluid.maxmin.maxmin_small`)."""
        core = self.core
        load, cap, rate, row = self.load, self.cap, self.rate, self.row
        if left is not None and not (full and slots):
            for link, v in left.items():
                load[link] = load.get(link, 0.0) - v
        if not slots:
            return None
        entries = [row[i] for i in slots]
        if full:
            core.full_solves += 1
            old: dict | None = None
            residual = cap
        else:
            old = {}
            for i, e in zip(slots, entries, strict=False):
                r = rate[i]
                for link in e:
                    old[link] = old.get(link, 0.0) + r
            residual = {link: cap[link] - (load.get(link, 0.0) - v) for link, v in old.items()}
        rates, rounds = maxmin_small(entries, residual)
        core.rounds += rounds
        new: dict = {}
        for r, e in zip(rates, entries, strict=False):
            for link in e:
                new[link] = new.get(link, 0.0) + r
        if full:
            self.load = new
        else:
            assert old is not None  # filled above whenever the update is not a full rebuild
            for link, v in new.items():
                load[link] = load.get(link, 0.0) - old[link] + v
        return rates

    # ---- queries ---------------------------------------------------------
    def next_time(self, resolution: float) -> float:
        """FluidCore.next_time in one pass over the slots (the same group, span and latency-phase bound)."""
        t_next = self.t_next
        t_min = min(t_next)
        if resolution <= 0:
            return t_min
        top = None  # the group's latest finish
        lat = None  # the earliest bandwidth-phase start
        for t, tb, ph in zip(t_next, self.t_bw, self.phase, strict=False):
            if ph == BANDWIDTH:
                if t - t_min <= resolution * (t - tb) and (top is None or t > top):
                    top = t
            elif lat is None or t < lat:
                lat = t
        if top is None:
            return t_min
        t_e = 0.5 * (t_min + top)
        if lat is not None and lat < t_e:
            t_e = lat
        return t_e

    def sample(self, family: np.ndarray, n_families: int) -> np.ndarray:
        fam = [0.0] * n_families
        for i, ph in enumerate(self.phase):
            if ph == BANDWIDTH:
                r = self.rate[i]
                for link in self.route[i]:
                    f = int(family[link])
                    fam[f] = fam[f] + r
        return np.array(fam)

    def bytes_left(self, bid: int, index: int, at: float) -> float:
        for i, (b, j) in enumerate(zip(self.batch, self.index, strict=False)):
            if b == bid and j == index:
                if self.phase[i] == BANDWIDTH:
                    return max(float(self.rem[i] - self.rate[i] * (at - self.t_ref[i])), 0.0)
                return float(self.rem[i])
        return 0.0

    def snapshot(self, at: float):
        rem = [x - (r * (at - tr) if ph == BANDWIDTH else 0.0)
               for x, r, tr, ph in zip(self.rem, self.rate, self.t_ref, self.phase, strict=False)]
        return (np.array(self.index, dtype=np.int64), np.maximum(np.array(rem, dtype=float), 0.0),
                np.array(self.t_bw, dtype=float), np.array([ph == BANDWIDTH for ph in self.phase], dtype=bool))

    def arrays(self):
        """The state as FluidCore's per-slot arrays (finished flows first, then live in slot order)."""
        n_gone = len(self.gone_routes)
        routes = self.gone_routes + self.route
        gone_f = [0.0] * n_gone
        fields = {
            "rem": gone_f + self.rem, "t_ref": gone_f + self.t_ref, "rate": gone_f + self.rate,
            "t_bw": gone_f + self.t_bw, "t_next": [_INF] * n_gone + self.t_next,
        }
        out = {k: np.array(v, dtype=float) for k, v in fields.items()}
        out["phase"] = np.array([2] * n_gone + self.phase, dtype=np.int8)
        out["batch"] = np.array([-1] * n_gone + self.batch, dtype=np.int64)
        out["index"] = np.array([-1] * n_gone + self.index, dtype=np.int64)
        lens = np.array([len(r) for r in routes], dtype=np.int64)
        out["e_len"] = lens
        out["e_start"] = np.cumsum(lens) - lens
        e_link = np.array([x for r in routes for x in r], dtype=np.int64)
        return out, e_link
