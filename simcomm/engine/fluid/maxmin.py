"""Max-min fair bandwidth shares by progressive filling, vectorised with numpy.

Flows and links are joined by an incidence list in coordinate form: entry
``k`` says that flow ``nz_flow[k]`` crosses directed link ``nz_link[k]``.
Progressive filling raises every unfrozen flow's rate together; links fill
up, freeze the flows crossing them at the level reached, and the rest keep
rising.  :func:`maxmin_rates` saturates, in one round, every link whose fair
share ``remaining capacity / unfrozen flows`` is a *local* minimum: no larger
than the share of any other link crossed by one of its unfrozen flows.  Such a
link fills exactly at its current share (a link's share never decreases while
filling proceeds, so none of its flows can be frozen earlier elsewhere), so
all of them can be saturated at once.  The number of rounds is the depth of
the dependency chain between bottlenecks, not the number of distinct levels.
:func:`maxmin_rates_global` is the textbook variant (only the global minimum
per round), kept as the reference the tests compare against.  Each round is a
handful of ``bincount``/``reduceat`` calls over the incidence list, so the cost
is O(rounds x (entries + links)) with no per-flow Python loop.

This module is the one max-min algorithm of the engine.  Its fast forms are
specialisations of :func:`maxmin_rates`, operation for operation, so they give
its floats bit for bit: :func:`maxmin_small`, the same rounds in Python floats
for the fluid core's scalar form (a handful of flows, where numpy's per-call
cost dominates), and :func:`route_rate`, its closed form for flows that share no
link (the lean form, :mod:`simcomm.engine.fluid.lone`: every flow freezes in the first
round at its route's smallest capacity).  The incremental re-solve around them
(which flows to re-solve, on what residual capacity: ``FluidCore._solve``) keeps
:data:`RESOLVE_MARGIN` in every form.

The result is *the* max-min fair allocation (it is unique): no link carries
more than its capacity, and every flow crosses at least one saturated link on
which no other flow has a larger rate (its bottleneck).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["maxmin_rates", "maxmin_rates_global", "maxmin_small", "route_rate", "div", "IncrementalSolve", "REL_TOL",
           "RESOLVE_MARGIN"]

#: Links whose fair share is within this relative distance of the round's
#: minimum are saturated in the same round; it absorbs rounding so that equal
#: shares computed along different paths freeze together.
REL_TOL = 1e-12
#: An incremental re-solve re-solves every flow whose rate is at least the threshold times this: a
#: relative margin keeps flows whose rate equals the threshold up to rounding (FluidCore._solve).
RESOLVE_MARGIN = 1.0 - 1e-9
_MARGIN = 1.0 + REL_TOL
_INF = math.inf


def maxmin_rates(nz_flow: np.ndarray, nz_link: np.ndarray, n_flows: int, capacity: np.ndarray,
                 weight: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Return ``(rates, rounds)``: the max-min fair rate of each flow (bytes/s).

    ``weight`` (optional, per flow) is a multiplicity: a flow of weight m stands
    for m identical flows, each of which gets the returned rate.  A flow that
    crosses no link gets rate ``inf``.  Entries need not be sorted.
    """
    rate = np.full(n_flows, np.inf)
    if n_flows == 0 or len(nz_flow) == 0:
        return rate, 0
    lf, ll = np.asarray(nz_flow, dtype=np.int64), np.asarray(nz_link, dtype=np.int64)
    if (np.diff(lf) < 0).any():  # reduceat below needs each flow's entries contiguous
        order = np.argsort(lf, kind="stable")
        lf, ll = lf[order], ll[order]
    cap = np.asarray(capacity, dtype=float)
    if 2 * len(ll) < len(cap):
        # Work on the links actually crossed: every pass below is then O(entries).
        used, ll = np.unique(ll, return_inverse=True)
        cap = cap[used]
    cap = np.maximum(cap, 0.0)
    n_links = len(cap)
    first = np.flatnonzero(np.concatenate(([True], lf[1:] != lf[:-1])))
    fid = lf[first]                                   # flows still rising, in entry order
    cnt = np.diff(np.append(first, len(lf)))          # their entry counts
    lw = None if weight is None else np.asarray(weight, float)[lf]
    if len(fid) == len(lf):
        # Every flow crosses one link: each link is a local minimum, and its flows get its share
        # (the first round of the loop below, alone).
        load = np.bincount(ll, weights=lw, minlength=n_links)
        with np.errstate(divide="ignore", invalid="ignore"):
            rate[fid] = (cap / load)[ll]
        return rate, 1
    rounds = 0
    while len(fid):
        rounds += 1
        starts = np.cumsum(cnt) - cnt
        load = np.bincount(ll, weights=lw, minlength=n_links)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = cap / load
        es = share[ll]
        fmin = np.minimum.reduceat(es, starts)        # each flow's smallest share
        efmin = np.repeat(fmin, cnt)
        # A link is blocked when one of its flows crosses a link with a clearly smaller share;
        # every other link is a local minimum and saturates now, at its share.
        blocked = np.zeros(n_links, dtype=bool)
        blocked[ll[efmin * (1.0 + REL_TOL) < es]] = True
        hit = ~blocked[ll]
        frozen = np.logical_or.reduceat(hit, starts)
        rate[fid[frozen]] = fmin[frozen]
        took = np.repeat(frozen, cnt)
        used_w = efmin[took] if lw is None else efmin[took] * lw[took]
        cap = cap - np.bincount(ll[took], weights=used_w, minlength=n_links)
        cap[ll[hit]] = 0.0  # saturated: exact zero, whatever the rounding
        keep = ~took
        ll = ll[keep]
        if lw is not None:
            lw = lw[keep]
        fid, cnt = fid[~frozen], cnt[~frozen]
    return rate, rounds


class IncrementalSolve:
    """The incremental re-solve of max-min rates at an event, written once for every form of the core.

    After the flows ``gone`` left and ``enter`` began their bandwidth phase, only flows whose rate
    can change are re-solved.  Max-min fairness is progressive filling, and removing or adding a
    flow of (final) rate r does not change any freezing event below level r: every flow whose rate
    is below ``T`` = min(rate of each flow that left, a lower bound of each new flow's rate) keeps
    it.  The others are re-solved on the capacity those fixed flows leave, which gives their exact
    max-min rates because fixed flows already have their final rates (docs/engine.md, "Incremental
    re-solves").  The lower bound for a new flow is the smallest ``capacity / flows`` on its
    (pruned) route: a link's fair share never decreases while filling proceeds.  A relative margin
    (:data:`RESOLVE_MARGIN`) keeps flows whose rate equals ``T`` up to rounding in the re-solve, and
    every ``_refresh``-th solve re-solves every flow so that incremental load updates cannot
    accumulate rounding.

    Each form gives the four kernels, the same operations in its own containers: the numpy arrays
    (:class:`~simcomm.engine.fluid.core.FluidCore`), Python floats
    (:class:`~simcomm.engine.fluid.small.SmallFlows`, rates by :func:`maxmin_small`) and the lean
    closed form for disjoint routes (:class:`~simcomm.engine.fluid.lone.LoneFlows`, rates by
    :func:`route_rate`): the same floats bit for bit.
    """

    def resolve(self, now: float, gone: Any, enter: Any) -> None:
        """Re-solve after ``gone`` left and ``enter`` entered at ``now`` (slots of the form)."""
        threshold, left = self._rates_gone_entered(gone, enter)
        slots, full = self._resolve_set(threshold, enter)
        rates = self._new_rates(slots, full, left)
        if rates is not None:
            self._apply(slots, rates, now)

    def _rates_gone_entered(self, gone: Any, enter: Any) -> tuple[float, Any]:
        """``T``, and what the flows that left took per link; zeroes their rates and moves per-link counts."""
        raise NotImplementedError

    def _resolve_set(self, threshold: float, enter: Any) -> tuple[Any, bool]:
        """Count a solve; the slots to re-solve (rate >= T up to the margin, or new) and whether that is all."""
        raise NotImplementedError

    def _new_rates(self, slots: Any, full: bool, left: Any) -> Any:
        """The max-min rates of ``slots`` on the capacity the other flows leave (None: no slot), loads moved."""
        raise NotImplementedError

    def _apply(self, slots: Any, rates: Any, now: float) -> None:
        """Give ``slots`` their new ``rates`` from ``now`` (bytes left brought up to date first)."""
        raise NotImplementedError


def div(a: float, b: float) -> float:
    """``a / b`` as numpy computes it with errors ignored (a positive ``a`` here)."""
    if b == 0.0:
        return _INF if a > 0 else (math.nan if a == 0 or a != a else -_INF)
    return a / b


def route_rate(caps) -> float:
    """The max-min rate of a flow alone on its links (none crossed twice): the smallest capacity.

    :func:`maxmin_rates` of that one flow: every share is its link's capacity
    (``np.maximum(cap, 0)``) over one flow, and the smallest freezes it in the first
    round; a flow that crosses no link gets ``inf``.
    """
    v = min(caps, default=_INF)
    return v if not v < 0.0 else 0.0


def maxmin_small(entries, cap: dict) -> tuple[list[float], int]:
    """:func:`maxmin_rates` (no weights) in scalar floats: the same rounds, the same sums in the same order.

    ``entries[i]`` lists the links flow i crosses (in entry order); ``cap`` maps
    each link to its capacity.
    """
    n = len(entries)
    if n == 1 and len(set(entries[0])) == len(entries[0]):  # one flow crossing no link twice
        return [route_rate([cap[link] for link in entries[0]])], 1 if entries[0] else 0
    rate = [_INF] * n
    flows = [i for i in range(n) if entries[i]]
    if not flows:
        return rate, 0
    c = {}
    for ent in entries:
        for link in ent:
            if link not in c:
                v = cap[link]
                c[link] = v if not v < 0.0 else 0.0  # np.maximum(cap, 0.0)
    if all(len(entries[i]) == 1 for i in flows):
        # every flow crosses one link: maxmin_rates' one-round case
        load: dict = {}
        for i in flows:
            link = entries[i][0]
            load[link] = load.get(link, 0.0) + 1.0
        for i in flows:
            link = entries[i][0]
            rate[i] = div(c[link], load[link])
        return rate, 1
    rounds = 0
    while flows:  # maxmin_rates' rounds, per flow and per link in entry order
        rounds += 1
        load = {}
        for i in flows:
            for link in entries[i]:
                load[link] = load.get(link, 0.0) + 1.0
        share = {link: div(c[link], v) for link, v in load.items()}
        fmin = {i: min(share[link] for link in entries[i]) for i in flows}
        blocked = set()
        for i in flows:
            lim = fmin[i] * _MARGIN
            for link in entries[i]:
                if lim < share[link]:
                    blocked.add(link)
        took: dict = {}
        hit = []
        rest = []
        for i in flows:
            ent = entries[i]
            h = [link for link in ent if link not in blocked]
            if h:
                rate[i] = f = fmin[i]
                for link in ent:
                    took[link] = took.get(link, 0.0) + f
                hit.extend(h)
            else:
                rest.append(i)
        for link, v in took.items():
            c[link] = c[link] - v
        for link in hit:
            c[link] = 0.0
        flows = rest
    return rate, rounds


def maxmin_rates_global(nz_flow: np.ndarray, nz_link: np.ndarray, n_flows: int, capacity: np.ndarray,
                 weight: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Reference solver (one global level per round); same contract as :func:`maxmin_rates`.

    ``weight`` (optional, per flow) is a multiplicity: a flow of weight m stands
    for m identical flows, each of which gets the returned rate.  A flow that
    crosses no link gets rate ``inf``.
    """
    n_links = len(capacity)
    rate = np.full(n_flows, np.inf)
    if n_flows == 0:
        return rate, 0
    w_nz = np.ones(len(nz_flow)) if weight is None else np.asarray(weight, float)[nz_flow]
    cap = np.array(capacity, dtype=float)
    live = np.ones(len(nz_flow), dtype=bool)
    frozen = np.zeros(n_flows, dtype=bool)
    rounds = 0
    while True:
        lf, ll, lw = nz_flow[live], nz_link[live], w_nz[live]
        if lf.size == 0:
            break
        rounds += 1
        load = np.bincount(ll, weights=lw, minlength=n_links)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(load > 0, np.maximum(cap, 0.0) / load, np.inf)
        level = share[ll].min()
        full = share <= level * (1.0 + REL_TOL)
        hit = np.unique(lf[full[ll]])
        rate[hit] = level
        frozen[hit] = True
        # Every entry of a newly frozen flow consumes `level` on its link.
        took = frozen[lf]
        cap -= np.bincount(ll[took], weights=lw[took] * level, minlength=n_links)
        cap[full] = 0.0  # saturated: exact zero, whatever the rounding
        live[live] = ~took
    return rate, rounds
