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

The result is *the* max-min fair allocation (it is unique): no link carries
more than its capacity, and every flow crosses at least one saturated link on
which no other flow has a larger rate (its bottleneck).
"""

from __future__ import annotations

import numpy as np

__all__ = ["maxmin_rates", "maxmin_rates_global", "REL_TOL"]

#: Links whose fair share is within this relative distance of the round's
#: minimum are saturated in the same round; it absorbs rounding so that equal
#: shares computed along different paths freeze together.
REL_TOL = 1e-12


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
