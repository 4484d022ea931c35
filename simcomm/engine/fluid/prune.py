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

__all__ = ["route_matrix", "link_rank"]


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
    codes = []
    for d in range(1, int(e_len.max())):
        same = owner[d:] == owner[:-d]
        a, b = e_link[:-d][same], e_link[d:][same]
        a, b = a[a != b], b[a != b]  # a route crossing a link twice must not dominate it by itself
        lo = rank[b] < rank[a]
        # Pair (x, y): x is crossed together with the lower-ranked y.
        codes.append(np.where(lo, a, b) * n_links + np.where(lo, b, a))
    dominated = np.zeros(n_links, dtype=bool)
    if codes:
        pairs, together = np.unique(np.concatenate(codes), return_counts=True)
        x = pairs // n_links
        dominated[x[together == count[x]]] = True
    keep = ~dominated[e_link]
    kept_len = np.bincount(owner[keep], minlength=n)
    width = max(int(kept_len.max()), 1)
    rows = np.full((n, width), n_links, dtype=np.int64)
    k_owner = owner[keep]
    col = np.arange(int(keep.sum())) - np.repeat(np.cumsum(kept_len) - kept_len, kept_len)
    rows[k_owner, col] = e_link[keep]
    return rows
