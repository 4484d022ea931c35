"""Max-min fair bandwidth shares by progressive filling, vectorised with numpy.

Flows and links are joined by an incidence list in coordinate form: entry
``k`` says that flow ``nz_flow[k]`` crosses directed link ``nz_link[k]``.
Progressive filling raises every unfrozen flow's rate together; the first
links to fill up freeze the flows crossing them at the current level, their
capacity is used up, and the rest keep rising.  Each round is a handful of
``bincount`` calls over the incidence list, so the cost is
O(rounds x (entries + links)) with no per-flow Python loop; the number of rounds
is the number of distinct rate levels, which is small for regular traffic.

The result is *the* max-min fair allocation (it is unique): no link carries
more than its capacity, and every flow crosses at least one saturated link on
which no other flow has a larger rate (its bottleneck).
"""

from __future__ import annotations

import numpy as np

__all__ = ["maxmin_rates", "REL_TOL"]

#: Links whose fair share is within this relative distance of the round's
#: minimum are saturated in the same round; it absorbs rounding so that equal
#: shares computed along different paths freeze together.
REL_TOL = 1e-12


def maxmin_rates(nz_flow: np.ndarray, nz_link: np.ndarray, n_flows: int, capacity: np.ndarray,
                 weight: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Return ``(rates, rounds)``: the max-min fair rate of each flow (bytes/s).

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
