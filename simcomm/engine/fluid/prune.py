"""Dominated-link pruning: the links each flow's max-min rate must respect.

The incremental fluid core (:mod:`simcomm.engine.fluid.core`) solves max-min on a
*route matrix*: row i lists the links flow i must respect, padded with a
dummy index ``n_links`` to a common width (the matrix keeps per-link
bookkeeping to one ``bincount`` per update).  Every solve round costs time
proportional to the entries, so links that can never be a bottleneck are
left out.

**Dominated links are dropped from the rows.**  Link ``a`` is dominated by
link ``b`` when every flow crossing ``a`` also crosses ``b`` and ``b`` is
tighter (``C_b < C_a``, or equal capacity and smaller id).  Dropping ``a`` does
not change the max-min allocation: any allocation feasible without ``a``
loads ``a`` with at most the load of ``b``, hence at most ``C_b <= C_a``, and the
bottleneck of every flow is still a link of the full problem, so the reduced
problem's (unique) max-min allocation is the full problem's.  Chains of
dominance end at a kept link, so all dominated links can go at once.  This
holds for any subset of the flows it was computed on, so the pruning is
computed when flows are added and stays valid while they leave.  On a node
whose PCIe attach (31.5 GB/s) feeds an HDR NIC (25 GB/s), the PCIe hops go
(8 -> 6 links on an inter-leaf route of ``dgx-a100-hdr``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["route_matrix", "link_rank", "KeptRouteMatrix"]


def link_rank(capacity: np.ndarray) -> np.ndarray:
    """Rank of every link by (capacity, id): a link can only be dominated by a lower-ranked one.

    It depends on the capacities alone (a sort of every link of the network), so
    a caller that prunes many times on one network computes it once and passes
    it to :func:`route_matrix`.
    """
    n_links = len(capacity)
    order = np.lexsort((np.arange(n_links), capacity))
    rank = np.empty(n_links, dtype=np.int64)
    rank[order] = np.arange(n_links)
    return rank


def route_matrix(capacity: np.ndarray, e_link: np.ndarray, e_len: np.ndarray,
                 rank: np.ndarray | None = None) -> np.ndarray:
    """Rows of non-dominated links per flow (routes concatenated in ``e_link``), padded with ``len(capacity)``.

    ``rank`` is :func:`link_rank` of ``capacity`` (computed here when not given).
    """
    n_links = len(capacity)
    n = len(e_len)
    if n == 0 or len(e_link) == 0:
        return np.full((n, 1), n_links, dtype=np.int64)
    if rank is None:
        rank = link_rank(capacity)
    if n == 1:
        route = e_link.tolist()
        if len(set(route)) == len(route):
            # One route that crosses no link twice: every link but its lowest-ranked is dominated.
            return np.array([[min(route, key=rank.__getitem__)]], dtype=np.int64)
    owner = np.repeat(np.arange(n), e_len)
    count = np.bincount(e_link, minlength=n_links)
    codes = _pair_codes(e_link, e_len, owner, rank, n_links)
    dominated = np.zeros(n_links, dtype=bool)
    if len(codes):
        pairs, together = np.unique(codes, return_counts=True)
        x = pairs // n_links
        dominated[x[together == count[x]]] = True
    return _rows(e_link, owner, n, n_links, dominated)


def _pair_codes(e_link: np.ndarray, e_len: np.ndarray, owner: np.ndarray, rank: np.ndarray,
                n_links: int) -> np.ndarray:
    """``x * n_links + y`` for every two distinct links x, y of one route where y ranks lower (a multiset)."""
    codes = []
    for d in range(1, int(e_len.max()) if len(e_len) else 0):
        same = owner[d:] == owner[:-d]
        a, b = e_link[:-d][same], e_link[d:][same]
        a, b = a[a != b], b[a != b]  # a route crossing a link twice must not dominate it by itself
        lo = rank[b] < rank[a]
        # Pair (x, y): x is crossed together with the lower-ranked y.
        codes.append(np.where(lo, a, b) * n_links + np.where(lo, b, a))
    return np.concatenate(codes) if codes else np.zeros(0, dtype=np.int64)


def _rows(e_link: np.ndarray, owner: np.ndarray, n: int, n_links: int, dominated: np.ndarray) -> np.ndarray:
    """The routes' links that are not ``dominated``, one row per flow, padded with ``n_links``."""
    keep = ~dominated[e_link]
    kept_len = np.bincount(owner[keep], minlength=n)
    width = max(int(kept_len.max()), 1)
    rows = np.full((n, width), n_links, dtype=np.int64)
    k_owner = owner[keep]
    col = np.arange(int(keep.sum())) - np.repeat(np.cumsum(kept_len) - kept_len, kept_len)
    rows[k_owner, col] = e_link[keep]
    return rows


class KeptRouteMatrix:
    """:func:`route_matrix` of a fluid core's slots, its pair counts kept from one merge to the next.

    A merge appends flows to the core's slots and :func:`route_matrix` was computed anew over every slot, those
    finished but not yet compacted away too (2-3 times the live flows in a gossip run): its sort of every pair
    of links crossed together was a fifth of ``sgp``'s runs at 256-1 024 nodes.  Which links are dominated
    depends on the multiset of those pairs and on the crossings per link, both sums over the slots, so the
    counts of the slots already covered are kept and the new flows' added (their pairs alone sorted, then
    merged with the kept distinct pairs); the dominated links, and so the rows, are the same arrays
    :func:`route_matrix` gives over every slot.  The cover is known by the identity of the concatenated
    routes it was computed on (``FluidCore.e_link``: a new array at every merge, compaction or change of form,
    never written in place); any other array starts the counts afresh.
    """

    def __init__(self) -> None:
        self._links: np.ndarray | None = None  # the concatenated routes the counts cover
        self._n = 0  # slots covered
        self._count: np.ndarray | None = None  # crossings per link
        self._pairs = np.zeros(0, dtype=np.int64)  # distinct pair codes (_pair_codes), increasing
        self._together = np.zeros(0, dtype=np.int64)  # how often each was counted
        self._dominated: np.ndarray | None = None  # the links dominated over the covered slots
        self._rows = np.zeros((0, 1), dtype=np.int64)  # their route matrix (not written to by the core)

    def rows(self, capacity: np.ndarray, prev: np.ndarray, e_link: np.ndarray, e_len: np.ndarray,
             rank: np.ndarray) -> np.ndarray:
        """:func:`route_matrix` of ``(capacity, e_link, e_len, rank)``, where ``prev`` is the core's
        concatenated routes before the merge (``e_link`` starts with them)."""
        n_links, n = len(capacity), len(e_len)
        if n <= 1 or len(e_link) == 0:
            self._links = None
            return route_matrix(capacity, e_link, e_len, rank)
        if prev is not self._links or self._count is None:  # not the cover kept: every slot is new
            prev_n, prev_e = 0, 0
            self._count = np.zeros(n_links, dtype=np.int64)
            self._pairs = self._together = np.zeros(0, dtype=np.int64)
        else:
            prev_n, prev_e = self._n, len(prev)
        new_links, new_len = e_link[prev_e:], e_len[prev_n:]
        touched, added = np.unique(new_links, return_counts=True)  # the links of the new flows (the only ones
        before = self._count[touched]  # whose crossings or pairs change), and their crossings before
        self._count[touched] += added
        codes = _pair_codes(new_links, new_len, np.repeat(np.arange(n - prev_n), new_len), rank, n_links)
        if len(codes):
            pairs, together = np.unique(codes, return_counts=True)
            if len(self._pairs):  # two increasing runs: a stable sort merges them, equal codes' counts summed
                both = np.concatenate((self._pairs, pairs))
                order = np.argsort(both, kind="stable")
                both, counts = both[order], np.concatenate((self._together, together))[order]
                first = np.empty(len(both), dtype=bool)
                first[0] = True
                np.not_equal(both[1:], both[:-1], out=first[1:])
                pairs, together = both[first], np.add.reduceat(counts, np.flatnonzero(first))
            self._pairs, self._together = pairs, together
        self._links, self._n = e_link, n
        last = self._dominated
        if prev_n and last is not None:
            # only a link of the new flows can change (a pair (x, y) counted anew has x on a new route): each one's
            # pairs (x, y), a range of the increasing codes, are tested again, every other link's verdict kept
            dominated = last.copy()
            lo = np.searchsorted(self._pairs, touched * n_links)
            span = np.searchsorted(self._pairs, (touched + 1) * n_links) - lo
            at = np.arange(int(span.sum())) + np.repeat(lo - (np.cumsum(span) - span), span)
            hit = self._together[at] == np.repeat(self._count[touched], span)
            dominated[touched] = np.bincount(np.repeat(np.arange(len(touched)), span)[hit],
                                             minlength=len(touched)) > 0
            # no link of the covered slots changed: their rows stand
            stand = not ((dominated[touched] != last[touched]) & (before > 0)).any()
        else:
            dominated = np.zeros(n_links, dtype=bool)
            if len(self._pairs):
                x = self._pairs // n_links
                dominated[x[self._together == self._count[x]]] = True
            stand = False
        self._dominated = dominated
        if stand:
            # the new slots' rows go below the covered ones' (each block padded to the wider of the two, as one
            # matrix over every slot is padded)
            below = _rows(new_links, np.repeat(np.arange(n - prev_n), new_len), n - prev_n, n_links, dominated)
            above = self._rows
            width = max(above.shape[1], below.shape[1])
            rows = np.full((n, width), n_links, dtype=np.int64)
            rows[:prev_n, :above.shape[1]] = above
            rows[prev_n:, :below.shape[1]] = below
        else:
            rows = _rows(e_link, np.repeat(np.arange(n), e_len), n, n_links, dominated)
        self._rows = rows
        return rows
