"""The fluid (flow-level) network state, free of any event library.

A *flow* carries bytes over a route of directed links.  It first spends the
route's summed per-hop latency in a *latency phase* (holding no bandwidth),
then a *bandwidth phase* in which it drains at its max-min fair rate.  Rates
are recomputed whenever the set of flows in the bandwidth phase changes, so
between two events every rate is constant and every flow's finish time is
``t + remaining / rate``.  Only flows whose rate can change are re-solved at an
event (:meth:`FluidCore._solve` explains why that is exact).

:class:`FluidCore` keeps all flows in flat numpy arrays (structure of arrays)
and is driven by two calls: :meth:`FluidCore.settle` brings the state to time
``t`` and reports batches whose flows have all finished, and
:meth:`FluidCore.next_time` says when the next flow changes phase.  With a
``resolution`` ε > 0, completions that lie within ε of the finishing flows' own
transfer times are merged into one event at the middle of their span
(:meth:`FluidCore.next_time`; docs/engine.md, "Event resolution").  The live
engine (:mod:`simcomm.engine.flow.network`) drives it from SimPy; :func:`run_isolated`
drives it alone, to price a step pattern once or to rebuild the state of a
partly run step (see docs/engine.md, "Coalesced repeats").  While at most
``max_live`` flows are live the state lives in Python lists instead
(:mod:`simcomm.engine.fluid.small`, and :mod:`simcomm.engine.fluid.lone` while live routes are
disjoint), run by the same arithmetic bit for bit: numpy's per-call cost dominates
events on a handful of flows.  Which forms a core may take is its ``form``
(:data:`FORMS`), chosen for a run by :func:`simcomm.engine.paths.choose`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain
from typing import Any, NamedTuple

import numpy as np

from simcomm.engine.fluid.lone import LoneFlows
from simcomm.engine.fluid.maxmin import RESOLVE_MARGIN, IncrementalSolve, maxmin_rates, maxmin_rates_global
from simcomm.engine.fluid.prune import KeptRouteMatrix, link_rank
from simcomm.engine.fluid.small import MAX_LIVE, SmallFlows

__all__ = ["FluidCore", "IsolatedState", "run_isolated", "merge_usage", "TIME_TOL", "FORMS"]

#: Two instants within this relative distance are the same event.  It only
#: absorbs floating-point rounding (``t + (u - t)`` need not equal ``u``).
TIME_TOL = 1e-12

#: The forms of the core, fastest first: ``lean`` (scalar, with the lean form while live routes are
#: disjoint), ``scalar`` (Python floats while at most ``max_live`` flows are live), ``numpy`` (arrays
#: throughout), ``plain`` (arrays, every flow re-solved by the textbook solver: the reference).
FORMS = ("lean", "scalar", "numpy", "plain")
#: Flow phases.
LATENCY, BANDWIDTH, GONE = 0, 1, 2
#: Every this many solves, all flows are re-solved and the link loads rebuilt
#: from scratch, so incremental updates cannot accumulate rounding.
_REFRESH = 64

#: an event's flows that left (or entered) touch their links alone when their crossings times this are fewer than
#: the links (a per-entry update beats a pass over every link there); more crossings: one array over every link
_SPARSE_LINKS = 8

_EMPTY_F = np.zeros(0)
_EMPTY_I = np.zeros(0, dtype=np.int64)
_NAN1 = np.full(1, np.nan)


class _MessageBlock(NamedTuple):
    """A round of messages queued by :meth:`FluidCore.add_messages` as one entry: batches ``first``, ``first + 1``,
    ... of one flow each (``nbytes[i]`` over ``routes[i]``, bandwidth phase from ``t_bw[i]``).  ``[1]`` is a list
    of one entry per flow, as a batch's flow indices are (what counts the queued flows reads)."""

    first: int
    nbytes: list
    t_bw: list
    routes: list


def _blocks_split(parts: list) -> list:
    """``parts`` with each :class:`_MessageBlock` as its one-message entries (:meth:`FluidCore.add_message`'s
    form), in order; a lone block is kept as it is (``_merge`` reads it directly)."""
    if len(parts) == 1:
        return parts
    out: list = []
    for p in parts:
        if type(p) is _MessageBlock:
            out.extend((bid, (0,), (nb,), (tb,), (len(route),), route) for bid, nb, tb, route in
                       zip(range(p.first, p.first + len(p.routes)), p.nbytes, p.t_bw, p.routes, strict=True))
        else:
            out.append(p)
    return out


def _unique_inverse(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, return_inverse=True)`` of a non-empty 1-d integer array, in fewer steps."""
    order = np.argsort(a, kind="stable")
    s = a[order]
    first = np.empty(len(s), dtype=bool)
    first[0] = True
    np.not_equal(s[1:], s[:-1], out=first[1:])
    inv = np.empty(len(a), dtype=np.intp)
    inv[order] = np.cumsum(first) - 1
    return s[first], inv


class FluidCore(IncrementalSolve):
    """All active flows of one network, advanced event by event.

    Flows live in flat arrays indexed by *slot*; a finished flow's slot is
    only marked gone and the arrays are compacted when most slots are gone,
    so an event costs O(live flows) numpy work plus the incidence entries of
    the flows whose rate may change.  Each flow keeps its bytes left ``rem`` as
    of ``t_ref``, the time its rate last changed.
    """

    _FIELDS = ("rem", "t_ref", "rate", "t_bw", "t_next", "phase", "batch", "index", "e_start", "e_len")
    _refresh = _REFRESH

    def __init__(self, capacity: np.ndarray, form: str = "lean", family_of_link: np.ndarray | None = None,
                 resolution: float = 0.0, max_live: int = MAX_LIVE, sparse_links: bool = True):
        if form not in FORMS:
            raise ValueError(f"form: unknown {form!r}; valid choices: {', '.join(FORMS)}")
        self.capacity = np.asarray(capacity, dtype=float)
        self.form = form
        self.max_live = max_live  # live flows up to which a scalar form holds the state
        incremental = self.incremental = form != "plain"  # plain: every flow, textbook solver, every event
        self.resolution = float(resolution)  # 0: every completion is its own event (exact)
        self.t = 0.0
        self.rem = _EMPTY_F      # bytes left as of t_ref
        self.t_ref = _EMPTY_F    # when rem was last brought up to date
        self.rate = _EMPTY_F     # bytes/s (0 while in the latency phase or gone)
        self.t_bw = _EMPTY_F     # absolute start of the bandwidth phase
        self.t_next = _EMPTY_F   # next phase change: t_bw, projected finish, or inf when gone
        self.phase = np.zeros(0, dtype=np.int8)  # LATENCY, BANDWIDTH or GONE
        self.batch = _EMPTY_I    # owning batch id
        self.index = _EMPTY_I    # position inside its batch
        self.e_start = _EMPTY_I  # first entry of the flow's route in e_link
        self.e_len = _EMPTY_I
        self.e_link = _EMPTY_I   # concatenated routes of all slots
        # Incremental solves work on the route matrix (non-dominated links per slot, padded with
        # the dummy link n_links; simcomm.engine.fluid.prune), so the per-link state has one more entry.
        self.rows = np.zeros((0, 1), dtype=np.int64)
        n_links = len(self.capacity) + (1 if incremental else 0)
        self.link_load = np.zeros(n_links)                 # sum of rates of bandwidth-phase flows
        self.link_count = np.zeros(n_links, dtype=np.int64)  # bandwidth-phase flows per link
        self._scratch: np.ndarray | None = None  # zeros between events: the sums of an event's links (_rates_gone_entered)
        # an event's few crossings update their links alone (_rates_gone_entered); 0: never (the ``sparse_links``
        # reference: one array over every link at every event)
        self._sparse = _SPARSE_LINKS if sparse_links else 0
        self._rank: np.ndarray | None = None  # links by (capacity, id), for pruning (prune.link_rank)
        self._pruned = KeptRouteMatrix()  # the route matrix's pair counts, kept from merge to merge
        # Link usage, recorded only when a family per link is given: blocks of samples
        # (times, bytes/s per family), see :func:`merge_usage`.
        self.family_of_link = None if family_of_link is None else np.asarray(family_of_link, dtype=np.int64)
        self.n_families = int(self.family_of_link.max()) + 1 if self.family_of_link is not None \
            and len(self.family_of_link) else 0
        self.usage: list[tuple[np.ndarray, np.ndarray]] = []
        self.n_live = 0
        self._pending: list[tuple] = []
        self._finish: dict[int, np.ndarray] = {}  # (a one-element list for add_messages' batches)
        self._left: dict[int, int] = {}
        self._next_id = 0
        self._born_done: list[int] = []
        self.solves = 0
        self.rounds = 0
        self.full_solves = 0
        self.merged = 0  # flows retired at a merged event, not at their own finish instant
        # The scalar twin (simcomm.engine.fluid.small) holds the state while few flows are live;
        # the numpy form keeps the arrays throughout (the reference the tests compare against).
        self.use_small = form in ("lean", "scalar")
        self._small: SmallFlows | None = None
        self._caps: list | None = None
        self._ranks: list | None = None
        self.route_info: dict = {}  # pruning data per route, shared by the scalar twin's sessions
        self.route_min: dict = {}  # route -> (its links, smallest capacity), shared by the lean form's sessions

    def share_constants(self, other: FluidCore) -> None:
        """Use ``other``'s per-link constants: the links' ranks for pruning, capacities and ranks as lists,
        and the pruning data and smallest capacity per route, all functions of the capacities alone.

        A step run alone on a network of 10^5 links (:func:`run_isolated`) recomputed them per run: a sort
        and two lists of every link, ~20 ms, for a step of a few flows (node-based at 16 384 GPUs: 4 096
        runs, most of its time).  Same values, so the same floats.
        """
        if other.capacity is not self.capacity and not np.array_equal(other.capacity, self.capacity):
            return
        self._caps, self._ranks, self._rank = other._cap_list(), other._rank_list(), other._rank
        self.route_info = other.route_info
        self.route_min = other.route_min  # the lean form's per-route minima
        self._sparse = other._sparse  # an isolated run updates its links as the shared network does

    def _cap_list(self) -> list:
        if self._caps is None:
            self._caps = self.capacity.tolist()
        return self._caps

    def _rank_list(self) -> list:
        if self._ranks is None:
            if self._rank is None:
                self._rank = link_rank(self.capacity)
            self._ranks = self._rank.tolist()
        return self._ranks

    # ---- input -----------------------------------------------------------
    def add(self, rem: np.ndarray, t_bw: np.ndarray, route_len: np.ndarray, links: np.ndarray,
            finish: np.ndarray | None = None) -> int:
        """Queue a batch of flows (taking effect at the next :meth:`settle`); return its id.

        ``route_len[i]`` links of ``links`` (concatenated routes) belong to flow i.
        ``finish`` pre-fills finish times of flows that are already done (NaN = not).
        """
        bid = self._next_id
        self._next_id += 1
        n = len(rem)
        if finish is None and n:  # every flow still to run
            self._finish[bid] = np.full(n, np.nan)
            self._left[bid] = n
            self._pending.append((bid, np.arange(n), rem, t_bw, route_len, links))
            return bid
        fin = np.full(n, np.nan) if finish is None else np.array(finish, dtype=float)
        alive = np.isnan(fin)
        self._finish[bid] = fin
        self._left[bid] = int(alive.sum())
        if not alive.any():
            del self._left[bid]
            self._born_done.append(bid)
        elif alive.all():
            self._pending.append((bid, np.arange(n), rem, t_bw, route_len, links))
        else:
            # Keep only the live flows, and only their part of the incidence list.
            owner = np.repeat(np.arange(n), route_len)
            keep = alive[owner]
            self._pending.append((bid, np.flatnonzero(alive), rem[alive], t_bw[alive],
                                  route_len[alive], links[keep]))
        return bid

    def add_message(self, nbytes: float, t_bw: float, route: tuple) -> int:
        """Queue one flow of ``nbytes`` over ``route`` (a tuple of link ids); return its batch id.

        The same as :meth:`add` of a one-flow batch, given Python scalars and the route's
        tuple instead of arrays (a plan of messages adds hundreds of thousands of them).
        """
        bid = self._next_id
        self._next_id += 1
        self._finish[bid] = _NAN1.copy()
        self._left[bid] = 1
        self._pending.append((bid, [0], [nbytes], [t_bw], [len(route)], route))
        return bid

    def add_messages(self, nbytes: list, t_bw: list, routes: list) -> int:
        """:meth:`add_message` of each ``(nbytes[i], t_bw[i], routes[i])`` in turn, in one call (a round of
        messages that start at one instant: the direct loop's message rounds); the first batch id (they are
        consecutive).  Each batch's finish is a one-element list, not an array: the direct loop, the one caller,
        reads it as a Python float (the same float), and a round of 16 384 messages makes no 16 384 arrays."""
        first = self._next_id
        self._next_id = first + len(routes)
        finish, left, append, nan = self._finish, self._left, self._pending.append, math.nan
        if len(routes) > self.max_live:
            # more than the scalar forms ever hold: one queued block (_MessageBlock), which only _merge's
            # arrays read (a round of 16 384 messages makes no 16 384 queued tuples)
            if len(nbytes) != len(routes) or len(t_bw) != len(routes):
                raise ValueError("add_messages: nbytes, t_bw and routes differ in length")
            finish.update(zip(range(first, self._next_id), ([nan] for _ in routes), strict=True))  # type: ignore[misc]
            left.update(dict.fromkeys(range(first, self._next_id), 1))
            append(_MessageBlock(first, nbytes, t_bw, routes))
            return first
        for bid, nb, tb, route in zip(range(first, self._next_id), nbytes, t_bw, routes, strict=True):
            finish[bid] = [nan]  # type: ignore[assignment]  # (read as fin[0], as an array would be)
            left[bid] = 1
            append((bid, (0,), (nb,), (tb,), (len(route),), route))  # (one-element tuples: read as add_message's lists)
        return first

    @property
    def empty(self) -> bool:
        return self.n_live == 0 and not self._pending and not self._born_done

    def settle_next(self, now: float) -> tuple[list[tuple[int, np.ndarray]], float]:
        """:meth:`settle` at ``now``, then :meth:`next_time`: what the live network does at each event.

        In the scalar twin's lean form (simcomm.engine.fluid.lone) with at most one message queued
        this is one call into it instead of several layers; the same steps either way.
        """
        sm = self._small
        if sm is not None and sm.__class__ is LoneFlows and sm.lean and not self._born_done \
                and self.family_of_link is None:
            pend = self._pending
            if not pend or (len(pend) == 1 and len(pend[0]) == 6 and type(pend[0][5]) is tuple
                            and self.n_live < self.max_live):
                if now.__class__ is not float:
                    now = float(now)
                # settle's tolerance (TIME_TOL * max(|now|, 1e-300)), without the calls when now > 1e-300
                out = sm.settle_next(now, TIME_TOL * (now if now > 1e-300 else max(abs(now), 1e-300)))
                if out is not None:
                    return out
        done = self.settle(now)
        return done, self.next_time()

    def next_time(self) -> float:
        """Absolute time of the next phase change, ``inf`` when nothing is active."""
        if self.n_live == 0:
            return self.t if (self._pending or self._born_done) else np.inf
        if self._small is not None:
            return self._small.next_time(self.resolution)
        t_min = float(self.t_next.min())
        if self.resolution <= 0:
            return t_min
        # Completions due within ε of their own bandwidth-phase duration after the first
        # one form a group; one event at the middle of the group's span retires them all
        # (settle), so finish times move by at most half the span, early or late.  A
        # flow entering its bandwidth phase is never moved: the event stops at it.
        group = (self.phase == BANDWIDTH) & (self.t_next - t_min <= self.resolution * (self.t_next - self.t_bw))
        if not group.any():
            return t_min
        t_e = 0.5 * (t_min + float(self.t_next[group].max()))
        lat = self.phase == LATENCY
        if lat.any():
            t_e = min(t_e, float(self.t_next[lat].min()))
        return t_e

    # ---- progress --------------------------------------------------------
    def settle(self, now: float) -> list[tuple[int, np.ndarray]]:
        """Advance to ``now``; return ``(batch id, finish times)`` of batches that completed."""
        now = float(now)
        tol = TIME_TOL * max(abs(now), 1e-300)
        self.t = now
        done_batches, self._born_done = self._born_done, []
        if self._pending:
            self._merge()
        sm = self._small
        if sm is not None:
            return self._settle_small(now, tol, done_batches)  # sm.step dispatches to the lean form itself
        first = self.resolution > 0
        while self.n_live:
            due = self.t_next <= now + tol
            if first:
                # The event's own group (see next_time): flows that would finish within ε of
                # their duration after now finish now.  Only on the first pass: re-applying it
                # after the re-solve below would chain early finishes within one instant.
                first = False
                early = (self.phase == BANDWIDTH) & ~due & \
                    (self.t_next - now <= self.resolution * (self.t_next - self.t_bw))
                late = (self.phase == BANDWIDTH) & (self.t_next < now - tol)
                self.merged += int(early.sum() + late.sum())
                due |= early
            hit = np.flatnonzero(due)
            if hit.size == 0:
                break
            ph = self.phase[hit]
            gone, enter = hit[ph == BANDWIDTH], hit[ph == LATENCY]
            if gone.size:
                self._retire(gone, now, done_batches)
            if enter.size:
                self.phase[enter] = BANDWIDTH
                self.t_ref[enter] = now
                self.t_next[enter] = np.inf
            self._solve(now, gone, enter)
        if (self.n_live == 0 and len(self.rem)) or 2 * self.n_live < len(self.rem) - 4096:
            self._compact()
        if self.family_of_link is not None:
            self._sample(now)
        return [(b, self._finish.pop(b)) for b in done_batches]

    def _settle_small(self, now: float, tol: float, done_batches: list[int]) -> list[tuple[int, np.ndarray]]:
        """settle's loop, compaction and sample on the scalar twin (the same steps, see settle)."""
        sm = self._small
        assert sm is not None  # settle() calls this only while the scalar twin holds the flows
        first = self.resolution > 0
        lim = now + tol
        while self.n_live:
            # (a pass finds nothing due exactly when no t_next is within tol: skip the call)
            if not first and min(sm.t_next) > lim:
                break
            if not sm.step(now, tol, first, done_batches):
                break
            first = False
        n_slots = len(sm.rem) + len(sm.gone_routes)
        if (self.n_live == 0 and n_slots) or 2 * self.n_live < n_slots - 4096:
            sm.compact()
        if self.family_of_link is not None:
            self.usage.append((np.array([now]), sm.sample(self.family_of_link, self.n_families)[None, :]))
        return [(b, self._finish.pop(b)) for b in done_batches]

    def _retire(self, gone: np.ndarray, now: float, done_batches: list[int]) -> None:
        # The finished flows grouped by batch, batches taken in id order (a batch is done at its last flow:
        # done_batches in id order); one flow at a time, without a list per batch (a gossip round retires
        # thousands of one-flow batches at once).
        batch = self.batch[gone]
        order = np.argsort(batch, kind="stable")
        finish, left = self._finish, self._left
        for b, i in zip(batch[order].tolist(), self.index[gone][order].tolist(), strict=True):
            finish[b][i] = now
            n = left[b] - 1
            if n:
                left[b] = n
            else:
                del left[b]
                done_batches.append(b)
        self.phase[gone] = GONE
        self.t_next[gone] = np.inf
        self.n_live -= len(gone)

    def _merge(self) -> None:
        if self.use_small:
            n_new = sum(len(p[1]) for p in self._pending)
            if self._small is None and len(self.rem) == 0 and n_new <= self.max_live:
                # an empty network starts in scalar form
                self._small = LoneFlows(self) if self.form == "lean" else SmallFlows(self)
            if self._small is not None:
                if self.n_live + n_new <= self.max_live:
                    added = self._small.merge(self._pending, self.t)
                    if added >= 0:
                        self._pending = []
                        self.n_live += added
                        return
                self._from_small()  # too many flows, or a route that crosses a link twice
        parts, self._pending = self._pending, []
        n0, e0 = len(self.rem), len(self.e_link)
        if any(type(p) is _MessageBlock for p in parts):
            parts = _blocks_split(parts)
        if len(parts) == 1 and type(parts[0]) is _MessageBlock:
            # one round of messages (add_messages): the block's lists as arrays, the same values as the
            # one-message parts below make
            block = parts[0]
            lens = np.fromiter(map(len, block.routes), dtype=np.int64, count=len(block.routes))
            t_bw = np.array(block.t_bw, dtype=float)
            rem = np.array(block.nbytes, dtype=float)
            batch = np.arange(block.first, block.first + len(block.routes), dtype=np.int64)
            index = np.zeros(len(block.routes), dtype=np.int64)
            links = np.fromiter(chain.from_iterable(block.routes), dtype=np.int64, count=int(lens.sum()))
        elif all(type(p[5]) is tuple for p in parts):
            # messages alone (add_message: one flow each, Python scalars): one array per field, not one per
            # message and field (crossover-sgd at 16 384 GPUs merges 16 384 at once); the same values
            lens = np.array([len(p[5]) for p in parts], dtype=np.int64)
            t_bw = np.array([p[3][0] for p in parts], dtype=float)
            rem = np.array([p[2][0] for p in parts], dtype=float)
            batch = np.array([p[0] for p in parts], dtype=np.int64)
            index = np.zeros(len(parts), dtype=np.int64)
            links = np.fromiter(chain.from_iterable(p[5] for p in parts), dtype=np.int64, count=int(lens.sum()))
        else:
            lens = np.concatenate([np.asarray(p[4], dtype=np.int64) for p in parts])
            t_bw = np.concatenate([np.asarray(p[3], dtype=float) for p in parts])
            rem = np.concatenate([np.asarray(p[2], dtype=float) for p in parts])
            batch = np.repeat(np.array([p[0] for p in parts], dtype=np.int64), [len(p[1]) for p in parts])
            index = np.concatenate([np.asarray(p[1], dtype=np.int64) for p in parts])
            links = np.concatenate([np.asarray(p[5], dtype=np.int64) for p in parts])
        total = len(lens)
        starts = e0 + np.concatenate(([0], np.cumsum(lens)[:-1]))
        new = {
            "rem": rem,
            "t_ref": np.full(total, self.t), "rate": np.zeros(total), "t_bw": t_bw, "t_next": t_bw.copy(),
            "phase": np.full(total, LATENCY, dtype=np.int8),
            "batch": batch, "index": index, "e_start": starts, "e_len": lens,
        }
        for name in self._FIELDS:  # (no copy into an empty core: the new arrays are fresh)
            setattr(self, name, np.concatenate((getattr(self, name), new[name])) if n0 else new[name])
        prev = self.e_link
        self.e_link = np.concatenate((self.e_link, links)) if e0 else links
        self.n_live += total
        assert len(self.rem) == n0 + total
        if self.incremental:
            # Dominance is recomputed over every slot present; containment of flow sets
            # survives flows leaving, so it stays valid until the next merge.
            if self._rank is None:
                self._rank = link_rank(self.capacity)
            self.rows = self._pruned.rows(self.capacity, prev, self.e_link, self.e_len, self._rank)
            # Links kept or dropped may differ from before: rebuild the per-link state on the new rows.
            on = self.rows[self.phase == BANDWIDTH]
            n_ext, width = len(self.link_load), self.rows.shape[1]
            self.link_count = np.bincount(on.ravel(), minlength=n_ext)
            # (numpy's stubs type every bincount as integer; with weights it is float64)
            self.link_load = np.bincount(on.ravel(), weights=np.repeat(self.rate[self.phase == BANDWIDTH], width),  # type: ignore[assignment]
                                         minlength=n_ext)

    def _from_small(self) -> None:
        """Move the scalar twin's state into the arrays (the merge that follows rebuilds rows and loads)."""
        assert self._small is not None
        fields, e_link = self._small.arrays()
        self._small = None
        for name, value in fields.items():
            setattr(self, name, value)
        self.e_link = e_link
        self.rows = np.zeros((len(self.rem), 1), dtype=np.int64)

    def _compact(self) -> None:
        """Drop gone slots (and their entries); slot order is kept."""
        keep = self.phase != GONE
        ent = self._entries(np.flatnonzero(keep))
        for name in self._FIELDS:
            setattr(self, name, getattr(self, name)[keep])
        self.e_link = self.e_link[ent]
        self.e_start = np.cumsum(self.e_len) - self.e_len
        if self.incremental:
            self.rows = self.rows[keep]

    def _sample(self, now: float) -> None:
        """Record bytes/s per link family: each flow's rate times the links of that family it crosses."""
        fam = np.zeros(self.n_families)
        if self.n_live:
            assert self.family_of_link is not None  # sampling is on only with a family map
            on = np.flatnonzero(self.phase == BANDWIDTH)
            links = self.e_link[self._entries(on)]
            fam = np.bincount(self.family_of_link[links], weights=np.repeat(self.rate[on], self.e_len[on]),  # type: ignore[assignment]
                              minlength=self.n_families)
        self.usage.append((np.array([now]), fam[None, :]))

    def _entries(self, slots: np.ndarray) -> np.ndarray:
        """Positions in e_link of the routes of ``slots``, concatenated in slot order."""
        lens = self.e_len[slots]
        if len(lens) == 0:
            return _EMPTY_I
        shift = np.repeat(self.e_start[slots] - (np.cumsum(lens) - lens), lens)
        return shift + np.arange(int(lens.sum()))

    def _solve(self, now: float, gone: np.ndarray, enter: np.ndarray) -> None:
        """Re-solve max-min after ``gone`` left and ``enter`` began their bandwidth phase.

        The incremental re-solve (:class:`~simcomm.engine.fluid.maxmin.IncrementalSolve`, which
        says why it is exact) on the route matrix :attr:`rows` (dominated links dropped, which
        leaves the allocation unchanged: simcomm.engine.fluid.prune); the plain form re-solves
        every flow on its full route with the textbook solver.
        """
        if not self.incremental:
            self._solve_plain(now, gone)
            return
        self.resolve(now, gone, enter)

    # ---- the numpy kernels of the incremental re-solve (IncrementalSolve) ----
    def _rates_gone_entered(self, gone: np.ndarray, enter: np.ndarray) -> tuple[float, Any]:
        n_ext = len(self.link_load)
        width = self.rows.shape[1]
        threshold = np.inf
        left: Any = None  # what the flows that left took from each link (not needed if the loads are rebuilt below)
        if gone.size:
            threshold = float(self.rate[gone].min())
            g = self.rows[gone].ravel()
            if len(g) * self._sparse < n_ext:
                left = self._gone_sparse(gone, g, n_ext, width)
            else:
                self.link_count -= np.bincount(g, minlength=n_ext)
                left = np.bincount(g, weights=np.repeat(self.rate[gone], width), minlength=n_ext)
            self.rate[gone] = 0.0
        if enter.size:
            ee = self.rows[enter].ravel()
            if len(ee) * self._sparse < n_ext:
                np.add.at(self.link_count, ee, 1)
            else:
                self.link_count += np.bincount(ee, minlength=n_ext)
            ee = ee[ee < len(self.capacity)]
            if ee.size:
                with np.errstate(divide="ignore"):
                    threshold = min(threshold, float((self.capacity[ee] / self.link_count[ee]).min()))
        return threshold, left

    def _gone_sparse(self, gone: np.ndarray, g: np.ndarray, n_ext: int, width: int) -> tuple:
        """The links the flows ``gone`` crossed (``g``) and each one's sum of their rates, counts taken off.

        Few crossings among many links: only the links crossed are touched (two arrays over every link,
        131 265 at 16 384 GPUs, cost a fresh allocation each at every event).  ufunc.at adds in entry order
        from 0.0 as bincount does, so each link's sum is the same float; _new_rates subtracts it from the
        links crossed alone, and an untouched link's load - 0.0 is its load.
        """
        np.subtract.at(self.link_count, g, 1)
        scratch = self._scratch
        if scratch is None or len(scratch) != n_ext:
            scratch = self._scratch = np.zeros(n_ext)
        np.add.at(scratch, g, np.repeat(self.rate[gone], width))
        left = (g, scratch[g])  # (each entry: its link's sum; a link crossed twice repeats it)
        scratch[g] = 0.0
        return left

    def _resolve_set(self, threshold: float, enter: np.ndarray) -> tuple[np.ndarray, bool]:
        self.solves += 1
        live = self.phase == BANDWIDTH
        # A relative margin keeps flows whose rate equals the threshold up to rounding in the re-solve.
        resolve = live & (self.rate >= threshold * RESOLVE_MARGIN)
        resolve[enter] = True
        if self.solves % self._refresh == 0 or resolve.sum() == live.sum():
            return np.flatnonzero(live), True
        return np.flatnonzero(resolve), False

    def _new_rates(self, slots: np.ndarray, full: bool, left: Any) -> np.ndarray | None:
        width = self.rows.shape[1]
        if left is not None and not (full and slots.size):  # a full re-solve rebuilds every load
            if type(left) is tuple:  # the links crossed and each one's sum (_rates_gone_entered)
                crossed, sums = left
                self.link_load[crossed] = self.link_load[crossed] - sums
            else:
                self.link_load -= left
        if slots.size == 0:
            return None
        flat = self.rows[slots].ravel()
        # Only the links these flows cross are solved and updated, numbered in id order as
        # maxmin_rates would number them itself (the padding link, the largest id, comes last
        # if present): per-link sums are the same, in the same entry order, and the loads of
        # other links are left as they are, so an event costs no work per link of the network.
        links, inv = _unique_inverse(flat)
        k = len(links) - int(links[-1] == len(self.capacity))
        if full:
            self.full_solves += 1
            residual = self.capacity[links[:k]]
        else:
            old = np.bincount(inv, weights=np.repeat(self.rate[slots], width))
            residual = self.capacity[links[:k]] - (self.link_load[links[:k]] - old[:k])
        real = flat != len(self.capacity)
        owner = np.repeat(np.arange(len(slots)), width)[real]
        # maxmin_rates on the crossed links alone, numbered as it would number them itself.
        rates, rounds = maxmin_rates(owner, inv[real], len(slots), residual)
        self.rounds += rounds
        new = np.bincount(inv, weights=np.repeat(rates, width))
        if full:
            self.link_load = np.zeros(len(self.link_load))
            self.link_load[links] = new
        else:
            self.link_load[links] = self.link_load[links] - old + new
        return rates

    def _solve_plain(self, now: float, gone: np.ndarray) -> None:
        """The reference: every bandwidth-phase flow, full routes, the textbook solver."""
        self.rate[gone] = 0.0
        self.solves += 1
        self.full_solves += 1
        slots = np.flatnonzero(self.phase == BANDWIDTH)
        if slots.size == 0:
            return
        links = self.e_link[self._entries(slots)]
        owner = np.repeat(np.arange(len(slots)), self.e_len[slots])
        rates, rounds = maxmin_rates_global(owner, links, len(slots), self.capacity)
        self.rounds += rounds
        self._apply(slots, rates, now)

    def _apply(self, slots: np.ndarray, rates: np.ndarray, now: float) -> None:
        """Give ``slots`` their new ``rates`` from ``now`` (bytes left brought up to date first)."""
        rem = self.rem[slots] - self.rate[slots] * (now - self.t_ref[slots])
        self.rem[slots] = rem
        self.t_ref[slots] = now
        self.rate[slots] = rates
        with np.errstate(divide="ignore", invalid="ignore"):
            self.t_next[slots] = now + np.where(rem > 0, rem / rates, 0.0)

    def bytes_left(self, bid: int, index: int, at: float) -> float:
        """Bytes flow ``index`` of batch ``bid`` still has to send at ``at`` (0 once finished)."""
        for p in self._pending:  # queued, not merged yet: nothing sent
            if type(p) is _MessageBlock:
                if p.first <= bid < p.first + len(p.routes):
                    return float(p.nbytes[bid - p.first]) if index == 0 else 0.0
                continue
            if p[0] == bid:
                hit = np.flatnonzero(np.asarray(p[1]) == index)
                return float(np.asarray(p[2])[hit[0]]) if hit.size else 0.0
        if self._small is not None:
            return self._small.bytes_left(bid, index, at)
        slot = np.flatnonzero((self.batch == bid) & (self.index == index) & (self.phase != GONE))
        if slot.size == 0:
            return 0.0
        k = int(slot[0])
        if self.phase[k] == BANDWIDTH:
            return max(float(self.rem[k] - self.rate[k] * (at - self.t_ref[k])), 0.0)
        return float(self.rem[k])

    def snapshot(self, at: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(index, rem, t_bw, in_bw)`` of live flows at ``at`` (between events, no settle)."""
        if self._small is not None:
            return self._small.snapshot(at)
        live = self.phase != GONE
        in_bw = self.phase[live] == BANDWIDTH
        rem = self.rem[live] - np.where(in_bw, self.rate[live] * (at - self.t_ref[live]), 0.0)
        return self.index[live].copy(), np.maximum(rem, 0.0), self.t_bw[live].copy(), in_bw


@dataclass(frozen=True, eq=False)
class IsolatedState:
    """A batch run alone from time 0: finish times (NaN if still running at ``at``)
    and, for the flows still running, bytes left and bandwidth-phase start."""

    at: float
    finish: np.ndarray
    rem: np.ndarray
    t_bw: np.ndarray
    solves: int
    usage: tuple = ()  # link usage blocks when recorded (see FluidCore.usage)
    merged: int = 0    # flows retired at a merged event (FluidCore.merged)


def run_isolated(capacity: np.ndarray, nbytes: np.ndarray, latency: np.ndarray, route_len: np.ndarray,
                 links: np.ndarray, until: float = np.inf, form: str = "lean",
                 family_of_link: np.ndarray | None = None, resolution: float = 0.0,
                 max_live: int = MAX_LIVE, shared: FluidCore | None = None) -> IsolatedState:
    """Run one batch of flows, started at time 0, alone on an empty network (a core of ``form``).

    Stops at ``until`` (events at exactly ``until`` are applied) and reports the
    state there; with the default it runs to completion.  ``shared``: a core on the
    same capacities whose per-link constants are reused (:meth:`FluidCore.share_constants`).
    """
    core = FluidCore(capacity, form, family_of_link, resolution, max_live)
    if shared is not None:
        core.share_constants(shared)
    core.add(np.asarray(nbytes, float), np.asarray(latency, float), route_len, links)
    done = core.settle(0.0)
    while not done:
        t = core.next_time()
        if t > until or t == np.inf:
            break
        done = core.settle(t)
    n = len(nbytes)
    if done:
        core._small = None  # breaks the core <-> small-flows cycle: runs pause the collector (gcpause)
        return IsolatedState(core.t, done[0][1], np.zeros(n), np.zeros(n), core.solves, tuple(core.usage),
                             core.merged)
    idx, rem, t_bw, _ = core.snapshot(until)
    finish = core._finish[0].copy()
    core._small = None
    r = np.zeros(n)
    tb = np.zeros(n)
    r[idx] = rem
    tb[idx] = t_bw
    return IsolatedState(until, finish, r, tb, core.solves, tuple(core.usage), core.merged)


def merge_usage(blocks, families: tuple[str, ...]) -> list[tuple[float, str, float]]:
    """Usage blocks -> ``(time_s, family, bytes_per_s)`` rows, one per family whenever its value changes.

    Blocks are in the order they were recorded; at equal instants the sample
    recorded last holds (it saw every change of that instant).  Rows are sorted
    by time, then family.
    """
    if not blocks or not families:
        return []
    t = np.concatenate([b[0] for b in blocks])
    f = np.concatenate([b[1] for b in blocks])
    order = np.argsort(t, kind="stable")
    t, f = t[order], f[order]
    last = np.append(t[1:] != t[:-1], True)
    t, f = t[last], f[last]
    changed = np.vstack((np.ones((1, f.shape[1]), dtype=bool), f[1:] != f[:-1]))
    rows, cols = np.nonzero(changed)  # row-major: by time, then family
    return [(float(t[i]), families[j], float(f[i, j])) for i, j in zip(rows.tolist(), cols.tolist(), strict=False)]
